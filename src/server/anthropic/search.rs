//! Tool search on Anthropic's Messages API: the tool search tools
//! (`tool_search_tool_bm25_20251119`, `tool_search_tool_regex_20251119`,
//! and their undated names) and deferred tools in, `server_tool_use` and
//! `tool_search_tool_result` blocks in and out. toolrouter runs the
//! search ([`crate::chat::search`]): the BM25 tool's query with its own
//! ranking, the regex tool's pattern as a filter ranked the same way.

use serde_json::{Value, json};

use crate::chat::search::{SEARCH_TOOL, Searched, result_text};
use crate::server::translate::new_id;
use crate::server::translate::object;

/// The request's tool search tool.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SearchTool {
    /// Its `name` (`tool_search_tool_bm25`, `tool_search_tool_regex`).
    pub(crate) name: String,
    /// Whether its searches are regular expressions.
    pub(crate) regex: bool,
}

impl Default for SearchTool {
    /// The BM25 tool, as Anthropic names it.
    fn default() -> SearchTool {
        SearchTool { name: "tool_search_tool_bm25".into(), regex: false }
    }
}

impl SearchTool {
    /// The tool search tool `tool` is, if it is one; what is wrong with it.
    pub(crate) fn of(tool: &Value) -> Result<Option<SearchTool>, String> {
        let kind = tool.get("type").and_then(Value::as_str).unwrap_or_default();
        let regex = match kind {
            "tool_search_tool_bm25_20251119" | "tool_search_tool_bm25" => false,
            "tool_search_tool_regex_20251119" | "tool_search_tool_regex" => true,
            _ => return Ok(None),
        };
        if tool.get("defer_loading") == Some(&Value::Bool(true)) {
            return Err("the tool search tool itself cannot be deferred".into());
        }
        let fallback = if regex { "tool_search_tool_regex" } else { "tool_search_tool_bm25" };
        let name = tool.get("name").and_then(Value::as_str).unwrap_or(fallback).to_string();
        Ok(Some(SearchTool { name, regex }))
    }

    /// `toolrouter.tool_search` for the chat core.
    pub(crate) fn flavor(&self) -> &'static str {
        if self.regex { "regex" } else { "words" }
    }

    /// The blocks of a search toolrouter ran: the `server_tool_use`, then
    /// its `tool_search_tool_result` (the tools found, as references).
    pub(crate) fn blocks(&self, searched: &Searched) -> [Value; 2] {
        let id = server_id(&searched.call_id);
        let input = if self.regex { json!({"pattern": searched.query}) } else { json!({"query": searched.query}) };
        let call = object([
            ("type", "server_tool_use".into()),
            ("id", id.clone().into()),
            ("name", self.name.clone().into()),
            ("input", input),
        ]);
        let content = match &searched.error {
            Some(error) => {
                let code = if self.regex { "invalid_pattern" } else { "invalid_tool_input" };
                json!({"type": "tool_search_tool_result_error", "error_code": code, "error_message": error})
            }
            None => {
                let references: Vec<Value> =
                    searched.found.iter().map(|n| json!({"type": "tool_reference", "tool_name": n})).collect();
                json!({"type": "tool_search_tool_search_result", "tool_references": references})
            }
        };
        [call, json!({"type": "tool_search_tool_result", "tool_use_id": id, "content": content})]
    }
}

/// A `server_tool_use` id for the model's call `call_id` (Anthropic's
/// prefix; stable, so an earlier turn's blocks pair up again).
fn server_id(call_id: &str) -> String {
    match call_id.strip_prefix("call_") {
        Some(rest) => format!("srvtoolu_{rest}"),
        None if call_id.is_empty() => new_id("srvtoolu_"),
        None => format!("srvtoolu_{call_id}"),
    }
}

/// An earlier turn's `server_tool_use` block as a chat call of the search.
pub(crate) fn call(block: &Value) -> Result<Value, String> {
    let id = block.get("id").and_then(Value::as_str).ok_or("a `server_tool_use` block needs an `id`")?;
    let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
    Ok(json!({"id": id, "type": "function", "function": {"name": SEARCH_TOOL, "arguments": input.to_string()}}))
}

/// An earlier turn's `tool_search_tool_result` block as the chat result of its call.
pub(crate) fn result(block: &Value) -> Result<Value, String> {
    let id =
        block.get("tool_use_id").and_then(Value::as_str).ok_or("a `tool_search_tool_result` needs `tool_use_id`")?;
    let content = block.get("content").unwrap_or(&Value::Null);
    let text = match content.get("error_code").and_then(Value::as_str) {
        Some(code) => result_text(&[], Some(code)),
        None => references(content.get("tool_references")).unwrap_or_else(|| result_text(&[], None)),
    };
    Ok(object([("role", "tool".into()), ("tool_call_id", id.into()), ("content", text.into())]))
}

/// `tool_reference` blocks (a search result's, or a client's own search
/// answered in a `tool_result`) as the text of a result that loads them.
pub(crate) fn references(blocks: Option<&Value>) -> Option<String> {
    let blocks = blocks?.as_array()?;
    let names: Vec<&str> =
        blocks.iter().filter(|b| b["type"] == "tool_reference").filter_map(|b| b.get("tool_name")?.as_str()).collect();
    if names.is_empty() {
        return None;
    }
    let found: Vec<(&str, Option<&str>)> = names.iter().map(|n| (*n, None)).collect();
    Some(result_text(&found, None))
}
