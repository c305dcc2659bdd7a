//! What every format shares once its calls are read: judging a recorded
//! response as failed or not, reading `Finish` arguments, and choosing the
//! final path among the branches a run explored.
//!
//! Responses are the raw text the ToolBench servers returned, normally the
//! JSON envelope `{"error": "...", "response": ...}`; StepTool and the gpt-3.5
//! CoT runs cut it (about 1,000 and 100 characters), so the envelope is also
//! judged from its prefix. `Finish` calls carry `{"return_type":
//! "give_answer"|"give_up_and_restart", "final_answer": "..."}`, sometimes cut
//! or garbled, so the return type is also found with a regex.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{Call, Finish};

/// The name of the pseudo-function that ends a run.
pub(crate) const FINISH: &str = "Finish";

/// `{"error": "` or `{error:"` at the start of a (possibly cut) response.
static ERROR_PREFIX: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"^\{\s*"?error"?\s*:\s*""#).expect("valid regex"));

/// Failure indications in a response that has no error field.
static FAILURE_HINT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r#"(?i)\b(?:http(?:\s+error)?|status(?:[\s_]*code)?|error[\s_]*code)["']?\s*[:=]?\s*["']?"#,
        r"(?:403|404|408|429|5\d\d)\b",
        r"|\b(?:403\s+forbidden|404\s+not\s+found|408\s+request\s+time-?out|429\s+too\s+many\s+requests)",
        r"|\b5\d\d\s+(?:internal\s+server\s+error|bad\s+gateway|service\s+unavailable|gateway\s+time-?out)",
        r"|\btimed\s+out\b|\btimeout\b|\bunreachable\b|\bconnection\s+(?:refused|reset|aborted|error)",
        r"|\bmax\s+retries\s+exceeded|\btoo\s+many\s+requests\b|\bservice\s+unavailable\b|\bbad\s+gateway\b",
        r"|\binternal\s+server\s+error\b",
    ))
    .expect("valid regex")
});

static RETURN_TYPE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"["']return_type["']\s*:\s*["']([A-Za-z_]*)"#).expect("valid regex"));

/// Judges a recorded response: `Some(true)` when its `error` field is
/// non-empty (or, without an error field, when it reports an HTTP
/// 403/404/408/429/5xx, a timeout or an unreachable host), `Some(false)` when
/// the error field is empty, `None` when the text does not tell.
pub(crate) fn judge_failure(text: &str) -> Option<bool> {
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    match serde_json::from_str::<Value>(t) {
        Ok(Value::Object(m)) => {
            if let Some(e) = m.get("error") {
                return Some(match e {
                    Value::Null => false,
                    Value::Bool(b) => *b,
                    Value::String(s) => !s.trim().is_empty(),
                    Value::Array(a) => !a.is_empty(),
                    Value::Object(o) => !o.is_empty(),
                    Value::Number(_) => true,
                });
            }
        }
        Ok(_) => {}
        Err(_) => {
            if let Some(m) = ERROR_PREFIX.find(t) {
                let rest = &t[m.end()..];
                let mut chars = rest.chars();
                return match chars.next() {
                    None => None,
                    Some('"') => {
                        // `""` closes an empty error unless more text follows the quotes
                        // (`{error:""return_type" is not a valid choice"}`).
                        let after = chars.as_str().trim_start();
                        Some(!(after.is_empty() || after.starts_with(',') || after.starts_with('}')))
                    }
                    Some(_) => Some(true),
                };
            }
        }
    }
    if FAILURE_HINT.is_match(t) { Some(true) } else { None }
}

/// The `return_type` of a `Finish` call's arguments, from JSON or, when they
/// are cut or garbled, from the first `"return_type": "..."` in the text.
pub(crate) fn return_type(arguments: &str) -> Option<String> {
    if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(arguments.trim())
        && let Some(Value::String(s)) = m.get("return_type")
    {
        return Some(s.clone());
    }
    RETURN_TYPE.captures(arguments).map(|c| c[1].to_string())
}

/// How a `Finish` call with these arguments ends the run.
pub(crate) fn finish_kind(arguments: &str) -> Option<Finish> {
    match return_type(arguments)?.as_str() {
        "give_answer" => Some(Finish::GiveAnswer),
        "give_up_and_restart" | "give_up" => Some(Finish::GiveUp),
        _ => None,
    }
}

/// Whether a recorded function name is the `Finish` pseudo-function (exact match).
pub(crate) fn is_finish(name: &str) -> bool {
    name == FINISH
}

/// Calls of a run (in the order they were made) and the explored branches
/// (`paths`, each a root-to-leaf list of indices into `calls`, in exploration order).
#[derive(Debug, Default)]
pub(crate) struct CallTree {
    pub(crate) calls: Vec<Call>,
    pub(crate) paths: Vec<Vec<usize>>,
}

/// A run reduced to its final path.
#[derive(Debug, Default)]
pub(crate) struct Resolved {
    pub(crate) calls: Vec<Call>,
    pub(crate) abandoned: Vec<Call>,
    pub(crate) finish: Option<Finish>,
    pub(crate) finish_call: Option<Call>,
}

impl CallTree {
    /// A run without branches.
    pub(crate) fn linear(calls: Vec<Call>) -> Self {
        let paths = vec![(0..calls.len()).collect()];
        CallTree { calls, paths }
    }

    /// The final path is the first branch ending in `Finish` with
    /// `give_answer`, else the last explored branch. Its non-`Finish` calls are
    /// the run's calls; the non-`Finish` calls of every other branch are
    /// abandoned. The run's finish is read from the final path's last call when
    /// that is a `Finish` call (`None` when it is not, or its return type is not
    /// one of the two known ones).
    pub(crate) fn resolve(self) -> Resolved {
        let calls = &self.calls;
        let answered = |p: &&Vec<usize>| {
            p.last().is_some_and(|&i| {
                is_finish(&calls[i].name) && finish_kind(&calls[i].arguments) == Some(Finish::GiveAnswer)
            })
        };
        let chosen = self.paths.iter().find(answered).or(self.paths.last()).cloned().unwrap_or_default();
        let mut on_path = vec![false; calls.len()];
        for &i in &chosen {
            if let Some(slot) = on_path.get_mut(i) {
                *slot = true;
            }
        }
        let mut out = Resolved::default();
        if let Some(&last) = chosen.last()
            && let Some(c) = calls.get(last)
            && is_finish(&c.name)
        {
            out.finish = finish_kind(&c.arguments);
            out.finish_call = Some(c.clone());
        }
        out.calls = chosen.iter().filter_map(|&i| calls.get(i)).filter(|c| !is_finish(&c.name)).cloned().collect();
        out.abandoned =
            calls.iter().zip(&on_path).filter(|(c, on)| !**on && !is_finish(&c.name)).map(|(c, _)| c.clone()).collect();
        out
    }
}
