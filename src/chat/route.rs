//! Route mode: narrow the client's tools, ask the model, check its tool
//! calls against the original schemas, and repair them through the model.
//!
//! Narrowing is the retrieval module's ([`crate::retrieval::tool_list`]:
//! BM25, the embedding model once the list is embedded, intents, names
//! spelled out, the tool graph); tools the conversation already called and
//! the `tool_choice` target are always kept. The `openai.max_tools` best
//! go to the model in their original order (a stable prefix for upstream
//! caches).
//!
//! Streaming is in [`super::stream`]. Nothing here knows a protocol: the
//! answer is a typed [`Completion`], its faults a [`ChatError`].

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tracing::Instrument;

use super::error::ChatError;
use super::narrowing::{Learning, Narrowing, RecordDecision};
use super::request::{self, ChatRequest};
use super::search::{self, SEARCH_TOOL, Search};
use super::tools::ClientTool;
use crate::config::OpenAiConfig;
use crate::llm::wire::{Completion, Message, RequestBody};
use crate::llm::{ChatModel, Usage};
use crate::retrieval::tool_list::Kept;

/// Tool names a report lists at most (it counts the others).
const REPORTED_NAMES: usize = 50;

/// Longest request text a kept decision holds.
const DECISION_REQUEST_CHARS: usize = 500;

/// Turns tool-call `arguments` sent as a JSON object (some
/// OpenAI-compatible servers do) into JSON text, as OpenAI sends them and
/// clients parse them; absent arguments become `""`. A call without an id
/// gets one (`call_…`): the client answers it by that id.
pub(crate) fn normalize_tool_calls(message: &mut Message) {
    for call in message.tool_calls.iter_mut().flatten() {
        if call.id.as_deref().is_none_or(str::is_empty) {
            call.id = Some(format!("call_{:016x}{:08x}", fastrand::u64(..), fastrand::u32(..)));
        }
        let text = call.arguments();
        if let Some(function) = &mut call.function {
            function.arguments = Some(Value::String(text));
        }
    }
}

/// What is wrong with one tool call of an answer.
struct Wrong {
    id: String,
    name: String,
    /// No tool has the name the model called.
    unknown_tool: bool,
    issues: Vec<String>,
}

/// What is wrong with the tool calls of an answer.
fn problems(message: &Message, tools: &[Arc<ClientTool>]) -> Vec<Wrong> {
    let mut out = Vec::new();
    for call in message.calls() {
        let (id, name) = (call.id().to_string(), call.name().to_string());
        let Some(tool) = tools.iter().find(|t| t.name == name) else {
            let issues = vec![format!("there is no tool named `{name}`")];
            out.push(Wrong { id, name, unknown_tool: true, issues });
            continue;
        };
        let args = call.arguments();
        let parsed = if args.trim().is_empty() { Ok(json!({})) } else { serde_json::from_str::<Value>(&args) };
        let issues: Vec<String> = match parsed {
            Err(e) => vec![format!("the arguments are not valid JSON ({e})")],
            Ok(v) if !v.is_object() => vec!["the arguments must be a JSON object".to_string()],
            Ok(v) => tool.issues(&v),
        };
        if !issues.is_empty() {
            out.push(Wrong { id, name, unknown_tool: false, issues });
        }
    }
    out
}

/// The tool message that shows the model what was wrong with its call
/// `id` (`offered`: the tools it was given, named when it called none of them).
fn repair_note(id: &str, wrong: &[Wrong], offered: &[&str]) -> String {
    match wrong.iter().find(|w| w.id == id) {
        Some(w) if w.unknown_tool => {
            let names: Vec<String> = offered.iter().map(|n| format!("`{n}`")).collect();
            format!(
                "Error: there is no tool named `{}`. The tools you can call are: {}. Call one of them, \
                 or answer without a tool.",
                w.name,
                names.join(", ")
            )
        }
        Some(w) => format!(
            "Error: invalid arguments for `{name}`: {}. Call `{name}` again with arguments that fit its schema.",
            w.issues.join("; "),
            name = w.name
        ),
        None => "Not executed: another call in this turn was invalid. Repeat it with the corrected one.".into(),
    }
}

/// A request made ready for the model: tools narrowed, model renamed.
pub(crate) struct Narrowed {
    /// The body sent upstream.
    pub(crate) body: RequestBody,
    /// Indexes of the client's tools offered.
    pub(crate) keep: Vec<usize>,
    /// Indexes of the client's tools ranked by words only (never seen
    /// before and not yet embedded, or no embedding model yet).
    pub(crate) by_words: Vec<usize>,
    /// The user's last words and where to keep the decision, when there
    /// is one to keep (tools narrowed out, or plan mode).
    pub(crate) decision: Option<(String, Arc<RecordDecision>)>,
    /// What to learn from the answer (taken once its tool calls pass).
    pub(crate) learning: std::sync::Mutex<Option<Learning>>,
    /// The model's tool search, when it is offered one.
    pub(crate) search: Option<Search>,
}

/// Narrows `req`'s tools and takes its body for the model: the client's
/// fields as they came, but `model` (when `openai.models` renames it) and
/// `tools` (when some were narrowed out, or plan mode offers catalog APIs).
pub(crate) async fn prepare(
    req: &mut ChatRequest,
    config: &OpenAiConfig,
    narrowing: &Narrowing,
) -> Result<Narrowed, ChatError> {
    let defers = req.tools.iter().any(|t| t.deferred);
    let narrows = !defers && req.tools.len() > config.max_tools;
    let decides = narrowing.record.is_some() && (narrows || req.mode == request::Mode::Plan);
    let messages = if narrows || decides || defers { req.messages()? } else { Vec::new() };
    let decision = narrowing.record.clone().filter(|_| decides).map(|record| (last_user_words(&messages), record));
    let (Kept { tools: keep, by_words }, learning, search) = if defers {
        // The client chose what is loaded: nothing is narrowed.
        match search::deferred(&req.tools, &messages, req.tool_search, config, &narrowing.loaded) {
            Some((keep, search)) => (Kept { tools: keep, by_words: Vec::new() }, None, Some(search)),
            None => (Kept { tools: (0..req.tools.len()).collect(), by_words: Vec::new() }, None, None),
        }
    } else if narrows {
        let span = tracing::info_span!(target: crate::telemetry::TARGET, "narrow tools",
            "toolrouter.tools.offered" = req.tools.len() as i64, "toolrouter.tools.kept" = config.max_tools as i64);
        let (kept, learning) =
            narrowing.narrow(&req.tools, &messages, config.max_tools, req.forced.as_deref()).instrument(span).await;
        let search = search::narrowed(&req.tools, &kept.tools, req.tool_search, config);
        (kept, learning, search)
    } else {
        (Kept { tools: (0..req.tools.len()).collect(), by_words: Vec::new() }, None, None)
    };
    let mut keep = keep;
    if search.is_some() {
        if let Some(i) = req.tools.iter().position(|t| t.name == SEARCH_TOOL) {
            return Err(ChatError::invalid(
                format!(
                    "a tool is named `{SEARCH_TOOL}`, the name of toolrouter's tool search: rename it, \
                     or send `\"toolrouter\": {{\"tool_search\": false}}`"
                ),
                Some(&format!("tools[{i}].function.name")),
            ));
        }
        // A forced tool is loaded, deferred or not.
        let forced = req.forced.as_deref().and_then(|f| req.tools.iter().position(|t| t.name == f));
        if let Some(i) = forced.filter(|i| !keep.contains(i)) {
            keep.push(i);
        }
    }
    let mut body = std::mem::take(&mut req.body);
    if req.upstream_model != req.model {
        body.set("model", &req.upstream_model);
    }
    let all_as_sent = keep.len() == req.tools.len() && body.get("tools").is_some() && !defers;
    if !req.tools.is_empty() && !all_as_sent {
        body.set_raw("tools", tools_array(&req.tools, &keep, search.as_ref()));
    }
    let learning = std::sync::Mutex::new(learning);
    Ok(Narrowed { body, keep, by_words, decision, learning, search })
}

/// The last user message's text, cut to [`DECISION_REQUEST_CHARS`].
fn last_user_words(messages: &[Message]) -> String {
    let text = messages.iter().rev().find(|m| m.is("user")).map(Message::text).unwrap_or_default();
    text.chars().take(DECISION_REQUEST_CHARS).collect()
}

/// The JSON array of the tools offered: the search function while it is
/// open, then the tools at `keep`, then those its searches found, each as
/// its client sent it (the list only grows as searches load tools).
pub(crate) fn tools_array(tools: &[Arc<ClientTool>], keep: &[usize], search: Option<&Search>) -> Box<RawValue> {
    let mut parts: Vec<&str> = Vec::new();
    let definition = search.filter(|s| s.open()).map(Search::definition);
    parts.extend(definition.as_deref().map(RawValue::get));
    let found = search.map(|s| s.found.as_slice()).unwrap_or_default();
    parts.extend(keep.iter().chain(found).map(|&i| tools[i].definition.get()));
    RawValue::from_string(format!("[{}]", parts.join(","))).expect("an array of JSON values is JSON")
}

/// An answer whose tool calls passed their checks.
pub(crate) struct Repaired {
    pub(crate) answer: Completion,
    /// Requests made to repair it.
    pub(crate) repairs: usize,
    /// Tokens the repair requests spent (the first answer's are its own).
    pub(crate) usage: Usage,
}

/// Checks `answer`'s tool calls; while some are invalid, shows the model
/// what was wrong and asks again (non-streaming), up to `repair_attempts`.
pub(crate) async fn repaired(
    llm: &dyn ChatModel,
    prepared: &Narrowed,
    mut answer: Completion,
    req: &ChatRequest,
    config: &OpenAiConfig,
) -> Result<Repaired, ChatError> {
    let tools = &req.tools;
    // The repair requests' body and conversation, made on the first repair.
    let mut retry: Option<(RequestBody, Vec<Message>)> = None;
    let (mut repairs, mut usage) = (0, Usage::default());
    loop {
        let Some(message) = answer.message_mut() else { return Ok(Repaired { answer, repairs, usage }) };
        normalize_tool_calls(message);
        let wrong = problems(message, tools);
        if wrong.is_empty() {
            let learning = prepared.learning.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(learning) = learning {
                learning.learn(message, tools);
            }
            if let Some(search) = &prepared.search {
                search.learn(message);
            }
            return Ok(Repaired { answer, repairs, usage });
        }
        if repairs >= config.repair_attempts {
            let detail: Vec<String> = wrong.iter().map(|w| format!("`{}`: {}", w.name, w.issues.join("; "))).collect();
            return Err(ChatError::InvalidToolCalls { repairs, detail: detail.join(" | ") });
        }
        repairs += 1;
        let (body, conversation) = match &mut retry {
            Some(retry) => retry,
            None => retry.insert((prepared.body.clone(), request::messages(&prepared.body)?)),
        };
        // Show the model its call and what was wrong with it; ask again.
        let found = prepared.search.as_ref().map(|s| s.found.as_slice()).unwrap_or_default();
        let offered: Vec<&str> = prepared.keep.iter().chain(found).map(|&i| tools[i].name.as_str()).collect();
        let message = message.clone();
        let notes = message.calls().iter().map(|c| Message::tool_result(c.id(), repair_note(c.id(), &wrong, &offered)));
        let notes: Vec<Message> = notes.collect();
        conversation.push(message);
        conversation.extend(notes);
        body.set("messages", conversation);
        answer = llm.complete(body, req.deadline).await?;
        usage += answer.tokens();
    }
}

/// While the model's answer calls the search (and the rounds last): its
/// searches answered, the tools found offered, the model asked again.
/// Returns the first answer that does not search, and the tokens of the
/// requests made after `answer`.
pub(crate) async fn searched(
    llm: &dyn ChatModel,
    prepared: &mut Narrowed,
    mut answer: Completion,
    req: &ChatRequest,
    narrowing: &Narrowing,
) -> Result<(Completion, Usage), ChatError> {
    let mut usage = Usage::default();
    let mut conversation = None;
    while let Some(search) = prepared.search.as_mut() {
        let Some(message) = answer.message_mut() else { break };
        normalize_tool_calls(message);
        let messages = match &mut conversation {
            Some(messages) => messages,
            None => conversation.insert(request::messages(&prepared.body)?),
        };
        let Some(added) = search.answer(message, messages, narrowing).await else { break };
        messages.extend(added);
        prepared.body.set("messages", messages);
        prepared.body.set_raw("tools", tools_array(&req.tools, &prepared.keep, Some(search)));
        answer = llm.complete(&prepared.body, req.deadline).await?;
        usage += answer.tokens();
    }
    Ok((answer, usage))
}

/// toolrouter's report on a request, for the answer's `toolrouter` field;
/// a decision (tools narrowed out, or a plan) is also kept for the console
/// ([`Narrowing::record`]), and the report names its `trace_id`.
pub(crate) fn report(req: &ChatRequest, prepared: &Narrowed, repairs: usize, planned: Option<Value>) -> Value {
    let mode = if planned.is_some() { "plan" } else { "route" };
    let mut r =
        json!({"mode": mode, "tools_offered": prepared.keep.len(), "tools_total": req.tools.len(), "repairs": repairs});
    if let Some(steps) = planned {
        r["plan"] = steps;
    }
    if let Some(search) = &prepared.search {
        r["tool_search"] = search.report();
        r["tools_offered"] = json!(prepared.keep.len() + search.found.len());
    }
    let unchecked: Vec<Value> = req
        .tools
        .iter()
        .filter_map(|t| t.unchecked().map(|reason| json!({"tool": t.name, "reason": reason})))
        .take(REPORTED_NAMES)
        .collect();
    if !unchecked.is_empty() {
        r["unchecked_tools"] = json!(unchecked);
    }
    if !prepared.by_words.is_empty() {
        let named = prepared.by_words.iter().take(REPORTED_NAMES).map(|&i| json!(req.tools[i].name));
        r["ranked_by_words"] = json!({"count": prepared.by_words.len(), "tools": named.collect::<Vec<_>>()});
    }
    if let Some((request, record)) = &prepared.decision {
        let mut decision = r.clone();
        decision["request"] = json!(request);
        decision["status"] = json!(mode);
        decision["kept"] = prepared.keep.iter().map(|&i| json!(req.tools[i].name)).collect();
        r["trace_id"] = json!(record(decision));
    }
    r
}

/// A non-streaming answer: asks the model, checks and repairs its tool
/// calls. `planned`: in plan mode, the planner's steps (reported).
pub(crate) async fn complete(
    mut req: ChatRequest,
    llm: &dyn ChatModel,
    config: &OpenAiConfig,
    narrowing: &Narrowing,
    planned: Option<Value>,
) -> Result<Completion, ChatError> {
    let mut prepared = prepare(&mut req, config, narrowing).await?;
    let first = llm.complete(&prepared.body, req.deadline).await?;
    let mut tokens = first.tokens();
    let (first, searching) = searched(llm, &mut prepared, first, &req, narrowing).await?;
    let Repaired { mut answer, repairs, usage } = repaired(llm, &prepared, first, &req, config).await?;
    // Every request's tokens: the first answer's, the searches' and the repairs'.
    if repairs > 0 || prepared.search.as_ref().is_some_and(|s| !s.rounds.is_empty()) {
        tokens += searching;
        tokens += usage;
        answer.usage.get_or_insert_default().set_tokens(tokens);
    }
    answer.model = Some(req.model.clone());
    answer.extra.insert("toolrouter".into(), report(&req, &prepared, repairs, planned));
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::tools::ToolList;

    /// Arguments sent as an object become JSON text; a call without an id
    /// gets one, a call with one keeps it.
    #[test]
    fn tool_calls_are_normalized() {
        use crate::llm::wire::ToolCall;
        let mut object = ToolCall::function("", "weather", "");
        object.function.as_mut().unwrap().arguments = Some(json!({"city": "Oslo"}));
        let mut message = Message::calling(vec![object, ToolCall::function("call_7", "time", "{}")]);
        message.tool_calls.as_mut().unwrap()[0].id = None;
        normalize_tool_calls(&mut message);
        let calls = message.calls();
        assert_eq!(calls[0].function.as_ref().unwrap().arguments, Some(json!("{\"city\":\"Oslo\"}")));
        assert!(calls[0].id().starts_with("call_") && calls[0].id().len() > 10, "{:?}", calls[0].id);
        assert_eq!(calls[1].id(), "call_7");
    }

    fn tool(name: &str, description: &str) -> Arc<ClientTool> {
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
        Arc::new(ClientTool {
            name: name.into(),
            text: format!("{name} {description} city"),
            needs: vec!["city".into()],
            definition: serde_json::value::to_raw_value(
                &json!({"type": "function", "function": {"name": name, "parameters": schema.clone()}}),
            )
            .unwrap(),
            description: description.into(),
            deferred: false,
            check: crate::chat::tools::Check::Schema(crate::chat::tools::Schema::new(&schema, true)),
        })
    }

    #[tokio::test]
    async fn narrowing_keeps_the_relevant_and_what_follows_the_last_call() {
        let mut tools: Vec<Arc<ClientTool>> =
            (0..50).map(|i| tool(&format!("tool_{i}"), "does something unrelated")).collect();
        tools.push(tool("weather_forecast", "weather forecast for a city"));
        tools.push(tool("hotel_booking", "book a hotel room"));
        let messages: Vec<Message> = serde_json::from_value(json!([
            {"role": "user", "content": "What is the weather forecast in Berlin?"},
            {"role": "assistant", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "tool_3", "arguments": "{}"}}]},
        ]))
        .unwrap();
        let mut narrowing = Narrowing::lexical(Arc::default());
        narrowing.weight =
            Arc::new(|from: &str, to: &str| if from == "tool_3" && to == "hotel_booking" { 0.9 } else { 0.0 });
        let tools = ToolList::from(tools);
        let keep = narrowing.narrow(&tools, &messages, 3, None).await.0.tools;
        let names: Vec<&str> = keep.iter().map(|&i| tools[i].name.as_str()).collect();
        assert!(names.contains(&"weather_forecast") && names.contains(&"hotel_booking"), "{names:?}");
        assert_eq!(keep.len(), 3);
        assert!(keep.windows(2).all(|w| w[0] < w[1]), "original order");
        // Tools already called and the tool_choice target are always kept.
        let keep = narrowing.narrow(&tools, &messages, 2, Some("tool_40")).await.0.tools;
        let names: Vec<&str> = keep.iter().map(|&i| tools[i].name.as_str()).collect();
        assert_eq!(names, ["tool_3", "tool_40"], "pinned before the best match");
    }

    #[test]
    fn tool_call_problems_are_named() {
        let tools = vec![tool("weather", "")];
        let message: Message = serde_json::from_value(json!({"tool_calls": [
            {"id": "a", "function": {"name": "weather", "arguments": "{\"city\": 3}"}},
            {"id": "b", "function": {"name": "nope", "arguments": "{}"}},
            {"id": "c", "function": {"name": "weather", "arguments": "{oops"}},
            {"id": "d", "function": {"name": "weather", "arguments": "{\"city\": \"Rome\"}"}}]}))
        .unwrap();
        let p = problems(&message, &tools);
        let ids: Vec<&str> = p.iter().map(|w| w.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert!(p[0].issues[0].contains("/city"), "{:?}", p[0].issues);
        // A made-up name is answered with the real ones, not "call `nope` again".
        let note = repair_note("b", &p, &["weather", "forecast"]);
        assert!(note.contains("no tool named `nope`") && note.contains("`weather`, `forecast`"), "{note}");
        assert!(!note.contains("Call `nope`"), "{note}");
        assert!(repair_note("a", &p, &["weather"]).contains("Call `weather` again"));
        assert!(repair_note("d", &p, &["weather"]).starts_with("Not executed"));
    }
}
