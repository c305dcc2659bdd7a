//! Plan quality on ToolBench query files (docs/architecture.md §12): the APIs a plan
//! uses against the queries' `relevant APIs`.
//!
//! Per query: precision (planned APIs that are relevant), recall (relevant
//! APIs planned; those missing from the catalog count as missed), F1, and
//! the recall of every API the planner offered as a candidate. Averaged over
//! queries. Variants: the planner (graph-guided DFS), the same without the
//! graph, a greedy planner, and retrieval alone (its top n).
//!
//! The graph and the long-term memory used for a query never come from runs
//! on that query's set ([`Split::Sets`], leave-one-set-out). [`Split::Queries`]
//! is a diagnostic: folds of queries within each set, so the graph has seen
//! the same tools on other queries.

use std::collections::HashSet;
use std::fmt::Write;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::queries::QueryRecord;
use super::retrieval::Latency;
use crate::catalog::Api;
use crate::catalog::{ApiId, Catalog};
use crate::graph::{self, Params};
use crate::planner::{Caller, DeterministicDecider, LongTermMemory, Planner, Settings, StepOutcome, memory};
use crate::retrieval::cache::EmbeddingCache;
use crate::retrieval::{Filters, RetrievalError, Retriever};
use crate::trajectory::Trajectory;
use crate::upstream::Outage;

/// Plans with a share of the catalog's APIs down (`eval plan --down`): a
/// call to one of them fails as a 503 would, every other call is planned
/// as in a dry run; every variant meets the same outage.
impl Caller for Outage {
    async fn call(&self, api: &Api, _arguments: &serde_json::Map<String, serde_json::Value>) -> StepOutcome {
        let (ok, status) = match self.is_down(&api.function_name) {
            true => (false, "503 Service Unavailable (down in this experiment)"),
            false => (true, "planned (dry run, not executed)"),
        };
        StepOutcome { ok, status: status.into(), response: None, elapsed_ms: 0.0 }
    }

    fn plans_only(&self) -> bool {
        true
    }
}

/// Folds of the query split.
pub(crate) const QUERY_FOLDS: usize = 5;
/// Remembered tasks embedded per batch.
const MEMORY_BATCH: usize = 64;

/// How queries are kept apart from the runs the graph learns from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Split {
    /// Leave one set out: the graph of a set is built from runs on the other sets.
    Sets,
    /// Folds of queries within each set (diagnostic: the same tools appear in other folds).
    Queries,
}

/// One thing evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Variant {
    /// The planner; `graph: false` runs it without the tool graph.
    Planner { graph: bool, greedy: bool, memory: bool, min_relevance: f32, min_steps: usize },
    /// Retrieval alone: its `n` best APIs are the plan.
    Retrieval { n: usize },
}

impl Variant {
    pub(crate) fn name(&self) -> String {
        match self {
            Variant::Planner { graph, greedy, memory, min_relevance, min_steps } => format!(
                "{}{}{} (relevance ≥ {min_relevance}, {min_steps}+ steps)",
                if *greedy { "greedy" } else { "DFS" },
                if *graph { " + graph" } else { ", no graph" },
                if *memory { " + memory" } else { "" }
            ),
            Variant::Retrieval { n } => format!("retrieval top {n}"),
        }
    }
}

/// Scores of one variant on one set (or overall).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Scores {
    pub(crate) set: String,
    pub(crate) queries: usize,
    pub(crate) precision: f64,
    pub(crate) recall: f64,
    pub(crate) f1: f64,
    pub(crate) candidate_recall: f64,
    pub(crate) mean_steps: f64,
    /// Share of queries whose every part (the whole task, when it has no
    /// parts) got a successful call: under an outage, whether the planner
    /// found a way around the APIs that were down.
    pub(crate) served: f64,
    /// Whole run: retrieval (embedding included, measured once per query) and planning.
    pub(crate) latency_ms: Latency,
}

/// A variant's scores.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct VariantReport {
    pub(crate) variant: Variant,
    pub(crate) name: String,
    pub(crate) sets: Vec<Scores>,
    pub(crate) overall: Scores,
}

/// A query set with the runs its graph and memory may learn from.
pub(crate) struct Fold<'a> {
    pub(crate) set: String,
    pub(crate) queries: Vec<&'a QueryRecord>,
    /// Trajectories of runs on other queries (see [`Split`]).
    pub(crate) trajectories: Vec<&'a Trajectory>,
}

/// Splits `sets` into folds whose trajectories exclude runs on their own queries.
pub(crate) fn folds<'a>(
    sets: &'a [(String, Vec<QueryRecord>)],
    trajectories: &'a [Trajectory],
    split: Split,
) -> Vec<Fold<'a>> {
    let mut out = Vec::new();
    for (name, queries) in sets {
        let groups: Vec<Vec<&QueryRecord>> = match split {
            Split::Sets => vec![queries.iter().collect()],
            Split::Queries => (0..QUERY_FOLDS)
                .map(|f| queries.iter().enumerate().filter(|(i, _)| i % QUERY_FOLDS == f).map(|(_, q)| q).collect())
                .collect(),
        };
        for group in groups {
            let held_out: HashSet<&str> = match split {
                Split::Sets => queries.iter().map(|q| q.id.as_str()).collect(),
                Split::Queries => group.iter().map(|q| q.id.as_str()).collect(),
            };
            let kept =
                trajectories.iter().filter(|t| t.query_id.as_deref().is_none_or(|id| !held_out.contains(id))).collect();
            out.push(Fold { set: name.clone(), queries: group, trajectories: kept });
        }
    }
    out
}

/// Runs every variant on every fold.
#[allow(clippy::too_many_arguments)] // what one evaluation is run with; each caller passes all
pub(crate) async fn evaluate(
    retriever: &Retriever,
    folds: &[Fold<'_>],
    variants: &[Variant],
    settings: Settings,
    params: Params,
    max_calls: usize,
    cache_dir: &Path,
    outage: Outage,
) -> Result<Vec<VariantReport>, RetrievalError> {
    let catalog = retriever.catalog().clone();
    let mut cache = embedding_cache(retriever, cache_dir)?;
    let mut per_variant: Vec<Vec<(String, Sample)>> = vec![Vec::new(); variants.len()];
    for fold in folds {
        let owned: Vec<Trajectory> = fold.trajectories.iter().map(|t| (*t).clone()).collect();
        let tool_graph = graph::build(&catalog, &owned, max_calls, params);
        let memory = memory_of(retriever, cache.as_mut(), &catalog, &owned, max_calls)?;
        for q in &fold.queries {
            let relevant: HashSet<ApiId> = q.relevant.iter().filter_map(|(t, a)| catalog.resolve_pair(t, a)).collect();
            let total = q.relevant.len();
            // Embedded once; every variant ranks the same prepared query.
            let prepared = retriever.prepare(&q.query, retriever.options())?;
            for (v, variant) in variants.iter().enumerate() {
                let started = Instant::now();
                let sample = match *variant {
                    Variant::Planner { graph, greedy, memory: use_memory, min_relevance, min_steps } => {
                        let mut s = settings;
                        s.greedy = greedy;
                        let planner =
                            Planner::new(retriever, graph.then_some(&tool_graph), use_memory.then_some(&memory), s);
                        let decider =
                            DeterministicDecider { min_relevance, min_steps, ..DeterministicDecider::default() };
                        let run = planner.run_prepared(&q.query, &prepared, started, &decider, &outage).await?;
                        // Failed steps are never kept on the path: these are the calls that succeeded.
                        let planned: Vec<ApiId> = run.steps.iter().map(|s| s.api).collect();
                        let considered: Vec<ApiId> =
                            run.considered.iter().filter_map(|f| catalog.resolve(f).first()).collect();
                        let ms = prepared.embed_ms + run.timings.retrieval_ms + run.timings.planning_ms;
                        let mut sample = Sample::new(&planned, &considered, &relevant, total, ms);
                        sample.served = f64::from(u8::from(planned.len() >= run.parts.len().max(1)));
                        sample
                    }
                    Variant::Retrieval { n } => {
                        let hits = retriever.rank(&prepared, n, &Filters::default(), retriever.options()).hits;
                        // Called as ranked: the ones down fail.
                        let planned: Vec<ApiId> = (hits.iter().map(|h| h.api))
                            .filter(|&a| !outage.is_down(&catalog.api(a).function_name))
                            .collect();
                        let ms = prepared.embed_ms + crate::units::ms(started.elapsed());
                        let mut sample = Sample::new(&planned, &planned, &relevant, total, ms);
                        let parts = crate::retrieval::intents::split(&q.query).len().max(1);
                        sample.served = f64::from(u8::from(planned.len() >= parts));
                        sample
                    }
                };
                per_variant[v].push((fold.set.clone(), sample));
            }
        }
    }
    let mut set_names: Vec<String> = Vec::new();
    for f in folds {
        if !set_names.contains(&f.set) {
            set_names.push(f.set.clone());
        }
    }
    Ok(variants
        .iter()
        .zip(per_variant)
        .map(|(variant, samples)| VariantReport {
            variant: *variant,
            name: variant.name(),
            sets: set_names
                .iter()
                .map(|name| average(name, samples.iter().filter(|(s, _)| s == name).map(|(_, x)| x)))
                .collect(),
            overall: average("overall", samples.iter().map(|(_, x)| x)),
        })
        .collect())
}

/// For each set, the long-term memory of the successful runs among
/// `trajectories` on the other sets' queries (leave one set out).
pub(crate) fn memories_left_out(
    retriever: &Retriever,
    sets: &[(String, Vec<QueryRecord>)],
    trajectories: &[Trajectory],
    max_calls: usize,
    cache_dir: &Path,
) -> Result<Vec<LongTermMemory>, RetrievalError> {
    let mut cache = embedding_cache(retriever, cache_dir)?;
    folds(sets, trajectories, Split::Sets)
        .iter()
        .map(|fold| {
            let owned: Vec<Trajectory> = fold.trajectories.iter().map(|t| (*t).clone()).collect();
            memory_of(retriever, cache.as_mut(), retriever.catalog(), &owned, max_calls)
        })
        .collect()
}

/// The embedding cache of `retriever`'s model in `cache_dir` (`None` without an embedder).
fn embedding_cache(retriever: &Retriever, cache_dir: &Path) -> Result<Option<EmbeddingCache>, RetrievalError> {
    let Some(e) = retriever.embedder() else { return Ok(None) };
    EmbeddingCache::open(cache_dir, e.id(), e.dims()).map(Some).map_err(|source| RetrievalError::Io {
        context: format!("opening the embedding cache in {}", cache_dir.display()),
        source,
    })
}

/// Long-term memory of the successful runs among `trajectories` (their
/// queries embedded through the cache), empty when retrieval has no embedder.
fn memory_of(
    retriever: &Retriever,
    cache: Option<&mut EmbeddingCache>,
    catalog: &Catalog,
    trajectories: &[Trajectory],
    max_calls: usize,
) -> Result<LongTermMemory, RetrievalError> {
    let (Some(embedder), Some(cache)) = (retriever.embedder(), cache) else { return Ok(LongTermMemory::default()) };
    let paths = memory::successful_paths(catalog, trajectories, max_calls);
    Ok(LongTermMemory::in_memory(memory::embed_paths(paths, embedder, cache, MEMORY_BATCH)?))
}

/// One query's scores.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    precision: f64,
    recall: f64,
    f1: f64,
    candidate_recall: f64,
    steps: usize,
    ms: f64,
    served: f64,
}

impl Sample {
    fn new(planned: &[ApiId], considered: &[ApiId], relevant: &HashSet<ApiId>, total: usize, ms: f64) -> Sample {
        let planned_set: HashSet<&ApiId> = planned.iter().collect();
        let hit = planned_set.iter().filter(|a| relevant.contains(a)).count() as f64;
        let precision = if planned_set.is_empty() { 0.0 } else { hit / planned_set.len() as f64 };
        let recall = if total == 0 { 0.0 } else { hit / total as f64 };
        let f1 = if precision + recall == 0.0 { 0.0 } else { 2.0 * precision * recall / (precision + recall) };
        let considered: HashSet<&ApiId> = considered.iter().collect();
        let candidate_recall = if total == 0 {
            0.0
        } else {
            considered.iter().filter(|a| relevant.contains(a)).count() as f64 / total as f64
        };
        Sample { precision, recall, f1, candidate_recall, steps: planned.len(), ms, served: 0.0 }
    }
}

fn average<'a>(set: &str, samples: impl Iterator<Item = &'a Sample>) -> Scores {
    let samples: Vec<&Sample> = samples.collect();
    let n = samples.len().max(1) as f64;
    let mean = |f: fn(&Sample) -> f64| samples.iter().map(|s| f(s)).sum::<f64>() / n;
    let mut ms: Vec<f64> = samples.iter().map(|s| s.ms).collect();
    Scores {
        set: set.to_string(),
        queries: samples.len(),
        precision: mean(|s| s.precision),
        recall: mean(|s| s.recall),
        f1: mean(|s| s.f1),
        candidate_recall: mean(|s| s.candidate_recall),
        mean_steps: mean(|s| s.steps as f64),
        served: mean(|s| s.served),
        latency_ms: Latency::of(&mut ms),
    }
}

/// The reports as one Markdown table: a row per variant and set.
pub(crate) fn markdown(reports: &[VariantReport]) -> String {
    let mut out = String::from(
        "| variant | set | queries | precision | recall | F1 | candidate recall | mean steps | every part served | p50 ms | p99 ms |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in reports {
        for s in r.sets.iter().chain(std::iter::once(&r.overall)) {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.2} | {:.3} | {:.1} | {:.1} |",
                r.name,
                s.set,
                s.queries,
                s.precision,
                s.recall,
                s.f1,
                s.candidate_recall,
                s.mean_steps,
                s.served,
                s.latency_ms.p50,
                s.latency_ms.p99
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Outage;

    #[test]
    fn an_outage_takes_down_its_share_of_apis_the_same_ones_each_time() {
        let names: Vec<String> = (0..20_000).map(|i| format!("api_{i}_for_tool")).collect();
        let down = |share: f64| names.iter().filter(|n| Outage { share }.is_down(n)).count();
        assert_eq!(down(0.0), 0);
        assert_eq!(down(1.0), names.len());
        let share = down(0.3) as f64 / names.len() as f64;
        assert!((0.28..0.32).contains(&share), "{share}");
        assert_eq!(down(0.3), down(0.3), "the same APIs each time");
    }
}
