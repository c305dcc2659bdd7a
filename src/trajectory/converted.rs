//! Converted answers: the ToolBench gpt-3.5 CoT evaluation runs
//! (`toolbench_eval_gpt35_cot/<set>.json`) and StableToolBench's
//! `model_predictions_converted/<method>/<set>.json`.
//!
//! ```text
//! {"<query_id>": {"query": "...",
//!   "available_tools": [{"name": "f_for_t", "description": ..., "parameters": ...}, ..., {"name": "Finish", ...}],
//!   "answer": {"method": "CoT@1", "total_steps": 6, "final_answer": "...",
//!     "answer_details": [{"role": "system", "message": "", "next": [
//!        {"role": "user", "message": "...", "next": [
//!          {"role": "tool", "message": "{'name': 'f_for_t', 'arguments': '{...}', 'response': '...'}", "next": [...]}]}]}]}}}
//! ```
//!
//! `tool` messages are a dict (StableToolBench) or its Python `repr` as a
//! string (gpt-3.5 CoT), which ToolBench cut to 100 characters. A cut message
//! is read with [`pyliteral::parse_dict_prefix`]: the name is always
//! recovered, `arguments` only when complete (else `""`, except for `Finish`,
//! which keeps the prefix holding its return type), `response` is the
//! part that survived (`failed` is judged from it when the error field is
//! visible, else `None`). The chain is a tree in principle (`next` is a list):
//! its leaves are branches and the final path is chosen as for DFS trees. No
//! success label.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::calls::CallTree;
use super::steptool::step_call_from_map;
use super::{Call, Format, Trajectory, is_finish, json_type, offered_names, pyliteral, str_field, text_of};

/// Last resort for a tool message that is not even a dict prefix.
static NAME_AT_START: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"^\s*\{\s*['"]name['"]\s*:\s*(?:'([^']*)'|"([^"]*)")"#).expect("valid regex"));

pub(crate) fn is_record(rec: &Value) -> bool {
    rec.get("answer").and_then(|a| a.get("answer_details")).is_some()
}

pub(crate) fn parse_record(source: &str, key: &str, rec: &Value) -> Result<Trajectory, String> {
    let Value::Object(rec) = rec else {
        return Err(format!("record is a {}, expected an object", json_type(rec)));
    };
    let query = str_field(rec, "query")?.to_string();
    let offered = rec.get("available_tools").map(offered_names).unwrap_or_default();
    let details = rec
        .get("answer")
        .and_then(|a| a.get("answer_details"))
        .ok_or_else(|| "missing `answer.answer_details`".to_string())?;
    let mut tree = CallTree::default();
    let mut path = Vec::new();
    match details {
        Value::Array(nodes) => {
            if nodes.is_empty() {
                tree.paths.push(Vec::new());
            }
            for n in nodes {
                walk(n, &mut path, &mut tree, 0)?;
            }
        }
        Value::Object(_) => walk(details, &mut path, &mut tree, 0)?,
        other => return Err(format!("`answer_details` is a {}", json_type(other))),
    }
    let r = tree.resolve();
    Ok(Trajectory {
        source: source.to_string(),
        format: Format::Converted,
        query_id: Some(key.to_string()),
        query,
        offered,
        calls: r.calls,
        abandoned: r.abandoned,
        finish: r.finish,
        finish_call: r.finish_call,
        solved: None,
    })
}

/// Chains nest one level per message; serde_json already caps nesting at 128.
fn walk(node: &Value, path: &mut Vec<usize>, tree: &mut CallTree, depth: usize) -> Result<(), String> {
    if depth > 512 {
        return Err("answer_details nested too deeply".into());
    }
    let mut pushed = false;
    if node.get("role").and_then(Value::as_str) == Some("tool") {
        let msg = node.get("message").unwrap_or(&Value::Null);
        let call = tool_call(msg).map_err(|e| format!("tool message {}: {e}", tree.calls.len() + 1))?;
        tree.calls.push(call);
        path.push(tree.calls.len() - 1);
        pushed = true;
    }
    let next: Vec<&Value> = match node.get("next") {
        Some(Value::Array(n)) => n.iter().filter(|n| n.is_object()).collect(),
        _ => Vec::new(),
    };
    if next.is_empty() {
        tree.paths.push(path.clone());
    }
    for n in next {
        walk(n, path, tree, depth + 1)?;
    }
    if pushed {
        path.pop();
    }
    Ok(())
}

/// A `tool` message as a call, complete or cut.
pub(crate) fn tool_call(msg: &Value) -> Result<Call, String> {
    let text = match msg {
        Value::Object(m) => return step_call_from_map(m),
        Value::String(s) => s,
        other => return Err(format!("message is a {}", json_type(other))),
    };
    if let Ok(Value::Object(m)) = pyliteral::parse(text) {
        return step_call_from_map(&m);
    }
    match pyliteral::parse_dict_prefix(text) {
        Ok(partial) => {
            let field = |k: &str| partial.entries.get(k).map(text_of);
            let cut = |k: &str| partial.cut.as_ref().filter(|(ck, _)| ck == k).map(|(_, v)| v.clone());
            let name = field("name").or_else(|| cut("name")).ok_or_else(|| "no function name".to_string())?;
            // A cut `Finish` keeps its argument prefix: the return type is readable there.
            let arguments =
                field("arguments").or_else(|| cut("arguments").filter(|_| is_finish(&name))).unwrap_or_default();
            let response = field("response").or_else(|| cut("response"));
            Ok(Call::new(name, arguments, response))
        }
        Err(e) => match NAME_AT_START.captures(text) {
            Some(c) => {
                let name = c.get(1).or_else(|| c.get(2)).map_or("", |m| m.as_str());
                Ok(Call { name: name.to_string(), arguments: String::new(), response: None, failed: None })
            }
            None => Err(e.to_string()),
        },
    }
}
