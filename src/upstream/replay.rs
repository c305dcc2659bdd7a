//! The replay table: recorded real responses, served in place of RapidAPI
//! (this machine cannot reach it; tests must not depend on it).
//!
//! The layout is StableToolBench's response cache:
//! `<Category>/<tool>_for_<Category>/<api>.json`, each file an object from
//! `str(arguments)` (a Python dict literal) to `{"error": "...",
//! "response": ...}`. An `index.jsonl` beside it (one line per file with
//! `path`, `tool_name`, `api_name`) names the tool and API originally;
//! without it, files are resolved by their standardized names.
//!
//! [`ReplayTable::lookup`] answers with the recording whose arguments
//! equal the call's (values compared as text, so `5` matches `"5"`), else
//! the closest recording of the same API by [`closeness`], else nothing:
//! the caller says "no recorded response", it never invents one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Attempt, CallError, CallTrace, ErrorClass, Response, error};
use crate::catalog::{Api, ApiId, Catalog};
use crate::trajectory::pyliteral;
use crate::units::ms;

/// A share of APIs taken down on purpose, to measure what survives an
/// outage (`toolrouter replay --down`, `eval plan --down`). Which APIs are
/// down depends only on their function names (a hash, the same in every
/// process of one build), so every run of an experiment meets the same
/// outage.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Outage {
    /// Share of APIs down (0: none).
    pub(crate) share: f64,
}

impl Outage {
    /// Whether `function` is down in this outage.
    pub(crate) fn is_down(&self, function: &str) -> bool {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        function.hash(&mut h);
        (h.finish() % 10_000) as f64 / 10_000.0 < self.share
    }
}

/// One recorded response.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recording {
    pub arguments: Map<String, Value>,
    /// The recorded error (empty when the call succeeded).
    pub error: String,
    pub response: Value,
    /// The source cut the response (about 1,000 characters).
    pub truncated: bool,
}

/// How a recording was found.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "match", rename_all = "snake_case")]
pub enum Match {
    Exact,
    /// The most similar recorded arguments of the same API.
    Closest {
        score: f64,
    },
}

/// What loading found besides the recordings.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReplayReport {
    pub files: usize,
    pub recordings: usize,
    /// Files whose API the catalog does not know.
    pub unresolved: Vec<String>,
    /// Entries skipped: a key that is not a dict literal, a value without `response`.
    pub bad_entries: usize,
}

/// Recorded responses by API.
#[derive(Debug, Default)]
pub struct ReplayTable {
    by_api: HashMap<ApiId, Vec<Recording>>,
    pub report: ReplayReport,
}

#[derive(Deserialize)]
struct IndexLine {
    path: String,
    tool_name: String,
    api_name: String,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    error: String,
    response: Option<Value>,
    #[serde(default)]
    truncated: bool,
}

impl ReplayTable {
    /// Loads the table in `dir` for the APIs of `catalog`.
    pub fn load(dir: &Path, catalog: &Catalog) -> std::io::Result<ReplayTable> {
        let mut table = ReplayTable::default();
        for (path, api) in files(dir, catalog)? {
            table.report.files += 1;
            let Some(api) = api else {
                table.report.unresolved.push(path.strip_prefix(dir).unwrap_or(&path).display().to_string());
                continue;
            };
            let text = std::fs::read_to_string(&path)?;
            let Ok(entries) = serde_json::from_str::<Map<String, Value>>(&text) else {
                table.report.bad_entries += 1;
                continue;
            };
            for (key, value) in entries {
                let arguments = match pyliteral::parse(&key) {
                    Ok(Value::Object(map)) => map,
                    _ => {
                        table.report.bad_entries += 1;
                        continue;
                    }
                };
                match serde_json::from_value::<Entry>(value) {
                    Ok(Entry { error, response, truncated }) => {
                        table.by_api.entry(api).or_default().push(Recording {
                            arguments,
                            error,
                            response: response.unwrap_or(Value::Null),
                            truncated,
                        });
                        table.report.recordings += 1;
                    }
                    Err(_) => table.report.bad_entries += 1,
                }
            }
        }
        Ok(table)
    }

    /// The recordings of `api`.
    pub(crate) fn recordings(&self, api: ApiId) -> &[Recording] {
        self.by_api.get(&api).map_or(&[], Vec::as_slice)
    }

    /// Every recording, by API.
    pub fn iter(&self) -> impl Iterator<Item = (ApiId, &Recording)> {
        self.by_api.iter().flat_map(|(api, rs)| rs.iter().map(move |r| (*api, r)))
    }

    /// The recording for a call of `api` with `arguments`: exact, else closest.
    pub fn lookup(&self, api: ApiId, arguments: &Map<String, Value>) -> Option<(&Recording, Match)> {
        let recordings = self.by_api.get(&api)?;
        if let Some(r) = recordings.iter().find(|r| same(&r.arguments, arguments)) {
            return Some((r, Match::Exact));
        }
        recordings
            .iter()
            .map(|r| (closeness(&r.arguments, arguments), r))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(score, r)| (r, Match::Closest { score }))
    }
}

/// The table's files with the API each holds (`None`: unknown to the catalog).
fn files(dir: &Path, catalog: &Catalog) -> std::io::Result<Vec<(PathBuf, Option<ApiId>)>> {
    let index = dir.join("index.jsonl");
    if index.exists() {
        let text = std::fs::read_to_string(&index)?;
        return Ok(text
            .lines()
            .filter_map(|line| serde_json::from_str::<IndexLine>(line).ok())
            .map(|l| (dir.join(&l.path), catalog.resolve_pair(&l.tool_name, &l.api_name)))
            .collect());
    }
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(dir).min_depth(3).max_depth(3).sort_by_file_name() {
        let entry = entry.map_err(std::io::Error::other)?;
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        // <Category>/<tool>_for_<Category>/<api>.json → <api>_for_<tool>
        let api = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        let tool_dir = path.parent().and_then(|p| p.file_name()).and_then(|s| s.to_str()).unwrap_or_default();
        let category = path.parent().and_then(Path::parent).and_then(|p| p.file_name()).and_then(|s| s.to_str());
        let tool = category.and_then(|c| tool_dir.strip_suffix(&format!("_for_{c}"))).unwrap_or(tool_dir);
        let id = catalog.resolve(&format!("{api}_for_{tool}")).first();
        out.push((path.to_path_buf(), id));
    }
    Ok(out)
}

/// A value as text, so that `5`, `5.0` and `"5"` compare equal.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

fn same(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| text(v) == text(w)))
}

/// How close two argument sets are, in [0, 1]: over the union of their
/// keys, a key with equal values counts 1, a key both have with different
/// values counts half their text similarity (normalized Levenshtein, so
/// `"Berlin"` is close to `"berlin"` and far from `"Tokyo"`), a key only
/// one has counts 0; the sum is divided by the union's size. Two empty sets
/// are identical (1).
pub(crate) fn closeness(a: &Map<String, Value>, b: &Map<String, Value>) -> f64 {
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    if keys.is_empty() {
        return 1.0;
    }
    let sum: f64 = keys
        .iter()
        .map(|k| match (a.get(*k), b.get(*k)) {
            (Some(x), Some(y)) => {
                let (x, y) = (text(x), text(y));
                if x == y { 1.0 } else { 0.5 * strsim::normalized_levenshtein(&x.to_lowercase(), &y.to_lowercase()) }
            }
            _ => 0.0,
        })
        .sum();
    sum / keys.len() as f64
}

/// The recorded answer to a call, as [`super::Upstream::call`] gives a live one.
pub(super) fn call(
    table: &ReplayTable,
    api: &Api,
    arguments: &Map<String, Value>,
    mut trace: CallTrace,
    started: Instant,
) -> Result<Response, CallError> {
    let Some((recording, matched)) = table.lookup(api.id, arguments) else {
        return Err(error(
            ErrorClass::NoRecording,
            format!("no recorded response for `{}`: the replay table has none for this API", api.function_name),
            trace,
        ));
    };
    trace.replay = Some(matched);
    let outcome = if recording.error.is_empty() { "200 OK (replay)" } else { "502 recorded error (replay)" };
    trace.attempts.push(Attempt {
        started_ms: 0.0,
        elapsed_ms: ms(started.elapsed()),
        outcome: outcome.into(),
        retry_in_ms: None,
    });
    if !recording.error.is_empty() {
        let mut e = error(ErrorClass::ServerError, format!("the recorded call failed: {}", recording.error), trace);
        e.status = Some(502);
        return Err(e);
    }
    let body = replay_body(&recording.response);
    let bytes = body.to_string().len();
    Ok(Response { status: 200, body, bytes, trace })
}

/// A recorded response as the API would have sent it. ToolBench records
/// many responses as text: JSON, Python `repr()` output, or the whole
/// trajectory observation (`{"error": "", "response": "<body>"}`), often
/// cut at about 1,000 characters. Text that stands for an object or array
/// is that value ([`crate::json_text`]); an observation is its `response`.
pub fn replay_body(response: &Value) -> Value {
    let Value::String(text) = response else { return response.clone() };
    match value_of(text) {
        Some(Value::Object(map)) if is_observation(&map) => match &map["response"] {
            Value::String(inner) => value_of(inner).unwrap_or_else(|| map["response"].clone()),
            inner => inner.clone(),
        },
        Some(value) => value,
        None => response.clone(),
    }
}

/// The value a text stands for: any JSON (a bare string or number
/// included), else an object or array as [`crate::json_text`] reads it.
fn value_of(text: &str) -> Option<Value> {
    serde_json::from_str(text).ok().or_else(|| crate::json_text::parse(text).map(|(v, _)| v))
}

/// A trajectory's observation of a successful call: `{"error": "", "response": …}`.
fn is_observation(map: &Map<String, Value>) -> bool {
    map.len() == 2 && map.get("error").is_some_and(|e| e.as_str() == Some("")) && map.contains_key("response")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn closeness_on_hand_computed_examples() {
        let a = map(json!({"city": "Berlin", "days": 3}));
        assert_eq!(closeness(&a, &map(json!({"city": "Berlin", "days": "3"}))), 1.0);
        // One equal key of two: 1/2.
        assert_eq!(closeness(&a, &map(json!({"city": "Berlin"}))), 0.5);
        // "berlin" vs "Berlin" differ only in case: 0.5 · 1 for the city, 1 for days.
        assert_eq!(closeness(&a, &map(json!({"city": "berlin", "days": 3}))), 0.75);
        // Nothing shared.
        assert_eq!(closeness(&a, &map(json!({"q": "x"}))), 0.0);
        assert_eq!(closeness(&Map::new(), &Map::new()), 1.0);
    }

    #[test]
    fn exact_first_then_closest() {
        let catalog = Catalog::load(&crate::catalog::Sources::default()).unwrap();
        let api = catalog.resolve("latest_rates_for_frankfurter").first().unwrap();
        let rec = |base: &str, rate: f64| Recording {
            arguments: map(json!({"base": base})),
            error: String::new(),
            response: json!({"rate": rate}),
            truncated: false,
        };
        let mut table = ReplayTable::default();
        table.by_api.insert(api, vec![rec("USD", 1.0), rec("EUR", 2.0)]);
        let (r, m) = table.lookup(api, &map(json!({"base": "EUR"}))).unwrap();
        assert_eq!((r.response.clone(), m), (json!({"rate": 2.0}), Match::Exact));
        let (r, m) = table.lookup(api, &map(json!({"base": "EUR", "symbols": "GBP"}))).unwrap();
        assert_eq!(r.response, json!({"rate": 2.0}));
        assert_eq!(m, Match::Closest { score: 0.5 });
        let other = catalog.resolve("currencies_for_frankfurter").first().unwrap();
        assert!(table.lookup(other, &Map::new()).is_none());
    }
}
