//! `[state]`: where toolrouter keeps what it builds and learns, and the
//! directory used when none is configured. The section has no checks
//! beyond its types.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::load::xdg_dir;

/// `[state]`: where toolrouter keeps what it builds and learns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StateConfig {
    /// Empty: `$XDG_STATE_HOME/toolrouter`, else `~/.local/state/toolrouter`.
    pub dir: PathBuf,
}

impl StateConfig {
    /// The state directory in effect.
    pub fn dir(&self) -> PathBuf {
        if !self.dir.as_os_str().is_empty() {
            return self.dir.clone();
        }
        xdg_dir("XDG_STATE_HOME", ".local/state").join("toolrouter")
    }
}
