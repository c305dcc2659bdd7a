//! `POST /v1/responses`: OpenAI's Responses API, served by translation. The
//! request becomes the chat-completions request it means
//! ([`request::to_chat`]) and is served exactly as one
//! ([`super::chat::chat_completions`]: route, plan and execute modes, the
//! `toolrouter` field and the `x-toolrouter-mode` header, tool-call checks
//! and repairs, limits and errors); its answer becomes a response object
//! ([`output`]) or, streamed, the Responses event stream ([`events`]).
//! Errors keep OpenAI's shape, which the Responses API shares. What cannot
//! be carried is listed in docs/openai.md.

mod events;
mod output;
mod request;

use std::sync::Arc;

use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::ApiError;
use crate::server::app::App;
use crate::server::mcp::ClientId;
use crate::server::middleware::{Arrived, unreadable};
use crate::server::translate;

pub(crate) async fn responses(
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
    let parsed: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return ApiError::invalid(format!("the request body is not valid JSON: {e}"), None).into_response(),
    };
    let chat = match request::to_chat(&parsed) {
        Ok(chat) => chat,
        Err(e) => return e.into_response(),
    };
    let echo = output::Echo::new(&parsed);
    let chat_body = axum::body::Bytes::from(chat.to_string());
    let gap = std::time::Duration::from_millis(app.config.server.request_timeout_ms.max(1));
    let answer = super::chat::chat_completions(State(app), client, arrived, headers, Ok(chat_body)).await;
    if answer.status() != StatusCode::OK {
        return answer; // OpenAI's error shape, which the Responses API shares
    }
    if translate::is_event_stream(&answer) {
        return translate::event_stream(events::ResponseEvents::new(echo), answer, gap);
    }
    let bytes = match axum::body::to_bytes(answer.into_body(), translate::MAX_ANSWER_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => return ApiError::server(StatusCode::BAD_GATEWAY, "upstream_error", e.to_string()).into_response(),
    };
    match output::from_completion(&echo, &bytes) {
        Ok(response) => axum::Json(response).into_response(),
        Err(e) => ApiError::server(StatusCode::BAD_GATEWAY, "upstream_error", e).into_response(),
    }
}
