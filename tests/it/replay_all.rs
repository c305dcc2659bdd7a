//! Every recorded call of the replay table, made again through the whole
//! client path: `POST /v1/tools/call` on `toolrouter serve` (validation,
//! request building, the guard, the live upstream client) against
//! `toolrouter replay` over loopback HTTP (routing by host and path,
//! reading the arguments back). A call whose recording succeeded must
//! come back 200 with the recorded response; one whose recording failed
//! must come back as the upstream's failure. Real ToolBench data.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use toolrouter::args::{self, Options};
use toolrouter::catalog::Api;
use toolrouter::catalog::{Catalog, Sources};
use toolrouter::server::replay_server::Routes;
use toolrouter::upstream::replay::Recording;
use toolrouter::upstream::request::{self, UrlTemplate};
use toolrouter::upstream::{Match, ReplayTable, replay_body};

fn catalog_paths(data: &Path) -> String {
    format!("{},{}", data.join("tools").display(), data.join("tools_dropped_compact.jsonl").display())
}

#[test]
fn every_recorded_call_replays_through_tools_call() {
    let Some(data) = common::toolbench_dir() else { return };
    let cache = data.join("cache/derived_from_trajectories");
    let mut replay = Command::new(common::binary());
    replay
        .args(["replay", "--listen", "127.0.0.1:0", "--cache", cache.to_str().unwrap()])
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_CATALOG_PATHS", catalog_paths(&data));
    let (_replay, replay_url) = common::start(replay, Stdio::null());

    let state = tempfile::tempdir().unwrap();
    let mut serve = Command::new(common::binary());
    serve
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", state.path())
        .env("TOOLROUTER_CATALOG_PATHS", catalog_paths(&data))
        .env("TOOLROUTER_RETRIEVAL_MODE", "lexical")
        .env("TOOLROUTER_UPSTREAM_BASE_URL", &replay_url)
        .env("TOOLROUTER_UPSTREAM_ALLOWED_HOSTS", replay_url.trim_start_matches("http://"))
        .env("TOOLROUTER_UPSTREAM_ALLOW_PRIVATE", "true")
        // One attempt (a recorded failure is deterministic), no rate limits,
        // and a budget no recorded response reaches: responses come back whole.
        .env("TOOLROUTER_UPSTREAM_MAX_ATTEMPTS", "1")
        .env("TOOLROUTER_UPSTREAM_GLOBAL_RATE", "0")
        .env("TOOLROUTER_UPSTREAM_HOST_RATE", "0")
        .env("TOOLROUTER_UPSTREAM_API_RATE", "0")
        .env("TOOLROUTER_UPSTREAM_CLIENT_RATE", "0")
        .env("TOOLROUTER_SERVER_CLIENT_RATE", "0")
        .env("TOOLROUTER_COMPRESS_BUDGET", "100000000")
        .env("TOOLROUTER_LOG_LEVEL", "warn");
    let (_serve, url) = common::start(serve, Stdio::null());
    common::wait_ready(&url, None);

    let sources =
        Sources { paths: vec![data.join("tools"), data.join("tools_dropped_compact.jsonl")], ..Sources::default() };
    let catalog = Catalog::load(&sources).unwrap();
    let table = ReplayTable::load(&cache, &catalog).unwrap();
    let routes = Routes::new(&catalog);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut failures: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (api, recording) in table.iter() {
        let api = catalog.api(api);
        // The same arguments recorded twice (in another key order) with
        // another response: the table serves the first.
        let (recording, _) = table.lookup(api.id, &recording.arguments).expect("recorded");
        let body = json!({"name": api.function_name, "arguments": recording.arguments});
        let (status, _, text) = common::http(&url, "POST", "/v1/tools/call", None, body.to_string().as_bytes());
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let recorded = replay_body(&recording.response);
        // What the recording says should happen, judged in-process.
        let html =
            recorded.as_str().is_some_and(|t| t.trim_start().starts_with('<') && !t.trim_start().starts_with("<?xml"));
        let expected = if args::validate(api, &Value::Object(recording.arguments.clone()), Options::default()).is_err()
        {
            "refused: the recorded arguments do not fit the schema"
        } else if UrlTemplate::of(api).is_none() {
            "refused: the catalog's URL template is malformed"
        } else if !recording.error.is_empty() {
            "failed, as recorded"
        } else if html {
            "failed: the recording is an HTML page (not_json)"
        } else {
            "succeeded with the recorded response"
        };
        let mut as_expected = match expected {
            "refused: the recorded arguments do not fit the schema" => status == 400,
            "refused: the catalog's URL template is malformed" => status == 400 && answer["error"]["code"] == "request",
            "failed, as recorded" => status == 502 && answer["error"]["code"] == "server_error",
            "failed: the recording is an HTML page (not_json)" => {
                status == 502 && answer["error"]["code"] == "not_json"
            }
            _ => status == 200 && answer["response"] == recorded,
        };
        // Several APIs of the catalog are one endpoint (the same URL): the
        // replay server may answer with what another of them recorded for
        // this very request, as the real endpoint would.
        let mut expected = expected;
        if !as_expected
            && status == 200
            && recorded_by_twin(&catalog, &table, &routes, api, recording, &answer["response"])
        {
            (as_expected, expected) = (true, "succeeded with what an API of the same URL recorded for it");
        }
        if as_expected {
            *counts.entry(expected).or_default() += 1;
            continue;
        }
        let call = format!("{}({})", api.function_name, Value::Object(recording.arguments.clone()));
        let got = match status {
            200 => format!("200 with another response: {} instead of {recorded}", answer["response"]),
            _ => format!("{status} {}: {}", answer["error"]["code"], answer["error"]["message"]),
        };
        failures
            .entry(format!("expected {expected}, got {}", got.chars().take(200).collect::<String>()))
            .or_default()
            .push(call);
    }
    let total = table.report.recordings;
    eprintln!("replayed {total} recordings through /v1/tools/call:");
    for (outcome, n) in &counts {
        eprintln!("  {n} {outcome}");
    }
    for (outcome, calls) in &failures {
        eprintln!("  NOT AS EXPECTED: {outcome}: {} (e.g. {})", calls.len(), calls[0]);
    }
    let unexpected: usize = failures.values().map(Vec::len).sum();
    assert_eq!(unexpected, 0, "{unexpected} recordings did not replay as recorded");
    assert_eq!(counts.values().sum::<usize>(), total);
    assert!(counts["succeeded with the recorded response"] > 900, "{counts:?}");
}

/// Whether `response` is what another API, which the same request reaches
/// (the same URL), recorded for it.
fn recorded_by_twin(
    catalog: &Catalog,
    table: &ReplayTable,
    routes: &Routes,
    api: &Api,
    recording: &Recording,
    response: &Value,
) -> bool {
    let Ok(valid) = args::validate(api, &Value::Object(recording.arguments.clone()), Options::default()) else {
        return false;
    };
    let Ok(call) = request::build(api, &valid.arguments, None) else { return false };
    let query: Vec<(String, String)> = call.url.query_pairs().map(|(k, v)| (k.into(), v.into())).collect();
    let body = call.body.as_ref().and_then(Value::as_object);
    routes.ranked(&call.api_host, call.method.as_str(), call.url.path(), &query).into_iter().any(|(twin, path)| {
        let arguments = request::arguments(catalog.api(twin), &path, &query, body);
        twin != api.id
            && table
                .lookup(twin, &arguments)
                .is_some_and(|(r, m)| m == Match::Exact && replay_body(&r.response) == *response)
    })
}
