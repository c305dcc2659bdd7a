//! Execute mode: the request goes to [`crate::engine::solve`], the answer
//! comes back as a chat completion (or its chunks), the trace rides in the
//! `toolrouter` field and is kept for `GET /v1/traces/{id}`.
//!
//! The run is a task of its own, so a client that goes away does not cut
//! it short: its calls still finish and the graph still learns from them.
//! A streamed answer sends its first chunk (the role) at once, then the
//! answer when the run is done (the faces keep the stream alive between).

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::error::ChatError;
use super::request::ChatRequest;
use super::stream::{Sent, received};
use super::traces::Traces;
use super::{Answer, ChatStream, Item};
use crate::cluster::Cluster;
use crate::config::{Config, OpenAiConfig};
use crate::engine::Engine;
use crate::engine::solve::{self, Solution};
use crate::llm::wire::{Choice, Chunk, ChunkChoice, Completion, Fields, Message};
use crate::llm::{ChatModel, LlmError};

/// What execute runs share: the upstream model, the kept traces and the
/// cap on runs in flight.
pub(crate) struct Runner {
    pub(crate) llm: Arc<dyn ChatModel>,
    pub(crate) traces: Traces,
    runs: Arc<tokio::sync::Semaphore>,
}

impl Runner {
    /// A runner whose traces are shared through `cluster`, if any.
    pub(crate) fn new(llm: Arc<dyn ChatModel>, config: &Config, cluster: Option<Arc<Cluster>>) -> Runner {
        let traces = Traces::shared(config.openai.traces, cluster, &config.cluster);
        Runner { llm, traces, runs: Arc::new(tokio::sync::Semaphore::new(config.openai.max_runs)) }
    }
}

/// Answers `req` by executing it.
pub(crate) async fn respond(
    engine: Arc<Engine>,
    runner: Arc<Runner>,
    req: ChatRequest,
    client: Option<String>,
    config: &OpenAiConfig,
) -> Result<Answer, ChatError> {
    let messages = conversation(req.messages()?);
    if !messages.iter().any(|m| m.is("user")) {
        return Err(ChatError::invalid("execute mode needs a user message with text", Some("messages")));
    }
    // Held by the run's task until it ends, even if the client is gone.
    let Ok(permit) = runner.runs.clone().try_acquire_owned() else {
        return Err(ChatError::Busy(config.max_runs));
    };
    let request = solve::Request {
        messages,
        model: req.upstream_model.clone(),
        client: client.clone(),
        deadline: std::time::Duration::from_millis(config.execute_deadline_ms),
        decompose: req.decompose,
        repair_attempts: config.repair_attempts,
    };
    let trace_id = format!("{:016x}", fastrand::u64(..));
    let id = format!("chatcmpl-{trace_id}");
    let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let span = tracing::info_span!(target: crate::telemetry::TARGET, "execute",
        "otel.name" = "invoke_agent toolrouter", "gen_ai.operation.name" = "invoke_agent",
        "gen_ai.agent.name" = "toolrouter", "toolrouter.trace_id" = trace_id.as_str());
    let run = tokio::spawn(async move {
        let result = solve::solve(&engine, &runner.llm, &request).instrument(span).await;
        drop(permit);
        if let Ok(execution) = &result {
            runner.traces.insert_shared(trace_id.clone(), client, report(&trace_id, execution)).await;
        }
        result.map(|execution| (trace_id, execution))
    });
    // The answer's top-level fields.
    let head = Chunk { id: Some(id), created: Some(created), model: Some(req.model.clone()), ..Chunk::default() };
    if !req.stream {
        let (trace_id, execution) = finished(run).await?;
        return Ok(Answer::Whole(Box::new(completion(head, &trace_id, &execution))));
    }
    Ok(Answer::Streamed(streamed(head, run, req.include_usage)))
}

/// A run in its task: the trace's id and the run, once done.
type Run = tokio::task::JoinHandle<Result<(String, Solution), LlmError>>;

/// What became of the run.
async fn finished(run: Run) -> Result<(String, Solution), ChatError> {
    match run.await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(e)) => Err(ChatError::Model(e)),
        Err(e) => Err(ChatError::RunFailed(e.to_string())),
    }
}

/// The answer as a chat completion with `head`'s id, created and model.
fn completion(head: Chunk, trace_id: &str, execution: &Solution) -> Completion {
    let choice = Choice {
        index: Some(0),
        message: Some(Message::new("assistant", execution.answer.clone())),
        finish_reason: Some("stop".into()),
        ..Choice::default()
    };
    let mut answer = Completion {
        id: head.id,
        object: Some("chat.completion".into()),
        created: head.created,
        model: head.model,
        choices: vec![choice],
        usage: Some(execution.usage.into()),
        extra: Fields::new(),
    };
    answer.extra.insert("toolrouter".into(), report(trace_id, execution));
    answer
}

/// The answer as a stream: the role at once, then the answer, the finish
/// (with the `toolrouter` field) and the usage if asked for.
fn streamed(head: Chunk, run: Run, include_usage: bool) -> ChatStream {
    let (tx, rx) = mpsc::channel::<Sent>(4);
    tokio::spawn(async move {
        let chunk = |delta: Message, finish: Option<&str>| {
            Chunk::new(&head, vec![ChunkChoice::new(delta, finish.map(str::to_string))])
        };
        let _ = tx.send(Ok(Item::Chunk(chunk(Message::new("assistant", ""), None)))).await;
        let (trace_id, execution) = match finished(run).await {
            Ok(done) => done,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        let _ = tx.send(Ok(Item::Chunk(chunk(Message::text_delta(execution.answer.clone()), None)))).await;
        let mut last = chunk(Message::default(), Some("stop"));
        last.extra.insert("toolrouter".into(), report(&trace_id, &execution));
        let _ = tx.send(Ok(Item::Chunk(last))).await;
        if include_usage {
            let _ = tx.send(Ok(Item::Chunk(Chunk::usage(&head, execution.usage.into())))).await;
        }
    });
    received(rx)
}

/// The `toolrouter` field: the mode, the trace's id, how it ended and the trace.
fn report(trace_id: &str, execution: &Solution) -> Value {
    json!({"mode": "execute", "trace_id": trace_id, "status": execution.status, "trace": execution})
}

/// The conversation's text turns (system, developer, user, assistant), as
/// plain strings; tool calls and tool results of earlier turns are left out.
fn conversation(messages: Vec<Message>) -> Vec<Message> {
    messages
        .iter()
        .filter_map(|m| {
            let role = m.role.as_deref()?;
            if !matches!(role, "system" | "developer" | "user" | "assistant") {
                return None;
            }
            let text = m.text();
            let role = if role == "developer" { "system" } else { role };
            (!text.trim().is_empty()).then(|| Message::new(role, text))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conversation_keeps_text_turns_only() {
        let body = json!({"messages": [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Weather"}, {"type": "text", "text": "in Berlin"}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "1"}]},
            {"role": "tool", "tool_call_id": "1", "content": "sunny"},
            {"role": "user", "content": "  "}]});
        let got = conversation(serde_json::from_value(body["messages"].clone()).unwrap());
        assert_eq!(got, [Message::new("system", "Be brief."), Message::new("user", "Weather\nin Berlin")]);
    }
}
