//! The long-term memory learns online: a successful run recorded through
//! the engine is remembered durably (the journal), survives a restart,
//! and its path ranks for a similar request in catalog search. Over the
//! embedded catalog with the real embedding model.

use crate::common;

use toolrouter::config::Config;
use toolrouter::engine::Engine;
use toolrouter::graph::{RunCall, RunRecord};
use toolrouter::planner::LongTermMemory;

#[tokio::test(flavor = "multi_thread")]
async fn successful_runs_are_remembered_and_reused() {
    if !common::model_available() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.state.dir = state.path().to_path_buf();
    let engine = Engine::open(&config).unwrap();
    assert_eq!(engine.memory().len(), 0);

    let task = "Help me plan the budget of my trip to Tokyo.";
    let rates = "latest_rates_for_frankfurter";
    let similar = "I need a budget plan for a Tokyo trip.";
    let position = |found: &[toolrouter::engine::SearchHit]| found.iter().position(|f| f.function == rates);
    let before = engine.search(similar, 10, None).await.unwrap();
    assert_ne!(position(&before), Some(0), "the test needs a request whose best match is another API");
    let calls = vec![RunCall { function: rates.into(), ok: true }];
    let run = move |success: bool| RunRecord {
        id: "r".into(),
        task: task.into(),
        calls: calls.clone(),
        success,
        standalone: false,
        at_unix_ms: 0,
    };
    let e = engine.clone();
    tokio::task::spawn_blocking(move || {
        e.record_run(run(false));
        e.record_run(run(true));
    })
    .await
    .unwrap();
    assert_eq!(engine.memory().len(), 1, "only the successful run is remembered");
    let journal = std::fs::read_to_string(state.path().join("memory/memory.jsonl")).unwrap();
    assert!(journal.contains(task) && journal.contains(rates) && journal.contains("\"online\":true"), "{journal}");

    // A similar request now finds the remembered API higher.
    let after = engine.search(similar, 10, None).await.unwrap();
    let (b, a) = (position(&before).unwrap_or(usize::MAX), position(&after).unwrap_or(usize::MAX));
    assert!(a < b, "{rates} at {a} after, {b} before");
    drop(engine);

    // A restart keeps it.
    let engine = Engine::open(&config).unwrap();
    assert_eq!(engine.memory().len(), 1);
    let model = engine.embedder().unwrap().id().to_string();
    drop(engine);

    // Recorded with its model; a journal from another model (or from
    // before models were recorded) is embedded again at the next start.
    let path = state.path().join("memory/memory.jsonl");
    let record = || -> serde_json::Value {
        let journal = std::fs::read_to_string(&path).unwrap();
        serde_json::from_str::<serde_json::Value>(journal.lines().next().unwrap()).unwrap()["record"].clone()
    };
    let recorded = record();
    assert_eq!(recorded["model"], model.as_str(), "{recorded}");
    let dims = recorded["vector"].as_array().unwrap().len();
    let mut other_model = |tasks: &[String]| Ok(tasks.iter().map(|_| vec![0.0; dims]).collect());
    LongTermMemory::refresh(&path, "another-model", &mut other_model).unwrap();
    assert_eq!(record()["model"], "another-model");
    let engine = Engine::open(&config).unwrap();
    assert_eq!(engine.memory().len(), 1, "embedded again, not dropped");
    let again = record();
    assert_eq!(again["model"], model.as_str());
    assert_eq!(again["vector"], recorded["vector"], "the same task, the same model: the same vector");
}

/// A failed call is remembered against its API for similar requests: the
/// planner then tries another API first, and no longer once the failure
/// is old (its weight halves every `planner.failure_half_life_s`). One
/// failure is far from the global `planner.alpha_min` exclusion, so the
/// change is the memory's.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_call_ranks_its_api_lower_for_similar_requests_for_a_while() {
    if !common::model_available() {
        return;
    }
    let (task, similar) = ("What are today's exchange rates for the euro?", "Show me the euro's exchange rates today.");
    let first_step = |engine: std::sync::Arc<Engine>, task: &'static str| async move {
        let run = engine.plan(task, None, None).await.unwrap();
        run.steps.first().map(|s| s.function.clone()).unwrap_or_default()
    };
    let failed_at = |engine: &std::sync::Arc<Engine>, function: &str, at_unix_ms: u64| {
        let run = RunRecord {
            id: toolrouter::graph::run_id("test"),
            task: task.into(),
            calls: vec![RunCall { function: function.into(), ok: false }],
            success: false,
            standalone: false,
            at_unix_ms,
        };
        let e = engine.clone();
        std::thread::spawn(move || e.record_run(run)).join().unwrap();
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    for (age_hours, moved) in [(0, true), (10, false)] {
        let state = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.state.dir = state.path().to_path_buf();
        let engine = Engine::open(&config).unwrap();
        let before = first_step(engine.clone(), similar).await;
        assert!(!before.is_empty());
        failed_at(&engine, &before, now - age_hours * 3_600_000);
        assert_eq!(engine.memory().len(), 1, "a failed run is remembered for its failure");
        let after = first_step(engine.clone(), similar).await;
        assert_eq!(after != before, moved, "{age_hours} h old: {before} first before, {after} after");
    }
}
