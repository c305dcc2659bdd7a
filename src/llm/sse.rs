//! Reading a model's stream: server-sent events, each `data:` line a JSON
//! chunk, `data: [DONE]` the end, `data: {"error": …}` the model server's
//! mid-stream error — and every way a stream can end told apart
//! ([`events`]).
//!
//! Hand-written rather than an event-stream parser crate
//! (`eventsource-stream`, the one reqwest users reach for, was weighed):
//! a parser yields events and then just ends, while what matters here is
//! *how* a stream ends — `[DONE]`; a close once every choice has its
//! finish reason (servers that send no `[DONE]`); a close before that (a
//! truncated answer, not a whole one); a reset; silence after the finish
//! (whole) or before it (a timeout); more bytes than the cap. That crate
//! also drops a last event whose blank line never came (a server that
//! closes right after its last `data:` line) and fails the stream on a
//! byte that is not UTF-8; both are model servers' habits this reader
//! survives. Model servers send one JSON object per `data:` line, so that
//! is what is read: a line at a time, other fields and comments skipped
//! (no multi-line `data`, which no model server sends).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::Value;

use super::LlmError;
use super::transport::cause;
use super::wire::Chunk;

/// How long a stream whose choices all have their `finish_reason` may
/// stay open for its usage chunk and `[DONE]`; after that it is whole.
pub const FINISHED_GRACE: Duration = Duration::from_secs(2);

/// Why a body's bytes stopped coming (the connection broke).
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A response body's bytes, as they arrive.
pub(crate) type Bytes<B> = Pin<Box<dyn Stream<Item = Result<B, BoxError>> + Send>>;

/// The chunks of a server-sent event stream, ended as it ended:
///
/// * `data: [DONE]`: the end;
/// * the connection closes, or stays quiet for [`FINISHED_GRACE`], after
///   every choice has its `finish_reason`: the end (some servers send no
///   `[DONE]`);
/// * the connection closes before that: [`LlmError::Truncated`] (before
///   the first event: [`LlmError::Malformed`]);
/// * the connection breaks: [`LlmError::Connect`];
/// * no event for `gap`: [`LlmError::Timeout`];
/// * more than `cap` bytes, an event that is not a JSON object:
///   [`LlmError::Malformed`]; an error event: [`LlmError::Stream`].
pub(crate) fn events<B: AsRef<[u8]> + Send + 'static>(
    bytes: Bytes<B>,
    gap: Duration,
    cap: usize,
) -> impl Stream<Item = Result<Chunk, LlmError>> + Send {
    let reader = Reader {
        bytes,
        gap,
        cap,
        buf: Vec::new(),
        total: 0,
        events: 0,
        finished: BTreeMap::new(),
        ended: false,
        done: false,
    };
    futures_util::stream::unfold(reader, |mut reader| async move {
        let item = reader.next().await?;
        Some((item, reader))
    })
}

struct Reader<B> {
    bytes: Bytes<B>,
    gap: Duration,
    cap: usize,
    /// Bytes received and not yet read as lines.
    buf: Vec<u8>,
    /// Bytes received in all.
    total: usize,
    /// Events read.
    events: usize,
    /// Whether each choice seen (by index) has its finish reason.
    finished: BTreeMap<u64, bool>,
    /// The body has no more bytes.
    ended: bool,
    /// The stream is over: nothing more is read.
    done: bool,
}

impl<B: AsRef<[u8]>> Reader<B> {
    /// The next chunk, or how the stream failed; `None` once it is over.
    async fn next(&mut self) -> Option<Result<Chunk, LlmError>> {
        if self.done {
            return None;
        }
        let item = self.read().await;
        self.done = !matches!(item, Some(Ok(_)));
        item
    }

    async fn read(&mut self) -> Option<Result<Chunk, LlmError>> {
        loop {
            while let Some(line) = self.line() {
                let Some(data) = line.strip_prefix("data:").map(str::trim) else { continue };
                if data == "[DONE]" {
                    return None;
                }
                self.events += 1;
                return Some(self.chunk(data));
            }
            let finished = self.all_finished();
            let wait = if finished { self.gap.min(FINISHED_GRACE) } else { self.gap };
            let received = if self.ended { Ok(None) } else { tokio::time::timeout(wait, self.bytes.next()).await };
            match received {
                Err(_) if finished => return None,
                Err(_) => return Some(Err(LlmError::Timeout(self.gap.as_millis() as u64))),
                Ok(None) if !self.buf.is_empty() => {
                    // A last line without its newline.
                    self.ended = true;
                    self.buf.push(b'\n');
                }
                Ok(None) if self.events == 0 => {
                    return Some(Err(LlmError::Malformed("the stream ended before its first event".into())));
                }
                Ok(None) if finished => return None,
                Ok(None) => {
                    let why = "the connection closed with no finish_reason and no [DONE]";
                    return Some(Err(LlmError::Truncated(why.into())));
                }
                Ok(Some(Err(_))) if finished => return None,
                Ok(Some(Err(e))) => {
                    return Some(Err(LlmError::Connect(format!("the stream broke: {}", cause(e.as_ref())))));
                }
                Ok(Some(Ok(bytes))) => {
                    self.total += bytes.as_ref().len();
                    if self.total > self.cap {
                        let cap = self.cap;
                        return Some(Err(LlmError::Malformed(format!("the stream is larger than {cap} bytes"))));
                    }
                    self.buf.extend_from_slice(bytes.as_ref());
                }
            }
        }
    }

    /// The next whole line received, trimmed.
    fn line(&mut self) -> Option<String> {
        let end = self.buf.iter().position(|&b| b == b'\n')?;
        let line: Vec<u8> = self.buf.drain(..=end).collect();
        Some(String::from_utf8_lossy(&line).trim().to_string())
    }

    /// The chunk an event's data holds, or the error it reports.
    fn chunk(&mut self, data: &str) -> Result<Chunk, LlmError> {
        match serde_json::from_str::<Value>(data) {
            Ok(v) if v.get("error").is_some() => {
                Err(LlmError::Stream(v["error"]["message"].as_str().unwrap_or("unknown error").to_string()))
            }
            Ok(v @ Value::Object(_)) => {
                let chunk = Chunk::deserialize(v).unwrap_or_default();
                self.note_finishes(&chunk);
                Ok(chunk)
            }
            Ok(_) => Err(LlmError::Malformed(format!("a stream event is not a JSON object: {data}"))),
            Err(e) => Err(LlmError::Malformed(format!("a stream event is not JSON ({e}): {data}"))),
        }
    }

    fn note_finishes(&mut self, chunk: &Chunk) {
        for (i, choice) in chunk.choices.iter().enumerate() {
            let finished = self.finished.entry(choice.index.unwrap_or(i as u64)).or_default();
            *finished |= choice.finish_reason.is_some();
        }
    }

    fn all_finished(&self) -> bool {
        !self.finished.is_empty() && self.finished.values().all(|f| *f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `events` makes of a body that arrives in `pieces`.
    async fn read(pieces: &[&[u8]]) -> Vec<Result<Chunk, LlmError>> {
        let pieces: Vec<Result<Vec<u8>, BoxError>> = pieces.iter().map(|p| Ok(p.to_vec())).collect();
        let bytes: Bytes<Vec<u8>> = Box::pin(futures_util::stream::iter(pieces));
        events(bytes, Duration::from_secs(5), 1 << 20).collect().await
    }

    fn text(item: &Result<Chunk, LlmError>) -> String {
        item.as_ref().unwrap().choices[0].delta.as_ref().unwrap().text()
    }

    #[tokio::test]
    async fn events_split_anywhere_comments_and_done() {
        let items = read(&[
            b": keep-alive\n\nevent: message\nda",
            b"ta: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"a\"}}]}\n\n",
            b"data: [DONE]\n\ndata: {\"choices\": []}\n\n",
        ])
        .await;
        assert_eq!(items.len(), 1, "{items:?}");
        assert_eq!(text(&items[0]), "a");
    }

    #[tokio::test]
    async fn a_last_line_without_its_newline_and_bytes_that_are_not_utf8_are_read() {
        let items = read(&[b"data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"caf\xff\"}, \
            \"finish_reason\": \"stop\"}]}"])
        .await;
        assert_eq!(items.len(), 1, "a whole answer, not a truncated one: {items:?}");
        assert_eq!(text(&items[0]), "caf\u{fffd}");
    }

    #[tokio::test]
    async fn an_error_event_ends_the_stream() {
        let items = read(&[
            b"data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"a\"}}]}\n",
            b"data: {\"error\": {\"message\": \"overloaded\"}}\n",
            b"data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"b\"}}]}\n",
        ])
        .await;
        assert_eq!(items.len(), 2, "{items:?}");
        assert_eq!(items[1], Err(LlmError::Stream("overloaded".into())));
    }
}
