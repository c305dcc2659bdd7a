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

/// Takes `key` out of `fields` as a `T`, if it is one; otherwise leaves it.
fn take<T: DeserializeOwned>(fields: &mut Fields, key: &str) -> Option<T> {
    let typed = T::deserialize(fields.get(key)?).ok()?;
    fields.shift_remove(key);
    Some(typed)
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
            id: take(&mut extra, "id"),
            object: take(&mut extra, "object"),
            created: take(&mut extra, "created"),
            model: take(&mut extra, "model"),
            choices: take(&mut extra, "choices").unwrap_or_default(),
            usage: take(&mut extra, "usage"),
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
            index: take(&mut extra, "index"),
            message: take(&mut extra, "message"),
            logprobs: take(&mut extra, "logprobs"),
            finish_reason: take(&mut extra, "finish_reason"),
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
            index: take(&mut extra, "index"),
            delta: take(&mut extra, "delta"),
            logprobs: take(&mut extra, "logprobs"),
            finish_reason: take(&mut extra, "finish_reason"),
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
            role: take(&mut extra, "role"),
            tool_call_id: take(&mut extra, "tool_call_id"),
            content: take(&mut extra, "content").unwrap_or_default(),
            tool_calls: take(&mut extra, "tool_calls"),
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
            index: take(&mut extra, "index"),
            id: take(&mut extra, "id"),
            kind: take(&mut extra, "type"),
            function: take(&mut extra, "function"),
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
        Ok(FunctionCall { name: take(&mut extra, "name"), arguments: take(&mut extra, "arguments"), extra })
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
            prompt_tokens: take(&mut extra, "prompt_tokens"),
            completion_tokens: take(&mut extra, "completion_tokens"),
            total_tokens: take(&mut extra, "total_tokens"),
            extra,
        })
    }
}
