//! The OpenAI-compatible face (DESIGN §9): `POST /v1/chat/completions`
//! and `GET /v1/models`, so that OpenAI SDK and LangChain clients work by
//! pointing `base_url` at toolrouter.
//!
//! Route mode (a request with `tools`, [`route`]): the client's tools are
//! narrowed to the `openai.max_tools` most relevant, the request goes to
//! the upstream model, and returned `tool_calls` are checked against the
//! original schemas and repaired through the model. Plan mode ([`plan`]):
//! the planner's and retrieval's catalog APIs are offered as the tools,
//! the same way; the client executes the calls (`POST /v1/tools/call`).
//! Execute mode ([`execute`]): toolrouter runs the request itself and
//! answers, its trace kept for `GET /v1/traces/{id}` ([`traces`]). A route
//! request without `tools` is forwarded unchanged.
//!
//! Errors use OpenAI's shape, `{"error": {"message", "type", "param",
//! "code"}}`, with the status a client expects (400, 401, 404, 413, 429,
//! 502, 504).

pub mod execute;
pub mod plan;
pub mod route;
pub mod stream;
pub mod traces;
pub mod validate;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::llm::LlmError;

/// An error in OpenAI's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<&'static str>,
}

impl ApiError {
    pub fn invalid(message: impl Into<String>, param: Option<&str>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param: param.map(str::to_string),
            code: None,
        }
    }

    pub fn new(status: StatusCode, kind: &'static str, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into(), kind, param: None, code: Some(code) }
    }

    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

impl From<LlmError> for ApiError {
    fn from(e: LlmError) -> ApiError {
        match e {
            LlmError::NotConfigured => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "no_upstream_model",
                "no upstream model is configured (llm.base_url)",
            ),
            LlmError::Timeout(_) | LlmError::Deadline => {
                ApiError::new(StatusCode::GATEWAY_TIMEOUT, "server_error", "upstream_timeout", e.to_string())
            }
            LlmError::Status { status: 429, .. } => {
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limit_error", "upstream_rate_limited", e.to_string())
            }
            LlmError::Status { status, .. } if (400..500).contains(&status) => ApiError {
                status: StatusCode::BAD_REQUEST,
                message: e.to_string(),
                kind: "invalid_request_error",
                param: None,
                code: Some("upstream_rejected"),
            },
            _ => ApiError::new(StatusCode::BAD_GATEWAY, "server_error", "upstream_error", e.to_string()),
        }
    }
}
