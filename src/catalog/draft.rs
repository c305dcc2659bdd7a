//! What a source file's parse makes: tools and APIs as drafted, before the
//! loader gives them ids and function names, and what the parse noted
//! (skipped entries, adjusted parameters) for the load report. The parsers
//! (`toolbench`, `openapi`) write drafts; the loader (`loader`) and a
//! reload's shortcut (`reuse`) read them.

use super::{Method, Origin, Param, Score};

/// A tool as parsed, before ids and function names are assigned.
#[derive(Debug)]
pub(crate) struct ToolDraft {
    pub(crate) name: String,
    pub(crate) std_name: String,
    pub(crate) category: String,
    pub(crate) description: String,
    pub(crate) host: Option<String>,
    pub(crate) score: Option<Score>,
    pub(crate) origin: Origin,
    pub(crate) apis: Vec<ApiDraft>,
}

/// An API as parsed, before ids and function names are assigned.
#[derive(Debug)]
pub(crate) struct ApiDraft {
    pub(crate) name: String,
    /// Standardized API name (ToolBench rules), the first half of the function name.
    pub(crate) std_name: String,
    pub(crate) description: String,
    pub(crate) method: Method,
    pub(crate) url_template: Option<String>,
    pub(crate) params: Vec<Param>,
}

/// Findings of one file's parse, merged into the load report.
#[derive(Debug, Clone, Default)]
pub(crate) struct Notes {
    pub(crate) skipped_apis: Vec<String>,
    pub(crate) skipped_lines: Vec<(usize, String)>,
    pub(crate) defaults_dropped: Vec<String>,
    pub(crate) duplicate_params: usize,
    pub(crate) renamed_params: usize,
    pub(crate) synthesized_path_params: usize,
    pub(crate) path_params_made_required: usize,
}

impl Notes {
    pub(crate) fn is_empty(&self) -> bool {
        self.skipped_apis.is_empty()
            && self.skipped_lines.is_empty()
            && self.defaults_dropped.is_empty()
            && self.duplicate_params
                + self.renamed_params
                + self.synthesized_path_params
                + self.path_params_made_required
                == 0
    }

    pub(crate) fn skip_api(&mut self, reason: String) {
        self.skipped_apis.push(reason);
    }

    pub(crate) fn drop_default(&mut self, reason: String) {
        self.defaults_dropped.push(reason);
    }
}
