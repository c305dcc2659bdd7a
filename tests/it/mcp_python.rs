//! The MCP face driven by the official `mcp` Python SDK, 2.x and 1.x, over
//! stdio and streamable HTTP (`tests/python/mcp_check.py` makes the
//! checks): initialize, tools/list, search_tools, a session tool after
//! list_changed, call_api against the replay upstream, an isError result
//! for bad arguments, plan, an unknown tool; over HTTP with API keys, and
//! the 2.x high-level client's server/discover fallback.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The Python of a test environment made by `scripts/python-env.sh`.
fn python(env: &str) -> Option<PathBuf> {
    common::python_env(env, "bin/python")
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_check.py")
}

/// The environment every toolrouter process of these tests gets.
fn engine_env(data: &Path, state: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("TOOLROUTER_STATE_DIR", state.display().to_string()),
        ("TOOLROUTER_RETRIEVAL_MODE", "lexical".into()),
        ("TOOLROUTER_CATALOG_PATHS", data.join("tools").display().to_string()),
        ("TOOLROUTER_UPSTREAM_MODE", "replay".into()),
        ("TOOLROUTER_UPSTREAM_REPLAY_DIR", data.join("cache/derived_from_trajectories").display().to_string()),
        ("TOOLROUTER_LOG_LEVEL", "warn".into()),
    ]
}

fn run_check(python: &Path, args: &[&str], env: &[(&'static str, String)]) -> String {
    let mut cmd = Command::new(python);
    cmd.arg(script()).args(args).env_remove("TOOLROUTER_CONFIG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{args:?}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("ok"), "{stdout}");
    stdout
}

/// `toolrouter mcp` over the whole ToolBench catalog with no index yet
/// (a fresh state directory, an empty embedding cache): `initialize` is
/// answered at once, and `search_tools` answers with BM25 alone while the
/// dense index is built (minutes on 2 cores), saying how far it has got.
#[test]
fn initialize_is_answered_and_search_works_while_the_index_builds() {
    let Some(data) = common::toolbench_dir() else { return };
    if !common::model_available() {
        return;
    }
    let Some(python) = python("py-mcp2") else { return };
    let (state, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_startup_check.py");
    let out = Command::new(python)
        .arg(script)
        .arg(common::binary())
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", state.path())
        .env("TOOLROUTER_EMBEDDING_CACHE_DIR", cache.path())
        .env("TOOLROUTER_CATALOG_PATHS", data.join("tools"))
        .env("TOOLROUTER_LOG_LEVEL", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("ok"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    eprintln!("{stdout}");
}

#[test]
fn sdk_2_and_1_over_stdio() {
    let Some(data) = common::toolbench_dir() else { return };
    let binary = common::binary();
    for env in ["py-mcp2", "py-mcp1"] {
        let Some(python) = python(env) else { return };
        let state = tempfile::tempdir().unwrap();
        let mut env = engine_env(&data, state.path());
        // Small pages, so that the clients follow tools/list cursors; an
        // API rate that refuses the third call.
        env.push(("TOOLROUTER_MCP_PAGE_SIZE", "2".into()));
        env.push(("TOOLROUTER_UPSTREAM_API_RATE", "0.01".into()));
        env.push(("TOOLROUTER_UPSTREAM_BURST", "2".into()));
        let out = run_check(&python, &["stdio", binary.to_str().unwrap()], &env);
        assert!(out.contains("stdio"), "{out}");
    }
}

/// `toolrouter serve` on a free port; killed (SIGTERM) when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(env: &[(&'static str, String)]) -> Server {
        let mut cmd = Command::new(common::binary());
        cmd.args(["serve", "--listen", "127.0.0.1:0"]).env_remove("TOOLROUTER_CONFIG");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let url = line.trim().rsplit(' ').next().unwrap().to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{line}");
        Server { child, url }
    }

    /// A raw HTTP/1.1 request; returns the status and the body.
    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let addr = self.url.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut head = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
        if !headers.iter().any(|(k, _)| *k == "content-length") {
            head.push_str(&format!("content-length: {}\r\n", body.len()));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        stream.write_all(format!("{head}\r\n{body}").as_bytes()).unwrap();
        let mut text = String::new();
        let _ = stream.read_to_string(&mut text);
        let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        (status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
    }

    fn wait_ready(&self, key: &str) {
        let started = Instant::now();
        loop {
            let (status, _) = self.request("GET", "/readyz", &[("authorization", &format!("Bearer {key}"))], "");
            if status == 200 {
                return;
            }
            assert!(started.elapsed() < Duration::from_secs(60), "not ready: {status}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn stop(mut self) {
        // SIGTERM: a graceful shutdown.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(15) {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("serve did not stop within 15 s of SIGTERM");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn sdk_2_and_1_over_http_with_api_keys() {
    let Some(data) = common::toolbench_dir() else { return };
    let (Some(py2), Some(py1)) = (python("py-mcp2"), python("py-mcp1")) else { return };
    let state = tempfile::tempdir().unwrap();
    let key = "test-key-7f3a";
    let hash = toolrouter::server::hash_key(key);
    let mut env = engine_env(&data, state.path());
    env.push(("TOOLROUTER_SERVER_API_KEY_HASHES", format!("[\"{hash}\"]")));
    let server = Server::start(&env);
    // Liveness and readiness need no key (probes carry none); everything else does.
    assert_eq!(server.request("GET", "/healthz", &[], "").0, 200);
    server.wait_ready(key);
    assert_eq!(server.request("GET", "/readyz", &[], "").0, 200);
    let (status, body) = server.request("GET", "/metrics", &[], "");
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("missing API key"));
    assert_eq!(server.request("GET", "/metrics", &[("authorization", "Bearer wrong")], "").0, 401);
    let mcp = format!("{}/mcp", server.url);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let (status, _) = server.request("POST", "/mcp", &[("content-type", "application/json")], init);
    assert_eq!(status, 401, "MCP without a key");
    // A 2025-06-18 client gets that version back.
    let auth = format!("Bearer {key}");
    let json_headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("authorization", auth.as_str()),
    ];
    let (status, body) = server.request("POST", "/mcp", &json_headers, init);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""protocolVersion":"2025-06-18""#) && body.contains(r#""name":"toolrouter""#), "{body}");

    let no_env: Vec<(&'static str, String)> = vec![("TOOLROUTER_LOG_LEVEL", "warn".into())];
    assert!(run_check(&py2, &["http", &mcp, key], &no_env).contains("mcp 2."));
    assert!(run_check(&py1, &["http", &mcp, key], &no_env).contains("mcp 1."));
    assert!(run_check(&py2, &["discover", &mcp, key], &no_env).contains("protocol 2026-07-28, no session"));

    // An oversized body is refused before it is read (only its head is sent).
    let huge = (2 << 20).to_string();
    let (status, _body) = server.request(
        "POST",
        "/mcp",
        &[
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("authorization", &auth),
            ("content-length", &huge),
        ],
        "",
    );
    assert_eq!(status, 413, "{_body}");

    // Malformed JSON is JSON-RPC's parse error; an unknown session is 404.
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("authorization", auth.as_str()),
    ];
    let (status, body) = server.request("POST", "/mcp", &headers, "{not json");
    assert_eq!(status, 400);
    assert!(body.contains("-32700"), "{body}");
    // A body that is not declared JSON: rmcp's 415, in JSON-RPC's shape.
    let mut text_plain = headers.to_vec();
    text_plain[0] = ("content-type", "text/plain");
    let (status, body) = server.request("POST", "/mcp", &text_plain, r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
    let error: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    assert_eq!(status, 415, "{body}");
    assert!(
        error["error"]["code"] == -32600 && error["error"]["message"].as_str().unwrap().contains("application/json"),
        "{body}"
    );
    // server/discover (2026-07-28, sessionless), by hand: the versions, no session id.
    let mut modern = headers.to_vec();
    modern.extend([("mcp-protocol-version", "2026-07-28"), ("mcp-method", "server/discover")]);
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let discover = format!(r#"{{"jsonrpc":"2.0","id":4,"method":"server/discover","params":{{{meta}}}}}"#);
    let (status, body) = server.request("POST", "/mcp", &modern, &discover);
    assert!(
        status == 200 && body.contains(r#""supportedVersions":["2025-03-26","2025-06-18","2025-11-25","2026-07-28"]"#),
        "{status} {body}"
    );
    // Without the metadata the protocol requires, a clear JSON-RPC error.
    let (status, body) =
        server.request("POST", "/mcp", &modern, r#"{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{}}"#);
    assert!(status >= 400 && body.contains(r#""id":5"#) && body.contains("_meta"), "{status} {body}");
    let mut with_session = headers.to_vec();
    with_session.push(("mcp-session-id", "no-such-session"));
    let (status, _) =
        server.request("POST", "/mcp", &with_session, r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    assert_eq!(status, 404);

    server.stop();
    // Each closed session's calls became a run of the graph.
    let out = Command::new(common::binary())
        .args(["graph", "stats", "--json"])
        .env("TOOLROUTER_STATE_DIR", state.path())
        .output()
        .unwrap();
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(stats["stats"]["online_runs"].as_u64().unwrap() >= 3, "{stats}");
    assert!(stats["stats"]["online_only_edges"].as_u64().unwrap() >= 1, "{stats}");
}

#[test]
fn langchain_mcp_adapters_load_and_call_the_tools() {
    let Some(data) = common::toolbench_dir() else { return };
    let Some(python) = python("py-langchain") else { return };
    let state = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/langchain_mcp_check.py");
    let mut cmd = Command::new(python);
    cmd.arg(script).arg(common::binary()).env_remove("TOOLROUTER_CONFIG");
    for (k, v) in engine_env(&data, state.path()) {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("ok"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
}

/// The MCP Inspector's CLI (npm), pinned.
const INSPECTOR: &str = "@modelcontextprotocol/inspector@2.12.0";

fn inspector(url: &str, key: &str, args: &[&str]) -> Value {
    let auth = format!("Authorization: Bearer {key}");
    let out = Command::new("npx")
        .args(["--yes", INSPECTOR, "--cli", url, "--transport", "http", "--header", &auth])
        .args(args)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("npx runs");
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the inspector prints JSON")
}

#[test]
fn the_mcp_inspector_cli_lists_and_calls_tools_over_http() {
    let Some(data) = common::toolbench_dir() else { return };
    if Command::new("npx").arg("--version").output().is_err() {
        crate::common::skipped("no npx (Node.js) for the MCP Inspector");
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let key = "inspector-key";
    let mut env = engine_env(&data, state.path());
    env.push(("TOOLROUTER_SERVER_API_KEY_HASHES", format!("[\"{}\"]", toolrouter::server::hash_key(key))));
    let server = Server::start(&env);
    server.wait_ready(key);
    let url = format!("{}/mcp", server.url);
    let listed = inspector(&url, key, &["--method", "tools/list"]);
    let names: Vec<&str> = listed["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["search_tools", "plan", "call_api"]);
    let called = inspector(
        &url,
        key,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "search_tools",
            "--tool-arg",
            "query=snow days at a location",
            "k=3",
        ],
    );
    assert_eq!(called["isError"], false, "{called}");
    assert_eq!(called["structuredContent"]["results"].as_array().map(Vec::len), Some(3), "{called}");
}
