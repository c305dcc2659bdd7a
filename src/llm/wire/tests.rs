use serde::de::DeserializeOwned;
use serde_json::json;

use super::*;

/// `value` read as a `T` and written back; read from its text (as
/// answers are) and from a `Value` (as tests and the engine do), the two
/// must agree.
fn round_trip<T: Serialize + DeserializeOwned>(value: &Value) -> Value {
    let typed: T = serde_json::from_value(value.clone()).expect("an object is always read");
    let from_text: T = serde_json::from_str(&value.to_string()).expect("an object is always read");
    let out = serde_json::to_value(&typed).unwrap();
    assert_eq!(serde_json::to_value(&from_text).unwrap(), out, "read from text and from a Value");
    out
}

/// Real answers of OpenAI (chat completions, 2025), in the order OpenAI
/// writes their fields: they come back byte for byte.
fn openai_answers() -> Vec<Value> {
    vec![
        json!({"id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion", "created": 1741569952,
            "model": "gpt-4.1-2025-04-14",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello! How can I assist you today?",
                "refusal": null, "annotations": []}, "logprobs": null, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                    "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
            "service_tier": "default", "system_fingerprint": "fp_0165350fd4"}),
        json!({"id": "chatcmpl-abc123", "object": "chat.completion", "created": 1699896916, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": "call_abc123", "type": "function",
                    "function": {"name": "get_current_weather", "arguments": "{\n\"location\": \"Boston, MA\"\n}"}}],
                "refusal": null, "annotations": []}, "logprobs": null, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99}}),
        json!({"id": "chatcmpl-audio", "object": "chat.completion", "created": 1730000000,
            "model": "gpt-4o-audio-preview",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": null,
                "audio": {"id": "audio_abc", "data": "UklGRg==", "expires_at": 1730003600, "transcript": "Hi"}},
                "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 17, "completion_tokens": 91, "total_tokens": 108}}),
        json!({"id": "chatcmpl-logprobs", "object": "chat.completion", "created": 1702685778, "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"},
                "logprobs": {"content": [{"token": "Hi", "logprob": -0.31725305, "bytes": [72, 105],
                    "top_logprobs": [{"token": "Hi", "logprob": -0.31725305, "bytes": [72, 105]}]}], "refusal": null},
                "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}}),
        json!({"id": "chatcmpl-refused", "object": "chat.completion", "created": 1723000000, "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                "refusal": "I'm sorry, I can't help with that."}, "logprobs": null, "finish_reason": "stop"}]}),
        // DeepSeek's reasoner: the reasoning beside the content.
        json!({"id": "930c60df", "object": "chat.completion", "created": 1705651092, "model": "deepseek-reasoner",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "9.11 < 9.8",
                "reasoning_content": "Compare the tenths..."}, "logprobs": null, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 16, "completion_tokens": 250, "total_tokens": 266,
                "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 16}, "system_fingerprint": "fp_7e73fd9a08"}),
    ]
}

/// The scripted model's answers (tests/python/scripted_model.py).
fn scripted_answers() -> Vec<Value> {
    let answer = |message: Value, finish: &str| {
        json!({"id": "chatcmpl-3", "object": "chat.completion", "created": 1700000000, "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    };
    let call = |arguments: Value| {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_3", "type": "function",
            "function": {"name": "get_weather", "arguments": arguments}}]})
    };
    vec![
        answer(json!({"role": "assistant", "content": "Hello from the scripted model."}), "stop"),
        answer(call(json!("{\"city\": \"Berlin\"}")), "tool_calls"),
        answer(call(json!({"city": "Berlin"})), "tool_calls"), // "object-arguments"
        answer(json!({"role": "assistant", "content": "{\"subtasks\": [{\"task\": \"t\", \"after\": []}]}"}), "stop"),
    ]
}

/// Streamed chunks: OpenAI's (with `usage: null` until the usage chunk,
/// as `include_usage` makes them), the scripted model's, odd servers'.
fn chunks() -> Vec<Value> {
    let head = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
        "service_tier": "default", "system_fingerprint": "fp_1"});
    let with = |mut chunk: Value| {
        let fields = chunk.as_object_mut().unwrap();
        for (k, v) in head.as_object().unwrap() {
            fields.entry(k.clone()).or_insert(v.clone());
        }
        chunk
    };
    vec![
        with(json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "", "refusal": null},
            "logprobs": null, "finish_reason": null}], "usage": null})),
        with(json!({"choices": [{"index": 0, "delta": {"content": "Hel"}, "logprobs": {"content": [
            {"token": "Hel", "logprob": -0.5, "bytes": null, "top_logprobs": []}]}, "finish_reason": null}]})),
        with(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "f", "arguments": ""}}]}, "logprobs": null, "finish_reason": null}]})),
        with(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
            "function": {"arguments": "{\"a\""}}]}, "finish_reason": null}]})),
        with(json!({"choices": [{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "tool_calls"}],
            "usage": null})),
        with(json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12,
            "completion_tokens_details": {"reasoning_tokens": 0}}})),
        json!({"choices": [{"delta": {"reasoning_content": "The user greets me; "}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": null, "tool_calls": null}, "finish_reason": ""}]}),
    ]
}

/// Messages of every shape: content absent, null, text, parts, odd.
fn messages() -> Vec<Value> {
    vec![
        json!({"role": "assistant", "tool_calls": [{"id": "1", "type": "function",
            "function": {"name": "f", "arguments": "{}"}}]}),
        json!({"role": "assistant", "content": null}),
        json!({"role": "user", "content": ""}),
        json!({"role": "user", "content": [{"type": "text", "text": "Weather"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}, {"type": "text", "text": "now"}]}),
        json!({"role": "user", "content": [1, "two", {"text": 3}, {"text": "four"}]}),
        json!({"role": "user", "content": 5, "name": "ann"}),
        json!({"role": 7, "content": {"text": "an object"}}),
        json!({"role": "tool", "tool_call_id": "call_1", "content": "sunny"}),
        json!({"role": "assistant", "content": "x", "tool_calls": [], "function_call": null}),
        json!({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": null}}, 5]}),
        json!({"role": "assistant", "tool_calls": [{"id": null, "type": 1, "function": "f"}]}),
        json!({}),
    ]
}

#[test]
fn openai_answers_round_trip_byte_for_byte() {
    for answer in openai_answers() {
        let typed: Completion = serde_json::from_value(answer.clone()).unwrap();
        assert!(typed.has_messages());
        assert_eq!(serde_json::to_string(&typed).unwrap(), answer.to_string());
        let typed: Completion = serde_json::from_slice(answer.to_string().as_bytes()).unwrap();
        assert_eq!(serde_json::to_string(&typed).unwrap(), answer.to_string());
    }
}

#[test]
fn every_shape_round_trips_exactly() {
    for answer in openai_answers().iter().chain(&scripted_answers()) {
        assert_eq!(&round_trip::<Completion>(answer), answer);
    }
    for chunk in chunks() {
        assert_eq!(round_trip::<Chunk>(&chunk), chunk);
    }
    for message in messages() {
        assert_eq!(round_trip::<Message>(&message), message);
    }
    let odd = json!({"id": null, "object": 3, "created": 1.5, "model": ["m"],
        "choices": [{"index": -1, "message": "text", "finish_reason": ""}], "usage": "n/a"});
    assert_eq!(round_trip::<Completion>(&odd), odd);
    let not_choices = json!({"id": "x", "choices": {"0": {}}});
    assert_eq!(round_trip::<Completion>(&not_choices), not_choices);
    let mut no_choices = json!({"id": "x"});
    assert_eq!(round_trip::<Completion>(&no_choices), json!({"id": "x", "choices": []}), "choices always written");
    no_choices["choices"] = json!([5]);
    assert_eq!(round_trip::<Completion>(&no_choices), no_choices);
}

/// Random JSON, `depth` levels deep at most.
fn any(rng: &mut fastrand::Rng, depth: u32) -> Value {
    match rng.u8(..if depth == 0 { 5 } else { 7 }) {
        0 => Value::Null,
        1 => json!(rng.bool()),
        2 => json!(rng.i64(-5..1_000_000)),
        3 => json!(rng.f64() * 100.0 - 50.0),
        4 => json!(["", "stop", "assistant", "x y", "{\"a\": 1}"][rng.usize(..5)]),
        5 => Value::Array((0..rng.usize(..3)).map(|_| any(rng, depth - 1)).collect()),
        _ => Value::Object((0..rng.usize(..3)).map(|i| (format!("k{i}"), any(rng, depth - 1))).collect()),
    }
}

type Gen = fn(&mut fastrand::Rng) -> Value;

/// An object with `known` fields, each absent, null, of its type or of
/// another, and some unknown fields.
fn object(rng: &mut fastrand::Rng, known: &[(&str, Gen)]) -> Value {
    let mut fields = Fields::new();
    for (key, typed) in known {
        let value = match rng.u8(..4) {
            0 => continue,
            1 => Value::Null,
            2 => typed(rng),
            _ => any(rng, 2),
        };
        fields.insert(key.to_string(), value);
    }
    for i in 0..rng.usize(..3) {
        fields.insert(format!("new_field_{i}"), any(rng, 2));
    }
    Value::Object(fields)
}

fn text(rng: &mut fastrand::Rng) -> Value {
    json!(["", "a", "assistant", "stop", "Hello, world"][rng.usize(..5)])
}

fn count(rng: &mut fastrand::Rng) -> Value {
    json!(rng.u64(..u64::MAX))
}

fn list(rng: &mut fastrand::Rng, item: Gen) -> Value {
    Value::Array((0..rng.usize(..3)).map(|_| item(rng)).collect())
}

fn function(rng: &mut fastrand::Rng) -> Value {
    object(rng, &[("name", text), ("arguments", |r| if r.bool() { text(r) } else { any(r, 2) })])
}

fn tool_call(rng: &mut fastrand::Rng) -> Value {
    object(rng, &[("index", count), ("id", text), ("type", text), ("function", function)])
}

fn message(rng: &mut fastrand::Rng) -> Value {
    let content: Gen = |r| if r.bool() { text(r) } else { list(r, |r| object(r, &[("type", text), ("text", text)])) };
    object(rng, &[("role", text), ("tool_call_id", text), ("content", content), ("tool_calls", |r| list(r, tool_call))])
}

fn usage(rng: &mut fastrand::Rng) -> Value {
    object(rng, &[("prompt_tokens", count), ("completion_tokens", count), ("total_tokens", count)])
}

fn completion(rng: &mut fastrand::Rng, choice: Gen) -> Value {
    let mut value = object(
        rng,
        &[("id", text), ("object", text), ("created", count), ("model", text), ("usage", usage), ("choices", choice)],
    );
    // `choices` is always written: `[]` when absent.
    value.as_object_mut().unwrap().entry("choices").or_insert(json!([]));
    value
}

#[test]
fn random_shapes_round_trip_exactly() {
    let mut rng = fastrand::Rng::with_seed(7);
    let choice: Gen = |r| {
        list(r, |r| {
            object(r, &[("index", count), ("message", message), ("logprobs", |r| any(r, 2)), ("finish_reason", text)])
        })
    };
    let chunk_choice: Gen = |r| {
        list(r, |r| {
            object(r, &[("index", count), ("delta", message), ("logprobs", |r| any(r, 2)), ("finish_reason", text)])
        })
    };
    for _ in 0..3_000 {
        let answer = completion(&mut rng, choice);
        assert_eq!(round_trip::<Completion>(&answer), answer);
        let chunk = completion(&mut rng, chunk_choice);
        assert_eq!(round_trip::<Chunk>(&chunk), chunk);
        let message = message(&mut rng);
        assert_eq!(round_trip::<Message>(&message), message);
    }
}

#[test]
fn the_text_of_a_message_is_its_text_whatever_the_shape() {
    let texts: Vec<String> =
        messages().into_iter().map(|m| serde_json::from_value::<Message>(m).unwrap().text()).collect();
    assert_eq!(texts, ["", "", "", "Weather\nnow", "four", "", "", "sunny", "x", "", "", ""]);
}

#[test]
fn named_fields_win_over_what_came_instead() {
    let mut answer: Completion = serde_json::from_value(json!({"model": 3, "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "hi"}, "finish_reason": null}]}))
    .unwrap();
    answer.model = Some("mine".into());
    answer.choices[0].finish_reason = Some("stop".into());
    let out = serde_json::to_value(&answer).unwrap();
    assert_eq!((&out["model"], &out["choices"][0]["finish_reason"]), (&json!("mine"), &json!("stop")));
}

#[test]
fn a_completion_becomes_the_chunks_of_its_stream() {
    let answer: Completion = serde_json::from_value(scripted_answers()[1].clone()).unwrap();
    let chunks: Vec<Value> = chunks_of(&answer).iter().map(|c| serde_json::to_value(c).unwrap()).collect();
    assert_eq!(
        chunks,
        [
            json!({"id": "chatcmpl-3", "object": "chat.completion.chunk", "created": 1700000000, "model": "scripted",
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                    "id": "call_3", "type": "function", "function": {"name": "get_weather",
                    "arguments": "{\"city\": \"Berlin\"}"}}]}, "finish_reason": "tool_calls"}]}),
            json!({"id": "chatcmpl-3", "object": "chat.completion.chunk", "created": 1700000000, "model": "scripted",
                "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}),
        ]
    );
    let ours = Chunk::new(&answer, vec![ChunkChoice::new(Message::default(), None)]);
    assert_eq!(
        serde_json::to_string(&ours.choices[0]).unwrap(),
        r#"{"index":0,"delta":{},"logprobs":null,"finish_reason":null}"#
    );
}

#[test]
fn every_named_field_is_read_in_each_shape_it_comes_in() {
    // A field left in `extra` reads as missing: arguments as an object
    // (some servers send one) went unread once.
    for arguments in [json!("{\"city\": \"Berlin\"}"), json!({"city": "Berlin"})] {
        let call: FunctionCall =
            serde_json::from_value(json!({"name": "get_weather", "arguments": arguments})).unwrap();
        assert_eq!(call.arguments, Some(arguments.clone()));
        assert!(call.extra.is_empty(), "{:?}", call.extra);
    }
    for content in [json!("hi"), json!([{"type": "text", "text": "hi"}]), Value::Null] {
        let message: Message = serde_json::from_value(json!({"role": "assistant", "content": content,
            "tool_calls": [{"id": "c", "type": "function", "index": 0, "function": {"name": "f", "arguments": "{}"}}]}))
        .unwrap();
        assert!(message.extra.is_empty() && message.tool_calls.as_ref().is_some_and(|c| c[0].extra.is_empty()));
    }
    let answer: Completion = serde_json::from_value(json!({"id": "x", "object": "chat.completion", "created": 1,
        "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
        "logprobs": null, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}))
    .unwrap();
    assert!(answer.extra.is_empty() && answer.choices[0].extra.is_empty(), "{answer:?}");
    assert!(answer.usage.is_some_and(|u| u.extra.is_empty() && u.total_tokens == Some(2)));
}

#[test]
fn keys_read_as_their_text_and_a_repeated_key_as_its_last_value() {
    let answer: Completion = serde_json::from_str(
        r#"{"\u0069d": "a", "model": "m", "model": 5, "created": 1, "created": 2, "usage": 1, "usage": {}}"#,
    )
    .unwrap();
    assert_eq!(answer.id.as_deref(), Some("a"), "an escaped key is its text");
    assert_eq!((&answer.model, answer.extra.get("model")), (&None, Some(&json!(5))));
    assert_eq!(answer.created, Some(2));
    assert!(answer.usage.is_some() && !answer.extra.contains_key("usage"), "{answer:?}");
    for bad in ["[1]", "\"text\"", r#"{"choices": [{"message": }]}"#, r#"{"choices": [{"message": {"role": "a"}]"#] {
        assert!(serde_json::from_str::<Completion>(bad).is_err(), "{bad}");
    }
}
