//! Building the static tool graph from trajectories (docs/architecture.md §4;
//! thesis 3.3.2 and 3.4.1).
//!
//! Cleaning: keep successful trajectories only (a success label, or with
//! none a `give_answer` finish); drop those whose final path has more than
//! [`DEFAULT_MAX_CALLS`] calls; map every function name to a catalog API
//! (what cannot be mapped is counted by cause and left out); drop failed
//! calls; of repeated calls of one API keep the last. The result is a path
//! `[D1 … Dn, Finish]` whose consecutive pairs are counted as transitions.
//! Availability counts every recorded call with a known outcome, failed
//! ones and those of abandoned branches and unsuccessful runs included.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{Edge, NodeKey, Params, ToolGraph};
use crate::catalog::Catalog;
use crate::trajectory::resolve::{Cause, resolve_call};
use crate::trajectory::{Finish, Trajectory};

/// What a static build read, kept and left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BuildReport {
    pub(crate) trajectories: usize,
    /// Trajectories that succeeded (label, or `give_answer` without one).
    pub(crate) successful: usize,
    /// Successful ones left out for having more than the maximum of calls.
    pub(crate) too_long: usize,
    /// Successful ones with no resolvable successful call left after cleaning.
    pub(crate) empty_after_cleaning: usize,
    /// Paths counted.
    pub(crate) paths: usize,
    /// Every recorded call (final paths and abandoned branches).
    pub(crate) calls: usize,
    pub(crate) resolved_calls: usize,
    /// Unresolved calls by cause (`malformed`, `hallucinated`, `tool_missing`, `api_missing`).
    pub(crate) unmapped: BTreeMap<String, usize>,
    /// Transitions counted (Finish included).
    pub(crate) transitions: usize,
    pub(crate) nodes: usize,
    pub(crate) edges: usize,
    pub(crate) elapsed_ms: u64,
}

/// Whether a trajectory counts as successful.
pub(crate) fn successful(t: &Trajectory) -> bool {
    t.solved.unwrap_or(t.finish == Some(Finish::GiveAnswer))
}

/// The cleaned path of a run: failed calls dropped, of repeated calls of
/// one API the last kept, in order. `calls` yields (name, succeeded).
pub(crate) fn clean_path<'a>(calls: impl Iterator<Item = (&'a str, bool)>) -> Vec<&'a str> {
    let ok: Vec<&str> = calls.filter(|(_, ok)| *ok).map(|(name, _)| name).collect();
    let mut last: HashMap<&str, usize> = HashMap::new();
    for (i, name) in ok.iter().enumerate() {
        last.insert(name, i);
    }
    ok.iter().enumerate().filter(|(i, name)| last[*name] == *i).map(|(_, name)| *name).collect()
}

/// Builds the static graph of `trajectories`, resolving names in `catalog`.
pub(crate) fn build(catalog: &Catalog, trajectories: &[Trajectory], max_calls: usize, params: Params) -> ToolGraph {
    let started = Instant::now();
    let mut graph = ToolGraph::new(params);
    let mut report = BuildReport { trajectories: trajectories.len(), ..BuildReport::default() };
    let mut counts: HashMap<(NodeKey, NodeKey), u64> = HashMap::new();
    for t in trajectories {
        // Resolve every recorded call once; availability counts all of them.
        let mut resolved: Vec<Option<String>> = Vec::with_capacity(t.calls.len());
        for (i, call) in t.calls.iter().chain(&t.abandoned).enumerate() {
            report.calls += 1;
            let name = match resolve_call(catalog, &call.name, &t.offered) {
                Ok(found) => {
                    report.resolved_calls += 1;
                    let name = catalog.api(found.api).function_name.clone();
                    if let Some(failed) = call.failed {
                        let node = graph.api_node(&name, Some(catalog));
                        graph.graph[node].static_calls += 1;
                        graph.graph[node].static_successes += u64::from(!failed);
                    }
                    Some(name)
                }
                Err(cause) => {
                    *report.unmapped.entry(cause_name(cause).to_string()).or_default() += 1;
                    None
                }
            };
            if i < t.calls.len() {
                resolved.push(name);
            }
        }
        if !successful(t) {
            continue;
        }
        report.successful += 1;
        if t.calls.len() > max_calls {
            report.too_long += 1;
            continue;
        }
        let path = clean_path(
            t.calls.iter().zip(&resolved).filter_map(|(c, name)| Some((name.as_deref()?, c.failed != Some(true)))),
        );
        if path.is_empty() {
            report.empty_after_cleaning += 1;
            continue;
        }
        report.paths += 1;
        let keys: Vec<NodeKey> =
            path.iter().map(|n| NodeKey::Api(n.to_string())).chain(std::iter::once(NodeKey::Finish)).collect();
        for pair in keys.windows(2) {
            *counts.entry((pair[0].clone(), pair[1].clone())).or_default() += 1;
            report.transitions += 1;
        }
    }
    let mut totals: HashMap<&NodeKey, u64> = HashMap::new();
    for ((from, _), n) in &counts {
        *totals.entry(from).or_default() += n;
    }
    let mut sorted: Vec<_> = counts.iter().collect();
    sorted.sort_by(|a, b| (a.0.0.name(), a.0.1.name()).cmp(&(b.0.0.name(), b.0.1.name())));
    for ((from, to), &count) in sorted {
        let f = match from {
            NodeKey::Api(name) => graph.api_node(name, Some(catalog)),
            NodeKey::Finish => graph.index[&NodeKey::Finish],
        };
        let t = match to {
            NodeKey::Api(name) => graph.api_node(name, Some(catalog)),
            NodeKey::Finish => graph.index[&NodeKey::Finish],
        };
        graph.graph.add_edge(f, t, Edge { count, w0: count as f64 / totals[from] as f64, online: 0 });
    }
    report.nodes = graph.node_count();
    report.edges = graph.edge_count();
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    graph.meta.build = Some(report);
    graph
}

fn cause_name(cause: Cause) -> &'static str {
    match cause {
        Cause::Malformed => "malformed",
        Cause::Hallucinated => "hallucinated",
        Cause::ToolMissing => "tool_missing",
        Cause::ApiMissing => "api_missing",
    }
}
