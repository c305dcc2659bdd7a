//! The Responses API's answer, made from a chat completion: the response
//! object (`"object": "response"`) with its `output` items (an assistant
//! `message` with `output_text`, one `function_call` per tool call), its
//! status (`incomplete` when the model stopped at `max_output_tokens` or a
//! content filter), usage under the Responses names, and the request's
//! settings echoed as OpenAI echoes them.

use serde_json::{Map, Value, json};

use super::search;
use crate::chat::search::{SEARCH_TOOL, rounds};
use crate::llm::wire::{CompletionUsage, Message, ToolCall};
use crate::server::translate::new_id;
use crate::server::translate::object;

/// What a response echoes of its request, and its identity.
pub(crate) struct Echo {
    pub(crate) id: String,
    pub(crate) created_at: u64,
    /// The Responses request body's settings (all but `input`).
    request: Map<String, Value>,
    /// Whether the response is kept for `previous_response_id`.
    pub(crate) store: bool,
}

/// The settings a response echoes ([`shown`]: the value it shows when
/// the request has none).
const ECHOED: [&str; 13] = [
    "instructions",
    "max_output_tokens",
    "parallel_tool_calls",
    "previous_response_id",
    "reasoning",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_p",
    "user",
    "metadata",
    "model",
];

/// The value a response shows for setting `key` when the request has none
/// (made only then: most requests name few settings).
fn shown(key: &str) -> Value {
    match key {
        "parallel_tool_calls" => Value::Bool(true),
        "reasoning" => json!({"effort": null, "summary": null}),
        "text" => json!({"format": {"type": "text"}}),
        "tool_choice" => Value::from("auto"),
        "tools" => Value::Array(Vec::new()),
        "metadata" => Value::Object(Map::new()),
        _ => Value::Null,
    }
}

impl Echo {
    /// The echo of `request` (the body, taken: its `input` is dropped).
    pub(crate) fn new(request: Value) -> Echo {
        let mut request = match request {
            Value::Object(fields) => fields,
            _ => Map::new(),
        };
        request.remove("input");
        Echo { id: new_id("resp_"), created_at: crate::metrics::unix_ms() / 1000, request, store: false }
    }

    /// The request's `tools`.
    pub(crate) fn tools(&self) -> Option<&Value> {
        self.request.get("tools")
    }

    /// The response object: `status`, `output` and `usage` as given, the
    /// model the answer names (else the request's), the request's settings
    /// (cloned: a stream shows them more than once).
    pub(crate) fn response(
        &self,
        status: &str,
        model: Option<&str>,
        output: Vec<Value>,
        usage: Option<Value>,
    ) -> Value {
        let settings = ECHOED.map(|key| (key, self.request.get(key).cloned().unwrap_or_else(|| shown(key))));
        self.object(settings, status, model, output, usage)
    }

    /// [`Echo::response`], the settings moved out of the echo (a whole
    /// answer shows them once).
    pub(crate) fn into_response(
        mut self,
        status: &str,
        model: Option<&str>,
        output: Vec<Value>,
        usage: Option<Value>,
    ) -> Value {
        let settings = ECHOED.map(|key| (key, self.request.remove(key).unwrap_or_else(|| shown(key))));
        self.object(settings, status, model, output, usage)
    }

    fn object(
        &self,
        settings: [(&'static str, Value); 13],
        status: &str,
        model: Option<&str>,
        output: Vec<Value>,
        usage: Option<Value>,
    ) -> Value {
        let incomplete = match status {
            "incomplete" => json!({"reason": "max_output_tokens"}),
            _ => Value::Null,
        };
        let mut response = Map::with_capacity(24);
        response.insert("id".into(), Value::from(self.id.as_str()));
        response.insert("object".into(), Value::from("response"));
        response.insert("created_at".into(), Value::from(self.created_at));
        response.insert("status".into(), Value::from(status));
        response.insert("error".into(), Value::Null);
        response.insert("incomplete_details".into(), incomplete);
        for (key, value) in settings {
            response.insert(key.into(), value);
        }
        if let Some(model) = model {
            response.insert("model".into(), Value::from(model));
        }
        response.insert("output".into(), Value::Array(output));
        response.insert("store".into(), Value::Bool(self.store));
        response.insert("truncation".into(), Value::from("disabled")); // nothing is truncated
        response.insert("usage".into(), usage.unwrap_or(Value::Null));
        Value::Object(response)
    }
}

/// The response's status for a chat `finish_reason`.
pub(crate) fn status(finish_reason: Option<&str>) -> &'static str {
    match finish_reason {
        Some("length") => "incomplete",
        _ => "completed",
    }
}

/// An assistant `message` item holding `text`.
pub(crate) fn message_item(id: &str, text: &str, status: &str) -> Value {
    object([
        ("type", "message".into()),
        ("id", id.into()),
        ("status", status.into()),
        ("role", "assistant".into()),
        ("content", Value::Array(vec![text_part(text)])),
    ])
}

/// An `output_text` content part.
pub(crate) fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// A `function_call` item (`tools`: the request's, which say whether the
/// name is a namespace's function or the client's own tool search).
pub(crate) fn call_item(
    id: &str,
    call_id: &str,
    name: &str,
    arguments: &str,
    status: &str,
    tools: Option<&Value>,
) -> Value {
    if name == SEARCH_TOOL && client_searches(tools) {
        let arguments = serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| json!({}));
        let status = if status == "in_progress" { "in_progress" } else { "completed" };
        return json!({"type": "tool_search_call", "id": id, "call_id": call_id, "execution": "client",
            "status": status, "arguments": arguments});
    }
    let mut item = json!({"type": "function_call", "id": id, "call_id": call_id, "name": name,
        "arguments": arguments, "status": status});
    if let (Some(namespace), inner) = search::split_name(name, tools) {
        item["namespace"] = json!(namespace);
        item["name"] = json!(inner);
    }
    item
}

/// Whether the request's `tools` hold the client's own tool search.
fn client_searches(tools: Option<&Value>) -> bool {
    let mut all = tools.and_then(Value::as_array).into_iter().flatten();
    all.any(|t| t["type"] == "tool_search" && t["execution"] == "client")
}

/// The output items of an answer's message: its text (when it has some, or
/// calls nothing), then its tool calls (`tools`: the request's).
pub(crate) fn items(message: Option<&Message>, tools: Option<&Value>) -> Vec<Value> {
    let text = message.map(Message::text).unwrap_or_default();
    let calls: &[ToolCall] = message.map(Message::calls).unwrap_or_default();
    let mut out = Vec::new();
    if !text.is_empty() || calls.is_empty() {
        out.push(message_item(&new_id("msg_"), &text, "completed"));
    }
    for call in calls {
        let call_id = match call.id() {
            "" => new_id("call_"),
            id => id.to_string(),
        };
        out.push(call_item(&new_id("fc_"), &call_id, call.name(), &call.arguments(), "completed", tools));
    }
    out
}

/// Chat usage under the Responses names.
pub(crate) fn usage(usage: &CompletionUsage) -> Value {
    let input = usage.prompt_tokens.unwrap_or(0);
    let output = usage.completion_tokens.unwrap_or(0);
    let detail =
        |field: &str, key: &str| usage.extra.get(field).and_then(|d| d.get(key)).and_then(Value::as_u64).unwrap_or(0);
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": detail("prompt_tokens_details", "cached_tokens")},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": detail("completion_tokens_details", "reasoning_tokens")},
        "total_tokens": usage.total_tokens.unwrap_or(input + output),
    })
}

/// The response object for a whole chat completion, with toolrouter's
/// report (`toolrouter`) carried over.
pub(crate) fn from_completion(echo: Echo, completion: crate::llm::wire::Completion) -> Value {
    let choice = completion.choices.first();
    let finish = choice.and_then(|c| c.finish_reason.as_deref());
    let tools = echo.tools();
    let mut output: Vec<Value> = rounds(&completion).iter().flat_map(|s| search::items(s, tools)).collect();
    output.extend(items(choice.and_then(|c| c.message.as_ref()), tools));
    let mut response =
        echo.into_response(status(finish), completion.model.as_deref(), output, completion.usage.as_ref().map(usage));
    if let Some(report) = completion.extra.get("toolrouter") {
        response["toolrouter"] = report.clone();
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_completion_becomes_a_response() {
        let request = json!({"model": "m", "input": "hi", "instructions": "Be brief.", "max_output_tokens": 5,
            "tools": [{"type": "function", "name": "weather"}]});
        let echo = || Echo::new(request.clone());
        let chat = json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m-2024",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Let me look.",
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14,
                "prompt_tokens_details": {"cached_tokens": 2}},
            "toolrouter": {"mode": "route"}});
        let response = from_completion(echo(), serde_json::from_value(chat).unwrap());
        assert_eq!(response["object"], "response");
        assert!(response["id"].as_str().unwrap().starts_with("resp_"));
        assert_eq!((response["status"].as_str(), response["model"].as_str()), (Some("completed"), Some("m-2024")));
        let output = response["output"].as_array().unwrap();
        assert_eq!(output.len(), 2);
        assert_eq!(output[0]["content"][0]["text"], "Let me look.");
        assert_eq!(
            (&output[1]["type"], &output[1]["call_id"], &output[1]["name"], &output[1]["arguments"]),
            (&json!("function_call"), &json!("call_1"), &json!("weather"), &json!("{\"city\":\"Oslo\"}"))
        );
        assert_eq!(response["usage"]["input_tokens"], 10);
        assert_eq!(response["usage"]["input_tokens_details"]["cached_tokens"], 2);
        assert_eq!(response["usage"]["total_tokens"], 14);
        assert_eq!((&response["instructions"], &response["max_output_tokens"]), (&json!("Be brief."), &json!(5)));
        assert_eq!(response["tools"], request["tools"]);
        assert_eq!(response["toolrouter"]["mode"], "route");
        let cut = json!({"choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "Lo"}}]});
        let response = from_completion(echo(), serde_json::from_value(cut).unwrap());
        assert_eq!(
            (response["status"].as_str(), &response["incomplete_details"]),
            (Some("incomplete"), &json!({"reason": "max_output_tokens"}))
        );
    }
}
