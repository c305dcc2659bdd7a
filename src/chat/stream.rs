//! Streaming answers (`stream: true`): the answer's chat chunks, typed,
//! for a face to encode (chat completions' `data:` events, the Responses
//! API's events, Anthropic's).
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
//! `stream_options.include_usage` asked for one. A failure after the
//! stream has started is its last item, a [`ChatError`].

use std::collections::BTreeMap;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::error::ChatError;
use super::narrowing::Narrowing;
use super::request::{self, ChatRequest};
use super::route::{Narrowed, Repaired, normalize_tool_calls, prepare, repaired, report, tools_array};
use super::search::Search;
use super::{ChatStream, Item};
use crate::config::OpenAiConfig;
use crate::llm::wire::{
    Choice, Chunk, ChunkChoice, Completion, CompletionUsage, Content, FunctionCall, Message, ToolCall,
};
use crate::llm::{ChatModel, Usage};

/// Chunks buffered between the model and a slow client.
const BUFFER: usize = 64;

/// A tool call gathered from its deltas.
#[derive(Default, Clone)]
struct Gathered {
    id: String,
    name: String,
    arguments: String,
}

/// Streams the answer to `req`.
pub(crate) async fn stream(
    mut req: ChatRequest,
    llm: std::sync::Arc<dyn ChatModel>,
    config: OpenAiConfig,
    narrowing: Narrowing,
    planned: Option<Value>,
) -> Result<ChatStream, ChatError> {
    let mut prepared = prepare(&mut req, &config, &narrowing).await?;
    if req.include_usage {
        prepared.body.set("stream_options", &json!({"include_usage": true}));
    }
    // Errors before the first event keep their HTTP status.
    let chunks = llm.stream(&prepared.body, req.deadline).await?;
    let (tx, rx) = mpsc::channel(BUFFER);
    let turn = Turn { req, llm, config, prepared, narrowing };
    tokio::spawn(relay(chunks, tx, turn, planned).in_current_span());
    Ok(received(rx))
}

/// What `rx` receives, as a stream.
pub(super) fn received(rx: mpsc::Receiver<Sent>) -> ChatStream {
    Box::pin(futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) }))
}

/// One item of a streamed answer.
pub(super) type Sent = Result<Item, ChatError>;

/// What answering a streamed request holds.
struct Turn {
    req: ChatRequest,
    llm: std::sync::Arc<dyn ChatModel>,
    config: OpenAiConfig,
    prepared: Narrowed,
    narrowing: Narrowing,
}

/// What the model streamed, as far as the end of the stream needs it.
struct Seen {
    /// The chunks' top-level fields, latest kept (id, created,
    /// system_fingerprint…), the client's model name: the head of ours.
    head: Chunk,
    content: String,
    /// Tool calls by the model's own index.
    calls: BTreeMap<u64, Gathered>,
    finish: Option<String>,
    usage: Option<CompletionUsage>,
    /// Whether a delta with the role went out (the first one must carry it).
    role_sent: bool,
}

impl Seen {
    /// Nothing seen yet; `model`: the name the client asked for.
    fn new(model: &str) -> Seen {
        Seen {
            head: Chunk { model: Some(model.into()), ..Chunk::default() },
            content: String::new(),
            calls: BTreeMap::new(),
            finish: None,
            usage: None,
            role_sent: false,
        }
    }

    /// Takes in one chunk; returns what to pass on now (the chunk without
    /// tool-call deltas and finish reason), if anything is left of it.
    fn take(&mut self, mut chunk: Chunk) -> Option<Chunk> {
        if let Some(usage) = chunk.usage.take() {
            self.usage = Some(usage);
        }
        chunk.extra.shift_remove("usage");
        chunk.model = self.head.model.clone();
        self.remember(&chunk);
        let choice = chunk.choices.first_mut()?;
        if let Some(finish) = choice.take_finish() {
            self.finish = Some(finish);
        }
        let logprobs = choice.logprobs.as_ref().is_some_and(|l| !l.is_null());
        let delta = choice.delta.as_mut()?;
        delta.extra.shift_remove("tool_calls");
        for t in delta.tool_calls.take().into_iter().flatten() {
            let index = self.index_of(&t);
            let call = self.calls.entry(index).or_default();
            if let Some(id) = &t.id {
                call.id = id.clone();
            }
            call.name.push_str(t.function.as_ref().and_then(|f| f.name.as_deref()).unwrap_or(""));
            call.arguments.push_str(&t.arguments());
        }
        if let Content::Text(text) = &delta.content {
            self.content.push_str(text);
        }
        // Anything left to say: text, reasoning, a role, a refusal, logprobs.
        if !(logprobs || says_something(delta)) && self.role_sent {
            return None;
        }
        self.with_role(delta);
        Some(chunk)
    }

    /// Keeps a chunk's top-level fields (the latest of each).
    fn remember(&mut self, chunk: &Chunk) {
        let head = &mut self.head;
        head.id = chunk.id.clone().or(head.id.take());
        head.created = chunk.created.or(head.created);
        head.extra.extend(chunk.extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    }

    /// A tool-call delta's call: its `index`; without one (some servers
    /// omit it), the last call, or a new one when the delta brings a new id.
    fn index_of(&self, delta: &ToolCall) -> u64 {
        if let Some(i) = delta.index {
            return i;
        }
        match (self.calls.last_key_value(), delta.id.as_deref()) {
            (None, _) => 0,
            (Some((&last, call)), Some(id)) if !call.id.is_empty() && call.id != id => last + 1,
            (Some((&last, _)), _) => last,
        }
    }

    /// Puts the role on the first delta that goes out.
    fn with_role(&mut self, delta: &mut Message) {
        if !self.role_sent {
            delta.role = Some("assistant".into());
            if delta.content == Content::Absent {
                delta.content = Content::Text(String::new());
            }
            self.role_sent = true;
        }
    }

    /// A chunk of ours saying `delta`, with the model's top-level fields.
    fn chunk(&mut self, mut delta: Message, finish: Option<String>) -> Chunk {
        self.with_role(&mut delta);
        Chunk::new(&self.head, vec![ChunkChoice::new(delta, finish)])
    }

    /// The gathered tool calls, numbered from 0, as an assistant message
    /// (with the streamed text).
    fn message(&self) -> Message {
        let calls = self.calls.values().map(|c| ToolCall::function(&c.id, &c.name, c.arguments.clone())).collect();
        let mut message = Message::calling(calls);
        if !self.content.is_empty() {
            message.content = Content::Text(self.content.clone());
        }
        message
    }
}

/// Whether a delta, its tool calls taken out, says anything: a role,
/// text, reasoning, a refusal… (not an empty text, not nulls).
fn says_something(delta: &Message) -> bool {
    let content =
        !matches!(&delta.content, Content::Absent | Content::Null) && delta.content != Content::Text(String::new());
    content || delta.role.is_some() || delta.tool_call_id.is_some() || delta.extra.values().any(|v| !v.is_null())
}

/// Passes the model's chunks on (and, while it searches for tools, the
/// searches and the next turn's chunks), then ends the stream.
async fn relay(mut chunks: crate::llm::Chunks, tx: mpsc::Sender<Sent>, mut turn: Turn, planned: Option<Value>) {
    let mut seen = Seen::new(&turn.req.model);
    // Tokens of the turns that searched.
    let mut searching = Usage::default();
    loop {
        while let Some(item) = chunks.next().await {
            let chunk = match item {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(Err(ChatError::Model(e))).await;
                    return;
                }
            };
            if let Some(out) = seen.take(chunk)
                && tx.send(Ok(Item::Chunk(out))).await.is_err()
            {
                return; // The client went away.
            }
        }
        match search_turn(&mut seen, &tx, &mut turn).await {
            Ok(Some(next)) => {
                searching += seen.usage.take().map(|u| u.tokens()).unwrap_or_default();
                chunks = next;
            }
            Ok(None) => break,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        }
    }
    let Turn { req, llm, config, prepared, .. } = &turn;
    let Some(checked) = checked_calls(&mut seen, &tx, req, llm.as_ref(), config, prepared).await else { return };
    let Checked { calls, finish, repairs, usage: repair_usage } = checked;
    for (i, call) in calls.iter().enumerate() {
        for delta in call_deltas(i, call) {
            let _ = tx.send(Ok(Item::Chunk(seen.chunk(delta, None)))).await;
        }
    }
    let mut last = seen.chunk(Message::default(), Some(finish.unwrap_or_else(|| "stop".into())));
    last.extra.insert("toolrouter".into(), report(req, prepared, repairs, planned));
    let _ = tx.send(Ok(Item::Chunk(last))).await;
    if req.include_usage {
        let mut usage = seen.usage.clone().unwrap_or_default();
        let mut tokens = usage.tokens();
        tokens += searching;
        tokens += repair_usage;
        usage.set_tokens(tokens);
        let _ = tx.send(Ok(Item::Chunk(Chunk::usage(&seen.head, usage)))).await;
    }
}

/// When the turn that just streamed called the search: its searches
/// answered and sent, the tools found offered, and the next turn's
/// stream; `None` when it did not search (or the rounds are spent).
async fn search_turn(
    seen: &mut Seen,
    tx: &mpsc::Sender<Sent>,
    turn: &mut Turn,
) -> Result<Option<crate::llm::Chunks>, ChatError> {
    let Turn { req, llm, prepared, narrowing, .. } = turn;
    let Some(search) = prepared.search.as_mut() else { return Ok(None) };
    let mut message = seen.message();
    if !Search::called(&message) || !search.open() {
        return Ok(None);
    }
    normalize_tool_calls(&mut message);
    let mut conversation = request::messages(&prepared.body)?;
    let before = search.rounds.len();
    let Some(added) = search.answer(&message, &conversation, narrowing).await else { return Ok(None) };
    for searched in &search.rounds[before..] {
        let _ = tx.send(Ok(Item::Searched(searched.clone()))).await;
    }
    conversation.extend(added);
    prepared.body.set("messages", &conversation);
    prepared.body.set_raw("tools", tools_array(&req.tools, &prepared.keep, Some(search)));
    // The next turn's text follows this one's; its calls are its own.
    seen.calls.clear();
    seen.finish = None;
    seen.content.clear();
    Ok(Some(llm.stream(&prepared.body, req.deadline).await?))
}

/// The tool calls to send, checked, and what checking them took.
struct Checked {
    calls: Vec<ToolCall>,
    finish: Option<String>,
    repairs: usize,
    /// Tokens the repairs spent.
    usage: Usage,
}

/// The streamed tool calls checked and, if needed, repaired through the
/// model; a repaired turn's new text is sent. `None` when repairing
/// failed (the error is sent).
async fn checked_calls(
    seen: &mut Seen,
    tx: &mpsc::Sender<Sent>,
    req: &ChatRequest,
    llm: &dyn ChatModel,
    config: &OpenAiConfig,
    prepared: &Narrowed,
) -> Option<Checked> {
    let finish = seen.finish.take();
    if seen.calls.is_empty() {
        return Some(Checked { calls: Vec::new(), finish, repairs: 0, usage: Usage::default() });
    }
    let choice = Choice { index: Some(0), message: Some(seen.message()), finish_reason: finish, ..Choice::default() };
    let answer = Completion { choices: vec![choice], ..Completion::default() };
    let Repaired { mut answer, repairs, usage } = match repaired(llm, prepared, answer, req, config).await {
        Ok(r) => r,
        Err(e) => {
            let _ = tx.send(Err(e)).await;
            return None;
        }
    };
    let mut finish = answer.choices.first_mut().and_then(|c| c.finish_reason.take());
    let mut message = answer.message().cloned().unwrap_or_default();
    normalize_tool_calls(&mut message);
    // The repaired turn's text, unless it is what already streamed:
    // text that streamed stays (it cannot be taken back).
    let text = message.text();
    if repairs > 0 && !text.is_empty() && text != seen.content {
        let _ = tx.send(Ok(Item::Chunk(seen.chunk(Message::text_delta(text), None)))).await;
    }
    let calls = message.tool_calls.take().unwrap_or_default();
    if !calls.is_empty() {
        finish = Some("tool_calls".into());
    }
    Some(Checked { calls, finish, repairs, usage })
}

/// Call `i`'s deltas: its id, type and name, then its arguments.
fn call_deltas(i: usize, call: &ToolCall) -> [Message; 2] {
    let index = Some(i as u64);
    let name = call.function.as_ref().and_then(|f| f.name.clone());
    let head = ToolCall {
        index,
        id: call.id.clone(),
        kind: Some("function".into()),
        function: Some(FunctionCall { name, arguments: Some(json!("")), ..FunctionCall::default() }),
        ..ToolCall::default()
    };
    let arguments = FunctionCall { arguments: Some(Value::String(call.arguments())), ..FunctionCall::default() };
    let rest = ToolCall { index, function: Some(arguments), ..ToolCall::default() };
    [head, rest].map(|call| Message { tool_calls: Some(vec![call]), ..Message::default() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(value: Value) -> Chunk {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn chunks_pass_on_whole_but_for_tool_calls_and_the_finish() {
        let mut seen = Seen::new("mine");
        let first = chunk(json!({"id": "c1", "created": 5, "model": "up", "system_fingerprint": "fp_1",
            "choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": "think"},
                "logprobs": null, "finish_reason": null}]}));
        let out = json!(seen.take(first).unwrap());
        assert_eq!(out["model"], "mine");
        assert_eq!(out["system_fingerprint"], "fp_1");
        assert_eq!(out["choices"][0]["delta"]["reasoning_content"], "think");
        // A tool-call delta at index 1 (no 0): held back, nothing else to say.
        let call = chunk(json!({"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "t",
            "function": {"name": "f", "arguments": "{\"a\""}}]}, "finish_reason": null}]}));
        assert!(seen.take(call).is_none());
        let more = chunk(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1,
            "function": {"arguments": ": 1}"}}]}, "finish_reason": "tool_calls"}]}));
        assert!(seen.take(more).is_none());
        assert_eq!(seen.finish.as_deref(), Some("tool_calls"));
        let message = seen.message().to_value();
        assert_eq!(message["tool_calls"].as_array().unwrap().len(), 1, "no phantom call at index 0");
        // Deltas without an index: the last call, or a new one for a new id.
        let mut other = Seen::new("m");
        for t in [
            json!({"id": "a", "function": {"name": "f", "arguments": "{"}}),
            json!({"function": {"arguments": "}"}}),
            json!({"id": "b", "function": {"name": "g", "arguments": "{}"}}),
        ] {
            other.take(chunk(json!({"choices": [{"index": 0, "delta": {"tool_calls": [t]}}]})));
        }
        let two = other.message().to_value();
        assert_eq!(two["tool_calls"][0]["function"]["arguments"], "{}");
        assert_eq!(two["tool_calls"][1]["function"]["name"], "g");
        assert_eq!(message["tool_calls"][0]["function"]["arguments"], "{\"a\": 1}");
        // Logprobs alone are worth passing on.
        let lp = chunk(json!({"choices": [{"index": 0, "delta": {"content": ""}, "logprobs": {"content": []}}]}));
        assert!(seen.take(lp).is_some());
        let last = json!(seen.chunk(Message::default(), Some("stop".into())));
        assert_eq!(last["system_fingerprint"], "fp_1");
        assert_eq!(last["object"], "chat.completion.chunk");
        assert_eq!(
            last["choices"],
            json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop"}]),
            "the role went out already"
        );
    }
}
