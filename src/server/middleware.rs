//! What every request of `toolrouter serve` passes through before its
//! handler: an id, a time limit and a log line (`observe`), the API key
//! and the client's request rate (`auth`), and the body read whole
//! within its time and size limits (`read_body`). Their refusals are in
//! OpenAI's error shape.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::BytesRejection;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::app::App;
use super::mcp::ClientId;
use super::openai::ApiError;
use crate::engine::loading::NotReady;

/// The SHA-256 of a key, in hex (what `server.api_key_hashes` holds).
pub fn hash_key(key: &str) -> String {
    Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// When a request arrived (before its body was read): its time budget
/// counts from then, as `observe`'s limit does.
#[derive(Clone, Copy)]
pub(crate) struct Arrived(pub(crate) std::time::Instant);

pub(super) async fn auth(State(app): State<Arc<App>>, mut request: Request, next: Next) -> Response {
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
        let missing = "missing API key: send `Authorization: Bearer KEY`";
        return ApiError::status(StatusCode::UNAUTHORIZED, missing).into_response();
    };
    let hash = hash_key(key);
    if !app.key_hashes.contains(&hash) {
        return ApiError::status(StatusCode::UNAUTHORIZED, "invalid API key").into_response();
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
pub(super) async fn read_body(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let declared = request.headers().get("content-length").and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n > app.config.server.max_body_bytes) {
        // Refused before it is read: the client need not send it all.
        return ApiError::too_large().into_response();
    }
    let (parts, body) = request.into_parts();
    let limit = Duration::from_millis(app.config.server.body_timeout_ms);
    let read = axum::body::to_bytes(body, app.config.server.max_body_bytes);
    match tokio::time::timeout(limit, read).await {
        Ok(Ok(bytes)) => next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await,
        Ok(Err(e)) => unreadable_body(&e),
        Err(_) => {
            let message =
                format!("the request body did not arrive within {} ms (server.body_timeout_ms)", limit.as_millis());
            let mut response = ApiError::status(StatusCode::REQUEST_TIMEOUT, message).into_response();
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
    let message = format!(
        "rate limited: this key may make {} requests per second; retry after {:.2} s",
        app.config.server.client_rate,
        wait.as_secs_f64()
    );
    let retry_after = wait.as_secs_f64().ceil().max(1.0) as u64;
    Some(ApiError::rate_limited("rate_limited", message, Some(retry_after)).into_response())
}

/// Request ids for tower-http's `SetRequestIdLayer`: 16 random hex digits,
/// unless the client sent its own `x-request-id` (kept, so that a caller's
/// logs and toolrouter's can be joined).
#[derive(Clone, Copy)]
pub(super) struct RandomId;

impl tower_http::request_id::MakeRequestId for RandomId {
    fn make_request_id<B>(&mut self, _: &axum::http::Request<B>) -> Option<tower_http::request_id::RequestId> {
        let id = format!("{:016x}", fastrand::u64(..));
        axum::http::HeaderValue::from_str(&id).ok().map(tower_http::request_id::RequestId::new)
    }
}

/// Gives every request a time limit and a log line (id, method, path,
/// status, time; never a key or a body) and counts it. Hand-written
/// rather than tower-http's `TimeoutLayer` and `TraceLayer`: the timeout
/// must answer in OpenAI's error shape, race the shutdown's cut-off, and
/// the same place counts the request for `/metrics`.
pub(super) async fn observe(State(app): State<Arc<App>>, mut request: Request, next: Next) -> Response {
    let id = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("-").to_string();
    let (method, path) = (request.method().clone(), request.uri().path().to_string());
    let matched = request.extensions().get::<axum::extract::MatchedPath>().cloned();
    let started = std::time::Instant::now();
    request.extensions_mut().insert(Arrived(started));
    let limit = Duration::from_millis(app.config.server.request_timeout_ms);
    let mut cut_off = app.cut_off.subscribe();
    let response = tokio::select! {
        answered = tokio::time::timeout(limit, next.run(request)) => match answered {
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
    let route = matched.as_ref().map_or("other", |m| m.as_str());
    crate::metrics::global().request(route, response.status().as_u16(), started.elapsed().as_secs_f64());
    tracing::info!(request_id = %id, %method, %path, status = response.status().as_u16(),
        ms = format!("{:.1}", crate::units::ms(started.elapsed())), "request");
    response
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

/// 503 while the engine loads, saying how far it has got. Why a load
/// failed (paths, configuration) is for the log, not for whoever asks.
pub(super) fn not_ready(why: NotReady) -> Response {
    let why = match why {
        NotReady::Failed(_) => "toolrouter's engine failed to load; the server's log says why".to_string(),
        loading => loading.to_string(),
    };
    ApiError::server(StatusCode::SERVICE_UNAVAILABLE, "not_ready", why).with_retry_after(5).into_response()
}
