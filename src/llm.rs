//! The client of an upstream OpenAI-compatible model (`POST
//! {llm.base_url}/chat/completions`), non-streaming and streaming.
//!
//! Like any upstream: a pooled client (rustls), the key from
//! `TOOLROUTER_LLM_API_KEY` or `llm.api_key_file` (never logged), a
//! timeout on the whole answer (streaming: on the gap between two events),
//! a cap on the answer's size, and up to `llm.max_attempts` tries with
//! jittered exponential backoff after connect errors, timeouts, 5xx and
//! 429 (honouring `Retry-After`) — never after part of a stream has been
//! passed on. Failures are [`LlmError`]s the faces map to their protocol
//! (502 for a bad answer, 504 for a timeout).
//!
//! A stream is read as server-sent events: each `data:` line is a JSON
//! chunk, `data: [DONE]` ends it, and a `data: {"error": …}` event is the
//! model server's mid-stream error.

use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use serde_json::Value;

use crate::config::{Config, LlmConfig, Secret};

/// Why a request to the model failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("no model server configured (llm.base_url)")]
    NotConfigured,
    #[error("the model server did not answer within {0} ms")]
    Timeout(u64),
    /// The run the request belongs to ran out of time.
    #[error("the run's deadline passed while waiting for the model")]
    Deadline,
    #[error("the model server is unreachable: {0}")]
    Connect(String),
    /// The model server answered with an error status.
    #[error("the model server answered {status}: {message}")]
    Status { status: u16, message: String },
    /// The answer is not what the protocol says (not JSON, no choices, too large…).
    #[error("the model server's answer is malformed: {0}")]
    Malformed(String),
    /// An error event in the middle of a stream.
    #[error("the model server failed mid-stream: {0}")]
    Stream(String),
}

/// Tokens spent, summed over the requests of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens += other.total_tokens;
    }
}

impl Usage {
    /// Adds an answer's `usage` (absent or partial fields count 0).
    pub fn add(&mut self, answer: &Value) {
        let n = |k: &str| answer["usage"][k].as_u64().unwrap_or(0);
        self.prompt_tokens += n("prompt_tokens");
        self.completion_tokens += n("completion_tokens");
        self.total_tokens += n("total_tokens");
    }
}

/// A stream of chat-completion chunks.
pub type Chunks = Pin<Box<dyn Stream<Item = Result<Value, LlmError>> + Send>>;

/// The model client: one per process.
pub struct LlmClient {
    http: reqwest::Client,
    url: String,
    key: Option<Secret>,
    config: LlmConfig,
}

impl LlmClient {
    /// The client of `config.llm` (`Err(NotConfigured)` without a base URL).
    pub fn new(config: &Config) -> Result<LlmClient, LlmError> {
        if config.llm.base_url.is_empty() {
            return Err(LlmError::NotConfigured);
        }
        crate::upstream::install_crypto();
        let http = reqwest::Client::builder()
            .user_agent(crate::upstream::USER_AGENT)
            .connect_timeout(Duration::from_millis(config.llm.timeout_ms))
            .build()
            .map_err(|e| LlmError::Connect(e.to_string()))?;
        let key = config.llm_key().map_err(LlmError::Connect)?;
        let url = format!("{}/chat/completions", config.llm.base_url.trim_end_matches('/'));
        Ok(LlmClient { http, url, key, config: config.llm.clone() })
    }

    fn request(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut req = self.http.post(&self.url).header("content-type", "application/json").body(body.to_string());
        if let Some(key) = &self.key {
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", key.expose()))
                .unwrap_or_else(|_| reqwest::header::HeaderValue::from_static(""));
            value.set_sensitive(true);
            req = req.header("authorization", value);
        }
        req
    }

    /// Sends `body` until a response starts, retrying what may be retried.
    async fn send(&self, body: &Value) -> Result<reqwest::Response, LlmError> {
        let timeout = Duration::from_millis(self.config.timeout_ms);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = tokio::time::timeout(timeout, self.request(body).send()).await;
            let (error, retry_after) = match result {
                Err(_) => (LlmError::Timeout(self.config.timeout_ms), None),
                Ok(Err(e)) if e.is_timeout() => (LlmError::Timeout(self.config.timeout_ms), None),
                Ok(Err(e)) => (LlmError::Connect(e.to_string()), None),
                Ok(Ok(r)) if r.status().is_success() => return Ok(r),
                Ok(Ok(r)) => {
                    let status = r.status().as_u16();
                    let retry_after = r
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok()?.trim().parse::<f64>().ok())
                        .map(Duration::from_secs_f64);
                    let text = read_capped(r, 64 * 1024).await.unwrap_or_default();
                    let message = serde_json::from_slice::<Value>(&text)
                        .ok()
                        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
                        .unwrap_or_else(|| String::from_utf8_lossy(&text).chars().take(300).collect());
                    let error = LlmError::Status { status, message };
                    if status != 429 && status < 500 {
                        return Err(error);
                    }
                    (error, retry_after)
                }
            };
            if attempt >= self.config.max_attempts {
                return Err(error);
            }
            let base = self.config.backoff_ms as f64 * 2f64.powi(attempt as i32 - 1);
            let wait = retry_after.unwrap_or(Duration::from_secs_f64(base * (0.5 + fastrand::f64()) / 1000.0));
            tokio::time::sleep(wait.min(timeout)).await;
        }
    }

    /// [`LlmClient::complete`], given up at `deadline` (a run's, not the model's own timeout).
    pub async fn complete_by(&self, body: &Value, deadline: std::time::Instant) -> Result<Value, LlmError> {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match tokio::time::timeout(left, self.complete(body)).await {
            Ok(result) => result,
            Err(_) => Err(LlmError::Deadline),
        }
    }

    /// A non-streaming chat completion (`stream` is forced off).
    pub async fn complete(&self, body: &Value) -> Result<Value, LlmError> {
        let mut body = body.clone();
        body["stream"] = Value::Bool(false);
        if let Some(map) = body.as_object_mut() {
            map.remove("stream_options");
        }
        let response = self.send(&body).await?;
        let timeout = Duration::from_millis(self.config.timeout_ms);
        let bytes = tokio::time::timeout(timeout, read_capped(response, self.config.max_response_bytes))
            .await
            .map_err(|_| LlmError::Timeout(self.config.timeout_ms))??;
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            LlmError::Malformed(format!(
                "not JSON ({e}): {}",
                String::from_utf8_lossy(&bytes).chars().take(200).collect::<String>()
            ))
        })?;
        match value["choices"].as_array() {
            Some(choices) if !choices.is_empty() => Ok(value),
            _ => Err(LlmError::Malformed(format!(
                "no choices in {}",
                value.to_string().chars().take(200).collect::<String>()
            ))),
        }
    }

    /// A streaming chat completion (`stream` is forced on): its chunks.
    pub async fn stream(&self, body: &Value) -> Result<Chunks, LlmError> {
        let mut body = body.clone();
        body["stream"] = Value::Bool(true);
        let response = self.send(&body).await?;
        let gap = Duration::from_millis(self.config.timeout_ms);
        let cap = self.config.max_response_bytes;
        let state = (response.bytes_stream().boxed(), Vec::<u8>::new(), 0usize, false);
        Ok(Box::pin(futures_util::stream::unfold(state, move |(mut bytes, mut buf, mut total, done)| async move {
            if done {
                return None;
            }
            loop {
                // One complete event line in the buffer?
                if let Some(end) = buf.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=end).collect();
                    let line = String::from_utf8_lossy(&line).trim().to_string();
                    let Some(data) = line.strip_prefix("data:").map(str::trim) else { continue };
                    if data == "[DONE]" {
                        return None;
                    }
                    let item = match serde_json::from_str::<Value>(data) {
                        Ok(v) if v.get("error").is_some() => {
                            let message = v["error"]["message"].as_str().unwrap_or("unknown error").to_string();
                            return Some((Err(LlmError::Stream(message)), (bytes, buf, total, true)));
                        }
                        Ok(v) => Ok(v),
                        Err(e) => Err(LlmError::Malformed(format!("a stream event is not JSON ({e}): {data}"))),
                    };
                    let failed = item.is_err();
                    return Some((item, (bytes, buf, total, failed)));
                }
                match tokio::time::timeout(gap, bytes.next()).await {
                    Err(_) => return Some((Err(LlmError::Timeout(gap.as_millis() as u64)), (bytes, buf, total, true))),
                    Ok(None) if buf.is_empty() => return None,
                    Ok(None) => buf.push(b'\n'),
                    Ok(Some(Err(e))) => {
                        return Some((
                            Err(LlmError::Connect(format!("the stream broke: {e}"))),
                            (bytes, buf, total, true),
                        ));
                    }
                    Ok(Some(Ok(chunk))) => {
                        total += chunk.len();
                        if total > cap {
                            let e = LlmError::Malformed(format!("the stream is larger than {cap} bytes"));
                            return Some((Err(e), (bytes, buf, total, true)));
                        }
                        buf.extend_from_slice(&chunk);
                    }
                }
            }
        })))
    }
}

/// The body, up to `cap` bytes (more is an error).
async fn read_capped(mut response: reqwest::Response, cap: usize) -> Result<Vec<u8>, LlmError> {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| LlmError::Connect(format!("reading the answer: {e}")))? {
        if out.len() + chunk.len() > cap {
            return Err(LlmError::Malformed(format!("the answer is larger than {cap} bytes")));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}
