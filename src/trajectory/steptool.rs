//! StepTool evaluation runs (`steptool_eval/<run>/<set>.json`), also the
//! StableToolBench pass-rate results, which hold the same records.
//!
//! A file is `{query_id: record}` with
//!
//! ```text
//! {"query": "...", "tool_names": ["f_for_t", ..., "Finish"],
//!  "answer_steps": "Step 1: {'name': 'f_for_t', 'arguments': '{...}', 'response': '{\"error\": ...}'}\nStep 2: {...}",
//!  "final_step": "Final step: {'name': 'Finish', 'arguments': '{\"return_type\": ...}', 'response': ''}",
//!  "is_solved": {"0": "AnswerStatus.Solved", "1": "AnswerStatus.Unsure", "2": "AnswerStatus.Unsolved"},
//!  "length": 4}
//! ```
//!
//! `answer_steps` is split on `\nStep N: ` and each part read as a Python
//! literal ([`super::pyliteral`]); a Python `repr` never holds a raw newline,
//! so the split is safe. `final_step` repeats the last step (in every record of
//! the published runs); it is appended only when it differs. Runs are linear:
//! no abandoned calls; `Finish` calls (some runs repeat failed ones) are left
//! out of `calls`. `tool_names` and `is_solved` are JSON in the files but are
//! also accepted as Python-literal strings. `solved` is the majority of votes
//! equal to `AnswerStatus.Solved` (`Unsure` counts as not solved, ties as not solved).

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use super::calls::CallTree;
use super::{Call, Format, Trajectory, json_type, offered_names, pyliteral, str_field, text_of};

static STEP_MARK: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?:\A|\n)Step (\d+): ").expect("valid regex"));

/// Whether a record looks like a StepTool record.
pub(crate) fn is_record(rec: &Value) -> bool {
    rec.get("answer_steps").is_some() && rec.get("query").is_some()
}

pub(crate) fn parse_record(source: &str, key: &str, rec: &Value) -> Result<Trajectory, String> {
    let Value::Object(rec) = rec else {
        return Err(format!("record is a {}, expected an object", json_type(rec)));
    };
    let query = str_field(rec, "query")?.to_string();
    let mut calls = parse_steps(str_field(rec, "answer_steps")?)?;
    if let Some(fs) = rec.get("final_step") {
        let text = fs.as_str().ok_or_else(|| "field `final_step` is not a string".to_string())?;
        let body = text.trim_start().strip_prefix("Final step:").unwrap_or(text).trim();
        if !body.is_empty() {
            let v = pyliteral::parse(body).map_err(|e| format!("final_step: {e}"))?;
            let last = step_call(&v).map_err(|e| format!("final_step: {e}"))?;
            if calls.last() != Some(&last) {
                calls.push(last);
            }
        }
    }
    let offered = match rec.get("tool_names") {
        Some(v) => offered_names(v),
        None => Vec::new(),
    };
    let solved = match rec.get("is_solved") {
        Some(v) => majority_solved(v)?,
        None => None,
    };
    let r = CallTree::linear(calls).resolve();
    Ok(Trajectory {
        source: source.to_string(),
        format: Format::StepToolEval,
        query_id: Some(key.to_string()),
        query,
        offered,
        calls: r.calls,
        abandoned: r.abandoned,
        finish: r.finish,
        finish_call: r.finish_call,
        solved,
    })
}

/// The calls of an `answer_steps` text.
pub(crate) fn parse_steps(text: &str) -> Result<Vec<Call>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let marks: Vec<_> = STEP_MARK.captures_iter(text).collect();
    let Some(first) = marks.first() else {
        return Err("answer_steps does not start with `Step 1: `".into());
    };
    if first.get(0).map_or(0, |m| m.start()) != 0 {
        return Err("answer_steps does not start with `Step 1: `".into());
    }
    let mut calls = Vec::with_capacity(marks.len());
    for (i, cap) in marks.iter().enumerate() {
        let Some(whole) = cap.get(0) else { continue };
        let end = marks.get(i + 1).and_then(|c| c.get(0)).map_or(text.len(), |m| m.start());
        let part = &text[whole.end()..end];
        let n = &cap[1];
        let v = pyliteral::parse(part).map_err(|e| format!("step {n}: {e}"))?;
        calls.push(step_call(&v).map_err(|e| format!("step {n}: {e}"))?);
    }
    Ok(calls)
}

/// `{'name': ..., 'arguments': ..., 'response': ...}` as a [`Call`].
pub(crate) fn step_call(v: &Value) -> Result<Call, String> {
    let Value::Object(m) = v else {
        return Err(format!("step is a {}, expected a dict", json_type(v)));
    };
    step_call_from_map(m)
}

pub(crate) fn step_call_from_map(m: &Map<String, Value>) -> Result<Call, String> {
    let name = match m.get("name") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(format!("step name is a {}", json_type(other))),
        None => return Err("step has no `name`".into()),
    };
    let arguments = m.get("arguments").map(text_of).unwrap_or_default();
    let response = m.get("response").map(text_of);
    Ok(Call::new(name, arguments, response))
}

/// Majority of `AnswerStatus.Solved` votes; `None` when there are no votes.
fn majority_solved(v: &Value) -> Result<Option<bool>, String> {
    let parsed;
    let v = match v {
        Value::String(s) => {
            parsed = pyliteral::parse(s).or_else(|_| serde_json::from_str(s)).map_err(|e| format!("is_solved: {e}"))?;
            &parsed
        }
        other => other,
    };
    let votes: Vec<&Value> = match v {
        Value::Object(m) => m.values().collect(),
        Value::Array(a) => a.iter().collect(),
        Value::Null => return Ok(None),
        other => return Err(format!("is_solved is a {}", json_type(other))),
    };
    if votes.is_empty() {
        return Ok(None);
    }
    let solved = votes.iter().filter(|v| matches!(v.as_str(), Some("AnswerStatus.Solved" | "Solved"))).count();
    Ok(Some(solved * 2 > votes.len()))
}
