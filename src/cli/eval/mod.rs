//! `toolrouter eval retrieval`: retrieval quality on ToolBench query files.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

mod next;
mod route;
mod search;
use next::NextArgs;
use route::RouteArgs;
use search::SearchArgs;

use super::search::{DenseArg, ModeArg, open, retrieval_error};
use super::{CliError, load_catalog, load_trajectories};
use crate::config::Config;
use crate::eval::learning::{self, Task};
use crate::eval::{queries, retrieval};
use crate::retrieval::{IntentMerge, SearchOptions};

#[derive(Debug, Subcommand)]
pub(super) enum EvalCommand {
    /// Recall@k, NDCG@k and MRR of the queries' relevant APIs over the whole catalog.
    Retrieval(RetrievalArgs),
    /// Precision, recall and F1 of planned APIs, with the graph built leave-one-set-out.
    Plan(PlanArgs),
    /// Response compression over every recorded response of a replay table.
    Compress(CompressArgs),
    /// Route mode's narrowing of a query's tools among distractors, against BM25 and random picks.
    Route(RouteArgs),
    /// Tool search over MCP servers' tools, replayed as agent loops, against BM25 and regex searches.
    Search(SearchArgs),
    /// Catalog search for a run's next call, with and without the tool graph's cue from the call before.
    Next(NextArgs),
}

#[derive(Debug, Args)]
pub(super) struct CompressArgs {
    /// The replay table (StableToolBench cache layout).
    #[arg(long, value_name = "DIR")]
    cache: PathBuf,
    /// Budget in characters (default: `compress.budget`).
    #[arg(long)]
    budget: Option<usize>,
    /// Largest responses shown before and after.
    #[arg(long, default_value_t = 3)]
    samples: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(super) struct PlanArgs {
    /// ToolBench query files (each is a set, left out of its own graph).
    #[arg(long = "queries", value_name = "FILE", required = true, num_args = 1..)]
    queries: Vec<PathBuf>,
    /// Trajectory files or directories the graph and memory learn from.
    #[arg(long = "trajectories", value_name = "PATH", required_unless_present = "learning_curve", num_args = 1..)]
    trajectories: Vec<PathBuf>,
    #[command(flatten)]
    curve: CurveArgs,
    /// Only the planner without the tool graph (and the retrieval baselines).
    #[arg(long)]
    no_graph: bool,
    /// Only the greedy planner (and the retrieval baselines).
    #[arg(long)]
    greedy: bool,
    /// Share of the catalog's APIs down (0 to 1): their calls fail as a
    /// 503 would, the others are planned; shows how often the planner
    /// still serves every part of a request, with and without backtracking.
    #[arg(long, default_value_t = 0.0, value_name = "SHARE")]
    down: f64,
    /// How queries are kept from the runs the graph learns: `sets` (leave one
    /// set out) or `queries` (folds within a set: a diagnostic).
    #[arg(long, value_enum, default_value = "sets")]
    split: SplitArg,
    /// The deterministic decider's relevance threshold for further steps (a list sweeps values).
    #[arg(long, value_delimiter = ',', value_name = "X")]
    min_relevance: Vec<f32>,
    /// Steps the deterministic decider takes whatever their relevance (a list sweeps values).
    #[arg(long, value_delimiter = ',', value_name = "N")]
    min_steps: Vec<usize>,
    /// Sizes of the retrieval-only baselines.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 3])]
    baseline: Vec<usize>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The learning-curve options of `eval plan` and `eval retrieval`.
#[derive(Debug, Args)]
pub(super) struct CurveArgs {
    /// Instead: the queries in one fixed order, each planned (or retrieved:
    /// Recall at the largest --k) and then its solution recorded in the
    /// graph and the long-term memory, against learning off. With
    /// --trajectories, the queries are the tasks of their successful runs
    /// that are not in the --queries files (held-out traffic), each with
    /// its run's APIs as the relevant ones.
    #[arg(long)]
    learning_curve: bool,
    /// Queries per window of the learning curve.
    #[arg(long, default_value_t = 50)]
    window: usize,
    /// Seed of the learning curve's order.
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(super) enum SplitArg {
    Sets,
    Queries,
}

impl From<SplitArg> for crate::eval::plan::Split {
    fn from(split: SplitArg) -> Self {
        match split {
            SplitArg::Sets => Self::Sets,
            SplitArg::Queries => Self::Queries,
        }
    }
}

#[derive(Debug, Args)]
pub(super) struct RetrievalArgs {
    /// ToolBench query files; the `api_list` tools they name that the catalog lacks are added to it.
    #[arg(long = "queries", value_name = "FILE", required = true, num_args = 1..)]
    queries: Vec<PathBuf>,
    /// Cut-offs, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 3, 5, 10])]
    k: Vec<usize>,
    #[command(flatten)]
    curve: CurveArgs,
    /// Ranking signals (default from `retrieval.mode`); a list sweeps them.
    #[arg(long, value_enum, value_delimiter = ',')]
    mode: Vec<ModeArg>,
    /// Dense nearest neighbours (default from `retrieval.dense_index`).
    #[arg(long, value_enum)]
    dense_index: Option<DenseArg>,
    /// Search each query whole only, without splitting it into intents (ablation).
    #[arg(long)]
    no_intents: bool,
    /// Rank each intent by its own vector too (`retrieval.embed_intents`).
    #[arg(long)]
    embed_intents: bool,
    /// How intents join the whole query's ranking: reserve (each intent keeps
    /// its best hit in the top 10) or sum; a list sweeps both.
    #[arg(long, value_enum, value_delimiter = ',')]
    intent_merge: Vec<MergeArg>,
    /// Fusion weight of BM25 (a list sweeps values; defaults: the built-in weights).
    #[arg(long, value_delimiter = ',', value_name = "X")]
    lexical_weight: Vec<f32>,
    /// Fusion weight of the dense ranking.
    #[arg(long, value_delimiter = ',', value_name = "X")]
    dense_weight: Vec<f32>,
    /// Weight of each intent's lists relative to the whole query's (0: intents off).
    #[arg(long, value_delimiter = ',', value_name = "X")]
    intent_weight: Vec<f32>,
    /// Weight of the tool-level lists (0: off).
    #[arg(long, value_delimiter = ',', value_name = "X")]
    tool_weight: Vec<f32>,
    /// Weight of a tool the request names ("the News Sentiment API"; 0: off).
    #[arg(long, value_delimiter = ',', value_name = "X")]
    named_tool_weight: Vec<f32>,
    /// Reciprocal rank fusion constant.
    #[arg(long, value_delimiter = ',', value_name = "X")]
    rrf_k: Vec<f32>,
    /// Trajectory files or directories: each set is also searched with the
    /// long-term memory of the successful runs on the other sets (leave one
    /// set out), as `serve` searches after `graph build`.
    #[arg(long = "trajectories", value_name = "PATH", num_args = 1..)]
    trajectories: Vec<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(super) enum MergeArg {
    Sum,
    Reserve,
}

pub(super) fn run(command: &EvalCommand, config: &Config) -> Result<ExitCode, CliError> {
    match command {
        EvalCommand::Retrieval(args) => run_retrieval(args, config),
        EvalCommand::Plan(args) => run_plan(args, config),
        EvalCommand::Compress(args) => run_compress(args, config),
        EvalCommand::Route(args) => route::run(args, config),
        EvalCommand::Search(args) => search::run(args, config),
        EvalCommand::Next(args) => next::run(args, config),
    }
}

/// Runs and prints a learning curve.
fn learning_curve(
    retriever: &crate::retrieval::Retriever,
    sets: &[(String, Vec<queries::QueryRecord>)],
    trajectories: &[PathBuf],
    task: Task,
    config: &Config,
    curve: &CurveArgs,
    json: bool,
) -> Result<ExitCode, CliError> {
    let (window, seed) = (curve.window, curve.seed);
    if window == 0 {
        return Err(CliError::Usage("--window must be at least 1".into()));
    }
    let catalog = retriever.catalog();
    let queries = if trajectories.is_empty() {
        learning::from_sets(catalog, sets)
    } else {
        let (runs, _) = load_trajectories(trajectories)?;
        let development: HashSet<String> =
            sets.iter().flat_map(|(_, qs)| qs).map(|q| q.query.trim().to_string()).collect();
        learning::from_runs(catalog, &runs, &development, config.graph.max_calls)
    };
    let runtime = super::runtime()?;
    let settings = crate::planner::Settings::from(config);
    let params = crate::graph::Params::from(&config.graph);
    let curve = runtime
        .block_on(learning::curve(retriever, queries, task, settings, params, window, seed))
        .map_err(retrieval_error)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&curve).map_err(anyhow::Error::from)?);
    } else {
        print!("{}", learning::markdown(&curve));
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn load_sets(paths: &[PathBuf]) -> Result<Vec<(String, Vec<queries::QueryRecord>)>, CliError> {
    let mut sets = Vec::new();
    for path in paths {
        let records = queries::load(path).map_err(CliError::Usage)?;
        let name = path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into_owned());
        sets.push((name, records));
    }
    Ok(sets)
}

fn run_plan(args: &PlanArgs, config: &Config) -> Result<ExitCode, CliError> {
    use crate::eval::plan::{self, Split, Variant};
    let sets = load_sets(&args.queries)?;
    let (trajectories, _) = load_trajectories(&args.trajectories)?;
    let mut config = config.clone();
    config.catalog.query_files.extend(args.queries.iter().cloned());
    let retriever = open(&config, false)?;
    if args.curve.learning_curve {
        return learning_curve(&retriever, &sets, &args.trajectories, Task::Plan, &config, &args.curve, args.json);
    }
    let split = args.split.into();
    let folds = plan::folds(&sets, &trajectories, split);
    let mut variants = Vec::new();
    let thresholds = if args.min_relevance.is_empty() {
        vec![crate::planner::decider::MIN_RELEVANCE]
    } else {
        args.min_relevance.clone()
    };
    let min_steps =
        if args.min_steps.is_empty() { vec![crate::planner::decider::MIN_STEPS] } else { args.min_steps.clone() };
    for (min_relevance, min_steps) in thresholds.into_iter().flat_map(|t| min_steps.iter().map(move |&s| (t, s))) {
        let planner = |graph, greedy, memory| Variant::Planner { graph, greedy, memory, min_relevance, min_steps };
        if args.no_graph || args.greedy {
            variants.push(planner(!args.no_graph, args.greedy, true));
        } else {
            variants.push(planner(true, false, true));
            variants.push(planner(true, false, false));
            variants.push(planner(false, false, false));
            variants.push(planner(true, true, true));
        }
    }
    variants.extend(args.baseline.iter().filter(|&&n| n > 0).map(|&n| Variant::Retrieval { n }));
    let runtime = super::runtime()?;
    let settings = crate::planner::Settings::from(&config);
    let params = crate::graph::Params::from(&config.graph);
    let reports = runtime
        .block_on(plan::evaluate(
            &retriever,
            &folds,
            &variants,
            settings,
            params,
            config.graph.max_calls,
            &config.embedding.cache_dir(),
            crate::upstream::Outage { share: args.down },
        ))
        .map_err(retrieval_error)?;
    if args.json {
        let value = serde_json::json!({"split": split, "trajectories": trajectories.len(), "reports": reports});
        println!("{}", serde_json::to_string_pretty(&value).map_err(anyhow::Error::from)?);
    } else {
        let label = match split {
            Split::Sets => "leave one set out",
            Split::Queries => "query folds within each set (diagnostic: the graph has seen other queries of the set)",
        };
        println!("{} trajectories; graph and memory per fold: {label}\n", trajectories.len());
        print!("{}", plan::markdown(&reports));
    }
    Ok(ExitCode::SUCCESS)
}

fn run_retrieval(args: &RetrievalArgs, config: &Config) -> Result<ExitCode, CliError> {
    if args.k.is_empty() || args.k.contains(&0) {
        return Err(CliError::Usage("--k takes cut-offs of at least 1, e.g. --k 1,5,10".into()));
    }
    let sets = load_sets(&args.queries)?;
    let mut config = config.clone();
    config.catalog.query_files.extend(args.queries.iter().cloned());
    if args.mode.iter().any(|m| !matches!(m, ModeArg::Lexical)) {
        config.retrieval.mode = crate::config::SearchMode::Hybrid;
    } else if let Some(mode) = args.mode.first() {
        config.retrieval.mode = (*mode).into();
    }
    if let Some(d) = args.dense_index {
        config.retrieval.dense_index = d.into();
    }
    let retriever = open(&config, false)?;
    let report = retriever.catalog().report();
    tracing::info!(
        tools = report.query_tools_added,
        apis = report.query_apis_added,
        "added from the query files' api_list"
    );
    if args.curve.learning_curve {
        let k = args.k.iter().copied().max().unwrap_or(10);
        let task = Task::Retrieval { k };
        return learning_curve(&retriever, &sets, &args.trajectories, task, &config, &args.curve, args.json);
    }
    let variants = variants(args, &config);
    let memories = if args.trajectories.is_empty() {
        Vec::new()
    } else {
        if retriever.embedder().is_none() {
            return Err(CliError::Usage("--trajectories needs the embedding model (a mode other than lexical)".into()));
        }
        let (trajectories, _) = load_trajectories(&args.trajectories)?;
        let cache_dir = config.embedding.cache_dir();
        crate::eval::plan::memories_left_out(&retriever, &sets, &trajectories, config.graph.max_calls, &cache_dir)
            .map_err(retrieval_error)?
    };
    let remembering =
        (!memories.is_empty()).then(|| retrieval::Memories { per_set: &memories, hints: config.planner.hints });
    let results = retrieval::evaluate(&retriever, &sets, &args.k, &variants, remembering).map_err(retrieval_error)?;
    if args.json {
        let value = serde_json::json!({
            "query_tools_added": report.query_tools_added,
            "query_apis_added": report.query_apis_added,
            "remembered_runs_per_set": memories.iter().map(|m| m.len()).collect::<Vec<_>>(),
            "reports": results,
        });
        println!("{}", serde_json::to_string_pretty(&value).map_err(anyhow::Error::from)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} tools ({} APIs) the catalog lacked were added from the query files' api_list.\n",
        report.query_tools_added, report.query_apis_added
    );
    if !memories.is_empty() {
        let sizes: Vec<String> =
            sets.iter().zip(&memories).map(|((name, _), m)| format!("{name} {}", m.len())).collect();
        println!(
            "Searched with the long-term memory of the successful runs on the other sets (remembered runs: {}).\n",
            sizes.join(", ")
        );
    }
    if results.len() == 1 {
        print!("{}", retrieval::markdown(&results[0], &args.k));
    } else {
        print!("{}", retrieval::summary(&results));
    }
    Ok(ExitCode::SUCCESS)
}

/// Every combination of the listed option values (one when none is listed).
fn variants(args: &RetrievalArgs, config: &Config) -> Vec<SearchOptions> {
    let base = SearchOptions::from_config(&config.retrieval);
    let mut out = vec![base];
    // Each listed option multiplies the variants built so far.
    fn sweep<T: Copy>(
        out: Vec<SearchOptions>,
        values: &[T],
        set: impl Fn(&mut SearchOptions, T),
    ) -> Vec<SearchOptions> {
        if values.is_empty() {
            return out;
        }
        let mut next = Vec::with_capacity(out.len() * values.len());
        for o in out {
            for v in values {
                let mut o = o;
                set(&mut o, *v);
                next.push(o);
            }
        }
        next
    }
    out = sweep(out, &args.mode, |o, m| o.mode = m.into());
    out = sweep(out, &args.intent_merge, |o, m| {
        o.intent_merge = match m {
            MergeArg::Sum => IntentMerge::Sum,
            MergeArg::Reserve => IntentMerge::Reserve,
        }
    });
    out = sweep(out, &args.lexical_weight, |o, v| o.weights.lexical = v);
    out = sweep(out, &args.dense_weight, |o, v| o.weights.dense = v);
    out = sweep(out, &args.intent_weight, |o, v| o.weights.intent = v);
    out = sweep(out, &args.tool_weight, |o, v| o.weights.tool = v);
    out = sweep(out, &args.named_tool_weight, |o, v| o.weights.named_tool = v);
    out = sweep(out, &args.rrf_k, |o, v| o.weights.rrf_k = v);
    if args.no_intents {
        out.iter_mut().for_each(|o| o.intents = false);
    }
    if args.embed_intents {
        out.iter_mut().for_each(|o| o.embed_intents = true);
    }
    out
}

fn run_compress(args: &CompressArgs, config: &Config) -> Result<ExitCode, CliError> {
    let catalog = load_catalog(config)?;
    let table = crate::upstream::ReplayTable::load(&args.cache, &catalog)
        .map_err(|e| CliError::Usage(format!("cannot read the replay table {}: {e}", args.cache.display())))?;
    let budget = args.budget.unwrap_or(config.compress.budget);
    let r = crate::eval::compress::evaluate(&table, &catalog, budget, args.samples);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r).map_err(anyhow::Error::from)?);
    } else {
        let share = |n: usize| 100.0 * n as f64 / r.responses.max(1) as f64;
        println!(
            "{} recorded responses (of {} files; {} files of APIs the catalog lacks), budget {budget} characters",
            r.responses,
            table.report.files,
            table.report.unresolved.len()
        );
        println!(
            "over the budget: {} ({:.1}%) before, {} ({:.1}%) after",
            r.over_budget_before,
            share(r.over_budget_before),
            r.over_budget_after,
            share(r.over_budget_after)
        );
        println!("characters saved on those over: mean {:.0}, p95 {:.0}", r.mean_chars_saved, r.p95_chars_saved);
        println!(
            "mean characters: {:.0} before, {:.0} after; longest after: {}",
            r.mean_chars_before, r.mean_chars_after, r.max_chars_after
        );
        println!("invalid JSON after: {}", r.invalid_json_after);
    }
    Ok(ExitCode::SUCCESS)
}
