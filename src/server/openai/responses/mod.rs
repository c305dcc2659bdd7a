//! `POST /v1/responses`: OpenAI's Responses API, a codec over the chat
//! core. The request is decoded into the chat fields it means
//! ([`request::to_chat`]) and answered by the core exactly as a chat
//! completion is ([`crate::chat::ChatCore`]: route, plan and execute
//! modes, the `toolrouter` field and the `x-toolrouter-mode` header,
//! tool-call checks and repairs, limits and errors); its typed answer is
//! encoded as a response object ([`output`]) or, streamed, the Responses
//! event stream ([`events`]).
//! Errors keep OpenAI's shape, which the Responses API shares. What cannot
//! be carried is listed in docs/openai.md.
//!
//! Responses are kept unless `store: false` ([`store`]): a request naming
//! `previous_response_id` is answered on that response's conversation
//! followed by its own `input` (its `instructions` alone, as OpenAI does).

mod events;
mod held;
mod output;
mod request;
mod search;
pub(crate) mod store;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::chat::Answer;
use crate::llm::wire::RequestBody;
use crate::server::error::ApiError;
use crate::server::middleware::{Requester, unreadable};
use crate::server::state::App;
use crate::server::translate;
use store::{Keeper, ResponseStore};

pub(crate) async fn responses(
    State(app): State<Arc<App>>,
    axum::Extension(kept): axum::Extension<Arc<ResponseStore>>,
    requester: Requester,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return unreadable(e),
    };
    let mut parsed: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return ApiError::invalid(format!("the request body is not valid JSON: {e}"), None).into_response(),
    };
    let owner = requester.client.as_ref().map(|c| c.0.clone());
    let conversation = match conversation(&kept, &parsed, owner.as_deref()).await {
        Ok(items) => items,
        Err(e) => return e.into_response(),
    };
    let wanted = match parsed.get("store") {
        None | Some(Value::Null | Value::Bool(true)) => kept.enabled(),
        Some(Value::Bool(false)) => false,
        Some(_) => return ApiError::invalid("`store` must be true or false", Some("store")).into_response(),
    };
    let keeper = wanted.then(|| Keeper { store: kept.clone(), owner, items: conversation.clone() });
    if let Some(fields) = parsed.as_object_mut() {
        fields.insert("input".into(), Value::Array(conversation));
    }
    let chat = match request::to_chat(&parsed) {
        Ok(chat) => chat,
        Err(e) => return e.into_response(),
    };
    let mut echo = output::Echo::new(parsed);
    echo.store = wanted;
    let id = echo.id.clone();
    let completion = match requester.ask(&app, RequestBody::from_fields(chat)).await {
        Ok(Answer::Whole(completion)) => completion,
        Ok(Answer::Streamed(chunks)) => {
            let keep_alive = Duration::from_millis(app.config.openai.keep_alive_ms);
            return translate::event_stream(events::ResponseEvents::new(echo, keeper), chunks, keep_alive);
        }
        Err(e) => return ApiError::from(e).into_response(), // OpenAI's error shape, which the Responses API shares
    };
    let mut response = output::from_completion(echo, *completion);
    if let Some(keeper) = keeper {
        let output = response["output"].as_array().cloned().unwrap_or_default();
        response["store"] = Value::Bool(keeper.keep(id, &output).await);
    }
    axum::Json(response).into_response()
}

/// The conversation a request is answered on: the kept conversation of its
/// `previous_response_id` (the client's own), then its `input`.
async fn conversation(store: &ResponseStore, body: &Value, owner: Option<&str>) -> Result<Vec<Value>, ApiError> {
    let mut items = match body.get("previous_response_id") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(id)) => match store.get(id, owner).await {
            Some(kept) => kept.items.clone(),
            None => {
                let message = format!(
                    "Previous response with id '{id}' not found: responses are kept for openai.responses_ttl_s, \
                     per key, unless sent with `store: false`"
                );
                return Err(ApiError::not_found("previous_response_not_found", message, Some("previous_response_id")));
            }
        },
        Some(_) => {
            return Err(ApiError::invalid("`previous_response_id` must be a string", Some("previous_response_id")));
        }
    };
    items.extend(request::input_items(body)?);
    Ok(items)
}
