//! The Anthropic face: `POST /v1/messages` (Anthropic's Messages API, what
//! Claude Code, the Anthropic SDKs and `ChatAnthropic` speak), a codec over
//! the chat core as the Responses API is: the request is decoded into the
//! chat fields it means ([`request::to_chat`]) and answered by the core
//! exactly as a chat completion is (route, plan and execute modes, the
//! `toolrouter` field and `x-toolrouter-mode` header, checks and repairs,
//! limits); the typed answer is encoded as a `message` ([`output`]) or,
//! streamed, Anthropic's event stream ([`events`]). Every error of these routes, the middleware's too, is
//! rewritten into Anthropic's shape ([`anthropic_errors`]). Keys come as
//! `x-api-key` or `Authorization: Bearer`; `anthropic-version` is accepted
//! and not needed. What cannot be carried: docs/anthropic.md.

mod events;
mod output;
mod request;
mod search;

use std::sync::Arc;

use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::chat::Answer;
use crate::llm::wire::RequestBody;
use crate::server::error::ApiError;
use crate::server::middleware::{Requester, unreadable};
use crate::server::state::App;
use crate::server::translate;

/// The most an error body rewritten here may hold.
const MAX_ERROR_BYTES: usize = 1 << 20;

fn invalid(message: impl Into<String>) -> Response {
    let status = StatusCode::BAD_REQUEST;
    (status, axum::Json(output::error_body(status, &message.into()))).into_response()
}

/// The Anthropic face's routes (keys and limits are the floor's, around
/// them; [`errors_in_shape`] rewrites every error on their paths).
pub(crate) fn routes() -> axum::Router<Arc<App>> {
    axum::Router::new()
        .route("/v1/messages", axum::routing::post(messages))
        .route("/v1/messages/count_tokens", axum::routing::post(count_tokens))
}

/// Every error answered on the face's paths, the floor's too (a key, a
/// rate, a body too large, a time limit, the shutdown), in Anthropic's
/// shape: a layer outside every other.
pub(crate) async fn errors_in_shape(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let ours = request.uri().path().starts_with("/v1/messages");
    let response = next.run(request).await;
    if ours { anthropic_errors(response).await } else { response }
}

pub(crate) async fn messages(
    State(app): State<Arc<App>>,
    requester: Requester,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return unreadable(e),
    };
    let parsed: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return invalid(format!("the request body is not valid JSON: {e}")),
    };
    let (chat, search_tool) = match request::to_chat(&parsed) {
        Ok(chat) => chat,
        Err(e) => return invalid(e),
    };
    let model = parsed.get("model").cloned().unwrap_or(Value::Null);
    // Deferred tools without a search tool are searched too, shown as BM25's.
    let search_tool = search_tool.unwrap_or_default();
    match requester.ask(&app, RequestBody::from_fields(chat)).await {
        Ok(Answer::Whole(completion)) => {
            axum::Json(output::from_completion(*completion, &model, &search_tool)).into_response()
        }
        Ok(Answer::Streamed(chunks)) => {
            let keep_alive = std::time::Duration::from_millis(app.config.openai.keep_alive_ms);
            translate::event_stream(events::MessageEvents::new(model, search_tool), chunks, keep_alive)
        }
        Err(e) => in_shape(ApiError::from(e)),
    }
}

/// `error` in Anthropic's shape, with its status and headers
/// (`Retry-After`, `x-should-retry`).
fn in_shape(error: ApiError) -> Response {
    let body = output::error_body(error.status, &error.message).to_string();
    let (mut parts, _) = error.into_response().into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// `POST /v1/messages/count_tokens`: refused clearly (the model behind is a
/// chat-completions server; toolrouter has no tokenizer of it to count with).
pub(crate) async fn count_tokens() -> Response {
    invalid(
        "count_tokens is not served: the model behind toolrouter is an OpenAI-compatible server whose \
         tokenizer toolrouter does not have; the usage of each answer gives the tokens counted",
    )
}

/// Rewrites an error of the Anthropic routes (OpenAI's shape, as the
/// middleware and the chat pipeline answer) into Anthropic's, keeping its
/// status and headers (`Retry-After`).
pub(crate) async fn anthropic_errors(response: Response) -> Response {
    if response.status().is_success() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_ERROR_BYTES).await.unwrap_or_default();
    let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
    if parsed.as_ref().is_some_and(|v| v["type"] == "error") {
        return Response::from_parts(parts, axum::body::Body::from(bytes)); // already Anthropic's
    }
    let message = parsed
        .as_ref()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(&bytes).trim().to_string());
    let body = output::error_body(parts.status, &message).to_string();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Response::from_parts(parts, axum::body::Body::from(body))
}
