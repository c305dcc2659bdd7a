//! `POST /v1/tools/call`: plan mode's calls, made by toolrouter for the
//! client through the engine's one call pipeline; each way a call can end
//! mapped to an OpenAI-shaped answer or error.

use std::sync::Arc;

use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::engine::{CallRequest, Called};
use crate::server::error::ApiError;
use crate::server::middleware::ClientId;
use crate::server::middleware::body_and_engine;
use crate::server::state::App;
use crate::upstream::{CallError, ErrorClass};

/// `POST /v1/tools/call {name, arguments}`: a catalog API called for the
/// client (plan mode's calls), the compressed response back.
pub(crate) async fn tools_call(
    State(app): State<Arc<App>>,
    client: Option<axum::Extension<ClientId>>,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Response {
    let (body, engine) = match body_and_engine(&app, body) {
        Ok(found) => found,
        Err(refused) => return *refused,
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
    let call = CallRequest {
        function: name,
        arguments: &arguments,
        client: client.as_deref(),
        via: "tools_call",
        purpose: "",
        standalone: true,
    };
    match engine.call(call).await {
        Called::Unknown(unknown) => ApiError::not_found("unknown_tool", unknown.to_string(), Some("name"))
            .with("suggestions", json!(unknown.close))
            .into_response(),
        Called::Refused(problem) => ApiError::invalid(problem, Some("arguments")).into_response(),
        Called::NotAllowed(refused) => ApiError::not_allowed(refused.to_string(), Some("name")).into_response(),
        Called::Invalid(invalid) => ApiError::invalid(invalid.to_string(), Some("arguments"))
            .with("problems", serde_json::to_value(&invalid.problems).unwrap_or_default())
            .into_response(),
        Called::Failed(e) => failed(&e).into_response(),
        Called::Done { function, response, compressed, warnings } => {
            let body: serde_json::Value =
                serde_json::from_str(&compressed.text).unwrap_or(serde_json::Value::String(compressed.text.clone()));
            let mut answer = json!({"name": function, "status": response.status, "response": body,
                "characters": {"before": compressed.chars_before, "after": compressed.chars_after},
                "trace": response.trace});
            if !warnings.is_empty() {
                answer["warnings"] = serde_json::to_value(&warnings).unwrap_or_default();
            }
            axum::Json(answer).into_response()
        }
    }
}

/// A call that failed upstream: its status and `type` by how it failed,
/// its class as the code, with its `retry_after_ms` (also as
/// `Retry-After`, in whole seconds) and trace.
fn failed(e: &CallError) -> ApiError {
    let (status, kind) = match e.class {
        ErrorClass::RateLimited => (StatusCode::TOO_MANY_REQUESTS, "rate_limit_error"),
        ErrorClass::Timeout | ErrorClass::Deadline => (StatusCode::GATEWAY_TIMEOUT, "server_error"),
        ErrorClass::Refused | ErrorClass::Request => (StatusCode::BAD_REQUEST, "invalid_request_error"),
        ErrorClass::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "server_error"),
        _ => (StatusCode::BAD_GATEWAY, "server_error"),
    };
    let error = ApiError::new(status, kind, e.class.name(), e.message.clone())
        .with("retry_after_ms", json!(e.retry_after_ms))
        .with("trace", json!(e.trace));
    match e.retry_after_ms {
        Some(ms) => error.with_retry_after((ms / 1000.0).ceil().max(1.0) as u64),
        None => error,
    }
}
