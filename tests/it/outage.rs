//! APIs down, end to end (`scripts/outage-experiment.py`): the replay
//! server answers 503 for 30% of the catalog's APIs, `toolrouter serve`
//! executes ToolBench requests through it with the scripted model
//! deciding, once with the default search and once with
//! `planner.greedy = true`. Backtracking must keep serving what the greedy
//! planner loses.

use std::process::Command;

use serde_json::Value;

use crate::common;

#[test]
fn with_apis_down_backtracking_serves_what_the_greedy_planner_loses() {
    let Some(data) = common::toolbench_dir() else { return };
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(root.join("scripts/outage-experiment.py"))
        .args(["--queries", "40", "--down", "0.3", "--json", "--toolrouter"])
        .arg(common::binary())
        .env("TOOLBENCH_DIR", &data)
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let runs: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("JSON lines")).collect();
    let served = |down: f64, greedy: bool| {
        let run = runs.iter().find(|r| r["down"] == down && r["greedy"] == greedy).expect("every run reported");
        assert_eq!(run["errors"], 0, "{run}");
        run["served"].as_u64().unwrap()
    };
    assert_eq!(runs[0]["requests"], 40, "{runs:?}");
    // Every offered API has recordings: with nothing down, nearly every request gets a successful call.
    assert!(served(0.0, false) >= 36, "{runs:?}");
    // With 30% down the search tries another API; the greedy planner stops at the first failure.
    assert!(served(0.3, false) >= 36, "{runs:?}");
    assert!(served(0.3, false) >= served(0.3, true) + 8, "{runs:?}");
    let failed = |greedy: bool| {
        runs.iter().find(|r| r["down"] == 0.3 && r["greedy"] == greedy).unwrap()["failed_calls"].as_u64().unwrap()
    };
    assert!(failed(false) > 0 && failed(true) > 0, "the outage made calls fail: {runs:?}");
}
