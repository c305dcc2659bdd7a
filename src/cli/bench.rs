//! `toolrouter bench retrieval`: the speed of retrieval on this machine.
//!
//! Measures, in one process: start-up (catalog, model, index load), search
//! latency with and without the query embedding (the queries as given, and
//! short queries made of the relevant APIs' names, like an agent's tool
//! search), HNSW against an exact scan (recall@10 of HNSW's top 10 within
//! the exact top 10, and latency), and the process's peak memory.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, Subcommand};
use serde_json::json;

use super::search::retrieval_error;
use super::{CliError, load_catalog};
use crate::config::{Config, DenseIndex};
use crate::eval::queries;
use crate::eval::retrieval::Latency;
use crate::retrieval::{Embedder, Filters, Retriever, SearchOptions};

#[derive(Debug, Subcommand)]
pub(super) enum BenchCommand {
    /// Start-up, search latency, HNSW vs exact search, peak memory.
    Retrieval(BenchArgs),
    /// The upstream layer's cost over a bare HTTP call to the same loopback server.
    Upstream(super::bench_upstream::UpstreamBenchArgs),
    /// What the OpenAI face adds to a model request (route mode), at a steady rate.
    Openai(super::bench_openai::OpenAiBenchArgs),
    /// What toolrouter adds to a downstream MCP server's tools/call (direct vs through `toolrouter mcp`).
    Mcp(super::bench_mcp::McpBenchArgs),
}

#[derive(Debug, Args)]
pub(super) struct BenchArgs {
    /// ToolBench query files to search with (their missing tools are added to the catalog, as in eval).
    #[arg(long = "queries", value_name = "FILE", required = true, num_args = 1..)]
    queries: Vec<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `toolrouter bench retrieval`: a script, step by step (load, index,
/// exact and approximate searches, the report), long because a benchmark
/// reads best as one sequence of measured steps.
pub(super) fn run(command: &BenchCommand, config: &Config) -> Result<ExitCode, CliError> {
    let args = match command {
        BenchCommand::Retrieval(args) => args,
        BenchCommand::Upstream(args) => return super::bench_upstream::run(args, config),
        BenchCommand::Openai(args) => return super::bench_openai::run(args, config),
        BenchCommand::Mcp(args) => return super::bench_mcp::run(args, config),
    };
    let mut texts = Vec::new();
    let mut short = Vec::new();
    for path in &args.queries {
        for q in queries::load(path).map_err(CliError::Usage)? {
            texts.push(q.query);
            short.extend(q.relevant.into_iter().map(|(tool, api)| format!("{api} {tool}")));
        }
    }
    let mut config = config.clone();
    config.catalog.query_files.extend(args.queries.iter().cloned());

    let t = Instant::now();
    let catalog = Arc::new(load_catalog(&config)?);
    let catalog_ms = ms(t);
    let t = Instant::now();
    let embedder = Arc::new(Embedder::load(&config.embedding).map_err(|e| CliError::Usage(e.to_string()))?);
    let model_ms = ms(t);
    let t = Instant::now();
    let retriever = Retriever::open_with(catalog.clone(), &config, Some(embedder), false, &Default::default())
        .map_err(retrieval_error)?;
    let index_ms = ms(t);
    if retriever.built.is_some() {
        tracing::warn!("the index was built in this run: start-up figures include building it");
    }

    let base = SearchOptions::from_config(&config.retrieval);
    let mut whole = base;
    whole.intents = false;
    let long_intents = latencies(&retriever, &texts, base)?;
    let mut embedded = base;
    embedded.embed_intents = true;
    let long_embedded = latencies(&retriever, &texts, embedded)?;
    let long_whole = latencies(&retriever, &texts, whole)?;
    let short_whole = latencies(&retriever, &short, whole)?;

    // HNSW against the exact scan, on the whole queries' vectors.
    let mut exact_ms = Vec::new();
    let mut hnsw_ms = Vec::new();
    let mut overlap = 0usize;
    let mut compared = 0usize;
    let mut exact_options = whole;
    exact_options.dense_index = DenseIndex::Exact;
    exact_options.mode = crate::config::SearchMode::Dense;
    let mut hnsw_options = exact_options;
    hnsw_options.dense_index = DenseIndex::Hnsw;
    for text in &texts {
        let prepared = retriever.prepare(text, exact_options).map_err(retrieval_error)?;
        let t = Instant::now();
        let exact = retriever.rank(&prepared, 10, &Filters::default(), exact_options);
        exact_ms.push(ms(t));
        let t = Instant::now();
        let approx = retriever.rank(&prepared, 10, &Filters::default(), hnsw_options);
        hnsw_ms.push(ms(t));
        compared += exact.hits.len();
        overlap += approx.hits.iter().filter(|h| exact.hits.iter().any(|e| e.api == h.api)).count();
    }
    let report = json!({
        "catalog_apis": catalog.apis().len(),
        "queries": texts.len(),
        "short_queries": short.len(),
        "startup_ms": {"catalog": catalog_ms, "model": model_ms, "index": index_ms, "total": catalog_ms + model_ms + index_ms},
        "search_ms": {
            "long_with_intents": long_intents,
            "long_with_embedded_intents": long_embedded,
            "long_whole": long_whole,
            "short": short_whole,
        },
        "dense": {
            "hnsw_recall_at_10_vs_exact": overlap as f64 / compared.max(1) as f64,
            "hnsw_ms": Latency::of(&mut hnsw_ms),
            "exact_ms": Latency::of(&mut exact_ms),
        },
        "peak_rss_mib": peak_rss_mib(),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(anyhow::Error::from)?);
        return Ok(ExitCode::SUCCESS);
    }
    let s = &report["startup_ms"];
    println!("catalog of {} APIs; {} queries, {} short queries\n", catalog.apis().len(), texts.len(), short.len());
    println!(
        "start-up: catalog {:.0} ms, model {:.0} ms, index {:.0} ms, total {:.0} ms\n",
        s["catalog"].as_f64().unwrap_or_default(),
        s["model"].as_f64().unwrap_or_default(),
        s["index"].as_f64().unwrap_or_default(),
        s["total"].as_f64().unwrap_or_default()
    );
    println!("| search | p50 ms | p99 ms | p50 ms without embedding | p99 ms without embedding |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (name, key) in [
        ("queries, with intents (default)", "long_with_intents"),
        ("queries, with embedded intents", "long_with_embedded_intents"),
        ("queries, whole", "long_whole"),
        ("short queries", "short"),
    ] {
        let v = &report["search_ms"][key];
        println!(
            "| {name} | {:.1} | {:.1} | {:.2} | {:.2} |",
            v["total"]["p50"].as_f64().unwrap_or_default(),
            v["total"]["p99"].as_f64().unwrap_or_default(),
            v["rank"]["p50"].as_f64().unwrap_or_default(),
            v["rank"]["p99"].as_f64().unwrap_or_default()
        );
    }
    let d = &report["dense"];
    println!(
        "\ndense top 10: HNSW p50 {:.2} ms, p99 {:.2} ms; exact p50 {:.2} ms, p99 {:.2} ms; HNSW recall@10 against exact {:.3}",
        d["hnsw_ms"]["p50"].as_f64().unwrap_or_default(),
        d["hnsw_ms"]["p99"].as_f64().unwrap_or_default(),
        d["exact_ms"]["p50"].as_f64().unwrap_or_default(),
        d["exact_ms"]["p99"].as_f64().unwrap_or_default(),
        d["hnsw_recall_at_10_vs_exact"].as_f64().unwrap_or_default()
    );
    println!("peak memory (RSS): {} MiB", report["peak_rss_mib"]);
    Ok(ExitCode::SUCCESS)
}

/// Latency of whole searches (embedding included) and of ranking alone.
fn latencies(retriever: &Retriever, texts: &[String], options: SearchOptions) -> Result<serde_json::Value, CliError> {
    let mut total = Vec::with_capacity(texts.len());
    let mut rank = Vec::with_capacity(texts.len());
    for text in texts {
        let t = Instant::now();
        let prepared = retriever.prepare(text, options).map_err(retrieval_error)?;
        let r = Instant::now();
        retriever.rank(&prepared, 10, &Filters::default(), options);
        rank.push(ms(r));
        total.push(ms(t));
    }
    Ok(json!({"total": Latency::of(&mut total), "rank": Latency::of(&mut rank)}))
}

fn ms(t: Instant) -> f64 {
    crate::units::ms(t.elapsed())
}

/// The process's peak resident memory (Linux `VmHWM`), in MiB.
fn peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}
