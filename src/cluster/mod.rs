//! What replicas share through Redis (`[cluster]`, docs/configuration.md
//! "Replicas"): the rate limits ([`limits`]), what they learn from runs
//! ([`runs`], published from a durable [`outbox`]), route mode's tool
//! vectors ([`tool_vectors`]) and memory ([`tool_memory`]) and execute runs' traces
//! ([`Cluster::put_trace`], with an expiry and a size cap).
//!
//! Connections are made lazily and kept by redis-rs's `ConnectionManager`
//! (reconnecting on its own): one for the limits and traces, one for
//! publishing runs and one for following the run stream (its reads block
//! for a second, which would hold up any command behind them). Every
//! limit or trace command has `cluster.timeout_ms`: a Redis that is down,
//! lost or slow never holds a request; the caller falls back to its local
//! state, and the cluster is reported degraded (`/readyz`, `/metrics`)
//! until a command succeeds again.

pub(crate) mod limits;
pub(crate) mod outbox;
pub(crate) mod runs;
pub(crate) mod tool_memory;
pub(crate) mod tool_vectors;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::config::ClusterConfig;

/// The least timeout of publishing and following runs (neither is on a
/// request's path).
const BULK_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a command to Redis failed: every caller falls back to this
/// replica's own state, and the message goes to the log and `/readyz`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum ClusterError {
    /// Redis did not answer in time (`cluster.timeout_ms`, or the longer
    /// bound of bulk writes).
    #[error("Redis did not answer within {0} ms")]
    Timeout(u64),
    /// Redis refused the command or could not be reached.
    #[error("Redis: {0}")]
    Redis(String),
    /// What was to be written could not be written as JSON.
    #[error("a shared entry could not be written as JSON: {0}")]
    Encode(String),
}

/// The shared state of a cluster of replicas.
pub struct Cluster {
    connection: ConnectionManager,
    publisher: ConnectionManager,
    follower: ConnectionManager,
    prefix: String,
    timeout: Duration,
    /// The timeout of publishing runs (batches of up to [`runs::BATCH`]).
    bulk_timeout: Duration,
    healthy: AtomicBool,
    /// Commands that failed or timed out (each fell back to local state).
    failures: AtomicU64,
    last_error: std::sync::Mutex<Option<String>>,
}

impl Cluster {
    /// The cluster of `config`, when `cluster.redis_url` is set. Does not
    /// connect yet (a Redis down at start is a degraded cluster, not an
    /// error); a URL or password that cannot be used is.
    pub fn open(config: &ClusterConfig) -> anyhow::Result<Option<Arc<Cluster>>> {
        if !config.enabled() {
            return Ok(None);
        }
        let mut url = url::Url::parse(&config.redis_url)?;
        if let Some(password) = config.redis_password().map_err(anyhow::Error::msg)? {
            url.set_password(Some(password.expose()))
                .map_err(|()| anyhow::anyhow!("cluster.redis_url cannot take a password"))?;
        }
        let client = redis::Client::open(url.as_str()).map_err(|e| anyhow::anyhow!("cluster.redis_url: {e}"))?;
        let timeout = Duration::from_millis(config.timeout_ms);
        let bulk_timeout = timeout.max(BULK_TIMEOUT);
        let manager = |response_timeout: Duration| {
            let manager_config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(timeout.max(Duration::from_millis(500))))
                .set_response_timeout(Some(response_timeout))
                .set_number_of_retries(1)
                .set_max_delay(Duration::from_secs(2));
            ConnectionManager::new_lazy_with_config(client.clone(), manager_config)
                .map_err(|e| anyhow::anyhow!("cluster.redis_url: {e}"))
        };
        Ok(Some(Arc::new(Cluster {
            connection: manager(timeout)?,
            publisher: manager(bulk_timeout)?,
            follower: manager(runs::FOLLOW_BLOCK + bulk_timeout)?,
            prefix: config.key_prefix.clone(),
            timeout,
            bulk_timeout,
            healthy: AtomicBool::new(true),
            failures: AtomicU64::new(0),
            last_error: std::sync::Mutex::new(None),
        })))
    }

    /// `<prefix>:<kind>:<name>`.
    fn key(&self, kind: &str, name: &str) -> String {
        format!("{}:{kind}:{name}", self.prefix)
    }

    /// Whether the last command reached Redis, and why not.
    pub(crate) fn health(&self) -> (bool, Option<String>) {
        let error = self.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone();
        (self.healthy.load(Ordering::Relaxed), error)
    }

    /// Keeps `trace` for every replica for `ttl`, with the key that may read
    /// it; a trace over `max_bytes` is not shared. Whether it was.
    pub(crate) async fn put_trace(
        &self,
        id: &str,
        owner: Option<&str>,
        trace: &serde_json::Value,
        ttl: Duration,
        max_bytes: usize,
    ) -> bool {
        self.put_owned("trace", id, owner, trace, ttl, max_bytes).await
    }

    /// A trace another replica (or this one) shared: its owner and itself.
    pub(crate) async fn get_trace(&self, id: &str) -> Option<(Option<String>, serde_json::Value)> {
        self.get_owned("trace", id).await
    }

    /// Keeps `value` of `kind` (`trace`, `response`) under `id` for every
    /// replica for `ttl`, with the key that may read it; a value over
    /// `max_bytes` is not shared. Whether it was.
    pub(crate) async fn put_owned(
        &self,
        kind: &str,
        id: &str,
        owner: Option<&str>,
        value: &serde_json::Value,
        ttl: Duration,
        max_bytes: usize,
    ) -> bool {
        let text = serde_json::json!({"owner": owner, "value": value}).to_string();
        if text.len() > max_bytes {
            tracing::info!(kind, id, bytes = text.len(), "too large to share: it stays on this replica");
            return false;
        }
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("SET");
        command.arg(self.key(kind, id)).arg(text).arg("EX").arg(ttl.as_secs().max(1));
        self.run(command.query_async::<()>(&mut connection)).await.is_ok()
    }

    /// A value of `kind` shared by [`Cluster::put_owned`]: its owner and itself.
    pub(crate) async fn get_owned(&self, kind: &str, id: &str) -> Option<(Option<String>, serde_json::Value)> {
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("GET");
        command.arg(self.key(kind, id));
        let text: Option<String> = self.run(command.query_async(&mut connection)).await.ok()?;
        let mut kept: serde_json::Value = serde_json::from_str(&text?).ok()?;
        let owner = kept["owner"].as_str().map(str::to_string);
        Some((owner, kept["value"].take()))
    }

    /// Asks Redis whether it is there (updating the health).
    pub(crate) async fn ping(&self) -> Result<(), ClusterError> {
        let mut connection = self.connection.clone();
        self.run(redis::cmd("PING").query_async::<()>(&mut connection)).await
    }

    /// Commands that fell back to local state so far.
    pub(crate) fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Runs `command` within `cluster.timeout_ms`, noting the cluster's health.
    async fn run<T>(
        &self,
        command: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, ClusterError> {
        self.run_within(self.timeout, command).await
    }

    /// Runs `command` within `timeout`, noting the cluster's health.
    async fn run_within<T>(
        &self,
        timeout: Duration,
        command: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, ClusterError> {
        let outcome = match tokio::time::timeout(timeout, command).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(ClusterError::Redis(e.to_string())),
            Err(_) => Err(ClusterError::Timeout(timeout.as_millis() as u64)),
        };
        match &outcome {
            Ok(_) => {
                if !self.healthy.swap(true, Ordering::Relaxed) {
                    tracing::info!("Redis is reachable again: limits are shared");
                }
            }
            Err(e) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                if self.healthy.swap(false, Ordering::Relaxed) {
                    tracing::warn!("{e}; falling back to this replica's share of every limit");
                }
                *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
            }
        }
        outcome
    }
}
