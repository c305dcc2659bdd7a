//! `toolrouter serve`: the HTTP listener the faces share, their routes
//! joined ([`router`]) over the shared state ([`super::state`]) and its
//! life (start, housekeeping, graceful shutdown). Nothing imports this
//! file but `serve`'s callers.
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

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::error::ApiError;
use super::middleware::{admit, not_ready, observe};
use super::state::{App, readiness};
use crate::config::Config;
use crate::downstream::{Health, ServerState};
use crate::engine::loading::Loading;

/// The router of `toolrouter serve`.
pub fn router(app: Arc<App>) -> axum::Router {
    let admit = axum::middleware::from_fn_with_state(app.clone(), admit);
    let (console, console_api) = super::console::routes();
    let protected = face(super::openai::routes(&app), "openai")
        .merge(face(super::anthropic::routes(), "anthropic"))
        .merge(face(super::mcp::routes(&app), "mcp"))
        .merge(face(console_api, "console"))
        .route("/metrics", get(metrics))
        .layer(admit);
    axum::Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/.well-known/oauth-protected-resource", get(resource_metadata))
        .route("/.well-known/oauth-protected-resource/{*resource}", get(resource_metadata))
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

/// The protected resource metadata (RFC 9728) MCP clients read to find
/// the authorization server; 404 while OAuth is off.
async fn resource_metadata(State(app): State<Arc<App>>) -> Response {
    match &app.gate.load().oauth {
        Some(oauth) => {
            ([(axum::http::header::CONTENT_TYPE, "application/json")], oauth.metadata().to_string()).into_response()
        }
        None => {
            ApiError::status(StatusCode::NOT_FOUND, "OAuth is off: API keys only (server.oauth.issuer)").into_response()
        }
    }
}

/// 200 once the engine is loaded; "degraded", naming them, while some
/// downstream MCP servers are not connected (the rest keeps working).
async fn readyz(State(app): State<Arc<App>>) -> Response {
    match app.engine() {
        Ok(engine) => (StatusCode::OK, readiness(engine).await).into_response(),
        Err(e) => not_ready(e),
    }
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
            app.chat.ranker().tool_vectors(),
            app.chat.ranker().remembered_requests()
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
    if app.gate.load().open() {
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
