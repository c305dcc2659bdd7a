//! OpenTelemetry (`[telemetry]`): `toolrouter serve` sends its spans to a
//! real OTLP/HTTP receiver (`tests/python/otlp_receiver.py`, on PyPI's
//! `opentelemetry-proto`), with the scripted model as the model server
//! and as an API of an OpenAPI spec. A client's `traceparent` is
//! continued; the spans nest (request → route → model call; request →
//! tool call) and carry the GenAI attributes; the model server and the
//! API receive the trace of the span that called them; no key, header or
//! message text is in a span unless `telemetry.capture_content` is on.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{self, Killed, python_env, wait_ready};

const KEY: &str = "otel-test-key";

/// The receiver: its process and the file its spans go to.
fn receiver(python: &Path, dir: &Path) -> (Killed, String, PathBuf) {
    let (port_file, out) = (dir.join("port"), dir.join("spans.jsonl"));
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/otlp_receiver.py");
    let child = Command::new(python).arg(script).arg(&port_file).arg(&out).stderr(Stdio::null()).spawn().unwrap();
    let started = Instant::now();
    while !port_file.exists() {
        assert!(started.elapsed() < Duration::from_secs(30), "the receiver did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let port = std::fs::read_to_string(&port_file).unwrap();
    (Killed(child), format!("http://127.0.0.1:{}", port.trim()), out)
}

/// `toolrouter serve` with telemetry to `endpoint`, the scripted model at
/// `model_url` and the spec in `catalog`.
fn serve(endpoint: &str, model_url: &str, catalog: &Path, env: &[(&str, &str)]) -> (Killed, String) {
    let state = tempfile::tempdir().unwrap().keep();
    let mut cmd = Command::new(common::binary());
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", &state)
        .env("TOOLROUTER_RETRIEVAL_MODE", "lexical")
        .env("TOOLROUTER_LOG_LEVEL", "warn")
        .env("TOOLROUTER_TELEMETRY_OTLP_ENDPOINT", endpoint)
        .env("TOOLROUTER_LLM_BASE_URL", format!("{model_url}/v1"))
        .env("TOOLROUTER_LLM_API_KEY", "model-secret-key")
        .env("TOOLROUTER_CATALOG_PATHS", catalog)
        .env("TOOLROUTER_UPSTREAM_MODE", "live")
        .env("TOOLROUTER_UPSTREAM_ALLOW_PRIVATE", "true")
        .env("TOOLROUTER_SERVER_API_KEY_HASHES", format!("[\"{}\"]", toolrouter::server::hash_key(KEY)));
    for (k, v) in env {
        cmd.env(k, v);
    }
    common::start(cmd, Stdio::null())
}

/// POST `body` to `path` with the key and `traceparent`: (status, body).
fn post(url: &str, path: &str, traceparent: &str, body: &Value) -> (u16, Value) {
    let addr = url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let body = body.to_string();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {KEY}\r\ntraceparent: {traceparent}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The spans received so far for `trace_id`, waiting until there are `least`.
fn spans_of(out: &Path, trace_id: &str, least: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(out).unwrap_or_default();
        let spans: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|s| s["trace_id"] == trace_id)
            .collect();
        if spans.len() >= least || started.elapsed() > Duration::from_secs(30) {
            return spans;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The one span named `name` among `spans`.
fn named<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found: Vec<&Value> = spans.iter().filter(|s| s["name"] == name).collect();
    assert_eq!(found.len(), 1, "one span {name:?} in {spans:#?}");
    found[0]
}

/// The parent id a W3C `traceparent` names.
fn parent_of(traceparent: &str) -> &str {
    traceparent.split('-').nth(2).unwrap_or("")
}

/// What both tests start with: the receiver, the scripted model (also the
/// API of a one-operation OpenAPI spec, `GET /echo/headers`) and the spec.
struct Setup {
    _receiver: Killed,
    endpoint: String,
    out: PathBuf,
    _model: Killed,
    model_url: String,
    spec: PathBuf,
}

fn setup(dir: &Path) -> Option<Setup> {
    let otel = python_env("py-otel", "bin/python")?;
    let python = python_env("py-openai", "bin/python")?;
    let (receiver, endpoint, out) = receiver(&otel, dir);
    let (model, model_url) = common::scripted_model(&python);
    let spec = dir.join("echo.json");
    let api = json!({"openapi": "3.0.3", "info": {"title": "Trace echo", "version": "1"},
        "servers": [{"url": model_url}],
        "paths": {"/echo/headers": {"get": {"operationId": "echoHeaders",
            "summary": "Echo the trace headers received", "responses": {"200": {"description": "the headers"}}}}}});
    std::fs::write(&spec, api.to_string()).unwrap();
    Some(Setup { _receiver: receiver, endpoint, out, _model: model, model_url, spec })
}

#[test]
fn spans_reach_a_real_collector_nested_with_their_attributes_and_the_trace_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let Some(setup) = setup(dir.path()) else { return };
    let Setup { endpoint, out, model_url, spec, .. } = &setup;
    // The collector's base URL: `/v1/traces` is added.
    let (_server, url) = serve(endpoint, model_url, spec, &[]);
    wait_ready(&url, Some(KEY));

    // A chat request in a trace the client started.
    let (trace, client_span) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let traceparent = format!("00-{trace}-{client_span}-01");
    let chat = json!({"model": "scripted", "messages": [{"role": "user", "content": "hello secret words"}]});
    let (status, answer) = post(&url, "/v1/chat/completions", &traceparent, &chat);
    assert_eq!(status, 200, "{answer}");
    let spans = spans_of(out, trace, 3);
    let request = named(&spans, "POST /v1/chat/completions");
    assert_eq!(request["parent_span_id"], client_span, "the client's trace is continued");
    assert_eq!(request["kind"], 2, "a server span");
    assert_eq!(request["attributes"]["http.response.status_code"], 200);
    assert_eq!(request["service_name"], "toolrouter");
    assert_eq!(request["attributes"]["toolrouter.face"], "openai");
    let chat_span = named(&spans, "route scripted");
    assert_eq!(chat_span["parent_span_id"], request["span_id"]);
    assert_eq!(chat_span["attributes"]["gen_ai.operation.name"], "chat");
    assert_eq!(chat_span["attributes"]["toolrouter.mode"], "route");
    let model_call = spans.iter().find(|s| s["kind"] == 3 && s["parent_span_id"] == chat_span["span_id"]);
    let model_call = model_call.unwrap_or_else(|| panic!("a model call under the chat span: {spans:#?}"));
    let attributes = &model_call["attributes"];
    assert_eq!(attributes["gen_ai.request.model"], "scripted");
    assert_eq!(attributes["gen_ai.provider.name"], "openai");
    assert_eq!(attributes["gen_ai.usage.input_tokens"], 10);
    assert_eq!(attributes["gen_ai.usage.output_tokens"], 5);
    assert_eq!(attributes["gen_ai.response.finish_reasons"], "stop");
    // The model server was called in the model call's span.
    let seen: Value = serde_json::from_str(&common::http(model_url, "GET", "/seen", None, b"").2).unwrap();
    let sent = seen.as_array().unwrap().last().unwrap()["traceparent"].as_str().unwrap_or("").to_string();
    assert!(sent.contains(trace), "the model server got the trace: {sent:?}");
    assert_eq!(parent_of(&sent), model_call["span_id"]);

    // A tool call, in another trace: its span, and the API gets the trace.
    let (tool_trace, tool_client_span) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let traceparent = format!("00-{tool_trace}-{tool_client_span}-01");
    let call = json!({"name": "echoheaders_for_trace_echo", "arguments": {}});
    let (status, called) = post(&url, "/v1/tools/call", &traceparent, &call);
    assert_eq!(status, 200, "{called}");
    let spans = spans_of(out, tool_trace, 2);
    let request = named(&spans, "POST /v1/tools/call");
    assert_eq!(request["parent_span_id"], tool_client_span);
    let tool = named(&spans, "execute_tool echoheaders_for_trace_echo");
    assert_eq!(tool["parent_span_id"], request["span_id"]);
    assert_eq!(tool["kind"], 3);
    assert_eq!(tool["attributes"]["gen_ai.operation.name"], "execute_tool");
    assert_eq!(tool["attributes"]["gen_ai.tool.name"], "echoheaders_for_trace_echo");
    assert_eq!(tool["attributes"]["toolrouter.outcome"], "ok");
    let echoed = called.to_string();
    let expected = format!("00-{tool_trace}-{}-01", tool["span_id"].as_str().unwrap());
    assert!(echoed.contains(&expected), "the API got the tool call's trace {expected}: {echoed}");

    // Nothing secret, and no content: every span of the run.
    let all = std::fs::read_to_string(out).unwrap();
    for secret in [KEY, "model-secret-key", "hello secret words", "Bearer"] {
        assert!(!all.contains(secret), "{secret:?} is in a span: {all}");
    }
    assert!(!all.contains("gen_ai.input.messages") && !all.contains("gen_ai.tool.call.arguments"), "{all}");
}

#[test]
fn with_capture_content_the_spans_carry_the_messages_and_tool_results() {
    let dir = tempfile::tempdir().unwrap();
    let Some(setup) = setup(dir.path()) else { return };
    let Setup { endpoint, out, model_url, spec, .. } = &setup;
    let traces = format!("{endpoint}/v1/traces");
    let env = [("TOOLROUTER_TELEMETRY_CAPTURE_CONTENT", "true"), ("TOOLROUTER_TELEMETRY_SERVICE_NAME", "gateway-a")];
    let (_server, url) = serve(&traces, model_url, spec, &env);
    wait_ready(&url, Some(KEY));

    let trace = "11111111111111111111111111111111";
    let traceparent = format!("00-{trace}-2222222222222222-01");
    let chat = json!({"model": "scripted", "messages": [{"role": "user", "content": "hello captured words"}]});
    assert_eq!(post(&url, "/v1/chat/completions", &traceparent, &chat).0, 200);
    let call = json!({"name": "echoheaders_for_trace_echo", "arguments": {}});
    assert_eq!(post(&url, "/v1/tools/call", &traceparent, &call).0, 200);
    let spans = spans_of(out, trace, 5);
    assert!(spans.iter().all(|s| s["service_name"] == "gateway-a"), "{spans:#?}");
    let model_call = spans.iter().find(|s| s["attributes"]["gen_ai.input.messages"].is_string()).expect("messages");
    assert!(model_call["attributes"]["gen_ai.input.messages"].as_str().unwrap().contains("hello captured words"));
    assert!(model_call["attributes"]["gen_ai.output.messages"].as_str().unwrap().contains("Hello from the scripted"));
    let tool = named(&spans, "execute_tool echoheaders_for_trace_echo");
    assert!(tool["attributes"]["gen_ai.tool.call.result"].as_str().unwrap().contains(trace), "{tool}");
    let all = std::fs::read_to_string(out).unwrap();
    assert!(!all.contains(KEY) && !all.contains("model-secret-key"), "a key is in a span");
}
