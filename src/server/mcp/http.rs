//! `/mcp`: rmcp's streamable HTTP service behind toolrouter's middleware,
//! with the fixes clients need: malformed JSON and rmcp's plain-text
//! refusals answered as JSON-RPC errors, a closed session answered 204.
//! rmcp routes the sessionless 2026-07-28 requests (`server/discover` and
//! every request carrying its `_meta`) without a session.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;

use super::McpServer;
use crate::config::Config;
use crate::engine::loading::{Loading, NotReady};
use crate::server::error::ApiError;
use crate::server::middleware::not_ready;
use crate::server::state::App;

/// rmcp's streamable HTTP service, its sessions on the engine `loading` loads.
pub(crate) type McpService = StreamableHttpService<McpServer, LocalSessionManager>;

/// The service of `config`: sessions idle for `mcp.session_idle_s` end,
/// hosts and body sizes are the server's.
pub(crate) fn service(config: &Config, loading: Arc<Loading>) -> McpService {
    // Both structs are non-exhaustive: set the idle timeout on defaults.
    let mut session_manager = LocalSessionManager::default();
    session_manager.session_config.keep_alive = Some(Duration::from_secs(config.mcp.session_idle_s.max(1)));
    let mcp_config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(config.server.mcp_hosts())
        .with_max_request_body_bytes(config.server.max_body_bytes)
        .with_json_response(true);
    StreamableHttpService::new(move || Ok(McpServer::new(loading.clone())), Arc::new(session_manager), mcp_config)
}

pub(crate) async fn mcp(
    State(app): State<Arc<App>>,
    axum::Extension(service): axum::Extension<Option<Arc<McpService>>>,
    request: Request,
) -> Response {
    let Some(service) = service else {
        return not_ready(NotReady::Failed("this server has no engine".into()));
    };
    // The body was read (and its size capped) by `read_body`.
    let closing = request.method() == axum::http::Method::DELETE;
    let request = if request.method() == axum::http::Method::POST {
        // Malformed JSON gets JSON-RPC's own parse error (rmcp would answer in plain text).
        let (parts, body) = request.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, app.config.server.max_body_bytes).await else {
            return ApiError::too_large().into_response();
        };
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
            return jsonrpc_error(StatusCode::BAD_REQUEST, &json!(null), -32700, &format!("parse error: {e}"));
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
