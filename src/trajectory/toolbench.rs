//! Raw ToolBench / StableToolBench answer files, one query per file
//! (`<query_id>_ChatGPT_DFS_woFilter_w2.json`, `<query_id>_CoT@1.json`).
//!
//! ```text
//! {"win": true,
//!  "tree": {"size": 7, "max_length": 7, "tree": {"node_type": "Action Input", "children": [
//!     {"node_type": "Action", "description": "<function>", "children": [
//!        {"node_type": "Action Input", "description": "<JSON arguments>", "observation": "<response>",
//!         "pruned": false, "finished": true, "children": [...]}]},
//!     {"node_type": "Thought", "description": "...", "children": [...]}]}},
//!  "answer_generation": {"query": "...", "function": [{"name": ..., ...}], "finish_type": ..., ...}}
//! ```
//!
//! DFSDT files hold the whole search tree (`tree.tree`): every `Action` node's
//! `description` is the function name and its `Action Input` children hold the
//! arguments (`description`) and the response (`observation`); `Thought` nodes
//! only pass through. Abandoned branches stay in the tree. The final path is
//! the first branch (depth-first, in child order) ending in `Finish` with
//! `give_answer`, else the last explored branch (the last leaf in that order);
//! the calls of all other branches are `abandoned`.
//!
//! CoT files have `trys: [{"chain": [node, ...], "win": ...}]` instead of
//! `tree`: each try is a flat list of the same nodes and counts as one branch.
//!
//! The query id is not in the content: it comes from the file name. `solved`
//! is the top-level `win`.

use serde_json::Value;

use super::calls::CallTree;
use super::{Call, Format, Trajectory, json_type, offered_names, str_field, text_of};

/// Whether a document is a raw answer file.
pub(crate) fn is_answer(v: &Value) -> bool {
    v.get("answer_generation").is_some() && (v.get("tree").is_some() || v.get("trys").is_some())
}

pub(crate) fn parse_answer(source: &str, query_id: Option<String>, v: &Value) -> Result<Trajectory, String> {
    let Some(Value::Object(ag)) = v.get("answer_generation") else {
        return Err("`answer_generation` is not an object".into());
    };
    let query = str_field(ag, "query")?.to_string();
    let offered = ag.get("function").map(offered_names).unwrap_or_default();
    let solved = v.get("win").and_then(Value::as_bool);
    let mut tree = CallTree::default();
    if let Some(t) = v.get("tree") {
        let root = t.get("tree").ok_or_else(|| "`tree` has no `tree` node".to_string())?;
        if !root.is_object() {
            return Err(format!("`tree.tree` is a {}, expected an object", json_type(root)));
        }
        walk(root, None, &mut Vec::new(), &mut tree);
    } else if let Some(trys) = v.get("trys") {
        let Value::Array(trys) = trys else {
            return Err(format!("`trys` is a {}, expected an array", json_type(trys)));
        };
        for (i, t) in trys.iter().enumerate() {
            let Some(Value::Array(chain)) = t.get("chain") else {
                return Err(format!("trys[{i}] has no `chain` array"));
            };
            let path = chain_calls(chain, &mut tree);
            tree.paths.push(path);
        }
    }
    let r = tree.resolve();
    Ok(Trajectory {
        source: source.to_string(),
        format: Format::ToolBenchAnswer,
        query_id,
        query,
        offered,
        calls: r.calls,
        abandoned: r.abandoned,
        finish: r.finish,
        finish_call: r.finish_call,
        solved,
    })
}

fn node_type(n: &Value) -> &str {
    n.get("node_type").and_then(Value::as_str).unwrap_or("")
}

fn description(n: &Value) -> String {
    n.get("description").map(text_of).unwrap_or_default()
}

fn observation(n: &Value) -> Option<String> {
    match n.get("observation") {
        None | Some(Value::Null) => None,
        Some(v) => Some(text_of(v)),
    }
}

/// Depth-first walk; `action` is the function name when the parent is an
/// `Action` node. Nesting is bounded by serde_json's recursion limit (128).
fn walk(node: &Value, action: Option<&str>, path: &mut Vec<usize>, tree: &mut CallTree) {
    let kind = node_type(node);
    let mut pushed = false;
    if kind == "Action Input"
        && let Some(name) = action
    {
        tree.calls.push(Call::new(name, description(node), observation(node)));
        path.push(tree.calls.len() - 1);
        pushed = true;
    }
    let name = (kind == "Action").then(|| description(node));
    let children: Vec<&Value> = match node.get("children") {
        Some(Value::Array(c)) => c.iter().filter(|c| c.is_object()).collect(),
        _ => Vec::new(),
    };
    if children.is_empty() {
        tree.paths.push(path.clone());
    }
    for child in children {
        walk(child, name.as_deref(), path, tree);
    }
    if pushed {
        path.pop();
    }
}

/// The calls of a flat CoT chain: each `Action Input` node pairs with the
/// `Action` node before it.
fn chain_calls(chain: &[Value], tree: &mut CallTree) -> Vec<usize> {
    let mut path = Vec::new();
    let mut action: Option<String> = None;
    for node in chain {
        match node_type(node) {
            "Action" => action = Some(description(node)),
            "Action Input" => {
                if let Some(name) = action.take() {
                    tree.calls.push(Call::new(name, description(node), observation(node)));
                    path.push(tree.calls.len() - 1);
                }
            }
            _ => {}
        }
    }
    path
}
