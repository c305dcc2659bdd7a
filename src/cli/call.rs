//! `toolrouter call <function> '<json args>'`: validate, call (live or
//! replay), print the compressed (or raw) response and the call's trace,
//! and report the outcome to the tool graph's availability.
//!
//! `toolrouter replay --cache DIR --listen ADDR`: serve the replay table
//! over HTTP.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use serde_json::{Value, json};

use super::catalog::find;
use super::validate::read_arguments;
use super::{CliError, EXIT_FAILURE, load_catalog};
use crate::args::{self, Options};
use crate::catalog::Api;
use crate::compress::{FieldChoice, FieldChoices, compress};
use crate::config::{Config, UpstreamMode};
use crate::graph::store::{self, GraphStore};
use crate::graph::{Params, RunCall, RunRecord};
use crate::upstream::{CallError, Outcome, ReplayTable, Response, Upstream};

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
    if config.upstream.mode == UpstreamMode::Replay && !config.upstream.replay_dir.is_dir() {
        return Err(CliError::Usage(
            "replay mode needs the replay table: --replay-dir DIR or upstream.replay_dir".into(),
        ));
    }
    let catalog = load_catalog(&config)?;
    let (api, _) = find(&catalog, &a.function)?;
    let valid = match args::validate(api, &arguments, Options::from(&config.args)) {
        Ok(v) => v,
        Err(invalid) => {
            if a.json {
                println!("{}", json!({"function": api.function_name, "ok": false, "problems": invalid.problems}));
            } else {
                println!("{invalid}");
            }
            return Ok(ExitCode::from(EXIT_FAILURE));
        }
    };
    let upstream = Upstream::new(&catalog, &config).map_err(|e| CliError::Usage(format!("{e:#}")))?;
    let runtime = super::runtime()?;
    let result = runtime.block_on(upstream.call(api, &valid.arguments, None));
    let outcome = match &result {
        Ok(r) => r.outcome(),
        Err(e) => e.outcome(),
    };
    report_outcome(&config, &catalog, &outcome);
    let budget = a.budget.unwrap_or(config.compress.budget);
    let choices = FieldChoices::load(&FieldChoices::path_in(&config.state.dir())).unwrap_or_else(|e| {
        tracing::warn!("the cached field choices are unreadable, compressing without them: {e}");
        FieldChoices::default()
    });
    let choice = choices.get(&api.function_name);
    match result {
        Ok(response) => print_response(api, &response, &arguments, a.raw, (budget, choice), a.json)?,
        Err(e) => {
            print_error(&e, a.json)?;
            return Ok(ExitCode::from(EXIT_FAILURE));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_response(
    api: &Api,
    r: &Response,
    arguments: &Value,
    raw: bool,
    (budget, choice): (usize, Option<&FieldChoice>),
    json: bool,
) -> Result<(), CliError> {
    let context = format!("{} {}", api.description, arguments);
    let compressed = (!raw).then(|| compress(&r.body, &context, budget, choice));
    if json {
        let response = match &compressed {
            Some(c) => serde_json::from_str::<Value>(&c.text).map_err(anyhow::Error::from)?,
            None => r.body.clone(),
        };
        let report = json!({"function": api.function_name, "ok": true, "status": r.status, "response": response,
            "compression": compressed, "trace": r.trace});
        println!("{}", serde_json::to_string_pretty(&report).map_err(anyhow::Error::from)?);
        return Ok(());
    }
    match &compressed {
        Some(c) => println!("{}", c.text),
        None => println!("{}", serde_json::to_string_pretty(&r.body).map_err(anyhow::Error::from)?),
    }
    eprintln!("-- {} {} in {:.1} ms", r.status, r.trace.function, r.trace.elapsed_ms);
    if let Some(c) = &compressed
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

/// Feeds the outcome to the graph's availability (a standalone call).
/// The graph is another writer's while a server holds it: then say so and go on.
fn report_outcome(config: &Config, catalog: &crate::catalog::Catalog, outcome: &Outcome) {
    let dir = store::graph_dir(&config.state.dir());
    let run = RunRecord {
        id: crate::graph::run_id("call"),
        task: String::new(),
        calls: vec![RunCall { function: outcome.function.clone(), ok: outcome.ok }],
        success: outcome.ok,
        standalone: true,
    };
    let recorded = GraphStore::open(&dir, Params::from(&config.graph), Some(catalog))
        .and_then(|(mut store, mut graph, _)| store.record(&mut graph, &run, Some(catalog)));
    if let Err(e) = recorded {
        tracing::warn!("the call's outcome was not recorded in the tool graph: {e}");
    }
}

pub(super) fn replay(a: &ReplayArgs, config: &Config) -> Result<ExitCode, CliError> {
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
    let router = crate::server::replay_server::router(catalog, table);
    let runtime = super::runtime()?;
    runtime
        .block_on(crate::server::replay_server::serve(router, a.listen))
        .map_err(|e| CliError::Usage(format!("cannot serve on {}: {e}", a.listen)))?;
    Ok(ExitCode::SUCCESS)
}
