//! The error every face answers with, in OpenAI's shape: `{"error":
//! {"message", "type", "param", "code"}}` with the status a client expects
//! (400, 401, 404, 413, 429, 502, 504). The Anthropic face rewrites it
//! into Anthropic's shape on the way out; MCP turns it into its own. A
//! model server's 429 keeps its `Retry-After`. A 502 or 504 from the model
//! server comes after toolrouter's own retries within the request's time
//! budget, so it says `x-should-retry: false` (the header the OpenAI SDKs
//! obey): retries at two layers would multiply the wait.

use std::borrow::Cow;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::chat::ChatError;
use crate::engine::loading::NotReady;
use crate::llm::LlmError;

/// An error in OpenAI's shape, `{"error": {"message", "type", "param",
/// "code", …}}`, with its status and headers: every error the face
/// answers, the middleware's refusals and the MCP routes' errors outside
/// JSON-RPC are one of these, made by the constructors below.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
    /// `type`: `invalid_request_error`, `authentication_error`,
    /// `rate_limit_error` or `server_error`.
    pub(crate) kind: &'static str,
    pub(crate) param: Option<String>,
    pub(crate) code: Option<Cow<'static, str>>,
    /// Seconds the client should wait before retrying (`Retry-After`).
    pub(crate) retry_after: Option<u64>,
    /// `x-should-retry: false`: retrying at once would not help.
    pub(crate) no_retry: bool,
    /// More fields of the `error` object, after `code`: `/v1/tools/call`'s
    /// `suggestions`, `problems`, `retry_after_ms` and `trace` (boxed: most
    /// errors have none, and an error is returned often).
    pub(crate) more: Option<Box<Map<String, Value>>>,
}

impl ApiError {
    /// Any error: its status, `type`, `code` and message.
    pub(crate) fn new(
        status: StatusCode,
        kind: &'static str,
        code: impl Into<Cow<'static, str>>,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            kind,
            param: None,
            code: Some(code.into()),
            retry_after: None,
            no_retry: false,
            more: None,
        }
    }

    /// 400: the request is wrong; `param` says where (no code).
    pub(crate) fn invalid(message: impl Into<String>, param: Option<&str>) -> ApiError {
        ApiError {
            param: param.map(str::to_string),
            code: None,
            ..ApiError::new(StatusCode::BAD_REQUEST, INVALID, "", message)
        }
    }

    /// 404: something the request names does not exist.
    pub(crate) fn not_found(code: &'static str, message: impl Into<String>, param: Option<&str>) -> ApiError {
        ApiError { param: param.map(str::to_string), ..ApiError::new(StatusCode::NOT_FOUND, INVALID, code, message) }
    }

    /// 403: the caller's policy does not allow a tool (`permission_error`, `tool_not_allowed`).
    pub(crate) fn not_allowed(message: impl Into<String>, param: Option<&str>) -> ApiError {
        ApiError {
            param: param.map(str::to_string),
            ..ApiError::new(StatusCode::FORBIDDEN, "permission_error", "tool_not_allowed", message)
        }
    }

    /// toolrouter, or what is behind it, failed (`server_error`).
    pub(crate) fn server(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(status, "server_error", code, message)
    }

    /// 429: too many requests; `retry_after`: when to try again, in seconds.
    pub(crate) fn rate_limited(code: &'static str, message: impl Into<String>, retry_after: Option<u64>) -> ApiError {
        ApiError { retry_after, ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limit_error", code, message) }
    }

    /// A refusal named by its status: the code is the status's reason
    /// (`unauthorized`, `not_found`, `request_timeout`,
    /// `payload_too_large`…), the type `authentication_error` for 401.
    pub(crate) fn status(status: StatusCode, message: impl Into<String>) -> ApiError {
        let kind = if status == StatusCode::UNAUTHORIZED { "authentication_error" } else { INVALID };
        let code = status.canonical_reason().unwrap_or("error").to_ascii_lowercase().replace(' ', "_");
        ApiError::new(status, kind, code, message)
    }

    /// 413: the body is larger than `server.max_body_bytes`.
    pub(crate) fn too_large() -> ApiError {
        ApiError::status(StatusCode::PAYLOAD_TOO_LARGE, "the request body is larger than server.max_body_bytes")
    }

    pub(crate) fn with_status(self, status: StatusCode) -> ApiError {
        ApiError { status, ..self }
    }

    pub(crate) fn with_code(self, code: &'static str) -> ApiError {
        ApiError { code: Some(code.into()), ..self }
    }

    /// With `Retry-After: seconds`.
    pub(crate) fn with_retry_after(self, seconds: u64) -> ApiError {
        ApiError { retry_after: Some(seconds), ..self }
    }

    /// With `x-should-retry: false`.
    pub(crate) fn with_no_retry(self) -> ApiError {
        ApiError { no_retry: true, ..self }
    }

    /// With one more field in the `error` object.
    pub(crate) fn with(mut self, key: &str, value: Value) -> ApiError {
        self.more.get_or_insert_default().insert(key.into(), value);
        self
    }

    /// The body, `{"error": {…}}` (also a stream's error event).
    pub(crate) fn body(&self) -> Value {
        let mut error = json!({"message": self.message, "type": self.kind, "param": self.param, "code": self.code});
        if let (Some(fields), Some(more)) = (error.as_object_mut(), &self.more) {
            fields.extend(more.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        json!({ "error": error })
    }
}

/// The `type` of errors in the request.
const INVALID: &str = "invalid_request_error";

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

impl ApiError {
    /// An engine error on a request whose `param` is `param`: the client's
    /// fault 400, a failed index or model 503, anything else 500.
    pub(crate) fn from_engine(e: crate::engine::EngineError, param: &str) -> ApiError {
        use crate::engine::EngineError;
        match e {
            EngineError::BadInput(message) => ApiError::invalid(message, Some(param)),
            EngineError::Unavailable(message) => {
                ApiError::server(StatusCode::SERVICE_UNAVAILABLE, "search_unavailable", message)
            }
            EngineError::Internal(message) => {
                ApiError::server(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", message)
            }
        }
    }
}

impl ApiError {
    /// 503 while the engine loads, saying how far it has got. Why a load
    /// failed (paths, configuration) is for the log, not for whoever asks.
    pub(crate) fn not_ready(why: NotReady) -> ApiError {
        let why = match why {
            NotReady::Failed(_) => "toolrouter's engine failed to load; the server's log says why".to_string(),
            loading => loading.to_string(),
        };
        ApiError::server(StatusCode::SERVICE_UNAVAILABLE, "not_ready", why).with_retry_after(5)
    }
}

impl From<ChatError> for ApiError {
    fn from(e: ChatError) -> ApiError {
        let message = e.to_string();
        match e {
            ChatError::Invalid { message, param } => ApiError::invalid(message, param.as_deref()),
            ChatError::UnknownModel(_) => ApiError::not_found("model_not_found", message, Some("model")),
            ChatError::Model(e) => ApiError::from(e),
            ChatError::Engine(e) => ApiError::from_engine(e, "messages"),
            ChatError::NotReady(why) => ApiError::not_ready(why),
            ChatError::Busy(_) => ApiError::rate_limited("too_many_runs", message, Some(1)),
            ChatError::InvalidToolCalls { .. } => {
                ApiError::server(StatusCode::BAD_GATEWAY, "invalid_tool_call", message)
            }
            ChatError::RunFailed(_) => ApiError::server(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", message),
            ChatError::NotAllowed(_) => ApiError::not_allowed(message, Some("tool_choice")),
        }
    }
}

impl From<LlmError> for ApiError {
    fn from(e: LlmError) -> ApiError {
        let message = e.to_string();
        match e {
            LlmError::NotConfigured => ApiError::server(
                StatusCode::SERVICE_UNAVAILABLE,
                "no_upstream_model",
                "no upstream model is configured (llm.base_url)",
            ),
            LlmError::Timeout(_) | LlmError::Deadline => {
                ApiError::server(StatusCode::GATEWAY_TIMEOUT, "upstream_timeout", message).with_no_retry()
            }
            // Whole seconds, rounded up: waiting less would be refused again.
            LlmError::Status { status: 429, retry_after, .. } => ApiError::rate_limited(
                "upstream_rate_limited",
                message,
                retry_after.map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0)),
            ),
            LlmError::Status { status, .. } if (400..500).contains(&status) => {
                ApiError::invalid(message, None).with_code("upstream_rejected")
            }
            _ => ApiError::server(StatusCode::BAD_GATEWAY, "upstream_error", message).with_no_retry(),
        }
    }
}

/// A handler's path segment (`what`: "consent id", naming `param` if the
/// request field has a name), or the 400 that says why it is unreadable.
pub(crate) fn path_segment(
    path: Result<axum::extract::Path<String>, axum::extract::rejection::PathRejection>,
    what: &str,
    param: Option<&str>,
) -> Result<String, Box<Response>> {
    path.map(|axum::extract::Path(segment)| segment)
        .map_err(|e| Box::new(ApiError::invalid(format!("bad {what}: {}", e.body_text()), param).into_response()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Status, `Retry-After`, `x-should-retry` and body text of `error`.
    fn answered(error: ApiError) -> (u16, Option<String>, Option<String>, String) {
        let body = error.body().to_string();
        let response = error.into_response();
        let header = |name: &str| response.headers().get(name).map(|v| v.to_str().unwrap().to_string());
        (response.status().as_u16(), header("retry-after"), header("x-should-retry"), body)
    }

    #[test]
    fn every_kind_of_error_has_its_exact_body_and_headers() {
        let e = |kind: &str, code: &str, message: &str| {
            format!(r#"{{"error":{{"message":"{message}","type":"{kind}","param":null,"code":"{code}"}}}}"#)
        };
        let invalid = "invalid_request_error";
        let cases = [
            (ApiError::status(StatusCode::UNAUTHORIZED, "invalid API key"), 401, None, None,
                e("authentication_error", "unauthorized", "invalid API key")),
            (ApiError::too_large(), 413, None, None,
                e(invalid, "payload_too_large", "the request body is larger than server.max_body_bytes")),
            (ApiError::status(StatusCode::REQUEST_TIMEOUT, "late"), 408, None, None, e(invalid, "request_timeout", "late")),
            (ApiError::status(StatusCode::NOT_FOUND, "no such route"), 404, None, None,
                e(invalid, "not_found", "no such route")),
            (ApiError::rate_limited("rate_limited", "slow", Some(2)), 429, Some("2"), None,
                e("rate_limit_error", "rate_limited", "slow")),
            (ApiError::server(StatusCode::SERVICE_UNAVAILABLE, "not_ready", "loading").with_retry_after(5), 503,
                Some("5"), None, e("server_error", "not_ready", "loading")),
            (ApiError::from(LlmError::Timeout(5)), 504, None, Some("false"),
                e("server_error", "upstream_timeout", "the model server did not answer within 5 ms")),
            (ApiError::invalid("bad", Some("messages")), 400, None, None,
                r#"{"error":{"message":"bad","type":"invalid_request_error","param":"messages","code":null}}"#.into()),
            (ApiError::from_engine(crate::engine::EngineError::Unavailable("down".into()), "query"), 503, None, None,
                e("server_error", "search_unavailable", "down")),
            (ApiError::not_found("unknown_tool", "no `f`", Some("name")).with("suggestions", json!(["g"])), 404,
                None, None,
                r#"{"error":{"message":"no `f`","type":"invalid_request_error","param":"name","code":"unknown_tool","suggestions":["g"]}}"#.into()),
        ];
        for (error, status, retry_after, should_retry, body) in cases {
            let want = (status, retry_after.map(str::to_string), should_retry.map(str::to_string), body);
            assert_eq!(answered(error), want);
        }
    }
}
