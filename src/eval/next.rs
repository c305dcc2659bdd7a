//! Catalog search for the next call of a multi-step run, as an MCP
//! session's `search_tools` meets it: the task's words, and the function
//! the session called last as the tool graph's cue
//! ([`crate::retrieval::Prepared::after`]).
//!
//! Every successful run on a held-out set's queries is a sequence of
//! calls; each call after the first (and unlike the one before it) is a
//! step: its task, the call before it, and the API it needs. The graph
//! learns from the runs on the other sets' queries only (leave one set
//! out, [`super::plan::folds`]; [`Split::Queries`], folds of queries
//! within a set, is the diagnostic of a graph that has seen the set's
//! tools). Variants, all in the same run: BM25
//! alone, the configured search (hybrid), each with the graph's cue, and
//! the graph alone (the followers of the last call, heaviest first).
//! Searched cold: no long-term memory, so that the cue is what differs.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use serde::Serialize;

use super::plan::{Split, folds};
use super::queries::QueryRecord;
use super::scores::reciprocal_rank;
use crate::catalog::ApiId;
use crate::config::SearchMode;
use crate::graph::{self, Params};
use crate::planner::memory::successful_paths;
use crate::retrieval::{Filters, Prepared, RetrievalError, Retriever};
use crate::trajectory::Trajectory;

/// Cut-offs the hit rate is given at.
pub(crate) const CUTOFFS: [usize; 3] = [1, 5, 10];
/// Depth of the ranking the reciprocal rank looks into.
const DEPTH: usize = 100;

/// How one variant ranks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Variant {
    /// `None`: the graph's followers alone.
    pub(crate) mode: Option<SearchMode>,
    /// Whether the last call is the graph's cue.
    pub(crate) cue: bool,
}

impl Variant {
    /// The variants every run reports.
    pub(crate) fn all(configured: SearchMode) -> Vec<Variant> {
        let mut modes = vec![SearchMode::Lexical];
        if configured != SearchMode::Lexical {
            modes.push(configured);
        }
        let mut all: Vec<Variant> =
            modes.into_iter().flat_map(|m| [false, true].map(|cue| Variant { mode: Some(m), cue })).collect();
        all.push(Variant { mode: None, cue: true });
        all
    }

    fn name(&self) -> String {
        match (self.mode, self.cue) {
            (None, _) => "graph alone (followers of the last call)".into(),
            (Some(SearchMode::Lexical), false) => "BM25".into(),
            (Some(SearchMode::Lexical), true) => "BM25 + graph cue".into(),
            (Some(m), false) => format!("search ({m:?})").to_lowercase(),
            (Some(m), true) => format!("search ({m:?}) + graph cue").to_lowercase(),
        }
    }
}

/// One variant's scores over all steps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Report {
    pub(crate) variant: Variant,
    pub(crate) name: String,
    pub(crate) steps: usize,
    /// The needed API in the top k, for each of [`CUTOFFS`].
    pub(crate) hit_at: Vec<(usize, f64)>,
    pub(crate) mrr: f64,
}

/// One step of a held-out run.
struct Step<'a> {
    task: &'a str,
    before: &'a str,
    next: ApiId,
}

/// Runs every variant over the steps of every held-out set's runs.
pub(crate) fn evaluate(
    retriever: &Retriever,
    sets: &[(String, Vec<QueryRecord>)],
    trajectories: &[Trajectory],
    split: Split,
    max_calls: usize,
    params: Params,
) -> Result<Vec<Report>, RetrievalError> {
    let catalog = retriever.catalog().clone();
    let variants = Variant::all(retriever.options().mode);
    let mut ranks: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut hits: Vec<Vec<[bool; CUTOFFS.len()]>> = vec![Vec::new(); variants.len()];
    let mut prepared_by_task: HashMap<String, Prepared> = HashMap::new();
    for fold in folds(sets, trajectories, split) {
        let learned: Vec<Trajectory> = fold.trajectories.iter().map(|t| (*t).clone()).collect();
        let graph = graph::build(&catalog, &learned, max_calls, params);
        let held_out: HashSet<&str> = fold.queries.iter().map(|q| q.id.as_str()).collect();
        let tested: Vec<Trajectory> = trajectories
            .iter()
            .filter(|t| t.query_id.as_deref().is_some_and(|id| held_out.contains(id)))
            .cloned()
            .collect();
        let mut paths = successful_paths(&catalog, &tested, max_calls);
        paths.sort();
        paths.dedup();
        let steps = paths.iter().flat_map(|(task, path)| {
            path.windows(2).filter(|w| w[0] != w[1]).filter_map(|w| {
                let next = catalog.resolve(&w[1]).first()?;
                Some(Step { task, before: &w[0], next })
            })
        });
        for step in steps {
            let prepared = match prepared_by_task.get(step.task) {
                Some(p) => p.clone(),
                None => {
                    let p = retriever.prepare(step.task, retriever.options())?;
                    prepared_by_task.entry(step.task.to_string()).or_insert(p).clone()
                }
            };
            let followers = graph.followers(step.before, &catalog);
            let relevant: HashSet<ApiId> = [step.next].into();
            for (v, variant) in variants.iter().enumerate() {
                let ranked: Vec<ApiId> = match variant.mode {
                    None => followers.iter().map(|(api, _)| *api).take(DEPTH).collect(),
                    Some(mode) => {
                        let mut options = retriever.options();
                        options.mode = mode;
                        let cued = Prepared {
                            after: if variant.cue { followers.clone() } else { Vec::new() },
                            ..prepared.clone()
                        };
                        retriever.rank(&cued, DEPTH, &Filters::default(), options).hits.iter().map(|h| h.api).collect()
                    }
                };
                ranks[v].push(reciprocal_rank(&ranked, &relevant));
                hits[v].push(CUTOFFS.map(|k| ranked.iter().take(k).any(|a| *a == step.next)));
            }
        }
    }
    Ok(variants
        .into_iter()
        .enumerate()
        .map(|(v, variant)| {
            let n = ranks[v].len();
            let mean = |x: f64| if n == 0 { 0.0 } else { x / n as f64 };
            Report {
                variant,
                name: variant.name(),
                steps: n,
                hit_at: CUTOFFS
                    .iter()
                    .enumerate()
                    .map(|(c, k)| (*k, mean(hits[v].iter().filter(|h| h[c]).count() as f64)))
                    .collect(),
                mrr: mean(ranks[v].iter().sum()),
            }
        })
        .collect())
}

/// The reports as a Markdown table.
pub(crate) fn markdown(reports: &[Report]) -> String {
    let mut out = String::from("| variant | steps |");
    for k in CUTOFFS {
        let _ = write!(out, " next in top {k} |");
    }
    out.push_str(" MRR |\n| --- | ---: |");
    out.push_str(&" ---: |".repeat(CUTOFFS.len() + 1));
    out.push('\n');
    for r in reports {
        let _ = write!(out, "| {} | {} |", r.name, r.steps);
        for (_, h) in &r.hit_at {
            let _ = write!(out, " {h:.3} |");
        }
        let _ = writeln!(out, " {:.3} |", r.mrr);
    }
    out
}
