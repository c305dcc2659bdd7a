//! Learning from use, measured (`eval plan --learning-curve`, `eval
//! retrieval --learning-curve`): how a deployed toolrouter meets its
//! traffic. The queries of the given sets go in one fixed order (shuffled
//! with a seed, so the sets mix); each is routed first (planned, or
//! retrieved), scored against its relevant APIs, and then its solution
//! path (the relevant APIs, in the query's order) is recorded as a
//! finished successful run: applied to the tool graph and added to the
//! long-term memory, as the engine records every successful run. Quality
//! is reported over successive windows of queries, against the same order
//! with learning off (and, for plans, retrieval's top 2 as the plan). What
//! is learned from a query never scores that query: it is recorded after.
//! The queries come from ToolBench query files ([`from_sets`]) or, as
//! traffic held out from tuning, from recorded successful runs
//! ([`from_runs`]).

use std::collections::HashSet;
use std::fmt::Write;
use std::time::Instant;

use serde::Serialize;

use super::queries::QueryRecord;
use crate::catalog::{ApiId, Catalog};
use crate::graph::{Params, RunCall, RunRecord, ToolGraph};
use crate::planner::memory::successful_paths;
use crate::planner::{DeterministicDecider, DryRun, LongTermMemory, Memory, Planner, Settings, remembered};
use crate::retrieval::{Filters, RetrievalError, Retriever};
use crate::trajectory::Trajectory;

/// What is scored per query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Task {
    /// Plan F1 (the graph-guided planner, deterministic decider, dry run).
    Plan,
    /// Recall@`k` of retrieval.
    Retrieval { k: usize },
}

/// One window's mean score, learning off and on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Window {
    /// Queries `from..to` of the order (from 0).
    pub(crate) from: usize,
    pub(crate) to: usize,
    pub(crate) off: f64,
    pub(crate) on: f64,
    /// Plans only: retrieval's top [`BASELINE_TOP`] taken as the plan.
    pub(crate) baseline: Option<f64>,
    /// Queries of the window that share a relevant API with an earlier query.
    pub(crate) seen_before: usize,
}

/// The whole curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Curve {
    pub(crate) task: Task,
    pub(crate) queries: usize,
    pub(crate) seed: u64,
    pub(crate) windows: Vec<Window>,
    pub(crate) overall_off: f64,
    pub(crate) overall_on: f64,
    pub(crate) overall_baseline: Option<f64>,
    /// The same, over the queries that share a relevant API with an earlier one.
    pub(crate) seen_off: f64,
    pub(crate) seen_on: f64,
    pub(crate) seen_baseline: Option<f64>,
}

/// The plan curve's baseline: the first this many of retrieval's ranking
/// (without memory) as the plan; the best top-k on the development sets.
pub(crate) const BASELINE_TOP: usize = 2;

/// A query of the curve with its relevant catalog APIs.
pub(crate) type Scored = (String, Vec<ApiId>);

/// The queries of ToolBench query files with their relevant catalog APIs
/// (queries without any are left out).
pub(crate) fn from_sets(catalog: &Catalog, sets: &[(String, Vec<QueryRecord>)]) -> Vec<Scored> {
    sets.iter()
        .flat_map(|(_, qs)| qs)
        .map(|q| (q.query.clone(), unique(q.relevant.iter().filter_map(|(t, a)| catalog.resolve_pair(t, a)))))
        .filter(|(_, r)| !r.is_empty())
        .collect()
}

/// Traffic held out from tuning: the tasks of successful recorded runs
/// that are not among `excluded` (the development queries), each once,
/// with the APIs of its first successful run (in file order) as relevant.
pub(crate) fn from_runs(
    catalog: &Catalog,
    trajectories: &[Trajectory],
    excluded: &HashSet<String>,
    max_calls: usize,
) -> Vec<Scored> {
    let mut seen: HashSet<String> = HashSet::new();
    successful_paths(catalog, trajectories, max_calls)
        .into_iter()
        .filter(|(task, _)| !excluded.contains(task.trim()) && seen.insert(task.trim().to_string()))
        .map(|(task, path)| {
            let relevant = unique(path.iter().filter_map(|f| catalog.resolve(f).first()));
            (task, relevant)
        })
        .collect()
}

/// `apis` in their first order, each once.
fn unique(apis: impl Iterator<Item = ApiId>) -> Vec<ApiId> {
    let mut out: Vec<ApiId> = Vec::new();
    for api in apis {
        if !out.contains(&api) {
            out.push(api);
        }
    }
    out
}

/// Runs the curve: every query scored with learning off, then on.
pub(crate) async fn curve(
    retriever: &Retriever,
    mut queries: Vec<Scored>,
    task: Task,
    settings: Settings,
    params: Params,
    window: usize,
    seed: u64,
) -> Result<Curve, RetrievalError> {
    fastrand::Rng::with_seed(seed).shuffle(&mut queries);
    let off = scores(retriever, &queries, task, settings, params, false).await?;
    let on = scores(retriever, &queries, task, settings, params, true).await?;
    let baseline = match task {
        Task::Plan => Some(top_k(retriever, &queries, BASELINE_TOP)?),
        Task::Retrieval { .. } => None,
    };
    let mut seen_apis: HashSet<ApiId> = HashSet::new();
    let seen: Vec<bool> = queries
        .iter()
        .map(|(_, relevant)| {
            let before = relevant.iter().any(|a| seen_apis.contains(a));
            seen_apis.extend(relevant.iter().copied());
            before
        })
        .collect();
    let mean = |xs: &[f64], keep: &dyn Fn(usize) -> bool| {
        let kept: Vec<f64> = xs.iter().enumerate().filter(|(i, _)| keep(*i)).map(|(_, x)| *x).collect();
        if kept.is_empty() { 0.0 } else { kept.iter().sum::<f64>() / kept.len() as f64 }
    };
    let windows = (0..queries.len())
        .step_by(window.max(1))
        .map(|from| {
            let to = (from + window.max(1)).min(queries.len());
            Window {
                from,
                to,
                off: mean(&off, &|i| (from..to).contains(&i)),
                on: mean(&on, &|i| (from..to).contains(&i)),
                baseline: baseline.as_ref().map(|b| mean(b, &|i| (from..to).contains(&i))),
                seen_before: (from..to).filter(|&i| seen[i]).count(),
            }
        })
        .collect();
    Ok(Curve {
        task,
        queries: queries.len(),
        seed,
        windows,
        overall_off: mean(&off, &|_| true),
        overall_on: mean(&on, &|_| true),
        seen_off: mean(&off, &|i| seen[i]),
        seen_on: mean(&on, &|i| seen[i]),
        overall_baseline: baseline.as_ref().map(|b| mean(b, &|_| true)),
        seen_baseline: baseline.as_ref().map(|b| mean(b, &|i| seen[i])),
    })
}

/// Each query's F1 with retrieval's top `k` taken as the plan.
fn top_k(retriever: &Retriever, queries: &[Scored], k: usize) -> Result<Vec<f64>, RetrievalError> {
    queries
        .iter()
        .map(|(query, relevant)| {
            let prepared = retriever.prepare(query, retriever.options())?;
            let hits = retriever.rank(&prepared, k, &Filters::default(), retriever.options()).hits;
            let planned: HashSet<ApiId> = hits.iter().map(|h| h.api).collect();
            Ok(f1(&planned, &relevant.iter().copied().collect()))
        })
        .collect()
}

/// Each query's score in order; with `learning`, each query's solution is
/// recorded (graph and memory) after it is scored.
async fn scores(
    retriever: &Retriever,
    queries: &[Scored],
    task: Task,
    settings: Settings,
    params: Params,
    learning: bool,
) -> Result<Vec<f64>, RetrievalError> {
    let catalog = retriever.catalog();
    let mut graph = ToolGraph::new(params);
    let mut memory = LongTermMemory::default();
    let mut out = Vec::with_capacity(queries.len());
    for (i, (query, relevant)) in queries.iter().enumerate() {
        let started = Instant::now();
        let mut prepared = retriever.prepare(query, retriever.options())?;
        let relevant_set: HashSet<ApiId> = relevant.iter().copied().collect();
        let score = match task {
            Task::Plan => {
                let planner = Planner::new(retriever, Some(&graph), Some(&memory), settings);
                let run =
                    planner.run_prepared(query, &prepared, started, &DeterministicDecider::default(), &DryRun).await?;
                let planned: HashSet<ApiId> = run.steps.iter().map(|s| s.api).collect();
                f1(&planned, &relevant_set)
            }
            Task::Retrieval { k } => {
                if let Some(v) = prepared.vectors.first() {
                    prepared.remembered = remembered(&memory.examples(v, settings.hints), catalog);
                }
                let hits = retriever.rank(&prepared, k, &Filters::default(), retriever.options()).hits;
                hits.iter().filter(|h| relevant_set.contains(&h.api)).count() as f64 / relevant.len() as f64
            }
        };
        out.push(score);
        if learning {
            let path: Vec<String> = relevant.iter().map(|&a| catalog.api(a).function_name.clone()).collect();
            let calls = path.iter().map(|f| RunCall { function: f.clone(), ok: true }).collect();
            let run = RunRecord {
                id: format!("learning-{i}"),
                task: query.clone(),
                calls,
                success: true,
                standalone: false,
                at_unix_ms: 0,
            };
            graph.apply(&run, Some(catalog));
            if let Some(vector) = prepared.vectors.first() {
                let model = retriever.embedder().map(|e| e.id().to_string()).unwrap_or_default();
                memory.push(Memory {
                    task: query.clone(),
                    path,
                    vector: vector.clone(),
                    online: true,
                    model,
                    ..Memory::default()
                });
            }
        }
    }
    Ok(out)
}

fn f1(planned: &HashSet<ApiId>, relevant: &HashSet<ApiId>) -> f64 {
    let hit = planned.intersection(relevant).count() as f64;
    if hit == 0.0 {
        return 0.0;
    }
    let (p, r) = (hit / planned.len() as f64, hit / relevant.len() as f64);
    2.0 * p * r / (p + r)
}

/// The curve as a Markdown table.
pub(crate) fn markdown(curve: &Curve) -> String {
    let what = match curve.task {
        Task::Plan => "plan F1".to_string(),
        Task::Retrieval { k } => format!("Recall@{k}"),
    };
    let (head, rule) = match curve.overall_baseline {
        Some(_) => (format!(" retrieval top {BASELINE_TOP} |"), " ---: |"),
        None => (String::new(), ""),
    };
    let cell = |b: Option<f64>| b.map_or(String::new(), |b| format!(" {b:.3} |"));
    let mut out = format!(
        "{} queries in a fixed order (seed {}); {what}, learning off / on\n\n| queries | seen before | off | on |{head}\n| --- | ---: | ---: | ---: |{rule}\n",
        curve.queries, curve.seed
    );
    for w in &curve.windows {
        let (from, to, seen, off, on) = (w.from + 1, w.to, w.seen_before, w.off, w.on);
        let _ = writeln!(out, "| {from}–{to} | {seen} | {off:.3} | {on:.3} |{}", cell(w.baseline));
    }
    let (off, on) = (curve.overall_off, curve.overall_on);
    let _ = writeln!(out, "| all | | {off:.3} | {on:.3} |{}", cell(curve.overall_baseline));
    let (off, on) = (curve.seen_off, curve.seen_on);
    let _ = writeln!(
        out,
        "| those sharing an API with an earlier query | | {off:.3} | {on:.3} |{}",
        cell(curve.seen_baseline)
    );
    out
}
