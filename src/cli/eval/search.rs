//! `toolrouter eval search`: tool search over real MCP servers' tools,
//! replayed as agent loops, against BM25 and regex searches
//! ([`crate::eval::search`]).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;

use crate::cli::CliError;
use crate::config::Config;

#[derive(Debug, Args)]
pub(in crate::cli) struct SearchArgs {
    /// Session files (JSON lines `{"id", "servers", "turns"}`, tools from
    /// `tools.json` beside them; tests/data/mcp-sessions): every step is a
    /// request carrying every server's tools.
    #[arg(long = "sessions", value_name = "FILE", num_args = 1.., required = true)]
    sessions: Vec<PathBuf>,
    /// Route-case files whose tools are distractors (after every server's tools).
    #[arg(long = "distractors", value_name = "FILE", num_args = 1..)]
    distractors: Vec<PathBuf>,
    /// Tools every request carries at most.
    #[arg(long, default_value_t = usize::MAX, hide_default_value = true)]
    tools: usize,
    /// Tools route mode keeps (default: `openai.max_tools`).
    #[arg(long)]
    k: Option<usize>,
    /// Tools one search loads (default: `openai.tool_search_results`).
    #[arg(long)]
    results: Option<usize>,
    /// Seed of the tools' order.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Without the embedding model: route mode and its search by words only.
    #[arg(long)]
    lexical: bool,
    /// Tools named `server__tool`, as toolrouter's federation names them.
    #[arg(long)]
    server_names: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: &SearchArgs, config: &Config) -> Result<ExitCode, CliError> {
    use crate::eval::search::{self, SearchOptions};
    let options = SearchOptions {
        k: args.k.unwrap_or(config.openai.max_tools),
        results: args.results.unwrap_or(config.openai.tool_search_results),
        tools: args.tools,
        seed: args.seed,
    };
    if options.k == 0 || options.results == 0 {
        return Err(CliError::Usage("--k and --results must be at least 1".into()));
    }
    let (mut cases, mut others) = (Vec::new(), Vec::new());
    for path in &args.sessions {
        cases.extend(crate::eval::route::load_sessions(path, args.server_names).map_err(CliError::Usage)?);
        others.extend(crate::eval::route::all_tools(path, args.server_names).map_err(CliError::Usage)?);
    }
    for path in &args.distractors {
        let cases = crate::eval::route::load_cases(path).map_err(CliError::Usage)?;
        others.extend(cases.into_iter().flat_map(|c| c.tools));
    }
    // Route mode's ranker as the server has it, its vectors kept between
    // runs beside the embedding cache; no memory carried in.
    let vectors = crate::retrieval::tool_vectors::ToolVectors::new(
        Some(config.embedding.cache_dir().join("route-eval")),
        crate::retrieval::tool_vectors::Bounds { entries: 200_000, bytes: 1 << 30 },
    );
    let memory = crate::retrieval::tool_memory::ToolMemory::new(None, 1_000_000);
    let ranker = Arc::new(crate::retrieval::tool_list::ToolListRanker::new(vectors, memory));
    let mut narrowing = crate::chat::narrowing::Narrowing::lexical(ranker);
    if !args.lexical {
        let embedder = crate::retrieval::Embedder::load(&config.embedding)
            .map_err(|e| CliError::Usage(format!("{e} (or pass --lexical)")))?;
        narrowing.embedder = Some(Arc::new(embedder));
        // Every tool embedded before the replay, as a list seen before is.
        narrowing.embed_budget = std::time::Duration::MAX;
    }
    let report = crate::cli::runtime()?.block_on(search::evaluate(&cases, &others, options, &narrowing));
    match args.json {
        true => println!("{}", serde_json::to_string_pretty(&report).map_err(anyhow::Error::from)?),
        false => print!("{}", search::markdown(&report)),
    }
    Ok(ExitCode::SUCCESS)
}
