//! `[server]`: the HTTP listener the faces share, with its defaults and
//! checks. The one check across sections (`openai.execute_deadline_ms`
//! below `server.request_timeout_ms`) is in `Config::validate`.

use std::net::SocketAddr;
use std::path::PathBuf;

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

/// `server.threads`: most serving threads (0: one per core).
pub const MAX_THREADS: usize = 256;

/// `[server]`: the HTTP listener shared by the faces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// SHA-256 (hex) of each accepted API key (`toolrouter key hash KEY`
    /// prints one). Empty: no key needed (only sensible on loopback).
    pub api_key_hashes: Vec<String>,
    /// SHA-256 (hex) of the keys that may also see what only operators
    /// may (the console's overview, every key's traces). Accepted as API
    /// keys too. Without any key configured, every client is an operator.
    pub admin_key_hashes: Vec<String>,
    pub max_body_bytes: usize,
    pub shutdown_grace_ms: u64,
    pub client_rate: f64,
    pub client_burst: u32,
    pub request_timeout_ms: u64,
    pub header_read_timeout_ms: u64,
    pub body_timeout_ms: u64,
    /// Threads accepting and serving connections, each with a runtime of
    /// its own (0: one per core).
    pub threads: usize,
    /// Host names (`name` or `name:port`) the MCP face answers besides the
    /// loopback names and the listen address; `["*"]`: any.
    pub allowed_hosts: Vec<String>,
    /// PEM certificate chain (leaf first) served over TLS; with
    /// `tls_key_file`, the listener speaks HTTPS only. Reloaded when it
    /// changes. Empty: plain HTTP.
    pub tls_cert_file: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of `tls_cert_file`.
    pub tls_key_file: PathBuf,
    /// OAuth 2.1 bearer tokens accepted beside the API keys.
    pub oauth: super::OAuthConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: DEFAULT_LISTEN.parse().expect("a valid address"),
            api_key_hashes: Vec::new(),
            admin_key_hashes: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            shutdown_grace_ms: DEFAULT_SHUTDOWN_GRACE_MS,
            client_rate: DEFAULT_CLIENT_REQUEST_RATE,
            client_burst: DEFAULT_CLIENT_REQUEST_BURST,
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            header_read_timeout_ms: DEFAULT_HEADER_READ_TIMEOUT_MS,
            body_timeout_ms: DEFAULT_BODY_TIMEOUT_MS,
            allowed_hosts: Vec::new(),
            threads: 0,
            tls_cert_file: PathBuf::new(),
            tls_key_file: PathBuf::new(),
            oauth: super::OAuthConfig::default(),
        }
    }
}

impl ServerConfig {
    /// Whether the listener speaks TLS.
    pub fn tls(&self) -> bool {
        !self.tls_cert_file.as_os_str().is_empty()
    }

    /// How many serving threads to start: `threads`, or one per core.
    pub fn threads(&self) -> usize {
        match self.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }

    /// Key hashes are SHA-256 hex, the rate is a rate and the limits are at
    /// least 1, as (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        let hashes = self.api_key_hashes.iter().map(|h| ("api_key_hashes", h));
        let admins = self.admin_key_hashes.iter().map(|h| ("admin_key_hashes", h));
        for (i, (key, h)) in hashes.chain(admins).enumerate() {
            if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                let i = if key == "api_key_hashes" { i } else { i - self.api_key_hashes.len() };
                return Err((
                    format!("server.{key}[{i}]"),
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
        if self.threads > MAX_THREADS {
            return Err(("server.threads".into(), format!("must be 0 (one per core) to {MAX_THREADS}")));
        }
        if self.tls_cert_file.as_os_str().is_empty() != self.tls_key_file.as_os_str().is_empty() {
            let (set, unset) = if self.tls_key_file.as_os_str().is_empty() {
                ("tls_cert_file", "tls_key_file")
            } else {
                ("tls_key_file", "tls_cert_file")
            };
            return Err((format!("server.{unset}"), format!("is needed with server.{set} (TLS needs both)")));
        }
        self.oauth.validate()?;
        for (i, host) in self.allowed_hosts.iter().enumerate() {
            let key = format!("server.allowed_hosts[{i}]");
            if host == "*" && self.allowed_hosts.len() > 1 {
                return Err((key, "\"*\" allows any host: give it alone".into()));
            }
            let parsed = url::Url::parse(&format!("http://{host}/")).ok();
            let plain = parsed.as_ref().is_some_and(|u| u.path() == "/" && u.username().is_empty());
            if host != "*" && (host.is_empty() || host.contains(['/', '@']) || !plain) {
                return Err((key, format!("{host:?} is not a host name or host:port")));
            }
        }
        Ok(())
    }

    /// The `Host` values the MCP face answers (empty: any): the loopback
    /// names, the listen address and `allowed_hosts`.
    pub fn mcp_hosts(&self) -> Vec<String> {
        if self.allowed_hosts.iter().any(|h| h == "*") {
            return Vec::new();
        }
        let listen = self.listen.ip().to_string();
        let loopback = ["localhost", "127.0.0.1", "::1"].map(String::from);
        loopback.into_iter().chain([listen]).chain(self.allowed_hosts.iter().cloned()).collect()
    }
}
