//! Tool-call trajectories: what models called, in which order, with what result.
//!
//! Reads the trajectory files of ToolBench, StableToolBench and StepTool (the
//! formats are described in the dataset README, section "trajectories/") into
//! one model, [`Trajectory`]: the query, the functions offered, the calls of
//! the run's final path, the calls of abandoned search branches, how the run
//! ended and, where the format has one, the success label.
//!
//! Formats, detected from each file's content (never from its path):
//!
//! * [`Format::StepToolEval`] (`steptool.rs`): `{query_id: {query, tool_names,
//!   answer_steps, final_step, is_solved}}`, steps as Python literals; also
//!   the StableToolBench pass-rate evaluator output, which has the same records.
//! * [`Format::ToolBenchAnswer`] (`toolbench.rs`): one raw answer per file,
//!   a DFSDT search tree (`tree.tree`) or CoT chains (`trys[].chain`).
//! * [`Format::Converted`] (`converted.rs`): `{query_id: {query, available_tools,
//!   answer: {answer_details}}}`, a nested `{role, message, next}` chain.
//! * [`Format::SftConversations`] (`sft.rs`): ToolLLaMA training conversations.
//!
//! [`load_path`] never fails and never panics: files that are not JSON or not
//! trajectories, and records that are malformed, are listed in the
//! [`ParseReport`] with a reason. Function names are kept exactly as recorded
//! (spaces, case, hallucinated names); resolving them is the catalog's job.

mod calls;
mod converted;
pub(crate) mod pyliteral;
pub(crate) mod resolve;
mod sft;
mod steptool;
mod toolbench;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

pub(crate) use calls::{is_finish, judge_failure};

/// One run of a model on one query.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Trajectory {
    /// `<file path>#<query id or record index>`.
    pub(crate) source: String,
    pub(crate) format: Format,
    pub(crate) query_id: Option<String>,
    pub(crate) query: String,
    /// Function names offered to the model, in file order, without `Finish`.
    pub(crate) offered: Vec<String>,
    /// Calls of the run's final path, in order, without `Finish` calls.
    pub(crate) calls: Vec<Call>,
    /// Calls on abandoned branches of a search tree (empty for linear formats), without `Finish` calls.
    pub(crate) abandoned: Vec<Call>,
    /// How the final path ended; `None` when it does not end with a valid `Finish` call.
    pub(crate) finish: Option<Finish>,
    /// The `Finish` call ending the final path, as recorded (its arguments hold the final answer).
    pub(crate) finish_call: Option<Call>,
    /// Success label: StepTool majority vote, ToolBench answer `win`; `None` when the format has none.
    pub(crate) solved: Option<bool>,
}

/// One function call as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Call {
    /// Function name exactly as recorded.
    pub(crate) name: String,
    /// Raw argument text (normally JSON); empty when the source cut it off.
    pub(crate) arguments: String,
    /// Raw response text; may be truncated or invalid JSON.
    pub(crate) response: Option<String>,
    /// See [`judge_failure`]; `None` when unknown.
    pub(crate) failed: Option<bool>,
}

impl Call {
    /// A call whose `failed` is judged from its response.
    pub(crate) fn new(name: impl Into<String>, arguments: impl Into<String>, response: Option<String>) -> Self {
        let failed = response.as_deref().and_then(judge_failure);
        Call { name: name.into(), arguments: arguments.into(), response, failed }
    }
}

/// The trajectory file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub(crate) enum Format {
    /// StepTool evaluation runs (and StableToolBench pass-rate results).
    StepToolEval,
    /// ToolBench/StableToolBench raw answer files: DFS tree or CoT `trys` chains.
    ToolBenchAnswer,
    /// Converted answers (`answer_details` chains): gpt-3.5 CoT eval, `model_predictions_converted`.
    Converted,
    /// StepTool SFT examples in ToolLLaMA conversation format.
    SftConversations,
}

impl Format {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Format::StepToolEval => "steptool_eval",
            Format::ToolBenchAnswer => "toolbench_answer",
            Format::Converted => "converted",
            Format::SftConversations => "sft_conversations",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a run ended (`Finish` return type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub(crate) enum Finish {
    /// `give_answer`.
    GiveAnswer,
    /// `give_up_and_restart` (or `give_up`).
    GiveUp,
}

/// A file or record that was not loaded, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Skipped {
    /// A file path, or `<file path>#<record>`.
    pub(crate) location: String,
    pub(crate) reason: String,
}

/// What [`load_path`] read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct ParseReport {
    /// Files examined.
    pub(crate) files: usize,
    /// Trajectories loaded.
    pub(crate) trajectories: usize,
    /// Files holding trajectories, by format.
    pub(crate) files_by_format: BTreeMap<Format, usize>,
    /// Files and records not loaded.
    pub(crate) skipped: Vec<Skipped>,
}

/// Loads every trajectory in a file, or in a directory walked recursively in
/// sorted order. Never fails: problems end up in [`ParseReport::skipped`].
pub(crate) fn load_path(path: &Path) -> (Vec<Trajectory>, ParseReport) {
    let mut out = Vec::new();
    let mut report = ParseReport::default();
    if path.is_file() {
        load_file(path, &mut out, &mut report);
    } else if path.is_dir() {
        for entry in walkdir::WalkDir::new(path).sort_by_file_name() {
            match entry {
                Ok(e) if e.file_type().is_file() => load_file(e.path(), &mut out, &mut report),
                Ok(_) => {}
                Err(e) => report.skipped.push(Skipped {
                    location: e.path().unwrap_or(path).display().to_string(),
                    reason: format!("cannot walk: {e}"),
                }),
            }
        }
    } else {
        report.skipped.push(Skipped { location: path.display().to_string(), reason: "not a file or directory".into() });
    }
    report.trajectories = out.len();
    (out, report)
}

fn load_file(path: &Path, out: &mut Vec<Trajectory>, report: &mut ParseReport) {
    report.files += 1;
    let location = path.display().to_string();
    let text = match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(_) => {
                report.skipped.push(Skipped { location, reason: "not UTF-8 text".into() });
                return;
            }
        },
        Err(e) => {
            report.skipped.push(Skipped { location, reason: format!("cannot read: {e}") });
            return;
        }
    };
    let file_stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    match parse_document(&location, &file_stem, &text) {
        Ok(parsed) => {
            *report.files_by_format.entry(parsed.format).or_default() += 1;
            out.extend(parsed.trajectories);
            report.skipped.extend(parsed.skipped);
        }
        Err(reason) => report.skipped.push(Skipped { location, reason }),
    }
}

/// The trajectories of one document.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    pub(crate) format: Format,
    pub(crate) trajectories: Vec<Trajectory>,
    pub(crate) skipped: Vec<Skipped>,
}

/// Parses one document. `location` prefixes every `source`; `file_stem`
/// supplies the query id of ToolBench answer files (`<id>_..._DFS_....json`).
/// `Err` when the document is not JSON or holds no trajectory format.
pub(crate) fn parse_document(location: &str, file_stem: &str, text: &str) -> Result<Parsed, String> {
    let value: Value = serde_json::from_str(text.trim_start_matches('\u{feff}')).map_err(|e| {
        let first = text.trim_start().chars().next().unwrap_or(' ');
        if first == '{' || first == '[' {
            format!("invalid JSON: {e}")
        } else {
            format!("not a JSON document (starts with {first:?})")
        }
    })?;
    let format = detect_format(&value).ok_or_else(|| not_trajectories(&value))?;
    let mut parsed = Parsed { format, trajectories: Vec::new(), skipped: Vec::new() };
    if format == Format::ToolBenchAnswer {
        let qid = file_stem.split('_').next().filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
        let key = qid.unwrap_or("0");
        let source = format!("{location}#{key}");
        match toolbench::parse_answer(&source, qid.map(str::to_string), &value) {
            Ok(t) => parsed.trajectories.push(t),
            Err(reason) => parsed.skipped.push(Skipped { location: source, reason }),
        }
        return Ok(parsed);
    }
    let records: Vec<(String, &Value)> = match &value {
        Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), v)).collect(),
        Value::Array(a) => a.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
        _ => Vec::new(),
    };
    for (key, rec) in records {
        let source = format!("{location}#{key}");
        let result = match format {
            Format::StepToolEval => steptool::parse_record(&source, &key, rec),
            Format::Converted => converted::parse_record(&source, &key, rec),
            Format::SftConversations => sft::parse_record(&source, &key, rec),
            Format::ToolBenchAnswer => Err("answer records are whole files".into()),
        };
        match result {
            Ok(t) => parsed.trajectories.push(t),
            Err(reason) => parsed.skipped.push(Skipped { location: source, reason }),
        }
    }
    Ok(parsed)
}

/// The format of a parsed JSON document, from its shape.
pub(crate) fn detect_format(value: &Value) -> Option<Format> {
    if toolbench::is_answer(value) {
        return Some(Format::ToolBenchAnswer);
    }
    let records: Box<dyn Iterator<Item = &Value>> = match value {
        Value::Object(m) => Box::new(m.values()),
        Value::Array(a) => Box::new(a.iter()),
        _ => return None,
    };
    records.take(1000).find_map(|r| {
        if steptool::is_record(r) {
            Some(Format::StepToolEval)
        } else if converted::is_record(r) {
            Some(Format::Converted)
        } else if sft::is_record(r) {
            Some(Format::SftConversations)
        } else {
            None
        }
    })
}

fn not_trajectories(value: &Value) -> String {
    let shape = match value {
        Value::Object(m) => {
            let first = m.values().next();
            let keys = |v: Option<&Value>| match v {
                Some(Value::Object(r)) => r.keys().take(6).cloned().collect::<Vec<_>>().join(", "),
                Some(other) => json_type(other).to_string(),
                None => "nothing".into(),
            };
            format!("an object of {} entries, the first holding {}", m.len(), keys(first))
        }
        other => format!("a JSON {}", json_type(other)),
    };
    format!("not a trajectory format: {shape}")
}

pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A string field of a record, or a reason naming it.
pub(crate) fn str_field<'a>(rec: &'a serde_json::Map<String, Value>, key: &str) -> Result<&'a str, String> {
    match rec.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!("field `{key}` is a {}, expected a string", json_type(other))),
        None => Err(format!("missing field `{key}`")),
    }
}

/// A value that should be text: strings as they are, anything else as compact JSON.
pub(crate) fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Function names from a list of function schemas (`[{name, ...}]`), without `Finish`.
pub(crate) fn offered_names(functions: &Value) -> Vec<String> {
    let parsed;
    let list = match functions {
        Value::String(s) => {
            parsed = pyliteral::parse(s).or_else(|_| serde_json::from_str(s)).unwrap_or(Value::Null);
            &parsed
        }
        other => other,
    };
    let Value::Array(items) = list else { return Vec::new() };
    items
        .iter()
        .filter_map(|f| match f {
            Value::Object(m) => m.get("name").and_then(Value::as_str),
            Value::String(s) => Some(s.as_str()),
            _ => None,
        })
        .filter(|n| !is_finish(n))
        .map(str::to_string)
        .collect()
}
