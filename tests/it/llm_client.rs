//! The model client against a scripted OpenAI-compatible server on
//! loopback: answers, retries, errors, timeouts and streams.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};
use toolrouter::config::Config;
use toolrouter::llm::{LlmClient, LlmError, RequestBody};

type Seen = Arc<Mutex<HashMap<String, Vec<(Value, bool)>>>>;

fn completion(text: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
}

fn chunk(text: &str) -> String {
    chunk_of(0, text)
}

/// A chunk of choice `index`.
fn chunk_of(index: u64, text: &str) -> String {
    let c = json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
        "choices": [{"index": index, "delta": {"content": text}, "finish_reason": null}]});
    format!("data: {c}\n\n")
}

/// The chunk that finishes choice `index`.
fn finish(index: u64) -> String {
    let c = json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
        "choices": [{"index": index, "delta": {}, "finish_reason": "stop"}]});
    format!("data: {c}\n\n")
}

fn sse(events: Vec<String>, then_hang: bool) -> Response {
    labelled(events, then_hang, "text/event-stream")
}

/// An event stream sent with the content type `label`.
fn labelled(events: Vec<String>, then_hang: bool, label: &'static str) -> Response {
    let stream = futures_util::stream::iter(events.into_iter().map(Ok::<_, std::io::Error>)).chain(
        futures_util::stream::once(async move {
            if then_hang {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            Ok(String::new())
        }),
    );
    ([("content-type", label)], Body::from_stream(stream)).into_response()
}

/// The scripted model: the first path segment names the scenario.
async fn model(State(seen): State<Seen>, Path(scenario): Path<String>, headers: HeaderMap, body: String) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let n = {
        let mut seen = seen.lock().unwrap();
        let calls = seen.entry(scenario.clone()).or_default();
        calls.push((body.clone(), headers.contains_key("authorization")));
        calls.len()
    };
    match scenario.as_str() {
        "ok" => axum::Json(completion("hello")).into_response(),
        "flaky" if n == 1 => (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
        "flaky" => axum::Json(completion("second time")).into_response(),
        "429" => (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "0")], "slow down").into_response(),
        "400" => {
            (StatusCode::BAD_REQUEST, axum::Json(json!({"error": {"message": "unknown model `x`"}}))).into_response()
        }
        "slow" => {
            tokio::time::sleep(Duration::from_secs(10)).await;
            axum::Json(completion("late")).into_response()
        }
        // Each half within llm.timeout_ms (400), the whole not.
        "slow-head-and-body" => {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let text = completion("late").to_string();
            let (head, tail) = text.split_at(text.len() / 2);
            let (head, tail) = (head.to_string(), tail.to_string());
            let rest = futures_util::stream::once(async move {
                tokio::time::sleep(Duration::from_millis(250)).await;
                Ok::<_, std::io::Error>(tail)
            });
            Body::from_stream(futures_util::stream::once(async move { Ok(head) }).chain(rest)).into_response()
        }
        "garbage" => (StatusCode::OK, "this is not JSON").into_response(),
        "nochoices" => axum::Json(json!({"choices": []})).into_response(),
        "stream" => sse(vec![chunk("a"), chunk("b"), chunk("c"), "data: [DONE]\n\n".into()], false),
        "stream-error" => {
            sse(vec![chunk("a"), format!("data: {}\n\n", json!({"error": {"message": "overloaded"}}))], false)
        }
        "stream-stall" => sse(vec![chunk("a")], true),
        // Some servers label their streams as JSON; the first piece splits a field name.
        "stream-as-json" => {
            let events =
                vec!["\nda".into(), format!("ta: {}\n\n", &chunk("a")[6..]), chunk("b"), "data: [DONE]\n\n".into()];
            labelled(events, false, "application/json")
        }
        "stream-json-answer" => labelled(vec![completion("whole").to_string()], false, "application/json"),
        "stream-html" => labelled(vec!["<html><body>502</body></html>".into()], false, "text/html"),
        "stream-early-eof" => sse(vec![chunk("a"), chunk("b"), chunk("c")], false),
        "stream-finish-eof" => sse(vec![chunk("a"), finish(0)], false),
        "stream-finish-hang" => sse(vec![chunk("a"), finish(0)], true),
        "stream-two-choices-eof" => sse(vec![chunk("a"), finish(0), chunk_of(1, "b")], false),
        "429-long" => (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "30")], "slow down").into_response(),
        "429-short" => (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")], "slow down").into_response(),
        "redirect" => (StatusCode::TEMPORARY_REDIRECT, [("location", "/ok/v1/chat/completions")]).into_response(),
        // No Content-Length: the size is known only as it arrives.
        "chunked" => {
            let pieces = [completion("hello").to_string(), " ".repeat(100)];
            let stream = futures_util::stream::iter(pieces.map(Ok::<_, std::io::Error>));
            axum::body::Body::from_stream(stream).into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn scripted() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let app = axum::Router::new()
        .route("/{scenario}/v1/chat/completions", axum::routing::post(model))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, seen)
}

fn model_config(base: &str, scenario: &str) -> Config {
    let mut config = Config::default();
    config.llm.base_url = format!("{base}/{scenario}/v1");
    config.llm.timeout_ms = 400;
    config.llm.max_attempts = 2;
    config.llm.backoff_ms = 10;
    config
}

fn client(base: &str, scenario: &str) -> LlmClient {
    LlmClient::new(&model_config(base, scenario)).unwrap()
}

/// A request's time budget: long enough for every scenario.
fn later() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

fn request() -> RequestBody {
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": true}});
    RequestBody::parse(body.to_string().as_bytes()).unwrap()
}

#[tokio::test]
async fn answers_retries_and_errors() {
    let (base, seen) = scripted().await;
    let ok = client(&base, "ok").complete(&request(), later()).await.unwrap();
    assert_eq!(ok.text(), "hello");
    let (sent, _) = seen.lock().unwrap()["ok"][0].clone();
    assert_eq!(sent["stream"], false, "non-streaming requests say so");
    assert!(sent.get("stream_options").is_none());

    // The key goes in a header when one is configured (never in the URL or logs).
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("key"), "sk-test\n").unwrap();
    let mut config = Config::default();
    config.llm.base_url = format!("{base}/ok/v1");
    config.llm.api_key_file = dir.path().join("key");
    LlmClient::new(&config).unwrap().complete(&request(), later()).await.unwrap();
    let auth: Vec<bool> = seen.lock().unwrap()["ok"].iter().map(|(_, auth)| *auth).collect();
    assert_eq!(auth, [false, true]);

    let flaky = client(&base, "flaky").complete(&request(), later()).await.unwrap();
    assert_eq!(flaky.text(), "second time");
    assert_eq!(seen.lock().unwrap()["flaky"].len(), 2, "one retry after the 500");

    let e = client(&base, "429").complete(&request(), later()).await.unwrap_err();
    assert!(matches!(e, LlmError::Status { status: 429, .. }), "{e:?}");
    assert_eq!(seen.lock().unwrap()["429"].len(), 2, "retried up to max_attempts");

    // A Retry-After longer than llm.max_retry_wait_ms: no wait, no retry;
    // the client gets the model's 429 with its Retry-After.
    let started = Instant::now();
    let e = client(&base, "429-long").complete(&request(), later()).await.unwrap_err();
    assert_eq!(
        e,
        LlmError::Status { status: 429, message: "slow down".into(), retry_after: Some(Duration::from_secs(30)) }
    );
    assert_eq!(seen.lock().unwrap()["429-long"].len(), 1);
    assert!(started.elapsed() < Duration::from_secs(2));

    // A retry whose wait would pass the deadline is not tried.
    let e = client(&base, "429-short").complete(&request(), Instant::now() + Duration::from_millis(500)).await;
    assert!(matches!(e, Err(LlmError::Status { status: 429, .. })), "{e:?}");
    assert_eq!(seen.lock().unwrap()["429-short"].len(), 1, "a 1 s Retry-After does not fit a 500 ms budget");

    let e = client(&base, "400").complete(&request(), later()).await.unwrap_err();
    assert_eq!(e, LlmError::Status { status: 400, message: "unknown model `x`".into(), retry_after: None });
    assert_eq!(seen.lock().unwrap()["400"].len(), 1, "other 4xx are not retried");

    let started = Instant::now();
    let e = client(&base, "slow").complete(&request(), later()).await.unwrap_err();
    assert_eq!(e, LlmError::Timeout(400));
    assert!(started.elapsed() < Duration::from_secs(2), "one attempt of 400 ms, not the server's 10 s");
    assert_eq!(seen.lock().unwrap()["slow"].len(), 1, "a timeout is not retried");
    // One llm.timeout_ms for the head and the body together, not one each.
    let e = client(&base, "slow-head-and-body").complete(&request(), later()).await.unwrap_err();
    assert_eq!(e, LlmError::Timeout(400));
    // A budget shorter than llm.timeout_ms ends the attempt when it runs out.
    let started = Instant::now();
    let e = client(&base, "slow").complete(&request(), Instant::now() + Duration::from_millis(150)).await;
    assert_eq!(e, Err(LlmError::Deadline));
    assert!(started.elapsed() < Duration::from_millis(390));

    assert!(matches!(client(&base, "garbage").complete(&request(), later()).await, Err(LlmError::Malformed(_))));
    assert!(matches!(client(&base, "nochoices").complete(&request(), later()).await, Err(LlmError::Malformed(_))));
    // The model server is where llm.base_url says: a redirect is an
    // error that says what to do, not followed.
    let oks = seen.lock().unwrap()["ok"].len();
    let e = client(&base, "redirect").complete(&request(), later()).await.unwrap_err();
    assert!(matches!(&e, LlmError::Status { status: 307, message, .. } if message.contains("llm.base_url")), "{e:?}");
    assert_eq!(seen.lock().unwrap()["ok"].len(), oks, "not followed");
    // Answers larger than llm.max_response_bytes, by Content-Length or as they arrive.
    for scenario in ["ok", "chunked"] {
        let mut small = model_config(&base, scenario);
        small.llm.max_response_bytes = 64;
        let e = LlmClient::new(&small).unwrap().complete(&request(), later()).await.unwrap_err();
        assert_eq!(e, LlmError::Malformed("the answer is larger than 64 bytes".into()), "{scenario}");
    }
    assert!(client(&base, "chunked").complete(&request(), later()).await.is_ok(), "a chunked answer is read whole");
    let mut config = Config::default();
    config.llm.base_url = String::new();
    assert!(matches!(LlmClient::new(&config), Err(LlmError::NotConfigured)));
    for base_url in ["localhost:8000/v1", "ftp://host/v1", "http:///v1", "not a url"] {
        config.llm.base_url = base_url.into();
        let e = LlmClient::new(&config).err();
        assert!(matches!(&e, Some(LlmError::Connect(m)) if m.contains("llm.base_url")), "{base_url}: {e:?}");
    }
}

#[tokio::test]
async fn streams_chunks_errors_and_stalls() {
    let (base, seen) = scripted().await;
    let chunks: Vec<_> = client(&base, "stream").stream(&request(), later()).await.unwrap().collect().await;
    let texts: Vec<String> =
        chunks.iter().map(|c| c.as_ref().unwrap().choices[0].delta.as_ref().unwrap().text()).collect();
    assert_eq!(texts, ["a", "b", "c"]);
    assert_eq!(seen.lock().unwrap()["stream"][0].0["stream"], true);

    // The body, not the label: an event stream labelled JSON is read as one,
    // a JSON completion as its chunks, a page as what it is.
    let chunks: Vec<_> = client(&base, "stream-as-json").stream(&request(), later()).await.unwrap().collect().await;
    let texts: Vec<String> =
        chunks.iter().map(|c| c.as_ref().unwrap().choices[0].delta.as_ref().unwrap().text()).collect();
    assert_eq!(texts, ["a", "b"]);
    let chunks: Vec<_> = client(&base, "stream-json-answer").stream(&request(), later()).await.unwrap().collect().await;
    assert!(chunks.iter().all(Result::is_ok) && !chunks.is_empty(), "{chunks:?}");
    let page = client(&base, "stream-html").stream(&request(), later()).await.err();
    assert!(matches!(&page, Some(LlmError::Malformed(m)) if m.contains("text/html")), "{page:?}");

    let items: Vec<_> = client(&base, "stream-error").stream(&request(), later()).await.unwrap().collect().await;
    assert_eq!(items.len(), 2);
    assert!(items[0].is_ok());
    assert_eq!(items[1], Err(LlmError::Stream("overloaded".into())));

    let started = Instant::now();
    let items: Vec<_> = client(&base, "stream-stall").stream(&request(), later()).await.unwrap().collect().await;
    assert!(items[0].is_ok());
    assert_eq!(items.last().unwrap(), &Err(LlmError::Timeout(400)));
    assert!(started.elapsed() < Duration::from_secs(3));

    // A close before any finish_reason or [DONE] is a truncated answer, not a whole one.
    let items: Vec<_> = client(&base, "stream-early-eof").stream(&request(), later()).await.unwrap().collect().await;
    assert_eq!(items.len(), 4, "{items:?}");
    assert!(matches!(items[3], Err(LlmError::Truncated(_))), "{items:?}");
    // Every choice finished: a close without [DONE] ends a whole answer.
    let items: Vec<_> = client(&base, "stream-finish-eof").stream(&request(), later()).await.unwrap().collect().await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(items.iter().all(Result::is_ok), "{items:?}");
    // ...and so does silence after the finish (no 400 ms timeout error).
    let started = Instant::now();
    let items: Vec<_> = client(&base, "stream-finish-hang").stream(&request(), later()).await.unwrap().collect().await;
    assert!(items.iter().all(Result::is_ok), "{items:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    let two = client(&base, "stream-two-choices-eof");
    let items: Vec<_> = two.stream(&request(), later()).await.unwrap().collect().await;
    assert!(matches!(items.last(), Some(Err(LlmError::Truncated(_)))), "one of two choices unfinished: {items:?}");
}
