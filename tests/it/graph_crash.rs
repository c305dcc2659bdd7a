//! A graph writer killed with SIGKILL mid-stream loses no acknowledged run;
//! when a snapshot is damaged, the first writer keeps its recovery report,
//! which `graph stats` and `/metrics` show.

use crate::common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use toolrouter::graph::store;
use toolrouter::graph::{NodeKey, Params};

const FUNCTIONS: [&str; 3] = [
    "latest_rates_for_frankfurter",
    "search_locations_for_open_meteo_geocoding",
    "weather_forecast_for_open_meteo_forecast",
];

/// The i-th run sent: which function it calls and whether the call succeeded.
fn run(i: usize) -> (String, &'static str, bool) {
    let function = FUNCTIONS[i % 3];
    let ok = !i.is_multiple_of(5);
    let line = serde_json::json!({
        "id": format!("run-{i}"), "task": "crash test",
        "calls": [{"function": function, "ok": ok}], "success": ok,
    });
    (line.to_string(), function, ok)
}

#[test]
fn every_acknowledged_run_survives_a_kill() {
    let state = tempfile::tempdir().unwrap();
    for round in 0..3 {
        let mut child = Command::new(common::binary())
            .args(["graph", "record"])
            .env("TOOLROUTER_STATE_DIR", state.path())
            // Snapshots every few runs, so kills also land during snapshots.
            .env("TOOLROUTER_GRAPH_SNAPSHOT_EVERY", "7")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let offset = round * 100_000;
        let writer = std::thread::spawn(move || {
            for i in 0..5_000 {
                if writeln!(stdin, "{}", run(offset + i).0).is_err() {
                    break; // killed
                }
            }
        });
        let mut acked = Vec::new();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let ack: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
            acked.push(ack["id"].as_str().unwrap().to_string());
            if acked.len() == 150 + round * 37 {
                child.kill().unwrap(); // SIGKILL
                break;
            }
        }
        child.wait().unwrap();
        let _ = writer.join();
        assert!(acked.len() >= 150, "round {round}: only {} acks", acked.len());

        let (graph, recovery) = store::read(&store::graph_dir(state.path()), Params::default(), None).unwrap();
        let applied_this_round = graph.meta.online_runs as usize - (0..round).map(applied).sum::<usize>();
        assert!(
            applied_this_round >= acked.len(),
            "round {round}: {} runs acknowledged, {} in the graph ({recovery:?})",
            acked.len(),
            applied_this_round
        );
        // The graph holds exactly the first `applied` runs sent so far, in order.
        set_applied(round, applied_this_round);
        let mut expect: HashMap<&str, (u64, u64)> = HashMap::new();
        for r in 0..=round {
            for i in 0..applied(r) {
                let (_, function, ok) = run(r * 100_000 + i);
                let e = expect.entry(function).or_default();
                e.0 += 1;
                e.1 += u64::from(ok);
            }
        }
        for (function, (calls, successes)) in expect {
            let node = graph.node(&NodeKey::Api(function.to_string())).unwrap();
            assert_eq!((node.online_calls, node.online_successes), (calls, successes), "round {round}: {function}");
        }
    }
    // A new writer cuts any torn tail and appends cleanly.
    let mut child = Command::new(common::binary())
        .args(["graph", "record"])
        .env("TOOLROUTER_STATE_DIR", state.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(format!("{}\n", run(999_999).0).as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let (graph, recovery) = store::read(&store::graph_dir(state.path()), Params::default(), None).unwrap();
    assert_eq!(recovery.dropped, 0, "{recovery:?}");
    assert_eq!(graph.meta.online_runs as usize, (0..3).map(applied).sum::<usize>() + 1);
}

static APPLIED: std::sync::Mutex<[usize; 3]> = std::sync::Mutex::new([0; 3]);

fn applied(round: usize) -> usize {
    APPLIED.lock().unwrap()[round]
}

fn set_applied(round: usize, n: usize) {
    APPLIED.lock().unwrap()[round] = n;
}

/// A state directory whose graph snapshot holds 10 runs (and no older
/// snapshot) and is damaged; no writer has opened it since.
fn damaged_state() -> tempfile::TempDir {
    let state = tempfile::tempdir().unwrap();
    let runs: String = (0..10).map(|i| run(i).0 + "\n").collect();
    let out = record(state.path(), &runs);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let snapshot = store::graph_dir(state.path()).join("snapshot.bin");
    let mut bytes = std::fs::read(&snapshot).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&snapshot, bytes).unwrap();
    state
}

/// `toolrouter graph record` fed `stdin` (one snapshot, at the end).
fn record(state: &std::path::Path, stdin: &str) -> std::process::Output {
    let mut child = Command::new(common::binary())
        .args(["graph", "record"])
        .env("TOOLROUTER_STATE_DIR", state)
        .env("TOOLROUTER_GRAPH_SNAPSHOT_EVERY", "1000")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn graph_stats(state: &std::path::Path, json: bool) -> String {
    let mut cmd = Command::new(common::binary());
    cmd.args(["graph", "stats"]).env("TOOLROUTER_STATE_DIR", state);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The counts of the last recovery `graph stats --json` shows.
fn last_recovery(state: &std::path::Path) -> serde_json::Value {
    let stats: serde_json::Value = serde_json::from_str(&graph_stats(state, true)).unwrap();
    let r = &stats["last_recovery"]["recovery"];
    serde_json::json!([r["snapshot"], r["damaged_snapshots"], r["lost_runs"], r["lost_runs_lower_bound"], r["dropped"]])
}

#[test]
fn graph_stats_shows_the_runs_a_damaged_snapshot_lost_after_a_writer_repaired_it() {
    let state = damaged_state();
    // The first writer repairs the store (a new snapshot replaces the damaged one).
    let out = record(state.path(), "");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (graph, now) = store::read(&store::graph_dir(state.path()), Params::default(), None).unwrap();
    assert_eq!((now.snapshot.as_str(), now.damaged_snapshots, graph.meta.online_runs), ("current", 0, 0), "{now:?}");
    assert_eq!(last_recovery(state.path()), serde_json::json!(["none", 1, 10, false, 0]));
    let text = graph_stats(state.path(), false);
    assert!(text.contains("snapshot none, 1 damaged snapshots, 10 runs lost"), "{text}");
    assert!(text.contains("10 runs folded into the damaged snapshot are lost"), "{text}");
}

#[test]
fn metrics_show_the_runs_a_damaged_snapshot_lost() {
    let state = damaged_state();
    let mut cmd = Command::new(common::binary());
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", state.path())
        .env("TOOLROUTER_RETRIEVAL_MODE", "lexical")
        .env("TOOLROUTER_LOG_LEVEL", "warn");
    let server = common::start(cmd, Stdio::null());
    common::wait_ready(&server.1, None);
    let (status, _, text) = common::http(&server.1, "GET", "/metrics", None, b"");
    assert_eq!(status, 200, "{text}");
    for line in [
        "toolrouter_graph_recovery_lost_runs 10",
        "toolrouter_graph_recovery_damaged_snapshots 1",
        "toolrouter_graph_recovery_dropped_records 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in {text}");
    }
    drop(server);
    assert_eq!(last_recovery(state.path()), serde_json::json!(["none", 1, 10, false, 0]));
}
