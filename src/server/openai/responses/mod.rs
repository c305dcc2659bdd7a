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
use crate::server::translate::{self, ChatAnswer};

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
    let whole = match translate::serve_as_chat(app, client, arrived, headers, &chat).await {
        ChatAnswer::Refused(answer) => return answer, // OpenAI's error shape, which the Responses API shares
        ChatAnswer::Streamed(answer, gap) => {
            return translate::event_stream(events::ResponseEvents::new(echo), answer, gap);
        }
        ChatAnswer::Whole(whole) => whole,
    };
    match whole.and_then(|bytes| output::from_completion(&echo, &bytes)) {
        Ok(response) => axum::Json(response).into_response(),
        Err(e) => ApiError::server(StatusCode::BAD_GATEWAY, "upstream_error", e).into_response(),
    }
}
