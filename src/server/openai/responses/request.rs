//! A Responses API request (`POST /v1/responses`) as the chat-completions
//! request the OpenAI face serves: `instructions` a system message first,
//! `input` (a string, or items) the messages, function `tools` and
//! `tool_choice` in chat's shape, `max_output_tokens`, `text.format` and
//! `reasoning.effort` under their chat names. Fields the Responses API has
//! and chat does not are refused when honouring them silently differently
//! would mislead (`conversation`, `background`, tools other than
//! functions), dropped when they only tune OpenAI's own service (listed in
//! [`DROPPED`], docs/openai.md); any other field is passed on as it came.
//! `previous_response_id` is resolved before (the handler puts the kept
//! conversation in front of `input`, [`input_items`]).

use serde_json::{Map, Value, json};

use super::search::{self, NAMESPACED, Searching};
use crate::server::error::ApiError;
use crate::server::translate::object;

/// Responses fields with no chat counterpart that change nothing a
/// chat-completions model server does: dropped.
pub(crate) const DROPPED: &[&str] = &[
    "store",
    "include",
    "truncation",
    "service_tier",
    "prompt_cache_key",
    "safety_identifier",
    "prompt_cache_retention",
];

/// The chat-completions body of a Responses request body.
pub(crate) fn to_chat(body: &Value) -> Result<Map<String, Value>, ApiError> {
    let Some(fields) = body.as_object() else {
        return Err(ApiError::invalid("the request body must be a JSON object", None));
    };
    for (field, why) in [
        (
            "conversation",
            "conversation objects are not served: use `previous_response_id` or send the whole conversation in `input`",
        ),
        ("background", "background responses are not served: leave `background` out"),
        ("prompt", "stored prompt templates are not served: send `instructions` and `input`"),
    ] {
        if fields.get(field).is_some_and(|v| !v.is_null() && v != &Value::Bool(false)) {
            return Err(ApiError::invalid(format!("`{field}` is not supported: {why}"), Some(field)));
        }
    }
    let mut chat = Map::new();
    let mut messages = Vec::new();
    if let Some(instructions) = fields.get("instructions").filter(|v| !v.is_null()) {
        let text = instructions
            .as_str()
            .ok_or_else(|| ApiError::invalid("`instructions` must be a string", Some("instructions")))?;
        messages.push(json!({"role": "system", "content": text}));
    }
    match fields.get("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => messages.extend(input_messages(items)?),
        Some(_) => return Err(ApiError::invalid("`input` must be a string or a list of items", Some("input"))),
        None => return Err(ApiError::invalid("`input` is required", Some("input"))),
    }
    if let Some(id) = crate::server::translate::unanswerable_result(&messages) {
        let message = format!(
            "input: a `function_call_output` for `{id}`, which no earlier `function_call` has \
             (send the call too, or continue the response that made it with `previous_response_id`)"
        );
        return Err(ApiError::invalid(message, Some("input")));
    }
    chat.insert("messages".into(), Value::Array(messages));
    let mut searching = Searching::None;
    for (key, value) in fields {
        match key.as_str() {
            "instructions" | "input" | "previous_response_id" | "conversation" | "background" | "prompt" => {}
            k if DROPPED.contains(&k) => {}
            "tools" => {
                let (tools, asked) = search::tools(value)?;
                searching = asked;
                chat.insert("tools".into(), Value::Array(tools));
            }
            "tool_choice" => {
                chat.insert("tool_choice".into(), tool_choice(value)?);
            }
            "max_output_tokens" => {
                chat.insert("max_tokens".into(), value.clone());
            }
            "text" => {
                if let Some(format) = response_format(value)? {
                    chat.insert("response_format".into(), format);
                }
            }
            "reasoning" => {
                if let Some(effort) = value.get("effort").filter(|e| !e.is_null()) {
                    chat.insert("reasoning_effort".into(), effort.clone());
                }
            }
            "stream" => {
                chat.insert("stream".into(), value.clone());
                if value == &Value::Bool(true) {
                    // usage for `response.completed`
                    chat.insert("stream_options".into(), json!({"include_usage": true}));
                }
            }
            _ => {
                chat.insert(key.clone(), value.clone());
            }
        }
    }
    searched_before(&mut chat, fields.get("input"), searching);
    Ok(chat)
}

/// What tool search changes in a chat body: the search asked of the core
/// (`toolrouter.tool_search`, unless the client set it), the tools earlier
/// `tool_search_output` items loaded (added when the request lacks them)
/// and, when the client searches, its deferred tools left out until loaded.
fn searched_before(chat: &mut Map<String, Value>, input: Option<&Value>, searching: Searching) {
    let outputs = input.and_then(Value::as_array).into_iter().flatten().filter(|i| i["type"] == "tool_search_output");
    let loaded: Vec<(String, Value)> = outputs.flat_map(search::loaded).collect();
    if let Some(Value::Array(tools)) = chat.get_mut("tools") {
        if searching == Searching::Client {
            let unloaded = |t: &Value| {
                t["defer_loading"] == Value::Bool(true) && !loaded.iter().any(|(n, _)| t["function"]["name"] == *n)
            };
            tools.retain(|t| !unloaded(t));
            for t in tools.iter_mut() {
                t.as_object_mut().map(|t| t.remove("defer_loading"));
            }
        }
        for (name, definition) in loaded {
            if !tools.iter().any(|t| t["function"]["name"] == name) {
                tools.push(definition);
            }
        }
    }
    let wanted = match searching {
        Searching::None => return,
        Searching::Server => Value::Bool(true),
        Searching::Client => Value::Bool(false),
    };
    let options = chat.entry("toolrouter").or_insert_with(|| Value::Object(Map::new()));
    if let Some(options) = options.as_object_mut() {
        options.entry("tool_search").or_insert(wanted);
    }
}

/// The items of `input`: a string is one user message.
pub(crate) fn input_items(body: &Value) -> Result<Vec<Value>, ApiError> {
    match body.get("input") {
        Some(Value::String(text)) => Ok(vec![json!({"type": "message", "role": "user", "content": text})]),
        Some(Value::Array(items)) => Ok(items.clone()),
        Some(_) => Err(ApiError::invalid("`input` must be a string or a list of items", Some("input"))),
        None => Err(ApiError::invalid("`input` is required", Some("input"))),
    }
}

/// The messages of `input` items: messages (with `type: message` or just
/// a role), `function_call`s (consecutive ones one assistant message),
/// `function_call_output`s; `reasoning` items are left out (a
/// chat-completions model has no field to take them back).
fn input_messages(items: &[Value]) -> Result<Vec<Value>, ApiError> {
    let mut out: Vec<Value> = Vec::new();
    // The id of the last `tool_search_call` (a hosted one has no `call_id`).
    let mut search_id = String::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("input[{i}]");
        let bad = |what: &str| ApiError::invalid(format!("{at}: {what}"), Some("input"));
        let kind =
            item.get("type").and_then(Value::as_str).unwrap_or(if item.get("role").is_some() { "message" } else { "" });
        match kind {
            "message" => {
                let role = item.get("role").and_then(Value::as_str).ok_or_else(|| bad("a message needs a `role`"))?;
                let role = if role == "developer" { "system" } else { role };
                out.push(object([("role", role.into()), ("content", content(item.get("content"), &at)?)]));
            }
            "function_call" => {
                let (Some(name), Some(call_id)) =
                    (item.get("name").and_then(Value::as_str), item.get("call_id").and_then(Value::as_str))
                else {
                    return Err(bad("a `function_call` needs `name` and `call_id`"));
                };
                let arguments = item.get("arguments").and_then(Value::as_str).unwrap_or("{}");
                let name = match item.get("namespace").and_then(Value::as_str) {
                    // A deferred function outside any namespace is its own.
                    Some(namespace) if namespace != name => format!("{namespace}{NAMESPACED}{name}"),
                    _ => name.to_string(),
                };
                let call =
                    json!({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}});
                match out.last_mut() {
                    Some(last) if last["role"] == "assistant" && last["tool_calls"].is_array() => {
                        last["tool_calls"].as_array_mut().expect("checked").push(call);
                    }
                    _ => out.push(object([
                        ("role", "assistant".into()),
                        ("content", Value::Null),
                        ("tool_calls", Value::Array(vec![call])),
                    ])),
                }
            }
            "function_call_output" => {
                let call_id = item
                    .get("call_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("a `function_call_output` needs `call_id`"))?;
                let output = match item.get("output") {
                    Some(Value::String(text)) => Value::String(text.clone()),
                    Some(parts @ Value::Array(_)) => content(Some(parts), &at)?,
                    _ => return Err(bad("a `function_call_output` needs an `output`")),
                };
                out.push(object([("role", "tool".into()), ("tool_call_id", call_id.into()), ("content", output)]));
            }
            "reasoning" => {}
            "tool_search_call" => {
                let id = item.get("call_id").or_else(|| item.get("id")).and_then(Value::as_str);
                search_id = id.map_or_else(|| format!("search_{i}"), str::to_string);
                out.push(search::call_message(item, &search_id));
            }
            "tool_search_output" => {
                let id = item.get("call_id").and_then(Value::as_str).unwrap_or(&search_id);
                if id.is_empty() {
                    return Err(bad("a `tool_search_output` needs the `tool_search_call` it answers before it"));
                }
                out.push(search::output_message(item, id));
            }
            other => {
                return Err(bad(&format!(
                    "items of type {other:?} are not served (message, function_call, function_call_output, \
                     tool_search_call, tool_search_output and reasoning are)"
                )));
            }
        }
    }
    Ok(out)
}

/// A message's content in chat's shape: text as it came, parts
/// (`input_text`/`output_text` → `text`, `input_image` → `image_url`).
fn content(content: Option<&Value>, at: &str) -> Result<Value, ApiError> {
    let parts = match content {
        Some(Value::String(text)) => return Ok(Value::String(text.clone())),
        Some(Value::Array(parts)) => parts,
        _ => {
            return Err(ApiError::invalid(
                format!("{at}: `content` must be a string or a list of parts"),
                Some("input"),
            ));
        }
    };
    let mut out = Vec::new();
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("input_text" | "output_text" | "text") => {
                out.push(object([("type", "text".into()), ("text", part.get("text").cloned().unwrap_or_default())]));
            }
            Some("input_image") => {
                let url = part.get("image_url").cloned().ok_or_else(|| {
                    ApiError::invalid(
                        format!("{at}: an `input_image` needs an `image_url` (file ids are not served)"),
                        Some("input"),
                    )
                })?;
                let mut image = object([("url", url)]);
                if let Some(detail) = part.get("detail") {
                    image["detail"] = detail.clone();
                }
                out.push(object([("type", "image_url".into()), ("image_url", image)]));
            }
            Some("refusal") => {
                out.push(object([("type", "text".into()), ("text", part.get("refusal").cloned().unwrap_or_default())]))
            }
            other => {
                return Err(ApiError::invalid(
                    format!(
                        "{at}: content parts of type {other:?} are not served (input_text, output_text, input_image are)"
                    ),
                    Some("input"),
                ));
            }
        }
    }
    Ok(Value::Array(out))
}

/// `tool_choice`: the modes as they are, a named function in chat's shape.
fn tool_choice(value: &Value) -> Result<Value, ApiError> {
    match value {
        Value::String(_) => Ok(value.clone()),
        Value::Object(choice) if choice.get("type").and_then(Value::as_str) == Some("function") => {
            let name = choice.get("name").and_then(Value::as_str).ok_or_else(|| {
                ApiError::invalid("`tool_choice` of type function needs a `name`", Some("tool_choice"))
            })?;
            Ok(json!({"type": "function", "function": {"name": name}}))
        }
        _ => Err(ApiError::invalid(
            "`tool_choice` must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": …}",
            Some("tool_choice"),
        )),
    }
}

/// `text.format` as chat's `response_format` (`None`: plain text).
fn response_format(text: &Value) -> Result<Option<Value>, ApiError> {
    let Some(format) = text.get("format").filter(|f| !f.is_null()) else { return Ok(None) };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
        Some("json_schema") => {
            let mut schema = format.as_object().cloned().unwrap_or_default();
            schema.remove("type");
            Ok(Some(object([("type", "json_schema".into()), ("json_schema", Value::Object(schema))])))
        }
        other => {
            let other = other.unwrap_or("(none)");
            Err(ApiError::invalid(format!("text.format of type {other:?} is not served"), Some("text")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_responses_request_becomes_a_chat_request() {
        let body = json!({
            "model": "m", "instructions": "Be brief.", "max_output_tokens": 50, "store": true, "temperature": 0.2,
            "input": [
                {"role": "user", "content": "Weather in Paris?"},
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\":\"Paris\"}"},
                {"type": "function_call", "call_id": "c2", "name": "time", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "Sunny"},
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Use Celsius."},
                    {"type": "input_image", "image_url": "data:image/png;base64,AA=="}]},
            ],
            "tools": [{"type": "function", "name": "weather", "parameters": {"type": "object"}, "strict": true}],
            "tool_choice": {"type": "function", "name": "weather"},
            "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}}},
            "reasoning": {"effort": "low"}, "stream": true, "toolrouter": {"mode": "route"}, "x_custom": 1,
        });
        let chat = Value::Object(to_chat(&body).unwrap());
        assert_eq!(
            chat,
            json!({
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Weather in Paris?"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                        {"id": "c2", "type": "function", "function": {"name": "time", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
                    {"role": "system", "content": [{"type": "text", "text": "Use Celsius."},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]},
                ],
                "model": "m", "max_tokens": 50, "temperature": 0.2,
                "tools": [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}, "strict": true}}],
                "tool_choice": {"type": "function", "function": {"name": "weather"}},
                "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}},
                "reasoning_effort": "low", "stream": true, "stream_options": {"include_usage": true},
                "toolrouter": {"mode": "route"}, "x_custom": 1,
            })
        );
        assert_eq!(
            to_chat(&json!({"model": "m", "input": "hi"})).unwrap()["messages"],
            json!([{"role": "user", "content": "hi"}])
        );
    }

    #[test]
    fn what_cannot_be_carried_is_refused_by_name() {
        for (body, says) in [
            (json!([]), "must be a JSON object"),
            (json!({"model": "m"}), "`input` is required"),
            (json!({"model": "m", "input": 3}), "string or a list"),
            (json!({"model": "m", "input": "x", "conversation": "conv_1"}), "`conversation` is not supported"),
            (
                json!({"model": "m", "input": "x", "tools": [{"type": "web_search"}]}),
                "tools[0]: tools of type \"web_search\"",
            ),
            (
                json!({"model": "m", "input": [{"type": "function_call", "name": "f"}]}),
                "input[0]: a `function_call` needs",
            ),
            (
                json!({"model": "m", "input": [{"type": "file_search_call"}]}),
                "input[0]: items of type \"file_search_call\"",
            ),
            (json!({"model": "m", "input": "x", "tool_choice": {"type": "file_search"}}), "`tool_choice` must be"),
            (
                json!({"model": "m", "input": [{"type": "function_call_output", "call_id": "c9", "output": "x"}]}),
                "a `function_call_output` for `c9`, which no earlier `function_call` has",
            ),
            (json!({"model": "m", "input": "x", "text": {"format": {"type": "grammar"}}}), "text.format"),
        ] {
            let error = to_chat(&body).unwrap_err();
            assert!(error.message.contains(says), "{body}: {}", error.message);
            assert_eq!(error.status, axum::http::StatusCode::BAD_REQUEST);
        }
        assert!(to_chat(&json!({"model": "m", "input": "x", "background": false})).is_ok(), "false is the default");
    }
}
