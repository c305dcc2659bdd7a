//! `[compress]`: responses shortened for a model, with its default and check.

use serde::{Deserialize, Serialize};

/// `compress.budget`: characters of a compressed response (docs/architecture.md §8).
pub const DEFAULT_COMPRESS_BUDGET: usize = 1024;

/// `[compress]`: responses shortened for an LLM (docs/architecture.md §8).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompressConfig {
    /// Characters of a compressed response; smaller responses pass unchanged.
    pub budget: usize,
}

impl Default for CompressConfig {
    fn default() -> Self {
        CompressConfig { budget: DEFAULT_COMPRESS_BUDGET }
    }
}

impl CompressConfig {
    /// The budget is at least 64 characters, as (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        if self.budget < 64 {
            return Err(("compress.budget".into(), format!("must be at least 64 characters, got {}", self.budget)));
        }
        Ok(())
    }
}
