//! `[log]`: diagnostics on stderr, with the section's default and the
//! check that the level is a `tracing` filter.

use serde::{Deserialize, Serialize};

/// Default log filter (`log.level`): a level or a `tracing` filter directive.
pub const DEFAULT_LOG_LEVEL: &str = "info";

/// `[log]`: diagnostics on stderr.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    pub level: String,
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig { level: DEFAULT_LOG_LEVEL.to_string(), format: LogFormat::Text }
    }
}

impl LogConfig {
    /// `level` parses as a level or filter, as (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        tracing_subscriber::EnvFilter::try_new(&self.level)
            .map_err(|e| ("log.level".to_string(), format!("{:?} is not a level or filter: {e}", self.level)))?;
        Ok(())
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}
