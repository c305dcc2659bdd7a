//! Federation: `toolrouter serve` with real MCP servers from the package
//! registries as catalog sources (`mcp-server-time` from PyPI over stdio,
//! `@modelcontextprotocol/server-everything` from npm over stdio and over
//! streamable HTTP) and a fixture server on the official `mcp` SDK
//! (`tests/python/downstream_fixture.py`) for what the public servers
//! cannot be made to do: hang, answer huge, list a bad schema (and, by hand,
//! a tool whose schema is not an object), add tools at
//! run time, flood `list_changed`, die. `scripts/mcp-servers.sh` installs
//! the public servers; without them the test says SKIPPED.

use crate::common;
use common::eventually;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Servers {
    time: PathBuf,
    everything: PathBuf,
    fixture_python: PathBuf,
}

fn servers() -> Option<Servers> {
    Some(Servers {
        time: common::python_env("py-mcp-servers", "bin/mcp-server-time")?,
        everything: common::python_env(
            "npm-servers",
            "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        )?,
        fixture_python: common::python_env("py-mcp1", "bin/python")?,
    })
}

fn python_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python")
}

fn wait_port(port: u16) {
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "port {port} never opened");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn config(servers: &Servers, http_port: u16, pid_file: &Path) -> String {
    format!(
        r#"
[upstream]
max_response_bytes = 100000

[[catalog.mcp_servers]]
name = "time"
command = "{time}"
args = ["--local-timezone", "UTC"]

[[catalog.mcp_servers]]
name = "everything"
command = "node"
args = ["{everything}", "stdio"]

[[catalog.mcp_servers]]
name = "everything_http"
url = "http://127.0.0.1:{http_port}/mcp"

[[catalog.mcp_servers]]
name = "fixture"
command = "{python}"
args = ["{fixture}"]
env = {{ FIXTURE_PID_FILE = "{pid}" }}
timeout_ms = 1500
"#,
        time = servers.time.display(),
        everything = servers.everything.display(),
        python = servers.fixture_python.display(),
        fixture = python_dir().join("downstream_fixture.py").display(),
        pid = pid_file.display(),
    )
}

/// `POST /v1/tools/call`: (status, body).
fn call(url: &str, name: &str, arguments: Value) -> (u16, Value) {
    let body = json!({"name": name, "arguments": arguments}).to_string();
    let (status, _, text) = common::http(url, "POST", "/v1/tools/call", None, body.as_bytes());
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

fn get(url: &str, path: &str) -> String {
    common::http(url, "GET", path, None, b"").2
}

#[test]
fn federated_mcp_servers_are_found_called_checked_and_kept_alive() {
    let Some(servers) = servers() else { return };
    let dir = tempfile::tempdir().unwrap();
    let http_port = common::free_port();
    let mut http_server = Command::new("node");
    http_server.arg(&servers.everything).arg("streamableHttp").env("PORT", http_port.to_string());
    let _http_server = common::Killed(http_server.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    wait_port(http_port);
    let pid_file = dir.path().join("fixture.pid");
    let config_path = dir.path().join("toolrouter.toml");
    std::fs::write(&config_path, config(&servers, http_port, &pid_file)).unwrap();
    let Some(model_python) = common::python_env("py-openai", "bin/python") else { return };
    let (_model, model_url) = common::scripted_model(&model_python);
    let llm = format!("{model_url}/v1");
    let (_toolrouter, url) =
        common::serve(&[("TOOLROUTER_CONFIG", config_path.to_str().unwrap()), ("TOOLROUTER_LLM_BASE_URL", &llm)]);
    common::wait_ready(&url, None);
    assert_eq!(get(&url, "/readyz"), "ready");

    // Every server's tools are callable, namespaced; arguments are checked first.
    let (status, body) = call(&url, "time__get_current_time", json!({"timezone": "Europe/Berlin"}));
    assert_eq!((status, &body["response"]["timezone"]), (200, &json!("Europe/Berlin")), "{body}");
    let (status, body) = call(&url, "time__get_current_time", json!({"tz": "Europe/Berlin"}));
    assert_eq!(status, 400, "{body}");
    let problems = body["error"]["problems"].to_string();
    assert!(problems.contains("/tz") && problems.contains("missing required parameter `timezone`"), "{problems}");
    let (status, body) = call(&url, "everything__get-sum", json!({"a": 2, "b": 3}));
    assert!(status == 200 && body["response"].to_string().contains('5'), "{body}");
    let (status, body) = call(&url, "everything_http__echo", json!({"message": "over http"}));
    assert_eq!((status, &body["response"]), (200, &json!("Echo: over http")), "{body}");
    let (status, body) = call(&url, "fixture__stats", json!({}));
    assert!(status == 200 && body["response"]["pid"].is_u64(), "JSON text comes back as JSON: {body}");

    // Search as a backend for client-side tool loading: names, definitions, references.
    let body = json!({"query": "What is the current time in a given time zone?", "k": 3}).to_string();
    let (status, _, text) = common::http(&url, "POST", "/v1/tools/search", None, body.as_bytes());
    let found: Value = serde_json::from_str(&text).unwrap();
    let names: Vec<&str> = found["data"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert!(status == 200 && names.contains(&"time__get_current_time"), "{text}");
    let hit = found["data"].as_array().unwrap().iter().find(|d| d["name"] == "time__get_current_time").unwrap();
    assert_eq!(hit["definition"]["function"]["parameters"]["required"], json!(["timezone"]), "{hit}");
    assert_eq!(found["tool_references"][0], json!({"type": "tool_reference", "tool_name": names[0]}));
    // `after`, the caller's last call, is the graph's cue: echoed when known, a 400 naming it when not.
    let body = json!({"query": "convert the time", "after": "time__get_current_time"}).to_string();
    let (status, _, text) = common::http(&url, "POST", "/v1/tools/search", None, body.as_bytes());
    let found: Value = serde_json::from_str(&text).unwrap();
    assert!(status == 200 && found["after"] == "time__get_current_time", "{text}");
    assert!(found["data"][0]["why"]["follows"].is_number(), "{text}");
    let body = json!({"query": "convert the time", "after": "time__get_curent_time"}).to_string();
    let (status, _, text) = common::http(&url, "POST", "/v1/tools/search", None, body.as_bytes());
    let error: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((status, &error["error"]["param"]), (400, &json!("after")), "{text}");
    assert!(text.contains("time__get_current_time"), "the closest name is suggested: {text}");

    // Plan mode offers the downstream tool to the model.
    let chat = json!({"model": "scripted", "messages": [{"role": "user", "content": "What is the current time in the Asia/Tokyo time zone?"}],
        "toolrouter": {"mode": "plan"}});
    let (status, _, text) = common::http(&url, "POST", "/v1/chat/completions", None, chat.to_string().as_bytes());
    assert_eq!(status, 200, "{text}");
    let (_, _, seen) = common::http(&model_url, "GET", "/seen", None, b"");
    let seen: Value = serde_json::from_str(&seen).unwrap();
    let offered = seen.as_array().and_then(|s| s.last()).map(|s| s["tools"].to_string()).unwrap_or_default();
    assert!(offered.contains("time__get_current_time"), "plan mode offered {offered}");

    // A tool whose schema cannot be used is kept and called unchecked, and the answer says so.
    let (status, body) = call(&url, "fixture__bad_schema", json!({"a": "x"}));
    assert_eq!((status, &body["response"]), (200, &json!("unchecked {\"a\": \"x\"}")), "{body}");
    assert!(body.to_string().contains("not checked"), "the answer says the arguments were not checked: {body}");

    // A call that never answers times out (and is cancelled); the server still serves.
    let started = Instant::now();
    let (status, body) = call(&url, "fixture__hang", json!({}));
    assert_eq!((status, &body["error"]["code"]), (504, &json!("timeout")), "{body}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let (status, body) = call(&url, "fixture__echo", json!({"text": "still here"}));
    assert_eq!((status, &body["response"]), (200, &json!("still here")), "{body}");

    // A huge result is cut to upstream.max_response_bytes, and the trace says so.
    let (status, body) = call(&url, "fixture__huge", json!({"bytes": 1_000_000}));
    assert_eq!(status, 200, "{body}");
    let outcome = body["trace"]["attempts"][0]["outcome"].as_str().unwrap_or_default();
    assert!(outcome.contains("cut from") && outcome.contains("to 100000 bytes"), "{outcome}");

    // A flood of list_changed is one re-list; the new tool joins the catalog.
    let (status, body) = call(&url, "fixture__add_tool", json!({"name": "flooded", "flood": 50}));
    assert_eq!(status, 200, "{body}");
    assert!(
        eventually(Duration::from_secs(15), || call(&url, "fixture__flooded", json!({})).0 == 200),
        "the added tool becomes callable"
    );
    let (_, stats) = call(&url, "fixture__stats", json!({}));
    let lists = stats["response"]["list_calls"].as_u64().unwrap();
    assert!(lists <= 4, "50 notifications made {lists} tools/list calls");

    // A tool added downstream is searched at once (the index is carried
    // over, not rebuilt); a removed one never appears again.
    let search = |query: &str| -> Vec<String> {
        let body = json!({"query": query, "k": 20}).to_string();
        let (status, _, text) = common::http(&url, "POST", "/v1/tools/search", None, body.as_bytes());
        assert_eq!(status, 200, "{text}");
        let found: Value = serde_json::from_str(&text).unwrap();
        found["data"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap().to_string()).collect()
    };
    let description = "Translates Klingon poetry into Elvish verse, stanza by stanza";
    let (status, body) = call(&url, "fixture__add_tool", json!({"name": "klingon_verse", "description": description}));
    assert_eq!(status, 200, "{body}");
    let query = "Translate this Klingon poem into Elvish verse";
    assert!(
        eventually(Duration::from_secs(10), || search(query).first().map(String::as_str)
            == Some("fixture__klingon_verse")),
        "the added tool is found first: {:?}",
        search(query)
    );
    let (status, body) = call(&url, "fixture__remove_tool", json!({"name": "klingon_verse"}));
    assert_eq!(status, 200, "{body}");
    assert!(
        eventually(Duration::from_secs(10), || call(&url, "fixture__klingon_verse", json!({})).0 == 404),
        "the removed tool is no longer callable"
    );
    for query in [query, "klingon_verse", "Klingon Elvish stanza"] {
        let names = search(query);
        assert!(!names.iter().any(|n| n.contains("klingon")), "a removed tool never appears: {names:?}");
    }

    // Through the MCP face, with both SDKs: search, call, refuse, list_changed.
    for (env, tool) in [("py-mcp2", "added_for_sdk_2"), ("py-mcp1", "added_for_sdk_1")] {
        let Some(python) = common::python_env(env, "bin/python") else { continue };
        let out = Command::new(python)
            .arg(python_dir().join("downstream_check.py"))
            .args([&format!("{url}/mcp"), tool])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{env}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    }

    // A killed server is reported (readyz, the call's error), then reconnected.
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    assert!(
        eventually(Duration::from_secs(5), || get(&url, "/readyz")
            .contains("degraded: the MCP server `fixture` is down")),
        "readyz says the fixture is down: {}",
        get(&url, "/readyz")
    );
    let (status, body) = call(&url, "fixture__echo", json!({"text": "anyone?"}));
    assert_eq!((status, &body["error"]["code"]), (503, &json!("unavailable")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("reconnecting"), "{body}");
    assert!(eventually(Duration::from_secs(30), || get(&url, "/readyz") == "ready"), "{}", get(&url, "/readyz"));
    let (status, body) = call(&url, "fixture__echo", json!({"text": "back"}));
    assert_eq!((status, &body["response"]), (200, &json!("back")), "{body}");
    let metrics = get(&url, "/metrics");
    assert!(metrics.contains("toolrouter_mcp_server_reconnects_total{server=\"fixture\"} 1"), "{metrics}");
    assert!(metrics.contains("toolrouter_mcp_server_up{server=\"time\"} 1"), "{metrics}");
}

/// The API nodes of the tool graph in `state` (`toolrouter graph stats`).
fn graph_nodes(state: &Path) -> u64 {
    let out = Command::new(common::binary())
        .args(["graph", "stats", "--json"])
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", state)
        .output()
        .unwrap();
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    stats["stats"]["api_nodes"].as_u64().unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&out.stdout)))
}

/// Servers that do not start, answer garbage or never answer are reported
/// and the rest keeps working; a server down at the next start keeps its
/// last tools (they answer "unavailable"); one removed from the config is
/// gone, and the tool graph keeps what it learned of it.
#[test]
fn broken_servers_are_reported_and_a_removed_one_keeps_its_history() {
    let Some(python) = common::python_env("py-mcp1", "bin/python") else { return };
    let (dir, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let fixture = format!(
        "[[catalog.mcp_servers]]\nname = \"fixture\"\ncommand = \"{}\"\nargs = [\"{}\"]\n",
        python.display(),
        python_dir().join("downstream_fixture.py").display()
    );
    let broken = format!(
        r#"
[[catalog.mcp_servers]]
name = "missing"
command = "/nonexistent/toolrouter-test-program"

[[catalog.mcp_servers]]
name = "garbage"
command = "{python}"
args = ["-c", "import time; print('this is not JSON-RPC', flush=True); time.sleep(60)"]
connect_timeout_ms = 1500

[[catalog.mcp_servers]]
name = "silent"
command = "{python}"
args = ["-c", "import time; time.sleep(60)"]
connect_timeout_ms = 1500

[[catalog.mcp_servers]]
name = "wrong-answer"
command = "{python}"
args = ["-c", "print('{{\"jsonrpc\": \"2.0\", \"id\": 0, \"result\": 5}}', flush=True)"]
connect_timeout_ms = 1500

[[catalog.mcp_servers]]
name = "malformed"
command = "{python}"
args = ["{malformed}"]

[[catalog.mcp_servers]]
name = "unreachable"
url = "http://127.0.0.1:1/mcp"
connect_timeout_ms = 1500
"#,
        python = python.display(),
        malformed = python_dir().join("malformed_tools_server.py").display()
    );
    let run = |config: &str| {
        let path = dir.path().join("toolrouter.toml");
        std::fs::write(&path, config).unwrap();
        let state = state.path().to_str().unwrap();
        let served = common::serve(&[("TOOLROUTER_CONFIG", path.to_str().unwrap()), ("TOOLROUTER_STATE_DIR", state)]);
        common::wait_ready(&served.1, None);
        served
    };

    let (first, url) = run(&format!("{fixture}{broken}"));
    let ready = get(&url, "/readyz");
    for name in ["missing", "garbage", "silent", "wrong-answer", "unreachable"] {
        assert!(ready.contains(&format!("the MCP server `{name}` is down")), "{ready}");
    }
    assert!(ready.contains("the answer to `initialize` is not an initialize result"), "{ready}");
    assert!(!ready.contains("CustomResult") && !ready.contains("Some("), "no Rust type names: {ready}");
    assert!(!ready.contains("rmcp::") && !ready.contains("Transport ["), "no Rust type names: {ready}");
    assert!(ready.contains("the connection failed while"), "an unreachable server says why: {ready}");
    assert!(ready.starts_with("ready, degraded") && !ready.contains("`fixture`"), "{ready}");
    assert!(ready.contains("cannot start `/nonexistent/toolrouter-test-program`"), "{ready}");
    let metrics = get(&url, "/metrics");
    assert!(metrics.contains("toolrouter_mcp_server_up{server=\"silent\"} 0"), "{metrics}");
    assert!(metrics.contains("toolrouter_mcp_server_up{server=\"fixture\"} 1"), "{metrics}");
    let (status, body) = call(&url, "fixture__echo", json!({"text": "the rest works"}));
    assert_eq!((status, &body["response"]), (200, &json!("the rest works")), "{body}");
    // One tool it cannot read leaves the server up with its other tools.
    assert!(!ready.contains("`malformed`"), "{ready}");
    let (status, body) = call(&url, "malformed__good", json!({"text": "kept"}));
    assert_eq!((status, &body["response"]), (200, &json!("kept")), "{body}");
    let (status, _) = call(&url, "malformed__broken", json!({}));
    assert_eq!(status, 404, "the unreadable tool is left out");
    drop(first);
    let nodes = graph_nodes(state.path());
    assert!(nodes >= 1, "the call was learned");

    // Down at the next start: its tools are kept, and say it is unavailable.
    let down = "[[catalog.mcp_servers]]\nname = \"fixture\"\ncommand = \"/nonexistent/toolrouter-test-program\"\n";
    let (second, url) = run(down);
    let (status, body) = call(&url, "fixture__echo", json!({"text": "anyone?"}));
    assert_eq!((status, &body["error"]["code"]), (503, &json!("unavailable")), "{body}");
    drop(second);

    // Removed: its tools are gone; the graph keeps what it learned.
    let (third, url) = run("");
    let (status, body) = call(&url, "fixture__echo", json!({"text": "gone"}));
    assert_eq!(status, 404, "{body}");
    drop(third);
    assert_eq!(graph_nodes(state.path()), nodes);
}
