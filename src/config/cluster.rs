//! `[cluster]`: replicas that share state through Redis, with the
//! section's defaults and checks. Off (an empty `redis_url`) by default:
//! one process works alone, with no Redis.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Secret;
use super::secret::secret;

/// Environment variable holding the Redis password.
pub const REDIS_PASSWORD_ENV: &str = "TOOLROUTER_CLUSTER_REDIS_PASSWORD";
/// `cluster.timeout_ms`: a Redis command slower than this falls back to local state.
pub const DEFAULT_CLUSTER_TIMEOUT_MS: u64 = 100;
/// `cluster.trace_ttl_s`: how long an execute run's trace stays readable on every replica.
pub const DEFAULT_TRACE_TTL_S: u64 = 3600;
/// `cluster.tool_vectors_ttl_s`: how long a tool vector one replica
/// embedded stays readable by the others (renewed when embedded again).
pub const DEFAULT_TOOL_VECTORS_TTL_S: u64 = 30 * 24 * 3600;
/// `cluster.max_trace_bytes`: larger traces stay on the replica that made them.
pub const DEFAULT_MAX_TRACE_BYTES: usize = 1024 * 1024;
/// `cluster.stream_max_runs`: runs kept in the replicas' run stream (a
/// replica further behind starts from a copy of another's state directory).
pub const DEFAULT_STREAM_MAX_RUNS: usize = 100_000;
/// `cluster.key_prefix`: the namespace of toolrouter's keys in Redis.
pub const DEFAULT_KEY_PREFIX: &str = "toolrouter";

/// `[cluster]`: shared state across replicas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// `redis://host:port/db` (no password: that comes from the
    /// environment or `redis_password_file`). Empty: no cluster.
    pub redis_url: String,
    /// File holding the Redis password (empty: only the environment variable).
    pub redis_password_file: PathBuf,
    /// Prefix of every key toolrouter writes.
    pub key_prefix: String,
    /// How many replicas share the limits: while Redis is unreachable each
    /// one enforces this share of every rate, so the total still holds.
    pub replicas: u32,
    /// Longest wait for one Redis command before the local fallback.
    pub timeout_ms: u64,
    /// How long a trace stays readable on every replica, in seconds.
    pub trace_ttl_s: u64,
    /// Larger traces are kept only by the replica that made them.
    pub max_trace_bytes: usize,
    /// How long a tool vector (route mode) stays shared, in seconds.
    pub tool_vectors_ttl_s: u64,
    /// Runs kept in the stream through which replicas learn from each
    /// other's runs (Redis trims older ones, approximately).
    pub stream_max_runs: usize,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            redis_url: String::new(),
            redis_password_file: PathBuf::new(),
            key_prefix: DEFAULT_KEY_PREFIX.to_string(),
            replicas: 1,
            timeout_ms: DEFAULT_CLUSTER_TIMEOUT_MS,
            trace_ttl_s: DEFAULT_TRACE_TTL_S,
            max_trace_bytes: DEFAULT_MAX_TRACE_BYTES,
            tool_vectors_ttl_s: DEFAULT_TOOL_VECTORS_TTL_S,
            stream_max_runs: DEFAULT_STREAM_MAX_RUNS,
        }
    }
}

impl ClusterConfig {
    /// Whether replicas share state (a Redis URL is set).
    pub fn enabled(&self) -> bool {
        !self.redis_url.is_empty()
    }

    /// The Redis password: the environment variable, else the file, else none.
    pub fn redis_password(&self) -> Result<Option<Secret>, String> {
        secret(REDIS_PASSWORD_ENV, &self.redis_password_file)
    }

    /// As (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        if self.enabled() {
            let url = url::Url::parse(&self.redis_url)
                .map_err(|e| ("cluster.redis_url".to_string(), format!("not a URL ({e})")))?;
            // The Redis client is built without TLS (no rustls features of
            // `redis`): a rediss:// URL would fail at the first connection.
            if url.scheme() == "rediss" {
                return Err((
                    "cluster.redis_url".into(),
                    "rediss:// (TLS) is not supported by this build; use redis:// on a private network, or a \
                     local TLS tunnel (stunnel, a sidecar) and point redis:// at it"
                        .into(),
                ));
            }
            if url.scheme() != "redis" || url.host_str().is_none() {
                return Err(("cluster.redis_url".into(), "must be redis://host:port[/db]".into()));
            }
            if url.password().is_some() {
                return Err((
                    "cluster.redis_url".into(),
                    format!("must not hold the password; use {REDIS_PASSWORD_ENV} or cluster.redis_password_file"),
                ));
            }
        }
        if self.replicas == 0 || self.timeout_ms == 0 || self.stream_max_runs == 0 || self.tool_vectors_ttl_s == 0 {
            return Err((
                "cluster.replicas".into(),
                "replicas, timeout_ms, stream_max_runs and tool_vectors_ttl_s must be at least 1".into(),
            ));
        }
        if self.key_prefix.is_empty() || self.key_prefix.contains(char::is_whitespace) {
            return Err(("cluster.key_prefix".into(), "must be a non-empty word".into()));
        }
        self.redis_password().map(|_| ()).map_err(|message| ("cluster.redis_password_file".into(), message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A URL the Redis client could not use is refused at start, naming why.
    #[test]
    fn redis_urls_are_checked() {
        let check = |url: &str| ClusterConfig { redis_url: url.into(), ..ClusterConfig::default() }.validate();
        assert!(check("").is_ok(), "off");
        assert!(check("redis://127.0.0.1:6379/0").is_ok());
        for (url, says) in [
            ("rediss://cache.internal:6380", "rediss:// (TLS) is not supported"),
            ("http://cache.internal", "must be redis://"),
            ("redis://:secret@cache.internal", "must not hold the password"),
            ("not a url", "not a URL"),
        ] {
            let (key, problem) = check(url).unwrap_err();
            assert!(key == "cluster.redis_url" && problem.contains(says), "{url}: {problem}");
        }
    }
}
