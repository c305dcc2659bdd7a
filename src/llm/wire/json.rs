//! How each wire type is read from JSON and written back: a named field
//! is taken out of the object when it has its type, else left in `extra`;
//! written back, the named fields that are set come first, then `extra`
//! (but for keys a named field wrote). Written out rather than derived:
//! see the [`super`] module's documentation.

use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Choice, ChunkChoice, Completion, CompletionUsage, Content, Fields, FunctionCall, Message, ToolCall};

/// Takes `key` out of `fields` as a `T` when its value has the JSON shape
/// `T` is read from (`fits`); otherwise leaves it. The value is moved into
/// `T`, not copied (a copy per field made streamed answers measurably
/// slower, docs/benchmarks.md); `fits` is exact for every wire type, so
/// reading it cannot fail and lose the value.
fn take<T: DeserializeOwned>(fields: &mut Fields, key: &str, fits: fn(&Value) -> bool) -> Option<T> {
    if !fits(fields.get(key)?) {
        return None;
    }
    T::deserialize(fields.shift_remove(key)?).ok()
}

fn text(v: &Value) -> bool {
    v.is_string()
}

fn count(v: &Value) -> bool {
    v.is_u64()
}

fn object(v: &Value) -> bool {
    v.is_object()
}

/// A list of wire objects (choices, tool calls).
fn objects(v: &Value) -> bool {
    v.as_array().is_some_and(|items| items.iter().all(Value::is_object))
}

/// A message's content: text, a list of parts or null.
fn content(v: &Value) -> bool {
    v.is_string() || v.is_array() || v.is_null()
}

fn any(_: &Value) -> bool {
    true
}

/// Writes a wire type: the named fields that are set, then `extra` but
/// for the keys a named field wrote.
struct Writer<M> {
    map: M,
    written: Vec<&'static str>,
}

impl<M: SerializeMap> Writer<M> {
    fn new<S: Serializer<SerializeMap = M, Error = M::Error>>(s: S) -> Result<Self, M::Error> {
        Ok(Writer { map: s.serialize_map(None)?, written: Vec::new() })
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: Option<&T>) -> Result<(), M::Error> {
        if let Some(value) = value {
            self.map.serialize_entry(key, value)?;
            self.written.push(key);
        }
        Ok(())
    }

    fn end(mut self, extra: &Fields) -> Result<M::Ok, M::Error> {
        for (key, value) in extra.iter().filter(|(k, _)| !self.written.contains(&k.as_str())) {
            self.map.serialize_entry(key, value)?;
        }
        self.map.end()
    }
}

impl<C: Serialize> Serialize for Completion<C> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut w = Writer::new(s)?;
        w.field("id", self.id.as_ref())?;
        w.field("object", self.object.as_ref())?;
        w.field("created", self.created.as_ref())?;
        w.field("model", self.model.as_ref())?;
        // Always written, unless what came instead is kept in `extra`.
        let choices = !self.choices.is_empty() || !self.extra.contains_key("choices");
        w.field("choices", choices.then_some(&self.choices))?;
        w.field("usage", self.usage.as_ref())?;
        w.end(&self.extra)
    }
}

impl<'de, C: DeserializeOwned> Deserialize<'de> for Completion<C> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut extra = Fields::deserialize(d)?;
        Ok(Completion {
            id: take(&mut extra, "id", text),
            object: take(&mut extra, "object", text),
            created: take(&mut extra, "created", count),
            model: take(&mut extra, "model", text),
            choices: take(&mut extra, "choices", objects).unwrap_or_default(),
            usage: take(&mut extra, "usage", object),
            extra,
        })
    }
}

impl Serialize for Choice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut w = Writer::new(s)?;
        w.field("index", self.index.as_ref())?;
        w.field("message", self.message.as_ref())?;
        w.field("logprobs", self.logprobs.as_ref())?;
        w.field("finish_reason", self.finish_reason.as_ref())?;
        w.end(&self.extra)
    }
}

impl<'de> Deserialize<'de> for Choice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut extra = Fields::deserialize(d)?;
        Ok(Choice {
            index: take(&mut extra, "index", count),
            message: take(&mut extra, "message", object),
            logprobs: take(&mut extra, "logprobs", any),
            finish_reason: take(&mut extra, "finish_reason", text),
            extra,
        })
    }
}

impl Serialize for ChunkChoice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut w = Writer::new(s)?;
        w.field("index", self.index.as_ref())?;
        w.field("delta", self.delta.as_ref())?;
        w.field("logprobs", self.logprobs.as_ref())?;
        w.field("finish_reason", self.finish_reason.as_ref())?;
        w.end(&self.extra)
    }
}

impl<'de> Deserialize<'de> for ChunkChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut extra = Fields::deserialize(d)?;
        Ok(ChunkChoice {
            index: take(&mut extra, "index", count),
            delta: take(&mut extra, "delta", object),
            logprobs: take(&mut extra, "logprobs", any),
            finish_reason: take(&mut extra, "finish_reason", text),
            extra,
        })
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut w = Writer::new(s)?;
        w.field("role", self.role.as_ref())?;
        w.field("tool_call_id", self.tool_call_id.as_ref())?;
        w.field("content", self.content.present())?;
        w.field("tool_calls", self.tool_calls.as_ref())?;
        w.end(&self.extra)
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut extra = Fields::deserialize(d)?;
        Ok(Message {
            role: take(&mut extra, "role", text),
            tool_call_id: take(&mut extra, "tool_call_id", text),
            content: take(&mut extra, "content", content).unwrap_or_default(),
            tool_calls: take(&mut extra, "tool_calls", objects),
            extra,
        })
    }
}

impl Serialize for Content {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Content::Absent | Content::Null => s.serialize_unit(),
            Content::Text(text) => s.serialize_str(text),
            Content::Parts(parts) => parts.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(Content::Null),
            Value::String(text) => Ok(Content::Text(text)),
            Value::Array(parts) => Ok(Content::Parts(parts)),
            _ => Err(D::Error::custom("content is text, a list of parts or null")),
        }
    }
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut w = Writer::new(s)?;
        w.field("index", self.index.as_ref())?;
        w.field("id", self.id.as_ref())?;
        w.field("type", self.kind.as_ref())?;
        w.field("function", self.function.as_ref())?;
        w.end(&self.extra)
    }
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut extra = Fields::deserialize(d)?;
        Ok(ToolCall {
            index: take(&mut extra, "index", count),
            id: take(&mut extra, "id", text),
            kind: take(&mut extra, "type", text),
            function: take(&mut extra, "function", object),
            extra,
        })
    }
}

impl Serialize for FunctionCall {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut w = Writer::new(s)?;
        w.field("name", self.name.as_ref())?;
        w.field("arguments", self.arguments.as_ref())?;
        w.end(&self.extra)
    }
}

impl<'de> Deserialize<'de> for FunctionCall {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut extra = Fields::deserialize(d)?;
        Ok(FunctionCall { name: take(&mut extra, "name", text), arguments: take(&mut extra, "arguments", any), extra })
    }
}

impl Serialize for CompletionUsage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut w = Writer::new(s)?;
        w.field("prompt_tokens", self.prompt_tokens.as_ref())?;
        w.field("completion_tokens", self.completion_tokens.as_ref())?;
        w.field("total_tokens", self.total_tokens.as_ref())?;
        w.end(&self.extra)
    }
}

impl<'de> Deserialize<'de> for CompletionUsage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut extra = Fields::deserialize(d)?;
        Ok(CompletionUsage {
            prompt_tokens: take(&mut extra, "prompt_tokens", count),
            completion_tokens: take(&mut extra, "completion_tokens", count),
            total_tokens: take(&mut extra, "total_tokens", count),
            extra,
        })
    }
}
