//! `POST /v1/chat/completions`: the chat core's own shape on the wire. The
//! body is split into its fields ([`crate::chat::request::body_of`]) and
//! handed to the core ([`crate::chat::ChatCore`]: route, plan and execute
//! modes); a whole answer is its JSON, a streamed one a `data:` event per
//! chunk and `data: [DONE]`, a failure mid-stream a `data: {"error": …}`
//! event (nothing after it). While nothing else is sent (a model thinking,
//! an execute run calling APIs), a `: keep-alive` comment goes out every
//! `openai.keep_alive_ms`, so proxies and clients with read timeouts keep
//! the stream open. Errors are OpenAI's ([`ApiError`]).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use crate::chat::{Answer, ChatStream, Item};
use crate::server::error::ApiError;
use crate::server::middleware::{Requester, unreadable};
use crate::server::state::App;

pub(crate) async fn chat_completions(
    State(app): State<Arc<App>>,
    requester: Requester,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return unreadable(e),
    };
    let answer = match crate::chat::request::body_of(&body) {
        Ok(body) => requester.ask(&app, body).await,
        Err(e) => Err(e),
    };
    match answer {
        Ok(Answer::Whole(completion)) => axum::Json(completion).into_response(),
        Ok(Answer::Streamed(chunks)) => event_stream(chunks, app.config.openai.keep_alive_ms),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// The chunks as chat completions' event stream, with a `: keep-alive`
/// comment after every `keep_alive_ms` without an event.
fn event_stream(chunks: ChatStream, keep_alive_ms: u64) -> Response {
    let events = futures_util::stream::unfold(Some(chunks), |state| async move {
        let mut chunks = state?;
        let event = |json: String| Event::default().data(json);
        loop {
            return match chunks.next().await {
                Some(Ok(Item::Chunk(chunk))) => {
                    Some((event(serde_json::to_string(&chunk).unwrap_or_default()), Some(chunks)))
                }
                // Chat completions has no event for a search: the report names them.
                Some(Ok(Item::Searched(_))) => continue,
                Some(Err(e)) => Some((event(ApiError::from(e).body().to_string()), None)),
                None => Some((event("[DONE]".into()), None)),
            };
        }
    });
    let keep_alive = KeepAlive::new().interval(Duration::from_millis(keep_alive_ms)).text("keep-alive");
    Sse::new(events.map(Ok::<_, Infallible>)).keep_alive(keep_alive).into_response()
}
