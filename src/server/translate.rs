//! What the faces served by translation share (the Responses API,
//! Anthropic's Messages): each turns its request into a chat-completions
//! request, has it served, and turns the answer back; a streamed answer's
//! chunks go through a [`Translator`] into the face's own event stream.

use std::time::Duration;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;

use crate::llm::wire::Chunk;

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
    /// The stream failed with `message`; nothing follows.
    fn fail(&mut self, message: &str) -> Vec<Bytes>;
}

/// Whether `answer` is an event stream (a streamed chat answer).
pub fn is_event_stream(answer: &Response) -> bool {
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
            None => Some((t.end(), None)),
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
