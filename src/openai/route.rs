//! Route mode: narrow the client's tools, ask the model, check its tool
//! calls against the original schemas, and repair them through the model.
//!
//! Narrowing ranks the tools with the retrieval module's BM25 (names split
//! into words, stemming, term frequency and length normalization) over
//! each tool's name, description and parameters: the latest user message
//! counts fully, earlier ones half; the tool graph's transition weight from
//! the last tool called adds up to the best lexical score. Tools the
//! conversation already called and the `tool_choice` target are always
//! kept. The `openai.max_tools` best go to the model in their original
//! order (a stable prefix for upstream caches). No embedding is needed; a
//! tool list's index is built once and kept for the requests that carry
//! the same list again.
//!
//! Streaming is in [`super::stream`].

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::sync::{Arc, LazyLock, Mutex};

use axum::response::{IntoResponse, Response};
use lru::LruCache;
use serde_json::{Map, Value, json};

use super::ApiError;
use super::validate::{ChatRequest, ClientTool};
use crate::config::OpenAiConfig;
use crate::llm::{LlmClient, Usage};
use crate::retrieval::bm25::Bm25;

/// The text of a message's content (a string or a list of parts).
fn content_text(m: &Value) -> String {
    match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join(" ")
        }
        _ => String::new(),
    }
}

/// The names of the tools the assistant called in the conversation, in order.
fn tools_called(messages: &[Value]) -> Vec<String> {
    let calls = messages.iter().filter_map(|m| m.get("tool_calls")?.as_array()).flatten();
    calls.filter_map(|c| c.get("function")?.get("name")?.as_str().map(str::to_string)).collect()
}

/// Tool lists whose index is kept: a client sends the same list turn after turn.
const INDEXED_LISTS: usize = 256;

/// The BM25 index of a tool list, built once per list (by a hash of its
/// tools' texts) and kept for the next requests that carry it.
fn tool_index(tools: &[ClientTool]) -> Arc<Bm25> {
    static CACHE: LazyLock<Mutex<LruCache<u64, Arc<Bm25>>>> =
        LazyLock::new(|| Mutex::new(LruCache::new(NonZeroUsize::new(INDEXED_LISTS).expect("not zero"))));
    let mut hasher = std::hash::DefaultHasher::new();
    for t in tools {
        t.text.hash(&mut hasher);
    }
    let key = hasher.finish();
    if let Some(index) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return index.clone();
    }
    let texts: Vec<String> = tools.iter().map(|t| t.text.clone()).collect();
    let index = Arc::new(Bm25::build(&texts));
    CACHE.lock().unwrap_or_else(|e| e.into_inner()).put(key, index.clone());
    index
}

/// Indexes of the tools to offer, in their original order. `forced`: a
/// tool that must be kept (the `tool_choice` target).
pub fn narrow(
    tools: &[ClientTool],
    messages: &[Value],
    max: usize,
    forced: Option<&str>,
    weight: &dyn Fn(&str, &str) -> f64,
) -> Vec<usize> {
    if tools.len() <= max {
        return (0..tools.len()).collect();
    }
    let users: Vec<String> =
        messages.iter().filter(|m| m.get("role").and_then(Value::as_str) == Some("user")).map(content_text).collect();
    let (latest, earlier) =
        users.split_last().map_or((String::new(), String::new()), |(l, e)| (l.clone(), e.join(" ")));
    let index = tool_index(tools);
    let mut scores = vec![0f64; tools.len()];
    for (query, factor) in [(&latest, 1.0), (&earlier, 0.5)] {
        for (i, s) in index.search(query, tools.len(), None) {
            scores[i as usize] += factor * f64::from(s);
        }
    }
    let best = scores.iter().copied().fold(0.0, f64::max).max(1.0);
    let called = tools_called(messages);
    if let Some(from) = called.last() {
        for (i, t) in tools.iter().enumerate() {
            scores[i] += best * weight(from, &t.name);
        }
    }
    let must: HashSet<&str> = called.iter().map(String::as_str).chain(forced).collect();
    let mut order: Vec<usize> = (0..tools.len()).collect();
    order.sort_by(|&a, &b| {
        let pinned = |i: usize| must.contains(tools[i].name.as_str());
        pinned(b).cmp(&pinned(a)).then(scores[b].total_cmp(&scores[a])).then(a.cmp(&b))
    });
    let pinned = order.iter().take_while(|&&i| must.contains(tools[i].name.as_str())).count();
    let mut keep: Vec<usize> = order.into_iter().take(max.max(pinned)).collect();
    keep.sort_unstable();
    keep
}

/// Turns tool-call `arguments` sent as a JSON object (some
/// OpenAI-compatible servers do) into JSON text, as OpenAI sends them and
/// clients parse them; absent arguments become `""`.
pub fn normalize_tool_calls(message: &mut Value) {
    for call in message.get_mut("tool_calls").and_then(Value::as_array_mut).into_iter().flatten() {
        let Some(function) = call.get_mut("function").and_then(Value::as_object_mut) else { continue };
        let text = match function.get("arguments") {
            Some(Value::String(_)) => continue,
            None | Some(Value::Null) => String::new(),
            Some(other) => other.to_string(),
        };
        function.insert("arguments".into(), Value::String(text));
    }
}

/// What is wrong with the tool calls of an answer, per call id.
fn problems(message: &Value, tools: &[ClientTool]) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        let id = call.get("id").and_then(Value::as_str).unwrap_or("").to_string();
        let name = call["function"]["name"].as_str().unwrap_or("").to_string();
        let Some(tool) = tools.iter().find(|t| t.name == name) else {
            out.push((id, name.clone(), vec![format!("there is no tool named `{name}`")]));
            continue;
        };
        let args = call["function"]["arguments"].as_str().unwrap_or("");
        let parsed = if args.trim().is_empty() { Ok(json!({})) } else { serde_json::from_str::<Value>(args) };
        let issues: Vec<String> = match parsed {
            Err(e) => vec![format!("the arguments are not valid JSON ({e})")],
            Ok(v) if !v.is_object() => vec!["the arguments must be a JSON object".to_string()],
            Ok(v) => tool.issues(&v),
        };
        if !issues.is_empty() {
            out.push((id, name, issues));
        }
    }
    out
}

/// A request made ready for the model: tools narrowed, model renamed.
pub struct Prepared {
    pub body: Map<String, Value>,
    /// Indexes of the client's tools offered.
    pub keep: Vec<usize>,
    pub messages: Vec<Value>,
}

pub fn prepare(req: &ChatRequest, config: &OpenAiConfig, weight: &(dyn Fn(&str, &str) -> f64 + Sync)) -> Prepared {
    let messages: Vec<Value> = req.body.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
    let forced = req.body.get("tool_choice").and_then(|c| c["function"]["name"].as_str());
    let keep = narrow(&req.tools, &messages, config.max_tools, forced, weight);
    let mut body: Map<String, Value> = req.body.clone();
    body.insert("model".into(), Value::String(req.upstream_model.clone()));
    if !req.tools.is_empty() {
        body.insert("tools".into(), Value::Array(keep.iter().map(|&i| req.tools[i].definition.clone()).collect()));
    }
    Prepared { body, keep, messages }
}

/// An answer whose tool calls passed their checks.
pub struct Repaired {
    pub answer: Value,
    /// Requests made to repair it.
    pub repairs: usize,
    /// Tokens the repair requests spent (the first answer's are its own).
    pub usage: Usage,
}

/// Checks `answer`'s tool calls; while some are invalid, shows the model
/// what was wrong and asks again (non-streaming), up to `repair_attempts`.
pub async fn repaired(
    llm: &LlmClient,
    prepared: &Prepared,
    mut answer: Value,
    tools: &[ClientTool],
    config: &OpenAiConfig,
) -> Result<Repaired, ApiError> {
    let mut body = prepared.body.clone();
    body.remove("stream_options");
    let mut conversation = prepared.messages.clone();
    let (mut repairs, mut usage) = (0, Usage::default());
    loop {
        normalize_tool_calls(&mut answer["choices"][0]["message"]);
        let message = answer["choices"][0]["message"].clone();
        let wrong = problems(&message, tools);
        if wrong.is_empty() {
            return Ok(Repaired { answer, repairs, usage });
        }
        if repairs >= config.repair_attempts {
            let detail: Vec<String> =
                wrong.iter().map(|(_, name, issues)| format!("`{name}`: {}", issues.join("; "))).collect();
            return Err(ApiError::new(
                axum::http::StatusCode::BAD_GATEWAY,
                "server_error",
                "invalid_tool_call",
                format!(
                    "the model's tool call arguments stayed invalid after {repairs} repair attempt(s): {}",
                    detail.join(" | ")
                ),
            ));
        }
        repairs += 1;
        // Show the model its call and what was wrong with it; ask again.
        conversation.push(message.clone());
        for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let id = call.get("id").and_then(Value::as_str).unwrap_or("").to_string();
            let content = match wrong.iter().find(|(i, _, _)| *i == id) {
                Some((_, name, issues)) => format!(
                    "Error: invalid arguments for `{name}`: {}. Call `{name}` again with arguments that fit its schema.",
                    issues.join("; ")
                ),
                None => "Not executed: another call in this turn was invalid. Repeat it with the corrected one.".into(),
            };
            conversation.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
        }
        body.insert("messages".into(), Value::Array(conversation.clone()));
        answer = llm.complete(&Value::Object(body.clone())).await?;
        usage.add(&answer);
    }
}

/// Sets a `usage` object's token counts to `tokens` (its other fields,
/// such as token details, kept).
pub fn set_tokens(usage: &mut Value, tokens: Usage) {
    if !usage.is_object() {
        *usage = json!({});
    }
    usage["prompt_tokens"] = json!(tokens.prompt_tokens);
    usage["completion_tokens"] = json!(tokens.completion_tokens);
    usage["total_tokens"] = json!(tokens.total_tokens);
}

/// toolrouter's report on a request, for the answer's `toolrouter` field.
pub fn report(req: &ChatRequest, prepared: &Prepared, repairs: usize, planned: Option<Value>) -> Value {
    let mode = if planned.is_some() { "plan" } else { "route" };
    let mut r =
        json!({"mode": mode, "tools_offered": prepared.keep.len(), "tools_total": req.tools.len(), "repairs": repairs});
    if let Some(steps) = planned {
        r["plan"] = steps;
    }
    r
}

/// A non-streaming answer: asks the model, checks and repairs its tool
/// calls. `planned`: in plan mode, the planner's steps (reported).
pub async fn complete(
    req: &ChatRequest,
    llm: &LlmClient,
    config: &OpenAiConfig,
    weight: &(dyn Fn(&str, &str) -> f64 + Sync),
    planned: Option<Value>,
) -> Result<Response, ApiError> {
    let prepared = prepare(req, config, weight);
    let first = llm.complete(&Value::Object(prepared.body.clone())).await?;
    let first_usage = first["usage"].clone();
    let Repaired { mut answer, repairs, usage } = repaired(llm, &prepared, first, &req.tools, config).await?;
    // Every request's tokens: the first answer's and the repairs'.
    if repairs > 0 {
        let mut total = Usage::default();
        total.add(&json!({ "usage": first_usage }));
        total += usage;
        set_tokens(&mut answer["usage"], total);
    }
    answer["model"] = Value::String(req.model.clone());
    answer["toolrouter"] = report(req, &prepared, repairs, planned);
    Ok(axum::Json(answer).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str) -> ClientTool {
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
        ClientTool {
            name: name.into(),
            text: format!("{name} {description} city"),
            definition: json!({"type": "function", "function": {"name": name, "parameters": schema}}),
            check: crate::openai::validate::Check::Schema(jsonschema::validator_for(&schema).unwrap()),
        }
    }

    #[test]
    fn narrowing_keeps_the_relevant_and_what_follows_the_last_call() {
        let mut tools: Vec<ClientTool> =
            (0..50).map(|i| tool(&format!("tool_{i}"), "does something unrelated")).collect();
        tools.push(tool("weather_forecast", "weather forecast for a city"));
        tools.push(tool("hotel_booking", "book a hotel room"));
        let messages = vec![
            json!({"role": "user", "content": "What is the weather forecast in Berlin?"}),
            json!({"role": "assistant", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "tool_3", "arguments": "{}"}}]}),
        ];
        let weight = |from: &str, to: &str| if from == "tool_3" && to == "hotel_booking" { 0.9 } else { 0.0 };
        let keep = narrow(&tools, &messages, 3, None, &weight);
        let names: Vec<&str> = keep.iter().map(|&i| tools[i].name.as_str()).collect();
        assert!(names.contains(&"weather_forecast") && names.contains(&"hotel_booking"), "{names:?}");
        assert_eq!(keep.len(), 3);
        assert!(keep.windows(2).all(|w| w[0] < w[1]), "original order");
        // Tools already called and the tool_choice target are always kept.
        let keep = narrow(&tools, &messages, 2, Some("tool_40"), &weight);
        let names: Vec<&str> = keep.iter().map(|&i| tools[i].name.as_str()).collect();
        assert_eq!(names, ["tool_3", "tool_40"], "pinned before the best match");
    }

    #[test]
    fn tool_call_problems_are_named() {
        let tools = vec![tool("weather", "")];
        let message = json!({"tool_calls": [
            {"id": "a", "function": {"name": "weather", "arguments": "{\"city\": 3}"}},
            {"id": "b", "function": {"name": "nope", "arguments": "{}"}},
            {"id": "c", "function": {"name": "weather", "arguments": "{oops"}},
            {"id": "d", "function": {"name": "weather", "arguments": "{\"city\": \"Rome\"}"}}]});
        let p = problems(&message, &tools);
        let ids: Vec<&str> = p.iter().map(|(id, _, _)| id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert!(p[0].2[0].contains("/city"), "{:?}", p[0]);
    }
}
