//! Anthropic's answer, made from a chat completion: a `message` with
//! `text` and `tool_use` content blocks, the `stop_reason` the chat
//! `finish_reason` means, usage under Anthropic's names; and errors in
//! Anthropic's shape, `{"type": "error", "error": {"type", "message"}}`.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::search::SearchTool;
use crate::llm::wire::{CompletionUsage, Message};
use crate::server::translate::new_id;
use crate::server::translate::object;

/// Anthropic's `stop_reason` for a chat `finish_reason`.
pub(crate) fn stop_reason(finish_reason: Option<&str>) -> &'static str {
    match finish_reason {
        Some("length") => "max_tokens",
        Some("tool_calls" | "function_call") => "tool_use",
        Some("content_filter") => "refusal",
        _ => "end_turn",
    }
}

/// A tool call's arguments as `tool_use` input (an object; text that is
/// not one, which route mode's checks let through only for tools without
/// a schema, as `{}`).
pub(crate) fn input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(o)) => Value::Object(o),
        _ => json!({}),
    }
}

/// Chat usage under Anthropic's names.
pub(crate) fn usage(usage: Option<&CompletionUsage>) -> Value {
    let input = usage.and_then(|u| u.prompt_tokens).unwrap_or(0);
    let output = usage.and_then(|u| u.completion_tokens).unwrap_or(0);
    let cached = usage
        .and_then(|u| u.extra.get("prompt_tokens_details"))
        .and_then(|d| d.get("cached_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    json!({"input_tokens": input.saturating_sub(cached), "output_tokens": output,
        "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0})
}

/// The content blocks of an answer's message: its text, then its calls.
pub(crate) fn content(message: Option<&Message>) -> Vec<Value> {
    let mut out = Vec::new();
    let text = message.map(Message::text).unwrap_or_default();
    if !text.is_empty() {
        out.push(json!({"type": "text", "text": text}));
    }
    for call in message.map(Message::calls).unwrap_or_default() {
        let id = match call.id() {
            "" => new_id("toolu_"),
            id => id.to_string(),
        };
        out.push(object([
            ("type", "tool_use".into()),
            ("id", id.into()),
            ("name", call.name().into()),
            ("input", input(&call.arguments())),
        ]));
    }
    out
}

/// The `message` for a whole chat completion, with toolrouter's report
/// (`toolrouter`) carried over; `model`: the request's; the searches
/// toolrouter ran first, as the request's `search_tool`'s blocks.
pub(crate) fn from_completion(
    completion: crate::llm::wire::Completion,
    model: &Value,
    search_tool: &SearchTool,
) -> Value {
    let choice = completion.choices.first();
    let rounds = crate::chat::search::rounds(&completion);
    let mut blocks: Vec<Value> = rounds.iter().flat_map(|s| search_tool.blocks(s)).collect();
    blocks.extend(content(choice.and_then(|c| c.message.as_ref())));
    let mut message = object([
        ("id", new_id("msg_").into()),
        ("type", "message".into()),
        ("role", "assistant".into()),
        ("model", completion.model.as_deref().map(Value::from).unwrap_or_else(|| model.clone())),
        ("content", Value::Array(blocks)),
        ("stop_reason", stop_reason(choice.and_then(|c| c.finish_reason.as_deref())).into()),
        ("stop_sequence", Value::Null),
        ("usage", usage(completion.usage.as_ref())),
    ]);
    if let Some(report) = completion.extra.get("toolrouter") {
        message["toolrouter"] = report.clone();
    }
    message
}

/// Anthropic's error `type` for a status.
pub(crate) fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 405 | 408 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        504 => "timeout_error",
        _ => "api_error",
    }
}

/// An error body in Anthropic's shape.
pub(crate) fn error_body(status: StatusCode, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type(status), "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_completion_becomes_a_message() {
        let chat = json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Looking.",
                "tool_calls": [{"id": "", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14, "prompt_tokens_details": {"cached_tokens": 3}},
            "toolrouter": {"mode": "route"}});
        let message = from_completion(serde_json::from_value(chat).unwrap(), &json!("asked"), &SearchTool::default());
        assert_eq!((message["type"].as_str(), message["stop_reason"].as_str()), (Some("message"), Some("tool_use")));
        assert_eq!(message["content"][0], json!({"type": "text", "text": "Looking."}));
        let call = &message["content"][1];
        assert_eq!((&call["name"], &call["input"]), (&json!("weather"), &json!({"city": "Oslo"})));
        assert!(call["id"].as_str().unwrap().starts_with("toolu_"), "a call without an id gets one");
        assert_eq!(
            message["usage"],
            json!({"input_tokens": 7, "output_tokens": 4, "cache_read_input_tokens": 3, "cache_creation_input_tokens": 0})
        );
        assert_eq!(message["toolrouter"]["mode"], "route");
        assert_eq!(stop_reason(Some("length")), "max_tokens");
        assert_eq!(error_body(StatusCode::UNAUTHORIZED, "no")["error"]["type"], "authentication_error");
    }
}
