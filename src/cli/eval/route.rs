//! `toolrouter eval route`: route mode's narrowing of a request's tools
//! among distractors, against BM25, the embedding alone and random picks.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::cli::CliError;
use crate::config::Config;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["queries", "cases", "sessions"])))]
pub(in crate::cli) struct RouteArgs {
    /// ToolBench query files (each is a set): their APIs among catalog distractors.
    #[arg(long = "queries", value_name = "FILE", num_args = 1..)]
    queries: Vec<PathBuf>,
    /// Route-case files (each is a set; JSON lines `{"query", "tools",
    /// "relevant"}`): any tool collection, distractors from the other cases.
    #[arg(long = "cases", value_name = "FILE", num_args = 1.., conflicts_with = "queries")]
    cases: Vec<PathBuf>,
    /// Session files (each is a set; JSON lines `{"id", "servers",
    /// "turns"}`, tools from `tools.json` beside them): each step of a
    /// multi-turn session over MCP servers' tools is a request
    /// (tests/data/mcp-sessions).
    #[arg(long = "sessions", value_name = "FILE", num_args = 1.., conflicts_with = "queries")]
    sessions: Vec<PathBuf>,
    /// With `--sessions`: also whole tasks of 2 and 3 sessions' opening
    /// requests on different servers, each one message (see
    /// `eval::route::sessions::load_tasks`).
    #[arg(long, requires = "sessions")]
    tasks: bool,
    /// Route-case files whose tools are only distractors (not measured).
    #[arg(long = "distractors", value_name = "FILE", num_args = 1.., conflicts_with = "queries")]
    distractors: Vec<PathBuf>,
    /// Tools each request carries: the query's own, then distractors.
    #[arg(long, default_value_t = 300)]
    tools: usize,
    /// Tools kept (default: `openai.max_tools`).
    #[arg(long)]
    k: Option<usize>,
    /// Seed of the distractors and their order.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Without the embedding model: route mode by words only.
    #[arg(long)]
    lexical: bool,
    /// Tools a list's first request gets embedded inline, when none of
    /// them was known (what `openai.embed_budget_ms` buys on the machine).
    #[arg(long, default_value_t = 80)]
    first_embedded: usize,
    /// Route mode learning from use: each request's needed tools are
    /// remembered as called, and route mode with that memory is measured
    /// beside it without (and over the requests needing a tool needed before).
    #[arg(long)]
    learning: bool,
    /// Weight of the latest message's BM25 ranking (a list sweeps values;
    /// 0 with the intent and earlier weights 0: the embedding alone).
    #[arg(long, value_delimiter = ',', value_name = "W")]
    lexical_weight: Vec<f32>,
    /// Weight of the dense signal (a list sweeps values).
    #[arg(long, value_delimiter = ',', value_name = "W")]
    dense_weight: Vec<f32>,
    /// Weight of each intent's BM25 ranking (a list sweeps values).
    #[arg(long, value_delimiter = ',', value_name = "W")]
    intent_weight: Vec<f32>,
    /// Weight of earlier user messages' BM25 ranking (a list sweeps values).
    #[arg(long, value_delimiter = ',', value_name = "W")]
    earlier_weight: Vec<f32>,
    /// Weight of each tool's server's BM25 ranking (a list sweeps values; 0: off).
    #[arg(long, value_delimiter = ',', value_name = "W")]
    server_weight: Vec<f32>,
    /// Weight of a tool's vector learned from use (with `--learning`; a list sweeps values; 0: off).
    #[arg(long, value_delimiter = ',', value_name = "W")]
    learned_weight: Vec<f32>,
    /// Whether kept tools bring along the tools that produce what they need
    /// (`true,false` sweeps both).
    #[arg(long, value_delimiter = ',', value_name = "BOOL")]
    companions: Vec<bool>,
    /// Sessions' tools named `server__tool`, as clients that connect several
    /// servers and toolrouter's own federation name them (default: as each
    /// server lists them, prefixed only where two servers share a name).
    #[arg(long)]
    server_names: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: &RouteArgs, config: &Config) -> Result<ExitCode, CliError> {
    use crate::eval::route::{self, RouteOptions};
    let k = args.k.unwrap_or(config.openai.max_tools);
    if k == 0 || args.tools < k {
        return Err(CliError::Usage(format!("--k {k} must be at least 1 and at most --tools {}", args.tools)));
    }
    let embedder = if args.lexical {
        None
    } else {
        Some(
            crate::retrieval::Embedder::load(&config.embedding)
                .map_err(|e| CliError::Usage(format!("{e} (or pass --lexical)")))?,
        )
    };
    // Tool vectors kept between runs, beside the embedding cache (a run
    // over BFCL's 1,224 functions embeds them once).
    let vectors = crate::retrieval::tool_vectors::ToolVectors::new(
        Some(config.embedding.cache_dir().join("route-eval")),
        crate::retrieval::tool_vectors::Bounds { entries: 200_000, bytes: 1 << 30 },
    );
    let memory = crate::retrieval::tool_memory::ToolMemory::new(None, 1_000_000);
    let ranker = crate::retrieval::tool_list::ToolListRanker::new(vectors, memory);
    let alone = route::AloneVectors::default();
    let embedding_failed = |e| CliError::Usage(format!("embedding the tool lists failed: {e}"));
    let by_cases = !args.cases.is_empty() || !args.sessions.is_empty();
    let evaluate: Box<dyn Fn(RouteOptions) -> Result<route::RouteReport, CliError>> = if !by_cases {
        let sets = super::load_sets(&args.queries)?;
        let sources = crate::catalog::Sources {
            paths: config.catalog.paths.clone(),
            include_embedded: config.catalog.include_embedded,
            query_files: config.catalog.query_files.iter().chain(&args.queries).cloned().collect(),
        };
        let catalog = crate::catalog::Catalog::load(&sources).map_err(|e| CliError::Usage(e.to_string()))?;
        Box::new(move |options| {
            route::evaluate(&catalog, &sets, options, &ranker, embedder.as_ref(), &alone).map_err(embedding_failed)
        })
    } else {
        let mut sets = Vec::new();
        for path in &args.cases {
            let name = path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into());
            sets.push((name, route::load_cases(path).map_err(CliError::Usage)?));
        }
        for path in &args.sessions {
            let name = path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into());
            sets.push((name.clone(), route::load_sessions(path, args.server_names).map_err(CliError::Usage)?));
            for size in [2, 3].into_iter().filter(|_| args.tasks) {
                let tasks = route::load_tasks(path, args.server_names, size).map_err(CliError::Usage)?;
                sets.push((format!("{name}: tasks of {size} servers"), tasks));
            }
        }
        let mut distractors = Vec::new();
        for path in &args.distractors {
            distractors.extend(route::load_cases(path).map_err(CliError::Usage)?);
        }
        Box::new(move |options| {
            route::evaluate_cases(&sets, &distractors, options, &ranker, embedder.as_ref(), &alone)
                .map_err(embedding_failed)
        })
    };
    use crate::retrieval::tool_list::ListWeights;
    let base = ListWeights::default();
    let or_default = |v: &[f32], d: f32| if v.is_empty() { vec![d] } else { v.to_vec() };
    let swept = [
        &args.lexical_weight,
        &args.dense_weight,
        &args.intent_weight,
        &args.earlier_weight,
        &args.server_weight,
        &args.learned_weight,
    ];
    let sweep = swept.iter().any(|v| !v.is_empty()) || !args.companions.is_empty();
    let companions = if args.companions.is_empty() { vec![base.companions] } else { args.companions.clone() };
    // The sweep's grid, one field at a time: every weights so far, once per value of the next.
    type Set = fn(&mut ListWeights, f32);
    let fields: [(&Vec<f32>, f32, Set); 6] = [
        (&args.lexical_weight, base.lexical, |w, v| w.lexical = v),
        (&args.dense_weight, base.dense, |w, v| w.dense = v),
        (&args.intent_weight, base.intent, |w, v| w.intent = v),
        (&args.earlier_weight, base.earlier, |w, v| w.earlier = v),
        (&args.server_weight, base.server, |w, v| w.server = v),
        (&args.learned_weight, base.learned, |w, v| w.learned = v),
    ];
    let mut grid = vec![base];
    for (values, default, set) in fields {
        let values = or_default(values, default);
        grid = grid
            .iter()
            .flat_map(|w| values.iter().map(move |&v| (*w, v)))
            .map(|(mut w, v)| {
                set(&mut w, v);
                w
            })
            .collect();
    }
    let grid: Vec<ListWeights> = grid
        .into_iter()
        .flat_map(|w| companions.iter().map(move |&companions| ListWeights { companions, ..w }))
        .collect();
    let mut reports = Vec::new();
    for weights in grid {
        let options = RouteOptions {
            tools: args.tools,
            k,
            seed: args.seed,
            weights,
            first_embedded: args.first_embedded,
            learning: args.learning,
        };
        let report = evaluate(options)?;
        if !args.json {
            if sweep {
                let w = &weights;
                println!(
                    "lexical {}, dense {}, intent {}, earlier {}, server {}, learned {}, companions {}:",
                    w.lexical, w.dense, w.intent, w.earlier, w.server, w.learned, w.companions
                );
            }
            print!("{}", route::markdown(&report));
        }
        reports.push(report);
    }
    if args.json {
        let value = if reports.len() == 1 { serde_json::to_value(&reports[0]) } else { serde_json::to_value(&reports) };
        println!(
            "{}",
            serde_json::to_string_pretty(&value.map_err(anyhow::Error::from)?).map_err(anyhow::Error::from)?
        );
    }
    Ok(ExitCode::SUCCESS)
}
