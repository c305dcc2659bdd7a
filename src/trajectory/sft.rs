//! StepTool SFT examples in the ToolLLaMA conversation format
//! (`steptool_sft_examples/gpt4_dfs_G123_for_sft_example.json`).
//!
//! ```text
//! {"<query_id>": {"cnt": 3, "instances": [
//!   {"id": "Step 2: <query>", "conversations": [
//!     {"from": "system", "value": "... Specifically, you have access to the following APIs: [{'name': ...}, ...]"},
//!     {"from": "user", "value": "\n<query>\nBegin!\n"},
//!     {"from": "assistant", "value": "\nThought: ...\nAction: <function>\nAction Input: {...}"},
//!     {"from": "function", "value": "{\"error\": \"\", \"response\": ...}"}, ...]}]}}
//! ```
//!
//! Each instance is one training step of the same GPT-4 DFS solution, and
//! the conversations grow step by step, so the longest instance holds the
//! whole final path; it alone is read. Assistant turns are parsed the way
//! ToolBench's `react_parser` does: the function name lies between
//! `Action: ` and `\nAction Input: `, the arguments after the latter; the next
//! `function` turn carries the response. Extra `user` turns ("Remember you are
//! now in the intermediate state of a trail ...") mark DFS backtracking, but the
//! abandoned candidates are only described in prose, so `abandoned` stays
//! empty. `offered` comes from the API list in the system prompt. No label.

use serde_json::Value;

use super::calls::CallTree;
use super::{Call, Format, Trajectory, json_type, offered_names, pyliteral};

const APIS_MARKER: &str = "Specifically, you have access to the following APIs:";

pub(crate) fn is_record(rec: &Value) -> bool {
    rec.get("instances").is_some_and(Value::is_array)
}

pub(crate) fn parse_record(source: &str, key: &str, rec: &Value) -> Result<Trajectory, String> {
    let Some(Value::Array(instances)) = rec.get("instances") else {
        return Err(format!("record is a {} without an `instances` array", json_type(rec)));
    };
    let conversations: Vec<&Vec<Value>> = instances
        .iter()
        .filter_map(|i| match i.get("conversations") {
            Some(Value::Array(c)) => Some(c),
            _ => None,
        })
        .collect();
    // The longest instance; the last of equally long ones.
    let conv = conversations
        .iter()
        .rev()
        .max_by_key(|c| c.len())
        .ok_or_else(|| "no instance has a `conversations` array".to_string())?;
    let turns: Vec<(&str, &str)> = conv
        .iter()
        .map(|t| {
            let from = t.get("from").and_then(Value::as_str).unwrap_or("");
            let value = t.get("value").and_then(Value::as_str).unwrap_or("");
            (from, value)
        })
        .collect();
    let query = turns
        .iter()
        .find(|(f, _)| *f == "user")
        .map(|(_, v)| clean_query(v))
        .ok_or_else(|| "conversation has no user turn".to_string())?;
    let offered = turns.iter().find(|(f, _)| *f == "system").map(|(_, v)| system_functions(v)).unwrap_or_default();
    let mut calls = Vec::new();
    for (i, (from, value)) in turns.iter().enumerate() {
        if *from != "assistant" {
            continue;
        }
        let Some((name, arguments)) = parse_action(value) else { continue };
        let response = turns.get(i + 1).filter(|(f, _)| *f == "function").map(|(_, v)| v.to_string());
        calls.push(Call::new(name, arguments, response));
    }
    let r = CallTree::linear(calls).resolve();
    Ok(Trajectory {
        source: source.to_string(),
        format: Format::SftConversations,
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

/// `\n<query>\nBegin!\n` -> `<query>`.
fn clean_query(v: &str) -> String {
    let t = v.trim();
    t.strip_suffix("Begin!").unwrap_or(t).trim().to_string()
}

/// Function names listed in the system prompt (Python-literal list after [`APIS_MARKER`]).
pub(crate) fn system_functions(system: &str) -> Vec<String> {
    let Some(at) = system.find(APIS_MARKER) else { return Vec::new() };
    let list = system[at + APIS_MARKER.len()..].trim();
    match pyliteral::parse_leading(list) {
        Ok((v, _)) => offered_names(&v),
        Err(_) => Vec::new(),
    }
}

/// `(name, arguments)` of a ReAct assistant turn, as ToolBench's `react_parser` splits it.
pub(crate) fn parse_action(value: &str) -> Option<(String, String)> {
    const ACTION: &str = "Action: ";
    const INPUT: &str = "\nAction Input: ";
    let action_at = if value.starts_with(ACTION) { 0 } else { value.find("\nAction: ")? + 1 };
    let name_start = action_at + ACTION.len();
    let input_at = value[name_start..].find(INPUT)? + name_start;
    let name = &value[name_start..input_at];
    let arguments = &value[input_at + INPUT.len()..];
    Some((name.to_string(), arguments.to_string()))
}
