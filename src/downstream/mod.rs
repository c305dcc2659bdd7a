//! The user's own MCP servers, with toolrouter as their client (rmcp's
//! client side): their tools join the catalog, and calls to those tools go
//! to them (docs/architecture.md §7, "Downstream MCP servers").
//!
//! [`Downstream::start`] starts one supervisor task per configured server
//! ([`supervise`]): it connects (stdio: the program is started with a
//! small environment of its own; streamable HTTP: headers, secret ones
//! from the environment or files), lists the tools (every page), and
//! keeps them current: a `notifications/tools/list_changed` (debounced)
//! and a periodic re-list update them, and a connection that closes, a
//! program that dies or a server that stops answering is reconnected
//! with exponential backoff. The last tools a server listed stay known
//! while it is down, and across restarts ([`known`]), so their names keep
//! resolving; a call to them is answered [`CallFailure::Unavailable`] at
//! once.
//!
//! Every change to a server's tools bumps [`Downstream::changes`]; the
//! engine rebuilds its catalog and index from [`Downstream::tools`].
//!
//! A reload hands [`Downstream::reconfigure`] the servers configured now:
//! a server added is started, one removed is stopped (its supervisor ends,
//! and with it the connection and a stdio program), one whose settings
//! changed is stopped and started again; the list is swapped whole, so a
//! call finds a server or not, never half of one.

mod connect;
mod known;
mod supervise;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use arc_swap::ArcSwap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::service::{Peer, RoleClient, ServiceError};
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, watch};

use crate::catalog::McpServerTools;
use crate::config::McpServerConfig;

/// Longest wait for a server's own rate before a call is refused.
const MAX_RATE_WAIT: Duration = Duration::from_secs(2);

/// How a server's connection is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ServerState {
    /// Not connected yet (the first attempt is under way).
    Connecting,
    Up,
    /// Not connected; the supervisor tries again after a backoff.
    Down,
}

impl ServerState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ServerState::Connecting => "connecting",
            ServerState::Up => "up",
            ServerState::Down => "down",
        }
    }
}

/// A server's health, for `/readyz`, `/metrics` and the log.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Health {
    pub(crate) server: String,
    pub(crate) state: ServerState,
    /// Why it is down (the last connection's end, or the failed attempt).
    pub(crate) error: Option<String>,
    /// Tools known (the last listing, kept while down).
    pub(crate) tools: usize,
    /// Connections made after the first.
    pub(crate) reconnects: u64,
    /// When the state last changed (Unix milliseconds).
    pub(crate) since_unix_ms: u64,
}

/// Why a downstream call did not come back with a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum CallFailure {
    #[error("the MCP server `{server}` is unavailable ({reason}); toolrouter is reconnecting to it")]
    Unavailable { server: String, reason: String },
    #[error("no answer from the MCP server `{server}` within {ms} ms (the call was cancelled)")]
    Timeout { server: String, ms: u64 },
    #[error("rate limited by the MCP server's own rate (catalog.mcp_servers.rate): retry after {:.1} s", retry_after.as_secs_f64())]
    RateLimited { retry_after: Duration },
    /// The server refused the request (a JSON-RPC error), with its code.
    #[error("the MCP server `{server}` refused the call: {message} (JSON-RPC error {code})")]
    Refused { server: String, code: i32, message: String },
    /// The tool ran and reported an error (`isError`), with what it said.
    #[error("the tool reported an error: {message}")]
    ToolError { message: String, body: Value },
}

/// A tool's answer: its structured content when it sent some, else its
/// content (one text block as the JSON it holds, or as a string; several
/// blocks as an array).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolAnswer {
    pub(crate) body: Value,
    /// Serialized size of the whole result as received.
    pub(crate) bytes: usize,
}

/// What the supervisor is told by a connection's handler or by a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signal {
    ListChanged,
    /// A call found the connection broken: drop it and reconnect.
    Reconnect,
}

/// The state of one server, shared between its supervisor and callers.
struct Server {
    config: McpServerConfig,
    /// Where its listed tools are kept between runs.
    state_dir: PathBuf,
    live: Mutex<Live>,
    limiter: Option<DefaultDirectRateLimiter>,
}

struct Live {
    peer: Option<Peer<RoleClient>>,
    /// Asks the supervisor to reconnect (set while connected).
    signals: Option<mpsc::Sender<Signal>>,
    listed: Option<McpServerTools>,
    health: Health,
    /// The first connection attempt has ended (either way).
    tried: bool,
}

/// The downstream MCP servers of one process.
pub(crate) struct Downstream {
    /// The servers, in configured order.
    servers: ArcSwap<Vec<Arc<Running>>>,
    state_dir: PathBuf,
    changes: watch::Sender<u64>,
    /// Woken when a server's first attempt ends.
    tried: Arc<(Mutex<()>, Condvar)>,
}

/// A server and its supervisor.
struct Running {
    server: Arc<Server>,
    /// Dropping the sender (with the last `Running`: the server removed, or
    /// the `Downstream` dropped) stops the supervisor.
    _stop: watch::Sender<()>,
}

/// What [`Downstream::reconfigure`] did, by server name.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Reconfigured {
    pub(crate) added: Vec<String>,
    pub(crate) removed: Vec<String>,
    /// Servers whose settings changed: stopped and started again.
    pub(crate) restarted: Vec<String>,
}

impl Reconfigured {
    pub(crate) fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.restarted.is_empty()
    }
}

impl Downstream {
    /// Starts a supervisor per server on the current tokio runtime. Each
    /// server's tools as kept in `state_dir` from an earlier run are known
    /// at once (calls to them answer "unavailable" until it is up).
    pub(crate) fn start(configs: &[McpServerConfig], state_dir: &Path) -> Arc<Downstream> {
        crate::outbound::install_crypto();
        let downstream = Downstream {
            servers: ArcSwap::default(),
            state_dir: state_dir.to_path_buf(),
            changes: watch::channel(0).0,
            tried: Arc::new((Mutex::new(()), Condvar::new())),
        };
        let servers = configs.iter().map(|config| downstream.run(config)).collect();
        downstream.servers.store(Arc::new(servers));
        Arc::new(downstream)
    }

    /// Starts the supervisor of the server `config`.
    fn run(&self, config: &McpServerConfig) -> Arc<Running> {
        let limiter = (config.rate > 0.0)
            .then(|| Quota::with_period(Duration::from_secs_f64(1.0 / config.rate)))
            .flatten()
            .map(RateLimiter::direct);
        let kept = known::load(&self.state_dir, &config.name);
        let health = Health {
            server: config.name.clone(),
            state: ServerState::Connecting,
            error: None,
            tools: kept.as_ref().map_or(0, |k| k.tools.len()),
            reconnects: 0,
            since_unix_ms: unix_ms(),
        };
        let server = Arc::new(Server {
            config: config.clone(),
            limiter,
            state_dir: self.state_dir.clone(),
            live: Mutex::new(Live { peer: None, signals: None, health, listed: kept, tried: false }),
        });
        let (stop, stopped) = watch::channel(());
        let context =
            supervise::Context { server: server.clone(), changes: self.changes.clone(), tried: self.tried.clone() };
        tokio::spawn(supervise::supervise(context, stopped));
        Arc::new(Running { server, _stop: stop })
    }

    /// Serves the servers `configs` from now on (a reload): those added are
    /// started, those removed stopped, those whose settings changed
    /// started again, the others left as they are. The tools of the
    /// servers stopped leave [`Downstream::tools`] at once (a change is
    /// announced); those of the servers started join it when they list them.
    pub(crate) fn reconfigure(&self, configs: &[McpServerConfig]) -> Reconfigured {
        let old = self.servers.load_full();
        let mut done = Reconfigured::default();
        let servers: Vec<Arc<Running>> = configs
            .iter()
            .map(|config| match old.iter().find(|r| r.server.config.name == config.name) {
                Some(same) if same.server.config == *config => same.clone(),
                Some(_) => {
                    done.restarted.push(config.name.clone());
                    self.run(config)
                }
                None => {
                    done.added.push(config.name.clone());
                    self.run(config)
                }
            })
            .collect();
        let gone = old.iter().filter(|r| !configs.iter().any(|c| c.name == r.server.config.name));
        done.removed = gone.map(|r| r.server.config.name.clone()).collect();
        self.servers.store(Arc::new(servers));
        if !done.removed.is_empty() || !done.restarted.is_empty() {
            self.changes.send_modify(|n| *n += 1);
        }
        done
    }

    /// The servers as configured now.
    fn servers(&self) -> impl Iterator<Item = Arc<Server>> {
        let servers = self.servers.load_full();
        (0..servers.len()).map(move |i| servers[i].server.clone())
    }

    /// Blocks (a plain thread, not a runtime worker) until every server's
    /// first connection attempt has ended or `patience` has passed.
    pub(crate) fn wait_first_attempts(&self, patience: Duration) {
        let until = Instant::now() + patience;
        let (lock, woken) = &*self.tried;
        let mut guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        while !self.servers().all(|s| s.live().tried) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            guard =
                woken.wait_timeout(guard, left.min(Duration::from_millis(100))).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// The tools every server listed last (servers in configured order;
    /// one never listed is left out).
    pub(crate) fn tools(&self) -> Vec<McpServerTools> {
        self.servers().filter_map(|s| s.live().listed.clone()).collect()
    }

    /// A counter bumped whenever a server's tools change.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Every server's health, in configured order.
    pub(crate) fn health(&self) -> Vec<Health> {
        self.servers().map(|s| s.live().health.clone()).collect()
    }

    /// Calls `tool` of `server` with `arguments`, within the server's
    /// `timeout_ms` (after which the call is cancelled downstream).
    pub(crate) async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<ToolAnswer, CallFailure> {
        let Some(server) = self.servers().find(|s| s.config.name == server) else {
            let reason = "it is no longer configured".to_string();
            return Err(CallFailure::Unavailable { server: server.to_string(), reason });
        };
        server.call(tool, arguments).await
    }
}

impl Server {
    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn call(&self, tool: &str, arguments: Map<String, Value>) -> Result<ToolAnswer, CallFailure> {
        let name = &self.config.name;
        let (peer, signals) = {
            let live = self.live();
            match (&live.peer, live.health.state) {
                (Some(peer), ServerState::Up) => (peer.clone(), live.signals.clone()),
                _ => {
                    let reason = live.health.error.clone().unwrap_or_else(|| "not connected yet".into());
                    return Err(CallFailure::Unavailable { server: name.clone(), reason });
                }
            }
        };
        if let Some(limiter) = &self.limiter {
            let clock = governor::clock::DefaultClock::default();
            while let Err(not_until) = limiter.check() {
                let wait = not_until.wait_time_from(governor::clock::Clock::now(&clock));
                if wait > MAX_RATE_WAIT {
                    return Err(CallFailure::RateLimited { retry_after: wait });
                }
                tokio::time::sleep(wait).await;
            }
        }
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let limit = Duration::from_millis(self.config.timeout_ms);
        // Dropping the call on timeout sends `notifications/cancelled` downstream.
        let result = match tokio::time::timeout(limit, peer.call_tool(params)).await {
            Err(_) => return Err(CallFailure::Timeout { server: name.clone(), ms: self.config.timeout_ms }),
            Ok(result) => result,
        };
        match result {
            Ok(result) => {
                let value = serde_json::to_value(&result).unwrap_or(Value::Null);
                let bytes = value.to_string().len();
                let body = answer_body(result.structured_content, &result.content);
                if result.is_error == Some(true) {
                    let message = crate::text::clip(&text_of(&body), 500);
                    return Err(CallFailure::ToolError { message, body });
                }
                Ok(ToolAnswer { body, bytes })
            }
            Err(ServiceError::McpError(e)) => {
                Err(CallFailure::Refused { server: name.clone(), code: e.code.0, message: e.message.to_string() })
            }
            Err(e) => {
                if let Some(signals) = signals {
                    let _ = signals.try_send(Signal::Reconnect);
                }
                Err(CallFailure::Unavailable { server: name.clone(), reason: e.to_string() })
            }
        }
    }
}

/// The body of a tool's answer (see [`ToolAnswer`]).
fn answer_body(structured: Option<Value>, content: &[ContentBlock]) -> Value {
    if let Some(structured) = structured {
        return structured;
    }
    let blocks: Vec<Value> = content.iter().filter_map(|c| serde_json::to_value(c).ok()).collect();
    match blocks.as_slice() {
        [] => Value::Null,
        [one] if one["type"] == "text" => {
            let text = one["text"].as_str().unwrap_or_default();
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
        }
        _ => Value::Array(blocks),
    }
}

/// The text an error answer says, for a message.
fn text_of(body: &Value) -> String {
    match body {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join(" "),
        other => other.to_string(),
    }
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
