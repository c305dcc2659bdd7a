//! The three fixed tools' definitions and argument readers.

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::{Map, Value, json};

use crate::engine::{DEFAULT_SEARCH_RESULTS, MAX_SEARCH_RESULTS};

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else { unreachable!("schemas are objects") };
    Tool::new(name, description, Arc::new(schema))
}

/// `search_tools`, `plan` and `call_api`.
pub(crate) fn fixed() -> Vec<Tool> {
    vec![
        tool(
            "search_tools",
            "Find the APIs that fit a request among thousands of real REST APIs. The APIs found become tools \
             of this session.",
            json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "What you need, in plain words."},
                "k": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_RESULTS,
                    "description": format!("How many APIs (default {DEFAULT_SEARCH_RESULTS}).")},
                "category": {"type": "string", "description": "Only this category (e.g. Weather, Finance)."}},
                "required": ["query"], "additionalProperties": false}),
        ),
        tool(
            "plan",
            "Plan the chain of API calls for a request that needs several steps: each step with its reason and \
             the arguments found. The APIs planned become tools of this session.",
            json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "The whole request."},
                "max_steps": {"type": "integer", "minimum": 1, "maximum": 8, "description": "Longest plan."}},
                "required": ["query"], "additionalProperties": false}),
        ),
        tool(
            "call_api",
            "Call an API by name with its arguments (checked against its schema first). Returns the response, \
             shortened to fit a model's context.",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "description": "The API's name, as search_tools or plan gave it."},
                "arguments": {"type": "object", "description": "The API's arguments."}},
                "required": ["name"], "additionalProperties": false}),
        ),
    ]
}

/// A required string argument. Errors are written for the model, which
/// gets them as an `isError` result and can call again.
pub(crate) fn string(args: &Map<String, Value>, key: &str) -> Result<String, String> {
    match args.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(format!("`{key}` is empty; give it in plain words")),
        Some(other) => Err(format!("`{key}` must be a string, got {other}")),
        None => Err(format!("`{key}` is required")),
    }
}

/// An optional positive integer argument.
pub(crate) fn integer(args: &Map<String, Value>, key: &str) -> Result<Option<usize>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| *n >= 1)
            .map(|n| Some(n as usize))
            .ok_or_else(|| format!("`{key}` must be a positive integer, got {v}")),
    }
}

/// An optional string argument.
pub(crate) fn optional_string<'a>(args: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("`{key}` must be a string, got {other}")),
    }
}

/// Arguments no fixed tool takes: named, with the ones it does take.
pub(crate) fn unknown(args: &Map<String, Value>, known: &[&str]) -> Result<(), String> {
    match args.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(format!("unknown argument `{k}`; the arguments are: {}", known.join(", "))),
        None => Ok(()),
    }
}
