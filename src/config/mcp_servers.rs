//! `[[catalog.mcp_servers]]`: the user's own MCP servers, whose tools join
//! the catalog (the `downstream` module connects to them), and the checks
//! on them.
//!
//! A server is started over stdio (`command`, `args`, `env`, `cwd`) or
//! reached over streamable HTTP (`url`, `headers`). Secrets never live in
//! the file: a stdio server gets them through `pass_env` (variables of
//! toolrouter's own environment), an HTTP server through `secret_headers`
//! (each read from an environment variable or a file).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Secret;

/// Longest server name: `<name>__<tool>` must leave room for the tool's
/// name in a 64-character function name.
pub const MAX_SERVER_NAME: usize = 24;
/// Default time limit of one call to a downstream tool.
pub const DEFAULT_MCP_CALL_TIMEOUT_MS: u64 = 30_000;
/// Default time limit of connecting to a server and listing its tools.
pub const DEFAULT_MCP_CONNECT_TIMEOUT_MS: u64 = 20_000;

/// One downstream MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpServerConfig {
    /// The namespace of its tools: `time` makes `get_current_time` the
    /// function `time__get_current_time`. Letters, digits, `_` and `-`; unique.
    pub name: String,
    /// stdio: the program to start (looked up on `PATH`).
    pub command: String,
    pub args: Vec<String>,
    /// Variables set for the program (not secrets: the file is not a safe place).
    pub env: BTreeMap<String, String>,
    /// Variables passed from toolrouter's own environment (tokens, keys).
    pub pass_env: Vec<String>,
    /// The program's working directory (empty: toolrouter's).
    pub cwd: PathBuf,
    /// Streamable HTTP: the server's endpoint (`http://host:port/mcp`).
    pub url: String,
    /// Headers sent with every request (not secrets).
    pub headers: BTreeMap<String, String>,
    /// Headers whose values are secrets, each from an environment variable
    /// or a file: `Authorization = { env = "GITHUB_TOKEN", prefix = "Bearer " }`.
    pub secret_headers: BTreeMap<String, SecretRef>,
    /// Time limit of one call, in milliseconds (the call is then cancelled downstream).
    pub timeout_ms: u64,
    /// Time limit of connecting and listing the tools, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Calls per second to this server (0: no limit of its own).
    pub rate: f64,
}

impl Default for McpServerConfig {
    fn default() -> Self {
        McpServerConfig {
            name: String::new(),
            command: String::new(),
            args: Vec::new(),
            env: BTreeMap::new(),
            pass_env: Vec::new(),
            cwd: PathBuf::new(),
            url: String::new(),
            headers: BTreeMap::new(),
            secret_headers: BTreeMap::new(),
            timeout_ms: DEFAULT_MCP_CALL_TIMEOUT_MS,
            connect_timeout_ms: DEFAULT_MCP_CONNECT_TIMEOUT_MS,
            rate: 0.0,
        }
    }
}

/// Where a secret value comes from: an environment variable or a file
/// (exactly one), with an optional prefix (`Bearer `).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecretRef {
    pub env: String,
    pub file: PathBuf,
    pub prefix: String,
}

impl SecretRef {
    /// The value (prefix included), or why it cannot be read. The message
    /// names the variable or file, never the value.
    pub fn read(&self) -> Result<Secret, String> {
        // The same reading as the RapidAPI and model keys (env, else file).
        let value = super::secret::secret(&self.env, &self.file)?
            .ok_or_else(|| format!("the environment variable {} is not set", self.env))?;
        Ok(Secret::new(format!("{}{}", self.prefix, value.expose())))
    }
}

/// The transport a server is reached by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpTransport {
    Stdio,
    Http,
}

impl McpServerConfig {
    pub fn transport(&self) -> McpTransport {
        if self.url.is_empty() { McpTransport::Stdio } else { McpTransport::Http }
    }

    /// Checks one server's keys, as (key below `catalog.mcp_servers[i]`, problem).
    fn validate(&self) -> Result<(), (String, String)> {
        let valid_name = !self.name.is_empty()
            && self.name.len() <= MAX_SERVER_NAME
            && self.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            && !self.name.contains("__");
        if !valid_name {
            return Err((
                "name".into(),
                format!("must be 1-{MAX_SERVER_NAME} letters, digits, `_` or `-` (no `__`), got {:?}", self.name),
            ));
        }
        match (self.command.is_empty(), self.url.is_empty()) {
            (true, true) => return Err(("command".into(), "set `command` (stdio) or `url` (streamable HTTP)".into())),
            (false, false) => return Err(("url".into(), "set `command` (stdio) or `url`, not both".into())),
            _ => {}
        }
        if !self.url.is_empty() {
            match url::Url::parse(&self.url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => {}
                Ok(u) => return Err(("url".into(), format!("must be http or https, got {}", u.scheme()))),
                Err(e) => return Err(("url".into(), format!("not a URL ({e})"))),
            }
        } else if !self.headers.is_empty() || !self.secret_headers.is_empty() {
            return Err(("headers".into(), "headers are for a server reached by `url`".into()));
        }
        for name in self.headers.keys().chain(self.secret_headers.keys()) {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(("headers".into(), format!("{name:?} is not a valid header name")));
            }
        }
        for (name, secret) in &self.secret_headers {
            if secret.env.is_empty() == secret.file.as_os_str().is_empty() {
                return Err((format!("secret_headers.{name}"), "set exactly one of `env` or `file`".into()));
            }
        }
        if self.timeout_ms == 0 || self.connect_timeout_ms == 0 {
            return Err(("timeout_ms".into(), "time limits must be above 0".into()));
        }
        if !(self.rate >= 0.0 && self.rate.is_finite()) {
            return Err(("rate".into(), format!("must be 0 or more, got {}", self.rate)));
        }
        Ok(())
    }
}

/// Checks every server and that names are unique, as (key, problem).
pub(super) fn validate(servers: &[McpServerConfig]) -> Result<(), (String, String)> {
    for (i, server) in servers.iter().enumerate() {
        server.validate().map_err(|(key, problem)| (format!("catalog.mcp_servers[{i}].{key}"), problem))?;
        if let Some(j) = servers[..i].iter().position(|s| s.name.eq_ignore_ascii_case(&server.name)) {
            return Err((
                format!("catalog.mcp_servers[{i}].name"),
                format!("{:?} is already the name of catalog.mcp_servers[{j}]", server.name),
            ));
        }
    }
    Ok(())
}
