//! Reloading without a restart: `toolrouter serve --config FILE`, the file
//! rewritten, then SIGHUP. Keys, the per-key rate, upstream credentials and
//! downstream MCP servers change in place; a config that does not load is
//! refused whole (the old one keeps serving, the log says why); a key
//! that cannot change in place is named in the log, and its old value
//! stays.

use crate::common;
use common::eventually;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use toolrouter::server::hash_key;

/// `toolrouter serve` on its config file, its log (stderr) in a file.
struct Served {
    dir: tempfile::TempDir,
    child: common::Killed,
    url: String,
    /// Reloads asked for so far.
    hangups: usize,
}

impl Served {
    /// Starts `serve` with `config` (lexical retrieval, a fresh state directory).
    fn start(config: &str) -> Served {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("toolrouter.toml"), config).unwrap();
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let mut cmd = Command::new(common::binary());
        cmd.arg("serve")
            .arg("--config")
            .arg(dir.path().join("toolrouter.toml"))
            .env_remove("TOOLROUTER_CONFIG")
            .env("TOOLROUTER_STATE_DIR", dir.path().join("state"))
            .env("TOOLROUTER_RETRIEVAL_MODE", "lexical")
            .env("TOOLROUTER_LOG_LEVEL", "info");
        let (child, url) = common::start(cmd, Stdio::from(log));
        Served { dir, child, url, hangups: 0 }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.path("log")).unwrap_or_default()
    }

    /// Writes the new config, sends SIGHUP and waits until that reload
    /// has ended (applied or refused: the log says which).
    fn reload(&mut self, config: &str) {
        std::fs::write(self.path("toolrouter.toml"), config).unwrap();
        self.hangup();
    }

    /// SIGHUP, and the wait for its reload to end.
    fn hangup(&mut self) {
        assert_eq!(unsafe { libc::kill(self.child.0.id() as i32, libc::SIGHUP) }, 0);
        self.hangups += 1;
        let ended = |log: &str| log.matches("configuration reloaded").count() + log.matches("not reloaded").count();
        let n = self.hangups;
        assert!(
            eventually(Duration::from_secs(20), || ended(&self.log()) >= n),
            "reload {n} never ended: {}",
            self.log()
        );
        assert!(self.child.0.try_wait().unwrap().is_none(), "SIGHUP ended the server: {}", self.log());
    }

    /// The status of `GET /metrics` (a protected route that needs no engine) with `key`.
    fn status(&self, key: &str) -> u16 {
        common::http(&self.url, "GET", "/metrics", Some(key), b"").0
    }

    /// `POST /v1/tools/call`: (status, body).
    fn call(&self, name: &str, arguments: Value) -> (u16, Value) {
        let body = json!({"name": name, "arguments": arguments}).to_string();
        let (status, _, text) = common::http(&self.url, "POST", "/v1/tools/call", None, body.as_bytes());
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }
}

fn keys(keys: &[&str]) -> String {
    let hashes: Vec<String> = keys.iter().map(|k| format!("\"{}\"", hash_key(k))).collect();
    format!("[server]\nlisten = \"127.0.0.1:0\"\napi_key_hashes = [{}]\n", hashes.join(", "))
}

#[test]
fn reload_swaps_api_keys_in_place() {
    let mut served = Served::start(&keys(&["key-a"]));
    assert_eq!((served.status("key-a"), served.status("key-b")), (200, 401));
    served.reload(&keys(&["key-b"]));
    assert_eq!((served.status("key-a"), served.status("key-b")), (401, 200), "{}", served.log());
    let log = served.log();
    assert!(log.contains("applied server.api_key_hashes"), "{log}");
    assert!(!log.contains("key-b") && !log.contains("restart to apply"), "{log}");
}

#[test]
fn reload_changes_the_client_rate() {
    let strict = format!("{}client_rate = 0.01\nclient_burst = 1\n", keys(&["key-a"]));
    let loose = format!("{}client_rate = 1000.0\nclient_burst = 100\n", keys(&["key-a"]));
    let mut served = Served::start(&strict);
    assert_eq!((served.status("key-a"), served.status("key-a")), (200, 429));
    served.reload(&loose);
    let statuses: Vec<u16> = (0..5).map(|_| served.status("key-a")).collect();
    assert_eq!(statuses, [200; 5], "{}", served.log());
    served.reload(&strict);
    assert_eq!((served.status("key-a"), served.status("key-a")), (200, 429), "a new limiter, starting full");
    assert!(served.log().contains("server.client_burst, server.client_rate"), "{}", served.log());
}

#[test]
fn reload_refuses_a_bad_config_whole() {
    let mut served = Served::start(&keys(&["key-a"]));
    // Not TOML: refused, the old keys stay.
    served.reload(&format!("{}[[[", keys(&["key-b"])));
    assert_eq!((served.status("key-a"), served.status("key-b")), (200, 401));
    assert!(served.log().contains("is not valid TOML"), "{}", served.log());
    // A value that fails its check, beside a good one: refused whole.
    let mut invalid = keys(&["key-b"]);
    invalid.push_str("client_rate = -1.0\n");
    served.reload(&invalid);
    assert_eq!((served.status("key-a"), served.status("key-b")), (200, 401));
    assert!(served.log().contains("config key `server.client_rate`"), "{}", served.log());
    // A secret that cannot be read: refused whole, naming where it was to come from.
    let unreadable = format!(
        "{}[[upstream.credentials]]\nhost = \"api.example.com\"\nsecret = {{ file = \"no-such-token\" }}\n",
        keys(&["key-b"])
    );
    served.reload(&unreadable);
    assert_eq!((served.status("key-a"), served.status("key-b")), (200, 401));
    let log = served.log();
    assert!(log.contains("the credential of api.example.com") && log.contains("no-such-token"), "{log}");
    assert_eq!(log.matches("the one in use stays").count(), 3, "{log}");
    // Reloading still works after refusals.
    served.reload(&keys(&["key-b"]));
    assert_eq!((served.status("key-a"), served.status("key-b")), (401, 200), "{}", served.log());
}

#[test]
fn reload_names_what_needs_a_restart_and_keeps_it() {
    let mut served = Served::start(&keys(&["key-a"]));
    let moved = keys(&["key-a"]).replace("127.0.0.1:0", "127.0.0.1:1") + "threads = 3\n[planner]\nmax_steps = 3\n";
    served.reload(&moved);
    let log = served.log();
    for key in ["server.listen", "server.threads", "planner.max_steps"] {
        assert!(log.contains(&format!("{key} changed: restart to apply")), "{key}: {log}");
    }
    assert!(log.contains("applied no changed key"), "{log}");
    assert_eq!(served.status("key-a"), 200, "still serving on the old address");
    // Said again at the next reload: it still is not applied.
    served.hangup();
    assert_eq!(served.log().matches("server.listen changed").count(), 2, "{}", served.log());
}

/// A service that echoes the credentials it was sent, on its own thread.
fn echo_service() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            listener.set_nonblocking(true).unwrap();
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let echo = |headers: axum::http::HeaderMap| async move {
                let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
                axum::Json(json!({"authorization": header("authorization"), "x_api_key": header("x-api-key")}))
            };
            let app = axum::Router::new().fallback(echo);
            axum::serve(listener, app).await.unwrap();
        });
    });
    port
}

fn spec(port: u16) -> Value {
    json!({
        "openapi": "3.0.3",
        "info": {"title": "secured", "version": "1"},
        "servers": [{"url": format!("http://127.0.0.1:{port}")}],
        "paths": {"/whoami": {"get": {"operationId": "whoami", "summary": "Who the service thinks is calling"}}}
    })
}

#[test]
fn reload_reads_credentials_again() {
    let port = echo_service();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("secured.json"), spec(port).to_string()).unwrap();
    let head = format!("[catalog]\npaths = [\"{}\"]\n[server]\nlisten = \"127.0.0.1:0\"\n", dir.path().display());
    let credential = |scheme: &str, file: &str| {
        format!(
            "[[upstream.credentials]]\nhost = \"127.0.0.1:{port}\"\nscheme = \"{scheme}\"\nname = \"x-api-key\"\nallow_private = true\nsecret = {{ file = \"{file}\" }}\n"
        )
    };
    let mut served = Served::start(&head);
    common::wait_ready(&served.url, None);
    // Without a credential the loopback host is refused (a private address).
    let (status, body) = served.call("whoami_for_secured", json!({}));
    assert_ne!(status, 200, "{body}");
    // A credential added (allowing its private host), read from its file.
    std::fs::write(served.path("token"), "first-token\n").unwrap();
    served.reload(&format!("{head}{}", credential("bearer", "token")));
    let (status, body) = served.call("whoami_for_secured", json!({}));
    assert_eq!((status, &body["response"]["authorization"]), (200, &json!("Bearer first-token")), "{body}");
    // The same config, the file rewritten: the new secret.
    std::fs::write(served.path("token"), "second-token\n").unwrap();
    served.hangup();
    let (_, body) = served.call("whoami_for_secured", json!({}));
    assert_eq!(body["response"]["authorization"], json!("Bearer second-token"), "{body}");
    // Another scheme and file.
    std::fs::write(served.path("key"), "third-key\n").unwrap();
    served.reload(&format!("{head}{}", credential("header", "key")));
    let (_, body) = served.call("whoami_for_secured", json!({}));
    assert_eq!(body["response"], json!({"authorization": null, "x_api_key": "third-key"}), "{body}");
    let log = served.log();
    assert!(!log.contains("first-token") && !log.contains("third-key"), "no secret in the log: {log}");
}

fn fixture_server(name: &str, python: &Path, pid_file: &Path) -> String {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/downstream_fixture.py");
    format!(
        "[[catalog.mcp_servers]]\nname = \"{name}\"\ncommand = \"{}\"\nargs = [\"{}\"]\nenv = {{ FIXTURE_PID_FILE = \"{}\" }}\n",
        python.display(),
        fixture.display(),
        pid_file.display()
    )
}

/// The names `POST /v1/tools/search` finds for `query`.
fn search(url: &str, query: &str) -> Vec<String> {
    let body = json!({"query": query, "k": 10}).to_string();
    let (_, _, text) = common::http(url, "POST", "/v1/tools/search", None, body.as_bytes());
    let found: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let data = found["data"].as_array().cloned().unwrap_or_default();
    data.iter().filter_map(|d| d["name"].as_str().map(str::to_string)).collect()
}

fn alive(pid_file: &Path) -> bool {
    let pid: i32 = std::fs::read_to_string(pid_file).unwrap().trim().parse().unwrap();
    unsafe { libc::kill(pid, 0) == 0 }
}

#[test]
fn reload_adds_and_removes_downstream_servers() {
    let Some(python) = common::python_env("py-mcp1", "bin/python") else { return };
    let head = "[server]\nlisten = \"127.0.0.1:0\"\n";
    let mut served = Served::start(head);
    common::wait_ready(&served.url, None);
    assert_eq!(served.call("alpha__echo", json!({"text": "hi"})).0, 404);
    // Added: started, its tools callable and found.
    let alpha_pid = served.path("alpha.pid");
    served.reload(&format!("{head}{}", fixture_server("alpha", &python, &alpha_pid)));
    let called = eventually(Duration::from_secs(30), || served.call("alpha__echo", json!({"text": "hi"})).0 == 200);
    assert!(called, "the added server's tool is callable: {}", served.log());
    let (_, body) = served.call("alpha__echo", json!({"text": "hi"}));
    assert_eq!(body["response"], json!("hi"), "{body}");
    assert!(search(&served.url, "echoes the text").contains(&"alpha__echo".to_string()));
    assert!(alive(&alpha_pid));
    // Replaced by another: the first is stopped and its tools leave the catalog.
    let beta_pid = served.path("beta.pid");
    served.reload(&format!("{head}{}", fixture_server("beta", &python, &beta_pid)));
    assert!(
        eventually(Duration::from_secs(30), || served.call("beta__echo", json!({"text": "b"})).0 == 200),
        "{}",
        served.log()
    );
    assert!(eventually(Duration::from_secs(10), || served.call("alpha__echo", json!({"text": "x"})).0 == 404));
    let names = search(&served.url, "echoes the text");
    assert!(names.contains(&"beta__echo".to_string()) && !names.contains(&"alpha__echo".to_string()), "{names:?}");
    assert!(eventually(Duration::from_secs(10), || !alive(&alpha_pid)), "the removed server's program was stopped");
    assert!(served.log().contains("removed=[\"alpha\"]"), "{}", served.log());
}

/// `toolrouter mcp` reloads too; it has no listener, so `[server]` is not
/// reported, and a bad config is refused as in `serve`.
#[test]
fn reload_in_mcp_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let (config, log) = (dir.path().join("toolrouter.toml"), dir.path().join("log"));
    std::fs::write(&config, "").unwrap();
    let mut mcp = Command::new(common::binary());
    mcp.arg("mcp")
        .arg("--config")
        .arg(&config)
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", dir.path().join("state"))
        .env("TOOLROUTER_RETRIEVAL_MODE", "lexical")
        .env("TOOLROUTER_LOG_LEVEL", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()));
    let mut child = common::Killed(mcp.spawn().unwrap());
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    // SIGHUP is handled once the engine has started loading ("ready" follows).
    assert!(eventually(Duration::from_secs(30), || read().contains("ready")), "{}", read());
    let ended = |n: usize| {
        eventually(Duration::from_secs(20), || {
            let log = read();
            log.matches("configuration reloaded").count() + log.matches("not reloaded").count() >= n
        })
    };
    std::fs::write(&config, "[server]\nlisten = \"127.0.0.1:1\"\n[planner]\nmax_steps = 3\n").unwrap();
    assert_eq!(unsafe { libc::kill(child.0.id() as i32, libc::SIGHUP) }, 0);
    assert!(ended(1), "{}", read());
    std::fs::write(&config, "[[[").unwrap();
    assert_eq!(unsafe { libc::kill(child.0.id() as i32, libc::SIGHUP) }, 0);
    assert!(ended(2), "{}", read());
    let log = read();
    assert!(log.contains("planner.max_steps changed: restart to apply"), "{log}");
    assert!(!log.contains("server.listen"), "mcp has no listener: {log}");
    assert!(log.contains("is not valid TOML"), "{log}");
    assert!(child.0.try_wait().unwrap().is_none(), "SIGHUP ended mcp: {log}");
}

/// The catalog's sources are read again at every reload: a spec added to
/// a catalog directory is searched and called, a spec removed leaves the
/// catalog (never found, no longer callable), and an unchanged catalog is
/// left alone.
#[test]
fn reload_reads_the_catalog_sources_again() {
    let port = echo_service();
    let specs = tempfile::tempdir().unwrap();
    std::fs::write(specs.path().join("secured.json"), spec(port).to_string()).unwrap();
    let config = format!(
        "[catalog]\npaths = [\"{}\"]\n[server]\nlisten = \"127.0.0.1:0\"\n[upstream]\nallow_private = true\n",
        specs.path().display()
    );
    let mut served = Served::start(&config);
    common::wait_ready(&served.url, None);
    assert_eq!(search(&served.url, "who is calling the service")[..1], ["whoami_for_secured".to_string()]);
    served.hangup();
    assert!(!served.log().contains("sources changed"), "an unchanged catalog is left alone: {}", served.log());
    // Written again with the same text: read, found the same, left alone.
    std::fs::write(specs.path().join("secured.json"), spec(port).to_string()).unwrap();
    served.hangup();
    let log = served.log();
    assert!(log.contains("written but hold the same catalog") && !log.contains("sources changed"), "{log}");

    let harbour = json!({
        "openapi": "3.0.3",
        "info": {"title": "harbour", "version": "1"},
        "servers": [{"url": format!("http://127.0.0.1:{port}")}],
        "paths": {"/tides": {"get": {"operationId": "tide_tables", "summary": "High and low water times for a harbour"}}}
    });
    std::fs::write(specs.path().join("harbour.json"), harbour.to_string()).unwrap();
    served.hangup();
    assert!(served.log().contains("the catalog's sources changed"), "{}", served.log());
    let found = search(&served.url, "when is high water in the harbour");
    assert_eq!(found.first().map(String::as_str), Some("tide_tables_for_harbour"), "{found:?}");
    let (status, body) = served.call("tide_tables_for_harbour", json!({}));
    assert_eq!(status, 200, "an added API is callable: {body}");

    std::fs::remove_file(specs.path().join("secured.json")).unwrap();
    served.hangup();
    for query in ["who is calling the service", "whoami secured", "Who the service thinks is calling"] {
        let found = search(&served.url, query);
        assert!(!found.iter().any(|n| n.contains("whoami")), "a removed API never appears: {found:?}");
    }
    assert_eq!(served.call("whoami_for_secured", json!({})).0, 404);
    assert_eq!(served.call("tide_tables_for_harbour", json!({})).0, 200);
}
