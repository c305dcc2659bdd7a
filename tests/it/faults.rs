//! Faults and abuse that must never become silent wrong answers:
//!
//! * the model upstream's fault matrix through the official `openai` SDK
//!   (`tests/python/openai_faults_check.py` against the scripted model's
//!   "fault:NAME" modes): 500, 429 with and without `Retry-After`, a hang,
//!   a slow answer, garbage, HTML, plain JSON to a stream, early EOF,
//!   reset, no `[DONE]` — plain and streamed, each answered with a status
//!   or stream event a client can act on, within the request's budget;
//! * hundreds of idle, slow-header and stalled-body connections, closed by
//!   the timeouts while a normal client is served; stalled requests from
//!   one address do not use up another's key-less rate.

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use common::{python_env, serve};

#[test]
fn every_model_fault_reaches_the_sdk_as_something_it_can_act_on() {
    let Some(python) = python_env("py-openai", "bin/python") else { return };
    let scripts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let (_model, model_url) = common::scripted_model(&python);
    let key = "faults-key";
    let hashes = format!("[\"{}\"]", toolrouter::server::hash_key(key));
    let (budget_s, llm_timeout_s) = (6, 2);
    let (_server, url) = serve(&[
        ("TOOLROUTER_LLM_BASE_URL", &format!("{model_url}/v1")),
        ("TOOLROUTER_SERVER_API_KEY_HASHES", &hashes),
        ("TOOLROUTER_SERVER_REQUEST_TIMEOUT_MS", &(budget_s * 1000).to_string()),
        ("TOOLROUTER_OPENAI_EXECUTE_DEADLINE_MS", "5000"),
        ("TOOLROUTER_LLM_TIMEOUT_MS", &(llm_timeout_s * 1000).to_string()),
        ("TOOLROUTER_LLM_MAX_ATTEMPTS", "2"),
        ("TOOLROUTER_LLM_BACKOFF_MS", "100"),
        ("TOOLROUTER_LLM_MAX_RETRY_WAIT_MS", "1500"),
    ]);
    let out = Command::new(&python)
        .arg(scripts.join("openai_faults_check.py"))
        .args([&url, &model_url, key, &budget_s.to_string(), &llm_timeout_s.to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("ok"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
}

/// Connects to `addr` from the loopback address `from`.
async fn connect(from: &str, addr: std::net::SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(addr).await.unwrap()
}

/// The first bytes the server sends (up to 12: the status line's start),
/// within `limit`.
async fn status_within(mut s: TcpStream, limit: Duration) -> Option<String> {
    let mut head = [0u8; 12];
    tokio::time::timeout(limit, s.read_exact(&mut head)).await.ok()?.ok()?;
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// Reads until the server closes the connection (within `limit`); what it sent.
async fn closed_within(mut s: TcpStream, limit: Duration) -> Option<String> {
    let mut out = Vec::new();
    match tokio::time::timeout(limit, s.read_to_end(&mut out)).await {
        Ok(_) => Some(String::from_utf8_lossy(&out).into_owned()),
        Err(_) => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_slow_and_stalled_connections_are_closed_while_others_are_served() {
    let (_server, url) = serve(&[
        ("TOOLROUTER_SERVER_HEADER_READ_TIMEOUT_MS", "1000"),
        ("TOOLROUTER_SERVER_BODY_TIMEOUT_MS", "1000"),
        ("TOOLROUTER_SERVER_CLIENT_RATE", "0.01"),
        ("TOOLROUTER_SERVER_CLIENT_BURST", "20"),
    ]);
    let addr: std::net::SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    // 300 sockets that never send a byte, 100 that send headers a byte at a
    // time and never finish, 50 keep-alive connections idle after their
    // answer, 50 requests whose body never comes (all from 127.0.0.2).
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(connect("127.0.0.2", addr).await);
    }
    let mut slow = Vec::new();
    for _ in 0..100 {
        let mut s = connect("127.0.0.2", addr).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-slow: ").await.unwrap();
        slow.push(s);
    }
    let mut kept_alive = Vec::new();
    for _ in 0..50 {
        let mut s = connect("127.0.0.2", addr).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
        let mut head = [0u8; 12];
        s.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        kept_alive.push(s);
    }
    let mut stalled = Vec::new();
    for _ in 0..50 {
        let mut s = connect("127.0.0.2", addr).await;
        let head = "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"model\"";
        s.write_all(head.as_bytes()).await.unwrap();
        stalled.push(s);
    }
    // Meanwhile a normal client (another address) is served, and its rate
    // is its own: the stalled requests used up 127.0.0.2's burst, not its.
    let dribble = tokio::spawn(async move {
        for _ in 0..8 {
            for s in &mut slow {
                let _ = s.write_all(b"a").await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        slow
    });
    for _ in 0..10 {
        let mut s = connect("127.0.0.1", addr).await;
        let body = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#;
        let request = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(request.as_bytes()).await.unwrap();
        let answer = closed_within(s, Duration::from_secs(5)).await.expect("answered");
        // No model is configured: 503 in OpenAI's shape, not 429 or a hang.
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    }
    let slow = dribble.await.unwrap();

    let limit = Duration::from_secs(4);
    let (mut never_closed, mut timeouts, mut refused) = (0, 0, 0);
    for s in idle.into_iter().chain(slow).chain(kept_alive) {
        never_closed += usize::from(closed_within(s, limit).await.is_none());
    }
    for s in stalled {
        match status_within(s, limit).await.as_deref() {
            Some("HTTP/1.1 408") => timeouts += 1,
            Some("HTTP/1.1 429") => refused += 1,
            other => panic!("a stalled body got {other:?}"),
        }
    }
    assert_eq!(never_closed, 0, "idle, slow-header and idle keep-alive connections must be closed");
    assert_eq!((timeouts, refused), (20, 30), "burst 20 from 127.0.0.2: 20 stalled then 408, 30 refused at once");
}

#[test]
fn a_long_streamed_execute_run_sends_keep_alive_comments() {
    let Some(python) = python_env("py-openai", "bin/python") else { return };
    let (_model, model_url) = common::scripted_model(&python);
    let (_server, url) =
        serve(&[("TOOLROUTER_LLM_BASE_URL", &format!("{model_url}/v1")), ("TOOLROUTER_OPENAI_KEEP_ALIVE_MS", "200")]);
    common::wait_ready(&url, None);
    // Every model request of the run takes 1 s (the scripted model's "fault:slow").
    let body = serde_json::json!({"model": "scripted", "stream": true, "toolrouter": {"mode": "execute"},
        "messages": [{"role": "user", "content": "What is the weather in Berlin? fault:slow"}]});
    let (status, head, events) = common::http(&url, "POST", "/v1/chat/completions", None, body.to_string().as_bytes());
    assert_eq!(status, 200, "{events}");
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    let role = events.find("\"role\":\"assistant\"").expect("the role chunk");
    let kept = events.find(": keep-alive").expect("keep-alive comments while the run works");
    let done = events.rfind("data: [DONE]").expect("the end");
    assert!(role < kept && kept < done, "{events}");
}
