//! A chat-completions request body as the model client sends it: its
//! top-level fields, each kept as the JSON text it came as, in order.
//!
//! A client's body passes through field by field: toolrouter replaces what
//! it changes (`model`, the narrowed `tools`, a repair's `messages`) and
//! copies the rest as text, never parsing it into values or writing it
//! again (on every request, the whole-body copies and rewrites were a
//! fifth of the server's CPU, docs/benchmarks.md). The model client
//! decides `stream` ([`RequestBody::to_json`]).

use serde::Serialize;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// A request body's top-level fields as JSON text, in order (a key sent
/// twice keeps its last value, as a JSON object read into a map would).
#[derive(Debug, Clone, Default)]
pub struct RequestBody {
    fields: Vec<(String, Box<RawValue>)>,
}

impl RequestBody {
    /// The fields of a JSON object's text (an error for anything else).
    pub fn parse(bytes: &[u8]) -> serde_json::Result<RequestBody> {
        serde_json::from_slice(bytes)
    }

    /// The body of a request toolrouter writes itself.
    pub(crate) fn of<T: Serialize>(request: &T) -> RequestBody {
        let text = serde_json::to_string(request).unwrap_or_default();
        serde_json::from_str(&text).unwrap_or_default()
    }

    /// The body of `fields` (a face's request, made in the chat shape):
    /// each value written once, as JSON text.
    pub(crate) fn from_fields(fields: serde_json::Map<String, Value>) -> RequestBody {
        let fields = fields.into_iter().map(|(k, v)| {
            let raw = serde_json::value::to_raw_value(&v).unwrap_or_else(|_| null());
            (k, raw)
        });
        RequestBody { fields: fields.collect() }
    }

    /// The JSON text of `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&RawValue> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| &**v)
    }

    /// Sets `key` to `value`'s JSON, in its place if it was there, else last.
    pub(crate) fn set<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) {
        let raw = serde_json::value::to_raw_value(value).unwrap_or_else(|_| null());
        self.set_raw(key, raw);
    }

    /// Sets `key` to the JSON text `raw`.
    pub(crate) fn set_raw(&mut self, key: &str, raw: Box<RawValue>) {
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some(field) => field.1 = raw,
            None => self.fields.push((key.to_string(), raw)),
        }
    }

    /// Takes `key` out.
    pub(crate) fn remove(&mut self, key: &str) -> Option<Box<RawValue>> {
        let at = self.fields.iter().position(|(k, _)| k == key)?;
        Some(self.fields.remove(at).1)
    }

    /// The body to send: every field, `"stream"` as asked, and
    /// `stream_options` only on a streamed request (OpenAI refuses it
    /// otherwise).
    pub fn to_json(&self, stream: bool) -> Vec<u8> {
        let size: usize = self.fields.iter().map(|(k, v)| k.len() + v.get().len() + 4).sum();
        let mut out = Vec::with_capacity(size + 20);
        out.push(b'{');
        for (key, value) in &self.fields {
            if key == "stream" || (key == "stream_options" && !stream) {
                continue;
            }
            // Keys are written escaped as JSON strings (they came unescaped).
            serde_json::to_writer(&mut out, key).expect("writing to a Vec cannot fail");
            out.push(b':');
            out.extend_from_slice(value.get().as_bytes());
            out.push(b',');
        }
        out.extend_from_slice(if stream { b"\"stream\":true}" } else { b"\"stream\":false}" });
        out
    }
}

fn null() -> Box<RawValue> {
    RawValue::from_string("null".into()).expect("null is JSON")
}

impl<'de> Deserialize<'de> for RequestBody {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RequestBody, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = RequestBody;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RequestBody, A::Error> {
                let mut body = RequestBody::default();
                while let Some((key, value)) = map.next_entry::<String, Box<RawValue>>()? {
                    body.set_raw(&key, value);
                }
                Ok(body)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fields_pass_through_as_text_and_stream_is_the_senders() {
        let text = br#"{"model": "m", "messages":[{"role":"user","content":"hi \u00e9"}], "stream": true,
            "stream_options": {"include_usage": true}, "we\"ird": 1.50, "model": "last"}"#;
        let mut body = RequestBody::parse(text).unwrap();
        assert_eq!(body.get("model").unwrap().get(), r#""last""#, "a repeated key keeps its last value");
        assert_eq!(body.get("we\"ird").unwrap().get(), "1.50", "numbers are not rewritten");
        body.set("model", "upstream");
        let plain: Value = serde_json::from_slice(&body.to_json(false)).unwrap();
        assert_eq!(
            plain,
            json!({"model": "upstream", "messages": [{"role": "user", "content": "hi é"}], "we\"ird": 1.5,
                "stream": false})
        );
        let out = String::from_utf8(body.to_json(false)).unwrap();
        assert!(out.contains(r#""content":"hi \u00e9""#), "escapes are copied as they came: {out}");
        let streamed: Value = serde_json::from_slice(&body.to_json(true)).unwrap();
        assert_eq!(streamed["stream_options"], json!({"include_usage": true}));
        assert_eq!(streamed["stream"], json!(true));
        assert!(body.remove("messages").is_some() && body.get("messages").is_none());
        assert_eq!(
            serde_json::from_slice::<Value>(&RequestBody::default().to_json(false)).unwrap(),
            json!({"stream": false})
        );
        for not_an_object in [&b"[1]"[..], b"\"x\"", b"{", b"null"] {
            assert!(RequestBody::parse(not_an_object).is_err());
        }
    }
}
