//! `toolrouter catalog stats`, `show`, `coverage` and `documents`.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;

use super::{CliError, load_catalog};
use crate::catalog::{Api, Catalog, Resolution, schema::declared_types};
use crate::config::Config;

/// How many skipped files the text report lists (all are in `--json`).
const SKIPPED_SHOWN: usize = 20;

#[derive(Debug, Subcommand)]
pub(super) enum CatalogCommand {
    /// Counts of tools, APIs, categories and parameters, and what loading skipped.
    Stats {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// How many function names recorded in trajectories the catalog resolves,
    /// and why the others do not (Markdown; `--json` for JSON).
    Coverage {
        /// Trajectory files or directories (ToolBench, StableToolBench, StepTool formats); repeatable.
        #[arg(long = "trajectories", value_name = "PATH", required = true)]
        trajectories: Vec<std::path::PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Every API's texts as retrieval reads them, one JSON object a line:
    /// `function`, `tool`, `api`, `category`, `dense` (the embedded
    /// document), `lexical` (the BM25 document) and `definition` (the text
    /// route mode reads of the API offered as a client's tool). What
    /// `scripts/train-retriever.py` trains on.
    Documents,
    /// One API: description, URL, parameters and JSON Schema.
    Show {
        /// Function name (variant spellings of trajectories are accepted).
        function: String,
        /// Print JSON (the OpenAI tool definition plus catalog details).
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn run(command: &CatalogCommand, config: &Config) -> Result<ExitCode, CliError> {
    let catalog = load_catalog(config)?;
    match command {
        CatalogCommand::Stats { json } => stats(&catalog, *json),
        CatalogCommand::Show { function, json } => show(&catalog, function, *json),
        CatalogCommand::Coverage { trajectories, json } => super::coverage::run(&catalog, trajectories, *json),
        CatalogCommand::Documents => documents(&catalog),
    }
}

fn documents(catalog: &Catalog) -> Result<ExitCode, CliError> {
    use std::io::Write;
    let docs = crate::retrieval::document::documents(catalog);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for ((api, dense), lexical) in catalog.apis().iter().zip(&docs.dense).zip(&docs.lexical) {
        let tool = catalog.tool_of(api);
        let definition = catalog.function_definition(api);
        let as_offered = crate::chat::tools::client_tool(&definition, false)
            .map(|t| t.text)
            .map_err(|e| anyhow::anyhow!("{}: {}", api.function_name, e))?;
        let line = json!({
            "function": api.function_name, "tool": tool.name, "api": api.name, "category": tool.category,
            "dense": dense, "lexical": lexical, "definition": as_offered,
        });
        writeln!(out, "{line}").map_err(anyhow::Error::from)?;
    }
    out.flush().map_err(anyhow::Error::from)?;
    Ok(ExitCode::SUCCESS)
}

fn stats(catalog: &Catalog, json: bool) -> Result<ExitCode, CliError> {
    let s = catalog.stats();
    if json {
        println!("{}", serde_json::to_string_pretty(&s).map_err(anyhow::Error::from)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("tools              {}", s.tools);
    println!("apis               {}", s.apis);
    println!("categories         {}", s.categories.len());
    println!("apis with a URL    {}", s.apis_with_url);
    println!("tools with score   {}", s.tools_with_score);
    println!("parameters         {} ({} required, {} in the path)", s.params, s.required_params, s.path_params);
    let types: Vec<String> = s.param_types.iter().map(|(t, n)| format!("{t} {n}")).collect();
    println!("parameter types    {}", types.join(", "));
    println!("files read         {} ({} ignored by extension)", s.load.files_read, s.load.files_ignored);
    println!("skipped files      {}", s.load.skipped_files.len());
    for skipped in s.load.skipped_files.iter().take(SKIPPED_SHOWN) {
        println!("  {}: {}", skipped.path, skipped.reason);
    }
    if s.load.skipped_files.len() > SKIPPED_SHOWN {
        println!("  … {} more (see --json)", s.load.skipped_files.len() - SKIPPED_SHOWN);
    }
    println!("skipped api entries {}", s.load.skipped_apis.len());
    let dropped: usize = s.load.defaults_dropped.values().sum();
    println!("defaults dropped   {dropped} (declared type cannot hold them)");
    println!(
        "names              {} cut to 64 chars, {} made OpenAI-safe, {} disambiguated",
        s.load.names_cut, s.load.names_sanitized, s.load.names_disambiguated
    );
    if s.load.query_tools_added > 0 {
        println!("from query files   {} tools, {} APIs", s.load.query_tools_added, s.load.query_apis_added);
    }
    println!("load time          {} ms", s.load.elapsed_ms);
    Ok(ExitCode::SUCCESS)
}

/// Resolves a function name or fails with suggestions.
pub(super) fn find<'c>(catalog: &'c Catalog, name: &str) -> Result<(&'c Api, Resolution), CliError> {
    let api = catalog.find(name).map_err(|unknown| CliError::Usage(unknown.to_string()))?;
    Ok((api, catalog.resolve(name)))
}

fn show(catalog: &Catalog, name: &str, as_json: bool) -> Result<ExitCode, CliError> {
    let (api, resolution) = find(catalog, name)?;
    let tool = catalog.tool_of(api);
    let others: Vec<&str> =
        resolution.candidates().iter().skip(1).map(|id| catalog.api(*id).function_name.as_str()).collect();
    if as_json {
        let value = json!({
            "definition": catalog.function_definition(api),
            "api": api,
            "tool": tool,
            "availability_prior": tool.availability_prior(),
            "also_matches": others,
        });
        println!("{}", serde_json::to_string_pretty(&value).map_err(anyhow::Error::from)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}", api.function_name);
    println!("  api          {}", api.name);
    println!("  tool         {} (category {}, from {})", tool.name, tool.category, tool.source.display());
    match &api.url_template {
        Some(url) => println!("  request      {} {url}", api.method),
        None => println!("  request      (no URL: known from a query file's api_list only)"),
    }
    println!("  availability prior {:.2}", tool.availability_prior());
    if !api.description.is_empty() {
        println!("  description  {}", api.description);
    }
    if !others.is_empty() {
        println!("  also matches {}", others.join(", "));
    }
    println!("  parameters");
    if api.params.is_empty() {
        println!("    (none)");
    }
    for p in &api.params {
        let ty = declared_types(&p.schema).first().map_or("any", |t| t.as_str());
        let need = if p.required { "required" } else { "optional" };
        let default = p.default_value().map(|d| format!(", default {d}")).unwrap_or_default();
        let location =
            serde_json::to_value(p.location).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        println!(
            "    {} ({ty}, {need}, {location}{default}){}",
            p.key,
            if p.description.is_empty() { String::new() } else { format!(": {}", p.description) }
        );
    }
    println!("  schema");
    let schema = serde_json::to_string_pretty(&api.input_schema()).map_err(anyhow::Error::from)?;
    for line in schema.lines() {
        println!("    {line}");
    }
    Ok(ExitCode::SUCCESS)
}
