//! `[mcp]`: the MCP face, with its defaults and checks.

use serde::{Deserialize, Serialize};

/// `mcp.max_session_tools`: dynamic tools a session keeps (least recently used evicted).
pub const DEFAULT_MAX_SESSION_TOOLS: usize = 64;
/// `mcp.page_size`: tools per `tools/list` page.
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// `mcp.session_idle_s`: an HTTP session idle this long is closed (and its run recorded).
pub const DEFAULT_SESSION_IDLE_S: u64 = 300;

/// `[mcp]`: the MCP face.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    pub max_session_tools: usize,
    pub page_size: usize,
    pub session_idle_s: u64,
    /// The `[[access.policies]]` entry (by name) that governs `toolrouter
    /// mcp` over stdio, which carries no key. Empty: every tool.
    pub stdio_policy: String,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            max_session_tools: DEFAULT_MAX_SESSION_TOOLS,
            page_size: DEFAULT_PAGE_SIZE,
            session_idle_s: DEFAULT_SESSION_IDLE_S,
            stdio_policy: String::new(),
        }
    }
}

impl McpConfig {
    /// The limits are at least 1, as (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        for (key, n) in [("mcp.max_session_tools", self.max_session_tools), ("mcp.page_size", self.page_size)] {
            if n == 0 {
                return Err((key.to_string(), "must be at least 1".to_string()));
            }
        }
        Ok(())
    }
}
