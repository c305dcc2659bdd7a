//! `[catalog]`: where APIs come from, and the check that the configured
//! sources exist.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::McpServerConfig;

/// `[catalog]`: where APIs come from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CatalogConfig {
    /// ToolBench tool directories, JSONL files, OpenAPI specs or directories
    /// of them. Empty: the embedded example catalog.
    pub paths: Vec<PathBuf>,
    /// Add the embedded examples to a configured catalog too.
    pub include_embedded: bool,
    /// ToolBench query files whose `api_list` adds tools that have no tool file.
    pub query_files: Vec<PathBuf>,
    /// The user's own MCP servers, whose tools join the catalog.
    pub mcp_servers: Vec<McpServerConfig>,
}

impl CatalogConfig {
    /// Every path exists and every query file is a file, as (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        for (key, paths) in [("catalog.paths", &self.paths), ("catalog.query_files", &self.query_files)] {
            for (i, p) in paths.iter().enumerate() {
                if !p.exists() {
                    return Err((format!("{key}[{i}]"), format!("{} does not exist", p.display())));
                }
            }
        }
        for (i, p) in self.query_files.iter().enumerate() {
            if !p.is_file() {
                return Err((format!("catalog.query_files[{i}]"), format!("{} is not a file", p.display())));
            }
        }
        super::mcp_servers::validate(&self.mcp_servers)
    }
}
