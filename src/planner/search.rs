//! The planner's depth-first search itself: [`Planner::run`] sets up the
//! rankings, then loops deciding, stepping, backtracking and reflecting
//! until the task is done or a budget runs out; [`Planner::take_step`]
//! fills, completes, validates and carries out one chosen API.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::*;

/// A frame of the DFS stack.
struct Frame {
    node: Option<ApiId>,
    tried: HashSet<ApiId>,
    /// Parts this frame's step served (restored on pop).
    served: Vec<usize>,
}

/// What a step starts from: the decider's reason and arguments, the
/// request's explicit values and the outputs of earlier calls.
struct Given<'a> {
    reason: String,
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
    explicit: &'a arguments::Explicit,
    earlier: &'a [&'a serde_json::Value],
}

impl<'a> Planner<'a> {
    /// Plans (and, with a real caller, carries out) `task`.
    pub(crate) async fn run<D: Decider, E: Caller>(
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
    ///
    /// Long (about 200 lines) on purpose: it is the search loop of the
    /// module doc's pseudo-code, and every arm of its `match` updates the
    /// same state (the stack, the unserved parts, the failed and dropped
    /// APIs, the run); cut into methods, each would take most of it by
    /// `&mut` while the decider's view borrows the rest.
    pub(crate) async fn run_prepared<D: Decider, E: Caller>(
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
        let hits = self.retriever.rank(prepared, RANKING_DEPTH, &self.filters(), self.search).hits;
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
        let places: HashMap<ApiId, usize> = ranking.iter().enumerate().map(|(i, &api)| (api, i + 1)).collect();
        let retrieval_ms = crate::units::ms(started.elapsed());

        let texts = prepared.texts.clone();
        let parts: Vec<usize> = if texts.len() > 1 { (1..texts.len()).collect() } else { vec![0] };
        let explicit = arguments::explicit_values(task);
        let ranks: Vec<HashMap<ApiId, usize>> =
            rankings.iter().map(|r| r.iter().enumerate().map(|(i, &api)| (api, i + 1)).collect()).collect();
        let ctx = Context {
            rankings: &rankings,
            ranks: &ranks,
            ranking: &ranking,
            places: &places,
            relevance: &relevance,
            hints: &hints,
            failures: &self.failures(prepared.vectors.first()),
        };
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
            let function = match &decision {
                Move::Next { api, .. } => self.catalog().apis().get(api.0 as usize).map(|a| a.function_name.clone()),
                _ => None,
            };
            let mut event =
                TraceEvent { at_ms, from, candidates: shown.clone(), decision: decision.clone(), function, note: None };
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
        let mut defaulted = Vec::new();
        let mut arguments = match given.arguments {
            Some(a) => a,
            None => {
                let filled = arguments::fill(api, given.explicit);
                defaulted = filled.defaulted;
                filled.arguments
            }
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
            defaulted,
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
}
