//! `toolrouter graph build|stats|neighbors|record`.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;

use super::catalog::find;
use super::{CliError, EXIT_FAILURE, load_catalog, load_trajectories};
use crate::catalog::Catalog;
use crate::config::{Config, SearchMode};
use crate::graph::store::{self, GraphStore, LastRecovery, Recovery};
use crate::graph::{NodeKey, Params, RunRecord, ToolGraph, build};
use crate::planner::{LongTermMemory, memory};
use crate::retrieval::cache::{EmbeddingCache, embed_through};
use crate::retrieval::embedder::{Embedder, Role};
use crate::trajectory::Trajectory;

/// Transitions listed by `graph stats`.
const TOP_TRANSITIONS: usize = 10;

#[derive(Debug, Subcommand)]
pub(super) enum GraphCommand {
    /// Build the static graph from trajectory files (keeps what runs taught it since).
    Build {
        /// Trajectory files or directories; repeatable.
        #[arg(long = "trajectories", value_name = "PATH", required = true, num_args = 1..)]
        trajectories: Vec<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Nodes, edges, edges per node, unmapped calls, availability histogram, frequent transitions.
    Stats {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The heaviest successors of an API, with w and α.
    Neighbors {
        /// Function name (variant spellings accepted).
        function: String,
        /// How many.
        #[arg(short, default_value_t = 10)]
        k: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Record finished runs read from stdin (one JSON object per line:
    /// {"id", "task", "calls": [{"function", "ok"}], "success"}); prints
    /// `{"ack": seq, "id": ...}` once each is durable.
    Record,
}

pub(super) fn run(command: &GraphCommand, config: &Config) -> Result<ExitCode, CliError> {
    let dir = store::graph_dir(&config.state.dir());
    let params = Params::from(&config.graph);
    match command {
        GraphCommand::Build { trajectories, json } => build_graph(config, trajectories, *json),
        GraphCommand::Stats { json } => {
            let (graph, recovery) = store::read(&dir, params, None).map_err(|e| CliError::Failure(e.into()))?;
            let last = store::last_recovery(&dir).unwrap_or_else(|e| {
                tracing::warn!("the graph's last recovery report is unreadable: {e}");
                None
            });
            let stats = stats(&graph);
            if *json {
                let value = json!({"dir": dir, "recovery": recovery, "last_recovery": last, "stats": stats});
                println!("{}", serde_json::to_string_pretty(&value).map_err(anyhow::Error::from)?);
            } else {
                print_stats(&stats);
                print_recovery(&recovery, last.as_ref());
            }
            Ok(ExitCode::SUCCESS)
        }
        GraphCommand::Neighbors { function, k, json } => {
            let catalog = load_catalog(config)?;
            let (api, _) = find(&catalog, function)?;
            let (graph, _) = store::read(&dir, params, None).map_err(|e| CliError::Failure(e.into()))?;
            let key = NodeKey::Api(api.function_name.clone());
            let alpha = graph.alpha(&key).unwrap_or_else(|| catalog.tool_of(api).availability_prior());
            let successors: Vec<_> = graph.successors(&key).into_iter().take(*k).collect();
            if *json {
                let value = json!({"function": api.function_name, "alpha": alpha, "in_graph": graph.node(&key).is_some(), "successors": successors});
                println!("{}", serde_json::to_string_pretty(&value).map_err(anyhow::Error::from)?);
                return Ok(ExitCode::SUCCESS);
            }
            println!(
                "{} (α {alpha:.2}){}",
                api.function_name,
                if graph.node(&key).is_none() { ", not in the graph" } else { "" }
            );
            if successors.is_empty() {
                println!("  no successors");
            }
            for s in successors {
                println!("  w {:.3} (static {:.3}, seen {}x)  α {:.2}  {}", s.w, s.w0, s.count, s.alpha, s.key.name());
            }
            Ok(ExitCode::SUCCESS)
        }
        GraphCommand::Record => record(config, &dir, params),
    }
}

fn build_graph(config: &Config, paths: &[PathBuf], json: bool) -> Result<ExitCode, CliError> {
    let catalog = load_catalog(config)?;
    let (trajectories, _) = load_trajectories(paths)?;
    let built = build(&catalog, &trajectories, config.graph.max_calls, Params::from(&config.graph));
    let dir = store::graph_dir(&config.state.dir());
    let (mut store, mut graph, _) =
        GraphStore::open(&dir, Params::from(&config.graph), Some(&catalog)).map_err(|e| CliError::Failure(e.into()))?;
    graph.replace_static(&built);
    store.snapshot(&graph).map_err(|e| CliError::Failure(e.into()))?;
    let report = graph.meta.build.clone().unwrap_or_default();
    let remembered = remember(config, &catalog, &trajectories);
    if let Err(problem) = &remembered {
        tracing::warn!("long-term memory not rebuilt: {problem}");
    }
    if json {
        let memory = match &remembered {
            Ok((n, path)) => json!({"remembered": n, "path": path}),
            Err(problem) => json!({"error": problem}),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"dir": dir, "build": report, "memory": memory}))
                .map_err(anyhow::Error::from)?
        );
    } else {
        println!(
            "built from {} trajectories ({} successful, {} too long, {} empty after cleaning): {} paths, {} transitions",
            report.trajectories,
            report.successful,
            report.too_long,
            report.empty_after_cleaning,
            report.paths,
            report.transitions
        );
        println!(
            "{} of {} calls resolved; unmapped: {:?}; graph: {} nodes, {} edges ({} ms) in {}",
            report.resolved_calls,
            report.calls,
            report.unmapped,
            graph.node_count(),
            graph.edge_count(),
            report.elapsed_ms,
            dir.display()
        );
        if let Ok((n, path)) = &remembered {
            println!("long-term memory: {n} successful runs remembered in {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Rebuilds the planner's long-term memory from the successful runs among
/// `trajectories` (their tasks embedded through the embedding cache).
fn remember(config: &Config, catalog: &Catalog, trajectories: &[Trajectory]) -> Result<(usize, PathBuf), String> {
    if config.retrieval.mode == SearchMode::Lexical {
        return Err("retrieval.mode is lexical: no embeddings".into());
    }
    let embedder = Embedder::load(&config.embedding).map_err(|e| e.to_string())?;
    let cache_dir = config.embedding.cache_dir();
    let mut cache = EmbeddingCache::open(&cache_dir, embedder.id(), embedder.dims())
        .map_err(|e| format!("opening the embedding cache in {}: {e}", cache_dir.display()))?;
    let paths = memory::successful_paths(catalog, trajectories, config.graph.max_calls);
    let memories =
        memory::embed_paths(paths, &embedder, &mut cache, config.embedding.batch_size).map_err(|e| e.to_string())?;
    let path = memory::memory_path(&config.state.dir());
    let batch = config.embedding.batch_size;
    let mut embed = |tasks: &[String]| {
        embed_through(&mut cache, &embedder, Role::Query, tasks, batch).map_err(std::io::Error::other)
    };
    let kept = LongTermMemory::rewrite(&path, &memories, embedder.id(), &mut embed)
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok((memories.len() + kept, path))
}

fn record(config: &Config, dir: &std::path::Path, params: Params) -> Result<ExitCode, CliError> {
    let catalog: Option<Catalog> = load_catalog(config).ok();
    let (mut store, mut graph, _) =
        GraphStore::open(dir, params, catalog.as_ref()).map_err(|e| CliError::Failure(e.into()))?;
    let stdout = std::io::stdout();
    let mut bad = 0;
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line.map_err(|e| CliError::Failure(anyhow::anyhow!("reading stdin: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let run: RunRecord = match serde_json::from_str(&line) {
            Ok(run) => run,
            Err(e) => {
                bad += 1;
                eprintln!("toolrouter: line {}: not a run record: {e}", n + 1);
                continue;
            }
        };
        let seq = store.record(&mut graph, &run, catalog.as_ref()).map_err(|e| CliError::Failure(e.into()))?;
        let mut out = stdout.lock();
        let _ = writeln!(out, "{}", json!({"ack": seq, "id": run.id}));
        let _ = out.flush();
        if seq.is_multiple_of(config.graph.snapshot_every) {
            store.snapshot(&graph).map_err(|e| CliError::Failure(e.into()))?;
        }
    }
    store.snapshot(&graph).map_err(|e| CliError::Failure(e.into()))?;
    Ok(if bad == 0 { ExitCode::SUCCESS } else { ExitCode::from(EXIT_FAILURE) })
}

/// `graph stats` figures.
fn stats(graph: &ToolGraph) -> serde_json::Value {
    let apis: Vec<_> = graph.nodes().filter(|n| n.key != NodeKey::Finish).collect();
    let mut out_degree: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut static_edges, mut online_only) = (0, 0);
    for (from, _, e) in graph.edges() {
        *out_degree.entry(from.name()).or_default() += 1;
        if e.count > 0 { static_edges += 1 } else { online_only += 1 }
    }
    let sources = out_degree.len().max(1);
    let mut histogram = [0usize; 10];
    for n in &apis {
        let a = graph.alpha(&n.key).unwrap_or(0.0);
        histogram[((a * 10.0) as usize).min(9)] += 1;
    }
    let top: Vec<_> = graph
        .top_transitions(TOP_TRANSITIONS)
        .into_iter()
        .map(|(f, t, e)| json!({"from": f.name(), "to": t.name(), "count": e.count, "w0": e.w0}))
        .collect();
    json!({
        "nodes": graph.node_count(),
        "api_nodes": apis.len(),
        "edges": graph.edge_count(),
        "static_edges": static_edges,
        "online_only_edges": online_only,
        "edges_per_node": { "mean": graph.edge_count() as f64 / sources as f64, "max": out_degree.values().max().copied().unwrap_or(0) },
        "availability_histogram": histogram,
        "online_runs": graph.meta.online_runs,
        "seq": graph.meta.seq,
        "build": graph.meta.build,
        "top_transitions": top,
    })
}

fn print_stats(s: &serde_json::Value) {
    println!(
        "nodes {} ({} APIs and Finish), edges {} ({} from trajectories, {} seen only online)",
        s["nodes"], s["api_nodes"], s["edges"], s["static_edges"], s["online_only_edges"]
    );
    println!(
        "edges per node with successors: mean {:.2}, max {}",
        s["edges_per_node"]["mean"].as_f64().unwrap_or_default(),
        s["edges_per_node"]["max"]
    );
    if let Some(b) = s["build"].as_object() {
        println!(
            "built from {} trajectories: {} paths; {} of {} calls resolved; unmapped {}",
            b["trajectories"], b["paths"], b["resolved_calls"], b["calls"], b["unmapped"]
        );
    }
    println!("online runs {}, last log record {}", s["online_runs"], s["seq"]);
    let hist: Vec<String> = s["availability_histogram"]
        .as_array()
        .map(|h| {
            h.iter()
                .enumerate()
                .map(|(i, n)| format!("{:.1}-{:.1}: {n}", i as f64 / 10.0, (i + 1) as f64 / 10.0))
                .collect()
        })
        .unwrap_or_default();
    println!("availability α of API nodes: {}", hist.join(", "));
    println!("most frequent transitions:");
    for t in s["top_transitions"].as_array().into_iter().flatten() {
        println!(
            "  {:>4}x  w0 {:.2}  {} -> {}",
            t["count"],
            t["w0"].as_f64().unwrap_or_default(),
            t["from"].as_str().unwrap_or(""),
            t["to"].as_str().unwrap_or("")
        );
    }
}

/// What reading the graph found now, if anything, and the report a writer
/// kept of the last recovery that found damage.
fn print_recovery(now: &Recovery, last: Option<&LastRecovery>) {
    if now.found_damage() {
        println!("recovery (reading now): {}", describe(now));
        for problem in &now.problems {
            println!("  {problem}");
        }
    }
    match last {
        Some(last) => {
            println!("last recovery that found damage (at Unix time {}): {}", last.at_unix, describe(&last.recovery));
            for problem in &last.recovery.problems {
                println!("  {problem}");
            }
        }
        None => println!("no recovery has found damage"),
    }
}

/// A recovery report's counts in one line.
fn describe(r: &Recovery) -> String {
    let at_least = if r.lost_runs_lower_bound { "at least " } else { "" };
    format!(
        "snapshot {}, {} damaged snapshots, {at_least}{} runs lost, {} log records replayed, {} dropped, {} kept without their newline, {} bytes cut",
        r.snapshot, r.damaged_snapshots, r.lost_runs, r.replayed, r.dropped, r.unterminated, r.truncated_bytes
    )
}
