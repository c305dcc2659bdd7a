//! What every request of `toolrouter serve` passes through before its
//! handler: an id, a time limit and a log line (`observe`, every route),
//! then, on the routes that need a key, the API key, the client's request
//! rate and the body read whole within its time and size limits
//! (`admit`). Their refusals are in OpenAI's error shape.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::BytesRejection;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::{HeaderValue, WWW_AUTHENTICATE};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use tracing::Instrument;

/// The client on whose behalf an HTTP request runs (set by the auth layer
/// as a request extension): rate limits, traces and stored responses are
/// kept per client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientId(pub String);

/// The header of request ids.
const X_REQUEST_ID: &str = "x-request-id";

use super::error::ApiError;
use super::gate::Gate;
use super::oauth::{Refusal, Verifier};
use super::state::App;
use crate::chat::{Answer, ChatError};
use crate::cluster::limits::{Cell, Verdict};
use crate::config::Config;
use crate::engine::loading::NotReady;
use crate::llm::wire::RequestBody;
use crate::telemetry;

/// In a request's extensions when its key is an operator's
/// (`server.admin_key_hashes`), or when no key is configured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Operator;

/// 403 unless the request carries [`Operator`].
pub(crate) fn operator_only(operator: Option<&Operator>) -> Option<Response> {
    operator.is_none().then(|| {
        ApiError::status(StatusCode::FORBIDDEN, "this needs an operator's key (server.admin_key_hashes)")
            .into_response()
    })
}

/// The SHA-256 of a key, in hex (what `server.api_key_hashes` holds).
pub fn hash_key(key: &str) -> String {
    Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// When a request arrived (before its body was read): its time budget
/// counts from then, as `observe`'s limit does.
#[derive(Clone, Copy)]
pub(crate) struct Arrived(pub(crate) std::time::Instant);

/// What a chat-speaking handler hands the chat core besides the body:
/// the client the key names, when the request arrived, the mode its
/// `x-toolrouter-mode` header names.
#[derive(Clone)]
pub(crate) struct Requester {
    pub(crate) client: Option<ClientId>,
    pub(crate) arrived: Option<Arrived>,
    pub(crate) mode: Option<String>,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Requester {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, Self::Rejection> {
        let mode = parts.headers.get("x-toolrouter-mode").and_then(|v| v.to_str().ok()).map(str::to_string);
        Ok(Requester {
            client: parts.extensions.get::<ClientId>().cloned(),
            arrived: parts.extensions.get::<Arrived>().copied(),
            mode,
        })
    }
}

/// Of `server.request_timeout_ms`, what a request's model requests leave
/// for answering.
const BUDGET_MARGIN_MS: u64 = 200;

impl Requester {
    /// The time the request's model requests may take, from now: they end
    /// before the request's time limit, so that retries and repairs fit
    /// and the answer says why (504), not the time limit's layer.
    pub(crate) fn budget(&self, config: &Config) -> Duration {
        let spent = self.arrived.map_or(0, |a| a.0.elapsed().as_millis() as u64);
        let budget = config.server.request_timeout_ms.saturating_sub(BUDGET_MARGIN_MS + spent).max(1);
        Duration::from_millis(budget)
    }

    /// Has `app`'s chat core check and answer `body` (a face's request in
    /// the core's fields) for this requester, within its time budget.
    pub(crate) async fn ask(&self, app: &App, body: RequestBody) -> Result<Answer, ChatError> {
        let request = app.chat.request(body, self.mode.as_deref(), self.budget(&app.config))?;
        app.chat.answer(request, self.client.as_ref().map(|c| c.0.clone())).await
    }
}

/// Admits a request to a protected route: its API key and the client's
/// request rate checked ([`refused`]), then its body read
/// ([`read_body`]). One middleware rather than two: each layer costs
/// every request a boxed future and a clone of the route.
pub(super) async fn admit(State(app): State<Arc<App>>, mut request: Request, next: Next) -> Response {
    if let Some(refused) = refused(&app, &mut request).await {
        return refused;
    }
    match read_body(&app, request).await {
        Ok(request) => next.run(request).await,
        Err(refused) => refused,
    }
}

/// The refusal of a request without a valid API key or OAuth token, or
/// over its client's request rate; the client's id goes into the
/// request's extensions.
async fn refused(app: &App, request: &mut Request) -> Option<Response> {
    let gate = app.gate.load();
    if gate.open() {
        // Without keys, whoever reaches the listener runs it.
        request.extensions_mut().insert(Operator);
        gate.limiter.as_ref()?;
        // Without keys each peer address has its own rate: one client's
        // requests (stalled ones too) do not use up everyone's.
        let client = match super::conn::peer(request) {
            Some(peer) => format!("anonymous@{}", peer.ip()),
            None => "anonymous".to_string(),
        };
        return limited(app, &gate, &client).await;
    }
    // `Authorization: Bearer KEY` (OpenAI's clients), else `x-api-key: KEY` (Anthropic's).
    let headers = request.headers();
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")));
    let key = bearer.or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok())).map(str::trim);
    let Some(key) = key else {
        let missing = match gate.oauth {
            Some(_) => "missing credentials: send `Authorization: Bearer TOKEN` (an OAuth token or an API key)",
            None => "missing API key: send `Authorization: Bearer KEY` or `x-api-key: KEY`",
        };
        return Some(unauthorized(&gate, missing, false));
    };
    let hash = hash_key(key);
    let (client, operator) = if gate.key_hashes.contains(&hash) {
        (hash[..12].to_string(), gate.admin_hashes.contains(&hash))
    } else if let Some(oauth) = gate.oauth.as_ref().filter(|_| Verifier::looks_like_jwt(key)) {
        match oauth.verify(key).await {
            Ok(bearer) => (gate.token_client(oauth.issuer(), &bearer.subject, &bearer.scopes), false),
            Err(refusal) => return Some(token_refused(oauth, refusal)),
        }
    } else {
        let invalid = if gate.oauth.is_some() { "invalid API key or OAuth token" } else { "invalid API key" };
        return Some(unauthorized(&gate, invalid, true));
    };
    if let Some(refused) = limited(app, &gate, &client).await {
        return Some(refused);
    }
    if operator {
        request.extensions_mut().insert(Operator);
    }
    request.extensions_mut().insert(ClientId(client));
    None
}

/// 401 saying `why`, with OAuth's challenge when tokens are accepted (so
/// that MCP clients find where to get one; `invalid_token` when a
/// credential was `presented`).
fn unauthorized(gate: &Gate, why: &str, presented: bool) -> Response {
    let mut response = ApiError::status(StatusCode::UNAUTHORIZED, why).into_response();
    if let Some(oauth) = &gate.oauth {
        let refusal = presented.then(|| Refusal::Invalid(why.to_string()));
        response.headers_mut().insert(WWW_AUTHENTICATE, oauth.challenge(refusal.as_ref()));
    }
    response
}

/// The answer to a token `oauth` did not accept: 401 (invalid), 403
/// (insufficient scope), each with its challenge, or 503 while the
/// issuer's keys cannot be had.
fn token_refused(oauth: &Verifier, refusal: Refusal) -> Response {
    let challenge = oauth.challenge(Some(&refusal));
    let mut response = match refusal {
        Refusal::Invalid(why) => ApiError::status(StatusCode::UNAUTHORIZED, format!("invalid OAuth token: {why}")),
        Refusal::Scope => ApiError::status(
            StatusCode::FORBIDDEN,
            "the OAuth token carries none of the scopes this server accepts (server.oauth.scopes)",
        ),
        Refusal::Unavailable => {
            // What failed, and where, is in the log: not for whoever sends a token.
            let why = "OAuth tokens cannot be checked now: the authorization server's keys could not be fetched";
            ApiError::server(StatusCode::SERVICE_UNAVAILABLE, "oauth_unavailable", why).with_retry_after(10)
        }
    }
    .into_response();
    response.headers_mut().insert(WWW_AUTHENTICATE, challenge);
    response
}

/// Reads the whole request body within `server.body_timeout_ms` and up to
/// `server.max_body_bytes`, before the handler runs: a body that never
/// comes gets 408 and frees its connection, instead of holding it (and a
/// task) until the request's time limit.
async fn read_body(app: &App, request: Request) -> Result<Request, Response> {
    let declared = request.headers().get("content-length").and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n > app.config.server.max_body_bytes) {
        // Refused before it is read: the client need not send it all.
        return Err(ApiError::too_large().into_response());
    }
    let (parts, body) = request.into_parts();
    let limit = Duration::from_millis(app.config.server.body_timeout_ms);
    let read = axum::body::to_bytes(body, app.config.server.max_body_bytes);
    match tokio::time::timeout(limit, read).await {
        Ok(Ok(bytes)) => Ok(Request::from_parts(parts, axum::body::Body::from(bytes))),
        Ok(Err(e)) => Err(unreadable_body(&e)),
        Err(_) => {
            let message =
                format!("the request body did not arrive within {} ms (server.body_timeout_ms)", limit.as_millis());
            let mut response = ApiError::status(StatusCode::REQUEST_TIMEOUT, message).into_response();
            response.headers_mut().insert("connection", axum::http::HeaderValue::from_static("close"));
            Err(response)
        }
    }
}

/// 429 with `Retry-After` when `client` is over its request rate: shared
/// by the replicas through Redis when `[cluster]` is on (this replica's
/// share locally when Redis cannot answer).
async fn limited(app: &App, gate: &Gate, client: &str) -> Option<Response> {
    let limiter = gate.limiter.as_ref()?;
    let shared = match &app.cluster {
        Some(cluster) => {
            let cell = Cell {
                kind: "request",
                key: client,
                interval: Duration::from_secs_f64(1.0 / gate.client_rate),
                burst: gate.client_burst,
            };
            cluster.take(None, std::slice::from_ref(&cell)).await.ok()
        }
        None => None,
    };
    let wait = match shared {
        Some(Verdict::Taken) => return None,
        Some(Verdict::Wait(_, wait) | Verdict::Slowed(wait)) => wait,
        None => {
            let not_until = limiter.check_key(&client.to_string()).err()?;
            use governor::clock::Clock;
            not_until.wait_time_from(governor::clock::DefaultClock::default().now())
        }
    };
    crate::metrics::global().rate_limited("incoming");
    let message = format!(
        "rate limited: this key may make {} requests per second; retry after {:.2} s",
        gate.client_rate,
        wait.as_secs_f64()
    );
    let retry_after = wait.as_secs_f64().ceil().max(1.0) as u64;
    Some(ApiError::rate_limited("rate_limited", message, Some(retry_after)).into_response())
}

/// The request's id: the client's own `x-request-id` (kept, so that a
/// caller's logs and toolrouter's can be joined), else 16 random hex
/// digits, set on the request for the handlers.
fn request_id(request: &mut Request) -> HeaderValue {
    if let Some(id) = request.headers().get(X_REQUEST_ID) {
        return id.clone();
    }
    let id = HeaderValue::try_from(format!("{:016x}", fastrand::u64(..))).expect("hex digits are a header value");
    request.headers_mut().insert(X_REQUEST_ID, id.clone());
    id
}

/// Gives every request an id ([`request_id`], sent back on the answer), a
/// time limit and a log line (id, method, path, status, time; never a key
/// or a body) and counts it. Hand-written rather than tower-http's
/// `SetRequestId`, `TimeoutLayer` and `TraceLayer`: the timeout must
/// answer in OpenAI's error shape and race the shutdown's cut-off, the
/// same place counts the request for `/metrics`, and one middleware costs
/// a request less than four layers (docs/benchmarks.md).
pub(super) async fn observe(State(app): State<Arc<App>>, mut request: Request, next: Next) -> Response {
    let id = request_id(&mut request);
    let method = request.method().clone();
    let uri = request.uri().clone();
    let matched = request.extensions().get::<axum::extract::MatchedPath>().cloned();
    let started = std::time::Instant::now();
    request.extensions_mut().insert(Arrived(started));
    let limit = Duration::from_millis(app.config.server.request_timeout_ms);
    let mut cut_off = app.cut_off.subscribe();
    let route = matched.as_ref().map_or("other", |m| m.as_str());
    let span = request_span(&method, route, request.headers());
    let mut response = tokio::select! {
        answered = tokio::time::timeout(limit, next.run(request).instrument(span.clone())) => match answered {
            Ok(r) => r,
            Err(_) => ApiError::server(StatusCode::GATEWAY_TIMEOUT, "timeout",
                format!("no answer within {} ms", limit.as_millis())).into_response(),
        },
        _ = cut_off.wait_for(|cut| *cut) => ApiError::server(StatusCode::SERVICE_UNAVAILABLE, "shutting_down",
            "the server is shutting down and its grace period is over; retry on another instance")
            .with_retry_after(1)
            .into_response(),
    };
    // The route's template (`/v1/traces/{id}`), never the raw path, so that
    // arbitrary paths cannot blow up the label set.
    let status = response.status().as_u16();
    span.record("http.response.status_code", i64::from(status));
    if status >= 500 {
        span.record("otel.status_code", "error");
    }
    crate::metrics::global().request(route, status, started.elapsed().as_secs_f64());
    tracing::info!(request_id = id.to_str().unwrap_or("-"), %method, path = uri.path(), status,
        ms = (crate::units::ms(started.elapsed()) * 10.0).round() / 10.0, "request");
    response.headers_mut().entry(X_REQUEST_ID).or_insert(id);
    if is_event_stream(&response) {
        return ended_at_cut_off(response, app.cut_off.subscribe(), span);
    }
    response
}

/// The request's server span (telemetry only), continuing the client's
/// trace. Named by the route's template, as OpenTelemetry's HTTP
/// conventions ask.
fn request_span(method: &axum::http::Method, route: &str, headers: &axum::http::HeaderMap) -> tracing::Span {
    let span = tracing::info_span!(target: telemetry::TARGET, "request",
        "otel.name" = format!("{method} {route}"), "otel.kind" = "server",
        "otel.status_code" = tracing::field::Empty, "http.request.method" = method.as_str(),
        "http.route" = route, "http.response.status_code" = tracing::field::Empty,
        "toolrouter.face" = tracing::field::Empty);
    telemetry::continue_trace(&span, headers);
    span
}

/// The event that ends a stream still under way when the shutdown grace
/// is over: `event: error` with an `error` object, which the OpenAI SDKs
/// (chat and Responses streams) and Anthropic's raise as an API error.
const CUT_OFF_EVENT: &str = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"code\":\"shutting_down\",\"message\":\"the server is shutting down and its grace period is over; retry on another instance\"}}\n\n";

fn is_event_stream(response: &Response) -> bool {
    let kind = response.headers().get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    kind.is_some_and(|v| v.starts_with("text/event-stream"))
}

/// `response` (an event stream) ended by [`CUT_OFF_EVENT`] if the
/// shutdown grace runs out before it ends by itself.
/// The request's `span` lasts as long as the stream.
fn ended_at_cut_off(
    response: Response,
    mut cut_off: tokio::sync::watch::Receiver<bool>,
    span: tracing::Span,
) -> Response {
    use futures_util::StreamExt;
    let (parts, body) = response.into_parts();
    let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let noted = cut.clone();
    let stop = async move {
        let reached = cut_off.wait_for(|cut| *cut).await.is_ok();
        if !reached {
            std::future::pending::<()>().await; // the server is gone; the stream ends as it will
        }
        noted.store(true, std::sync::atomic::Ordering::Relaxed);
    };
    let last = futures_util::stream::once(async move {
        drop(span);
        cut.load(std::sync::atomic::Ordering::Relaxed)
    })
    .filter_map(|cut| async move { cut.then(|| Ok(bytes::Bytes::from_static(CUT_OFF_EVENT.as_bytes()))) });
    let body = body.into_data_stream().take_until(stop).chain(last);
    Response::from_parts(parts, axum::body::Body::from_stream(body))
}

/// A body that could not be read whole (over `server.max_body_bytes`:
/// 413; the connection failed: 400).
fn unreadable_body(e: &axum::Error) -> Response {
    let too_large = std::error::Error::source(e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
    let error = if too_large {
        ApiError::too_large()
    } else {
        ApiError::invalid(format!("the request body could not be read: {e}"), None)
    };
    error.into_response()
}

/// A body that could not be read, in OpenAI's shape rather than axum's
/// plain text: over `server.max_body_bytes` it is 413.
pub(super) fn unreadable(rejection: BytesRejection) -> Response {
    let error = match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::too_large(),
        status => ApiError::invalid(format!("the request body could not be read: {}", rejection.body_text()), None)
            .with_status(status),
    };
    error.into_response()
}

/// A handler's body and the engine, or the answer to give instead: the
/// body unreadable (as [`unreadable`]) or the engine not loaded yet (as
/// [`not_ready`]).
pub(super) fn body_and_engine(
    app: &App,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Result<(axum::body::Bytes, Arc<crate::engine::Engine>), Box<Response>> {
    let body = body.map_err(|e| Box::new(unreadable(e)))?;
    let engine = app.engine().map_err(|e| Box::new(not_ready(e)))?;
    Ok((body, engine.clone()))
}

/// 503 while the engine loads ([`ApiError::not_ready`]).
pub(crate) fn not_ready(why: NotReady) -> Response {
    ApiError::not_ready(why).into_response()
}
