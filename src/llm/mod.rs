//! The client of an upstream OpenAI-compatible model (`POST
//! {llm.base_url}/chat/completions`), non-streaming and streaming.
//!
//! Like any upstream: a pooled client (rustls), the key from
//! `TOOLROUTER_LLM_API_KEY` or `llm.api_key_file` (never logged), a
//! timeout on the whole answer (streaming: on the gap between two events),
//! a cap on the answer's size, and up to `llm.max_attempts` tries with
//! jittered exponential backoff after connect errors, 5xx and 429 —
//! never after part of a stream has been passed on.
//!
//! Every request has one time budget (a deadline: the HTTP request's
//! `server.request_timeout_ms`, an execute run's deadline): each attempt
//! gets what is left of it (at most `llm.timeout_ms`), and a retry happens
//! only if its wait fits. A timeout is not retried (a model that hung for
//! `llm.timeout_ms` would double the wait). A `Retry-After` up to
//! `llm.max_retry_wait_ms` is waited out; a longer one ends the request at
//! once with the model's 429 and its `Retry-After` (kept in
//! [`LlmError::Status`]) for the client to honour. Failures are
//! [`LlmError`]s the faces map to their protocol (502 for a bad answer,
//! 504 for a timeout).
//!
//! A stream is read as server-sent events: each `data:` line is a JSON
//! chunk, `data: [DONE]` ends it, and a `data: {"error": …}` event is the
//! model server's mid-stream error. Every way a stream can end is told
//! apart (`sse.rs`, hand-written for that): `[DONE]`, or the connection
//! closing (or going quiet for [`FINISHED_GRACE`]) once every choice has
//! its `finish_reason`, is a whole answer; a close before that is
//! [`LlmError::Truncated`], a reset a connect error, a silence longer than
//! `llm.timeout_ms` a timeout. A server that ignores `stream` and answers
//! with one JSON completion is read as that completion's chunks; any other
//! body (an HTML page…), and a stream that ends before its first event, is
//! a malformed answer, never an empty one. Failures are logged (without
//! the server's URL, which messages never carry either).

use std::pin::Pin;
use std::time::{Duration, Instant};

use bytes::Bytes;

use futures_util::future::BoxFuture;
use futures_util::{Stream, StreamExt};
use serde_json::Value;
use tracing::Instrument;

use crate::config::{Config, LlmConfig};

mod span;
pub(crate) mod sse;
mod transport;
pub mod wire;

pub use sse::FINISHED_GRACE;

pub use wire::{Chunk, Completion, Message, RequestBody, chunks_of};

/// Why a request to the model failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("no model server configured (llm.base_url)")]
    NotConfigured,
    #[error("the model server did not answer within {0} ms")]
    Timeout(u64),
    /// The request's (or run's) time budget ran out.
    #[error("the request's time budget ran out while waiting for the model")]
    Deadline,
    #[error("the model server is unreachable: {0}")]
    Connect(String),
    /// The model server answered with an error status.
    #[error("the model server answered {status}: {message}")]
    Status {
        status: u16,
        message: String,
        /// The server's `Retry-After`, passed on to the client.
        retry_after: Option<Duration>,
    },
    /// The answer is not what the protocol says (not JSON, no choices, too large…).
    #[error("the model server's answer is malformed: {0}")]
    Malformed(String),
    /// An error event in the middle of a stream.
    #[error("the model server failed mid-stream: {0}")]
    Stream(String),
    /// The stream closed before the model finished its answer.
    #[error("the model server's stream ended before the answer was finished: {0}")]
    Truncated(String),
}

/// Tokens spent, summed over the requests of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Usage {
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    pub(crate) total_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens += other.total_tokens;
    }
}

/// A stream of chat-completion chunks.
pub type Chunks = Pin<Box<dyn Stream<Item = Result<Chunk, LlmError>> + Send>>;

/// A chat model, as the faces and the engine use it: [`LlmClient`] (a
/// model server over HTTP) in production; a scripted model in tests, so
/// that the OpenAI face and execute mode are tested in process.
///
/// Requests are a [`RequestBody`] (a client's body, forwarded field by
/// field with whatever it holds; `stream` is the method's);
/// answers are typed ([`wire`]), read once where they arrive: the model
/// server's answer is checked to be a completion (choices, each with a
/// message) by the client, so no face and no test double reads raw JSON,
/// and unknown fields still pass through (`extra`).
///
/// Boxed futures rather than `async fn`: the faces hold an
/// `Arc<dyn ChatModel>`, and a trait with `async fn` is not object-safe.
pub trait ChatModel: Send + Sync {
    /// A non-streaming chat completion of `body`, given up at `deadline`.
    fn complete<'a>(&'a self, body: &'a RequestBody, deadline: Instant) -> BoxFuture<'a, Result<Completion, LlmError>>;
    /// A streaming chat completion of `body`: its chunks; the stream must
    /// start by `deadline`.
    fn stream<'a>(&'a self, body: &'a RequestBody, deadline: Instant) -> BoxFuture<'a, Result<Chunks, LlmError>>;
    /// The model server's list of models (`{"object": "list", "data": [...]}`).
    fn models(&self) -> BoxFuture<'_, Result<Value, LlmError>>;
}

impl ChatModel for LlmClient {
    fn complete<'a>(&'a self, body: &'a RequestBody, deadline: Instant) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(LlmClient::complete(self, body, deadline))
    }

    fn stream<'a>(&'a self, body: &'a RequestBody, deadline: Instant) -> BoxFuture<'a, Result<Chunks, LlmError>> {
        Box::pin(LlmClient::stream(self, body, deadline))
    }

    fn models(&self) -> BoxFuture<'_, Result<Value, LlmError>> {
        Box::pin(LlmClient::models(self))
    }
}

/// The model client: one per process.
pub struct LlmClient {
    http: transport::Http,
    config: LlmConfig,
}

impl LlmClient {
    /// The client of `config.llm` (`Err(NotConfigured)` without a base URL).
    pub fn new(config: &Config) -> Result<LlmClient, LlmError> {
        if config.llm.base_url.is_empty() {
            return Err(LlmError::NotConfigured);
        }
        crate::outbound::install_crypto();
        let key = config.llm_key().map_err(LlmError::Connect)?;
        let connect_timeout = Duration::from_millis(config.llm.timeout_ms);
        let http = transport::Http::new(&config.llm.base_url, key.as_ref().map(|k| k.expose()), connect_timeout)
            .map_err(LlmError::Connect)?;
        Ok(LlmClient { http, config: config.llm.clone() })
    }

    /// Sends `body` until a response starts, retrying what may be retried
    /// while the wait fits before `deadline`; the response, and when its
    /// attempt's `llm.timeout_ms` (or the deadline) runs out: a whole
    /// answer's body must come by then, not in a second `timeout_ms`.
    async fn send(&self, body: Bytes, deadline: Instant) -> Result<(transport::Response, Instant), LlmError> {
        let timeout = Duration::from_millis(self.config.timeout_ms);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(LlmError::Deadline);
            }
            let timed_out = if left < timeout { LlmError::Deadline } else { LlmError::Timeout(self.config.timeout_ms) };
            let attempt_end = Instant::now() + timeout.min(left);
            let error = match tokio::time::timeout(timeout.min(left), self.http.post_completions(body.clone())).await {
                Err(_) => return Err(timed_out),
                Ok(Err(e)) if e.timed_out => return Err(timed_out),
                Ok(Err(e)) => LlmError::Connect(e.text),
                Ok(Ok(r)) if r.status().is_success() => return Ok((r, attempt_end)),
                Ok(Ok(r)) => status_error(r).await,
            };
            let retry_after = match &error {
                LlmError::Status { status, .. } if *status != 429 && *status < 500 => return Err(error),
                LlmError::Status { retry_after, .. } => *retry_after,
                _ => None,
            };
            if attempt >= self.config.max_attempts {
                return Err(error);
            }
            let wait = match retry_after {
                Some(wait) if wait > Duration::from_millis(self.config.max_retry_wait_ms) => return Err(error),
                Some(wait) => wait,
                None => crate::outbound::backoff(self.config.backoff_ms, attempt),
            };
            // A retry that could not start before the deadline is not tried.
            if Instant::now() + wait >= deadline {
                return Err(error);
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// The model server's list of models (`GET {base_url}/models`), as it sent it.
    pub(crate) async fn models(&self) -> Result<Value, LlmError> {
        let timeout = Duration::from_millis(self.config.timeout_ms);
        let request = async {
            let response = self.http.get_models().await.map_err(|e| {
                if e.timed_out { LlmError::Timeout(self.config.timeout_ms) } else { LlmError::Connect(e.text) }
            })?;
            let status = response.status().as_u16();
            let bytes = read_capped(response, self.config.max_response_bytes).await?;
            if !(200..300).contains(&status) {
                let message = String::from_utf8_lossy(&bytes).chars().take(300).collect();
                return Err(LlmError::Status { status, message, retry_after: None });
            }
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(list) if list["data"].is_array() => Ok(list),
                _ => Err(LlmError::Malformed(format!(
                    "the model list is not {{\"data\": [...]}}: {}",
                    String::from_utf8_lossy(&bytes).chars().take(200).collect::<String>()
                ))),
            }
        };
        let result =
            tokio::time::timeout(timeout, request).await.unwrap_or(Err(LlmError::Timeout(self.config.timeout_ms)));
        if let Err(e) = &result {
            tracing::warn!("listing the model server's models failed: {e}");
        }
        result
    }

    /// A non-streaming chat completion (`stream` is forced off), given up
    /// at `deadline` (the request's or run's time budget).
    pub async fn complete(&self, body: &RequestBody, deadline: Instant) -> Result<Completion, LlmError> {
        let left = deadline.saturating_duration_since(Instant::now());
        let span = span::model_call(body);
        let call = tokio::time::timeout(left, self.complete_once(body, deadline)).instrument(span.clone());
        let result = call.await.unwrap_or(Err(LlmError::Deadline));
        match &result {
            Ok(completion) => {
                let finish = completion.choices.iter().filter_map(|c| c.finish_reason.as_deref()).collect();
                span::answered(&span, completion, finish, true);
            }
            Err(e) => {
                span::failed(&span, e);
                tracing::warn!("model request failed: {e}");
            }
        }
        result
    }

    async fn complete_once(&self, body: &RequestBody, deadline: Instant) -> Result<Completion, LlmError> {
        let (response, attempt_end) = self.send(body.to_json(false).into(), deadline).await?;
        let kind = content_type(&response);
        let bytes = self.read_answer(response, attempt_end).await?;
        // Read straight into the typed answer (no `Value` tree in between:
        // this is every request's path); only a refusal is read again, to
        // say what came instead.
        match serde_json::from_slice::<Completion>(&bytes) {
            // Faces read and write `choices[0].message`: it must be an object.
            Ok(completion) if completion.has_messages() => Ok(completion),
            Ok(_) => Err(LlmError::Malformed(format!(
                "no choices with a message in {}",
                String::from_utf8_lossy(&bytes).chars().take(200).collect::<String>()
            ))),
            Err(e) => Err(match serde_json::from_slice::<Value>(&bytes) {
                Ok(value) => LlmError::Malformed(format!(
                    "no choices with a message in {}",
                    value.to_string().chars().take(200).collect::<String>()
                )),
                Err(_) => LlmError::Malformed(format!(
                    "{kind}, not JSON ({e}): {}",
                    String::from_utf8_lossy(&bytes).chars().take(200).collect::<String>()
                )),
            }),
        }
    }

    /// A streaming chat completion (`stream` is forced on): its chunks.
    /// The stream must start by `deadline`; then each event must follow the
    /// last within `llm.timeout_ms`.
    pub async fn stream(&self, body: &RequestBody, deadline: Instant) -> Result<Chunks, LlmError> {
        let span = span::model_call(body);
        let result = self.stream_once(body, deadline).instrument(span.clone()).await;
        match result {
            Ok(chunks) => Ok(span::streamed(span, chunks)),
            Err(e) => {
                span::failed(&span, &e);
                tracing::warn!("model stream failed: {e}");
                Err(e)
            }
        }
    }

    async fn stream_once(&self, body: &RequestBody, deadline: Instant) -> Result<Chunks, LlmError> {
        // A stream's events each have `llm.timeout_ms` from the last.
        let (response, _) = self.send(body.to_json(true).into(), deadline).await?;
        let content_type =
            response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
        let gap = Duration::from_millis(self.config.timeout_ms);
        let cap = self.config.max_response_bytes;
        let mut bytes = http_body_util::BodyDataStream::new(response.into_body())
            .map(|item| item.map_err(sse::BoxError::from))
            .boxed();
        if !content_type.starts_with("text/event-stream") {
            // Some servers label their event streams `application/json`:
            // the body, not the label, says what it is.
            let start = self.body_start(&mut bytes).await?;
            if !looks_like_events(&start) {
                return self.not_a_stream(start, bytes, &content_type).await;
            }
            bytes = futures_util::stream::iter([Ok(Bytes::from(start))]).chain(bytes).boxed();
        }
        let events = sse::events(bytes, gap, cap);
        Ok(Box::pin(events.inspect(|item| {
            if let Err(e) = item {
                tracing::warn!("model stream failed: {e}");
            }
        })))
    }

    /// The body's first bytes, enough to tell JSON from events (past white
    /// space, a field name's length), or all of it, within the model's timeout.
    async fn body_start(&self, bytes: &mut sse::Bytes<Bytes>) -> Result<Vec<u8>, LlmError> {
        let timeout = Duration::from_millis(self.config.timeout_ms);
        let mut start = Vec::new();
        let told = |start: &[u8]| start.iter().filter(|b| !b.is_ascii_whitespace()).count() >= 6;
        while !told(&start) && start.len() <= self.config.max_response_bytes {
            match tokio::time::timeout(timeout, bytes.next()).await {
                Err(_) => return Err(LlmError::Timeout(self.config.timeout_ms)),
                Ok(None) => break,
                Ok(Some(Err(e))) => return Err(LlmError::Connect(format!("reading the answer: {e}"))),
                Ok(Some(Ok(piece))) => start.extend_from_slice(&piece),
            }
        }
        Ok(start)
    }

    /// A whole answer's body, by `until` (its attempt's end) and within the size cap.
    async fn read_answer(&self, response: transport::Response, until: Instant) -> Result<Vec<u8>, LlmError> {
        tokio::time::timeout_at(until.into(), read_capped(response, self.config.max_response_bytes))
            .await
            .map_err(|_| LlmError::Timeout(self.config.timeout_ms))?
    }

    /// The answer to a streamed request that is not an event stream (its
    /// first bytes `start`, then `rest`): one JSON completion (a server
    /// that ignores `stream`) becomes its chunks; anything else is malformed.
    async fn not_a_stream(&self, start: Vec<u8>, rest: sse::Bytes<Bytes>, kind: &str) -> Result<Chunks, LlmError> {
        let cap = self.config.max_response_bytes;
        let timeout = Duration::from_millis(self.config.timeout_ms);
        let read = rest.fold(Ok(start), |all: Result<Vec<u8>, LlmError>, piece| async move {
            let mut all = all?;
            all.extend_from_slice(&piece.map_err(|e| LlmError::Connect(format!("reading the answer: {e}")))?);
            match all.len() > cap {
                true => Err(LlmError::Malformed(format!("the answer is larger than {cap} bytes"))),
                false => Ok(all),
            }
        });
        let bytes =
            tokio::time::timeout(timeout, read).await.map_err(|_| LlmError::Timeout(self.config.timeout_ms))??;
        let completion = serde_json::from_slice::<Completion>(&bytes).ok().filter(Completion::has_messages);
        let Some(completion) = completion else {
            return Err(LlmError::Malformed(format!(
                "a streamed request was answered with {kind}, not an event stream: {}",
                String::from_utf8_lossy(&bytes).chars().take(200).collect::<String>()
            )));
        };
        let chunks: Vec<Result<Chunk, LlmError>> = chunks_of(&completion).into_iter().map(Ok).collect();
        Ok(Box::pin(futures_util::stream::iter(chunks)))
    }
}

/// Whether a body starting with `start` is server-sent events (a field
/// name and a colon, or a comment), whatever its label.
fn looks_like_events(start: &[u8]) -> bool {
    let text = String::from_utf8_lossy(start);
    let text = text.trim_start();
    ["data:", "event:", "id:", "retry:", ":"].iter().any(|field| text.starts_with(field))
}

/// An error status's [`LlmError::Status`]: the server's message (its
/// `error.message`, else the start of its body) and `Retry-After`. A
/// redirect is not followed: its message says so (not where it points,
/// which would show the model server's address).
async fn status_error(response: transport::Response) -> LlmError {
    let status = response.status().as_u16();
    if response.status().is_redirection() {
        let message = "a redirect, not followed: set llm.base_url to the address it points to".into();
        return LlmError::Status { status, message, retry_after: None };
    }
    let retry_after =
        response.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(crate::outbound::retry_after);
    let text = read_capped(response, 64 * 1024).await.unwrap_or_default();
    let message = serde_json::from_slice::<Value>(&text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(&text).chars().take(300).collect());
    LlmError::Status { status, message, retry_after }
}

/// A response's media type (`text/html`), or "no content type".
fn content_type(response: &transport::Response) -> String {
    let value = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    match value.split(';').next().map(str::trim).filter(|t| !t.is_empty()) {
        Some(t) => t.to_ascii_lowercase(),
        None => "no content type".into(),
    }
}

/// The body, up to `cap` bytes (more is an error).
async fn read_capped(response: transport::Response, cap: usize) -> Result<Vec<u8>, LlmError> {
    crate::outbound::read_capped(response, cap).await.map_err(|e| match e {
        crate::outbound::ReadError::TooLarge { .. } => {
            LlmError::Malformed(format!("the answer is larger than {cap} bytes"))
        }
        crate::outbound::ReadError::Read(e) => {
            LlmError::Connect(format!("reading the answer: {}", transport::cause(&e)))
        }
    })
}
