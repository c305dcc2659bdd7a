//! Mapping the function names of trajectories to catalog APIs.
//!
//! Trajectories record names as the model wrote them. [`resolve_call`]
//! finds the API through the catalog's resolver (which knows ToolBench's
//! variant spellings) and, when it cannot, says why:
//!
//! * [`Cause::Malformed`]: not a name at all (empty, or prose the model wrote
//!   where the name belongs);
//! * [`Cause::Hallucinated`]: a name the model was not offered and no API has;
//! * [`Cause::ToolMissing`]: offered to the model, but its tool has no tool
//!   file in the catalog (delisted before the catalog was crawled);
//! * [`Cause::ApiMissing`]: offered, its tool is in the catalog, the API is
//!   not (renamed or removed).
//!
//! [`coverage`] applies this to every recorded call and counts the outcome.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::{Format, Trajectory};
use crate::catalog::{ApiId, Catalog, Resolution, ResolvedBy};

/// Why a recorded name maps to no API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Cause {
    Malformed,
    Hallucinated,
    ToolMissing,
    ApiMissing,
}

impl Cause {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Cause::Malformed => "not a function name (empty, or prose written where the name belongs)",
            Cause::Hallucinated => "hallucinated: never offered to the model, and no API has this name",
            Cause::ToolMissing => "offered to the model, but the tool has no tool file in the catalog (delisted)",
            Cause::ApiMissing => "offered to the model; the tool is in the catalog but this API is not",
        }
    }
}

/// How a recorded name found its API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) api: ApiId,
    pub(crate) by: ResolvedBy,
    /// Several APIs answer to the name; the first (the name's holder) was taken.
    pub(crate) ambiguous: bool,
}

/// Resolves one recorded name; `offered` is what the model was offered in that run.
pub(crate) fn resolve_call(catalog: &Catalog, name: &str, offered: &[String]) -> Result<Found, Cause> {
    match catalog.resolve(name) {
        Resolution::Unique(api, by) => return Ok(Found { api, by, ambiguous: false }),
        Resolution::Ambiguous(ids, by) => return Ok(Found { api: ids[0], by, ambiguous: true }),
        Resolution::NotFound => {}
    }
    let trimmed = name.trim();
    if trimmed.is_empty() || !trimmed.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '^' | '.')) {
        return Err(Cause::Malformed);
    }
    if !offered.iter().any(|o| o.trim().eq_ignore_ascii_case(trimmed)) {
        return Err(Cause::Hallucinated);
    }
    // `<api>_for_<tool>`: does any `_for_` split leave a tool the catalog has?
    let lower = trimmed.to_lowercase();
    let tool_known = lower.match_indices("_for_").any(|(i, _)| catalog.has_tool(&lower[i + "_for_".len()..]));
    Err(if tool_known { Cause::ApiMissing } else { Cause::ToolMissing })
}

/// A name and how many calls used it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct NameCount {
    pub(crate) name: String,
    pub(crate) calls: usize,
}

/// Unresolved calls of one cause.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Unresolved {
    pub(crate) calls: usize,
    /// Distinct names, most frequent first.
    pub(crate) names: Vec<NameCount>,
}

/// Calls and resolved calls of one format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Counts {
    pub(crate) calls: usize,
    pub(crate) resolved: usize,
}

/// How well the catalog covers the function names of a set of trajectories.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Coverage {
    pub(crate) trajectories: usize,
    /// Every recorded call (final paths and abandoned branches), `Finish` excluded.
    pub(crate) calls: usize,
    pub(crate) resolved_calls: usize,
    pub(crate) distinct_names: usize,
    pub(crate) resolved_names: usize,
    /// Resolved calls by the spelling that matched: `function_name`, `variant`,
    /// and how many of them were `ambiguous`.
    pub(crate) resolved_by: BTreeMap<String, usize>,
    pub(crate) unresolved: BTreeMap<Cause, Unresolved>,
    pub(crate) by_format: BTreeMap<Format, Counts>,
}

impl Coverage {
    /// Resolved calls / calls.
    pub(crate) fn call_rate(&self) -> f64 {
        ratio(self.resolved_calls, self.calls)
    }

    /// Resolved distinct names / distinct names.
    pub(crate) fn name_rate(&self) -> f64 {
        ratio(self.resolved_names, self.distinct_names)
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Resolves every recorded call of every trajectory.
pub(crate) fn coverage(catalog: &Catalog, trajectories: &[Trajectory]) -> Coverage {
    let mut cov = Coverage { trajectories: trajectories.len(), ..Coverage::default() };
    let mut names: HashMap<&str, Option<Cause>> = HashMap::new();
    let mut unresolved_names: BTreeMap<Cause, HashMap<&str, usize>> = BTreeMap::new();
    for t in trajectories {
        for call in t.calls.iter().chain(&t.abandoned) {
            cov.calls += 1;
            let counts = cov.by_format.entry(t.format).or_default();
            counts.calls += 1;
            match resolve_call(catalog, &call.name, &t.offered) {
                Ok(found) => {
                    cov.resolved_calls += 1;
                    counts.resolved += 1;
                    let by = match found.by {
                        ResolvedBy::FunctionName => "function_name",
                        ResolvedBy::Variant => "variant",
                    };
                    *cov.resolved_by.entry(by.to_string()).or_default() += 1;
                    if found.ambiguous {
                        *cov.resolved_by.entry("ambiguous".to_string()).or_default() += 1;
                    }
                    names.entry(&call.name).or_insert(None);
                }
                Err(cause) => {
                    cov.unresolved.entry(cause).or_default().calls += 1;
                    *unresolved_names.entry(cause).or_default().entry(&call.name).or_default() += 1;
                    names.insert(&call.name, Some(cause));
                }
            }
        }
    }
    cov.distinct_names = names.len();
    cov.resolved_names = names.values().filter(|c| c.is_none()).count();
    for (cause, counts) in unresolved_names {
        let mut list: Vec<NameCount> =
            counts.into_iter().map(|(name, calls)| NameCount { name: name.to_string(), calls }).collect();
        list.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.name.cmp(&b.name)));
        cov.unresolved.entry(cause).or_default().names = list;
    }
    cov
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Sources;

    #[test]
    fn causes_of_unresolved_names() {
        let catalog = Catalog::load(&Sources::default()).unwrap();
        let offered = vec![
            "latest_rates_for_frankfurter".to_string(),
            "crypto_rates_for_frankfurter".to_string(),
            "quotes_for_stock_api".to_string(),
        ];
        let found = resolve_call(&catalog, " Latest_Rates_For_Frankfurter", &offered).unwrap();
        assert_eq!(catalog.api(found.api).function_name, "latest_rates_for_frankfurter");
        assert_eq!(resolve_call(&catalog, "crypto_rates_for_frankfurter", &offered), Err(Cause::ApiMissing));
        assert_eq!(resolve_call(&catalog, "quotes_for_stock_api", &offered), Err(Cause::ToolMissing));
        assert_eq!(resolve_call(&catalog, "weather_for_mars", &offered), Err(Cause::Hallucinated));
        assert_eq!(resolve_call(&catalog, "", &offered), Err(Cause::Malformed));
        assert_eq!(resolve_call(&catalog, ": I will now call the API", &offered), Err(Cause::Malformed));
    }
}
