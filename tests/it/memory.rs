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
