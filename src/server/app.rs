//! `toolrouter serve`: the HTTP listener the faces share, the state they
//! share, their routes joined ([`router`]) and its life (start,
//! housekeeping, graceful shutdown).
//!
//! * `GET /healthz`: 200 while the process runs;
//! * `GET /readyz`: 200 once the engine (catalog, index, graph) is loaded,
//!   503 before (saying how far loading has got);
//! * `GET /metrics`: Prometheus counters ([`crate::metrics`]);
//! * each face's `routes()`: the OpenAI face's ([`crate::server::openai`]:
//!   chat completions, Responses, models, toolrouter's tools, graph and
//!   traces endpoints), the Anthropic face's ([`crate::server::anthropic`],
//!   its errors in Anthropic's shape), the MCP face's (`/mcp`, streamable
//!   HTTP) and the console's ([`crate::server::console`]).
//!
//! The listener opens at once and the engine loads in the background
//! ([`crate::engine::loading`]), so health checks and MCP's `initialize` answer
//! during a long first indexing. Every route but `/healthz` and `/readyz`
//! (probes carry no key) needs `Authorization: Bearer KEY` when
//! `server.api_key_hashes` is set (keys are kept as SHA-256 hashes; the
//! key's hash prefix names the client for rate limits and logs, the key
//! itself is never logged). Each
//! key has a request rate (`server.client_rate`, 429 with `Retry-After`
//! over it); every request gets an `x-request-id`, a log line and a time
//! limit (`server.request_timeout_ms`, 504). Bodies over
//! `server.max_body_bytes` get 413. SIGINT/SIGTERM stop accepting and
//! let in-flight requests finish for up to `server.shutdown_grace_ms`;
//! those still waiting for their answer then are answered 503, and a
//! stream already under way ends with an error event (`shutting_down`).
//! SIGHUP reloads the configuration ([`super::reload`]): keys, client
//! rates, upstream credentials and limits, downstream MCP servers change
//! in place; a bad config is refused whole; the log names what needs a
//! restart.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::chat::execute::Runner;
use super::chat::route::Narrowing;
use super::chat::tools::ToolLists;
use super::error::ApiError;
use super::mcp::McpServer;
use super::middleware::{admit, not_ready, observe};
use crate::config::Config;
use crate::downstream::{Health, ServerState};
use crate::engine::Engine;
use crate::engine::loading::{Loading, NotReady};
use crate::llm::{ChatModel, LlmClient};
use crate::retrieval::tool_list::ToolListRanker;
use crate::retrieval::tool_memory::ToolMemory;
use crate::retrieval::tool_vectors::ToolVectors;

type McpService = StreamableHttpService<McpServer, LocalSessionManager>;

/// What the routes share.
pub struct App {
    /// The configuration the server started with (a reload changes the
    /// gate, and the engine's share, in place; the rest needs a restart).
    pub(super) config: Config,
    /// The API keys and the per-key request rate, swapped by a reload.
    pub(super) gate: ArcSwap<super::gate::Gate>,
    /// The console's last minutes of counters.
    pub(super) history: super::console::history::History,
    /// The engine, loading or loaded (`None` in a server without one, such
    /// as the overhead bench's).
    pub(super) loading: OnceLock<Arc<Loading>>,
    pub(super) mcp: OnceLock<McpService>,
    /// The upstream model (`None` without `llm.base_url`).
    pub(super) llm: Option<Arc<dyn ChatModel>>,
    /// The Redis cluster the per-key request rate is shared through (the
    /// gate's local limiter is then this replica's share, used without Redis).
    pub(super) cluster: Option<Arc<crate::cluster::Cluster>>,
    /// Execute runs: the model, the cap on runs in flight, the traces
    /// (`None` without a model).
    pub(super) runner: Option<Arc<Runner>>,
    /// Set when the shutdown grace is over: requests still running get 503.
    pub(super) cut_off: tokio::sync::watch::Sender<bool>,
    /// Route mode's tool-list indexes and vectors.
    pub(super) ranker: Arc<ToolListRanker>,
    /// Client tool lists parsed before.
    pub(super) tool_lists: ToolLists,
    /// The embedding model route mode uses when no engine is loaded (the
    /// overhead bench's server).
    pub(super) route_embedder: OnceLock<Arc<crate::retrieval::Embedder>>,
}

impl App {
    /// The app of `config`, its model the server at `llm.base_url` (none without one).
    pub fn new(config: &Config) -> Arc<App> {
        let llm = LlmClient::new(config).ok().map(|client| Arc::new(client) as Arc<dyn ChatModel>);
        App::with_model(config, llm)
    }

    /// The app of `config` with `llm` as its model (tests script one).
    pub fn with_model(config: &Config, llm: Option<Arc<dyn ChatModel>>) -> Arc<App> {
        let cluster = crate::cluster::Cluster::open(&config.cluster).unwrap_or_else(|e| {
            tracing::error!("the cluster cannot be used, so limits are this replica's alone: {e:#}");
            None
        });
        let runner = llm.clone().map(|llm| Arc::new(Runner::new(llm, config, cluster.clone())));
        let gate = super::gate::Gate::new(&config.server, rate_share(config, cluster.is_some()));
        Arc::new(App {
            ranker: route_ranker(config, cluster.as_ref()),
            config: config.clone(),
            gate: ArcSwap::from_pointee(gate),
            history: Default::default(),
            loading: OnceLock::new(),
            mcp: OnceLock::new(),
            llm,
            cluster,
            runner,
            cut_off: tokio::sync::watch::Sender::new(false),
            tool_lists: ToolLists::new(config.args.strict),
            route_embedder: OnceLock::new(),
        })
    }

    /// Route mode ranks with `embedder` while no engine is loaded.
    pub fn set_route_embedder(&self, embedder: Arc<crate::retrieval::Embedder>) {
        let _ = self.route_embedder.set(embedder);
    }

    /// Route mode's narrowing with this server's ranker, without a graph
    /// (the handler adds the engine's graph and model when it is loaded).
    pub fn narrowing(&self) -> Narrowing {
        Narrowing {
            embedder: self.route_embedder.get().cloned(),
            embed_budget: Duration::from_millis(self.config.openai.embed_budget_ms),
            cluster: self.cluster.clone(),
            memory_bound: self.config.openai.tool_memory_requests,
            ..Narrowing::lexical(self.ranker.clone())
        }
    }

    /// The loaded engine, or why there is none yet.
    pub(super) fn engine(&self) -> Result<&Arc<Engine>, NotReady> {
        let Some(loading) = self.loading.get() else {
            return Err(NotReady::Failed("this server has no engine".into()));
        };
        loading.engine()
    }

    /// Serves the engine `loading` loads (MCP sessions open at once).
    pub fn set_loading(&self, loading: Arc<Loading>) {
        // Both structs are non-exhaustive: set the idle timeout on defaults.
        let mut session_manager = LocalSessionManager::default();
        session_manager.session_config.keep_alive = Some(Duration::from_secs(self.config.mcp.session_idle_s.max(1)));
        let mcp_config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(self.config.server.mcp_hosts())
            .with_max_request_body_bytes(self.config.server.max_body_bytes)
            .with_json_response(true);
        let factory_loading = loading.clone();
        let service = StreamableHttpService::new(
            move || Ok(McpServer::new(factory_loading.clone())),
            Arc::new(session_manager),
            mcp_config,
        );
        let _ = self.mcp.set(service);
        let _ = self.loading.set(loading);
    }
}

/// The replicas the per-key request rate is divided among: without Redis,
/// each replica admits its share of the rate and of the burst.
pub(super) fn rate_share(config: &Config, cluster: bool) -> u32 {
    if cluster { config.cluster.replicas.max(1) } else { 1 }
}

/// Route mode's ranker, its tool vectors kept in the state directory
/// (`tool-vectors/`) within `openai.tool_cache_*`, what the model called
/// for which request in `tool-memory/` and, with a cluster,
/// shared with the other replicas (written from the runtime of the
/// caller, when there is one).
fn route_ranker(config: &Config, cluster: Option<&Arc<crate::cluster::Cluster>>) -> Arc<ToolListRanker> {
    let bounds = crate::retrieval::tool_vectors::Bounds {
        entries: config.openai.tool_cache_entries,
        bytes: config.openai.tool_cache_mb << 20,
    };
    let vectors = ToolVectors::new(Some(config.state.dir().join("tool-vectors")), bounds);
    let memory = ToolMemory::new(Some(config.state.dir().join("tool-memory")), config.openai.tool_memory_requests);
    let ranker = Arc::new(ToolListRanker::new(vectors, memory));
    if let (Some(cluster), Ok(runtime)) = (cluster, tokio::runtime::Handle::try_current()) {
        let (cluster, ttl) = (cluster.clone(), Duration::from_secs(config.cluster.tool_vectors_ttl_s));
        let (shared, handle) = (cluster.clone(), runtime.clone());
        ranker.on_embedded(Arc::new(move |entries| {
            let cluster = shared.clone();
            handle.spawn(async move { cluster.share_tool_vectors(&entries, ttl).await });
        }));
        if config.openai.tool_memory_requests > 0 {
            runtime.spawn(follow_tool_memory(cluster, Arc::downgrade(&ranker)));
        }
    }
    ranker
}

/// Keeps what the other replicas' route mode learned: the shared stream
/// from its start, then every second, while the ranker lives.
async fn follow_tool_memory(cluster: Arc<crate::cluster::Cluster>, ranker: std::sync::Weak<ToolListRanker>) {
    let mut position = "0".to_string();
    while ranker.strong_count() > 0 {
        let entries = cluster.read_called(&position).await.unwrap_or_default();
        let Some(last) = entries.last().map(|(id, _)| id.clone()) else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let Some(ranker) = ranker.upgrade() else { return };
        let called: Vec<_> = entries.into_iter().filter_map(|(_, c)| c).collect();
        // Keeping an entry appends to the memory's journal (fsync).
        let _ = tokio::task::spawn_blocking(move || called.iter().filter(|c| ranker.learn_shared(c)).count()).await;
        position = last;
    }
}

/// The router of `toolrouter serve`.
pub fn router(app: Arc<App>) -> axum::Router {
    let admit = axum::middleware::from_fn_with_state(app.clone(), admit);
    let (console, console_api) = super::console::routes();
    let protected = face(super::openai::routes(&app), "openai")
        .merge(face(super::anthropic::routes(), "anthropic"))
        .merge(face(super::mcp::routes(), "mcp"))
        .merge(face(console_api, "console"))
        .route("/metrics", get(metrics))
        .layer(admit);
    axum::Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .merge(console)
        .merge(protected)
        .fallback(|| async { ApiError::status(StatusCode::NOT_FOUND, "no such route").into_response() })
        .layer(axum::middleware::from_fn_with_state(app.clone(), observe))
        .layer(axum::middleware::from_fn(super::anthropic::errors_in_shape))
        .layer(axum::extract::DefaultBodyLimit::max(app.config.server.max_body_bytes))
        .with_state(app)
}

/// `routes`, naming `face` on each request's telemetry span (with
/// telemetry off, `routes` as they are: no layer, no cost).
fn face(routes: axum::Router<Arc<App>>, face: &'static str) -> axum::Router<Arc<App>> {
    if !crate::telemetry::enabled() {
        return routes;
    }
    routes.route_layer(axum::middleware::map_request(move |request: axum::extract::Request| async move {
        tracing::Span::current().record("toolrouter.face", face);
        request
    }))
}

/// 200 once the engine is loaded; "degraded", naming them, while some
/// downstream MCP servers are not connected (the rest keeps working).
async fn readyz(State(app): State<Arc<App>>) -> Response {
    match app.engine() {
        Ok(engine) => (StatusCode::OK, readiness(engine).await).into_response(),
        Err(e) => not_ready(e),
    }
}

/// `ready`, or `ready, degraded: ` and what is down (the dense index
/// still being built, downstream MCP servers, Redis).
pub(super) async fn readiness(engine: &Engine) -> String {
    let building = engine.index_status();
    let mut down: Vec<String> = building.into_iter().collect();
    down.extend(engine.downstream_health().into_iter().filter(|h| h.state != ServerState::Up).map(|h| {
        format!(
            "the MCP server `{}` is {} ({})",
            h.server,
            h.state.as_str(),
            h.error.as_deref().unwrap_or("connecting")
        )
    }));
    if let Some(cluster) = engine.cluster()
        && let Err(e) = cluster.ping().await
    {
        let waiting = engine.sharing_stats().map_or(0, |s| s.backlog);
        down.push(format!(
            "{e}; each replica enforces its share of the limits (cluster.replicas); {waiting} runs wait to be shared"
        ));
    }
    if down.is_empty() { "ready".to_string() } else { format!("ready, degraded: {}", down.join("; ")) }
}

/// The process counters, route mode's tool vectors and memory, then the
/// cluster's and the downstream MCP servers' gauges.
async fn metrics(State(app): State<Arc<App>>) -> Response {
    let mut text = crate::metrics::global().render();
    {
        use std::fmt::Write;
        let _ = writeln!(
            text,
            "# HELP toolrouter_route_tool_vectors Client tools whose vectors route mode holds.\n\
             # TYPE toolrouter_route_tool_vectors gauge\ntoolrouter_route_tool_vectors {}\n\
             # HELP toolrouter_route_remembered_requests Requests whose tool calls route mode remembers.\n\
             # TYPE toolrouter_route_remembered_requests gauge\ntoolrouter_route_remembered_requests {}",
            app.ranker.tool_vectors(),
            app.ranker.remembered_requests()
        );
    }
    if let Ok(engine) = app.engine() {
        if let Some(cluster) = engine.cluster() {
            use std::fmt::Write;
            let up = u8::from(cluster.health().0);
            let _ = writeln!(
                text,
                "# HELP toolrouter_cluster_up Whether the last Redis command of this replica succeeded."
            );
            let _ = writeln!(text, "# TYPE toolrouter_cluster_up gauge\ntoolrouter_cluster_up {up}");
            let _ = writeln!(
                text,
                "# HELP toolrouter_cluster_fallbacks_total Redis commands that failed or timed out (local limits used)."
            );
            let _ = writeln!(
                text,
                "# TYPE toolrouter_cluster_fallbacks_total counter\ntoolrouter_cluster_fallbacks_total {}",
                cluster.failures()
            );
            if let Some(stats) = engine.sharing_stats() {
                let _ = writeln!(
                    text,
                    "# HELP toolrouter_cluster_outbox_runs Runs recorded here that Redis has not taken yet.\n# TYPE toolrouter_cluster_outbox_runs gauge\ntoolrouter_cluster_outbox_runs {}",
                    stats.backlog
                );
                let _ = writeln!(
                    text,
                    "# HELP toolrouter_cluster_runs_applied_total Runs other replicas recorded, applied here.\n# TYPE toolrouter_cluster_runs_applied_total counter\ntoolrouter_cluster_runs_applied_total {}",
                    stats.applied
                );
            }
        }
        let health = engine.downstream_health();
        if !health.is_empty() {
            text.push_str(&downstream_gauges(&health));
        }
    }
    ([("content-type", "text/plain; version=0.0.4")], text).into_response()
}

fn downstream_gauges(health: &[Health]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "# HELP toolrouter_mcp_server_up Whether a downstream MCP server is connected.");
    let _ = writeln!(out, "# TYPE toolrouter_mcp_server_up gauge");
    for h in health {
        let _ = writeln!(
            out,
            "toolrouter_mcp_server_up{{server=\"{}\"}} {}",
            h.server,
            u8::from(h.state == ServerState::Up)
        );
    }
    let _ = writeln!(out, "# HELP toolrouter_mcp_server_tools Tools a downstream MCP server listed last.");
    let _ = writeln!(out, "# TYPE toolrouter_mcp_server_tools gauge");
    for h in health {
        let _ = writeln!(out, "toolrouter_mcp_server_tools{{server=\"{}\"}} {}", h.server, h.tools);
    }
    let _ = writeln!(
        out,
        "# HELP toolrouter_mcp_server_reconnects_total Connections to a downstream MCP server after the first."
    );
    let _ = writeln!(out, "# TYPE toolrouter_mcp_server_reconnects_total counter");
    for h in health {
        let _ = writeln!(out, "toolrouter_mcp_server_reconnects_total{{server=\"{}\"}} {}", h.server, h.reconnects);
    }
    out
}

/// Serves until SIGINT or SIGTERM, then drains for up to the grace period;
/// on SIGHUP, reloads the configuration from `source` ([`super::reload`]).
pub async fn serve(config: &Config, source: super::reload::Source) -> anyhow::Result<()> {
    let app = App::new(config);
    if app.gate.load().key_hashes.is_empty() {
        tracing::warn!(listen = %config.server.listen, "no API keys configured (server.api_key_hashes): anyone who can reach the listener can use it");
    }
    let certificates = super::tls::Certificates::open(&config.server)?;
    let tls = certificates.as_ref().map(|c| c.acceptor()).transpose()?;
    #[cfg(unix)]
    let hangups = super::reload::hangups()?;
    let listener = tokio::net::TcpListener::bind(config.server.listen).await?;
    let addr = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    println!("toolrouter listening on {scheme}://{addr}");
    use std::io::Write;
    std::io::stdout().flush()?;
    let loading = Loading::start(config);
    app.set_loading(loading.clone());
    tokio::spawn(housekeeping(app.clone()));
    tokio::spawn(super::console::sample(app.clone()));
    let reloader = super::reload::Reloader::new(source, loading, Some(app.clone()));
    #[cfg(unix)]
    tokio::spawn(reloader.with_certificates(certificates.clone()).follow(hangups));
    #[cfg(not(unix))]
    drop(reloader);
    if let Some(certificates) = certificates {
        tokio::spawn(super::tls::watch(certificates));
    }
    let grace = Duration::from_millis(config.server.shutdown_grace_ms);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let header_read_timeout = Duration::from_millis(config.server.header_read_timeout_ms);
    let serving = super::conn::Serving { router: router(app.clone()), header_read_timeout, tls };
    let threads = super::conn::spawn(listener.into_std()?, serving, config.server.threads(), stopped)?;
    let mut server = tokio::spawn(threads.join());
    shutdown_signal().await;
    tracing::info!("shutting down: draining in-flight requests");
    let _ = stop.send(true);
    if tokio::time::timeout(grace, &mut server).await.is_err() {
        tracing::warn!("in-flight requests did not finish within {grace:?}: answering them 503");
        app.cut_off.send_replace(true);
        // Time to write the 503s, and the error event that ends each stream under way.
        let _ = tokio::time::timeout(Duration::from_secs(1), &mut server).await;
    }
    Ok(())
}

/// How often idle rate-limiter keys are forgotten.
const HOUSEKEEPING: Duration = Duration::from_secs(60);

/// Now and then forgets the rate limiters' idle keys (one per client key or
/// address, API and host): without it they would grow with every client
/// ever seen.
async fn housekeeping(app: Arc<App>) {
    let mut tick = tokio::time::interval(HOUSEKEEPING);
    loop {
        tick.tick().await;
        if let Some(limiter) = &app.gate.load().limiter {
            limiter.retain_recent();
        }
        if let Ok(engine) = app.engine() {
            engine.prune_limits();
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
