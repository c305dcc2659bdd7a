//! Replicas sharing rate limits through a real `redis-server` (the Debian
//! package, started here on a loopback port): three `toolrouter serve`
//! processes, driven at ten times a host's rate, let through what one
//! would; with Redis stopped mid-traffic they keep serving (no 5xx), say
//! they are degraded, and their local shares still hold the total.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The host's rate (calls per second) and burst under test.
const RATE: f64 = 20.0;
const BURST: usize = 5;

/// A `redis-server` on a free loopback port, or `None` (saying SKIPPED)
/// without the program.
pub(crate) fn redis_server() -> Option<(common::Killed, u16)> {
    if Command::new("redis-server").arg("--version").output().is_err() {
        crate::common::skipped("no redis-server (apt-get install redis-server)");
        return None;
    }
    let port = common::free_port();
    Some((redis_on(port), port))
}

/// A `redis-server` on `port` (without persistence), once it accepts connections.
pub(crate) fn redis_on(port: u16) -> common::Killed {
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(10), "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    common::Killed(child)
}

/// An upstream that answers every request at once and counts them.
pub(crate) fn counting_upstream() -> (u16, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut stream = stream;
                loop {
                    let mut line = String::new();
                    let mut head = 0;
                    while reader.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
                        head += 1;
                        if line == "\r\n" {
                            break;
                        }
                        line.clear();
                    }
                    if head == 0 {
                        return;
                    }
                    counter.fetch_add(1, Ordering::SeqCst);
                    let body = r#"{"base":"EUR","rates":{"GBP":0.86}}"#;
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, hits)
}

/// Calls the same API through every replica, from 40 threads at about
/// 200 calls per second in all (ten times the host's rate), for `seconds`.
/// Returns the statuses seen.
fn drive(urls: &[String], seconds: f64) -> Vec<u16> {
    let body = br#"{"name": "latest_rates_for_frankfurter", "arguments": {"base": "EUR"}}"#;
    drive_path(urls, seconds, "POST", "/v1/tools/call", body)
}

/// [`drive`] with any request.
fn drive_path(
    urls: &[String],
    seconds: f64,
    method: &'static str,
    path: &'static str,
    body: &'static [u8],
) -> Vec<u16> {
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..40)
        .map(|i| {
            let (url, stop) = (urls[i % urls.len()].clone(), stop.clone());
            std::thread::spawn(move || {
                let mut statuses = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    statuses.push(common::http(&url, method, path, None, body).0);
                    std::thread::sleep(Duration::from_millis(200).saturating_sub(started.elapsed()));
                }
                statuses
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    threads.into_iter().flat_map(|t| t.join().unwrap()).collect()
}

#[test]
fn three_replicas_share_a_hosts_rate_and_survive_redis_going_away() {
    let Some((mut redis, redis_port)) = redis_server() else { return };
    let (upstream_port, hits) = counting_upstream();
    let redis_url = format!("redis://127.0.0.1:{redis_port}");
    let base_url = format!("http://127.0.0.1:{upstream_port}");
    let allowed = format!("127.0.0.1:{upstream_port}");
    let (rate, burst) = (RATE.to_string(), BURST.to_string());
    let env = [
        ("TOOLROUTER_CLUSTER_REDIS_URL", redis_url.as_str()),
        ("TOOLROUTER_CLUSTER_REPLICAS", "3"),
        ("TOOLROUTER_UPSTREAM_BASE_URL", base_url.as_str()),
        ("TOOLROUTER_UPSTREAM_ALLOWED_HOSTS", allowed.as_str()),
        ("TOOLROUTER_UPSTREAM_ALLOW_PRIVATE", "true"),
        ("TOOLROUTER_UPSTREAM_HOST_RATE", rate.as_str()),
        ("TOOLROUTER_UPSTREAM_BURST", burst.as_str()),
        ("TOOLROUTER_UPSTREAM_API_RATE", "0"),
        ("TOOLROUTER_UPSTREAM_GLOBAL_RATE", "0"),
        ("TOOLROUTER_UPSTREAM_CLIENT_RATE", "0"),
        ("TOOLROUTER_UPSTREAM_MAX_WAIT_MS", "50"),
        ("TOOLROUTER_SERVER_CLIENT_RATE", "0"),
    ];
    let replicas: Vec<(common::Killed, String)> = (0..3).map(|_| common::serve(&env)).collect();
    let urls: Vec<String> = replicas.iter().map(|(_, url)| url.clone()).collect();
    for url in &urls {
        common::wait_ready(url, None);
        assert_eq!(common::http(url, "GET", "/readyz", None, b"").2, "ready");
    }

    // Shared: the three together let through one host's rate (one burst).
    let seconds = 4.0;
    let statuses = drive(&urls, seconds);
    let passed = hits.swap(0, Ordering::SeqCst);
    let allowed = RATE * seconds + BURST as f64;
    eprintln!("shared: {} calls offered, {passed} reached the host (limit {allowed})", statuses.len());
    assert!(statuses.len() as f64 > 8.0 * RATE * seconds, "offered {} calls", statuses.len());
    assert!(statuses.iter().all(|s| *s == 200 || *s == 429), "only answers and refusals: {statuses:?}");
    assert!(passed as f64 <= allowed * 1.02, "{passed} calls reached the host; the limit allows {allowed}");
    assert!(passed as f64 >= RATE * seconds * 0.9, "only {passed} calls reached the host");
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), passed);
    for url in &urls {
        let metrics = common::http(url, "GET", "/metrics", None, b"").2;
        assert!(metrics.contains("toolrouter_cluster_up 1"), "{metrics}");
        assert!(metrics.contains("toolrouter_cluster_fallbacks_total 0"), "{metrics}");
    }

    // Redis gone mid-traffic: no 5xx, degraded, each replica its share.
    redis.0.kill().unwrap();
    redis.0.wait().unwrap();
    let statuses = drive(&urls, 3.0);
    let passed = hits.swap(0, Ordering::SeqCst);
    assert!(statuses.iter().all(|s| *s == 200 || *s == 429), "no 5xx without Redis: {statuses:?}");
    // Each replica its share of the rate and of the burst (rounded up).
    let allowed = RATE * 3.0 + (3 * BURST.div_ceil(3)) as f64;
    eprintln!("without Redis: {} calls offered, {passed} reached the host (shares allow {allowed})", statuses.len());
    assert!(passed as f64 <= allowed, "{passed} calls reached the host without Redis; the shares allow {allowed}");
    for url in &urls {
        let ready = common::http(url, "GET", "/readyz", None, b"").2;
        assert!(ready.starts_with("ready, degraded") && ready.contains("Redis"), "{ready}");
    }
}

/// The server's per-key request rate (`server.client_rate`) holds across
/// the replicas too: a client spread over three is admitted at one rate.
#[test]
fn three_replicas_share_a_clients_request_rate() {
    let Some((_redis, redis_port)) = redis_server() else { return };
    let redis_url = format!("redis://127.0.0.1:{redis_port}");
    let env = [
        ("TOOLROUTER_CLUSTER_REDIS_URL", redis_url.as_str()),
        ("TOOLROUTER_CLUSTER_REPLICAS", "3"),
        ("TOOLROUTER_SERVER_CLIENT_RATE", "20"),
        ("TOOLROUTER_SERVER_CLIENT_BURST", "5"),
    ];
    let replicas: Vec<(common::Killed, String)> = (0..3).map(|_| common::serve(&env)).collect();
    let urls: Vec<String> = replicas.iter().map(|(_, url)| url.clone()).collect();
    for url in &urls {
        common::wait_ready(url, None);
    }
    let seconds = 3.0;
    let statuses = drive_path(&urls, seconds, "GET", "/metrics", b"");
    let admitted = statuses.iter().filter(|s| **s == 200).count();
    let allowed = 20.0 * seconds + 5.0;
    eprintln!("requests: {} offered, {admitted} admitted (limit {allowed})", statuses.len());
    assert!(statuses.iter().all(|s| *s == 200 || *s == 429), "{statuses:?}");
    assert!(
        admitted as f64 <= allowed * 1.02 && admitted as f64 >= 20.0 * seconds * 0.9,
        "{admitted} admitted, limit {allowed}"
    );
}

/// An execute run's trace kept by one replica is readable on another with
/// the same key, not with another key; it expires; a trace over the size
/// cap stays on the replica that made it.
#[tokio::test(flavor = "multi_thread")]
async fn a_trace_made_on_one_replica_is_read_on_another_by_its_key_only() {
    use toolrouter::chat::traces::Traces;
    use toolrouter::cluster::Cluster;
    let Some((_redis, redis_port)) = redis_server() else { return };
    let mut config = toolrouter::config::ClusterConfig {
        redis_url: format!("redis://127.0.0.1:{redis_port}"),
        max_trace_bytes: 10_000,
        ..Default::default()
    };
    config.trace_ttl_s = 2;
    // Two replicas: each its own connection and its own local store.
    let replica = || Traces::shared(10, Cluster::open(&config).unwrap(), &config);
    let (a, b) = (replica(), replica());
    let trace = serde_json::json!({"id": "run-1", "steps": [{"function": "f", "ok": true}]});
    a.insert("run-1".into(), Some("key-a".into()), trace.clone());
    a.insert("big".into(), Some("key-a".into()), serde_json::json!({"text": "x".repeat(20_000)}));
    let mut seen = None;
    for _ in 0..50 {
        seen = b.get("run-1", Some("key-a")).await;
        if seen.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(seen.as_deref(), Some(&trace), "readable on the other replica by its key");
    assert!(b.get("run-1", Some("key-b")).await.is_none(), "not by another key");
    assert!(b.get("run-1", None).await.is_none(), "not without a key");
    assert!(b.get("big", Some("key-a")).await.is_none(), "over the size cap: not shared");
    assert!(a.get("big", Some("key-a")).await.is_some(), "but kept where it was made");
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(b.get("run-1", Some("key-a")).await.is_none(), "expired after cluster.trace_ttl_s");
}

/// A 2025 MCP session lives on the replica that made it: its id sent to
/// another replica gets the protocol's answer for an unknown session (404,
/// so the client initializes again); a sessionless 2026-07-28 request is
/// answered by any replica.
#[test]
fn an_mcp_session_on_the_wrong_replica_is_told_to_start_again() {
    let Some((_redis, redis_port)) = redis_server() else { return };
    let redis_url = format!("redis://127.0.0.1:{redis_port}");
    let env = [("TOOLROUTER_CLUSTER_REDIS_URL", redis_url.as_str()), ("TOOLROUTER_CLUSTER_REPLICAS", "2")];
    let (a, b) = (common::serve(&env), common::serve(&env));
    common::wait_ready(&a.1, None);
    common::wait_ready(&b.1, None);
    let post = common::mcp_post;
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let answer = post(&a.1, &[], init);
    let session = common::mcp_session(&answer);
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let same = post(&a.1, &[("mcp-session-id", &session), ("mcp-protocol-version", "2025-11-25")], list);
    assert!(same.starts_with("HTTP/1.1 200") && same.contains("search_tools"), "{same}");
    let other = post(&b.1, &[("mcp-session-id", &session), ("mcp-protocol-version", "2025-11-25")], list);
    assert!(other.starts_with("HTTP/1.1 404"), "an unknown session on the other replica: {other}");
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let stateless = format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{{{meta}}}}}"#);
    for url in [&a.1, &b.1] {
        let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")];
        let answer = post(url, &headers, &stateless);
        assert!(answer.starts_with("HTTP/1.1 200") && answer.contains("search_tools"), "{answer}");
    }
}

/// `scripts/cluster-demo.sh --check`: Redis, three replicas and HAProxy
/// come up on loopback, requests through HAProxy reach every replica, and
/// each shares its limits through Redis.
#[test]
fn the_cluster_demo_runs() {
    for tool in ["redis-server", "haproxy", "curl"] {
        if Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().map_or(true, |o| !o.status.success())
        {
            crate::common::skipped("no {tool}");
            return;
        }
    }
    let binary = common::binary();
    let dir = binary.parent().unwrap();
    // The script looks for target/release; give it this test's binary instead.
    let fake = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(fake.path().join("release")).unwrap();
    std::os::unix::fs::symlink(dir.join("toolrouter"), fake.path().join("release/toolrouter")).unwrap();
    let base = 20_000 + (std::process::id() % 20_000) as u16;
    let out = Command::new(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/cluster-demo.sh"))
        .arg("--check")
        .env("CARGO_TARGET_DIR", fake.path())
        .env("TOOLROUTER_DEMO_PORT", base.to_string())
        .env_remove("TOOLROUTER_CONFIG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    eprintln!("{stdout}");
    assert!(stdout.contains("6 200"), "six searches answered through HAProxy: {stdout}");
    for i in 1..=3 {
        let line = stdout.lines().find(|l| l.starts_with(&format!("replica{i} served"))).unwrap_or_default();
        assert!(!line.contains("served 0") && line.contains("toolrouter_cluster_up 1"), "{stdout}");
    }
}

/// `previous_response_id` works on any replica: a response kept by one
/// (the state directory and Redis) is continued on the other, plain and
/// streamed, by its key only (`tests/python/responses_replicas_check.py`,
/// the official `openai` SDK against the scripted model).
#[test]
fn a_response_kept_on_one_replica_is_continued_on_another() {
    let Some(python) = common::python_env("py-openai", "bin/python") else { return };
    let Some((_redis, redis_port)) = redis_server() else { return };
    let (_model, model_url) = common::scripted_model(&python);
    let redis_url = format!("redis://127.0.0.1:{redis_port}");
    let (key, other) = ("replica-key", "replica-other-key");
    let hashes = format!("[\"{}\", \"{}\"]", toolrouter::server::hash_key(key), toolrouter::server::hash_key(other));
    let llm = format!("{model_url}/v1");
    let env = [
        ("TOOLROUTER_CLUSTER_REDIS_URL", redis_url.as_str()),
        ("TOOLROUTER_CLUSTER_REPLICAS", "2"),
        ("TOOLROUTER_LLM_BASE_URL", llm.as_str()),
        ("TOOLROUTER_SERVER_API_KEY_HASHES", hashes.as_str()),
    ];
    let (_a, url_a) = common::serve(&env);
    let (_b, url_b) = common::serve(&env);
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/responses_replicas_check.py");
    let out = Command::new(&python).arg(script).args([&url_a, &url_b, &model_url, key, other]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("ok"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
}
