//! `toolrouter serve` as an HTTP service: request ids, per-key request
//! rates (429 with Retry-After), errors in OpenAI's shape, a missing model,
//! an unreachable model (its address never shown), requests still running
//! when the shutdown grace ends (503).

use crate::common;

/// A raw request without a key: (status, headers, body).
fn request(url: &str, method: &str, path: &str, body: &str) -> (u16, String, String) {
    common::http(url, method, path, None, body.as_bytes())
}

#[test]
fn request_ids_rates_and_openai_errors() {
    let server = common::serve(&[("TOOLROUTER_SERVER_CLIENT_RATE", "0.5"), ("TOOLROUTER_SERVER_CLIENT_BURST", "3")]);
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
    let server = common::serve(&[("TOOLROUTER_SERVER_CLIENT_RATE", "0.5"), ("TOOLROUTER_SERVER_CLIENT_BURST", "2")]);
    let addr = &server.1;
    assert_eq!(request(addr, "GET", "/v1/models", "").0, 200);
    assert_eq!(request(addr, "GET", "/no/such/route/123", "").0, 404);
    assert_eq!(request(addr, "GET", "/v1/traces/no-such-trace", "").0, 404);
    assert_eq!(request(addr, "GET", "/v1/models", "").0, 429);
    // Healthy scrapes would be limited too: wait for a cell (rate 0.5/s).
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let (status, _, text) = request(addr, "GET", "/metrics", "");
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("toolrouter_requests_total{route=\"/v1/models\",status=\"200\"} 1"), "{text}");
    assert!(text.contains("route=\"/v1/traces/{id}\",status=\"404\"} 1"), "a route's template is its label: {text}");
    assert!(text.contains("route=\"other\",status=\"404\"} 1"), "unknown paths share one label: {text}");
    assert!(text.contains("toolrouter_rate_limited_total{side=\"incoming\"} 1"), "{text}");
    assert!(text.contains("toolrouter_request_duration_seconds_count{route=\"/v1/models\"}"), "{text}");
}

/// A model server that accepts connections and never answers.
fn silent_model() -> (std::net::TcpListener, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    (listener, url)
}

#[test]
fn an_unreachable_model_is_a_502_that_keeps_its_address_private() {
    // A port nothing listens on.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let base = format!("http://{free}/v1");
    let server = common::serve(&[("TOOLROUTER_LLM_BASE_URL", &base), ("TOOLROUTER_LLM_MAX_ATTEMPTS", "1")]);
    let chat = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#;
    let (status, _, body) = request(&server.1, "POST", "/v1/chat/completions", chat);
    assert_eq!(status, 502, "{body}");
    assert!(body.contains("unreachable") && !body.contains(&free.to_string()), "{body}");
    let (status, _, body) = request(&server.1, "GET", "/v1/models", "");
    assert_eq!(status, 502, "{body}");
    assert!(!body.contains(&free.to_string()), "{body}");
}

#[test]
fn requests_running_when_the_grace_ends_get_503() {
    let (_model, base) = silent_model();
    // Four serving threads, six connections: every thread that took one
    // must hear of the shutdown and answer it.
    let env = [
        ("TOOLROUTER_LLM_BASE_URL", base.as_str()),
        ("TOOLROUTER_SERVER_SHUTDOWN_GRACE_MS", "300"),
        ("TOOLROUTER_SERVER_THREADS", "4"),
    ];
    let mut server = common::serve(&env);
    let chat = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#;
    let waiting: Vec<_> = (0..6)
        .map(|_| {
            let url = server.1.clone();
            std::thread::spawn(move || common::http(&url, "POST", "/v1/chat/completions", None, chat.as_bytes()))
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(server.0.0.id() as i32, libc::SIGTERM) };
    for waiting in waiting {
        let (status, head, body) = waiting.join().unwrap();
        assert_eq!(status, 503, "{head}{body}");
        assert!(body.contains("shutting_down") && head.contains("retry-after"), "{body}");
    }
    assert!(server.0.0.wait().unwrap().success());
}

/// The floor's own errors on the Anthropic face's paths have Anthropic's
/// shape too: a request past `server.request_timeout_ms`, an unknown path
/// under `/v1/messages`.
#[test]
fn the_floors_errors_on_anthropic_paths_have_anthropics_shape() {
    let (_model, base) = silent_model();
    let env = [
        ("TOOLROUTER_LLM_BASE_URL", base.as_str()),
        ("TOOLROUTER_SERVER_REQUEST_TIMEOUT_MS", "400"),
        ("TOOLROUTER_OPENAI_EXECUTE_DEADLINE_MS", "300"),
    ];
    let server = common::serve(&env);
    let body = r#"{"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}"#;
    for (path, status, kind) in
        [("/v1/messages", 504, "timeout_error"), ("/v1/messages/batches", 404, "not_found_error")]
    {
        let (got, _, text) = request(&server.1, "POST", path, body);
        let error: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (got, &error["type"], &error["error"]["type"]),
            (status, &serde_json::json!("error"), &serde_json::json!(kind)),
            "{text}"
        );
    }
    let chat = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#;
    let (got, _, text) = request(&server.1, "POST", "/v1/chat/completions", chat);
    assert_eq!(got, 504, "{text}");
    assert!(text.contains("\"error\":{\"message\""), "OpenAI's shape elsewhere: {text}");
}

/// A stream still under way when the grace ends gets an error event that
/// the SDKs raise, not a silent cut: an execute run streaming keep-alives
/// while its (silent) model thinks.
#[test]
fn a_stream_under_way_when_the_grace_ends_gets_an_error_event() {
    let (_model, base) = silent_model();
    let env = [("TOOLROUTER_LLM_BASE_URL", base.as_str()), ("TOOLROUTER_SERVER_SHUTDOWN_GRACE_MS", "300")];
    let mut server = common::serve(&env);
    common::wait_ready(&server.1, None);
    let chat = r#"{"model": "m", "stream": true, "toolrouter": {"mode": "execute"},
        "messages": [{"role": "user", "content": "What will the weather be in Berlin tomorrow?"}]}"#;
    let url = server.1.clone();
    let streaming =
        std::thread::spawn(move || common::http(&url, "POST", "/v1/chat/completions", None, chat.as_bytes()));
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(server.0.0.id() as i32, libc::SIGTERM) };
    let (status, head, body) = streaming.join().unwrap();
    assert_eq!(status, 200, "{head}{body}");
    // The body as sent (chunked): the run's first chunk, then the error event last.
    let error = body.find("event: error\ndata: {\"type\":\"error\"").expect(&body);
    assert!(body[error..].contains("\"code\":\"shutting_down\"") && !body[error..].contains("chatcmpl"), "{body}");
    assert!(body[..error].contains("chat.completion.chunk"), "{body}");
    assert!(server.0.0.wait().unwrap().success());
}

#[test]
fn an_unknown_function_name_gets_the_closest_names() {
    // The embedded catalog is enough: the engine loads it by default.
    let server = common::serve(&[]);
    common::wait_ready(&server.1, None);
    let call = r#"{"name": "public_holiday_for_nager_date", "arguments": {}}"#;
    let (status, _, body) = request(&server.1, "POST", "/v1/tools/call", call);
    assert_eq!(status, 404, "{body}");
    let error: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["code"], "unknown_tool");
    assert_eq!(error["error"]["suggestions"][0], "public_holidays_for_nager_date", "{body}");
    assert!(error["error"]["message"].as_str().unwrap().contains("did you mean `public_holidays_for_nager_date`"));
}

/// MCP behind a load balancer under a host name: HAProxy passes
/// `Host: toolrouter.internal`; the MCP face refuses it (403, DNS
/// rebinding guard) until `server.allowed_hosts` names it, then answers
/// `initialize`; `/v1/*` answers either way.
#[test]
fn mcp_answers_under_a_host_name_it_is_told() {
    use std::io::{Read, Write};
    if std::process::Command::new("haproxy").arg("-v").output().is_err() {
        crate::common::skipped("no haproxy (apt-get install haproxy)");
        return;
    }
    let initialize = r#"{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}"#;
    let post = |port: u16| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            initialize.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(initialize.as_bytes()).unwrap();
        let mut raw = String::new();
        let _ = s.read_to_string(&mut raw);
        raw
    };
    for (allowed, status) in [(None, "403"), (Some(r#"["toolrouter.internal"]"#), "200")] {
        let env: Vec<(&str, &str)> = allowed.iter().map(|a| ("TOOLROUTER_SERVER_ALLOWED_HOSTS", *a)).collect();
        let server = common::serve(&env);
        common::wait_ready(&server.1, None);
        let backend = server.1.trim_start_matches("http://").to_string();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("haproxy.cfg");
        std::fs::write(
            &config,
            format!(
                "defaults\n  mode http\n  timeout connect 2s\n  timeout client 10s\n  timeout server 10s\n\
                 frontend f\n  bind 127.0.0.1:{port}\n  http-request set-header Host toolrouter.internal\n  \
                 default_backend b\nbackend b\n  server t {backend}\n"
            ),
        )
        .unwrap();
        let proxy = std::process::Command::new("haproxy").arg("-db").arg("-f").arg(&config).spawn().unwrap();
        let _proxy = common::Killed(proxy);
        let started = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "haproxy did not start");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let answer = post(port);
        let first = answer.lines().next().unwrap_or_default().to_string();
        assert!(first.contains(status), "allowed_hosts {allowed:?}: {answer}");
        if status == "200" {
            assert!(answer.contains("\"protocolVersion\""), "{answer}");
        }
        let (models, _, _) = common::http(&format!("http://127.0.0.1:{port}"), "GET", "/v1/models", None, b"");
        assert_eq!(models, 200, "/v1/* answers under any name");
    }
}
