//! `toolrouter serve`: the HTTP listener the faces share.
//!
//! * `GET /healthz`: 200 while the process runs;
//! * `GET /readyz`: 200 once the engine (catalog, index, graph) is loaded,
//!   503 before (saying how far loading has got);
//! * `/mcp`: the MCP face over streamable HTTP (POST, GET for the event
//!   stream, DELETE to close a session);
//! * `GET /metrics`: Prometheus counters ([`crate::metrics`]);
//! * `POST /v1/chat/completions`, `GET /v1/models`: the OpenAI face
//!   ([`crate::openai`]); `POST /v1/tools/call`: a catalog API called for
//!   the client; `GET /v1/traces/{id}`: an execute run's trace.
//!
//! The listener opens at once and the engine loads in the background
//! ([`crate::loading`]), so health checks and MCP's `initialize` answer
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
//! those still waiting for their answer then are answered 503 (a stream
//! already under way ends with the process).

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::Body;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::engine::{CallRequest, Called, Engine};
use crate::llm::LlmClient;
use crate::loading::{Loading, NotReady};
use crate::mcp::{ClientId, McpServer};
use crate::openai::ApiError;
use crate::openai::execute::Runner;
use crate::openai::route::Narrowing;
use crate::openai::validate::{Mode, ToolLists};
use crate::retrieval::tool_list::ToolListRanker;

type McpService = StreamableHttpService<McpServer, LocalSessionManager>;

/// What the routes share.
pub struct App {
    config: Config,
    key_hashes: HashSet<String>,
    /// The engine, loading or loaded (`None` in a server without one, such
    /// as the overhead bench's).
    loading: OnceLock<Arc<Loading>>,
    mcp: OnceLock<McpService>,
    /// The upstream model (`None` without `llm.base_url`).
    llm: Option<Arc<LlmClient>>,
    /// Requests per client key.
    limiter: Option<governor::DefaultKeyedRateLimiter<String>>,
    /// Execute runs: the model, the cap on runs in flight, the traces
    /// (`None` without a model).
    runner: Option<Arc<Runner>>,
    /// Set when the shutdown grace is over: requests still running get 503.
    cut_off: tokio::sync::watch::Sender<bool>,
    /// Route mode's tool-list indexes and vectors.
    ranker: Arc<ToolListRanker>,
    /// Client tool lists parsed before.
    tool_lists: ToolLists,
    /// The embedding model route mode uses when no engine is loaded (the
    /// overhead bench's server).
    route_embedder: OnceLock<Arc<crate::retrieval::Embedder>>,
}

/// The SHA-256 of a key, in hex (what `server.api_key_hashes` holds).
pub fn hash_key(key: &str) -> String {
    Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

impl App {
    pub fn new(config: &Config) -> Arc<App> {
        let key_hashes = config.server.api_key_hashes.iter().map(|h| h.to_ascii_lowercase()).collect();
        let llm = LlmClient::new(config).ok().map(Arc::new);
        let runner = llm.clone().map(|llm| Arc::new(Runner::new(llm, &config.openai)));
        let limiter = (config.server.client_rate > 0.0)
            .then(|| governor::Quota::with_period(Duration::from_secs_f64(1.0 / config.server.client_rate)))
            .flatten()
            .map(|q| q.allow_burst(std::num::NonZeroU32::new(config.server.client_burst.max(1)).expect("at least 1")))
            .map(governor::RateLimiter::keyed);
        Arc::new(App {
            config: config.clone(),
            key_hashes,
            loading: OnceLock::new(),
            mcp: OnceLock::new(),
            llm,
            limiter,
            runner,
            cut_off: tokio::sync::watch::Sender::new(false),
            ranker: Arc::default(),
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
        Narrowing { embedder: self.route_embedder.get().cloned(), ..Narrowing::lexical(self.ranker.clone()) }
    }

    /// The loaded engine, or why there is none yet.
    fn engine(&self) -> Result<&Arc<Engine>, NotReady> {
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
        let listen = self.config.server.listen.ip().to_string();
        let mcp_config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(["localhost".to_string(), "127.0.0.1".into(), "::1".into(), listen])
            .with_max_request_body_bytes(self.config.server.max_body_bytes);
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

/// Of `server.request_timeout_ms`, what a request's model requests leave
/// for answering.
const BUDGET_MARGIN_MS: u64 = 200;

/// When a request arrived (before its body was read): its time budget
/// counts from then, as `observe`'s limit does.
#[derive(Clone, Copy)]
struct Arrived(std::time::Instant);

/// The router of `toolrouter serve`.
pub fn router(app: Arc<App>) -> axum::Router {
    let protected = axum::Router::new()
        .route("/mcp", axum::routing::any(mcp))
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", axum::routing::post(chat_completions))
        .route("/v1/tools/call", axum::routing::post(tools_call))
        .route("/v1/traces/{id}", get(trace))
        .route(
            "/metrics",
            get(|| async { ([("content-type", "text/plain; version=0.0.4")], crate::metrics::global().render()) }),
        )
        .layer(axum::middleware::from_fn_with_state(app.clone(), read_body))
        .layer(axum::middleware::from_fn_with_state(app.clone(), auth));
    axum::Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .merge(protected)
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such route") })
        .layer(axum::middleware::from_fn_with_state(app.clone(), observe))
        .layer(axum::extract::DefaultBodyLimit::max(app.config.server.max_body_bytes))
        .with_state(app)
}

/// An error in OpenAI's shape (the MCP routes use it too, outside JSON-RPC).
fn error(status: StatusCode, message: &str) -> Response {
    let kind = if status == StatusCode::UNAUTHORIZED { "authentication_error" } else { "invalid_request_error" };
    let code = status.canonical_reason().unwrap_or("error").to_ascii_lowercase().replace(' ', "_");
    (status, axum::Json(json!({"error": {"message": message, "type": kind, "param": null, "code": code}})))
        .into_response()
}

async fn auth(State(app): State<Arc<App>>, mut request: Request, next: Next) -> Response {
    if app.key_hashes.is_empty() {
        // Without keys each peer address has its own rate: one client's
        // requests (stalled ones too) do not use up everyone's.
        let client = match super::conn::peer(&request) {
            Some(peer) => format!("anonymous@{}", peer.ip()),
            None => "anonymous".to_string(),
        };
        return match limited(&app, &client) {
            Some(refused) => refused,
            None => next.run(request).await,
        };
    }
    let key = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim);
    let Some(key) = key else {
        return error(StatusCode::UNAUTHORIZED, "missing API key: send `Authorization: Bearer KEY`");
    };
    let hash = hash_key(key);
    if !app.key_hashes.contains(&hash) {
        return error(StatusCode::UNAUTHORIZED, "invalid API key");
    }
    let client = hash[..12].to_string();
    if let Some(refused) = limited(&app, &client) {
        return refused;
    }
    request.extensions_mut().insert(ClientId(client));
    next.run(request).await
}

/// Reads the whole request body within `server.body_timeout_ms` and up to
/// `server.max_body_bytes`, before the handler runs: a body that never
/// comes gets 408 and frees its connection, instead of holding it (and a
/// task) until the request's time limit.
async fn read_body(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    use axum::extract::FromRequest;
    let declared = request.headers().get("content-length").and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n > app.config.server.max_body_bytes) {
        // Refused before it is read: the client need not send it all.
        return error(StatusCode::PAYLOAD_TOO_LARGE, "the request body is larger than server.max_body_bytes");
    }
    let (parts, body) = request.into_parts();
    let limit = Duration::from_millis(app.config.server.body_timeout_ms);
    let read = axum::body::Bytes::from_request(Request::from_parts(parts.clone(), body), &());
    match tokio::time::timeout(limit, read).await {
        Ok(Ok(bytes)) => next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await,
        Ok(Err(rejection)) => unreadable(rejection),
        Err(_) => {
            let message =
                format!("the request body did not arrive within {} ms (server.body_timeout_ms)", limit.as_millis());
            let mut response = error(StatusCode::REQUEST_TIMEOUT, &message);
            response.headers_mut().insert("connection", axum::http::HeaderValue::from_static("close"));
            response
        }
    }
}

/// 429 with `Retry-After` when `client` is over its request rate.
fn limited(app: &App, client: &str) -> Option<Response> {
    let limiter = app.limiter.as_ref()?;
    let not_until = limiter.check_key(&client.to_string()).err()?;
    crate::metrics::global().rate_limited("incoming");
    use governor::clock::Clock;
    let wait = not_until.wait_time_from(governor::clock::DefaultClock::default().now());
    let body = json!({"error": {"message": format!("rate limited: this key may make {} requests per second; retry after {:.2} s",
        app.config.server.client_rate, wait.as_secs_f64()), "type": "rate_limit_error", "param": null, "code": "rate_limited"}});
    let mut response = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
    response.headers_mut().insert("retry-after", (wait.as_secs_f64().ceil().max(1.0) as u64).into());
    Some(response)
}

/// Gives every request an id (`x-request-id`), a time limit, and a log
/// line (method, path, status, time; never a key or a body).
async fn observe(State(app): State<Arc<App>>, mut request: Request, next: Next) -> Response {
    let id = format!("{:016x}", fastrand::u64(..));
    let (method, path) = (request.method().clone(), request.uri().path().to_string());
    let started = std::time::Instant::now();
    request.extensions_mut().insert(Arrived(started));
    let limit = Duration::from_millis(app.config.server.request_timeout_ms);
    let mut cut_off = app.cut_off.subscribe();
    let mut response = tokio::select! {
        answered = tokio::time::timeout(limit, next.run(request)) => match answered {
            Ok(r) => r,
            Err(_) => ApiError::new(StatusCode::GATEWAY_TIMEOUT, "server_error", "timeout",
                format!("no answer within {} ms", limit.as_millis())).into_response(),
        },
        _ = cut_off.wait_for(|cut| *cut) => {
            let mut r = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", "shutting_down",
                "the server is shutting down and its grace period is over; retry on another instance").into_response();
            r.headers_mut().insert("retry-after", 1.into());
            r
        }
    };
    if let Ok(v) = id.parse() {
        response.headers_mut().insert("x-request-id", v);
    }
    // Known routes only, so that arbitrary paths cannot blow up the label set.
    const ROUTES: [&str; 7] =
        ["/healthz", "/readyz", "/mcp", "/metrics", "/v1/models", "/v1/chat/completions", "/v1/tools/call"];
    let route = match ROUTES.iter().find(|r| **r == path) {
        Some(r) => r,
        None if path.starts_with("/v1/traces/") => "/v1/traces/{id}",
        None => "other",
    };
    crate::metrics::global().request(route, response.status().as_u16(), started.elapsed().as_secs_f64());
    tracing::info!(request_id = %id, %method, %path, status = response.status().as_u16(),
        ms = format!("{:.1}", started.elapsed().as_secs_f64() * 1e3), "request");
    response
}

/// A body that could not be read, in OpenAI's shape rather than axum's
/// plain text: over `server.max_body_bytes` it is 413.
fn unreadable(rejection: BytesRejection) -> Response {
    match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => {
            error(StatusCode::PAYLOAD_TOO_LARGE, "the request body is larger than server.max_body_bytes")
        }
        status => {
            let mut e =
                ApiError::invalid(format!("the request body could not be read: {}", rejection.body_text()), None);
            e.status = status;
            e.into_response()
        }
    }
}

/// 503 while the engine loads, saying how far it has got. Why a load
/// failed (paths, configuration) is for the log, not for whoever asks.
fn not_ready(why: NotReady) -> Response {
    let why = match why {
        NotReady::Failed(_) => "toolrouter's engine failed to load; the server's log says why".to_string(),
        loading => loading.to_string(),
    };
    let mut r = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", "not_ready", why).into_response();
    r.headers_mut().insert("retry-after", 5.into());
    r
}

/// `GET /v1/models`: the names of `openai.models`; without a map, the
/// upstream model server's own list (so model pickers fill).
async fn models(State(app): State<Arc<App>>) -> Response {
    let models = &app.config.openai.models;
    if models.is_empty()
        && let Some(llm) = &app.llm
    {
        return match llm.models().await {
            Ok(list) => axum::Json(list).into_response(),
            Err(e) => ApiError::from(e).into_response(),
        };
    }
    let data: Vec<serde_json::Value> =
        models.keys().map(|n| json!({"id": n, "object": "model", "created": 0, "owned_by": "toolrouter"})).collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

async fn chat_completions(
    State(app): State<Arc<App>>,
    client: Option<axum::Extension<ClientId>>,
    arrived: Option<axum::Extension<Arrived>>,
    headers: axum::http::HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return unreadable(e),
    };
    let header_mode = headers.get("x-toolrouter-mode").and_then(|v| v.to_str().ok());
    // The request's time budget: model requests end by then, so that
    // retries and repairs fit and the answer says why (504), not `observe`.
    let spent = arrived.map_or(0, |a| a.0.0.elapsed().as_millis() as u64);
    let budget = app.config.server.request_timeout_ms.saturating_sub(BUDGET_MARGIN_MS + spent).max(1);
    let mut request =
        match crate::openai::validate::parse(&body, &app.config.openai, header_mode, &app.tool_lists, budget) {
            Ok(r) => r,
            Err(e) => return e.into_response(),
        };
    let Some(llm) = &app.llm else {
        return ApiError::from(crate::llm::LlmError::NotConfigured).into_response();
    };
    let engine = app.engine().ok().cloned();
    if request.mode == Mode::Execute
        && let Some(runner) = &app.runner
    {
        let engine = match app.engine() {
            Ok(engine) => engine.clone(),
            Err(e) => return not_ready(e),
        };
        let client = client.map(|c| c.0.0);
        return crate::openai::execute::respond(engine, runner.clone(), request, client, &app.config.openai)
            .await
            .unwrap_or_else(IntoResponse::into_response);
    }
    let mut planned = None;
    if request.mode == Mode::Plan {
        let engine = match app.engine() {
            Ok(engine) => engine,
            Err(e) => return not_ready(e),
        };
        match crate::openai::plan::offer(engine, &request, app.config.openai.max_tools).await {
            Ok((tools, steps)) => {
                request.tools = tools.into();
                planned = Some(steps);
            }
            Err(e) => return e.into_response(),
        }
    }
    let mut narrowing = app.narrowing();
    if let Some(engine) = engine {
        narrowing.embedder = engine.embedder();
        narrowing.weight = Arc::new(move |from: &str, to: &str| engine.transition_weight(from, to));
    }
    let result = if request.stream {
        crate::openai::stream::stream(request, llm.clone(), app.config.openai.clone(), &narrowing, planned).await
    } else {
        crate::openai::route::complete(&request, llm, &app.config.openai, &narrowing, planned).await
    };
    match result {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// `GET /v1/traces/{id}`: an execute run's trace (the client's own, while kept).
async fn trace(
    State(app): State<Arc<App>>,
    client: Option<axum::Extension<ClientId>>,
    id: Result<axum::extract::Path<String>, PathRejection>,
) -> Response {
    let id = match id {
        Ok(axum::extract::Path(id)) => id,
        Err(e) => return ApiError::invalid(format!("bad trace id: {}", e.body_text()), Some("id")).into_response(),
    };
    let client = client.map(|c| c.0.0);
    match app.runner.as_ref().and_then(|r| r.traces.get(&id, client.as_deref())) {
        Some(trace) => axum::Json(trace.as_ref().clone()).into_response(),
        None => {
            let mut e = ApiError::invalid(format!("no trace `{id}` (traces are kept for a while, per key)"), None);
            e.status = StatusCode::NOT_FOUND;
            e.code = Some("trace_not_found");
            e.into_response()
        }
    }
}

/// `POST /v1/tools/call {name, arguments}`: a catalog API called for the
/// client (plan mode's calls), the compressed response back.
async fn tools_call(
    State(app): State<Arc<App>>,
    client: Option<axum::Extension<ClientId>>,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return unreadable(e),
    };
    let engine = match app.engine() {
        Ok(engine) => engine,
        Err(e) => return not_ready(e),
    };
    let request: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return ApiError::invalid(format!("the request body is not valid JSON: {e}"), None).into_response(),
    };
    let Some(name) = request.get("name").and_then(|n| n.as_str()) else {
        return ApiError::invalid("`name` (the API's function name) is required", Some("name")).into_response();
    };
    let arguments = request.get("arguments").cloned().unwrap_or_else(|| json!({}));
    let client = client.map(|c| c.0.0);
    let call =
        CallRequest { function: name, arguments: &arguments, client: client.as_deref(), purpose: "", standalone: true };
    match engine.call(call).await {
        Called::Unknown(unknown) => {
            let err = ApiError {
                status: StatusCode::NOT_FOUND,
                code: Some("unknown_tool"),
                ..ApiError::invalid(unknown.to_string(), Some("name"))
            };
            let mut body = err.body();
            body["error"]["suggestions"] = json!(unknown.close);
            (err.status, axum::Json(body)).into_response()
        }
        Called::Refused(problem) => ApiError::invalid(problem, Some("arguments")).into_response(),
        Called::Invalid(invalid) => {
            let mut body = ApiError::invalid(invalid.to_string(), Some("arguments")).body();
            body["error"]["problems"] = serde_json::to_value(&invalid.problems).unwrap_or_default();
            (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
        }
        Called::Failed(e) => {
            use crate::upstream::ErrorClass;
            let (status, kind) = match e.class {
                ErrorClass::RateLimited => (StatusCode::TOO_MANY_REQUESTS, "rate_limit_error"),
                ErrorClass::Timeout | ErrorClass::Deadline => (StatusCode::GATEWAY_TIMEOUT, "server_error"),
                ErrorClass::Refused | ErrorClass::Request => (StatusCode::BAD_REQUEST, "invalid_request_error"),
                _ => (StatusCode::BAD_GATEWAY, "server_error"),
            };
            let code = e.class.name();
            let body = json!({"error": {"message": e.message, "type": kind, "param": null, "code": code,
                "retry_after_ms": e.retry_after_ms, "trace": e.trace}});
            let mut response = (status, axum::Json(body)).into_response();
            if let Some(ms) = e.retry_after_ms {
                let secs = (ms / 1000.0).ceil().max(1.0) as u64;
                response.headers_mut().insert("retry-after", secs.into());
            }
            response
        }
        Called::Done { function, response, compressed } => {
            let body: serde_json::Value =
                serde_json::from_str(&compressed.text).unwrap_or(serde_json::Value::String(compressed.text.clone()));
            axum::Json(json!({"name": function, "status": response.status, "response": body,
                "characters": {"before": compressed.chars_before, "after": compressed.chars_after},
                "trace": response.trace}))
            .into_response()
        }
    }
}

async fn readyz(State(app): State<Arc<App>>) -> Response {
    match app.engine() {
        Ok(_) => (StatusCode::OK, "ready").into_response(),
        Err(e) => not_ready(e),
    }
}

async fn mcp(State(app): State<Arc<App>>, request: Request) -> Response {
    let Some(service) = app.mcp.get() else {
        return not_ready(NotReady::Failed("this server has no engine".into()));
    };
    // The body was read (and its size capped) by `read_body`.
    let closing = request.method() == axum::http::Method::DELETE;
    let request = if request.method() == axum::http::Method::POST {
        // Malformed JSON gets JSON-RPC's own parse error (rmcp would answer in plain text).
        let (parts, body) = request.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, app.config.server.max_body_bytes).await else {
            return error(StatusCode::PAYLOAD_TOO_LARGE, "the request body is larger than server.max_body_bytes");
        };
        let message = match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(message) => message,
            Err(e) => {
                return jsonrpc_error(StatusCode::BAD_REQUEST, &json!(null), -32700, &format!("parse error: {e}"));
            }
        };
        // The sessionless 2026-07-28 protocol is not served: whatever its
        // params, `server/discover` is an unknown method, so clients fall
        // back to `initialize`.
        if message["method"] == "server/discover" {
            let text = "server/discover is not supported: send initialize (protocol 2025-11-25)";
            return jsonrpc_error(StatusCode::NOT_FOUND, &message["id"], -32601, text);
        }
        Request::from_parts(parts, Body::from(bytes))
    } else {
        request
    };
    let response = service.handle(request).await.map(Body::new);
    let mut response = as_jsonrpc(response).await;
    // rmcp answers a session's DELETE with 202; the Python SDK (both
    // majors) expects 200 or 204 and warns otherwise. The session is gone
    // either way, so say so plainly.
    if closing && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

/// A JSON-RPC error response.
fn jsonrpc_error(status: StatusCode, id: &serde_json::Value, code: i64, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    (status, axum::Json(body)).into_response()
}

/// rmcp's plain-text refusals (415 for a body that is not JSON, 406 for a
/// wrong `Accept`…) as JSON-RPC errors, the protocol's own shape.
async fn as_jsonrpc(response: Response) -> Response {
    let plain = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_none_or(|t| t.starts_with("text/plain"));
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || !plain {
        return response;
    }
    let text = axum::body::to_bytes(response.into_body(), 64 * 1024).await.unwrap_or_default();
    jsonrpc_error(status, &json!(null), -32600, String::from_utf8_lossy(&text).trim())
}

/// Serves until SIGINT or SIGTERM, then drains for up to the grace period.
pub async fn serve(config: &Config) -> anyhow::Result<()> {
    let app = App::new(config);
    if app.key_hashes.is_empty() {
        tracing::warn!(listen = %config.server.listen, "no API keys configured (server.api_key_hashes): anyone who can reach the listener can use it");
    }
    let listener = tokio::net::TcpListener::bind(config.server.listen).await?;
    let addr = listener.local_addr()?;
    println!("toolrouter listening on http://{addr}");
    use std::io::Write;
    std::io::stdout().flush()?;
    app.set_loading(Loading::start(config));
    tokio::spawn(housekeeping(app.clone()));
    let grace = Duration::from_millis(config.server.shutdown_grace_ms);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let header_read_timeout = Duration::from_millis(config.server.header_read_timeout_ms);
    let mut server = tokio::spawn(super::conn::serve(listener, router(app.clone()), header_read_timeout, async {
        let _ = rx.await;
    }));
    shutdown_signal().await;
    tracing::info!("shutting down: draining in-flight requests");
    let _ = tx.send(());
    if tokio::time::timeout(grace, &mut server).await.is_err() {
        tracing::warn!("in-flight requests did not finish within {grace:?}: answering them 503");
        app.cut_off.send_replace(true);
        // Time to write the 503s; streams already under way are cut.
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
        if let Some(limiter) = &app.limiter {
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
