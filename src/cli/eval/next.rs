//! `toolrouter eval next`: catalog search for the next call of a multi-step
//! run, with and without the tool graph's cue from the call before
//! ([`crate::eval::next`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::load_sets;
use crate::cli::search::{open, retrieval_error};
use crate::cli::{CliError, load_trajectories};
use crate::config::Config;

#[derive(Debug, Args)]
pub(in crate::cli) struct NextArgs {
    /// ToolBench query files (each is a set, left out of its own graph).
    #[arg(long = "queries", value_name = "FILE", required = true, num_args = 1..)]
    queries: Vec<PathBuf>,
    /// Trajectory files or directories: the runs on a set's queries are its
    /// steps, the others teach the graph.
    #[arg(long = "trajectories", value_name = "PATH", required = true, num_args = 1..)]
    trajectories: Vec<PathBuf>,
    /// How queries are kept from the runs the graph learns: `sets` (leave one
    /// set out) or `queries` (folds within a set: a diagnostic).
    #[arg(long, value_enum, default_value = "sets")]
    split: super::SplitArg,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: &NextArgs, config: &Config) -> Result<ExitCode, CliError> {
    use crate::eval::next;
    use crate::eval::plan::Split;
    let sets = load_sets(&args.queries)?;
    let (trajectories, _) = load_trajectories(&args.trajectories)?;
    let mut config = config.clone();
    config.catalog.query_files.extend(args.queries.iter().cloned());
    let retriever = open(&config, false)?;
    let params = crate::graph::Params::from(&config.graph);
    let split = args.split.into();
    let reports = next::evaluate(&retriever, &sets, &trajectories, split, config.graph.max_calls, params)
        .map_err(retrieval_error)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports).map_err(anyhow::Error::from)?);
    } else {
        let label = match split {
            Split::Sets => "the graph per set learns from the other sets' runs",
            Split::Queries => "query folds within each set (diagnostic: the graph has seen other queries of the set)",
        };
        println!("{} trajectories; {label}\n", trajectories.len());
        print!("{}", next::markdown(&reports));
    }
    Ok(ExitCode::SUCCESS)
}
