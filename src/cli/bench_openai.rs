//! `toolrouter bench openai`: what the OpenAI face adds to a model request.
//!
//! A scripted model server on loopback answers at once (a tool call to the
//! first tool; streamed as five chunks when asked to stream). The same
//! chat-completions request — route mode, a few tools — goes at a steady
//! rate straight to that model and through toolrouter's full HTTP stack
//! (API key check, client rate limit, request id, time limit, log line,
//! parsing and checking the request and its tools, the upstream model
//! client, checking the returned tool call), interleaved, open-loop (each
//! request leaves on its tick, whether or not earlier ones are done).
//! Reported: p50 and p99 of each path and their difference, for whole
//! answers and, streamed, for the time to the first byte of the body.
//!
//! The scripted model is a stand-in for measuring only; toolrouter's part
//! is real. Without `--embed`, narrowing is lexical (a server whose
//! engine is not loaded); with it, the tool list is embedded first and
//! the user message's vector is computed on the first request and then
//! reused, as for a conversation's turns.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::response::IntoResponse;
use clap::Args;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::CliError;
use crate::chat::tools::{ClientTool, client_tool};
use crate::config::Config;
use crate::eval::retrieval::Latency;
use crate::retrieval::Embedder;
use crate::server::{App, hash_key, router};

/// The API key the bench's client presents.
const KEY: &str = "bench-key";
/// Requests per second per path, at most (the tick interval must stay above zero).
const MAX_RATE: f64 = 100_000.0;
/// Requests left out of the figures at the start of each phase (pools warm up).
const WARMUP: usize = 200;

#[derive(Debug, Args)]
pub(super) struct OpenAiBenchArgs {
    /// Requests per second on each path.
    #[arg(long, default_value_t = 500.0)]
    rate: f64,
    /// Seconds each phase (plain, streamed) lasts.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Tools in each request (at most `openai.max_tools` keeps narrowing out).
    #[arg(long, default_value_t = 5)]
    tools: usize,
    /// Narrow with the embedding model too (as a server with an engine
    /// does); the tool list is embedded before the figures start.
    #[arg(long)]
    embed: bool,
    /// Every request carries a tool list never seen before (one tool's
    /// description changes): the cost of a first-seen list.
    #[arg(long)]
    fresh_lists: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: &OpenAiBenchArgs, config: &Config) -> Result<ExitCode, CliError> {
    if !args.rate.is_finite() || args.rate <= 0.0 || args.rate > MAX_RATE || args.seconds == 0 || args.tools == 0 {
        return Err(CliError::Usage("--rate (up to 100000), --seconds and --tools must be positive".into()));
    }
    super::runtime()?.block_on(bench(args, config))
}

/// Latencies of one path, in milliseconds.
#[derive(Default)]
struct Samples {
    total: Vec<f64>,
    first_byte: Vec<f64>,
}

/// Both paths, plain then streamed: one open-loop sequence (start the
/// model and the proxy, send on every tick, collect, report), long because
/// a benchmark reads best as one sequence of measured steps.
async fn bench(args: &OpenAiBenchArgs, config: &Config) -> Result<ExitCode, CliError> {
    let model = listen(scripted_model()).await?;
    let mut config = config.clone();
    config.llm.base_url = format!("http://{model}/v1");
    config.server.api_key_hashes = vec![hash_key(KEY)];
    config.server.client_rate = args.rate * 4.0;
    config.server.client_burst = (args.rate as u32).max(1);
    config.log.level = "warn".into();
    let app = App::new(&config);
    let proxy = listen(router(app.clone())).await?;

    let client = reqwest::Client::builder().build().map_err(anyhow::Error::from)?;
    let tools: Vec<Value> = (0..args.tools)
        .map(|i| {
            json!({"type": "function", "function": {"name": format!("tool_{i}"), "description": format!("Tool number {i}"),
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})
        })
        .collect();
    if args.embed {
        let embedder = Arc::new(Embedder::load(&config.embedding).map_err(|e| CliError::Usage(e.to_string()))?);
        let client_tools: Vec<Arc<ClientTool>> =
            tools.iter().filter_map(|t| client_tool(t, true).ok()).map(Arc::new).collect();
        app.chat.set_route_embedder(embedder.clone());
        let narrowing = app.chat.narrowing();
        narrowing
            .ranker
            .embed_missing(&narrowing.set(&client_tools), &embedder, Duration::MAX)
            .map_err(|e| CliError::Failure(e.into()))?;
    }
    let mut report = serde_json::Map::new();
    for stream in [false, true] {
        let body_of = |i: usize| -> Result<Arc<Vec<u8>>, CliError> {
            let mut tools = tools.clone();
            if args.fresh_lists {
                tools[0]["function"]["description"] = json!(format!("Tool number 0, list {i} of phase {stream}"));
            }
            let body = json!({"model": "bench", "stream": stream, "tools": tools,
                "messages": [{"role": "user", "content": "What is the weather in Berlin?"}]});
            Ok(Arc::new(serde_json::to_vec(&body).map_err(anyhow::Error::from)?))
        };
        let same = body_of(0)?;
        let n = (args.rate * args.seconds as f64) as usize + WARMUP;
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / (2.0 * args.rate)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut tasks = Vec::with_capacity(2 * n);
        for i in 0..2 * n {
            let body = if args.fresh_lists { body_of(i / 2 + 1)? } else { same.clone() };
            tick.tick().await;
            let client = client.clone();
            let url = format!("http://{}/v1/chat/completions", if i % 2 == 0 { model } else { proxy });
            tasks.push(tokio::spawn(async move { timed(&client, &url, body).await }));
        }
        let (mut direct, mut proxied) = (Samples::default(), Samples::default());
        for (i, task) in tasks.into_iter().enumerate() {
            let (total, first) = task.await.map_err(anyhow::Error::from)?.map_err(CliError::Failure)?;
            if i / 2 < WARMUP {
                continue;
            }
            let s = if i % 2 == 0 { &mut direct } else { &mut proxied };
            s.total.push(total);
            s.first_byte.push(first);
        }
        let phase = if stream { "streamed" } else { "plain" };
        let mut figures = serde_json::Map::new();
        for (what, d, p) in [
            ("total", &mut direct.total, &mut proxied.total),
            ("first_byte", &mut direct.first_byte, &mut proxied.first_byte),
        ] {
            if !stream && what == "first_byte" {
                continue;
            }
            let (d, p) = (Latency::of(d), Latency::of(p));
            let added = json!({"p50": p.p50 - d.p50, "p99": p.p99 - d.p99});
            if !args.json {
                println!(
                    "{phase:8} {what:10} direct p50 {:.3} p99 {:.3} | toolrouter p50 {:.3} p99 {:.3} | added p50 {:.3} p99 {:.3} ms",
                    d.p50,
                    d.p99,
                    p.p50,
                    p.p99,
                    p.p50 - d.p50,
                    p.p99 - d.p99
                );
            }
            figures.insert(what.into(), json!({"direct_ms": d, "toolrouter_ms": p, "added_ms": added}));
        }
        report.insert(phase.into(), Value::Object(figures));
    }
    if args.json {
        println!(
            "{}",
            json!({"rate_per_path": args.rate, "seconds": args.seconds, "tools": args.tools, "phases": report})
        );
    } else {
        println!(
            "{} req/s per path, {} s per phase, {} tools ({}, {}), interleaved, loopback HTTP/1.1 keep-alive",
            args.rate,
            args.seconds,
            args.tools,
            if args.fresh_lists { "a new list each request" } else { "the same list" },
            if args.embed { "lexical and dense narrowing" } else { "lexical narrowing" }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Serves `app` on a loopback port; returns the address.
async fn listen(app: axum::Router) -> Result<std::net::SocketAddr, CliError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(anyhow::Error::from)?;
    let addr = listener.local_addr().map_err(anyhow::Error::from)?;
    let idle = Duration::from_millis(crate::config::DEFAULT_HEADER_READ_TIMEOUT_MS);
    let serving = crate::server::conn::Serving { router: app, header_read_timeout: idle, tls: None };
    tokio::spawn(crate::server::conn::serve(listener, serving, std::future::pending()));
    Ok(addr)
}

/// Sends one request; returns (whole answer, first body byte) in milliseconds.
async fn timed(client: &reqwest::Client, url: &str, body: Arc<Vec<u8>>) -> anyhow::Result<(f64, f64)> {
    let started = Instant::now();
    let response = client
        .post(url)
        .bearer_auth(KEY)
        .header("content-type", "application/json")
        .body(body.as_ref().clone())
        .send()
        .await?;
    if !response.status().is_success() {
        anyhow::bail!("{url} answered {}: {}", response.status(), response.text().await.unwrap_or_default());
    }
    let mut chunks = response.bytes_stream();
    let mut first = None;
    let mut bytes = Vec::new();
    while let Some(chunk) = chunks.next().await {
        first.get_or_insert_with(|| started.elapsed());
        bytes.extend_from_slice(&chunk?);
    }
    if !bytes.windows(10).any(|w| w == b"tool_calls") {
        anyhow::bail!("{url} answered without the tool call: {}", String::from_utf8_lossy(&bytes));
    }
    use crate::units::ms;
    Ok((ms(started.elapsed()), ms(first.unwrap_or_default())))
}

/// A model that calls the first tool offered, at once.
fn scripted_model() -> axum::Router {
    axum::Router::new().fallback(|axum::Json(body): axum::Json<Value>| async move {
        let tool = body["tools"][0]["function"]["name"].as_str().unwrap_or("none").to_string();
        let call = json!({"id": "call_1", "type": "function", "function": {"name": tool, "arguments": "{\"city\":\"Berlin\"}"}});
        if body["stream"] != true {
            return axum::Json(json!({"id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [call]},
                    "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}))
            .into_response();
        }
        let chunk = |delta: Value, finish: Value| {
            format!("data: {}\n\n", json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
                "model": body["model"], "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))
        };
        let events = [
            chunk(json!({"role": "assistant", "content": ""}), Value::Null),
            chunk(json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": tool, "arguments": ""}}]}), Value::Null),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":\"Berlin\"}"}}]}), Value::Null),
            chunk(json!({}), json!("tool_calls")),
            "data: [DONE]\n\n".to_string(),
        ];
        ([("content-type", "text/event-stream")], events.concat()).into_response()
    })
}
