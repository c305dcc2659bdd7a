//! `[upstream]`: calls to APIs, with the section's defaults and checks.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::CredentialConfig;
use super::secret::secret;

/// Environment variable holding the RapidAPI key.
pub const RAPIDAPI_KEY_ENV: &str = "TOOLROUTER_UPSTREAM_RAPIDAPI_KEY";

/// `upstream.timeout_ms`: one attempt (connect, send, read the whole response).
pub const DEFAULT_UPSTREAM_TIMEOUT_MS: u64 = 10_000;
/// `upstream.deadline_ms`: one call, every attempt and wait included.
pub const DEFAULT_UPSTREAM_DEADLINE_MS: u64 = 30_000;
/// `upstream.max_response_bytes`: a larger response is cut off and the call fails.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 2 * 1024 * 1024;
/// `upstream.max_attempts`: tries per call (connect errors, timeouts, 5xx, 429).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// `upstream.backoff_ms`: the first retry waits about this (doubling, with jitter).
pub const DEFAULT_BACKOFF_MS: u64 = 200;
/// `upstream.max_wait_ms`: longest wait for rate-limit cells before a call is refused.
pub const DEFAULT_MAX_WAIT_MS: u64 = 2_000;
/// `upstream.global_rate`: calls per second to all APIs together (0: no limit).
pub const DEFAULT_GLOBAL_RATE: f64 = 50.0;
/// `upstream.host_rate`: calls per second to one host.
pub const DEFAULT_HOST_RATE: f64 = 10.0;
/// `upstream.api_rate`: calls per second to one API.
pub const DEFAULT_API_RATE: f64 = 5.0;
/// `upstream.client_rate`: calls per second on behalf of one client key.
pub const DEFAULT_CLIENT_RATE: f64 = 20.0;
/// `upstream.burst`: calls a limit lets through at once before the rate applies.
pub const DEFAULT_BURST: u32 = 5;
/// `upstream.max_redirects`: redirects followed (each target checked by the guard).
pub const DEFAULT_MAX_REDIRECTS: usize = 5;

/// Where calls go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamMode {
    /// Real HTTP calls (to the API's host, or to `upstream.base_url`).
    #[default]
    Live,
    /// Recorded responses from `upstream.replay_dir`, in-process.
    Replay,
}

/// `[upstream]`: calls to APIs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    pub mode: UpstreamMode,
    /// The replay table (StableToolBench cache layout) for `mode = "replay"`.
    pub replay_dir: PathBuf,
    /// Send every call to this base URL (e.g. `toolrouter replay` on
    /// loopback) instead of the API's host, with `X-RapidAPI-Host` naming
    /// the API's host. Empty: the API's own URL.
    pub base_url: String,
    /// Hosts calls may go to besides the catalog's own (`host`, `host:port`, `*.domain`).
    pub allowed_hosts: Vec<String>,
    /// Allow private, loopback and link-local addresses (a replay server on loopback).
    pub allow_private: bool,
    /// File holding the RapidAPI key (empty: only the environment variable).
    pub rapidapi_key_file: PathBuf,
    pub timeout_ms: u64,
    pub deadline_ms: u64,
    pub max_response_bytes: usize,
    pub max_attempts: u32,
    pub backoff_ms: u64,
    pub max_wait_ms: u64,
    pub global_rate: f64,
    pub host_rate: f64,
    pub api_rate: f64,
    pub client_rate: f64,
    pub burst: u32,
    pub max_redirects: usize,
    /// Credentials of the user's own HTTP services, one per host.
    pub credentials: Vec<CredentialConfig>,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            mode: UpstreamMode::Live,
            replay_dir: PathBuf::new(),
            base_url: String::new(),
            allowed_hosts: Vec::new(),
            allow_private: false,
            rapidapi_key_file: PathBuf::new(),
            timeout_ms: DEFAULT_UPSTREAM_TIMEOUT_MS,
            deadline_ms: DEFAULT_UPSTREAM_DEADLINE_MS,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff_ms: DEFAULT_BACKOFF_MS,
            max_wait_ms: DEFAULT_MAX_WAIT_MS,
            global_rate: DEFAULT_GLOBAL_RATE,
            host_rate: DEFAULT_HOST_RATE,
            api_rate: DEFAULT_API_RATE,
            client_rate: DEFAULT_CLIENT_RATE,
            burst: DEFAULT_BURST,
            max_redirects: DEFAULT_MAX_REDIRECTS,
            credentials: Vec::new(),
        }
    }
}

impl UpstreamConfig {
    /// What types alone cannot check, as (key, problem): hosts are
    /// well-formed, rates are rates, limits are at least 1, a replay has its
    /// directory, the base URL is http(s) and a configured key is readable.
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        for (i, host) in self.allowed_hosts.iter().enumerate() {
            let bare = host.strip_prefix("*.").unwrap_or(host);
            if url::Url::parse(&format!("http://{bare}/")).ok().and_then(|u| u.host_str().map(str::to_string)).is_none()
                || bare.contains('/')
            {
                return Err((
                    format!("upstream.allowed_hosts[{i}]"),
                    format!("{host:?} is not a host, host:port or *.domain"),
                ));
            }
        }
        for (key, rate) in [
            ("global_rate", self.global_rate),
            ("host_rate", self.host_rate),
            ("api_rate", self.api_rate),
            ("client_rate", self.client_rate),
        ] {
            if !(rate >= 0.0 && rate.is_finite()) {
                return Err((
                    format!("upstream.{key}"),
                    format!("must be 0 (no limit) or a positive rate, got {rate}"),
                ));
            }
        }
        for (key, n) in [
            ("timeout_ms", self.timeout_ms),
            ("deadline_ms", self.deadline_ms),
            ("max_response_bytes", self.max_response_bytes as u64),
            ("max_attempts", u64::from(self.max_attempts)),
            ("burst", u64::from(self.burst)),
        ] {
            if n == 0 {
                return Err((format!("upstream.{key}"), "must be at least 1".into()));
            }
        }
        if self.mode == UpstreamMode::Replay && !self.replay_dir.is_dir() {
            return Err((
                "upstream.replay_dir".into(),
                format!("mode is \"replay\" but {:?} is not a directory", self.replay_dir.display().to_string()),
            ));
        }
        if !self.base_url.is_empty() {
            match url::Url::parse(&self.base_url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
                _ => return Err(("upstream.base_url".into(), format!("{:?} is not an http(s) URL", self.base_url))),
            }
        }
        secret(RAPIDAPI_KEY_ENV, &self.rapidapi_key_file)
            .map_err(|message| ("upstream.rapidapi_key_file".into(), message))?;
        super::credentials::validate(&self.credentials)
    }
}
