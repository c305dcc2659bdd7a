//! The OpenAI face in process: `toolrouter serve`'s router with a scripted
//! model behind the `ChatModel` trait (no model server, no Python), so that
//! what the face sends the model and what it answers the client can be
//! checked exactly. The Python client tests (`openai_python`, `faults`)
//! stay: they prove real SDKs read these answers.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use toolrouter::config::Config;
use toolrouter::llm::{ChatModel, Chunk, Chunks, Completion, LlmError, RequestBody, chunks_of};
use toolrouter::server::{App, router};
use tower::ServiceExt;

/// A model that answers from a script, one answer per request, and keeps
/// every request it was sent.
#[derive(Default)]
pub(crate) struct ScriptedModel {
    answers: Mutex<VecDeque<Result<Value, LlmError>>>,
    seen: Mutex<Vec<Value>>,
}

impl ScriptedModel {
    pub(crate) fn new(answers: impl IntoIterator<Item = Result<Value, LlmError>>) -> Arc<ScriptedModel> {
        Arc::new(ScriptedModel { answers: Mutex::new(answers.into_iter().collect()), seen: Mutex::default() })
    }

    fn next(&self, body: &Value) -> Result<Completion, LlmError> {
        self.seen.lock().unwrap().push(body.clone());
        let answer = self.answers.lock().unwrap().pop_front();
        let answer = answer.unwrap_or_else(|| Err(LlmError::Malformed("script ran out".into())))?;
        Ok(serde_json::from_value(answer).expect("a completion"))
    }

    fn seen(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }
}

impl ChatModel for ScriptedModel {
    fn complete<'a>(
        &'a self,
        body: &'a RequestBody,
        _deadline: Instant,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        // What an HTTP model server would receive.
        Box::pin(async move { self.next(&serde_json::from_slice(&body.to_json(false)).unwrap()) })
    }

    fn stream<'a>(&'a self, body: &'a RequestBody, _deadline: Instant) -> BoxFuture<'a, Result<Chunks, LlmError>> {
        Box::pin(async move {
            let sent = serde_json::from_slice(&body.to_json(true)).unwrap();
            let chunks: Vec<Result<Chunk, LlmError>> = chunks_of(&self.next(&sent)?).into_iter().map(Ok).collect();
            Ok(Box::pin(futures_util::stream::iter(chunks)) as Chunks)
        })
    }

    fn models(&self) -> BoxFuture<'_, Result<Value, LlmError>> {
        Box::pin(async { Ok(json!({"object": "list", "data": [{"id": "scripted", "object": "model"}]})) })
    }
}

/// A completion whose message is `message`, with extra top-level fields.
pub(crate) fn completion(message: Value) -> Result<Value, LlmError> {
    Ok(json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "upstream-model",
        "system_fingerprint": "fp_scripted", "service_tier": "default",
        "choices": [{"index": 0, "message": message, "finish_reason":
            if message.get("tool_calls").is_some() { "tool_calls" } else { "stop" }}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}))
}

pub(crate) fn tool_call(name: &str, arguments: Value) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": name, "arguments": arguments.to_string()}}]})
}

fn weather_tool() -> Value {
    json!({"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}})
}

/// Many unrelated tools, and the weather tool among them.
fn many_tools(n: usize) -> Vec<Value> {
    let topics = ["stock quotes", "movie reviews", "flight status", "recipe search", "currency rates"];
    let mut tools: Vec<Value> = (0..n)
        .map(|i| {
            json!({"type": "function", "function": {"name": format!("tool_{i}"),
                "description": format!("Looks up {} (variant {i})", topics[i % topics.len()]),
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}})
        })
        .collect();
    tools.insert(n / 2, weather_tool());
    tools
}

fn app(model: Arc<ScriptedModel>, tweak: impl FnOnce(&mut Config)) -> axum::Router {
    let mut config = Config::default();
    config.log.level = "warn".into();
    tweak(&mut config);
    router(App::with_model(&config, Some(model as Arc<dyn ChatModel>)))
}

/// Sends `body` to `/v1/chat/completions`: status, headers and body text.
pub(crate) async fn post(app: &axum::Router, body: Value) -> (StatusCode, axum::http::HeaderMap, String) {
    let request = Request::post("/v1/chat/completions")
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(30), app.clone().oneshot(request)).await.unwrap().unwrap();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 16 << 20).await.unwrap();
    (parts.status, parts.headers, String::from_utf8(bytes.to_vec()).unwrap())
}

/// The `data:` events of a server-sent event stream, `[DONE]` as a string.
fn events(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap_or_else(|_| Value::String(d.to_string())))
        .collect()
}

#[tokio::test]
async fn route_mode_narrows_the_tools_and_keeps_unknown_fields_both_ways() {
    let model = ScriptedModel::new([completion(tool_call("get_weather", json!({"city": "Berlin"})))]);
    let app = app(model.clone(), |c| c.openai.max_tools = 5);
    let body = json!({"model": "gpt-x", "messages": [{"role": "user", "content": "What is the weather in Berlin?"}],
        "tools": many_tools(40), "temperature": 0.2, "a_field_openai_adds_next_year": {"x": 1}});
    let (status, _, text) = post(&app, body).await;
    assert_eq!(status, StatusCode::OK, "{text}");

    let seen = model.seen();
    assert_eq!(seen.len(), 1, "one model request");
    let sent = &seen[0];
    let names: Vec<&str> =
        sent["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 5, "openai.max_tools tools reach the model: {names:?}");
    assert!(names.contains(&"get_weather"), "the tool the request needs is kept: {names:?}");
    assert_eq!(sent["temperature"], 0.2);
    assert_eq!(sent["a_field_openai_adds_next_year"], json!({"x": 1}), "unknown request fields pass through");

    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["system_fingerprint"], "fp_scripted", "unknown answer fields pass through");
    assert_eq!(answer["service_tier"], "default");
    let call = &answer["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather");
    assert_eq!(
        serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap()["city"],
        "Berlin"
    );
}

#[tokio::test]
async fn an_invalid_tool_call_is_repaired_through_the_model() {
    let model = ScriptedModel::new([
        completion(tool_call("get_weather", json!({"city": "Berlin", "unit": "kelvin"}))),
        completion(tool_call("get_weather", json!({"city": "Berlin", "unit": "celsius"}))),
    ]);
    let app = app(model.clone(), |_| {});
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "Weather in Berlin?"}], "tools": [weather_tool()]});
    let (status, _, text) = post(&app, body).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let seen = model.seen();
    assert_eq!(seen.len(), 2, "the invalid call goes back to the model once");
    let note = seen[1]["messages"].to_string();
    assert!(
        note.contains("kelvin") && note.contains("celsius") && note.contains("fahrenheit"),
        "the repair note names the problem: {note}"
    );
    let answer: Value = serde_json::from_str(&text).unwrap();
    let arguments = answer["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(arguments).unwrap()["unit"], "celsius");
    assert_eq!(answer["usage"]["total_tokens"], 30, "both model requests' tokens are counted");
}

#[tokio::test]
async fn a_streamed_answer_carries_the_checked_tool_call_then_done() {
    let model = ScriptedModel::new([completion(tool_call("get_weather", json!({"city": "Paris"})))]);
    let app = app(model.clone(), |_| {});
    let body = json!({"model": "m", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [weather_tool()]});
    let (status, headers, text) = post(&app, body).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(headers["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let events = events(&text);
    assert_eq!(events.last(), Some(&json!("[DONE]")), "{text}");
    let deltas: Vec<&Value> =
        events.iter().filter_map(|e| e["choices"][0]["delta"]["tool_calls"][0].as_object().map(|_| e)).collect();
    let first = &deltas[0]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!((first["index"].as_u64(), first["function"]["name"].as_str()), (Some(0), Some("get_weather")), "{text}");
    let arguments: String = deltas
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&arguments).unwrap()["city"], "Paris");
    let finish = events.iter().find_map(|e| e["choices"][0]["finish_reason"].as_str());
    assert_eq!(finish, Some("tool_calls"));
    let usage = events.iter().find(|e| e["choices"] == json!([])).expect("a usage chunk");
    assert_eq!(usage["usage"]["total_tokens"], 15);
    assert!(events.iter().all(|e| e == "[DONE]" || e["object"] == "chat.completion.chunk"), "{text}");
}

#[tokio::test]
async fn model_failures_map_to_openai_errors_with_retry_advice() {
    let limited =
        LlmError::Status { status: 429, message: "slow down".into(), retry_after: Some(Duration::from_millis(2500)) };
    let cases = [
        (limited, StatusCode::TOO_MANY_REQUESTS, "upstream_rate_limited", Some("3"), None),
        (LlmError::Timeout(100), StatusCode::GATEWAY_TIMEOUT, "upstream_timeout", None, Some("false")),
        (LlmError::Malformed("html".into()), StatusCode::BAD_GATEWAY, "upstream_error", None, Some("false")),
        (
            LlmError::Status { status: 400, message: "bad model".into(), retry_after: None },
            StatusCode::BAD_REQUEST,
            "upstream_rejected",
            None,
            None,
        ),
    ];
    for (error, status, code, retry_after, should_retry) in cases {
        let model = ScriptedModel::new([Err(error)]);
        let app = app(model, |_| {});
        let (got, headers, text) =
            post(&app, json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})).await;
        assert_eq!(got, status, "{text}");
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["error"]["code"], code, "{text}");
        assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert_eq!(headers.get("retry-after").map(|v| v.to_str().unwrap()), retry_after);
        assert_eq!(headers.get("x-should-retry").map(|v| v.to_str().unwrap()), should_retry);
    }
}

#[tokio::test]
async fn a_call_to_a_tool_the_request_did_not_offer_is_repaired_with_the_offered_names() {
    let model = ScriptedModel::new([
        completion(tool_call("get_forecast", json!({"city": "Rome"}))),
        completion(tool_call("get_weather", json!({"city": "Rome"}))),
    ]);
    let app = app(model.clone(), |_| {});
    let body =
        json!({"model": "m", "messages": [{"role": "user", "content": "Weather in Rome?"}], "tools": [weather_tool()]});
    let (status, _, text) = post(&app, body).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let seen = model.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen[1]["messages"].to_string().contains("get_weather"), "the repair note lists the offered tools");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
}

#[tokio::test]
async fn every_answer_has_a_request_id_and_a_clients_own_is_kept() {
    let app = app(ScriptedModel::new([]), |_| {});
    let get = |id: Option<&str>| {
        let mut request = Request::get("/v1/models");
        if let Some(id) = id {
            request = request.header("x-request-id", id);
        }
        app.clone().oneshot(request.body(Body::empty()).unwrap())
    };
    let (a, b) = (get(None).await.unwrap(), get(None).await.unwrap());
    let id = |r: &axum::response::Response| r.headers()["x-request-id"].to_str().unwrap().to_string();
    assert_eq!(id(&a).len(), 16, "16 hex digits");
    assert_ne!(id(&a), id(&b), "each request its own id");
    assert_eq!(id(&get(Some("caller-trace-42")).await.unwrap()), "caller-trace-42");
}

pub(crate) async fn metrics(app: &axum::Router) -> String {
    let response = app.clone().oneshot(Request::get("/metrics").body(Body::empty()).unwrap()).await.unwrap();
    String::from_utf8(axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap().to_vec()).unwrap()
}

/// The names of the tools the model was offered in its `n`th request.
pub(crate) fn offered(model: &ScriptedModel, n: usize) -> Vec<String> {
    let seen = model.seen();
    let mut names: Vec<String> =
        seen[n]["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap().into()).collect();
    names.sort();
    names
}

/// A tool declared as a real MCP server (pdf-reader) declares it: draft 4's
/// boolean `exclusiveMinimum` under a newer `$schema`.
fn draft_4_tool() -> Value {
    json!({"type": "function", "function": {"name": "read_pdf", "description": "Reads pages of a PDF file",
        "parameters": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "properties": {"path": {"type": "string"},
                "page": {"type": "integer", "minimum": 0, "exclusiveMinimum": true}},
            "required": ["path"]}}})
}

#[tokio::test]
async fn schemas_as_real_servers_write_them_never_fail_the_request() {
    // A tool whose schema no reading makes valid (`format` must be a string).
    let unusable = json!({"type": "function", "function": {"name": "odd_tool", "description": "Reads PDF metadata",
        "parameters": {"type": "object", "properties": {"path": {"type": "string", "format": 12}}}}});
    let mut tools = many_tools(298);
    tools.push(draft_4_tool());
    tools.push(unusable);
    let model = ScriptedModel::new([
        completion(tool_call("read_pdf", json!({"path": "a.pdf", "page": 0}))),
        completion(tool_call("read_pdf", json!({"path": "a.pdf", "page": 2}))),
        completion(tool_call("odd_tool", json!({"path": 7, "anything": true}))),
    ]);
    let app = app(model.clone(), |c| c.openai.max_tools = 5);
    let ask = |tools: &[Value]| {
        json!({"model": "m", "tools": tools,
        "messages": [{"role": "user", "content": "Read page 2 of the PDF file a.pdf"}]})
    };
    let (status, _, text) = post(&app, ask(&tools)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(offered(&model, 0).contains(&"read_pdf".to_string()));
    // The draft-4 bound is checked as meant: page 0 is excluded, so the call was repaired.
    assert_eq!(model.seen().len(), 2, "page 0 was sent back for repair");
    let answer: Value = serde_json::from_str(&text).unwrap();
    let report = &answer["toolrouter"];
    assert_eq!(report["repairs"], 1);
    assert_eq!(
        report["unchecked_tools"],
        json!([{"tool": "odd_tool", "reason": report["unchecked_tools"][0]["reason"]}])
    );
    // The unusable schema's tool is called unchecked: no repair for arguments it cannot judge.
    let (status, _, text) = post(&app, ask(&tools)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "odd_tool");
    assert_eq!(answer["toolrouter"]["repairs"], 0);
}

#[tokio::test]
async fn a_request_that_is_itself_wrong_gets_a_400_naming_the_tool() {
    let model = ScriptedModel::new([]);
    let app = app(model.clone(), |c| {
        c.openai.max_tools = 5;
        c.server.max_body_bytes = 8 << 20;
    });
    let ask = |tools: Value| json!({"model": "m", "tools": tools, "messages": [{"role": "user", "content": "hi"}]});
    let tool = |name: &str, parameters: Value| json!({"type": "function", "function": {"name": name, "description": "d", "parameters": parameters}});
    let object = json!({"type": "object", "properties": {}});
    let mut ten_thousand = many_tools(9_999);
    ten_thousand.truncate(10_000);
    let mut duplicate = many_tools(30);
    duplicate.push(tool("tool_3", object.clone()));
    let mut bad_name = many_tools(30);
    bad_name.insert(7, tool("get.weather", object.clone()));
    let mut not_object = many_tools(30);
    not_object.insert(9, tool("weather", json!("string")));
    for (tools, param, says) in [
        (json!(ten_thousand), "tools", "at most 5000"),
        (json!(duplicate), "tools[31].function.name", "two tools are named `tool_3`"),
        (json!(bad_name), "tools[7].function.name", "\"get.weather\""),
        (json!(not_object), "tools[9].function.parameters", "JSON Schema object"),
        (json!({"a": 1}), "tools", "must be an array"),
    ] {
        let (status, _, text) = post(&app, ask(tools)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
        let error: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(error["error"]["param"], param, "{text}");
        assert!(error["error"]["message"].as_str().unwrap().contains(says), "{text}");
    }
    assert!(model.seen().is_empty());
}

#[tokio::test]
async fn ref_loops_and_huge_enums_are_served() {
    let huge: Vec<String> = (0..40_000).map(|i| format!("value_{i}")).collect();
    let mut tools = many_tools(60);
    tools.push(json!({"type": "function", "function": {"name": "tree", "description": "Walks a tree of nodes",
        "parameters": {"type": "object", "properties": {"node": {"$ref": "#/$defs/node"}},
            "$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}}}}}}));
    tools.push(json!({"type": "function", "function": {"name": "pick", "description": "Picks one of many values",
        "parameters": {"type": "object", "properties": {"v": {"type": "string", "enum": huge}}}}}));
    let model = ScriptedModel::new([
        completion(tool_call("tree", json!({"node": {"child": {"child": {}}}}))),
        completion(tool_call("pick", json!({"v": "value_39999"}))),
    ]);
    let app = app(model.clone(), |c| {
        c.openai.max_tools = 5;
        c.server.max_body_bytes = 4 << 20;
    });
    for ask in ["Walk the tree of nodes", "Pick one of many values"] {
        let body = json!({"model": "m", "tools": tools, "messages": [{"role": "user", "content": ask}]});
        let (status, _, text) = post(&app, body).await;
        assert_eq!(status, StatusCode::OK, "{text}");
        let answer: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(answer["toolrouter"]["repairs"], 0, "{ask}: {}", answer["toolrouter"]);
    }
}
