//! `toolrouter index` and `toolrouter search`.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use serde_json::json;

use super::{CliError, load_catalog};
use crate::config::{Config, DenseIndex, SearchMode};
use crate::retrieval::{Filters, RetrievalError, Retriever, SearchOptions};

#[derive(Debug, Args)]
pub(super) struct IndexArgs {
    /// Rebuild even when the stored index is up to date (cached embeddings are reused).
    #[arg(long)]
    force: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(super) struct SearchArgs {
    /// What the APIs should do, in plain words.
    query: String,
    /// How many APIs to return.
    #[arg(short, default_value_t = 10)]
    k: usize,
    /// Ranking signals (default from `retrieval.mode`).
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// Dense nearest neighbours (default from `retrieval.dense_index`).
    #[arg(long, value_enum)]
    dense_index: Option<DenseArg>,
    /// Only APIs of this category.
    #[arg(long)]
    category: Option<String>,
    /// Only APIs of this tool.
    #[arg(long)]
    tool: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(super) enum ModeArg {
    Hybrid,
    Dense,
    Lexical,
}

impl From<ModeArg> for SearchMode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Hybrid => SearchMode::Hybrid,
            ModeArg::Dense => SearchMode::Dense,
            ModeArg::Lexical => SearchMode::Lexical,
        }
    }
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(super) enum DenseArg {
    Hnsw,
    Exact,
}

impl From<DenseArg> for DenseIndex {
    fn from(d: DenseArg) -> Self {
        match d {
            DenseArg::Hnsw => DenseIndex::Hnsw,
            DenseArg::Exact => DenseIndex::Exact,
        }
    }
}

/// Retrieval errors: a bad query is the user's (exit 2), the rest are failures.
pub(super) fn retrieval_error(e: RetrievalError) -> CliError {
    match e {
        RetrievalError::EmptyQuery => CliError::Usage(e.to_string()),
        RetrievalError::NoIndex { .. } | RetrievalError::Embed(_) => CliError::Usage(e.to_string()),
        other => CliError::Failure(other.into()),
    }
}

/// Opens the retriever of the configured catalog.
pub(super) fn open(config: &Config, force: bool) -> Result<Retriever, CliError> {
    let catalog = Arc::new(load_catalog(config)?);
    let retriever = if force {
        let embedder =
            Arc::new(crate::retrieval::Embedder::load(&config.embedding).map_err(|e| CliError::Usage(e.to_string()))?);
        Retriever::open_with(catalog, config, Some(embedder), true, &Default::default())
    } else {
        Retriever::open(catalog, config)
    };
    retriever.map_err(retrieval_error)
}

pub(super) fn index(args: &IndexArgs, config: &Config) -> Result<ExitCode, CliError> {
    let retriever = open(config, args.force)?;
    let report = json!({
        "index_dir": retriever.index_dir,
        "apis": retriever.catalog().apis().len(),
        "built": retriever.built,
        "up_to_date": retriever.built.is_none(),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(anyhow::Error::from)?);
    } else if let Some(b) = &retriever.built {
        println!(
            "indexed {} APIs in {:.1} s ({} embedded in {:.1} s, {} from the cache; BM25 {:.1} s, HNSW {:.1} s) into {}",
            b.apis,
            b.total_secs,
            b.embedded,
            b.embed_secs,
            b.cached,
            b.bm25_secs,
            b.hnsw_secs,
            retriever.index_dir.display()
        );
    } else {
        println!(
            "the index of {} APIs is up to date: {}",
            retriever.catalog().apis().len(),
            retriever.index_dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn search(args: &SearchArgs, config: &Config) -> Result<ExitCode, CliError> {
    if args.k == 0 {
        return Err(CliError::Usage("-k must be at least 1".into()));
    }
    let mut config = config.clone();
    if let Some(mode) = args.mode {
        config.retrieval.mode = mode.into();
    }
    if let Some(d) = args.dense_index {
        config.retrieval.dense_index = d.into();
    }
    let retriever = open(&config, false)?;
    let filters = Filters { category: args.category.clone(), tool: args.tool.clone(), allowed: None };
    let options = SearchOptions::from_config(&config.retrieval);
    let results = retriever.search_with(&args.query, args.k, &filters, options).map_err(retrieval_error)?;
    let catalog = retriever.catalog();
    if args.json {
        let hits: Vec<_> = results
            .hits
            .iter()
            .map(|h| {
                let api = catalog.api(h.api);
                let tool = catalog.tool_of(api);
                json!({
                    "function": api.function_name, "api": api.name, "tool": tool.name, "category": tool.category,
                    "description": api.description, "score": h.score, "dense": h.dense, "lexical": h.lexical,
                })
            })
            .collect();
        let out = json!({"query": args.query, "hits": hits, "intents": results.intents, "cut_chars": results.cut_chars,
                         "embed_ms": results.embed_ms, "search_ms": results.search_ms});
        println!("{}", serde_json::to_string_pretty(&out).map_err(anyhow::Error::from)?);
        return Ok(ExitCode::SUCCESS);
    }
    if results.cut_chars > 0 {
        println!(
            "(the query was cut: {} characters beyond retrieval.max_query_chars were not searched)",
            results.cut_chars
        );
    }
    if results.hits.is_empty() {
        println!("no API matches");
    }
    for (i, h) in results.hits.iter().enumerate() {
        let api = catalog.api(h.api);
        let tool = catalog.tool_of(api);
        let mut description: String = api.description.chars().take(90).collect();
        if api.description.chars().count() > 90 {
            description.push('…');
        }
        println!(
            "{:>2}. {:.4}  {}  [{} / {}]  {}",
            i + 1,
            h.score,
            api.function_name,
            tool.name,
            tool.category,
            description
        );
    }
    Ok(ExitCode::SUCCESS)
}
