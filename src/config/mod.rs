//! Configuration: `config/toolrouter.toml` plus `TOOLROUTER_*` environment
//! overrides, validated at start.
//!
//! The file has sections of keys (`[catalog] paths = [...]`). Every key can
//! be overridden by the environment variable `TOOLROUTER_<SECTION>_<KEY>`
//! (upper case: `TOOLROUTER_ARGS_STRICT=false`); list keys take a TOML
//! array or a comma-separated list. Relative paths in the file are relative
//! to the file's directory; in the environment, to the working directory.
//! Every key has a default (the `DEFAULT_*` constants and the shipped
//! `config/toolrouter.toml`, which a test keeps identical), so no file is
//! needed.
//!
//! Secrets never live in the file: the RapidAPI key comes from
//! `TOOLROUTER_UPSTREAM_RAPIDAPI_KEY` or the file named by
//! `upstream.rapidapi_key_file`, and is never printed. Errors name the key
//! and where its value came from.
//!
//! This file holds [`Config`], [`ConfigError`], [`ValueSource`] and the
//! validation that runs each section's checks (and the one check across
//! sections). Each section lives in its own file with its `DEFAULT_*`
//! constants and its checks:
//!
//! - `catalog.rs`: `[catalog]`
//! - `mcp_servers.rs`: `[[catalog.mcp_servers]]`
//! - `args.rs`: `[args]`
//! - `upstream.rs`: `[upstream]`
//! - `credentials.rs`: `[[upstream.credentials]]`
//! - `compress.rs`: `[compress]`
//! - `state.rs`: `[state]`
//! - `embedding.rs`: `[embedding]` (and [`models_dir`])
//! - `retrieval.rs`: `[retrieval]`
//! - `graph.rs`: `[graph]`
//! - `planner.rs`: `[planner]`
//! - `server.rs`: `[server]`
//! - `mcp.rs`: `[mcp]`
//! - `openai.rs`: `[openai]`
//! - `llm.rs`: `[llm]`
//! - `log.rs`: `[log]`
//! - `cluster.rs`: `[cluster]`
//! - `telemetry.rs`: `[telemetry]`
//! - `access.rs`: `[access]` (policies: who may use which tools)
//!
//! `load.rs` reads the file and applies the environment; `secret.rs` holds
//! [`Secret`] and reads the API keys; `diff.rs` names the keys two
//! configurations differ in (a reload's).

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

mod access;
mod args;
mod catalog;
mod cluster;
mod compress;
mod credentials;
mod diff;
mod embedding;
mod graph;
mod llm;
mod load;
mod log;
mod mcp;
mod mcp_servers;
mod oauth;
mod openai;
mod planner;
mod retrieval;
mod secret;
mod server;
mod state;
mod telemetry;
mod upstream;
pub use access::*;
pub use args::*;
pub use catalog::*;
pub use cluster::*;
pub use compress::*;
pub use credentials::*;
pub use embedding::*;
pub use graph::*;
pub use llm::*;
pub use load::*;
pub use log::*;
pub use mcp::*;
pub use mcp_servers::*;
pub use oauth::*;
pub use openai::*;
pub use planner::*;
pub use retrieval::*;
pub use secret::*;
pub use server::*;
pub use state::*;
pub use telemetry::*;
pub use upstream::*;

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub catalog: CatalogConfig,
    pub args: ArgsConfig,
    pub upstream: UpstreamConfig,
    pub compress: CompressConfig,
    pub state: StateConfig,
    pub embedding: EmbeddingConfig,
    pub retrieval: RetrievalConfig,
    pub graph: GraphConfig,
    pub planner: PlannerConfig,
    pub server: ServerConfig,
    pub mcp: McpConfig,
    pub openai: OpenAiConfig,
    pub llm: LlmConfig,
    pub log: LogConfig,
    pub cluster: ClusterConfig,
    pub telemetry: TelemetryConfig,
    pub access: AccessConfig,
}

/// Where a config value came from (the file, the environment or the
/// default), for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueSource {
    File(PathBuf),
    Env(String),
    /// Neither: the built-in default.
    Default,
}

impl fmt::Display for ValueSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueSource::File(p) => write!(f, "in {}", p.display()),
            ValueSource::Env(var) => write!(f, "set by {var}"),
            ValueSource::Default => f.write_str("its default"),
        }
    }
}

/// A configuration that cannot be used. The CLI exits with code 2.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {} is not valid TOML: {message}", path.display())]
    Syntax { path: PathBuf, message: String },
    #[error("config key `{key}` ({origin}): {message}")]
    Key { key: String, origin: ValueSource, message: String },
}

impl Config {
    /// Checks what types alone cannot: paths exist, filters parse, hosts are
    /// well-formed. Each section checks its own keys, in the order the
    /// sections are declared above; the first problem found is reported.
    fn validate(&self, origin_of: &dyn Fn(&str) -> ValueSource) -> Result<(), ConfigError> {
        let fail =
            |key: &str, message: String| ConfigError::Key { key: key.to_string(), origin: origin_of(key), message };
        self.catalog
            .validate()
            .and_then(|()| self.upstream.validate())
            .and_then(|()| self.compress.validate())
            .and_then(|()| self.embedding.validate())
            .and_then(|()| self.retrieval.validate())
            .and_then(|()| self.graph.validate())
            .and_then(|()| self.planner.validate())
            .and_then(|()| self.server.validate())
            .and_then(|()| self.mcp.validate())
            .and_then(|()| self.openai.validate())
            .and_then(|()| self.llm.validate())
            .and_then(|()| self.log.validate())
            .and_then(|()| self.cluster.validate())
            .and_then(|()| self.telemetry.validate())
            .and_then(|()| {
                let accepted: Vec<String> =
                    self.server.api_key_hashes.iter().chain(&self.server.admin_key_hashes).cloned().collect();
                self.access.validate(&accepted, self.server.oauth.enabled())
            })
            .map_err(|(key, message)| fail(&key, message))?;
        // Across sections: the stdio face's policy is one of the policies.
        let stdio = &self.mcp.stdio_policy;
        if !stdio.is_empty() && !self.access.policies.iter().any(|p| &p.name == stdio) {
            return Err(fail("mcp.stdio_policy", format!("{stdio:?} is not the name of any [[access.policies]]")));
        }
        // Across sections: an execute run must end before its request times out.
        if self.openai.execute_deadline_ms == 0 || self.openai.execute_deadline_ms >= self.server.request_timeout_ms {
            return Err(fail(
                "openai.execute_deadline_ms",
                format!(
                    "must be above 0 and below server.request_timeout_ms ({}), got {}",
                    self.server.request_timeout_ms, self.openai.execute_deadline_ms
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
