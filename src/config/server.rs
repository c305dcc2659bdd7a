//! `[server]`, `[mcp]` and `[openai]`: the HTTP listener and the two faces
//! served on it, with the sections' defaults and checks. The one check
//! across sections (`openai.execute_deadline_ms` below
//! `server.request_timeout_ms`) is in `Config::validate`.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// `server.listen`: where `toolrouter serve` listens.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// `server.max_body_bytes`: larger request bodies get 413.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// `server.shutdown_grace_ms`: how long in-flight requests may finish after a shutdown signal.
pub const DEFAULT_SHUTDOWN_GRACE_MS: u64 = 10_000;
/// `server.client_rate`: requests per second one client key may make (0: no limit).
pub const DEFAULT_CLIENT_REQUEST_RATE: f64 = 20.0;
/// `server.client_burst`: requests a client key may make at once before its rate applies.
pub const DEFAULT_CLIENT_REQUEST_BURST: u32 = 40;
/// `server.request_timeout_ms`: a request without an answer (its first byte) by then gets 504.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 120_000;
/// `server.header_read_timeout_ms`: a request's headers must arrive within
/// this, from the connection's start or its last answer (idle keep-alive
/// connections close after it).
pub const DEFAULT_HEADER_READ_TIMEOUT_MS: u64 = 30_000;
/// `server.body_timeout_ms`: a request's whole body must arrive within this after its headers (else 408).
pub const DEFAULT_BODY_TIMEOUT_MS: u64 = 30_000;
/// `mcp.max_session_tools`: dynamic tools a session keeps (least recently used evicted).
pub const DEFAULT_MAX_SESSION_TOOLS: usize = 64;
/// `mcp.page_size`: tools per `tools/list` page.
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// `mcp.session_idle_s`: an HTTP session idle this long is closed (and its run recorded).
pub const DEFAULT_SESSION_IDLE_S: u64 = 300;

/// `openai.max_tools`: tools forwarded to the model in route mode (docs/architecture.md §9).
pub const DEFAULT_MAX_TOOLS: usize = 20;
/// `openai.max_request_tools`: tools one request may carry; more get 400.
pub const DEFAULT_MAX_REQUEST_TOOLS: usize = 5_000;
/// `openai.repair_attempts`: times the model is asked to fix invalid tool-call arguments.
pub const DEFAULT_REPAIR_ATTEMPTS: usize = 2;

/// `openai.default_mode`: the mode of a request that names none and sends no `tools`.
pub const DEFAULT_CHAT_MODE: ChatMode = ChatMode::Route;
/// `openai.execute_deadline_ms`: time an execute run may take (below `server.request_timeout_ms`).
pub const DEFAULT_EXECUTE_DEADLINE_MS: u64 = 90_000;
/// `openai.decompose`: execute mode asks the model to split a request into sub-tasks.
pub const DEFAULT_DECOMPOSE: bool = true;
/// `openai.max_runs`: execute runs in flight at once; more get 429.
pub const DEFAULT_MAX_RUNS: usize = 16;
/// `openai.keep_alive_ms`: a streamed answer with nothing to send for this long sends a `: keep-alive` comment.
pub const DEFAULT_KEEP_ALIVE_MS: u64 = 15_000;
/// `openai.traces`: execute traces kept in memory for `GET /v1/traces/{id}` (oldest dropped).
pub const DEFAULT_TRACES_KEPT: usize = 1_000;

/// How a chat-completions request is served (docs/architecture.md §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatMode {
    /// The client's own tools, narrowed and checked; without tools, forwarded as is.
    Route,
    /// Catalog APIs chosen by the planner and retrieval, offered to the model as tools.
    Plan,
    /// toolrouter runs the whole loop and answers.
    Execute,
}

impl ChatMode {
    pub fn parse(name: &str) -> Option<ChatMode> {
        match name {
            "route" => Some(ChatMode::Route),
            "plan" => Some(ChatMode::Plan),
            "execute" => Some(ChatMode::Execute),
            _ => None,
        }
    }
}

/// `[openai]`: the OpenAI-compatible face.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpenAiConfig {
    pub max_tools: usize,
    pub max_request_tools: usize,
    pub repair_attempts: usize,
    /// Model names clients may ask for, mapped to the upstream model's
    /// name. Empty: any name, forwarded unchanged.
    pub models: std::collections::BTreeMap<String, String>,
    pub default_mode: ChatMode,
    pub execute_deadline_ms: u64,
    pub decompose: bool,
    pub max_runs: usize,
    pub traces: usize,
    pub keep_alive_ms: u64,
}

impl OpenAiConfig {
    /// The limits are at least 1, as (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        for (key, n) in [
            ("openai.max_tools", self.max_tools as u64),
            ("openai.max_request_tools", self.max_request_tools as u64),
            ("openai.traces", self.traces as u64),
            ("openai.max_runs", self.max_runs as u64),
            ("openai.keep_alive_ms", self.keep_alive_ms),
        ] {
            if n == 0 {
                return Err((key.to_string(), "must be at least 1".to_string()));
            }
        }
        Ok(())
    }
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            max_tools: DEFAULT_MAX_TOOLS,
            max_request_tools: DEFAULT_MAX_REQUEST_TOOLS,
            repair_attempts: DEFAULT_REPAIR_ATTEMPTS,
            models: Default::default(),
            default_mode: DEFAULT_CHAT_MODE,
            execute_deadline_ms: DEFAULT_EXECUTE_DEADLINE_MS,
            decompose: DEFAULT_DECOMPOSE,
            max_runs: DEFAULT_MAX_RUNS,
            traces: DEFAULT_TRACES_KEPT,
            keep_alive_ms: DEFAULT_KEEP_ALIVE_MS,
        }
    }
}

/// `[server]`: the HTTP listener shared by the faces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// SHA-256 (hex) of each accepted API key (`toolrouter key hash KEY`
    /// prints one). Empty: no key needed (only sensible on loopback).
    pub api_key_hashes: Vec<String>,
    pub max_body_bytes: usize,
    pub shutdown_grace_ms: u64,
    pub client_rate: f64,
    pub client_burst: u32,
    pub request_timeout_ms: u64,
    pub header_read_timeout_ms: u64,
    pub body_timeout_ms: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: DEFAULT_LISTEN.parse().expect("a valid address"),
            api_key_hashes: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            shutdown_grace_ms: DEFAULT_SHUTDOWN_GRACE_MS,
            client_rate: DEFAULT_CLIENT_REQUEST_RATE,
            client_burst: DEFAULT_CLIENT_REQUEST_BURST,
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            header_read_timeout_ms: DEFAULT_HEADER_READ_TIMEOUT_MS,
            body_timeout_ms: DEFAULT_BODY_TIMEOUT_MS,
        }
    }
}

impl ServerConfig {
    /// Key hashes are SHA-256 hex, the rate is a rate and the limits are at
    /// least 1, as (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        for (i, h) in self.api_key_hashes.iter().enumerate() {
            if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err((
                    format!("server.api_key_hashes[{i}]"),
                    "must be the 64 hex digits of a SHA-256 (`toolrouter key hash KEY`)".into(),
                ));
            }
        }
        if !(self.client_rate >= 0.0 && self.client_rate.is_finite()) {
            return Err(("server.client_rate".into(), "must be 0 (no limit) or a positive rate".into()));
        }
        let positive = [
            ("max_body_bytes", self.max_body_bytes as u64),
            ("client_burst", u64::from(self.client_burst)),
            ("request_timeout_ms", self.request_timeout_ms),
            ("header_read_timeout_ms", self.header_read_timeout_ms),
            ("body_timeout_ms", self.body_timeout_ms),
        ];
        if let Some((key, _)) = positive.iter().find(|(_, n)| *n == 0) {
            return Err((format!("server.{key}"), "must be at least 1".into()));
        }
        Ok(())
    }
}

/// `[mcp]`: the MCP face.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    pub max_session_tools: usize,
    pub page_size: usize,
    pub session_idle_s: u64,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            max_session_tools: DEFAULT_MAX_SESSION_TOOLS,
            page_size: DEFAULT_PAGE_SIZE,
            session_idle_s: DEFAULT_SESSION_IDLE_S,
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
