//! The chat-completions wire format, typed: the answers toolrouter reads
//! and writes ([`Completion`], its streamed [`Chunk`]s, [`Message`],
//! [`ToolCall`], [`CompletionUsage`]) and the requests it writes itself
//! ([`CompletionRequest`]). A client's request body is not typed: it stays
//! the client's JSON text, field by field ([`RequestBody`]; route mode
//! sets its `model` and `tools`, nothing else), so whatever it carries
//! reaches the model untouched.
//!
//! **Nothing is lost.** Each type keeps the fields it does not name in
//! `extra`, so that fields OpenAI adds (`refusal`, `annotations`,
//! `logprobs`, `audio`, `service_tier`, `system_fingerprint`, a server's
//! `reasoning_content`…) pass through untouched. A named field is read
//! when it has its type; null, or a value of another type, stays in
//! `extra` as it came (`finish_reason: null` is `None`, its null kept).
//! So every answer round-trips exactly — absent, null, `[]` and an odd
//! server's odd value told apart — but for `choices`, which is always
//! written (`[]` for a model that sent none). A message's `content` is
//! typed whole ([`Content`]: absent, null, text or parts), null included:
//! clients tell those apart.
//!
//! The serde impls are written out rather than derived: a derived
//! `#[serde(flatten)]` struct would refuse a whole answer for one field of
//! an unexpected type, and cannot tell a null field from an absent one.

use serde::Serialize;
use serde_json::{Map, Value};

use super::Usage;

/// A JSON object's fields.
pub(crate) type Fields = Map<String, Value>;

/// What joins the text parts of a message's content: parts are blocks of
/// their own (a paragraph, a document), not pieces of one sentence.
pub(crate) const PART_SEPARATOR: &str = "\n";

/// A chat completion (`"object": "chat.completion"`) or, as a [`Chunk`],
/// one chunk of a streamed one: the same top-level fields, with choices
/// that carry a `delta` instead of a `message`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Completion<C = Choice> {
    pub id: Option<String>,
    pub object: Option<String>,
    pub created: Option<u64>,
    pub model: Option<String>,
    pub choices: Vec<C>,
    pub usage: Option<CompletionUsage>,
    pub extra: Fields,
}

/// One chunk of a streamed completion (`"object": "chat.completion.chunk"`).
pub type Chunk = Completion<ChunkChoice>;

/// A completion's choice.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Choice {
    pub(crate) index: Option<u64>,
    pub(crate) message: Option<Message>,
    pub(crate) logprobs: Option<Value>,
    pub(crate) finish_reason: Option<String>,
    pub(crate) extra: Fields,
}

/// A chunk's choice: what the message gained (`delta`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChunkChoice {
    pub index: Option<u64>,
    pub delta: Option<Message>,
    pub logprobs: Option<Value>,
    pub finish_reason: Option<String>,
    pub extra: Fields,
}

/// A message of a conversation, of an answer, or (as a chunk's delta)
/// the part of one a chunk brings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Message {
    pub(crate) role: Option<String>,
    /// A tool result's call.
    pub(crate) tool_call_id: Option<String>,
    pub(crate) content: Content,
    pub(crate) tool_calls: Option<Vec<ToolCall>>,
    pub(crate) extra: Fields,
}

/// A message's `content`, as it came.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) enum Content {
    /// No `content` field.
    #[default]
    Absent,
    Null,
    Text(String),
    /// A list of parts (`{"type": "text", "text": …}`, images, audio…).
    Parts(Vec<Value>),
}

/// A tool call of a message, or (in a delta) a piece of one.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ToolCall {
    /// Which call a delta's piece belongs to.
    pub(crate) index: Option<u64>,
    pub(crate) id: Option<String>,
    /// `type`: `function`.
    pub(crate) kind: Option<String>,
    pub(crate) function: Option<FunctionCall>,
    pub(crate) extra: Fields,
}

/// The function a tool call calls.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct FunctionCall {
    pub(crate) name: Option<String>,
    /// JSON text, as OpenAI sends it; some servers send a JSON object
    /// ([`ToolCall::arguments`] reads both).
    pub(crate) arguments: Option<Value>,
    pub(crate) extra: Fields,
}

/// An answer's `usage` (token details and the like in `extra`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CompletionUsage {
    pub(crate) prompt_tokens: Option<u64>,
    pub(crate) completion_tokens: Option<u64>,
    pub(crate) total_tokens: Option<u64>,
    pub(crate) extra: Fields,
}

/// A request toolrouter writes itself (execute mode's decider and summary):
/// a model, the messages, the tools (none: no `tools` field).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CompletionRequest {
    pub(crate) model: String,
    pub(crate) messages: Vec<Message>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tools: Vec<Value>,
}

impl Completion {
    /// The first choice's message (toolrouter asks for one choice).
    pub(crate) fn message(&self) -> Option<&Message> {
        self.choices.first()?.message.as_ref()
    }

    pub(crate) fn message_mut(&mut self) -> Option<&mut Message> {
        self.choices.first_mut()?.message.as_mut()
    }

    /// The text of the first choice's message ("" without one).
    pub fn text(&self) -> String {
        self.message().map(Message::text).unwrap_or_default()
    }

    /// Whether every choice (at least one) has a message: what toolrouter
    /// needs of an answer.
    pub(crate) fn has_messages(&self) -> bool {
        !self.choices.is_empty() && self.choices.iter().all(|c| c.message.is_some())
    }
}

impl<C> Completion<C> {
    /// The tokens it spent (0 where its usage says nothing).
    pub(crate) fn tokens(&self) -> Usage {
        self.usage.as_ref().map(CompletionUsage::tokens).unwrap_or_default()
    }
}

/// A chunk's `object`.
pub(crate) const CHUNK_OBJECT: &str = "chat.completion.chunk";

impl Chunk {
    /// A chunk of toolrouter's, the one way one is made: `head`'s
    /// top-level fields (`id`, `created`, `model`, `system_fingerprint`…;
    /// not its usage), `object` set, and `choices`.
    pub(crate) fn new<C>(head: &Completion<C>, choices: Vec<ChunkChoice>) -> Chunk {
        let mut extra = head.extra.clone();
        for key in ["usage", "choices"] {
            extra.shift_remove(key);
        }
        Chunk {
            id: head.id.clone(),
            object: Some(CHUNK_OBJECT.into()),
            created: head.created,
            model: head.model.clone(),
            choices,
            usage: None,
            extra,
        }
    }

    /// A chunk without choices that carries `usage` (the last before `[DONE]`).
    pub(crate) fn usage<C>(head: &Completion<C>, usage: CompletionUsage) -> Chunk {
        Chunk { usage: Some(usage), ..Chunk::new(head, Vec::new()) }
    }
}

impl ChunkChoice {
    /// Choice 0 saying `delta`, with its finish reason (null until the last).
    pub(crate) fn new(delta: Message, finish_reason: Option<String>) -> ChunkChoice {
        let mut choice =
            ChunkChoice { index: Some(0), delta: Some(delta), logprobs: Some(Value::Null), ..ChunkChoice::default() };
        choice.set_finish(finish_reason);
        choice
    }

    /// Sets the finish reason; `None` writes null.
    pub(crate) fn set_finish(&mut self, finish_reason: Option<String>) {
        if finish_reason.is_none() {
            self.extra.insert("finish_reason".into(), Value::Null);
        }
        self.finish_reason = finish_reason;
    }

    /// Takes out the finish reason, if any, leaving null.
    pub(crate) fn take_finish(&mut self) -> Option<String> {
        let finish = self.finish_reason.take()?;
        self.set_finish(None);
        Some(finish)
    }
}

/// A completion as the chunks a stream would have carried: per choice, its
/// message as one delta (tool calls indexed) with its finish reason; then
/// the usage, in a chunk without choices.
pub fn chunks_of(completion: &Completion) -> Vec<Chunk> {
    let mut out: Vec<Chunk> = (completion.choices.iter().enumerate())
        .map(|(i, choice)| {
            let mut delta = choice.message.clone().unwrap_or_default();
            for (n, call) in delta.tool_calls.iter_mut().flatten().enumerate() {
                call.index = Some(n as u64);
            }
            let choice = ChunkChoice {
                index: Some(choice.index.unwrap_or(i as u64)),
                delta: Some(delta),
                logprobs: choice.logprobs.clone(),
                finish_reason: choice.finish_reason.clone(),
                extra: choice.extra.clone(),
            };
            Chunk::new(completion, vec![choice])
        })
        .collect();
    if let Some(usage) = &completion.usage {
        out.push(Chunk::usage(completion, usage.clone()));
    }
    out
}

impl Message {
    /// A message of `role` saying `text`.
    pub(crate) fn new(role: &str, text: impl Into<String>) -> Message {
        Message { role: Some(role.into()), content: Content::Text(text.into()), ..Message::default() }
    }

    /// A delta that adds `text` to the content.
    pub(crate) fn text_delta(text: impl Into<String>) -> Message {
        Message { content: Content::Text(text.into()), ..Message::default() }
    }

    /// The result of tool call `call_id`.
    pub(crate) fn tool_result(call_id: &str, text: impl Into<String>) -> Message {
        Message { tool_call_id: Some(call_id.into()), ..Message::new("tool", text) }
    }

    /// An assistant message that makes `calls` (`content: null`).
    pub(crate) fn calling(calls: Vec<ToolCall>) -> Message {
        Message {
            role: Some("assistant".into()),
            content: Content::Null,
            tool_calls: Some(calls),
            ..Message::default()
        }
    }

    pub(crate) fn is(&self, role: &str) -> bool {
        self.role.as_deref() == Some(role)
    }

    /// Its tool calls (none when it has none).
    pub(crate) fn calls(&self) -> &[ToolCall] {
        self.tool_calls.as_deref().unwrap_or_default()
    }

    /// The text of the message: its content as a string, or the `text` of
    /// its parts joined by [`PART_SEPARATOR`]; "" for anything else.
    pub fn text(&self) -> String {
        match &self.content {
            Content::Text(text) => text.clone(),
            Content::Parts(parts) => {
                let texts: Vec<&str> = parts.iter().filter_map(|p| p.get("text")?.as_str()).collect();
                texts.join(PART_SEPARATOR)
            }
            Content::Absent | Content::Null => String::new(),
        }
    }

    #[cfg(test)]
    pub(crate) fn to_value(&self) -> Value {
        to_value(self)
    }
}

impl Content {
    /// The content to write, if any.
    fn present(&self) -> Option<&Content> {
        (*self != Content::Absent).then_some(self)
    }
}

impl ToolCall {
    /// A call of function `name` with `arguments` (JSON text).
    pub(crate) fn function(id: &str, name: &str, arguments: impl Into<String>) -> ToolCall {
        ToolCall {
            id: Some(id.into()),
            kind: Some("function".into()),
            function: Some(FunctionCall {
                name: Some(name.into()),
                arguments: Some(Value::String(arguments.into())),
                extra: Fields::new(),
            }),
            ..ToolCall::default()
        }
    }

    /// The function's name ("" without one).
    pub(crate) fn name(&self) -> &str {
        self.function.as_ref().and_then(|f| f.name.as_deref()).unwrap_or("")
    }

    /// The call's id ("" without one).
    pub(crate) fn id(&self) -> &str {
        self.id.as_deref().unwrap_or("")
    }

    /// The arguments as JSON text, as OpenAI sends them: an object (some
    /// servers send one) as its text; none or null as "".
    pub(crate) fn arguments(&self) -> String {
        match self.function.as_ref().and_then(|f| f.arguments.as_ref()) {
            Some(Value::String(text)) => text.clone(),
            None | Some(Value::Null) => String::new(),
            Some(other) => other.to_string(),
        }
    }

    /// The arguments as they came (JSON text, or an object).
    pub(crate) fn raw_arguments(&self) -> Option<&Value> {
        self.function.as_ref()?.arguments.as_ref()
    }
}

impl CompletionUsage {
    /// Its token counts (0 where it says nothing).
    pub(crate) fn tokens(&self) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens.unwrap_or(0),
            completion_tokens: self.completion_tokens.unwrap_or(0),
            total_tokens: self.total_tokens.unwrap_or(0),
        }
    }

    /// Sets its token counts to `tokens` (token details kept).
    pub(crate) fn set_tokens(&mut self, tokens: Usage) {
        self.prompt_tokens = Some(tokens.prompt_tokens);
        self.completion_tokens = Some(tokens.completion_tokens);
        self.total_tokens = Some(tokens.total_tokens);
    }
}

impl From<Usage> for CompletionUsage {
    fn from(tokens: Usage) -> CompletionUsage {
        let mut usage = CompletionUsage::default();
        usage.set_tokens(tokens);
        usage
    }
}

/// A wire type as a JSON value (they are all JSON objects: this cannot fail).
fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

mod body;
mod json;

pub use body::RequestBody;

#[cfg(test)]
mod tests;
