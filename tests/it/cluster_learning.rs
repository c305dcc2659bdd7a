//! Replicas learning from each other's runs through a real `redis-server`:
//! three `toolrouter serve` processes behind no balancer (the test picks
//! the replica), execute runs scripted by the test model and calls
//! answered by a loopback upstream. A run through one replica shows in
//! another's graph within a second; after runs through each, all three
//! report identical weights; the runs recorded while Redis is stopped,
//! including those of a replica killed with SIGKILL before it could
//! publish them, reach every replica once Redis and the replica are back.
//! An execute run's trace made on one replica is read on another with the
//! same key only.

use crate::cluster::{counting_upstream, redis_on, redis_server};
use crate::common::{self, Killed};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use toolrouter::server::hash_key;

/// The client's key, and another client's.
const KEY: &str = "learning-key";
const OTHER_KEY: &str = "other-key";

/// The APIs whose neighbourhoods the replicas must agree on.
const WATCHED: [&str; 3] = ["niederschlag_for_ecoweather", "schneetage_for_ecoweather", "latest_rates_for_frankfurter"];

/// `toolrouter serve` with `state` as its state directory.
fn replica(state: &Path, env: &[(&str, String)]) -> (Killed, String) {
    let mut all: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let state = state.to_str().unwrap();
    all.push(("TOOLROUTER_STATE_DIR", state));
    let (killed, url) = common::serve(&all);
    common::wait_ready(&url, Some(KEY));
    (killed, url)
}

/// What `url` reports of the watched APIs.
fn report(url: &str) -> Vec<Value> {
    WATCHED
        .iter()
        .map(|api| {
            let (status, _, body) = common::http(url, "GET", &format!("/v1/graph/apis/{api}"), Some(KEY), b"");
            assert_eq!(status, 200, "{body}");
            serde_json::from_str(&body).unwrap()
        })
        .collect()
}

fn online_calls(report: &[Value], api: &str) -> u64 {
    let i = WATCHED.iter().position(|a| *a == api).unwrap();
    report[i]["online_calls"].as_u64().unwrap()
}

/// An execute run through `url` (two sub-tasks, one ecoweather call
/// each); its trace id.
fn execute(url: &str) -> String {
    let body = serde_json::json!({"model": "scripted", "toolrouter": {"mode": "execute"},
        "messages": [{"role": "user", "content": "ecoweather precipitation and snow days at lat 789.012 lon 123.456 from 2022-09-01"}]});
    let (status, _, answer) = common::http(url, "POST", "/v1/chat/completions", Some(KEY), body.to_string().as_bytes());
    assert!(status == 200 && answer.contains(r#""status":"answered""#), "{answer}");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    answer["toolrouter"]["trace_id"].as_str().unwrap().to_string()
}

fn call(url: &str) -> u16 {
    let body = br#"{"name": "latest_rates_for_frankfurter", "arguments": {"base": "EUR"}}"#;
    common::http(url, "POST", "/v1/tools/call", Some(KEY), body).0
}

/// Waits (up to `limit`) until every replica reports the same, with
/// `calls` online calls of the frankfurter API; the report.
fn converged(urls: &[&str], calls: u64, limit: Duration) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let reports: Vec<Vec<Value>> = urls.iter().map(|u| report(u)).collect();
        let same = reports.iter().all(|r| *r == reports[0]);
        if same && online_calls(&reports[0], "latest_rates_for_frankfurter") == calls {
            return reports.into_iter().next().unwrap();
        }
        assert!(started.elapsed() < limit, "the replicas did not converge: {reports:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn replicas_learn_from_each_others_runs_and_lose_none() {
    let Some(python) = common::python_env("py-openai", "bin/python") else { return };
    let Some(data) = common::toolbench_dir() else { return };
    let Some((redis, redis_port)) = redis_server() else { return };
    let (upstream_port, _hits) = counting_upstream();
    let (_model, model_url) = common::scripted_model(&python);
    let env: Vec<(&str, String)> = vec![
        ("TOOLROUTER_CLUSTER_REDIS_URL", format!("redis://127.0.0.1:{redis_port}")),
        ("TOOLROUTER_CLUSTER_REPLICAS", "3".into()),
        ("TOOLROUTER_LLM_BASE_URL", format!("{model_url}/v1")),
        ("TOOLROUTER_UPSTREAM_BASE_URL", format!("http://127.0.0.1:{upstream_port}")),
        ("TOOLROUTER_UPSTREAM_ALLOWED_HOSTS", format!("127.0.0.1:{upstream_port}")),
        ("TOOLROUTER_UPSTREAM_ALLOW_PRIVATE", "true".into()),
        ("TOOLROUTER_SERVER_CLIENT_RATE", "0".into()),
        ("TOOLROUTER_CATALOG_PATHS", data.join("tools/Energy/ecoweather.json").display().to_string()),
        ("TOOLROUTER_CATALOG_INCLUDE_EMBEDDED", "true".into()),
        ("TOOLROUTER_SERVER_API_KEY_HASHES", format!("[\"{}\", \"{}\"]", hash_key(KEY), hash_key(OTHER_KEY))),
    ];
    let states: Vec<PathBuf> = (0..3).map(|_| tempfile::tempdir().unwrap().keep()).collect();
    let (mut a, mut url_a) = replica(&states[0], &env);
    let (_b, url_b) = replica(&states[1], &env);
    let (_c, url_c) = replica(&states[2], &env);

    // A run through A changes what C reports within a second.
    let before = report(&url_c);
    let trace = execute(&url_a);
    let started = Instant::now();
    while report(&url_c) == before {
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "A's run did not reach C within 1 s: A {:#?} C {:#?}",
            report(&url_a),
            report(&url_c)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!("A's run reached C in {} ms", started.elapsed().as_millis());

    // Its trace is read on B with the same key, and not with another.
    let path = format!("/v1/traces/{trace}");
    let (status, _, body) = common::http(&url_b, "GET", &path, Some(KEY), b"");
    assert!(status == 200 && body.contains("niederschlag_for_ecoweather"), "{status} {body}");
    assert_eq!(common::http(&url_b, "GET", &path, Some(OTHER_KEY), b"").0, 404);

    // Runs through each replica: all three end with identical weights.
    for url in [&url_a, &url_b, &url_c] {
        execute(url);
        for _ in 0..3 {
            assert_eq!(call(url), 200);
        }
    }
    let agreed = converged(&[&url_a, &url_b, &url_c], 9, Duration::from_secs(5));
    assert_eq!(online_calls(&agreed, "niederschlag_for_ecoweather"), 4, "{agreed:#?}");
    let to_finish = agreed[0]["successors"].as_array().unwrap().iter().find(|s| s["function"] == "Finish");
    assert!(to_finish.is_some_and(|s| s["online"] == 4 && s["w"].as_f64().unwrap() > 0.0), "{agreed:#?}");

    // Redis stopped: calls are still answered and recorded, and wait in
    // the outboxes; A is killed with SIGKILL with its runs unpublished.
    drop(redis);
    for url in [&url_a, &url_b] {
        for _ in 0..5 {
            assert_eq!(call(url), 200, "no 5xx without Redis");
        }
    }
    let ready = common::http(&url_a, "GET", "/readyz", Some(KEY), b"").2;
    assert!(ready.starts_with("ready, degraded") && ready.contains("5 runs wait to be shared"), "{ready}");
    let metrics = common::http(&url_a, "GET", "/metrics", Some(KEY), b"").2;
    assert!(metrics.contains("toolrouter_cluster_outbox_runs 5"), "{metrics}");
    a.0.kill().unwrap();
    a.0.wait().unwrap();

    // Redis back (empty: no persistence), A restarted on its state
    // directory: every run reaches every replica, none twice.
    let _redis = redis_on(redis_port);
    (a, url_a) = replica(&states[0], &env);
    let agreed = converged(&[&url_a, &url_b, &url_c], 19, Duration::from_secs(10));
    assert_eq!(online_calls(&agreed, "niederschlag_for_ecoweather"), 4);
    let metrics = common::http(&url_c, "GET", "/metrics", Some(KEY), b"").2;
    assert!(metrics.contains("toolrouter_cluster_outbox_runs 0"), "{metrics}");
    drop(a);
}

/// What a replica's long-term memory learns from a run (the task's
/// vector included) reaches another replica, which then ranks the
/// remembered API for a similar request, with no embedding of its own.
#[tokio::test(flavor = "multi_thread")]
async fn a_memory_learned_on_one_replica_is_used_on_another() {
    use toolrouter::config::Config;
    use toolrouter::engine::Engine;
    use toolrouter::graph::{RunCall, RunRecord};
    if !common::model_available() {
        return;
    }
    let Some((_redis, redis_port)) = redis_server() else { return };
    let states = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let engines: Vec<_> = states
        .iter()
        .map(|state| {
            let mut config = Config::default();
            config.state.dir = state.path().to_path_buf();
            config.cluster.redis_url = format!("redis://127.0.0.1:{redis_port}");
            Engine::open(&config).unwrap()
        })
        .collect();
    let (a, b) = (engines[0].clone(), engines[1].clone());
    let rates = "latest_rates_for_frankfurter";
    let similar = "I need a budget plan for a Tokyo trip.";
    let before = b.search(similar, 10, None).await.unwrap();
    let position = |found: &[toolrouter::engine::SearchHit]| found.iter().position(|f| f.function == rates);
    let run = RunRecord {
        id: "remembered".into(),
        task: "Help me plan the budget of my trip to Tokyo.".into(),
        calls: vec![RunCall { function: rates.into(), ok: true }],
        success: true,
        standalone: false,
        at_unix_ms: 0,
    };
    tokio::task::spawn_blocking(move || a.record_run(run)).await.unwrap();
    let started = Instant::now();
    while b.memory().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(1), "the memory did not reach B within 1 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let journal = std::fs::read_to_string(states[1].path().join("memory/memory.jsonl")).unwrap();
    assert!(journal.contains("Tokyo") && journal.contains(rates), "B keeps it durably: {journal}");
    let after = b.search(similar, 10, None).await.unwrap();
    let (was, is) = (position(&before).unwrap_or(usize::MAX), position(&after).unwrap_or(usize::MAX));
    assert!(is < was, "{rates} at {is} on B after A's run, {was} before");
}
