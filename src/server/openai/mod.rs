//! The OpenAI-compatible face (docs/architecture.md §9): `POST /v1/chat/completions`
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
//! 502, 504). A model server's 429 keeps its `Retry-After`. A 502 or 504
//! from the model server comes after toolrouter's own retries within the
//! request's time budget, so it says `x-should-retry: false` (the header
//! the OpenAI SDKs obey): retries at two layers would multiply the wait.

pub mod chat;
pub mod execute;
pub mod models;
pub mod plan;
pub mod request;
pub mod route;
pub mod stream;
pub mod tools;
pub mod tools_call;
pub mod traces;

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
    /// Seconds the client should wait before retrying (`Retry-After`).
    pub retry_after: Option<u64>,
    /// `x-should-retry: false`: retrying at once would not help.
    pub no_retry: bool,
}

impl ApiError {
    pub fn invalid(message: impl Into<String>, param: Option<&str>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param: param.map(str::to_string),
            code: None,
            retry_after: None,
            no_retry: false,
        }
    }

    pub fn new(status: StatusCode, kind: &'static str, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            kind,
            param: None,
            code: Some(code),
            retry_after: None,
            no_retry: false,
        }
    }

    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        let headers = response.headers_mut();
        if let Some(seconds) = self.retry_after {
            headers.insert("retry-after", seconds.into());
        }
        if self.no_retry {
            headers.insert("x-should-retry", axum::http::HeaderValue::from_static("false"));
        }
        response
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
            LlmError::Timeout(_) | LlmError::Deadline => ApiError {
                no_retry: true,
                ..ApiError::new(StatusCode::GATEWAY_TIMEOUT, "server_error", "upstream_timeout", e.to_string())
            },
            LlmError::Status { status: 429, retry_after, .. } => ApiError {
                // Whole seconds, rounded up: waiting less would be refused again.
                retry_after: retry_after.map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0)),
                ..ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limit_error",
                    "upstream_rate_limited",
                    e.to_string(),
                )
            },
            LlmError::Status { status, .. } if (400..500).contains(&status) => {
                ApiError { code: Some("upstream_rejected"), ..ApiError::invalid(e.to_string(), None) }
            }
            _ => ApiError {
                no_retry: true,
                ..ApiError::new(StatusCode::BAD_GATEWAY, "server_error", "upstream_error", e.to_string())
            },
        }
    }
}
