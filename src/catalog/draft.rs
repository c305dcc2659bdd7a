//! What a source file's parse makes: tools and APIs as drafted, before the
//! loader gives them ids and function names, and what the parse noted
//! (skipped entries, adjusted parameters) for the load report. The parsers
//! (`toolbench`, `openapi`) write drafts; the loader (`loader`) and a
//! reload's shortcut (`reuse`) read them.

use super::{Method, Origin, Param, Score};

/// A tool as parsed, before ids and function names are assigned.
#[derive(Debug)]
pub(crate) struct ToolDraft {
    pub name: String,
    pub std_name: String,
    pub category: String,
    pub description: String,
    pub host: Option<String>,
    pub score: Option<Score>,
    pub origin: Origin,
    pub apis: Vec<ApiDraft>,
}

/// An API as parsed, before ids and function names are assigned.
#[derive(Debug)]
pub(crate) struct ApiDraft {
    pub name: String,
    /// Standardized API name (ToolBench rules), the first half of the function name.
    pub std_name: String,
    pub description: String,
    pub method: Method,
    pub url_template: Option<String>,
    pub params: Vec<Param>,
}

/// Findings of one file's parse, merged into the load report.
#[derive(Debug, Clone, Default)]
pub(crate) struct Notes {
    pub skipped_apis: Vec<String>,
    pub skipped_lines: Vec<(usize, String)>,
    pub defaults_dropped: Vec<String>,
    pub duplicate_params: usize,
    pub renamed_params: usize,
    pub synthesized_path_params: usize,
    pub path_params_made_required: usize,
}

impl Notes {
    pub fn is_empty(&self) -> bool {
        self.skipped_apis.is_empty()
            && self.skipped_lines.is_empty()
            && self.defaults_dropped.is_empty()
            && self.duplicate_params
                + self.renamed_params
                + self.synthesized_path_params
                + self.path_params_made_required
                == 0
    }

    pub fn skip_api(&mut self, reason: String) {
        self.skipped_apis.push(reason);
    }

    pub fn drop_default(&mut self, reason: String) {
        self.defaults_dropped.push(reason);
    }
}
