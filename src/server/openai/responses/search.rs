//! Tool search on the Responses API: the `tool_search` tool, deferred
//! functions and namespaces in, `tool_search_call`/`tool_search_output`
//! items in and out ([`crate::chat::search`] runs the search).
//!
//! * `{"type": "tool_search"}` (run by the server, as OpenAI's hosted
//!   search): toolrouter searches the deferred functions with its own
//!   ranking; each search shows as a `tool_search_call` item (its
//!   `arguments`: `{"query": …}`) and a `tool_search_output` item (the
//!   tools it loaded, as the request defined them).
//! * `{"type": "tool_search", "execution": "client"}`: the client searches.
//!   The model is offered a `tool_search` function with the client's
//!   `description` and `parameters`; its call comes back as a
//!   `tool_search_call` item with `execution: "client"` and a `call_id`, and
//!   the client's `tool_search_output` loads the tools it lists (defined
//!   there or among the request's tools). Deferred functions it never
//!   loaded are not offered.
//! * A namespace's functions are offered to the model as
//!   `<namespace>__<name>` and come back as a `function_call` with its
//!   `namespace` and `name`; a call to a deferred function outside any
//!   namespace names itself as its namespace, as OpenAI's do (the Agents
//!   SDK finds deferred tools so).

use serde_json::{Map, Value, json};

use crate::chat::search::{SEARCH_TOOL, Searched, result_text};
use crate::server::error::ApiError;
use crate::server::translate::new_id;
use crate::server::translate::object;

/// Between a namespace and its function's name, in the name the model sees.
pub(crate) const NAMESPACED: &str = "__";

/// What a request's `tools` say of tool search.
#[derive(Debug, Default, PartialEq)]
pub(crate) enum Searching {
    /// No `tool_search` tool.
    #[default]
    None,
    /// `{"type": "tool_search"}`: toolrouter searches.
    Server,
    /// `execution: "client"`: the client does.
    Client,
}

/// Function tools in chat's shape (`{"type": "function", "function": {…}}`,
/// `defer_loading` beside `function`), a namespace's functions named
/// `<namespace>__<name>`, and what the `tool_search` tool asks.
pub(crate) fn tools(value: &Value) -> Result<(Vec<Value>, Searching), ApiError> {
    let Some(list) = value.as_array() else { return Err(ApiError::invalid("`tools` must be a list", Some("tools"))) };
    let mut out = Vec::with_capacity(list.len());
    let mut searching = Searching::None;
    for (i, tool) in list.iter().enumerate() {
        let bad = |what: String| ApiError::invalid(format!("tools[{i}]: {what}"), Some("tools"));
        match tool.get("type").and_then(Value::as_str) {
            Some("function") => out.push(function(tool, None)),
            Some("namespace") => {
                let name =
                    tool.get("name").and_then(Value::as_str).ok_or_else(|| bad("a namespace needs a `name`".into()))?;
                let inner = tool
                    .get("tools")
                    .and_then(Value::as_array)
                    .ok_or_else(|| bad("a namespace needs `tools`".into()))?;
                for (j, f) in inner.iter().enumerate() {
                    if f.get("type").and_then(Value::as_str) != Some("function") {
                        return Err(bad(format!("tools[{j}] of namespace `{name}`: only functions are served")));
                    }
                    out.push(function(f, Some(name)));
                }
            }
            Some("tool_search") => {
                if tool.get("defer_loading") == Some(&Value::Bool(true)) {
                    return Err(bad("`tool_search` itself cannot be deferred".into()));
                }
                if searching != Searching::None {
                    return Err(bad("only one `tool_search` tool may be sent".into()));
                }
                searching = match tool.get("execution").and_then(Value::as_str) {
                    None | Some("server") => Searching::Server,
                    Some("client") => {
                        out.push(client_search(tool));
                        Searching::Client
                    }
                    Some(other) => return Err(bad(format!("`execution` {other:?}: \"server\" or \"client\""))),
                };
            }
            other => {
                let other = other.unwrap_or("(none)");
                return Err(bad(format!(
                    "tools of type {other:?} are not served: toolrouter routes function tools (and namespaces, tool_search)"
                )));
            }
        }
    }
    Ok((out, searching))
}

/// A Responses function tool in chat's shape (`namespace`: the one it is in).
fn function(tool: &Value, namespace: Option<&str>) -> Value {
    let mut function = tool.as_object().cloned().unwrap_or_default();
    function.remove("type");
    let deferred = function.remove("defer_loading");
    if let (Some(namespace), Some(Value::String(name))) = (namespace, function.get_mut("name")) {
        *name = format!("{namespace}{NAMESPACED}{name}");
    }
    let mut chat = object([("type", "function".into()), ("function", Value::Object(function))]);
    if let Some(deferred) = deferred {
        chat["defer_loading"] = deferred;
    }
    chat
}

/// The client's own search, as a function the model calls.
fn client_search(tool: &Value) -> Value {
    let description = tool.get("description").cloned().unwrap_or_else(|| json!("Search for more tools to load."));
    let parameters = tool.get("parameters").cloned().unwrap_or_else(
        || json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
    );
    json!({"type": "function", "function": {"name": SEARCH_TOOL, "description": description, "parameters": parameters}})
}

/// The names a `tool_search_output`'s tools load (a namespace's as the
/// model sees them), and their chat definitions.
pub(crate) fn loaded(item: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for tool in item.get("tools").and_then(Value::as_array).into_iter().flatten() {
        let namespace = tool.get("name").and_then(Value::as_str).filter(|_| tool["type"] == "namespace");
        let functions = match namespace {
            Some(_) => tool.get("tools").and_then(Value::as_array).cloned().unwrap_or_default(),
            None => vec![tool.clone()],
        };
        for f in functions.iter().filter(|f| f["type"] == "function") {
            let mut chat = function(f, namespace);
            if let Some(fields) = chat.as_object_mut() {
                fields.remove("defer_loading");
            }
            let name = chat["function"]["name"].as_str().unwrap_or_default().to_string();
            out.push((name, chat));
        }
    }
    out
}

/// A `tool_search_call` input item as the chat assistant's call (`id`:
/// its `call_id`, else its `id`).
pub(crate) fn call_message(item: &Value, id: &str) -> Value {
    let arguments = match item.get("arguments") {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => "{}".into(),
    };
    let call = json!({"id": id, "type": "function", "function": {"name": SEARCH_TOOL, "arguments": arguments}});
    object([("role", "assistant".into()), ("content", Value::Null), ("tool_calls", Value::Array(vec![call]))])
}

/// A `tool_search_output` input item as the chat result of call `id`.
pub(crate) fn output_message(item: &Value, id: &str) -> Value {
    let names = loaded(item);
    let found: Vec<(&str, Option<&str>)> = names.iter().map(|(name, _)| (name.as_str(), None)).collect();
    object([("role", "tool".into()), ("tool_call_id", id.into()), ("content", result_text(&found, None).into())])
}

/// The output items of a search toolrouter ran: the call, then the tools
/// it loaded as `request_tools` define them.
pub(crate) fn items(searched: &Searched, request_tools: Option<&Value>) -> [Value; 2] {
    let call = json!({"type": "tool_search_call", "id": new_id("tsc_"), "call_id": searched.call_id,
        "execution": "server", "status": "completed", "arguments": {"query": searched.query}});
    let tools: Vec<Value> = searched.found.iter().filter_map(|name| definition(request_tools, name)).collect();
    let mut output = json!({"type": "tool_search_output", "id": new_id("tso_"),
        "call_id": searched.call_id, "execution": "server", "status": "completed", "tools": tools});
    if let Some(error) = &searched.error {
        output["error"] = json!(error);
    }
    [call, output]
}

/// The request's definition of the tool the model knows as `name` (a
/// namespace's function inside its namespace).
fn definition(request_tools: Option<&Value>, name: &str) -> Option<Value> {
    let tools = request_tools?.as_array()?;
    if let Some(f) = tools.iter().find(|t| t["type"] == "function" && t["name"] == name) {
        return Some(f.clone());
    }
    let (namespace, inner) = name.split_once(NAMESPACED)?;
    let ns = tools.iter().find(|t| t["type"] == "namespace" && t["name"] == namespace)?;
    let f = ns["tools"].as_array()?.iter().find(|f| f["name"] == inner)?;
    let mut shown: Map<String, Value> = ns.as_object()?.clone();
    shown.insert("tools".into(), Value::Array(vec![f.clone()]));
    Some(Value::Object(shown))
}

/// A function call's name as the Responses API gives it: `(namespace,
/// name)` when the model called a namespace's function; a deferred
/// function outside any namespace is its own namespace (OpenAI's wire
/// shape, which the Agents SDK looks deferred tools up by).
pub(crate) fn split_name<'a>(name: &'a str, request_tools: Option<&Value>) -> (Option<&'a str>, &'a str) {
    let tools = || request_tools.and_then(Value::as_array).into_iter().flatten();
    let deferred = |t: &&Value| t["type"] == "function" && t["name"] == name && t["defer_loading"] == Value::Bool(true);
    if tools().any(|t| deferred(&t)) {
        return (Some(name), name);
    }
    let mut namespaces = tools().filter(|t| t["type"] == "namespace").filter_map(|t| t["name"].as_str());
    match name.split_once(NAMESPACED) {
        Some((namespace, inner)) if namespaces.any(|n| n == namespace) => (Some(namespace), inner),
        _ => (None, name),
    }
}
