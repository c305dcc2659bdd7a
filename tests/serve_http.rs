//! `toolrouter serve` as an HTTP service: request ids, per-key request
//! rates (429 with Retry-After), errors in OpenAI's shape, a missing model.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

struct Server(Child, String);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(env: &[(&str, &str)]) -> Server {
    let state = tempfile::tempdir().unwrap().keep();
    let mut cmd = Command::new(common::binary());
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", &state)
        .env("TOOLROUTER_RETRIEVAL_MODE", "lexical")
        .env("TOOLROUTER_LOG_LEVEL", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().rsplit("http://").next().unwrap().to_string();
    Server(child, addr)
}

/// A raw request: (status, headers, body).
fn request(addr: &str, method: &str, path: &str, body: &str) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_string())
}

#[test]
fn request_ids_rates_and_openai_errors() {
    let server = start(&[("TOOLROUTER_SERVER_CLIENT_RATE", "0.5"), ("TOOLROUTER_SERVER_CLIENT_BURST", "3")]);
    let addr = &server.1;
    let (status, head, _) = request(addr, "GET", "/healthz", "");
    assert_eq!(status, 200);
    assert!(head.contains("x-request-id: "), "{head}");

    // No model configured: 503 in OpenAI's shape.
    let chat = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#;
    let (status, _, body) = request(addr, "POST", "/v1/chat/completions", chat);
    assert_eq!(status, 503, "{body}");
    let error: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["code"], "no_upstream_model");
    assert!(error["error"]["type"].is_string() && error["error"].get("param").is_some());

    // Burst 3: two more requests pass, the next is refused until the rate allows.
    assert_eq!(request(addr, "GET", "/v1/models", "").0, 200);
    assert_eq!(request(addr, "POST", "/v1/chat/completions", "{oops").0, 400);
    let (status, head, body) = request(addr, "GET", "/v1/models", "");
    assert_eq!(status, 429, "{body}");
    assert!(head.contains("retry-after: "), "{head}");
    assert!(body.contains("rate_limit_error"), "{body}");
    // Health checks are never limited.
    assert_eq!(request(addr, "GET", "/healthz", "").0, 200);
}

#[test]
fn metrics_count_requests_and_refusals() {
    let server = start(&[("TOOLROUTER_SERVER_CLIENT_RATE", "0.5"), ("TOOLROUTER_SERVER_CLIENT_BURST", "2")]);
    let addr = &server.1;
    assert_eq!(request(addr, "GET", "/v1/models", "").0, 200);
    assert_eq!(request(addr, "GET", "/no/such/route/123", "").0, 404);
    assert_eq!(request(addr, "GET", "/v1/models", "").0, 200);
    assert_eq!(request(addr, "GET", "/v1/models", "").0, 429);
    // Healthy scrapes would be limited too: wait for a cell (rate 0.5/s).
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let (status, _, text) = request(addr, "GET", "/metrics", "");
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("toolrouter_requests_total{route=\"/v1/models\",status=\"200\"} 2"), "{text}");
    assert!(text.contains("route=\"other\",status=\"404\"} 1"), "unknown paths share one label: {text}");
    assert!(text.contains("toolrouter_rate_limited_total{side=\"incoming\"} 1"), "{text}");
    assert!(text.contains("toolrouter_request_duration_seconds_count{route=\"/v1/models\"}"), "{text}");
}
