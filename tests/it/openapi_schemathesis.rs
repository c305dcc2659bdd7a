//! `openapi/toolrouter.yaml` against a running `toolrouter serve`, by
//! schemathesis (property-based: the document's examples, its coverage
//! cases, fuzzing and the stateful link from an execute answer to its
//! trace), with the settings of `openapi/schemathesis.toml`: no 5xx, and
//! status codes, content types, headers (`x-request-id`, `Retry-After`)
//! and bodies (JSON and every event of a stream) as documented; invalid
//! requests refused; 401 without the key; 405 for undocumented methods.
//!
//! The server has an API key, the embedded catalog only (lexical search,
//! no embedding model), replayed API responses (one recording per API,
//! written here) and the scripted model (`tests/python/scripted_model.py`)
//! upstream, so nothing leaves the machine and every 5xx is a bug. Two
//! shorter runs follow: with `openai.models` set (the model list, unknown
//! models) and with a low request rate (429 with `Retry-After`). What
//! schemathesis does not send (bodies over `server.max_body_bytes`, ids
//! that are not UTF-8) is checked here by hand. `/mcp` is out of scope
//! (`tests/mcp_python.rs` drives it).
//!
//! `TOOLROUTER_SCHEMATHESIS_EXAMPLES` (default 100 per operation) and
//! `TOOLROUTER_SCHEMATHESIS_SEED` (default fixed) tune the run.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use common::{Killed, http, python_env, start, wait_ready};

const KEY: &str = "schemathesis-test-key";

/// The embedded catalog's APIs: one replayed response each.
const APIS: [&str; 11] = [
    "available_countries_for_nager_date",
    "country_info_for_nager_date",
    "long_weekends_for_nager_date",
    "next_public_holidays_for_nager_date",
    "public_holidays_for_nager_date",
    "currencies_for_frankfurter",
    "historical_rates_for_frankfurter",
    "latest_rates_for_frankfurter",
    "rates_time_series_for_frankfurter",
    "search_locations_for_open_meteo_geocoding",
    "weather_forecast_for_open_meteo_forecast",
];

/// `toolrouter serve` with the key, the embedded catalog, the replay table
/// and the scripted model, plus `env`.
fn serve(state: &Path, replay: &Path, model_url: &str, env: &[(&str, &str)]) -> (Killed, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolrouter"));
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("TOOLROUTER_CONFIG")
        .env_remove("TOOLROUTER_CATALOG_PATHS")
        .env("TOOLROUTER_STATE_DIR", state)
        .env("TOOLROUTER_RETRIEVAL_MODE", "lexical")
        .env("TOOLROUTER_LLM_BASE_URL", format!("{model_url}/v1"))
        .env("TOOLROUTER_SERVER_API_KEY_HASHES", format!("[\"{}\"]", toolrouter::server::hash_key(KEY)))
        .env("TOOLROUTER_UPSTREAM_MODE", "replay")
        .env("TOOLROUTER_UPSTREAM_REPLAY_DIR", replay)
        .env("TOOLROUTER_LOG_LEVEL", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (server, url) = start(cmd, Stdio::null());
    wait_ready(&url, Some(KEY));
    (server, url)
}

/// Writes the replay table: `<Category>/<tool>_for_<Category>/<api>.json`,
/// one recording (any arguments match it, as the closest).
fn replay_table(dir: &Path) {
    for function in APIS {
        let (api, tool) = function.split_once("_for_").unwrap();
        let tool_dir = dir.join("Embedded").join(format!("{tool}_for_Embedded"));
        std::fs::create_dir_all(&tool_dir).unwrap();
        let response = serde_json::json!({"recorded": function, "items": [1, 2, 3]}).to_string();
        let recording = serde_json::json!({"{}": {"error": "", "response": response}});
        std::fs::write(tool_dir.join(format!("{api}.json")), recording.to_string()).unwrap();
    }
}

/// Runs schemathesis over the document against `url`, at most `examples`
/// test cases per operation and phase; returns the count of each
/// "METHOD /path STATUS" among the requests it sent.
fn schemathesis(
    venv: &Path,
    work: &Path,
    url: &str,
    name: &str,
    examples: usize,
    extra: &[&str],
) -> BTreeMap<String, usize> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let examples = examples.to_string();
    let seed = std::env::var("TOOLROUTER_SCHEMATHESIS_SEED").unwrap_or_else(|_| "20261122".into());
    let har = work.join(format!("{name}.har"));
    let mut cmd = Command::new(venv.join("bin/st"));
    cmd.current_dir(work)
        .arg("--config-file")
        .arg(root.join("openapi/schemathesis.toml"))
        .arg("run")
        .arg(root.join("openapi/toolrouter.yaml"))
        .args(["--url", url, "--header", &format!("Authorization: Bearer {KEY}")])
        .args(["--max-examples", &examples, "--seed", &seed, "--generation-database", "none", "--no-color"])
        .args(["--report", "har", "--report-har-path"])
        .arg(&har)
        .args(extra);
    let started = Instant::now();
    let out = cmd.output().expect("schemathesis runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis ({name}) found problems:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Vec<&str> = stdout
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()) && l.contains(" generated"))
        .collect();
    println!("schemathesis {name}: {} in {:.1} s (seed {seed})", summary.join("; "), started.elapsed().as_secs_f64());

    let har: serde_json::Value = serde_json::from_slice(&std::fs::read(&har).unwrap()).unwrap();
    let mut seen = BTreeMap::new();
    for entry in har["log"]["entries"].as_array().unwrap() {
        let method = entry["request"]["method"].as_str().unwrap_or("");
        let path = entry["request"]["url"].as_str().unwrap_or("").trim_start_matches(url);
        let path = path.split('?').next().unwrap_or("");
        let path = if path.starts_with("/v1/traces/") { "/v1/traces/{id}" } else { path };
        *seen.entry(format!("{method} {path} {}", entry["response"]["status"])).or_insert(0) += 1;
    }
    for (k, n) in &seen {
        println!("  {k}: {n}");
    }
    seen
}

/// The error of an OpenAI-shaped error body.
fn error_of(body: &str) -> serde_json::Value {
    let value: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    let error = value["error"].clone();
    assert!(
        error["message"].is_string()
            && error["type"].is_string()
            && error.get("param").is_some()
            && error.get("code").is_some(),
        "not OpenAI's error shape: {body}"
    );
    error
}

#[test]
fn the_openapi_document_holds_for_the_running_server() {
    // The schemathesis venv of `scripts/python-env.sh`.
    let Some(st) = python_env("py-schemathesis", "bin/st") else { return };
    let venv = st.parent().and_then(Path::parent).expect("<venv>/bin/st").to_path_buf();
    let work = tempfile::tempdir().unwrap();
    let replay = work.path().join("replay");
    replay_table(&replay);

    // The scripted model; its stderr is kept for a failure's message.
    let model_log = work.path().join("scripted_model.log");
    let mut model = Command::new(venv.join("bin/python"));
    model.arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/scripted_model.py"));
    let (_model, model_url) = start(model, std::fs::File::create(&model_log).unwrap().into());
    let model_errors = || std::fs::read_to_string(&model_log).unwrap_or_default();

    // No request rate here, so that the run reaches past the limiter.
    let state = work.path().join("state");
    let (_server, url) = serve(&state, &replay, &model_url, &[("TOOLROUTER_SERVER_CLIENT_RATE", "0")]);

    // What schemathesis does not send. A body over server.max_body_bytes
    // (1 MiB by default): 413 in OpenAI's shape, like every error.
    let big = format!(r#"{{"model": "m", "messages": [{{"role": "user", "content": "{}"}}]}}"#, "x".repeat(1 << 20));
    for path in ["/v1/chat/completions", "/v1/tools/call", "/mcp"] {
        let (status, _, body) = http(&url, "POST", path, Some(KEY), big.as_bytes());
        assert_eq!(status, 413, "{path}: {body}");
        assert_eq!(error_of(&body)["code"], "payload_too_large", "{path}");
    }
    // A trace id that is not UTF-8 once decoded: 400 in OpenAI's shape.
    let (status, _, body) = http(&url, "GET", "/v1/traces/%FF", Some(KEY), b"");
    assert_eq!(status, 400, "{body}");
    assert_eq!(error_of(&body)["param"], "id");

    let examples = std::env::var("TOOLROUTER_SCHEMATHESIS_EXAMPLES").ok().and_then(|n| n.parse().ok()).unwrap_or(100);
    let seen = schemathesis(&venv, work.path(), &url, "main", examples, &[]);
    let errors = model_errors();
    assert!(!errors.contains("Traceback"), "the scripted model failed on a request:\n{errors}");
    // Every operation's main outcomes were reached (the examples make sure).
    for outcome in [
        "POST /v1/chat/completions 200",
        "POST /v1/chat/completions 400",
        "POST /v1/tools/call 200",
        "POST /v1/tools/call 400",
        "POST /v1/tools/call 404",
        "GET /v1/traces/{id} 404",
        "GET /v1/models 401",
    ] {
        assert!(seen.contains_key(outcome), "no `{outcome}` in the run: {seen:?}");
    }

    // openai.models set (only a config file holds a map): the model list,
    // model names renamed upstream, and model_not_found.
    let config = work.path().join("toolrouter.toml");
    std::fs::write(&config, "[openai]\nmodels = { \"gpt-4o-mini\" = \"scripted-upstream\" }\n").unwrap();
    let config = config.to_string_lossy().to_string();
    let (_models, url) = serve(
        &work.path().join("state-models"),
        &replay,
        &model_url,
        &[("TOOLROUTER_CONFIG", &config), ("TOOLROUTER_SERVER_CLIENT_RATE", "0")],
    );
    let only = [
        "--include-operation-id",
        "listModels",
        "--include-operation-id",
        "createChatCompletion",
        "--phases",
        "examples,coverage,fuzzing",
    ];
    let seen = schemathesis(&venv, work.path(), &url, "models", 20, &only);
    for outcome in ["GET /v1/models 200", "POST /v1/chat/completions 200", "POST /v1/chat/completions 404"] {
        assert!(seen.contains_key(outcome), "no `{outcome}` in the run: {seen:?}");
    }

    // A low request rate: 429s, their bodies and their Retry-After checked
    // like every other response.
    let (_limited, url) = serve(
        &work.path().join("state-limited"),
        &replay,
        &model_url,
        &[("TOOLROUTER_SERVER_CLIENT_RATE", "2"), ("TOOLROUTER_SERVER_CLIENT_BURST", "5")],
    );
    let seen = schemathesis(&venv, work.path(), &url, "rate-limited", 5, &[]);
    assert!(seen.keys().any(|k| k.ends_with(" 429")), "no request was rate limited: {seen:?}");
    let errors = model_errors();
    assert!(!errors.contains("Traceback"), "the scripted model failed on a request:\n{errors}");
}
