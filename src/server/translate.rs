//! What the faces served by translation share (the Responses API,
//! Anthropic's Messages): each turns its request into a chat-completions
//! request, has it served, and turns the answer back; a streamed answer's
//! chunks go through a [`Translator`] into the face's own event stream.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;

use crate::llm::wire::Chunk;
use crate::server::app::App;
use crate::server::middleware::Requester;

/// The id of the first `tool` message in `messages` (chat messages) that
/// answers no earlier assistant tool call: a model server refuses such a
/// conversation, so a translated face says which result is wrong first.
pub fn unanswerable_result(messages: &[serde_json::Value]) -> Option<String> {
    let mut called = std::collections::HashSet::new();
    for message in messages {
        if let Some(calls) = message.get("tool_calls").and_then(serde_json::Value::as_array) {
            called.extend(calls.iter().filter_map(|c| c.get("id")?.as_str()));
        }
        if message.get("role").and_then(serde_json::Value::as_str) == Some("tool") {
            let id = message.get("tool_call_id").and_then(serde_json::Value::as_str).unwrap_or_default();
            if !called.contains(id) {
                return Some(id.to_string());
            }
        }
    }
    None
}

/// The most a chat answer read back may hold.
pub const MAX_ANSWER_BYTES: usize = 256 << 20;

/// A face's event stream, made from chat chunks: each call gives the
/// events (whole server-sent events) to send, in order.
pub trait Translator: Send + 'static {
    /// Before the first chunk.
    fn start(&mut self) -> Vec<Bytes>;
    fn chunk(&mut self, chunk: &Chunk) -> Vec<Bytes>;
    /// After the last chunk.
    fn end(&mut self) -> Vec<Bytes>;
    /// Work to finish before [`Translator::end`] when the stream ended
    /// well (the Responses API keeps the response there).
    fn finishing(&mut self) -> Option<futures_util::future::BoxFuture<'static, ()>> {
        None
    }
    /// The stream failed with `message`; nothing follows.
    fn fail(&mut self, message: &str) -> Vec<Bytes>;
}

/// What the chat pipeline answered a translated request.
pub enum ChatAnswer {
    /// Not 200: an error in OpenAI's shape, as it came.
    Refused(Response),
    /// An event stream, for [`event_stream`]; the longest wait for a chunk.
    Streamed(Response, Duration),
    /// A whole chat completion's JSON, or why it could not be read.
    Whole(Result<Bytes, String>),
}

/// Serves `chat` (a chat-completions body) exactly as
/// `POST /v1/chat/completions` would, with the request's client, arrival
/// and headers.
pub(crate) async fn serve_as_chat(app: Arc<App>, requester: Requester, chat: &serde_json::Value) -> ChatAnswer {
    let gap = Duration::from_millis(app.config.server.request_timeout_ms.max(1));
    let body = Bytes::from(chat.to_string());
    let answer = crate::server::chat::chat_completions(axum::extract::State(app), requester, Ok(body)).await;
    if answer.status() != axum::http::StatusCode::OK {
        return ChatAnswer::Refused(answer);
    }
    if is_event_stream(&answer) {
        return ChatAnswer::Streamed(answer, gap);
    }
    ChatAnswer::Whole(axum::body::to_bytes(answer.into_body(), MAX_ANSWER_BYTES).await.map_err(|e| e.to_string()))
}

/// Whether `answer` is an event stream (a streamed chat answer).
fn is_event_stream(answer: &Response) -> bool {
    answer
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// The chat answer's event stream, translated as it comes (`gap`: the
/// longest wait for a chunk).
pub fn event_stream<T: Translator>(mut translator: T, answer: Response, gap: Duration) -> Response {
    let bytes = answer.into_body().into_data_stream().map(|r| r.map_err(|e| Box::new(e) as crate::llm::sse::BoxError));
    let chunks = crate::llm::sse::events(Box::pin(bytes), gap, MAX_ANSWER_BYTES);
    let start = translator.start();
    let rest = futures_util::stream::unfold(Some((translator, Box::pin(chunks))), |state| async move {
        let (mut t, mut chunks) = state?;
        match chunks.next().await {
            Some(Ok(chunk)) => Some((t.chunk(&chunk), Some((t, chunks)))),
            Some(Err(e)) => Some((t.fail(&e.to_string()), None)),
            None => {
                if let Some(finishing) = t.finishing() {
                    finishing.await;
                }
                Some((t.end(), None))
            }
        }
    });
    let events = futures_util::stream::iter([start])
        .chain(rest)
        .flat_map(|batch| futures_util::stream::iter(batch.into_iter().map(Ok::<_, std::convert::Infallible>)));
    let mut response = axum::body::Body::from_stream(events).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
