//! `toolrouter plan "<request>"`: the planned chain of API calls, each step
//! with its reason, transition weight, availability and alternatives.

use std::process::ExitCode;

use clap::Args;

use super::CliError;
use super::search::{open, retrieval_error};
use crate::config::Config;
use crate::graph::{Params, store};
use crate::planner::{DeterministicDecider, DryRun, Ending, LongTermMemory, Planner, Settings, memory};

#[derive(Debug, Args)]
pub(super) struct PlanArgs {
    /// What the agent should do, in plain words.
    request: String,
    /// Most steps (default and ceiling: `planner.max_steps`).
    #[arg(long)]
    max_steps: Option<usize>,
    /// Plan without the tool graph.
    #[arg(long)]
    no_graph: bool,
    /// Print JSON (the whole run, with its trace).
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: &PlanArgs, config: &Config) -> Result<ExitCode, CliError> {
    let retriever = open(config, false)?;
    let state = config.state.dir();
    let graph = if args.no_graph {
        None
    } else {
        let (graph, _) = store::read(&store::graph_dir(&state), Params::from(&config.graph), Some(retriever.catalog()))
            .map_err(|e| CliError::Failure(e.into()))?;
        if graph.meta.build.is_none() && graph.meta.online_runs == 0 {
            tracing::info!(
                "no tool graph yet (`toolrouter graph build --trajectories …`): planning from retrieval alone"
            );
        }
        Some(graph)
    };
    let mut memory = LongTermMemory::read(&memory::memory_path(&state)).map_err(|e| CliError::Failure(e.into()))?;
    // Vectors of another embedding model do not compare with this one's.
    let stale = memory.keep_model(retriever.embedder().map_or("", |e| e.id()));
    if stale > 0 {
        tracing::warn!(
            "{stale} remembered runs were embedded by another model (or before models were recorded); left out until `toolrouter serve` \
             or `toolrouter graph build` embeds them again"
        );
    }
    let mut settings = Settings::from(config);
    if let Some(n) = args.max_steps {
        if n == 0 {
            return Err(CliError::Usage("--max-steps must be at least 1".into()));
        }
        // As the server's plan does: never past `planner.max_steps`.
        settings.budget.max_steps = n.min(settings.budget.max_steps.max(1));
    }
    let planner = Planner::new(&retriever, graph.as_ref(), Some(&memory), settings);
    let runtime = super::runtime()?;
    let run = runtime
        .block_on(planner.run(&args.request, &DeterministicDecider::default(), &DryRun))
        .map_err(retrieval_error)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&run).map_err(anyhow::Error::from)?);
        return Ok(ExitCode::SUCCESS);
    }
    if !run.parts.is_empty() {
        println!("parts of the request:");
        for p in &run.parts {
            println!("  - {p}");
        }
    }
    for (i, step) in run.steps.iter().enumerate() {
        println!("{}. {}  (w {:.2}, α {:.2})", i + 1, step.function, step.w, step.alpha);
        println!("   why: {}", step.reason);
        if !step.arguments.is_empty() {
            println!("   arguments: {}", serde_json::Value::Object(step.arguments.clone()));
        }
        if !step.missing.is_empty() {
            println!("   needs: {}", step.missing.join(", "));
        }
        let alternatives: Vec<String> = step.alternatives.iter().map(|(f, s)| format!("{f} ({s:.2})")).collect();
        if !alternatives.is_empty() {
            println!("   alternatives: {}", alternatives.join(", "));
        }
    }
    let ending = match &run.ending {
        Ending::Finished { reason } => format!("finished: {reason}"),
        Ending::Infeasible { reason } => format!("no plan: {reason}"),
        Ending::OutOfBudget { limit } => format!("stopped: the {limit} budget ran out"),
        Ending::NeedsInput { function, missing } => format!("{function} needs {} from the user", missing.join(", ")),
    };
    println!(
        "{ending} ({} backtracks, {} restarts; retrieval {:.0} ms, planning {:.1} ms)",
        run.backtracks, run.restarts, run.timings.retrieval_ms, run.timings.planning_ms
    );
    Ok(ExitCode::SUCCESS)
}
