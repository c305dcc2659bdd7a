//! `toolrouter bench upstream`: what the upstream layer costs over a bare
//! HTTP call.
//!
//! A loopback server answers a small JSON body at once. The same requests
//! go, interleaved one by one, through a bare pooled reqwest client and
//! through [`Upstream::call`] (request building, the guard, every rate
//! limit, the retry machinery, the capped body read and JSON parsing), with
//! limits set high enough never to wait. Reported: p50 and p99 of each,
//! their differences (the layer's cost), and the median of the per-request
//! differences. (The p99 of per-request differences mixes the two paths'
//! independent jitter, so it is not the layer's p99 cost.)

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use serde_json::{Map, json};

use super::{CliError, load_catalog};
use crate::config::Config;
use crate::eval::retrieval::Latency;
use crate::upstream::Upstream;

#[derive(Debug, Args)]
pub(super) struct UpstreamBenchArgs {
    /// Requests per path.
    #[arg(long, default_value_t = 5000)]
    requests: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: &UpstreamBenchArgs, config: &Config) -> Result<ExitCode, CliError> {
    super::runtime()?.block_on(bench(args, config))
}

async fn bench(args: &UpstreamBenchArgs, config: &Config) -> Result<ExitCode, CliError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(anyhow::Error::from)?;
    let addr = listener.local_addr().map_err(anyhow::Error::from)?;
    let app = axum::Router::new()
        .fallback(|| async { axum::Json(json!({"base": "EUR", "rates": {"GBP": 0.86, "JPY": 162.3}})) });
    tokio::spawn(async move { axum::serve(listener, app).await });

    let mut config = config.clone();
    config.catalog.paths.clear();
    let catalog = load_catalog(&config)?;
    let api = catalog.api(catalog.resolve("latest_rates_for_frankfurter").first().expect("an embedded API"));
    let u = &mut config.upstream;
    u.base_url = format!("http://{addr}");
    u.allowed_hosts = vec![addr.to_string()];
    u.allow_private = true;
    for rate in [&mut u.global_rate, &mut u.host_rate, &mut u.api_rate, &mut u.client_rate] {
        *rate = 1e9;
    }
    u.burst = 1_000_000;
    let upstream = Upstream::new(&catalog, &config).map_err(|e| CliError::Usage(format!("{e:#}")))?;
    let bare = reqwest::Client::builder().build().map_err(anyhow::Error::from)?;
    let url = format!("http://{addr}/v1/latest?base=EUR");
    let arguments: Map<String, serde_json::Value> = json!({"base": "EUR"}).as_object().cloned().unwrap_or_default();

    let (mut plain, mut layered, mut added) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..args.requests + 200 {
        let t = Instant::now();
        let body = bare.get(&url).header("X-RapidAPI-Host", "api.frankfurter.dev").send().await;
        let body = match body {
            Ok(r) => r.bytes().await.map(|b| serde_json::from_slice::<serde_json::Value>(&b).is_ok()),
            Err(e) => Err(e),
        };
        let a = crate::units::ms(t.elapsed());
        let t = Instant::now();
        let result = upstream.call(api, &arguments, Some("bench")).await;
        let b = crate::units::ms(t.elapsed());
        if !matches!(body, Ok(true)) || result.is_err() {
            return Err(CliError::Failure(anyhow::anyhow!("a request failed: {body:?} / {:?}", result.err())));
        }
        // The first 200 of each warm the connection pools.
        if i >= 200 {
            plain.push(a);
            layered.push(b);
            added.push(b - a);
        }
    }
    let (p, l, d) = (Latency::of(&mut plain), Latency::of(&mut layered), Latency::of(&mut added));
    if args.json {
        let cost = json!({"p50": l.p50 - p.p50, "p99": l.p99 - p.p99, "median_of_differences": d.p50});
        println!("{}", json!({"requests": args.requests, "bare_ms": p, "upstream_ms": l, "added_ms": cost}));
    } else {
        println!("{} requests each, interleaved, loopback HTTP/1.1 keep-alive", args.requests);
        println!("bare reqwest        p50 {:.3} ms  p99 {:.3} ms", p.p50, p.p99);
        println!("toolrouter upstream p50 {:.3} ms  p99 {:.3} ms", l.p50, l.p99);
        println!("added               p50 {:.3} ms  p99 {:.3} ms", l.p50 - p.p50, l.p99 - p.p99);
        println!("median of per-request differences {:.3} ms", d.p50);
    }
    Ok(ExitCode::SUCCESS)
}
