//! The graph-guided depth-first planner (docs/architecture.md §5, thesis 4.3.2).
//!
//! ```text
//! roots = retrieval top-N for the task, minus APIs with α < α_min
//! stack = [start]; path = []
//! loop within budget (steps, backtracks, restarts, deadline):
//!     cands = top-K successors of the top of the stack by w (not used or failed),
//!             padded from the retrieval rankings of the task's unserved parts
//!     move  = decider(task, path, cands, short-term memory, long-term hints)
//!     Next(api): fill and validate arguments, execute; on success push it,
//!                on failure mark it failed and choose again
//!     Backtrack: pop (popping the start: infeasible with these roots)
//!     Finish:    reflect → success: done; partial: cut back to the first
//!                bad step; failure: drop the roots that led nowhere, restart
//! ```
//!
//! The task's parts are its intents (see `retrieval::intents`): a step
//! serves the parts it is similar enough to, the best API of every unserved
//! part is always a candidate, and the deterministic decider prefers
//! candidates for unserved parts. Every run yields a trace of its moves,
//! the candidates shown, reasons and timings.

pub mod arguments;
pub(crate) mod caller;
pub(crate) mod decider;
pub mod defaults;
pub(crate) mod explicit;
pub(crate) mod memory;
mod search;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde::Serialize;

pub use caller::{Caller, DryRun, StepOutcome};
pub use decider::{Candidate, Decider, DeterministicDecider, Move, Reflection, Source, View};
pub use memory::{LongTermMemory, Memory, MemoryWriter};

use crate::args::{self, Problem};
use crate::catalog::{ApiId, Catalog};
use crate::config::Config;
use crate::graph::{NodeKey, ToolGraph};
use crate::retrieval::{Filters, Prepared, RetrievalError, Retriever, SearchOptions};

/// Depth of the retrieval ranking candidates are padded from.
const RANKING_DEPTH: usize = 50;
/// Best APIs of each unserved part always offered as candidates.
const PER_PART: usize = 1;
/// Candidates listed per decision in the trace.
const TRACE_CANDIDATES: usize = 8;

/// Limits of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Budget {
    /// Steps taken (successful or not).
    pub(crate) max_steps: usize,
    pub(crate) max_backtracks: usize,
    pub(crate) max_restarts: usize,
    pub(crate) deadline: Duration,
}

/// How the planner searches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Settings {
    pub(crate) budget: Budget,
    /// Roots taken from the retrieval ranking.
    pub(crate) roots: usize,
    /// Successors (and padding) offered per decision.
    pub(crate) neighbors: usize,
    /// APIs whose calls seen succeeded at a lower rate are not offered…
    pub(crate) alpha_min: f64,
    /// …until this long after their last failed call in a run.
    pub(crate) retry_failed_after: Duration,
    /// A failed call's weight against its API for similar tasks halves this often.
    pub(crate) failure_half_life: Duration,
    /// Remembered tasks consulted for hints.
    pub(crate) hints: usize,
    /// Commit to every choice: no retry after a failure, no backtracking, no restart.
    pub(crate) greedy: bool,
    /// Times the decider is asked to fix arguments that break the schema
    /// (only with a real caller; a deterministic decider cannot).
    pub(crate) repair_attempts: usize,
    /// How arguments are validated (`[args]`: strict mode, coercions).
    pub(crate) args: args::Options,
}

/// The one constructor every planner user goes through (the server's
/// plan and execute modes, MCP, `toolrouter plan`, `eval plan`): `[planner]`
/// with `[args]`, so the command line plans what the server plans.
impl From<&Config> for Settings {
    fn from(config: &Config) -> Self {
        let c = &config.planner;
        Settings {
            budget: Budget {
                max_steps: c.max_steps,
                max_backtracks: c.max_backtracks,
                max_restarts: c.max_restarts,
                deadline: Duration::from_millis(c.deadline_ms),
            },
            roots: c.roots,
            neighbors: c.neighbors,
            alpha_min: c.alpha_min,
            retry_failed_after: Duration::from_secs(c.retry_failed_after_s),
            failure_half_life: Duration::from_secs(c.failure_half_life_s),
            hints: c.hints,
            greedy: c.greedy,
            repair_attempts: 0,
            args: args::Options::from(&config.args),
        }
    }
}

/// A planned (or executed) step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub api: ApiId,
    pub function: String,
    pub reason: String,
    /// Transition weight that led here (0 for the first step).
    pub w: f64,
    pub alpha: f64,
    /// Relevance to the task (retrieval score over the best one).
    pub relevance: f32,
    pub arguments: serde_json::Map<String, serde_json::Value>,
    /// Required parameters filled from earlier outputs (Reverse Chain).
    pub completed: Vec<String>,
    /// Required parameters given their documented default (a placeholder
    /// such as "US" or 2022): the request says nothing of them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub defaulted: Vec<String>,
    /// Times the decider repaired the arguments.
    pub repairs: usize,
    /// Required parameters nothing supplies.
    pub missing: Vec<String>,
    /// What validation found wrong with the arguments (missing ones included).
    pub problems: Vec<Problem>,
    pub outcome: StepOutcome,
    /// The other candidates and their scores, best first.
    pub alternatives: Vec<(String, f64)>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "ending", rename_all = "snake_case")]
pub enum Ending {
    Finished {
        reason: String,
    },
    /// No path was found with the roots available.
    Infeasible {
        reason: String,
    },
    /// A budget ran out (`steps`, `backtracks`, `restarts`, `deadline`).
    OutOfBudget {
        limit: String,
    },
    /// A chosen API needs values that neither the request nor an earlier
    /// output gives: the user must be asked (only with a real caller).
    NeedsInput {
        function: String,
        missing: Vec<String>,
    },
}

/// One decision in the trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceEvent {
    pub(crate) at_ms: f64,
    /// The node decided from (`None`: the start).
    pub(crate) from: Option<String>,
    pub(crate) candidates: Vec<ShownCandidate>,
    #[serde(flatten)]
    pub(crate) decision: Move,
    /// The API a `next` move chose, by function name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) function: Option<String>,
    /// What happened next (step outcome, reflection, budget).
    pub(crate) note: Option<String>,
}

/// A candidate as the trace shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ShownCandidate {
    pub(crate) function: String,
    pub(crate) score: f64,
    pub(crate) w: f64,
    pub(crate) alpha: f64,
    pub(crate) relevance: f32,
    pub(crate) source: Source,
}

/// Time spent, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Timings {
    /// Embedding and ranking the task.
    pub(crate) retrieval_ms: f64,
    /// The search itself.
    pub(crate) planning_ms: f64,
}

/// The result of a planner run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanRun {
    pub task: String,
    /// The task's parts (empty: searched as one).
    pub parts: Vec<String>,
    pub steps: Vec<Step>,
    pub ending: Ending,
    /// Every API offered as a candidate during the run, in first-offered order.
    pub considered: Vec<String>,
    pub backtracks: usize,
    pub restarts: usize,
    /// Short-term memory: every move and its reason, in words.
    pub memory: Vec<String>,
    pub trace: Vec<TraceEvent>,
    pub timings: Timings,
}

/// Plans tasks over a catalog's index, graph and memory.
pub(crate) struct Planner<'a> {
    retriever: &'a Retriever,
    graph: Option<&'a ToolGraph>,
    memory: Option<&'a LongTermMemory>,
    settings: Settings,
    search: SearchOptions,
    /// Outputs of calls made before this run (earlier sub-tasks), for completion.
    outputs: Vec<serde_json::Value>,
    /// The APIs the caller's policy allows (`None`: all): no other is ranked or offered.
    allowed: Option<std::sync::Arc<Vec<bool>>>,
}

impl<'a> Planner<'a> {
    pub(crate) fn new(
        retriever: &'a Retriever,
        graph: Option<&'a ToolGraph>,
        memory: Option<&'a LongTermMemory>,
        settings: Settings,
    ) -> Planner<'a> {
        Planner { retriever, graph, memory, settings, search: retriever.options(), outputs: Vec::new(), allowed: None }
    }

    /// Plans with the APIs `allowed` (by id) alone: a caller's policy.
    pub(crate) fn with_allowed(mut self, allowed: Option<std::sync::Arc<Vec<bool>>>) -> Planner<'a> {
        self.allowed = allowed;
        self
    }

    /// The search's filters: the caller's policy.
    fn filters(&self) -> Filters {
        Filters { allowed: self.allowed.clone(), ..Filters::default() }
    }

    /// Lets steps complete their arguments from `outputs` (calls made before this run).
    pub(crate) fn with_outputs(mut self, outputs: Vec<serde_json::Value>) -> Planner<'a> {
        self.outputs = outputs;
        self
    }

    fn catalog(&self) -> &Catalog {
        self.retriever.catalog()
    }

    /// The candidates from `node`: its heaviest successors, the task's
    /// ranking up to the limit, and the best APIs of each unserved part.
    fn candidates(
        &self,
        node: Option<ApiId>,
        ctx: &Context,
        unserved: &[usize],
        excluded: &dyn Fn(&ApiId) -> bool,
    ) -> Vec<Candidate> {
        let catalog = self.catalog();
        let now_ms = crate::metrics::unix_ms();
        let mut out: Vec<Candidate> = Vec::new();
        let mut seen: HashSet<ApiId> = HashSet::new();
        let limit = if node.is_none() { self.settings.roots } else { self.settings.neighbors };
        let mut offer = |api: ApiId, w: f64, source: Source, out: &mut Vec<Candidate>| {
            if excluded(&api) || !seen.insert(api) {
                return;
            }
            if self.allowed.as_ref().is_some_and(|m| !m.get(api.0 as usize).copied().unwrap_or(false)) {
                return;
            }
            // Only calls seen to fail exclude an API, never the catalog's
            // prior (RapidAPI's old success rates): as a filter it cost 0.06
            // plan F1 on the development sets, and blended into α it pushed
            // an API under α_min after its first successful call
            // (docs/benchmarks.md#planning).
            if self.failing(api, now_ms) {
                return;
            }
            let alpha = self.alpha(api);
            // Ranks lower for as long as similar tasks saw it fail lately.
            let failed_lately = ctx.failures.get(&api).copied().unwrap_or(0.0);
            let kept = 1.0 - failed_lately;
            out.push(Candidate {
                api,
                function: catalog.api(api).function_name.clone(),
                w,
                alpha,
                relevance: kept * ctx.relevance.get(&api).copied().unwrap_or(0.0),
                rank: ctx.places.get(&api).copied(),
                similarity: ctx.ranks.iter().map(|r| r.get(&api).map_or(0.0, |&rank| 1.0 / rank as f32)).collect(),
                hint: kept * ctx.hints.get(&api).copied().unwrap_or(0.0),
                failed_lately,
                source,
            });
        };
        if let (Some(graph), Some(node)) = (self.graph, node) {
            for s in graph.successors(&self.key(node)).into_iter().take(self.settings.neighbors) {
                if let NodeKey::Api(name) = &s.key
                    && let Some(api) = catalog.resolve(name).first()
                {
                    offer(api, s.w, Source::Graph, &mut out);
                }
            }
        }
        for &api in ctx.ranking {
            if out.len() >= limit {
                break;
            }
            offer(api, 0.0, Source::Retrieval, &mut out);
        }
        for &t in unserved {
            for &api in ctx.rankings[t].iter().take(PER_PART) {
                offer(api, 0.0, Source::Retrieval, &mut out);
            }
        }
        for (&api, _) in ctx.hints.iter() {
            offer(api, 0.0, Source::Retrieval, &mut out);
        }
        // Candidates reached through the graph keep their weight even when also retrieved.
        if let (Some(graph), Some(node)) = (self.graph, node) {
            let from = self.key(node);
            for c in out.iter_mut().filter(|c| c.source == Source::Retrieval) {
                c.w = graph.weight(&from, &NodeKey::Api(c.function.clone()));
            }
        }
        out
    }

    fn key(&self, api: ApiId) -> NodeKey {
        NodeKey::Api(self.catalog().api(api).function_name.clone())
    }

    /// α from the graph, else the tool's prior.
    fn alpha(&self, api: ApiId) -> f64 {
        self.observed_alpha(api).unwrap_or_else(|| self.catalog().tool_of(self.catalog().api(api)).availability_prior())
    }

    /// α as the graph learned it from runs, if it has.
    fn observed_alpha(&self, api: ApiId) -> Option<f64> {
        self.graph.and_then(|g| g.alpha(&self.key(api)))
    }

    /// Whether `api` is left out at `now_ms`: the calls the graph has seen
    /// succeeded under `alpha_min`, and either none was in a run (the
    /// trajectories' verdict stands) or the last failed call was less than
    /// `retry_failed_after` ago (an API that was down is tried again later).
    fn failing(&self, api: ApiId, now_ms: u64) -> bool {
        let Some(graph) = self.graph else { return false };
        let key = self.key(api);
        let (Some(rate), Some(node)) = (graph.call_success_rate(&key), graph.node(&key)) else { return false };
        let retry_after = self.settings.retry_failed_after.as_millis() as u64;
        rate < self.settings.alpha_min
            && (node.online_calls == 0 || now_ms.saturating_sub(node.last_failure_ms) < retry_after)
    }

    /// The remembered tasks most similar to this one (`settings.hints` of them).
    fn examples(&self, vector: Option<&Vec<f32>>) -> Vec<Example> {
        let (Some(memory), Some(vector)) = (self.memory, vector) else { return Vec::new() };
        memory.examples(vector, self.settings.hints)
    }

    /// How much tasks similar to this one saw each API fail lately
    /// ([`LongTermMemory::failures`], from [`MIN_REMEMBERED_SIMILARITY`]).
    fn failures(&self, vector: Option<&Vec<f32>>) -> HashMap<ApiId, f32> {
        let (Some(memory), Some(vector)) = (self.memory, vector) else { return HashMap::new() };
        if self.settings.failure_half_life.is_zero() {
            return HashMap::new();
        }
        let now = crate::metrics::unix_ms();
        let by_function = memory.failures(vector, MIN_REMEMBERED_SIMILARITY, now, self.settings.failure_half_life);
        let catalog = self.catalog();
        by_function.into_iter().filter_map(|(f, w)| Some((catalog.resolve(&f).first()?, w))).collect()
    }
}

/// A remembered successful run similar to the task: a worked example.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Example {
    pub(crate) task: String,
    /// Function names, in order.
    pub(crate) path: Vec<String>,
    /// Cosine similarity of its task to this one.
    pub(crate) similarity: f32,
}

/// Remembered tasks at least this similar to a request (cosine) rank the
/// APIs of their paths as one more retrieval list. Chosen on the learning
/// curve of the development sets (0.4–0.5 best, 0.55 and 0.6 lower); on
/// held-out traffic Recall@10 of repeat requests gains 0.049 at 0.5 and
/// 0.030 at 0.6 (docs/benchmarks.md, "Learning from use").
pub(crate) const MIN_REMEMBERED_SIMILARITY: f32 = 0.5;

/// The APIs of the paths of the examples similar enough, best first,
/// each with the similarity of the closest task that used it.
pub(crate) fn remembered(examples: &[Example], catalog: &crate::catalog::Catalog) -> Vec<(ApiId, f32)> {
    let close: Vec<Example> = examples.iter().filter(|e| e.similarity >= MIN_REMEMBERED_SIMILARITY).cloned().collect();
    let mut apis: Vec<(ApiId, f32)> = hints(&close, catalog).into_iter().collect();
    apis.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.0.cmp(&b.0.0)));
    apis
}

/// APIs of the examples' paths, with the best similarity of a task that used them.
fn hints(examples: &[Example], catalog: &crate::catalog::Catalog) -> HashMap<ApiId, f32> {
    let mut out = HashMap::new();
    for e in examples {
        for name in &e.path {
            if let Some(api) = catalog.resolve(name).first() {
                let best = out.entry(api).or_insert(0f32);
                *best = best.max(e.similarity);
            }
        }
    }
    out
}

/// The parts a step serves: the unserved part it is most similar to (if
/// similar enough to be worth a step), and every part it ranks first in.
fn serves(c: &Candidate, unserved: &[usize]) -> Vec<usize> {
    let sim = |t: usize| c.similarity.get(t).copied().unwrap_or(0.0);
    let chosen_for = unserved.iter().copied().max_by(|a, b| sim(*a).total_cmp(&sim(*b)));
    unserved.iter().copied().filter(|&t| sim(t) >= 1.0 || Some(t) == chosen_for).collect()
}

/// What one run's candidate generation reads.
struct Context<'a> {
    /// Each text's own ranking (the whole task, then each part).
    rankings: &'a [Vec<ApiId>],
    /// The same, as rank (from 1) by API.
    ranks: &'a [HashMap<ApiId, usize>],
    /// Each API's final retrieval score over the best one.
    relevance: &'a HashMap<ApiId, f32>,
    ranking: &'a [ApiId],
    /// Each ranked API's place in `ranking` (from 1).
    places: &'a HashMap<ApiId, usize>,
    hints: &'a HashMap<ApiId, f32>,
    /// How much similar tasks saw each API fail lately (0 to 1).
    failures: &'a HashMap<ApiId, f32>,
}

#[cfg(test)]
mod tests;
