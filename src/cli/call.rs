//! `toolrouter call <function> '<json args>'`: the engine's one call
//! pipeline ([`Engine::call`], as MCP and HTTP calls go): resolve the name,
//! validate, call (live or replay), record the outcome in the tool graph's
//! availability, compress; then print the compressed (or raw) response and
//! the call's trace.
//!
//! `toolrouter replay --cache DIR --listen ADDR`: serve the replay table
//! over HTTP.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use serde_json::{Value, json};

use super::validate::read_arguments;
use super::{CliError, EXIT_FAILURE, load_catalog};
use crate::compress::Compressed;
use crate::config::{Config, UpstreamMode};
use crate::engine::{CallRequest, Called, Engine};
use crate::upstream::{CallError, ReplayTable, Response};

#[derive(Debug, Args)]
pub(super) struct CallArgs {
    /// Function name (variant spellings of trajectories are accepted).
    function: String,
    /// Arguments as a JSON object; `-` reads stdin, `@FILE` reads a file.
    arguments: String,
    /// Where the call goes (default: `upstream.mode`).
    #[arg(long, value_enum)]
    upstream: Option<UpstreamMode>,
    /// The replay table (default: `upstream.replay_dir`).
    #[arg(long, value_name = "DIR")]
    replay_dir: Option<PathBuf>,
    /// Print the response as received, not compressed.
    #[arg(long)]
    raw: bool,
    /// Compression budget in characters (default: `compress.budget`).
    #[arg(long, value_name = "CHARS")]
    budget: Option<usize>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(super) struct ReplayArgs {
    /// The replay table (StableToolBench cache layout).
    #[arg(long, value_name = "DIR")]
    cache: PathBuf,
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8765")]
    listen: SocketAddr,
    /// Share of the catalog's APIs (0 to 1) that answer 503 instead of
    /// their recordings, to measure what survives an outage.
    #[arg(long, default_value_t = 0.0, value_name = "SHARE")]
    down: f64,
}

pub(super) fn call(a: &CallArgs, config: &Config) -> Result<ExitCode, CliError> {
    let text = read_arguments(&a.arguments)?;
    let arguments: Value = serde_json::from_str(&text)
        .map_err(|e| CliError::Usage(format!("the arguments are not valid JSON ({e}); pass a JSON object")))?;
    let mut config = config.clone();
    if let Some(mode) = a.upstream {
        config.upstream.mode = mode;
    }
    if let Some(dir) = &a.replay_dir {
        config.upstream.replay_dir = dir.clone();
    }
    if let Some(budget) = a.budget {
        config.compress.budget = budget;
    }
    if config.upstream.mode == UpstreamMode::Replay && !config.upstream.replay_dir.is_dir() {
        return Err(CliError::Usage(
            "replay mode needs the replay table: --replay-dir DIR or upstream.replay_dir".into(),
        ));
    }
    let catalog = Arc::new(load_catalog(&config)?);
    // No search index or embedding model: a call needs neither. Opening
    // fails on the upstream's configuration (replay table, URL, key).
    let engine = Engine::open_for_calls(&config, catalog).map_err(|e| CliError::Usage(format!("{e:#}")))?;
    let request = CallRequest {
        function: &a.function,
        arguments: &arguments,
        client: None,
        via: "cli",
        purpose: "",
        standalone: true,
    };
    match super::runtime()?.block_on(engine.call(request)) {
        Called::Unknown(unknown) => Err(CliError::Usage(unknown.to_string())),
        // A command has no key, so no policy refuses it.
        Called::NotAllowed(refused) => Err(CliError::Usage(refused.to_string())),
        Called::Refused(problem) => {
            let catalog = engine.catalog();
            let function = catalog.find(&a.function).map_or(a.function.as_str(), |api| &api.function_name);
            if a.json {
                println!("{}", json!({"function": function, "ok": false, "refused": problem}));
            } else {
                println!("call refused: {problem}");
            }
            Ok(ExitCode::from(EXIT_FAILURE))
        }
        Called::Invalid(invalid) => {
            if a.json {
                println!("{}", json!({"function": invalid.function, "ok": false, "problems": invalid.problems}));
            } else {
                println!("{invalid}");
            }
            Ok(ExitCode::from(EXIT_FAILURE))
        }
        Called::Failed(e) => {
            print_error(&e, a.json)?;
            Ok(ExitCode::from(EXIT_FAILURE))
        }
        Called::Done { function, response, compressed, .. } => {
            print_response(&function, &response, (!a.raw).then_some(&compressed), a.json)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Prints a response: `compressed`, or as received when `None` (`--raw`).
fn print_response(function: &str, r: &Response, compressed: Option<&Compressed>, json: bool) -> Result<(), CliError> {
    if json {
        let response = match compressed {
            Some(c) => serde_json::from_str::<Value>(&c.text).map_err(anyhow::Error::from)?,
            None => r.body.clone(),
        };
        let report = json!({"function": function, "ok": true, "status": r.status, "response": response,
            "compression": compressed, "trace": r.trace});
        println!("{}", serde_json::to_string_pretty(&report).map_err(anyhow::Error::from)?);
        return Ok(());
    }
    match compressed {
        Some(c) => println!("{}", c.text),
        None => println!("{}", serde_json::to_string_pretty(&r.body).map_err(anyhow::Error::from)?),
    }
    eprintln!("-- {} {} in {:.1} ms", r.status, r.trace.function, r.trace.elapsed_ms);
    if let Some(c) = compressed
        && c.chars_before != c.chars_after
    {
        eprintln!("   compressed {} -> {} characters", c.chars_before, c.chars_after);
    }
    print_trace(&r.trace);
    Ok(())
}

fn print_error(e: &CallError, json: bool) -> Result<(), CliError> {
    if json {
        let report = json!({"function": e.trace.function, "ok": false, "error": e});
        println!("{}", serde_json::to_string_pretty(&report).map_err(anyhow::Error::from)?);
        return Ok(());
    }
    let class = e.class.name();
    println!("call failed ({class}): {}", e.message);
    if let Some(ms) = e.retry_after_ms {
        println!("retry after {:.1} s", ms / 1e3);
    }
    print_trace(&e.trace);
    Ok(())
}

fn print_trace(t: &crate::upstream::CallTrace) {
    eprintln!("   {} {}", t.method, t.url);
    if let Some(m) = &t.replay {
        eprintln!("   replay: {}", serde_json::to_string(m).unwrap_or_default());
    }
    if t.rate_limit_wait_ms > 0.05 {
        eprintln!("   waited {:.1} ms for the rate limits", t.rate_limit_wait_ms);
    }
    for (i, a) in t.attempts.iter().enumerate() {
        let retry = a.retry_in_ms.map(|ms| format!("; retry in {ms:.0} ms")).unwrap_or_default();
        eprintln!("   attempt {}: {} ({:.1} ms{retry})", i + 1, a.outcome, a.elapsed_ms);
    }
}

pub(super) fn replay(a: &ReplayArgs, config: &Config) -> Result<ExitCode, CliError> {
    if !(0.0..=1.0).contains(&a.down) {
        return Err(CliError::Usage(format!("--down is a share between 0 and 1, got {}", a.down)));
    }
    let catalog = Arc::new(load_catalog(config)?);
    let table = ReplayTable::load(&a.cache, &catalog)
        .map_err(|e| CliError::Usage(format!("cannot read the replay table {}: {e}", a.cache.display())))?;
    let r = &table.report;
    eprintln!(
        "replay table: {} recordings of {} files ({} files of APIs the catalog lacks, {} bad entries)",
        r.recordings,
        r.files,
        r.unresolved.len(),
        r.bad_entries
    );
    let outage = crate::upstream::Outage { share: a.down };
    if a.down > 0.0 {
        let down = catalog.apis().iter().filter(|api| outage.is_down(&api.function_name)).count();
        eprintln!("{down} of {} APIs answer 503 (--down {})", catalog.apis().len(), a.down);
    }
    let router = crate::server::replay_server::router(catalog, table, outage);
    let runtime = super::runtime()?;
    runtime
        .block_on(crate::server::replay_server::serve(router, a.listen))
        .map_err(|e| CliError::Usage(format!("cannot serve on {}: {e}", a.listen)))?;
    Ok(ExitCode::SUCCESS)
}
