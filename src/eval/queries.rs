//! ToolBench query files: a JSON list of `{query, query_id, relevant APIs,
//! api_list}` records (the StableToolBench solvable sets and ToolBench's
//! instruction examples).

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

/// One query of a query file.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryRecord {
    pub id: String,
    pub query: String,
    /// `[tool name, API name]` pairs, original spellings.
    pub relevant: Vec<(String, String)>,
    /// The APIs of the tools the query was written for (`api_list`), as
    /// (tool name, API name): the relevant ones and their neighbours.
    pub api_list: Vec<(String, String)>,
}

#[derive(Deserialize)]
struct Raw {
    query: String,
    #[serde(default)]
    query_id: Value,
    #[serde(rename = "relevant APIs", default)]
    relevant: Vec<Vec<Value>>,
    #[serde(default)]
    api_list: Vec<Value>,
}

/// Reads a query file. `Err` names the file and the problem.
pub fn load(path: &Path) -> Result<Vec<QueryRecord>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let raw: Vec<Raw> =
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: not a ToolBench query file: {e}", path.display()))?;
    Ok(raw
        .into_iter()
        .enumerate()
        .map(|(i, r)| QueryRecord {
            id: match r.query_id {
                Value::String(s) => s,
                Value::Null => i.to_string(),
                other => other.to_string(),
            },
            query: r.query,
            relevant: r
                .relevant
                .into_iter()
                .filter_map(|pair| match pair.as_slice() {
                    [Value::String(tool), Value::String(api), ..] => Some((tool.clone(), api.clone())),
                    _ => None,
                })
                .collect(),
            api_list: r
                .api_list
                .iter()
                .filter_map(|a| Some((a["tool_name"].as_str()?.to_string(), a["api_name"].as_str()?.to_string())))
                .collect(),
        })
        .collect())
}
