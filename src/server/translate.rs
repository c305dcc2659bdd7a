//! What the faces whose shape is not chat's share (the Responses API,
//! Anthropic's Messages): each decodes its request into the chat core's
//! fields, has the core answer, and encodes the answer in its own shape; a
//! streamed answer's chunks go through a [`Translator`] into the face's
//! own event stream.

use std::time::Duration;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;

use crate::chat::search::Searched;
use crate::chat::{ChatStream, Item};
use crate::llm::wire::Chunk;

/// A fresh item or response id with its prefix (`resp_`, `msg_`, `fc_`,
/// `toolu_`, `srvtoolu_`…), as OpenAI's and Anthropic's look.
pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}{:016x}{:08x}", fastrand::u64(..), fastrand::u32(..))
}

/// A JSON object of `fields`, their values moved in. `json!` copies every
/// value it is given through `serde_json::to_value` (a deep copy of a
/// `Value`; measured at a fifth of the Responses face's decoding).
pub(crate) fn object<const N: usize>(fields: [(&str, serde_json::Value); N]) -> serde_json::Value {
    serde_json::Value::Object(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// The id of the first `tool` message in `messages` (chat messages) that
/// answers no earlier assistant tool call: a model server refuses such a
/// conversation, so a translated face says which result is wrong first.
pub(crate) fn unanswerable_result(messages: &[serde_json::Value]) -> Option<String> {
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

/// A face's event stream, made from chat chunks: each call gives the
/// events (whole server-sent events) to send, in order.
pub(crate) trait Translator: Send + 'static {
    /// Before the first chunk.
    fn start(&mut self) -> Vec<Bytes>;
    fn chunk(&mut self, chunk: &Chunk) -> Vec<Bytes>;
    /// A search the model made, answered by toolrouter.
    fn searched(&mut self, searched: &Searched) -> Vec<Bytes>;
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

/// The comment a face's event stream sends while nothing else is said.
const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// The chat core's chunks as the face's event stream, translated as they
/// come, with a `: keep-alive` comment after every `keep_alive` without
/// an event (an SSE comment, which every SSE client skips).
pub(crate) fn event_stream<T: Translator>(mut translator: T, chunks: ChatStream, keep_alive: Duration) -> Response {
    let start = translator.start();
    let rest = futures_util::stream::unfold(Some((translator, chunks)), move |state| async move {
        let (mut t, mut chunks) = state?;
        let next = match tokio::time::timeout(keep_alive, chunks.next()).await {
            Err(_) => return Some((vec![Bytes::from_static(KEEP_ALIVE)], Some((t, chunks)))),
            Ok(next) => next,
        };
        match next {
            Some(Ok(Item::Chunk(chunk))) => Some((t.chunk(&chunk), Some((t, chunks)))),
            Some(Ok(Item::Searched(searched))) => Some((t.searched(&searched), Some((t, chunks)))),
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
