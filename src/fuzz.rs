//! Property tests of the parsers that read untrusted input (proptest): the
//! model's event streams (`llm::sse`), chat request bodies
//! (`chat::request::parse`), JSON in text (`json_text`), Python
//! literals (`trajectory::pyliteral`), JSON Schema of any dialect
//! (`catalog::dialect`) and OpenAPI documents (the catalog loader). Each
//! must end, without a panic, on any input; the wire formats must also
//! read back exactly what was written.
//!
//! CI runs proptest's default 256 cases per property; a longer run sets
//! `PROPTEST_CASES` (docs/development.md, "Fuzzing"). Inputs are bounded
//! (a few kilobytes, nesting a few levels deep), so memory is too.

use std::time::Duration;

use proptest::prelude::*;
use serde_json::{Map, Value};

/// Keys the parsers look for, so that generated documents reach past
/// their first checks.
const KEYS: &[&str] = &[
    "type",
    "properties",
    "items",
    "required",
    "enum",
    "$ref",
    "anyOf",
    "oneOf",
    "allOf",
    "$defs",
    "definitions",
    "openapi",
    "info",
    "servers",
    "url",
    "paths",
    "get",
    "post",
    "parameters",
    "requestBody",
    "content",
    "application/json",
    "schema",
    "components",
    "schemas",
    "name",
    "in",
    "description",
    "operationId",
    "model",
    "messages",
    "role",
    "tools",
    "function",
    "arguments",
    "tool_calls",
    "stream",
    "toolrouter",
    "mode",
    "format",
    "nullable",
    "const",
    "default",
    "example",
    "additionalProperties",
    "prefixItems",
    "id",
    "choices",
    "delta",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![3 => prop::sample::select(KEYS).prop_map(str::to_string), 1 => ".{0,8}"]
}

/// Any JSON value, a few levels deep, its keys mostly ones the parsers know.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        prop::sample::select(&["object", "string", "integer", "array", "boolean", "null", "3.0.0", "user"][..])
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6).prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// The chunks of an event stream read by the model client's reader.
fn read_events(pieces: Vec<Vec<u8>>) -> Vec<Result<crate::llm::wire::Chunk, crate::llm::LlmError>> {
    use futures_util::StreamExt;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime");
    runtime.block_on(async {
        let bytes = futures_util::stream::iter(pieces.into_iter().map(Ok::<_, crate::llm::sse::BoxError>)).boxed();
        let events = crate::llm::sse::events(bytes, Duration::from_millis(200), 1 << 20);
        tokio::time::timeout(Duration::from_secs(10), events.collect::<Vec<_>>()).await.expect("the reader ends")
    })
}

/// `value` as Python's `repr()` writes it (strings single-quoted).
fn python_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let mut out = String::from("'");
            for c in s.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\'' => out.push_str("\\'"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
                    c => out.push(c),
                }
            }
            out + "'"
        }
        Value::Array(items) => format!("[{}]", items.iter().map(python_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", python_repr(&Value::from(k.as_str())), python_repr(v)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
    }
}

/// A value Python literals and JSON both hold exactly (integers, not floats).
fn literal() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::String),
        "[\\\\'\"\n\t a-z]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(".{0,6}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    /// Any bytes, cut anywhere: the reader ends, with chunks or an error.
    #[test]
    fn the_event_stream_reader_ends_on_any_bytes(pieces in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..16)) {
        read_events(pieces);
    }

    /// Chunks written as events and cut at any byte read back as written.
    #[test]
    fn events_read_back_exactly(texts in prop::collection::vec("\\PC{0,16}", 1..8), cuts in prop::collection::vec(any::<usize>(), 0..8)) {
        let mut stream = String::new();
        for text in &texts {
            let chunk = serde_json::json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
            stream.push_str(&format!("data: {chunk}\n\n"));
        }
        stream.push_str("data: [DONE]\n\n");
        let bytes = stream.into_bytes();
        let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        at.extend([0, bytes.len()]);
        at.sort_unstable();
        let pieces: Vec<Vec<u8>> = at.windows(2).map(|w| bytes[w[0]..w[1]].to_vec()).collect();
        let read: Vec<String> = read_events(pieces)
            .into_iter()
            .map(|c| c.expect("a whole chunk").choices[0].delta.as_ref().expect("a delta").text())
            .collect();
        prop_assert_eq!(read, texts);
    }

    /// Any JSON document, or any bytes, as a chat request: parsed or refused, never a panic.
    #[test]
    fn a_chat_request_body_is_parsed_or_refused(body in json(), bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let config = crate::config::OpenAiConfig::default();
        let lists = crate::chat::tools::ToolLists::new(false);
        let chat = serde_json::json!({"model": "m", "messages": [body.clone()], "tools": [body.clone()]});
        for input in [body.to_string().into_bytes(), chat.to_string().into_bytes(), bytes] {
            let _ = crate::chat::request::parse(&input, &config, None, &lists, std::time::Duration::from_secs(1));
        }
    }

    /// JSON in text: any text, any document cut anywhere, read or refused; a
    /// whole object or array reads back as itself.
    #[test]
    fn json_in_text_reads_back_and_survives_cuts(value in json(), text in "\\PC{0,64}", cut in any::<usize>()) {
        let _ = crate::json_text::parse(&text);
        let written = value.to_string();
        let boundaries: Vec<usize> = written.char_indices().map(|(i, _)| i).collect();
        let at = boundaries.get(cut % boundaries.len().max(1)).copied().unwrap_or(0);
        let _ = crate::json_text::parse(&written[..at]);
        if value.is_object() || value.is_array() {
            let (read, how) = crate::json_text::parse(&written).expect("a whole document");
            prop_assert_eq!(read, value);
            prop_assert_eq!(how, crate::json_text::Read::Json);
        }
    }

    /// Python literals: any text read or refused (prefixes too); `repr()`
    /// output reads back exactly.
    #[test]
    fn python_literals_read_back(value in literal(), text in "\\PC{0,64}", cut in any::<usize>()) {
        use crate::trajectory::pyliteral;
        let _ = pyliteral::parse(&text);
        let _ = pyliteral::parse_leading(&text);
        let _ = pyliteral::parse_dict_prefix(&text);
        let written = python_repr(&value);
        prop_assert_eq!(pyliteral::parse(&written).expect("repr() output parses"), value);
        let boundaries: Vec<usize> = written.char_indices().map(|(i, _)| i).collect();
        let at = boundaries[cut % boundaries.len()];
        let _ = pyliteral::parse_dict_prefix(&written[..at]);
    }

    /// JSON Schema of any shape: normalized and checked without a panic.
    #[test]
    fn any_schema_is_normalized_or_refused(schema in json()) {
        let normalized = crate::catalog::dialect::normalize(&schema);
        let _ = crate::catalog::dialect::check(&normalized);
    }

    /// Any document that says it is OpenAPI: a tool or a reason, never a panic.
    #[test]
    fn any_openapi_document_loads_or_is_refused(mut doc in json(), paths in json(), servers in json()) {
        if !doc.is_object() {
            doc = serde_json::json!({});
        }
        doc["openapi"] = Value::from("3.0.0");
        doc["paths"] = paths;
        doc["servers"] = servers;
        let mut notes = crate::catalog::Notes::default();
        let _ = crate::catalog::parse_json(doc.to_string().as_bytes(), "Fuzz", &mut notes);
    }
}
