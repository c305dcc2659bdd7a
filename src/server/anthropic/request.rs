//! An Anthropic Messages request as the chat-completions request it means:
//! `system` a system message first, content blocks as chat content
//! (`text`, `image`), `tool_use` blocks an assistant's `tool_calls`,
//! `tool_result` blocks `tool` messages (before the rest of their user
//! message, as chat orders them), `tools` with `input_schema` as function
//! tools, `tool_choice`, `stop_sequences` as `stop`, `metadata.user_id` as
//! `user`. `thinking` blocks and the `thinking` setting are left out (a
//! chat-completions model takes none); server tools and unknown block
//! types are refused by name; any other field is passed on as it came.

use serde_json::{Map, Value, json};

use super::search::{self, SearchTool};
use crate::server::translate::object;

/// What is wrong with the request: a message for Anthropic's
/// `invalid_request_error`.
pub(crate) type Invalid = String;

/// The chat-completions body of a Messages request body, and its tool
/// search tool if it has one.
pub(crate) fn to_chat(body: &Value) -> Result<(Map<String, Value>, Option<SearchTool>), Invalid> {
    let fields = body.as_object().ok_or("the request body must be a JSON object")?;
    if fields.get("max_tokens").and_then(Value::as_u64).is_none_or(|n| n == 0) {
        return Err("max_tokens: a positive integer is required".into());
    }
    let mut messages = Vec::new();
    match fields.get("system") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => messages.push(json!({"role": "system", "content": text})),
        Some(Value::Array(blocks)) => {
            let texts: Option<Vec<&str>> = blocks.iter().map(text_block).collect();
            let texts = texts.ok_or("system: must be a string or a list of text blocks")?;
            messages.push(json!({"role": "system", "content": texts.join("\n")}));
        }
        Some(_) => return Err("system: must be a string or a list of text blocks".into()),
    }
    let input = match fields.get("messages") {
        Some(Value::Array(input)) if !input.is_empty() => input,
        _ => return Err("messages: a list of at least one message is required".into()),
    };
    for (i, message) in input.iter().enumerate() {
        messages.extend(chat_messages(message).map_err(|e| format!("messages.{i}: {e}"))?);
    }
    let mut chat = Map::new();
    if let Some(id) = crate::server::translate::unanswerable_result(&messages) {
        return Err(format!(
            "messages: a `tool_result` for `{id}`, which no earlier `tool_use` block has (each result answers a call of the conversation)"
        ));
    }
    chat.insert("messages".into(), Value::Array(messages));
    let mut search_tool = None;
    for (key, value) in fields {
        match key.as_str() {
            "system" | "messages" | "thinking" => {}
            "tools" => {
                let (tools, found) = tools(value)?;
                search_tool = found;
                chat.insert("tools".into(), tools);
            }
            "tool_choice" => {
                let (choice, parallel) = tool_choice(value)?;
                chat.insert("tool_choice".into(), choice);
                if let Some(parallel) = parallel {
                    chat.insert("parallel_tool_calls".into(), Value::Bool(parallel));
                }
            }
            "stop_sequences" => {
                chat.insert("stop".into(), value.clone());
            }
            "metadata" => {
                if let Some(user) = value.get("user_id").filter(|u| !u.is_null()) {
                    chat.insert("user".into(), user.clone());
                }
            }
            "stream" => {
                chat.insert("stream".into(), value.clone());
                if value == &Value::Bool(true) {
                    chat.insert("stream_options".into(), json!({"include_usage": true}));
                }
            }
            _ => {
                chat.insert(key.clone(), value.clone());
            }
        }
    }
    if let Some(tool) = &search_tool {
        let options = chat.entry("toolrouter").or_insert_with(|| Value::Object(Map::new()));
        if let Some(options) = options.as_object_mut() {
            options.entry("tool_search").or_insert_with(|| tool.flavor().into());
        }
    }
    Ok((chat, search_tool))
}

/// The text of a `text` block (`None`: another block).
fn text_block(block: &Value) -> Option<&str> {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => block.get("text").and_then(Value::as_str),
        _ => None,
    }
}

/// One Anthropic message as chat messages.
fn chat_messages(message: &Value) -> Result<Vec<Value>, Invalid> {
    let role = message.get("role").and_then(Value::as_str).ok_or("a message needs a `role`")?;
    if role != "user" && role != "assistant" {
        return Err(format!("role {role:?}: must be \"user\" or \"assistant\" (the system prompt is `system`)"));
    }
    let blocks = match message.get("content") {
        Some(Value::String(text)) => return Ok(vec![json!({"role": role, "content": text})]),
        Some(Value::Array(blocks)) => blocks,
        _ => return Err("content: must be a string or a list of blocks".into()),
    };
    let mut out = Vec::new();
    let mut parts = Vec::new();
    let mut calls = Vec::new();
    // Results of the searches toolrouter ran, after the assistant's calls.
    let mut searched = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("(none)");
        let at = |what: &str| format!("content.{j}: {what}");
        match kind {
            "text" => {
                parts.push(object([("type", "text".into()), ("text", block.get("text").cloned().unwrap_or_default())]))
            }
            "image" => parts.push(image(block).map_err(|e| at(&e))?),
            "tool_use" if role == "assistant" => {
                let (Some(id), Some(name)) =
                    (block.get("id").and_then(Value::as_str), block.get("name").and_then(Value::as_str))
                else {
                    return Err(at("a `tool_use` block needs `id` and `name`"));
                };
                let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
                calls.push(
                    json!({"id": id, "type": "function", "function": {"name": name, "arguments": input.to_string()}}),
                );
            }
            "server_tool_use" if role == "assistant" => calls.push(search::call(block).map_err(|e| at(&e))?),
            "tool_search_tool_result" if role == "assistant" => {
                searched.push(search::result(block).map_err(|e| at(&e))?)
            }
            "tool_result" if role == "user" => {
                let id = block
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| at("a `tool_result` needs `tool_use_id`"))?;
                let content = match block.get("content") {
                    None | Some(Value::Null) => Value::String(String::new()),
                    Some(Value::String(text)) => Value::String(text.clone()),
                    Some(Value::Array(inner)) => match search::references(block.get("content")) {
                        // A client's own search: the tools it loads.
                        Some(loaded) => Value::String(loaded),
                        None => {
                            let texts: Vec<&str> = inner.iter().filter_map(|b| b.get("text")?.as_str()).collect();
                            Value::String(texts.join("\n"))
                        }
                    },
                    Some(_) => return Err(at("a `tool_result`'s content must be a string or blocks")),
                };
                let content = match block.get("is_error") == Some(&Value::Bool(true)) {
                    true => Value::String(format!("Error: {}", content.as_str().unwrap_or_default())),
                    false => content,
                };
                // A chat conversation has a call's result right after the calls.
                out.push(object([("role", "tool".into()), ("tool_call_id", id.into()), ("content", content)]));
            }
            "thinking" | "redacted_thinking" => {}
            other => {
                return Err(at(&format!(
                    "blocks of type {other:?} are not served in a {role} message \
                     (text, image, tool_use from the assistant, tool_result from the user are)"
                )));
            }
        }
    }
    if role == "assistant" {
        let text: Vec<&str> = parts.iter().filter_map(|p| p.get("text")?.as_str()).collect();
        let content = if text.is_empty() { Value::Null } else { Value::String(text.join("")) };
        let mut message = object([("role", "assistant".into()), ("content", content)]);
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        out.push(message);
        out.extend(searched);
    } else if !parts.is_empty() {
        out.push(object([("role", "user".into()), ("content", Value::Array(parts))]));
    }
    Ok(out)
}

/// An `image` block as a chat `image_url` part (base64 data as a data URL).
fn image(block: &Value) -> Result<Value, Invalid> {
    let source = block.get("source").ok_or("an `image` block needs a `source`")?;
    let url = match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let media = source.get("media_type").and_then(Value::as_str).unwrap_or("image/png");
            let data = source.get("data").and_then(Value::as_str).ok_or("a base64 image needs `data`")?;
            format!("data:{media};base64,{data}")
        }
        Some("url") => source.get("url").and_then(Value::as_str).ok_or("a url image needs `url`")?.to_string(),
        _ => return Err("an image `source` must be of type base64 or url (file ids are not served)".into()),
    };
    Ok(json!({"type": "image_url", "image_url": {"url": url}}))
}

/// Client tools as chat function tools (`defer_loading` kept beside
/// `function`), and the tool search tool; other server tools are refused.
fn tools(value: &Value) -> Result<(Value, Option<SearchTool>), Invalid> {
    let list = value.as_array().ok_or("tools: must be a list")?;
    let mut out = Vec::with_capacity(list.len());
    let mut search_tool = None;
    for (i, tool) in list.iter().enumerate() {
        if let Some(found) = SearchTool::of(tool).map_err(|e| format!("tools.{i}: {e}"))? {
            if search_tool.replace(found).is_some() {
                return Err(format!("tools.{i}: only one tool search tool may be sent"));
            }
            continue;
        }
        let kind = tool.get("type").and_then(Value::as_str);
        if kind.is_some_and(|k| k != "custom") {
            return Err(format!(
                "tools.{i}: tools of type {:?} are not served: toolrouter routes client tools (name, description, input_schema)",
                kind.unwrap_or_default()
            ));
        }
        let name =
            tool.get("name").and_then(Value::as_str).ok_or_else(|| format!("tools.{i}: a tool needs a `name`"))?;
        let parameters = tool.get("input_schema").cloned().unwrap_or_else(|| json!({"type": "object"}));
        let mut function = object([("name", name.into()), ("parameters", parameters)]);
        if let Some(description) = tool.get("description") {
            function["description"] = description.clone();
        }
        let mut chat = object([("type", "function".into()), ("function", function)]);
        if let Some(deferred) = tool.get("defer_loading") {
            chat["defer_loading"] = deferred.clone();
        }
        out.push(chat);
    }
    Ok((Value::Array(out), search_tool))
}

/// `tool_choice` in chat's shape, and `parallel_tool_calls` when
/// `disable_parallel_tool_use` says.
fn tool_choice(value: &Value) -> Result<(Value, Option<bool>), Invalid> {
    let parallel = value.get("disable_parallel_tool_use").and_then(Value::as_bool).map(|disable| !disable);
    let choice = match value.get("type").and_then(Value::as_str) {
        Some("auto") => json!("auto"),
        Some("any") => json!("required"),
        Some("none") => json!("none"),
        Some("tool") => {
            let name = value.get("name").and_then(Value::as_str).ok_or("tool_choice: type tool needs a `name`")?;
            json!({"type": "function", "function": {"name": name}})
        }
        _ => return Err("tool_choice: type must be auto, any, tool or none".into()),
    };
    Ok((choice, parallel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_messages_request_becomes_a_chat_request() {
        let body = json!({
            "model": "claude", "max_tokens": 100, "system": [{"type": "text", "text": "Be brief."}],
            "messages": [
                {"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "Snow"}]},
                    {"type": "text", "text": "And tomorrow?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AA=="}}]},
            ],
            "tools": [{"name": "weather", "description": "Weather", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "stop_sequences": ["END"], "metadata": {"user_id": "u1"}, "stream": true, "temperature": 0.5,
            "thinking": {"type": "enabled", "budget_tokens": 1000}, "toolrouter": {"mode": "route"},
        });
        assert_eq!(
            Value::Object(to_chat(&body).unwrap().0),
            json!({
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Weather in Oslo?"},
                    {"role": "assistant", "content": "Checking.", "tool_calls": [
                        {"id": "toolu_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
                    {"role": "tool", "tool_call_id": "toolu_1", "content": "Snow"},
                    {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"},
                        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AA=="}}]},
                ],
                "model": "claude", "max_tokens": 100,
                "tools": [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}, "description": "Weather"}}],
                "tool_choice": "required", "parallel_tool_calls": false, "stop": ["END"], "user": "u1",
                "stream": true, "stream_options": {"include_usage": true}, "temperature": 0.5, "toolrouter": {"mode": "route"},
            })
        );
    }

    #[test]
    fn what_cannot_be_carried_is_refused_by_name() {
        let ok = |extra: Value| {
            let mut body = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]});
            body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            to_chat(&body).map(|(chat, _)| chat)
        };
        assert!(ok(json!({})).is_ok());
        for (extra, says) in [
            (json!({"max_tokens": null}), "max_tokens"),
            (json!({"max_tokens": 0}), "max_tokens: a positive integer"),
            (json!({"messages": null}), "messages: a list"),
            (json!({"messages": []}), "at least one message"),
            (json!({"system": [[null]]}), "system: must be"),
            (json!({"messages": [{"role": "system", "content": "x"}]}), "messages.0: role \"system\""),
            (
                json!({"messages": [{"role": "user", "content": [{"type": "document"}]}]}),
                "messages.0: content.0: blocks of type \"document\"",
            ),
            (
                json!({"messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "b"}]}]}),
                "in a user message",
            ),
            (
                json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9"}]}]}),
                "a `tool_result` for `toolu_9`, which no earlier `tool_use` block has",
            ),
            (
                json!({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
                "tools.0: tools of type \"web_search_20250305\"",
            ),
            (json!({"tool_choice": {"type": "tool"}}), "tool_choice: type tool needs"),
        ] {
            let error = ok(extra.clone()).unwrap_err();
            assert!(error.contains(says), "{extra}: {error}");
        }
    }
}
