//! The console (`/ui`) in a real headless browser: Debian's Chromium driven
//! by selenium (`tests/python/console_check.py`) against `toolrouter serve`
//! with the ToolBench catalog, the replay upstream and the scripted model,
//! plus one tool whose description holds HTML and script. Each page
//! renders with real data, the playground ranks and plans, an API's graph
//! link and a graph node open neighbourhoods, an execute run's trace shows
//! its moves, keys are enforced (401 without, 403 for a user key where an
//! operator's is needed), and the hostile description is shown as text.
//!
//! `TOOLROUTER_CONSOLE_SCREENSHOTS=docs/console` saves the screenshots of
//! docs/console.md.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use toolrouter::server::hash_key;

const ADMIN: &str = "console-operator-key";
const USER: &str = "console-user-key";
/// The tool whose description tries to run script in the console.
const EVIL: &str = "lookup_for_pwnedcanary";

fn evil_tool(dir: &std::path::Path) {
    let description = r#"Looks things up. <script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">"#;
    let tool = serde_json::json!({
        "tool_name": "pwnedcanary", "name": "pwnedcanary", "title": "pwnedcanary",
        "tool_description": description, "host": "pwnedcanary.p.rapidapi.com",
        "api_list": [{"name": "lookup", "url": "https://pwnedcanary.p.rapidapi.com/lookup", "method": "GET",
            "description": description, "required_parameters": [], "optional_parameters": []}]
    });
    std::fs::write(dir.join("pwnedcanary.json"), tool.to_string()).unwrap();
}

#[test]
fn the_console_renders_real_data_in_a_browser_and_escapes_what_it_shows() {
    let Some(data) = common::toolbench_dir() else { return };
    let Some(browser_python) = common::python_env("py-browser", "bin/python") else { return };
    let Some(model_python) = common::python_env("py-openai", "bin/python") else { return };
    if !std::path::Path::new("/usr/bin/chromedriver").exists() {
        crate::common::skipped("no /usr/bin/chromedriver (apt-get install chromium chromium-driver)");
        return;
    }
    let extra = tempfile::tempdir().unwrap();
    evil_tool(extra.path());
    // A tool graph learned from the ToolBench trajectories, for the graph page.
    let state = tempfile::tempdir().unwrap();
    let built = Command::new(common::binary())
        .args(["graph", "build", "--trajectories"])
        .arg(data.join("trajectories"))
        .arg("--catalog")
        .arg(data.join("tools"))
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", state.path())
        .env("TOOLROUTER_RETRIEVAL_MODE", "lexical")
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let (_model, model_url) = common::scripted_model(&model_python);
    let hashes = format!("[\"{}\"]", hash_key(USER));
    let admins = format!("[\"{}\"]", hash_key(ADMIN));
    let paths = format!("{},{}", data.join("tools").display(), extra.path().display());
    let (_server, url) = common::serve(&[
        ("TOOLROUTER_CATALOG_PATHS", &paths),
        ("TOOLROUTER_CATALOG_INCLUDE_EMBEDDED", "true"),
        ("TOOLROUTER_UPSTREAM_MODE", "replay"),
        ("TOOLROUTER_UPSTREAM_REPLAY_DIR", &data.join("cache/derived_from_trajectories").display().to_string()),
        ("TOOLROUTER_LLM_BASE_URL", &format!("{model_url}/v1")),
        ("TOOLROUTER_SERVER_API_KEY_HASHES", &hashes),
        ("TOOLROUTER_SERVER_ADMIN_KEY_HASHES", &admins),
        ("TOOLROUTER_SERVER_CLIENT_RATE", "0"),
        ("TOOLROUTER_STATE_DIR", state.path().to_str().unwrap()),
    ]);
    common::wait_ready(&url, Some(ADMIN));

    // An execute run for the traces page, made with the operator's key.
    let body = serde_json::json!({"model": "scripted", "toolrouter": {"mode": "execute"}, "messages": [{"role": "user",
        "content": "How many ecoweather Schneetage snow days at lat 789.012 lon 123.456 since 2022-09-01?"}]});
    let (status, _, answer) =
        common::http(&url, "POST", "/v1/chat/completions", Some(ADMIN), body.to_string().as_bytes());
    assert_eq!(status, 200, "{answer}");
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    let trace = answer["toolrouter"]["trace_id"].as_str().unwrap().to_string();

    // A route decision: 30 tools sent, the 20 most relevant kept.
    let tools: Vec<serde_json::Value> = (0..30)
        .map(|i| {
            let name = if i == 7 { "get_weather".to_string() } else { format!("unrelated_tool_{i}") };
            serde_json::json!({"type": "function", "function": {"name": name, "description": format!("Tool {i}."),
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})
        })
        .collect();
    let body = serde_json::json!({"model": "scripted", "tools": tools,
        "messages": [{"role": "user", "content": "What is the weather in Lisbon?"}]});
    let (status, _, answer) =
        common::http(&url, "POST", "/v1/chat/completions", Some(ADMIN), body.to_string().as_bytes());
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains(r#""trace_id""#), "a narrowed request names its kept decision: {answer}");

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/console_check.py");
    let mut check = Command::new(browser_python);
    check.arg(script).args([&url, ADMIN, USER, &trace, EVIL]);
    if let Ok(dir) = std::env::var("TOOLROUTER_CONSOLE_SCREENSHOTS") {
        check.arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir));
    }
    let out = check.stderr(Stdio::piped()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(out.status.success() && stdout.contains("ok"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
}

/// Without a browser: the page and its files are served with their types
/// and a policy that runs no inline script; the endpoints behind it keep
/// their keys (401 without, 403 for a user key where an operator's is
/// needed) and bound what they list.
#[test]
fn the_console_files_and_endpoints_keep_their_keys_and_limits() {
    let hashes = format!("[\"{}\"]", hash_key(USER));
    let admins = format!("[\"{}\"]", hash_key(ADMIN));
    let (_server, url) = common::serve(&[
        ("TOOLROUTER_SERVER_API_KEY_HASHES", &hashes),
        ("TOOLROUTER_SERVER_ADMIN_KEY_HASHES", &admins),
        ("TOOLROUTER_SERVER_CLIENT_RATE", "0"),
    ]);
    common::wait_ready(&url, Some(USER));
    for (path, kind) in [
        ("/ui", "text/html"),
        ("/ui/", "text/html"),
        ("/ui/console.js", "text/javascript"),
        ("/ui/vendor/cytoscape.min.js", "text/javascript"),
        ("/ui/vendor/uPlot.min.css", "text/css"),
    ] {
        let (status, head, _) = common::http(&url, "GET", path, None, b"");
        assert_eq!(status, 200, "{path}");
        assert!(head.contains(&format!("content-type: {kind}")), "{path}: {head}");
        assert!(head.contains("content-security-policy: default-src 'self'; script-src 'self';"), "{head}");
    }
    assert_eq!(common::http(&url, "GET", "/ui/../Cargo.toml", None, b"").0, 404);
    assert_eq!(common::http(&url, "GET", "/ui/nothing.js", None, b"").0, 404);

    let overview = "/v1/console/overview";
    assert_eq!(common::http(&url, "GET", overview, None, b"").0, 401);
    let (status, _, body) = common::http(&url, "GET", overview, Some(USER), b"");
    assert!(status == 403 && body.contains("server.admin_key_hashes"), "{status} {body}");
    let (status, _, body) = common::http(&url, "GET", overview, Some(ADMIN), b"");
    let overview: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(status == 200 && overview["catalog"]["apis"].as_u64().unwrap() > 0, "{body}");
    assert_eq!(common::http(&url, "GET", "/v1/traces?all=true", Some(USER), b"").0, 403);
    assert_eq!(common::http(&url, "GET", "/v1/traces?all=true", Some(ADMIN), b"").0, 200);
    assert_eq!(common::http(&url, "GET", "/v1/traces?limit=201", Some(USER), b"").0, 400);
    assert_eq!(common::http(&url, "GET", "/v1/graph/apis/Finish?limit=501", Some(USER), b"").0, 400);

    let (status, _, body) = common::http(&url, "POST", "/v1/plan", Some(USER), br#"{"query": ""}"#);
    assert!(status == 400 && body.contains("empty"), "{status} {body}");
    let plan = br#"{"query": "public holidays in Germany next year", "max_steps": 2}"#;
    let (status, _, body) = common::http(&url, "POST", "/v1/plan", Some(USER), plan);
    let plan: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(status == 200 && plan["steps"].as_array().is_some_and(|s| s.len() <= 2), "{body}");
    let (status, _, body) = common::http(&url, "GET", "/v1/apis/public_holidays_for_nager_date", Some(USER), b"");
    assert!(status == 200 && body.contains(r#""limits""#) && body.contains(r#""definition""#), "{body}");
    assert_eq!(common::http(&url, "GET", "/v1/apis/no_such_api_anywhere", Some(USER), b"").0, 404);
}
