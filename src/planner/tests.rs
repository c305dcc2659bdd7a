use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Map, Value};

use super::*;
use crate::catalog::{Api, Catalog, Sources};
use crate::config::{Config, SearchMode};
use crate::graph::Params;

const GEO: &str = "search_locations_for_open_meteo_geocoding";
const FORECAST: &str = "weather_forecast_for_open_meteo_forecast";
const RATES: &str = "latest_rates_for_frankfurter";
const CURRENCIES: &str = "currencies_for_frankfurter";

/// A lexical retriever over the embedded catalog (no model needed).
fn retriever() -> (Retriever, tempfile::TempDir) {
    let state = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.state.dir = state.path().to_path_buf();
    config.retrieval.mode = SearchMode::Lexical;
    let catalog = Arc::new(Catalog::load(&Sources::default()).unwrap());
    (Retriever::open(catalog, &config).unwrap(), state)
}

fn settings() -> Settings {
    Settings::from(&crate::config::Config::default())
}

fn functions(run: &PlanRun) -> Vec<&str> {
    run.steps.iter().map(|s| s.function.as_str()).collect()
}

/// A graph built from successful trajectories that went `first -> second`.
fn graph_with(first: &str, second: &str, times: usize) -> ToolGraph {
    let call = |name: &str| crate::trajectory::Call {
        name: name.into(),
        arguments: "{}".into(),
        response: None,
        failed: Some(false),
    };
    let t = crate::trajectory::Trajectory {
        source: "test".into(),
        format: crate::trajectory::Format::StepToolEval,
        query_id: None,
        query: String::new(),
        offered: vec![first.into(), second.into()],
        calls: vec![call(first), call(second)],
        abandoned: Vec::new(),
        finish: Some(crate::trajectory::Finish::GiveAnswer),
        finish_call: None,
        solved: Some(true),
    };
    let catalog = Catalog::load(&Sources::default()).unwrap();
    crate::graph::build(&catalog, &vec![t; times], 8, Params::default())
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
}

#[test]
fn serves_each_part_of_the_task_in_order() {
    let (r, _state) = retriever();
    let planner = Planner::new(&r, None, None, settings());
    let task = "Search locations named Berlin. Then get the weather forecast for that location.";
    let run = block_on(planner.run(task, &DeterministicDecider::default(), &DryRun)).unwrap();
    assert_eq!(functions(&run), [GEO, FORECAST], "{:#?}", run.trace);
    assert_eq!(run.parts.len(), 2);
    assert!(
        matches!(&run.ending, Ending::Finished { reason } if reason.contains("no other API is relevant enough")),
        "{:?}",
        run.ending
    );
    assert!(run.steps[1].reason.contains("serves \"Then get the weather forecast"), "{}", run.steps[1].reason);
    // Arguments are filled from the request where it gives them, the rest is reported missing.
    assert_eq!(run.steps[1].missing, ["latitude", "longitude"]);
    assert!(!run.trace.is_empty() && run.trace.iter().all(|e| !e.candidates.is_empty()));
    assert!(run.considered.iter().any(|f| f == GEO));
}

#[test]
fn the_graph_adds_the_step_runs_usually_take_next() {
    let (r, _state) = retriever();
    let task = "Show the latest exchange rates of the euro.";
    // The embedded catalog is tiny and its tool-level ranking lifts every
    // Frankfurter API close to the best: a stricter threshold makes the
    // plain planner stop after one step.
    let strict = DeterministicDecider { min_relevance: 0.95, min_steps: 1, ..DeterministicDecider::default() };
    let alone = block_on(Planner::new(&r, None, None, settings()).run(task, &strict, &DryRun)).unwrap();
    assert_eq!(functions(&alone), [RATES]);
    let graph = graph_with(RATES, CURRENCIES, 5);
    let guided = block_on(Planner::new(&r, Some(&graph), None, settings()).run(task, &strict, &DryRun)).unwrap();
    assert_eq!(functions(&guided), [RATES, CURRENCIES], "{:#?}", guided.trace);
    assert!(guided.steps[1].reason.contains("runs usually go on to it"), "{}", guided.steps[1].reason);
    assert!(guided.steps[1].w > 0.5);
    // The ablation that ignores the graph's edges stops like the plain planner.
    let ignoring = DeterministicDecider { ignore_graph: true, ..strict };
    let run = block_on(Planner::new(&r, Some(&graph), None, settings()).run(task, &ignoring, &DryRun)).unwrap();
    assert_eq!(functions(&run), [RATES]);

    // By default a plan takes at least two steps: without a graph,
    // retrieval's top two first.
    let default = DeterministicDecider::default();
    let plain = block_on(Planner::new(&r, None, None, settings()).run(task, &default, &DryRun)).unwrap();
    let hits = r.search(task, 2, &crate::retrieval::Filters::default()).unwrap().hits;
    let top2: Vec<&str> = hits.iter().map(|h| r.catalog().api(h.api).function_name.as_str()).collect();
    assert_eq!(functions(&plain)[..2], top2);
}

/// Fails every call of one API.
struct FailOn(&'static str);

impl Caller for FailOn {
    async fn call(&self, api: &Api, _arguments: &Map<String, Value>) -> StepOutcome {
        let ok = api.function_name != self.0;
        StepOutcome {
            ok,
            status: if ok { "200 OK".into() } else { "503 Service Unavailable".into() },
            response: None,
            elapsed_ms: 1.0,
        }
    }

    fn plans_only(&self) -> bool {
        true
    }
}

#[test]
fn a_failed_step_is_recorded_and_another_candidate_chosen() {
    let (r, _state) = retriever();
    let task = "Show the latest exchange rates of the euro.";
    let run =
        block_on(Planner::new(&r, None, None, settings()).run(task, &DeterministicDecider::default(), &FailOn(RATES)))
            .unwrap();
    assert!(!functions(&run).contains(&RATES));
    assert!(!run.steps.is_empty(), "another API was chosen");
    assert!(run.memory.iter().any(|m| m.contains(&format!("{RATES} failed: 503"))), "{:?}", run.memory);
    assert!(run.trace.iter().any(|e| e.note.as_deref() == Some("503 Service Unavailable")));
    // The greedy ablation stops at the failure instead.
    let mut greedy = settings();
    greedy.greedy = true;
    let run =
        block_on(Planner::new(&r, None, None, greedy).run(task, &DeterministicDecider::default(), &FailOn(RATES)))
            .unwrap();
    assert!(run.steps.is_empty());
    assert!(
        matches!(&run.ending, Ending::Finished { reason } if reason.contains("does not retry")),
        "{:?}",
        run.ending
    );
}

/// Plays a fixed list of moves by function name, then finishes.
struct Script {
    moves: Vec<&'static str>,
    at: AtomicUsize,
    reflections: Vec<Reflection>,
    reflected: AtomicUsize,
}

impl Decider for Script {
    async fn decide(&self, view: &View<'_>) -> Move {
        let i = self.at.fetch_add(1, Ordering::SeqCst);
        match self.moves.get(i).copied() {
            Some("back") => Move::Backtrack { reason: "scripted".into() },
            Some("stop") => Move::Finish { reason: "scripted stop".into() },
            Some(name) => match view.candidates.iter().find(|c| c.function == name) {
                Some(c) => Move::Next { api: c.api, reason: "scripted".into(), arguments: None },
                None => Move::Backtrack { reason: format!("{name} not offered") },
            },
            None => Move::Finish { reason: "script done".into() },
        }
    }

    async fn reflect(&self, _task: &str, _path: &[Step]) -> Reflection {
        let i = self.reflected.fetch_add(1, Ordering::SeqCst);
        self.reflections.get(i).cloned().unwrap_or(Reflection::Success)
    }
}

fn script(moves: &[&'static str], reflections: Vec<Reflection>) -> Script {
    Script { moves: moves.to_vec(), at: AtomicUsize::new(0), reflections, reflected: AtomicUsize::new(0) }
}

#[test]
fn backtracking_pops_the_last_step_and_its_choice_is_not_offered_again() {
    let (r, _state) = retriever();
    let task = "Show the latest exchange rates of the euro.";
    let s = script(&[RATES, CURRENCIES, "back"], Vec::new());
    let run = block_on(Planner::new(&r, None, None, settings()).run(task, &s, &DryRun)).unwrap();
    assert_eq!(functions(&run), [RATES]);
    assert_eq!(run.backtracks, 1);
    assert!(run.memory.iter().any(|m| m.starts_with(&format!("backtracked from {CURRENCIES}"))), "{:?}", run.memory);
    // Back at RATES, CURRENCIES (tried there) is no longer offered.
    let after = run.trace.last().unwrap();
    assert_eq!(after.from.as_deref(), Some(RATES));
    assert!(after.candidates.iter().all(|c| c.function != CURRENCIES), "{:?}", after.candidates);
}

#[test]
fn backtracking_past_the_start_is_infeasible() {
    let (r, _state) = retriever();
    let run = block_on(Planner::new(&r, None, None, settings()).run(
        "exchange rates",
        &script(&["back"], Vec::new()),
        &DryRun,
    ))
    .unwrap();
    assert!(matches!(run.ending, Ending::Infeasible { .. }), "{:?}", run.ending);
}

#[test]
fn reflection_cuts_back_or_restarts_without_the_bad_root() {
    let (r, _state) = retriever();
    let task = "Show the latest exchange rates of the euro.";
    let s = script(&[RATES, CURRENCIES], vec![Reflection::Partial { first_bad: 1 }]);
    let run = block_on(Planner::new(&r, None, None, settings()).run(task, &s, &DryRun)).unwrap();
    assert_eq!(functions(&run), [RATES], "cut back to the first bad step, then finished");

    let rates = r.catalog().resolve(RATES).first().unwrap();
    let s = script(&[RATES, "stop", RATES], vec![Reflection::Failure { drop_roots: vec![rates] }]);
    let run = block_on(Planner::new(&r, None, None, settings()).run(task, &s, &DryRun)).unwrap();
    assert_eq!(run.restarts, 1, "{:?}", run.memory);
    // After the restart RATES is no longer offered as a first step: the scripted RATES backtracks past the start.
    assert!(matches!(run.ending, Ending::Infeasible { .. }), "{:?}", run.ending);
}

#[test]
fn budgets_end_runs() {
    let (r, _state) = retriever();
    let mut tight = settings();
    tight.budget.max_steps = 1;
    let s = script(&[RATES, CURRENCIES], Vec::new());
    let run = block_on(Planner::new(&r, None, None, tight).run("exchange rates", &s, &DryRun)).unwrap();
    assert_eq!(run.ending, Ending::OutOfBudget { limit: "steps".into() });
    assert_eq!(functions(&run), [RATES]);
    let mut none = settings();
    none.budget.deadline = Duration::ZERO;
    let run =
        block_on(Planner::new(&r, None, None, none).run("exchange rates", &DeterministicDecider::default(), &DryRun))
            .unwrap();
    assert_eq!(run.ending, Ending::OutOfBudget { limit: "deadline".into() });
}

#[test]
fn unknown_names_in_the_graph_are_ignored() {
    let (r, _state) = retriever();
    let graph = graph_with(RATES, "no_such_api_for_anything", 5);
    let run = block_on(Planner::new(&r, Some(&graph), None, settings()).run(
        "latest exchange rates",
        &DeterministicDecider::default(),
        &DryRun,
    ))
    .unwrap();
    assert_eq!(functions(&run)[0], RATES);
    assert!(run.steps.iter().all(|s| s.function != "no_such_api_for_anything"));
}

#[test]
fn an_empty_task_is_an_error() {
    let (r, _state) = retriever();
    assert!(matches!(
        block_on(Planner::new(&r, None, None, settings()).run("  ", &DeterministicDecider::default(), &DryRun)),
        Err(RetrievalError::EmptyQuery)
    ));
}

#[test]
fn only_calls_seen_to_fail_exclude_an_api() {
    let (r, _state) = retriever();
    let task = "latest exchange rates";
    let plan = |graph: &ToolGraph| {
        let planner = Planner::new(&r, Some(graph), None, settings());
        functions(&block_on(planner.run(task, &DeterministicDecider::default(), &DryRun)).unwrap())
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let now = crate::metrics::unix_ms();
    let record_at = |graph: &mut ToolGraph, ok: bool, at_unix_ms: u64| {
        let calls = vec![crate::graph::RunCall { function: RATES.into(), ok }];
        let run = crate::graph::RunRecord {
            id: "r".into(),
            task: task.into(),
            calls,
            success: ok,
            standalone: false,
            at_unix_ms,
        };
        graph.apply(&run, Some(r.catalog()));
    };
    let record = |graph: &mut ToolGraph, ok: bool| record_at(graph, ok, now);
    let mut graph = ToolGraph::new(Params::default());
    record(&mut graph, true);
    assert_eq!(plan(&graph)[0], RATES);
    // Five failures in six calls: a success rate of 2/8, still offered.
    for _ in 0..5 {
        record(&mut graph, false);
    }
    assert_eq!(plan(&graph)[0], RATES);
    // Eight failures in nine calls: 2/11, under α_min (0.2). (α, blending in
    // the tool's prior of 0.5, stays above 0.4 whatever the calls.)
    for _ in 0..3 {
        record(&mut graph, false);
    }
    assert!(!plan(&graph).contains(&RATES.to_string()), "{:?}", plan(&graph));
    // The same calls, the last failure longer ago than the retry window
    // (600 s): an API that was down is tried again.
    let retry = settings().retry_failed_after.as_millis() as u64;
    let mut recovered = ToolGraph::new(Params::default());
    record_at(&mut recovered, true, now - retry - 60_000);
    for _ in 0..8 {
        record_at(&mut recovered, false, now - retry - 1_000);
    }
    assert_eq!(plan(&recovered)[0], RATES);
    // One more failure now: left out again.
    record(&mut recovered, false);
    assert!(!plan(&recovered).contains(&RATES.to_string()), "{:?}", plan(&recovered));
}

/// Catalog search with the graph's cue (the caller's last call, as an MCP
/// session gives it): the API that runs go on to rises, and nothing else
/// moves without a cue.
#[test]
fn the_last_call_lifts_what_the_graph_says_follows_it() {
    let (r, _state) = retriever();
    let graph = graph_with(GEO, FORECAST, 20);
    let catalog = r.catalog().clone();
    let followers = graph.followers(GEO, &catalog);
    let forecast = catalog.find(FORECAST).unwrap().id;
    assert!(followers.iter().any(|(api, w)| *api == forecast && *w > 0.5), "{followers:?}");
    assert!(graph.followers("no_such_function", &catalog).is_empty());

    let task = "weather in a city and the exchange rate of the euro";
    let prepared = r.prepare(task, r.options()).unwrap();
    let rank_of = |p: &crate::retrieval::Prepared| {
        let hits = r.rank(p, 100, &crate::retrieval::Filters::default(), r.options()).hits;
        hits.iter().position(|h| h.api == forecast).unwrap_or(usize::MAX)
    };
    let cued = crate::retrieval::Prepared { after: followers, ..prepared.clone() };
    let (plain, lifted) = (rank_of(&prepared), rank_of(&cued));
    assert!(lifted < plain, "the follower rose: {plain} -> {lifted}");
}
