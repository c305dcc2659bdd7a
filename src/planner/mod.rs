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
pub mod caller;
pub mod decider;
pub mod llm_decider;
pub mod memory;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde::Serialize;

pub use caller::{Caller, DryRun, StepOutcome};
pub use decider::{Candidate, Decider, DeterministicDecider, Move, Reflection, Source, View};
pub use llm_decider::LlmDecider;
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
pub struct Budget {
    /// Steps taken (successful or not).
    pub max_steps: usize,
    pub max_backtracks: usize,
    pub max_restarts: usize,
    pub deadline: Duration,
}

/// How the planner searches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub budget: Budget,
    /// Roots taken from the retrieval ranking.
    pub roots: usize,
    /// Successors (and padding) offered per decision.
    pub neighbors: usize,
    /// APIs less available than this are not offered.
    pub alpha_min: f64,
    /// Remembered tasks consulted for hints.
    pub hints: usize,
    /// Commit to every choice: no retry after a failure, no backtracking, no restart.
    pub greedy: bool,
    /// Times the decider is asked to fix arguments that break the schema
    /// (only with a real caller; a deterministic decider cannot).
    pub repair_attempts: usize,
    /// How arguments are validated (`[args]`: strict mode, coercions).
    pub args: args::Options,
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
            hints: c.hints,
            greedy: false,
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
    pub at_ms: f64,
    /// The node decided from (`None`: the start).
    pub from: Option<String>,
    pub candidates: Vec<ShownCandidate>,
    #[serde(flatten)]
    pub decision: Move,
    /// What happened next (step outcome, reflection, budget).
    pub note: Option<String>,
}

/// A candidate as the trace shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShownCandidate {
    pub function: String,
    pub score: f64,
    pub w: f64,
    pub alpha: f64,
    pub relevance: f32,
    pub source: Source,
}

/// Time spent, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Timings {
    /// Embedding and ranking the task.
    pub retrieval_ms: f64,
    /// The search itself.
    pub planning_ms: f64,
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
pub struct Planner<'a> {
    retriever: &'a Retriever,
    graph: Option<&'a ToolGraph>,
    memory: Option<&'a LongTermMemory>,
    settings: Settings,
    search: SearchOptions,
    /// Outputs of calls made before this run (earlier sub-tasks), for completion.
    outputs: Vec<serde_json::Value>,
}

/// A frame of the DFS stack.
struct Frame {
    node: Option<ApiId>,
    tried: HashSet<ApiId>,
    /// Parts this frame's step served (restored on pop).
    served: Vec<usize>,
}

impl<'a> Planner<'a> {
    pub fn new(
        retriever: &'a Retriever,
        graph: Option<&'a ToolGraph>,
        memory: Option<&'a LongTermMemory>,
        settings: Settings,
    ) -> Planner<'a> {
        Planner { retriever, graph, memory, settings, search: retriever.options(), outputs: Vec::new() }
    }

    /// Lets steps complete their arguments from `outputs` (calls made before this run).
    pub fn with_outputs(mut self, outputs: Vec<serde_json::Value>) -> Planner<'a> {
        self.outputs = outputs;
        self
    }

    fn catalog(&self) -> &Catalog {
        self.retriever.catalog()
    }

    /// Plans (and, with a real caller, carries out) `task`.
    pub async fn run<D: Decider, E: Caller>(
        &self,
        task: &str,
        decider: &D,
        caller: &E,
    ) -> Result<PlanRun, RetrievalError> {
        let started = Instant::now();
        let prepared = self.retriever.prepare(task, self.search)?;
        self.run_prepared(task, &prepared, started, decider, caller).await
    }

    /// [`Planner::run`] with the task already prepared (embedded) for retrieval.
    pub async fn run_prepared<D: Decider, E: Caller>(
        &self,
        task: &str,
        prepared: &Prepared,
        started: Instant,
        decider: &D,
        caller: &E,
    ) -> Result<PlanRun, RetrievalError> {
        let examples = self.examples(prepared.vectors.first());
        let hints = hints(&examples, self.catalog());
        let remembering;
        let prepared = if prepared.remembered.is_empty() && !examples.is_empty() {
            remembering = Prepared { remembered: remembered(&examples, self.catalog()), ..prepared.clone() };
            &remembering
        } else {
            prepared
        };
        let rankings = self.retriever.text_rankings(prepared, RANKING_DEPTH, self.search);
        let hits = self.retriever.rank(prepared, RANKING_DEPTH, &Filters::default(), self.search).hits;
        let top = hits.first().map_or(0.0, |h| h.score);
        // Relevance follows the ranking's order: an intent's best hit moved
        // up into the first ten (or a named API put first) keeps at least
        // the relevance of the hits below it.
        let mut relevance: HashMap<ApiId, f32> = HashMap::new();
        let mut below = 0f32;
        for h in hits.iter().rev() {
            below = below.max(if top > 0.0 { h.score / top } else { 0.0 });
            relevance.insert(h.api, below);
        }
        let ranking: Vec<ApiId> = hits.iter().map(|h| h.api).collect();
        let retrieval_ms = crate::units::ms(started.elapsed());

        let texts = prepared.texts.clone();
        let parts: Vec<usize> = if texts.len() > 1 { (1..texts.len()).collect() } else { vec![0] };
        let explicit = arguments::explicit_values(task);
        let ranks: Vec<HashMap<ApiId, usize>> =
            rankings.iter().map(|r| r.iter().enumerate().map(|(i, &api)| (api, i + 1)).collect()).collect();
        let ctx =
            Context { rankings: &rankings, ranks: &ranks, ranking: &ranking, relevance: &relevance, hints: &hints };
        let mut run = PlanRun {
            task: task.to_string(),
            parts: texts[1..].to_vec(),
            steps: Vec::new(),
            ending: Ending::Infeasible { reason: "not started".into() },
            considered: Vec::new(),
            backtracks: 0,
            restarts: 0,
            memory: Vec::new(),
            trace: Vec::new(),
            timings: Timings::default(),
        };
        let mut considered: HashSet<ApiId> = HashSet::new();
        let mut failed: HashSet<ApiId> = HashSet::new();
        let mut dropped_roots: HashSet<ApiId> = HashSet::new();
        let mut unserved: Vec<usize> = parts.clone();
        let mut stack = vec![Frame { node: None, tried: HashSet::new(), served: Vec::new() }];
        let mut steps_taken = 0;
        let deadline = started + self.settings.budget.deadline;
        run.ending = loop {
            if steps_taken >= self.settings.budget.max_steps {
                break Ending::OutOfBudget { limit: "steps".into() };
            }
            if Instant::now() >= deadline {
                break Ending::OutOfBudget { limit: "deadline".into() };
            }
            let frame = stack.last().expect("the start frame is never popped while looping");
            let used: HashSet<ApiId> = run.steps.iter().map(|s| s.api).collect();
            let excluded = |api: &ApiId| {
                used.contains(api)
                    || failed.contains(api)
                    || frame.tried.contains(api)
                    || (frame.node.is_none() && dropped_roots.contains(api))
            };
            let candidates = self.candidates(frame.node, &ctx, &unserved, &excluded);
            for c in &candidates {
                if considered.insert(c.api) {
                    run.considered.push(c.function.clone());
                }
            }
            let finish_w = match (self.graph, frame.node) {
                (Some(g), Some(node)) => g.weight(&self.key(node), &NodeKey::Finish),
                _ => 0.0,
            };
            let view = View {
                texts: &texts,
                unserved: &unserved,
                path: &run.steps,
                candidates: &candidates,
                finish_w,
                memory: &run.memory,
                examples: &examples,
            };
            let decision = decider.decide(&view).await;
            let mut shown: Vec<ShownCandidate> = candidates
                .iter()
                .map(|c| ShownCandidate {
                    function: c.function.clone(),
                    score: DeterministicDecider::score(c, &unserved),
                    w: c.w,
                    alpha: c.alpha,
                    relevance: c.relevance,
                    source: c.source,
                })
                .collect();
            shown.sort_by(|a, b| b.score.total_cmp(&a.score));
            let from = frame.node.map(|a| self.catalog().api(a).function_name.clone());
            let at_ms = crate::units::ms(started.elapsed());
            let mut event =
                TraceEvent { at_ms, from, candidates: shown.clone(), decision: decision.clone(), note: None };
            event.candidates.truncate(TRACE_CANDIDATES);
            match decision {
                Move::Next { api, reason, arguments } => {
                    let Some(c) = candidates.iter().find(|c| c.api == api) else {
                        event.note = Some("the decider chose an API that was not offered; ignored".into());
                        run.trace.push(event);
                        break Ending::Infeasible { reason: "the decider chose an API that was not offered".into() };
                    };
                    stack.last_mut().expect("non-empty").tried.insert(api);
                    steps_taken += 1;
                    let earlier: Vec<&serde_json::Value> = (self.outputs.iter())
                        .chain(run.steps.iter().filter_map(|s| s.outcome.response.as_ref()))
                        .collect();
                    let given = Given { reason, arguments, explicit: &explicit, earlier: &earlier };
                    let step = self.take_step(c, given, &view, &shown, decider, caller).await;
                    event.note = Some(step.outcome.status.clone());
                    run.trace.push(event);
                    if !step.outcome.ok && !step.missing.is_empty() && !caller.plans_only() {
                        run.memory.push(format!("{} needs {} from the user", step.function, step.missing.join(", ")));
                        break Ending::NeedsInput { function: step.function, missing: step.missing };
                    }
                    if step.outcome.ok {
                        run.memory.push(format!("step {}: {} ({})", run.steps.len() + 1, step.function, step.reason));
                        let served = serves(c, &unserved);
                        unserved.retain(|t| !served.contains(t));
                        stack.push(Frame { node: Some(api), tried: HashSet::new(), served });
                        run.steps.push(step);
                    } else {
                        run.memory.push(format!("{} failed: {}", step.function, step.outcome.status));
                        failed.insert(api);
                        if self.settings.greedy {
                            break Ending::Finished {
                                reason: format!("{} failed and the greedy planner does not retry", step.function),
                            };
                        }
                    }
                }
                Move::Backtrack { reason } => {
                    run.trace.push(event);
                    if self.settings.greedy {
                        break Ending::Finished {
                            reason: format!("stuck ({reason}); the greedy planner does not backtrack"),
                        };
                    }
                    if run.backtracks >= self.settings.budget.max_backtracks {
                        break Ending::OutOfBudget { limit: "backtracks".into() };
                    }
                    run.backtracks += 1;
                    let popped = stack.pop().expect("non-empty");
                    if popped.node.is_none() {
                        break Ending::Infeasible { reason: format!("backtracked past the start: {reason}") };
                    }
                    unserved.extend(popped.served);
                    unserved.sort_unstable();
                    let step = run.steps.pop().expect("one step per frame above the start");
                    run.memory.push(format!("backtracked from {}: {reason}", step.function));
                }
                Move::Finish { reason } => {
                    run.trace.push(event);
                    match decider.reflect(task, &run.steps).await {
                        Reflection::Success => break Ending::Finished { reason },
                        Reflection::Partial { first_bad } if !self.settings.greedy && first_bad < run.steps.len() => {
                            run.memory
                                .push(format!("reflection: steps from {} on went wrong; going back", first_bad + 1));
                            while run.steps.len() > first_bad {
                                run.steps.pop();
                                let popped = stack.pop().expect("one frame per step");
                                unserved.extend(popped.served);
                            }
                            unserved.sort_unstable();
                        }
                        Reflection::Failure { drop_roots }
                            if !self.settings.greedy
                                && run.restarts < self.settings.budget.max_restarts
                                && !drop_roots.is_empty() =>
                        {
                            run.restarts += 1;
                            run.memory.push(format!("reflection: restart without {} root(s)", drop_roots.len()));
                            dropped_roots.extend(drop_roots);
                            run.steps.clear();
                            stack.truncate(1);
                            stack[0].tried.clear();
                            unserved = parts.clone();
                        }
                        _ if run.steps.is_empty() => break Ending::Infeasible { reason },
                        _ => break Ending::Finished { reason },
                    }
                }
            }
        };
        run.timings = Timings { retrieval_ms, planning_ms: crate::units::ms(started.elapsed()) - retrieval_ms };
        Ok(run)
    }

    /// Fills, completes and validates the arguments of a chosen candidate
    /// (asking the decider to repair them), then executes it.
    async fn take_step<D: Decider, E: Caller>(
        &self,
        c: &Candidate,
        given: Given<'_>,
        view: &View<'_>,
        shown: &[ShownCandidate],
        decider: &D,
        caller: &E,
    ) -> Step {
        let api = self.catalog().api(c.api);
        let mut arguments = match given.arguments {
            Some(a) => a,
            None => arguments::fill(api, given.explicit).0,
        };
        let mut completed = arguments::complete(api, &mut arguments, given.earlier);
        let check = |arguments: &serde_json::Map<String, serde_json::Value>| match args::validate(
            api,
            &serde_json::Value::Object(arguments.clone()),
            self.settings.args,
        ) {
            Ok(_) => Vec::new(),
            Err(invalid) => invalid.problems,
        };
        let mut problems = check(&arguments);
        let mut repairs = 0;
        while !problems.is_empty() && !caller.plans_only() && repairs < self.settings.repair_attempts {
            let Some(fixed) = decider.repair(view, api, &arguments, &problems).await else { break };
            repairs += 1;
            arguments = fixed;
            for key in arguments::complete(api, &mut arguments, given.earlier) {
                if !completed.contains(&key) {
                    completed.push(key);
                }
            }
            problems = check(&arguments);
        }
        let missing: Vec<String> = api
            .params
            .iter()
            .filter(|p| p.required && !arguments.contains_key(&p.key))
            .map(|p| p.key.clone())
            .collect();
        let outcome = if problems.is_empty() || caller.plans_only() {
            caller.call(api, &arguments).await
        } else {
            let status = if missing.is_empty() {
                format!("not called: {} argument problem(s)", problems.len())
            } else {
                format!("not called: needs {}", missing.join(", "))
            };
            StepOutcome { ok: false, status, response: None, elapsed_ms: 0.0 }
        };
        Step {
            api: c.api,
            function: c.function.clone(),
            reason: given.reason,
            w: c.w,
            alpha: c.alpha,
            relevance: c.relevance,
            arguments,
            completed,
            repairs,
            missing,
            problems,
            outcome,
            alternatives: shown
                .iter()
                .filter(|s| s.function != c.function)
                .map(|s| (s.function.clone(), s.score))
                .take(4)
                .collect(),
        }
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
        let mut out: Vec<Candidate> = Vec::new();
        let mut seen: HashSet<ApiId> = HashSet::new();
        let limit = if node.is_none() { self.settings.roots } else { self.settings.neighbors };
        let mut offer = |api: ApiId, w: f64, source: Source, out: &mut Vec<Candidate>| {
            if excluded(&api) || !seen.insert(api) {
                return;
            }
            let alpha = self.alpha(api);
            // Only availability seen in runs excludes an API: the catalog's
            // prior (RapidAPI's old success rates) cost 0.06 plan F1 on the
            // development sets as a filter (docs/benchmarks.md#planning).
            if alpha < self.settings.alpha_min && self.observed_alpha(api).is_some() {
                return;
            }
            out.push(Candidate {
                api,
                function: catalog.api(api).function_name.clone(),
                w,
                alpha,
                relevance: ctx.relevance.get(&api).copied().unwrap_or(0.0),
                similarity: ctx.ranks.iter().map(|r| r.get(&api).map_or(0.0, |&rank| 1.0 / rank as f32)).collect(),
                hint: ctx.hints.get(&api).copied().unwrap_or(0.0),
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

    /// The remembered tasks most similar to this one (`settings.hints` of them).
    fn examples(&self, vector: Option<&Vec<f32>>) -> Vec<Example> {
        let (Some(memory), Some(vector)) = (self.memory, vector) else { return Vec::new() };
        memory.examples(vector, self.settings.hints)
    }
}

/// A remembered successful run similar to the task: a worked example.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Example {
    pub task: String,
    /// Function names, in order.
    pub path: Vec<String>,
    /// Cosine similarity of its task to this one.
    pub similarity: f32,
}

/// Remembered tasks at least this similar to a request (cosine) rank the
/// APIs of their paths as one more retrieval list.
pub const MIN_REMEMBERED_SIMILARITY: f32 = 0.6;

/// The APIs of the paths of the examples similar enough, best first,
/// each with the similarity of the closest task that used it.
pub fn remembered(examples: &[Example], catalog: &crate::catalog::Catalog) -> Vec<(ApiId, f32)> {
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

/// What a step starts from: the decider's reason and arguments, the
/// request's explicit values and the outputs of earlier calls.
struct Given<'a> {
    reason: String,
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
    explicit: &'a arguments::Explicit,
    earlier: &'a [&'a serde_json::Value],
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
    hints: &'a HashMap<ApiId, f32>,
}

#[cfg(test)]
mod tests;
