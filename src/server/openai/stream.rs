//! Streaming answers (`stream: true`) in OpenAI's chunk format.
//!
//! The request streams from the model too. Each chunk is passed on as it
//! arrives, as the model sent it (content, `reasoning_content`,
//! `logprobs`, `system_fingerprint`… all kept; the model renamed), except
//! that tool-call deltas and the finish reason are held back: tool calls
//! are gathered (by their own `index`, renumbered from 0), checked
//! against the tools' schemas when the model is done, repaired through
//! the model if needed (non-streaming), then sent as deltas — id, type and
//! name on a call's first delta, arguments after. A repaired turn's text
//! follows the text that already streamed (unless it is the same). Then
//! come the finish reason, a usage chunk
//! (`choices: []`, every model request's tokens) when
//! `stream_options.include_usage` asked for one, and `data: [DONE]`. A
//! failure after the stream has started is a `data: {"error": …}` event.
//! While nothing else is sent (a model thinking, an execute run calling
//! APIs), a `: keep-alive` comment goes out every `openai.keep_alive_ms`,
//! so proxies and clients with read timeouts keep the stream open.

use std::collections::BTreeMap;
use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::ApiError;
use super::request::ChatRequest;
use super::route::{Narrowed, Narrowing, Repaired, normalize_tool_calls, prepare, repaired, report, set_tokens};
use crate::config::OpenAiConfig;
use crate::llm::{ChatModel, Usage};

/// Events buffered between the model and a slow client.
const BUFFER: usize = 64;

/// A tool call gathered from its deltas.
#[derive(Default, Clone)]
struct Gathered {
    id: String,
    name: String,
    arguments: String,
}

/// Streams the answer to `req`.
pub async fn stream(
    req: ChatRequest,
    llm: std::sync::Arc<dyn ChatModel>,
    config: OpenAiConfig,
    narrowing: &Narrowing,
    planned: Option<Value>,
) -> Result<Response, ApiError> {
    let prepared = prepare(&req, &config, narrowing).await;
    let mut body = Value::Object(prepared.body.clone());
    if req.include_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    // Errors before the first event keep their HTTP status.
    let chunks = llm.stream(&body, req.deadline).await?;
    let (tx, rx) = mpsc::channel::<Event>(BUFFER);
    let keep_alive = config.keep_alive_ms;
    tokio::spawn(relay(chunks, tx, req, llm, config, prepared, planned));
    Ok(event_stream(rx, keep_alive))
}

/// A `text/event-stream` response of the events `rx` receives, with a
/// `: keep-alive` comment after every `keep_alive_ms` without one.
pub(super) fn event_stream(rx: mpsc::Receiver<Event>, keep_alive_ms: u64) -> Response {
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|event| (Ok::<_, Infallible>(event), rx))
    });
    let keep_alive = KeepAlive::new().interval(std::time::Duration::from_millis(keep_alive_ms)).text("keep-alive");
    Sse::new(events).keep_alive(keep_alive).into_response()
}

/// One server-sent event carrying `value`.
pub(super) fn data(value: &Value) -> Event {
    Event::default().data(value.to_string())
}

/// The event that ends an OpenAI stream.
pub(super) fn done() -> Event {
    Event::default().data("[DONE]")
}

/// What the model streamed, as far as the end of the stream needs it.
#[derive(Default)]
struct Seen {
    /// The chunks' top-level fields, latest kept (id, created, system_fingerprint…).
    head: Map<String, Value>,
    content: String,
    /// Tool calls by the model's own index.
    calls: BTreeMap<u64, Gathered>,
    finish: Value,
    usage: Value,
    /// Whether a delta with the role went out (the first one must carry it).
    role_sent: bool,
}

impl Seen {
    /// Takes in one chunk; returns what to pass on now (the chunk without
    /// tool-call deltas and finish reason), if anything is left of it.
    fn take(&mut self, mut chunk: Value, model: &str) -> Option<Value> {
        if !chunk.is_object() {
            return None; // The model client lets only objects through.
        }
        if chunk["usage"].is_object() {
            self.usage = chunk["usage"].clone();
        }
        if let Some(map) = chunk.as_object_mut() {
            map.remove("usage");
            for (k, v) in map.iter().filter(|(k, _)| *k != "choices") {
                self.head.insert(k.clone(), v.clone());
            }
        }
        chunk["model"] = json!(model);
        let choice = chunk.get_mut("choices").and_then(|c| c.get_mut(0))?;
        if let Some(finish) = choice.get_mut("finish_reason").filter(|f| !f.is_null()) {
            self.finish = finish.take();
        }
        let logprobs = choice.get("logprobs").is_some_and(|l| !l.is_null());
        let delta = choice.get_mut("delta").and_then(Value::as_object_mut)?;
        for t in delta.remove("tool_calls").as_ref().and_then(Value::as_array).into_iter().flatten() {
            let call = self.calls.entry(self.index_of(t)).or_default();
            if let Some(v) = t["id"].as_str() {
                call.id = v.to_string();
            }
            if let Some(v) = t["function"]["name"].as_str() {
                call.name.push_str(v);
            }
            match &t["function"]["arguments"] {
                Value::String(v) => call.arguments.push_str(v),
                Value::Null => {}
                other => call.arguments.push_str(&other.to_string()),
            }
        }
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.content.push_str(text);
        }
        // Anything left to say: text, reasoning, a role, a refusal, logprobs.
        let said = logprobs || delta.iter().any(|(k, v)| !(v.is_null() || k == "content" && v == ""));
        if !said && self.role_sent {
            return None;
        }
        self.with_role(delta);
        Some(chunk)
    }

    /// A tool-call delta's call: its `index`; without one (some servers
    /// omit it), the last call, or a new one when the delta brings a new id.
    fn index_of(&self, delta: &Value) -> u64 {
        if let Some(i) = delta["index"].as_u64() {
            return i;
        }
        match (self.calls.last_key_value(), delta["id"].as_str()) {
            (None, _) => 0,
            (Some((&last, call)), Some(id)) if !call.id.is_empty() && call.id != id => last + 1,
            (Some((&last, _)), _) => last,
        }
    }

    /// Puts the role on the first delta that goes out.
    fn with_role(&mut self, delta: &mut Map<String, Value>) {
        if !self.role_sent {
            delta.insert("role".into(), json!("assistant"));
            delta.entry("content").or_insert(json!(""));
            self.role_sent = true;
        }
    }

    /// A chunk of ours with the model's top-level fields.
    fn chunk(&mut self, model: &str, mut delta: Value, finish: Value) -> Value {
        if let Some(map) = delta.as_object_mut() {
            self.with_role(map);
        }
        let mut c = Value::Object(self.head.clone());
        c["object"] = json!("chat.completion.chunk");
        c["model"] = json!(model);
        c["choices"] = json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]);
        c
    }

    /// The gathered tool calls, numbered from 0, as an assistant message
    /// (with the streamed text).
    fn message(&self) -> Value {
        let calls: Vec<Value> = self
            .calls
            .values()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        let content = if self.content.is_empty() { Value::Null } else { json!(self.content) };
        json!({"role": "assistant", "content": content, "tool_calls": calls})
    }
}

async fn relay(
    mut chunks: crate::llm::Chunks,
    tx: mpsc::Sender<Event>,
    req: ChatRequest,
    llm: std::sync::Arc<dyn ChatModel>,
    config: OpenAiConfig,
    prepared: Narrowed,
    planned: Option<Value>,
) {
    let mut seen = Seen::default();
    while let Some(item) = chunks.next().await {
        let chunk = match item {
            Ok(c) => json!(c),
            Err(e) => {
                let _ = tx.send(data(&ApiError::from(e).body())).await;
                return;
            }
        };
        if let Some(out) = seen.take(chunk, &req.model)
            && tx.send(data(&out)).await.is_err()
        {
            return; // The client went away.
        }
    }
    let (mut repairs, mut repair_usage) = (0, Usage::default());
    let mut finish = seen.finish.take();
    let mut calls: Vec<Value> = Vec::new();
    if !seen.calls.is_empty() {
        let answer = json!({"choices": [{"index": 0, "message": seen.message(), "finish_reason": finish}]});
        let Repaired { mut answer, repairs: n, usage } =
            match repaired(llm.as_ref(), &prepared, answer, &req, &config).await {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(data(&e.body())).await;
                    return;
                }
            };
        (repairs, repair_usage) = (n, usage);
        finish = answer["choices"][0]["finish_reason"].take();
        let message = &mut answer["choices"][0]["message"];
        normalize_tool_calls(message);
        calls = message["tool_calls"].as_array().cloned().unwrap_or_default();
        // The repaired turn's text, unless it is what already streamed:
        // text that streamed stays (it cannot be taken back).
        let text = message["content"].as_str().unwrap_or("");
        if repairs > 0 && !text.is_empty() && text != seen.content {
            let _ = tx.send(data(&seen.chunk(&req.model, json!({"content": text}), Value::Null))).await;
        }
        if !calls.is_empty() {
            finish = json!("tool_calls");
        }
    }
    for (i, call) in calls.iter().enumerate() {
        let head = json!({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""}}]});
        let args = json!({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]});
        let _ = tx.send(data(&seen.chunk(&req.model, head, Value::Null))).await;
        let _ = tx.send(data(&seen.chunk(&req.model, args, Value::Null))).await;
    }
    let finish = if finish.is_null() { json!("stop") } else { finish };
    let mut last = seen.chunk(&req.model, json!({}), finish);
    last["toolrouter"] = report(&req, &prepared, repairs, planned);
    let _ = tx.send(data(&last)).await;
    if req.include_usage {
        let usage = serde_json::from_value::<crate::llm::wire::CompletionUsage>(seen.usage.clone());
        let mut tokens = usage.map(|u| u.tokens()).unwrap_or_default();
        tokens += repair_usage;
        let mut usage = seen.usage.clone();
        set_tokens(&mut usage, tokens);
        let mut u = Value::Object(seen.head.clone());
        u["object"] = json!("chat.completion.chunk");
        u["model"] = json!(req.model);
        u["choices"] = json!([]);
        u["usage"] = usage;
        let _ = tx.send(data(&u)).await;
    }
    let _ = tx.send(done()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_pass_on_whole_but_for_tool_calls_and_the_finish() {
        let mut seen = Seen::default();
        let first = json!({"id": "c1", "created": 5, "model": "up", "system_fingerprint": "fp_1",
            "choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": "think"},
                "logprobs": null, "finish_reason": null}]});
        let out = seen.take(first, "mine").unwrap();
        assert_eq!(out["model"], "mine");
        assert_eq!(out["system_fingerprint"], "fp_1");
        assert_eq!(out["choices"][0]["delta"]["reasoning_content"], "think");
        // A tool-call delta at index 1 (no 0): held back, nothing else to say.
        let call = json!({"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "t",
            "function": {"name": "f", "arguments": "{\"a\""}}]}, "finish_reason": null}]});
        assert!(seen.take(call, "mine").is_none());
        let more = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1,
            "function": {"arguments": ": 1}"}}]}, "finish_reason": "tool_calls"}]});
        assert!(seen.take(more, "mine").is_none());
        assert_eq!(seen.finish, "tool_calls");
        let message = seen.message();
        assert_eq!(message["tool_calls"].as_array().unwrap().len(), 1, "no phantom call at index 0");
        // Deltas without an index: the last call, or a new one for a new id.
        let mut other = Seen::default();
        for t in [
            json!({"id": "a", "function": {"name": "f", "arguments": "{"}}),
            json!({"function": {"arguments": "}"}}),
            json!({"id": "b", "function": {"name": "g", "arguments": "{}"}}),
        ] {
            other.take(json!({"choices": [{"index": 0, "delta": {"tool_calls": [t]}}]}), "m");
        }
        let two = other.message();
        assert_eq!(two["tool_calls"][0]["function"]["arguments"], "{}");
        assert_eq!(two["tool_calls"][1]["function"]["name"], "g");
        assert!(other.take(json!([1]), "m").is_none(), "a chunk that is not an object is dropped");
        assert_eq!(message["tool_calls"][0]["function"]["arguments"], "{\"a\": 1}");
        // Logprobs alone are worth passing on.
        let lp = json!({"choices": [{"index": 0, "delta": {"content": ""}, "logprobs": {"content": []}}]});
        assert!(seen.take(lp, "mine").is_some());
        let last = seen.chunk("mine", json!({}), json!("stop"));
        assert_eq!(last["system_fingerprint"], "fp_1");
        assert_eq!(last["object"], "chat.completion.chunk");
    }
}
