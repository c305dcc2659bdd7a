//! Helpers shared by the integration tests.

use std::path::PathBuf;
use std::sync::OnceLock;

use toolrouter::catalog::{Catalog, Sources};

/// The ToolBench data directory: `$TOOLBENCH_DIR`, else `../shared/datasets/toolbench`
/// beside the repository. `None` (the test says it is skipping) only when
/// neither exists; a `TOOLBENCH_DIR` that does not exist is a failure.
pub fn toolbench_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("TOOLBENCH_DIR") {
        let dir = PathBuf::from(dir);
        assert!(dir.join("tools").is_dir(), "TOOLBENCH_DIR={} has no tools/ directory", dir.display());
        return Some(dir);
    }
    let sibling = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets/toolbench");
    if sibling.join("tools").is_dir() {
        return Some(sibling);
    }
    skipped("no ToolBench data (set TOOLBENCH_DIR); this test needs ../shared/datasets/toolbench");
    None
}

/// The full ToolBench catalog (tool files only), loaded once per test binary.
pub fn toolbench_catalog() -> Option<&'static Catalog> {
    static CATALOG: OnceLock<Option<Catalog>> = OnceLock::new();
    CATALOG
        .get_or_init(|| {
            let dir = toolbench_dir()?;
            let sources = Sources { paths: vec![dir.join("tools")], ..Sources::default() };
            Some(Catalog::load(&sources).expect("the ToolBench catalog loads"))
        })
        .as_ref()
}

/// Says a test cannot run here and why (`SKIPPED: …`, and the test
/// passes), except in CI (`CI=true`), where `.ci/run` installs every test's
/// data and tools: there a skip is a broken install and fails the test.
pub fn skipped(why: &str) {
    eprintln!("SKIPPED: {why}");
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(!ci, "a test was skipped in CI ({why}): .ci/run should have installed what it needs");
}

/// The path of the built `toolrouter` binary.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_toolrouter"))
}

/// Whether the embedding model and ONNX Runtime are where the default
/// config looks (`scripts/fetch-models.sh` puts them there; the test
/// command runs it). Tests that embed say SKIPPED without them.
pub fn model_available() -> bool {
    let config = toolrouter::config::EmbeddingConfig::default();
    let ok = config.model_dir().join("model.onnx").is_file() && config.onnxruntime().is_file();
    if !ok {
        skipped("no embedding model (run scripts/fetch-models.sh)");
    }
    ok
}

/// Kills a child process when the test ends, however it ends.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` (a server that prints "… http://127.0.0.1:PORT" first) and
/// returns it with that URL.
pub fn start(mut cmd: std::process::Command, stderr: std::process::Stdio) -> (Killed, String) {
    use std::io::BufRead;
    let mut child = cmd.stdout(std::process::Stdio::piped()).stderr(stderr).spawn().expect("starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().rsplit(' ').next().unwrap_or("").to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");
    (Killed(child), url)
}

/// `toolrouter serve` on a free port with a fresh state directory, lexical
/// retrieval, the default config and `env` on top; its URL.
pub fn serve(env: &[(&str, &str)]) -> (Killed, String) {
    let state = tempfile::tempdir().unwrap().keep();
    let mut cmd = std::process::Command::new(binary());
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", &state)
        .env("TOOLROUTER_RETRIEVAL_MODE", "lexical")
        .env("TOOLROUTER_LOG_LEVEL", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    start(cmd, std::process::Stdio::null())
}

/// The scripted model server (`tests/python/scripted_model.py`) run by
/// `python`: the process and its URL.
pub fn scripted_model(python: &std::path::Path) -> (Killed, String) {
    let mut model = std::process::Command::new(python);
    model.arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/scripted_model.py"));
    start(model, std::process::Stdio::null())
}

/// `program` (e.g. `bin/python`) of the test environment `env` made by
/// `scripts/python-env.sh` (under `$TOOLROUTER_PYENVS`, else
/// `~/.cache/toolrouter`); `None`, saying SKIPPED, when it is not there.
pub fn python_env(env: &str, program: &str) -> Option<PathBuf> {
    let root = std::env::var_os("TOOLROUTER_PYENVS")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/toolrouter")))?;
    let path = root.join(env).join(program);
    if path.exists() {
        return Some(path);
    }
    skipped(&format!("no {} (run scripts/python-env.sh)", path.display()));
    None
}

/// A raw HTTP/1.1 request to `url` (`http://host:port`), with `key` as the
/// bearer token if given: (status, lower-cased head, body). Status 0 when
/// nothing answers.
pub fn http(url: &str, method: &str, path: &str, key: Option<&str>, body: &[u8]) -> (u16, String, String) {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://");
    let Ok(mut s) = std::net::TcpStream::connect(addr) else { return (0, String::new(), String::new()) };
    let auth = key.map(|k| format!("authorization: Bearer {k}\r\n")).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\n{auth}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    if s.write_all(head.as_bytes()).is_err() {
        return (0, String::new(), String::new());
    }
    // The server may answer (413) before it has read the whole body.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_string())
}

/// Waits (up to a minute) until `GET /readyz` answers 200.
pub fn wait_ready(url: &str, key: Option<&str>) {
    let started = std::time::Instant::now();
    while http(url, "GET", "/readyz", key, b"").0 != 200 {
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "not ready");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Sets `cmd` (`toolrouter`, or a client that starts it) to run on the
/// ToolBench catalog in `data` with the replay upstream, lexical
/// retrieval, `state` as its state directory and no config from the
/// environment.
pub fn on_toolbench_replay<'a>(
    cmd: &'a mut std::process::Command,
    data: &std::path::Path,
    state: &std::path::Path,
) -> &'a mut std::process::Command {
    cmd.env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", state)
        .env("TOOLROUTER_RETRIEVAL_MODE", "lexical")
        .env("TOOLROUTER_CATALOG_PATHS", data.join("tools"))
        .env("TOOLROUTER_UPSTREAM_MODE", "replay")
        .env("TOOLROUTER_UPSTREAM_REPLAY_DIR", data.join("cache/derived_from_trajectories"))
}

/// `POST /mcp` by hand, with `headers` (the session's, a key): the whole
/// answer, head and body (an SSE stream ends with its response).
pub fn mcp_post(url: &str, headers: &[(&str, &str)], body: &str) -> String {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    stream.write_all(format!("{head}\r\n{body}").as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).into_owned()
}

/// The `mcp-session-id` of an answer to `initialize` ([`mcp_post`]).
pub fn mcp_session(answer: &str) -> String {
    answer
        .lines()
        .find_map(|l| l.to_ascii_lowercase().starts_with("mcp-session-id:").then(|| l[15..].trim().to_string()))
        .unwrap_or_else(|| panic!("no session id: {answer}"))
}

/// A port nothing listens on now (bound and let go: another process
/// could take it in between, which tests on loopback can live with).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Polls `check` every 20 ms until it holds or `limit` has passed; whether it held.
pub fn eventually(limit: std::time::Duration, mut check: impl FnMut() -> bool) -> bool {
    let started = std::time::Instant::now();
    while started.elapsed() < limit {
        if check() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}
