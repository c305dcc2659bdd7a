//! A reload's shortcut: the tools of every source file not written since
//! the catalog in use read it are taken from that catalog instead of being
//! read and parsed again. The catalog comes out as a fresh load would make
//! it (same ids, function names and report): a reused file's tools go in
//! at its place in the sorted order, with what reading it noted.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use super::draft::{ApiDraft, Notes, ToolDraft};
use super::names::standardize_member;
use super::stamp::FileStamp;
use super::{Catalog, ToolId};

/// The catalog in use, looked up by source file.
pub(super) struct Previous<'a> {
    catalog: &'a Catalog,
    stamps: HashMap<&'a Path, FileStamp>,
    tools: HashMap<&'a Path, Vec<ToolId>>,
    /// Each tool's APIs (a tool's APIs are contiguous, in load order).
    apis: Vec<Range<usize>>,
}

impl<'a> Previous<'a> {
    pub(super) fn of(catalog: &'a Catalog) -> Previous<'a> {
        let stamps = catalog.stamp.files().filter_map(|(path, stamp)| Some((path, stamp?))).collect();
        let mut tools: HashMap<&Path, Vec<ToolId>> = HashMap::new();
        for tool in catalog.tools() {
            tools.entry(tool.source.as_path()).or_default().push(tool.id);
        }
        let mut apis = vec![0..0; catalog.tools().len()];
        for (i, api) in catalog.apis().iter().enumerate() {
            let range = &mut apis[api.tool.0 as usize];
            if range.end == 0 {
                range.start = i;
            }
            range.end = i + 1;
        }
        Previous { catalog, stamps, tools, apis }
    }

    /// The tools it read from `path` and what reading it noted, if the
    /// file is as it was then (`now`) and gave tools (a file that was
    /// skipped is read again).
    pub(super) fn reuse(&self, path: &Path, now: Option<FileStamp>) -> Option<(Vec<ToolDraft>, Notes)> {
        if now.is_none() || self.stamps.get(path).copied() != now {
            return None;
        }
        let tools = self.tools.get(path)?;
        let drafts = tools.iter().map(|&id| self.draft(id)).collect();
        Some((drafts, self.catalog.notes.get(path).cloned().unwrap_or_default()))
    }

    /// A tool as its file's parse drafted it.
    fn draft(&self, id: ToolId) -> ToolDraft {
        let tool = self.catalog.tool(id);
        let apis = self.catalog.apis()[self.apis[id.0 as usize].clone()]
            .iter()
            .map(|api| ApiDraft {
                name: api.name.clone(),
                // As every parser derives it.
                std_name: standardize_member(&api.name),
                description: api.description.clone(),
                method: api.method,
                url_template: api.url_template.clone(),
                params: api.params.clone(),
            })
            .collect();
        ToolDraft {
            name: tool.name.clone(),
            std_name: tool.std_name.clone(),
            category: tool.category.clone(),
            description: tool.description.clone(),
            host: tool.host.clone(),
            score: tool.score.clone(),
            origin: tool.origin,
            apis,
        }
    }
}
