//! How each wire type is read from JSON and written back: a named field
//! is read when its value has its type, else kept in `extra` as it came;
//! written back, the named fields that are set come first, then `extra`
//! (but for keys a named field wrote). Written out rather than derived:
//! see the [`super`] module's documentation.
//!
//! Reading goes field by field in one pass over the text ([`Wire`]): a
//! named object (a choice, its message, a tool call) is read straight into
//! its type, and only `extra` and free-form values (`logprobs`, parts,
//! arguments) become [`Value`]s. Reading the whole object into a `Value`
//! map first and moving the named fields out of it cost 8.5% of `serve`'s
//! CPU at saturation (docs/benchmarks.md, "Proxy cost").

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Choice, ChunkChoice, Completion, CompletionUsage, Content, Fields, FunctionCall, Message, ToolCall};

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

impl Serialize for Content {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Content::Absent | Content::Null => s.serialize_unit(),
            Content::Text(text) => s.serialize_str(text),
            Content::Parts(parts) => parts.serialize(s),
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

impl Serialize for FunctionCall {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut w = Writer::new(s)?;
        w.field("name", self.name.as_ref())?;
        w.field("arguments", self.arguments.as_ref())?;
        w.end(&self.extra)
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

/// A wire type read field by field: [`Wire::named`] reads the value of a
/// key it names; every other key's value goes to `extra` as it came.
trait Wire: Default + Serialize {
    fn extra(&mut self) -> &mut Fields;

    /// Reads `key`'s value (the next of `map`) if `key` is a named field:
    /// into the field when it has the field's type, else into `extra`.
    /// Returns false, reading nothing, for any other key.
    fn named<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error>;
}

/// A named field's value: of the field's type, or something else (kept in
/// `extra`, so that the answer is written back as it came).
enum Read<T> {
    Fits(T),
    Other(Value),
}

/// Sets `field` from `read`; what does not fit unsets it and goes to
/// `extra` under `key`. A key that comes twice counts once, as its last
/// value.
fn put<F: Default>(field: &mut F, read: Read<F>, key: &str, extra: &mut Fields) {
    match read {
        Read::Fits(value) => {
            *field = value;
            extra.shift_remove(key);
        }
        Read::Other(value) => {
            *field = F::default();
            extra.insert(key.to_owned(), value);
        }
    }
}

// The readers of named fields, one per JSON shape a field is read from.

fn text<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Read<Option<String>>, A::Error> {
    Ok(match map.next_value()? {
        Value::String(text) => Read::Fits(Some(text)),
        other => Read::Other(other),
    })
}

fn count<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Read<Option<u64>>, A::Error> {
    let value: Value = map.next_value()?;
    Ok(match value.as_u64() {
        Some(n) => Read::Fits(Some(n)),
        None => Read::Other(value),
    })
}

fn any<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Read<Option<Value>>, A::Error> {
    Ok(Read::Fits(Some(map.next_value()?)))
}

/// A message's content: text, a list of parts or null.
fn content<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Read<Content>, A::Error> {
    Ok(match map.next_value()? {
        Value::Null => Read::Fits(Content::Null),
        Value::String(text) => Read::Fits(Content::Text(text)),
        Value::Array(parts) => Read::Fits(Content::Parts(parts)),
        other => Read::Other(other),
    })
}

/// A wire object (a choice's message, a call's function, usage).
fn object<'de, A: MapAccess<'de>, T: Wire>(map: &mut A) -> Result<Read<Option<T>>, A::Error> {
    Ok(match map.next_value::<Shape<T>>()? {
        Shape::Object(object) => Read::Fits(Some(object)),
        other => Read::Other(other.into_value()),
    })
}

/// A list of wire objects, every item one (a completion's choices).
fn list<'de, A: MapAccess<'de>, T: Wire>(map: &mut A) -> Result<Read<Vec<T>>, A::Error> {
    Ok(match map.next_value::<Shape<T>>()? {
        Shape::List(items) if items.iter().all(|item| matches!(item, Shape::Object(_))) => {
            Read::Fits(items.into_iter().filter_map(Shape::into_object).collect())
        }
        other => Read::Other(other.into_value()),
    })
}

/// A list of wire objects that may be absent (a message's tool calls).
fn objects<'de, A: MapAccess<'de>, T: Wire>(map: &mut A) -> Result<Read<Option<Vec<T>>>, A::Error> {
    Ok(match list(map)? {
        Read::Fits(items) => Read::Fits(Some(items)),
        Read::Other(value) => Read::Other(value),
    })
}

/// A value where a wire object (or a list of them) is expected, read in
/// one pass: objects straight into `T`, lists item by item, anything else
/// as a [`Value`]. What turns out not to fit is turned back into the JSON
/// it came as ([`Shape::into_value`]: `T` writes back what it read).
enum Shape<T> {
    Object(T),
    List(Vec<Shape<T>>),
    Other(Value),
}

impl<T: Wire> Shape<T> {
    fn into_value(self) -> Value {
        match self {
            Shape::Object(object) => super::to_value(&object),
            Shape::List(items) => Value::Array(items.into_iter().map(Shape::into_value).collect()),
            Shape::Other(value) => value,
        }
    }

    fn into_object(self) -> Option<T> {
        match self {
            Shape::Object(object) => Some(object),
            _ => None,
        }
    }
}

impl<'de, T: Wire> Deserialize<'de> for Shape<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ShapeVisitor(PhantomData))
    }
}

struct ShapeVisitor<T>(PhantomData<T>);

impl<'de, T: Wire> Visitor<'de> for ShapeVisitor<T> {
    type Value = Shape<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Shape<T>, A::Error> {
        WireVisitor(PhantomData).visit_map(map).map(Shape::Object)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape<T>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(1).min(64));
        while let Some(item) = seq.next_element::<Shape<T>>()? {
            items.push(item);
        }
        Ok(Shape::List(items))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Shape<T>, E> {
        Ok(Shape::Other(Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Shape<T>, E> {
        Ok(Shape::Other(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Shape<T>, E> {
        Ok(Shape::Other(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Shape<T>, E> {
        Ok(Shape::Other(v.into()))
    }

    fn visit_str<E>(self, v: &str) -> Result<Shape<T>, E> {
        Ok(Shape::Other(v.into()))
    }

    fn visit_string<E>(self, v: String) -> Result<Shape<T>, E> {
        Ok(Shape::Other(v.into()))
    }

    fn visit_unit<E>(self) -> Result<Shape<T>, E> {
        Ok(Shape::Other(Value::Null))
    }

    fn visit_none<E>(self) -> Result<Shape<T>, E> {
        Ok(Shape::Other(Value::Null))
    }
}

/// Reads a [`Wire`] object key by key.
struct WireVisitor<T>(PhantomData<T>);

impl<'de, T: Wire> Visitor<'de> for WireVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let mut out = T::default();
        while let Some(Key(key)) = map.next_key::<Key>()? {
            if !out.named(&key, &mut map)? {
                let value = map.next_value::<Value>()?;
                out.extra().insert(key.into_owned(), value);
            }
        }
        Ok(out)
    }
}

/// A key, borrowed from the text when it has no escapes (most do).
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }

            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }

            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }

            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// A wire type's [`Wire`] and `Deserialize` impls from its named fields:
/// `"key" => field: reader`.
macro_rules! wire {
    ($ty:ty $(, $generic:ident)? { $($key:literal => $field:ident: $read:ident),* $(,)? }) => {
        impl$(<$generic: Wire>)? Wire for $ty {
            fn extra(&mut self) -> &mut Fields {
                &mut self.extra
            }

            fn named<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
                match key {
                    $($key => put(&mut self.$field, $read(map)?, key, &mut self.extra),)*
                    _ => return Ok(false),
                }
                Ok(true)
            }
        }

        impl<'de $(, $generic: Wire)?> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_map(WireVisitor(PhantomData))
            }
        }
    };
}

wire!(Completion<C>, C {
    "id" => id: text,
    "object" => object: text,
    "created" => created: count,
    "model" => model: text,
    "choices" => choices: list,
    "usage" => usage: object,
});

wire!(Choice {
    "index" => index: count,
    "message" => message: object,
    "logprobs" => logprobs: any,
    "finish_reason" => finish_reason: text,
});

wire!(ChunkChoice {
    "index" => index: count,
    "delta" => delta: object,
    "logprobs" => logprobs: any,
    "finish_reason" => finish_reason: text,
});

wire!(Message {
    "role" => role: text,
    "tool_call_id" => tool_call_id: text,
    "content" => content: content,
    "tool_calls" => tool_calls: objects,
});

wire!(ToolCall {
    "index" => index: count,
    "id" => id: text,
    "type" => kind: text,
    "function" => function: object,
});

wire!(FunctionCall {
    "name" => name: text,
    "arguments" => arguments: any,
});

wire!(CompletionUsage {
    "prompt_tokens" => prompt_tokens: count,
    "completion_tokens" => completion_tokens: count,
    "total_tokens" => total_tokens: count,
});
