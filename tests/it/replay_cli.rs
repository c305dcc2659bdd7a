//! `toolrouter replay` serving recorded responses over loopback HTTP and
//! `toolrouter call --upstream live` reaching it through the real client
//! path; `--upstream replay` in-process. Real ToolBench catalog and replay
//! table.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn catalog_args(data: &Path) -> Vec<String> {
    ["tools", "tools_dropped_compact.jsonl"]
        .iter()
        .flat_map(|p| ["--catalog".to_string(), data.join(p).display().to_string()])
        .collect()
}

fn toolrouter(args: &[String], state: &Path, env: &[(&str, String)]) -> Output {
    let mut cmd = Command::new(common::binary());
    cmd.args(args).env_remove("TOOLROUTER_CONFIG").env("TOOLROUTER_STATE_DIR", state);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the binary runs")
}

fn start_replay(data: &Path) -> (Server, String) {
    let cache = data.join("cache/derived_from_trajectories");
    let mut child = Command::new(common::binary())
        .args(["replay", "--listen", "127.0.0.1:0", "--cache", cache.to_str().unwrap()])
        .args(catalog_args(data))
        .env_remove("TOOLROUTER_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().rsplit(' ').next().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");
    (Server(child), url)
}

const SNOW: &str = "schneetage_for_ecoweather";
const SNOW_ARGS: &str = r#"{"is_from": "2022-09-01", "lon": 123.456, "lat": 789.012}"#;

#[test]
fn call_live_through_the_replay_server() {
    let Some(data) = common::toolbench_dir() else { return };
    let (_server, url) = start_replay(&data);
    let state = tempfile::tempdir().unwrap();
    let host = url.trim_start_matches("http://").to_string();
    let env = [
        ("TOOLROUTER_UPSTREAM_BASE_URL", url.clone()),
        ("TOOLROUTER_UPSTREAM_ALLOWED_HOSTS", host),
        ("TOOLROUTER_UPSTREAM_ALLOW_PRIVATE", "true".to_string()),
    ];
    let mut args: Vec<String> = ["call", SNOW, SNOW_ARGS, "--upstream", "live", "--json"].map(String::from).to_vec();
    args.extend(catalog_args(&data));
    let out = toolrouter(&args, state.path(), &env);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["response"].as_str().unwrap().contains("0 days with snow"), "{report}");
    let attempt = &report["trace"]["attempts"][0];
    assert_eq!(attempt["outcome"], "200 OK", "a real HTTP answer: {report}");
    // The trace names the API's own URL, never the base URL calls went through.
    let traced = report["trace"]["url"].as_str().unwrap();
    assert!(traced.starts_with("https://") && !traced.contains(&url), "{report}");

    // An API with no recording: the server's honest 404 comes back as a classified error.
    let mut args: Vec<String> =
        ["call", "get_120_hour_forecast_for_weather", r#"{"lat": 52.5, "lon": 13.4}"#, "--upstream", "live"]
            .map(String::from)
            .to_vec();
    args.extend(catalog_args(&data));
    let out = toolrouter(&args, state.path(), &env);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("client_error") && text.contains("no recorded response"), "{text}");

    // Without opting in to loopback targets, the guard refuses.
    let out = toolrouter(&args, state.path(), &env[..2]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("refused"));

    // The API's answers reached the graph's availability; the guard's
    // refusal is toolrouter's own, not the API's, and is not learned.
    let stats = toolrouter(&["graph".into(), "stats".into(), "--json".into()], state.path(), &[]);
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(stats["stats"]["online_runs"], 2, "{stats}");
}

#[test]
fn call_replay_in_process_exact_then_closest() {
    let Some(data) = common::toolbench_dir() else { return };
    let state = tempfile::tempdir().unwrap();
    let cache: PathBuf = data.join("cache/derived_from_trajectories");
    let run = |arguments: &str| {
        let mut args: Vec<String> =
            ["call", SNOW, arguments, "--upstream", "replay", "--json", "--replay-dir"].map(String::from).to_vec();
        args.push(cache.display().to_string());
        args.extend(catalog_args(&data));
        let out = toolrouter(&args, state.path(), &[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    assert_eq!(run(SNOW_ARGS)["trace"]["replay"]["match"], "exact");
    let closest = run(r#"{"is_from": "2022-09-01", "lon": 10.0, "lat": 50.0}"#);
    assert_eq!(closest["trace"]["replay"]["match"], "closest");
    assert!(closest["trace"]["replay"]["score"].as_f64().unwrap() > 0.3, "{closest}");
    // Invalid arguments never reach the upstream.
    let mut args: Vec<String> =
        ["call", SNOW, r#"{"lat": "north"}"#, "--upstream", "replay", "--replay-dir"].map(String::from).to_vec();
    args.push(cache.display().to_string());
    args.extend(catalog_args(&data));
    let out = toolrouter(&args, state.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Invalid arguments"));
}
