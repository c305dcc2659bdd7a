//! Streaming answers (`stream: true`) in OpenAI's chunk format.
//!
//! The request streams from the model too. Content deltas are passed on
//! as they arrive (so the first token reaches the client at once); tool
//! calls are gathered, checked against the tools' schemas when the model
//! is done, repaired through the model if needed (non-streaming), then
//! sent as deltas — id, type and name on a call's first delta, arguments
//! after — followed by the finish reason, a usage chunk (`choices: []`)
//! when `stream_options.include_usage` asked for one, and `data: [DONE]`.
//! A failure after the stream has started is a `data: {"error": …}` event.

use std::convert::Infallible;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::ApiError;
use super::route::{Prepared, prepare, repaired, report};
use super::validate::ChatRequest;
use crate::config::OpenAiConfig;
use crate::llm::LlmClient;

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
    llm: std::sync::Arc<LlmClient>,
    config: OpenAiConfig,
    weight: &(dyn Fn(&str, &str) -> f64 + Sync),
    planned: Option<Value>,
) -> Result<Response, ApiError> {
    let prepared = prepare(&req, &config, weight);
    let mut body = Value::Object(prepared.body.clone());
    if req.include_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    // Errors before the first event keep their HTTP status.
    let chunks = llm.stream(&body).await?;
    let (tx, rx) = mpsc::channel::<String>(BUFFER);
    tokio::spawn(relay(chunks, tx, req, llm, config, prepared, planned));
    Ok(event_stream(rx))
}

/// A `text/event-stream` response of the events `rx` receives.
pub(super) fn event_stream(rx: mpsc::Receiver<String>) -> Response {
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|event| (Ok::<_, Infallible>(event), rx))
    });
    ([("content-type", "text/event-stream"), ("cache-control", "no-cache")], Body::from_stream(events)).into_response()
}

/// One server-sent event carrying `value`.
pub(super) fn data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

async fn relay(
    mut chunks: crate::llm::Chunks,
    tx: mpsc::Sender<String>,
    req: ChatRequest,
    llm: std::sync::Arc<LlmClient>,
    config: OpenAiConfig,
    prepared: Prepared,
    planned: Option<Value>,
) {
    let (mut id, mut created) = (String::from("chatcmpl-toolrouter"), 0i64);
    let mut content = String::new();
    let mut calls: Vec<Gathered> = Vec::new();
    let mut finish = Value::Null;
    let mut usage = Value::Null;
    let mut role_sent = false;
    let chunk = |id: &str, created: i64, delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": req.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    while let Some(item) = chunks.next().await {
        let c = match item {
            Ok(c) => c,
            Err(e) => {
                let error = ApiError::from(e);
                let _ = tx.send(data(&error.body())).await;
                return;
            }
        };
        if let Some(i) = c["id"].as_str() {
            id = i.to_string();
        }
        created = c["created"].as_i64().unwrap_or(created);
        if c["usage"].is_object() {
            usage = c["usage"].clone();
        }
        let Some(choice) = c["choices"].get(0) else { continue };
        let delta = &choice["delta"];
        if !choice["finish_reason"].is_null() {
            finish = choice["finish_reason"].clone();
        }
        for t in delta["tool_calls"].as_array().into_iter().flatten() {
            let i = t["index"].as_u64().unwrap_or(0) as usize;
            if calls.len() <= i {
                calls.resize(i + 1, Gathered::default());
            }
            if let Some(v) = t["id"].as_str() {
                calls[i].id = v.to_string();
            }
            if let Some(v) = t["function"]["name"].as_str() {
                calls[i].name.push_str(v);
            }
            if let Some(v) = t["function"]["arguments"].as_str() {
                calls[i].arguments.push_str(v);
            }
        }
        let text = delta["content"].as_str().unwrap_or("");
        if !role_sent || !text.is_empty() {
            let mut d = json!({"content": text});
            if !role_sent {
                d["role"] = json!("assistant");
                role_sent = true;
            }
            content.push_str(text);
            if tx.send(data(&chunk(&id, created, d, Value::Null))).await.is_err() {
                return; // The client went away.
            }
        }
    }
    let mut repairs = 0;
    let mut final_calls: Vec<Value> = calls
        .iter()
        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
        .collect();
    if !final_calls.is_empty() {
        let message = json!({"role": "assistant", "content": if content.is_empty() { Value::Null } else { json!(content) },
            "tool_calls": final_calls});
        let answer = json!({"choices": [{"index": 0, "message": message, "finish_reason": finish}]});
        match repaired(&llm, &prepared, answer, &req.tools, &config).await {
            Ok((answer, n)) => {
                repairs = n;
                final_calls = answer["choices"][0]["message"]["tool_calls"].as_array().cloned().unwrap_or_default();
                finish = json!("tool_calls");
            }
            Err(e) => {
                let _ = tx.send(data(&e.body())).await;
                return;
            }
        }
    }
    for (i, call) in final_calls.iter().enumerate() {
        let head = json!({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""}}]});
        let args = json!({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]});
        let _ = tx.send(data(&chunk(&id, created, head, Value::Null))).await;
        let _ = tx.send(data(&chunk(&id, created, args, Value::Null))).await;
    }
    let finish = if finish.is_null() { json!("stop") } else { finish };
    let mut last = chunk(&id, created, json!({}), finish);
    last["toolrouter"] = report(&req, &prepared, repairs, planned);
    let _ = tx.send(data(&last)).await;
    if req.include_usage {
        let usage = if usage.is_object() {
            usage
        } else {
            json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
        };
        let u = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": req.model, "choices": [], "usage": usage});
        let _ = tx.send(data(&u)).await;
    }
    let _ = tx.send("data: [DONE]\n\n".into()).await;
}
