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

/// Sets `field` from `read`; what does not fit goes to `extra` under
/// `key`. A key that comes twice counts once, as its last value.
fn put<T>(field: &mut Option<T>, read: Read<T>, key: &str, extra: &mut Fields) {
    match read {
        Read::Fits(value) => {
            *field = Some(value);
            extra.shift_remove(key);
        }
        Read::Other(value) => {
            *field = None;
            extra.insert(key.to_owned(), value);
        }
    }
}

fn text(value: Value) -> Read<String> {
    match value {
        Value::String(text) => Read::Fits(text),
        other => Read::Other(other),
    }
}

fn count(value: Value) -> Read<u64> {
    match value.as_u64() {
        Some(n) => Read::Fits(n),
        None => Read::Other(value),
    }
}

/// A message's content: text, a list of parts or null.
fn content_of(value: Value) -> Read<Content> {
    match value {
        Value::Null => Read::Fits(Content::Null),
        Value::String(text) => Read::Fits(Content::Text(text)),
        Value::Array(parts) => Read::Fits(Content::Parts(parts)),
        other => Read::Other(other),
    }
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

    /// A named object (a choice's message, a call's function).
    fn object(self) -> Read<T> {
        match self {
            Shape::Object(object) => Read::Fits(object),
            other => Read::Other(other.into_value()),
        }
    }

    /// A named list of objects (choices, tool calls): every item one.
    fn objects(self) -> Read<Vec<T>> {
        match self {
            Shape::List(items) if items.iter().all(|item| matches!(item, Shape::Object(_))) => {
                Read::Fits(items.into_iter().filter_map(Shape::into_object).collect())
            }
            other => Read::Other(other.into_value()),
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

/// `Deserialize` for wire types: an object read by [`WireVisitor`].
macro_rules! deserialize_wire {
    ($($ty:ty $(, $generic:ident)?);* $(;)?) => {$(
        impl<'de $(, $generic: Wire)?> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_map(WireVisitor(PhantomData))
            }
        }
    )*};
}

deserialize_wire!(Completion<C>, C; Choice; ChunkChoice; Message; ToolCall; FunctionCall; CompletionUsage);

impl<C: Wire> Wire for Completion<C> {
    fn extra(&mut self) -> &mut Fields {
        &mut self.extra
    }

    fn named<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        let extra = &mut self.extra;
        match key {
            "id" => put(&mut self.id, text(map.next_value()?), key, extra),
            "object" => put(&mut self.object, text(map.next_value()?), key, extra),
            "created" => put(&mut self.created, count(map.next_value()?), key, extra),
            "model" => put(&mut self.model, text(map.next_value()?), key, extra),
            "choices" => {
                let mut choices = None;
                put(&mut choices, map.next_value::<Shape<C>>()?.objects(), key, extra);
                self.choices = choices.unwrap_or_default();
            }
            "usage" => put(&mut self.usage, map.next_value::<Shape<CompletionUsage>>()?.object(), key, extra),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// A choice and a chunk's choice: the same fields but the message's name.
macro_rules! wire_choice {
    ($ty:ty, $message:ident) => {
        impl Wire for $ty {
            fn extra(&mut self) -> &mut Fields {
                &mut self.extra
            }

            fn named<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
                let extra = &mut self.extra;
                match key {
                    "index" => put(&mut self.index, count(map.next_value()?), key, extra),
                    stringify!($message) => {
                        put(&mut self.$message, map.next_value::<Shape<Message>>()?.object(), key, extra)
                    }
                    "logprobs" => put(&mut self.logprobs, Read::Fits(map.next_value()?), key, extra),
                    "finish_reason" => put(&mut self.finish_reason, text(map.next_value()?), key, extra),
                    _ => return Ok(false),
                }
                Ok(true)
            }
        }
    };
}

wire_choice!(Choice, message);
wire_choice!(ChunkChoice, delta);

impl Wire for Message {
    fn extra(&mut self) -> &mut Fields {
        &mut self.extra
    }

    fn named<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        let extra = &mut self.extra;
        match key {
            "role" => put(&mut self.role, text(map.next_value()?), key, extra),
            "tool_call_id" => put(&mut self.tool_call_id, text(map.next_value()?), key, extra),
            "content" => {
                let mut content = None;
                put(&mut content, content_of(map.next_value()?), key, extra);
                self.content = content.unwrap_or_default();
            }
            "tool_calls" => put(&mut self.tool_calls, map.next_value::<Shape<ToolCall>>()?.objects(), key, extra),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Wire for ToolCall {
    fn extra(&mut self) -> &mut Fields {
        &mut self.extra
    }

    fn named<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        let extra = &mut self.extra;
        match key {
            "index" => put(&mut self.index, count(map.next_value()?), key, extra),
            "id" => put(&mut self.id, text(map.next_value()?), key, extra),
            "type" => put(&mut self.kind, text(map.next_value()?), key, extra),
            "function" => put(&mut self.function, map.next_value::<Shape<FunctionCall>>()?.object(), key, extra),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Wire for FunctionCall {
    fn extra(&mut self) -> &mut Fields {
        &mut self.extra
    }

    fn named<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        let extra = &mut self.extra;
        match key {
            "name" => put(&mut self.name, text(map.next_value()?), key, extra),
            "arguments" => put(&mut self.arguments, Read::Fits(map.next_value()?), key, extra),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Wire for CompletionUsage {
    fn extra(&mut self) -> &mut Fields {
        &mut self.extra
    }

    fn named<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        let extra = &mut self.extra;
        match key {
            "prompt_tokens" => put(&mut self.prompt_tokens, count(map.next_value()?), key, extra),
            "completion_tokens" => put(&mut self.completion_tokens, count(map.next_value()?), key, extra),
            "total_tokens" => put(&mut self.total_tokens, count(map.next_value()?), key, extra),
            _ => return Ok(false),
        }
        Ok(true)
    }
}
