//! The tools each server listed last, kept in the state directory
//! (`<state>/downstream/<server>.json`, written whole and renamed into
//! place), so that after a restart with a server down its tools are still
//! in the catalog and answer "unavailable" rather than "unknown".

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::catalog::McpServerTools;

fn path(state_dir: &Path, server: &str) -> PathBuf {
    state_dir.join("downstream").join(format!("{server}.json"))
}

/// The tools `server` listed last, if they were kept (an unreadable file is
/// ignored, with a warning: the server lists them again when it is up).
pub(super) fn load(state_dir: &Path, server: &str) -> Option<McpServerTools> {
    let path = path(state_dir, server);
    let text = std::fs::read_to_string(&path).ok()?;
    match serde_json::from_str(&text) {
        Ok(tools) => Some(tools),
        Err(e) => {
            tracing::warn!(file = %path.display(), "ignoring the kept tools of a downstream MCP server: {e}");
            None
        }
    }
}

/// Keeps `tools` for the next start; a failure is logged, not fatal.
pub(super) fn save(state_dir: &Path, tools: &McpServerTools) {
    let path = path(state_dir, &tools.server);
    let written = (|| -> std::io::Result<()> {
        let dir = path.parent().expect("a file in a directory");
        std::fs::create_dir_all(dir)?;
        let mut file = tempfile::NamedTempFile::new_in(dir)?;
        file.write_all(serde_json::to_string(tools).unwrap_or_default().as_bytes())?;
        file.as_file().sync_all()?;
        file.persist(&path).map_err(|e| e.error)?;
        Ok(())
    })();
    if let Err(e) = written {
        tracing::warn!(file = %path.display(), "the tools of a downstream MCP server could not be kept: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::McpTool;

    #[test]
    fn kept_tools_read_back_and_damage_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path(), "time").is_none());
        let tool = McpTool {
            name: "now".into(),
            title: None,
            description: "the time".into(),
            input_schema: serde_json::json!({"type": "object"}),
            annotations: None,
        };
        let tools = McpServerTools { server: "time".into(), description: "clock".into(), tools: vec![tool] };
        save(dir.path(), &tools);
        assert_eq!(load(dir.path(), "time"), Some(tools));
        std::fs::write(path(dir.path(), "time"), "{not json").unwrap();
        assert!(load(dir.path(), "time").is_none());
    }
}
