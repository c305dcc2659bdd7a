//! The `toolrouter` command line.
//!
//! `--config FILE` (or `TOOLROUTER_CONFIG`) and `--catalog PATH` work with
//! every subcommand. Exit codes: 0 success, 1 a negative answer or a
//! failure (`validate` found invalid arguments), 2 a usage error (bad
//! config, malformed JSON, unknown function name). Results go to stdout,
//! logs and errors to stderr.

mod audit;
mod bench;
mod bench_mcp;
mod bench_openai;
mod bench_upstream;
mod call;
mod catalog;
mod coverage;
mod eval;
mod graph;
mod log_writer;
mod plan;
mod search;
mod serve;
mod validate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::fmt::writer::BoxMakeWriter;

use crate::catalog::{Catalog, Sources};
use crate::config::{CONFIG_ENV, Config, LogFormat};

/// Exit code of a usage error: bad configuration, malformed input, unknown names.
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code of a negative answer (invalid arguments) or a failure.
pub(crate) const EXIT_FAILURE: u8 = 1;

#[derive(Debug, Parser)]
#[command(name = "toolrouter", version, about = "A tool-routing proxy between AI agents and thousands of real APIs.")]
struct Cli {
    /// Config file (TOML); defaults apply without one.
    #[arg(long, global = true, value_name = "FILE", env = CONFIG_ENV)]
    config: Option<PathBuf>,
    /// Catalog source, repeatable: a ToolBench tools directory, a JSONL file,
    /// OpenAPI specs or a directory of them. Replaces `catalog.paths`.
    #[arg(long = "catalog", global = true, value_name = "PATH")]
    catalog: Vec<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Inspect the API catalog.
    #[command(subcommand)]
    Catalog(catalog::CatalogCommand),
    /// Validate a call's arguments against its API's schema (exit 0 valid, 1 invalid).
    Validate(validate::ValidateArgs),
    /// Build the search index of the catalog (embeddings, HNSW, BM25) in the state directory.
    Index(search::IndexArgs),
    /// Find the APIs that fit a request.
    Search(search::SearchArgs),
    /// Plan the chain of API calls for a request (dry run: nothing is called).
    Plan(plan::PlanArgs),
    /// Call an API: validate the arguments, call (live or replay), print the compressed response and the trace.
    Call(call::CallArgs),
    /// Serve recorded responses over HTTP in RapidAPI's request shape.
    Replay(call::ReplayArgs),
    /// Serve over HTTP: the OpenAI-compatible API at /v1, the MCP face at /mcp, /healthz, /readyz, /metrics.
    Serve(serve::ServeArgs),
    /// The MCP face over stdio (for Claude Desktop, Cursor, IDE agents).
    Mcp,
    /// API keys for `server.api_key_hashes`.
    #[command(subcommand)]
    Key(serve::KeyCommand),
    /// The audit log: every tool call made or refused, oldest first.
    Audit(audit::AuditArgs),
    /// Build and inspect the tool graph.
    #[command(subcommand)]
    Graph(graph::GraphCommand),
    /// Measure speed on this machine.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Measure quality on ToolBench query files.
    #[command(subcommand)]
    Eval(eval::EvalCommand),
    /// Inspect the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the effective configuration (file + environment + flags) as TOML; secrets are never shown.
    Show,
}

/// An error that ends the command, with its exit code.
#[derive(Debug)]
pub(crate) enum CliError {
    /// The user asked for something malformed or unknown (exit 2).
    Usage(String),
    /// Something failed (exit 1).
    Failure(anyhow::Error),
}

impl From<anyhow::Error> for CliError {
    fn from(e: anyhow::Error) -> Self {
        CliError::Failure(e)
    }
}

/// Rust ignores SIGPIPE, so printing to a closed pipe (`toolrouter … |
/// head`) would panic: a command that prints should end quietly instead,
/// with the default action. A server must not: a socket written with
/// `writev` (hyper's vectored writes, rustls') gets no `MSG_NOSIGNAL`, so
/// one client resetting its connection would kill the process.
fn sigpipe_ends_printing(printing: bool) {
    #[cfg(unix)]
    if printing {
        // SAFETY: called while only this thread runs, before any runtime
        // or thread is started.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
}

/// Parses the command line, runs the command, and maps the outcome to an exit code.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    let server = matches!(cli.command, Command::Serve(_) | Command::Mcp | Command::Replay(_));
    sigpipe_ends_printing(!server);
    // Flushes the server's log when `run` returns.
    let _log_guard;
    let config = match load_config(&cli) {
        Ok((config, guard)) => {
            _log_guard = guard;
            config
        }
        Err(message) => {
            eprintln!("toolrouter: {message}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let outcome = match &cli.command {
        Command::Catalog(command) => catalog::run(command, &config),
        Command::Validate(args) => validate::run(args, &config),
        Command::Index(args) => search::index(args, &config),
        Command::Search(args) => search::search(args, &config),
        Command::Eval(command) => eval::run(command, &config),
        Command::Bench(command) => bench::run(command, &config),
        Command::Graph(command) => graph::run(command, &config),
        Command::Plan(args) => plan::run(args, &config),
        Command::Call(args) => call::call(args, &config),
        Command::Replay(args) => call::replay(args, &config),
        Command::Serve(args) => serve::serve(args, &config, reload_source(&cli)),
        Command::Mcp => serve::mcp(&config, reload_source(&cli)),
        Command::Key(command) => serve::key(command),
        Command::Audit(args) => audit::run(args, &config),
        Command::Config(ConfigCommand::Show) => show_config(&config),
    };
    match outcome {
        Ok(code) => code,
        Err(CliError::Usage(message)) => {
            eprintln!("toolrouter: {message}");
            ExitCode::from(EXIT_USAGE)
        }
        Err(CliError::Failure(error)) => {
            eprintln!("toolrouter: {error:#}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// What logging holds until the command ends: the server's log writer
/// (flushed when dropped) and the telemetry exporter (its last spans sent).
pub(crate) struct Logging {
    _log: Option<log_writer::Guard>,
    _telemetry: Option<crate::telemetry::Guard>,
}

/// Loads and validates the config, applies the flags and starts logging
/// (with what flushes a server's log and spans).
fn load_config(cli: &Cli) -> Result<(Config, Logging), String> {
    let (config, warnings) = read_config(cli.config.as_deref(), &cli.catalog)?;
    let server = matches!(cli.command, Command::Serve(_) | Command::Mcp);
    let logging = init_logging(&config, matches!(cli.command, Command::Serve(_)), server)?;
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    Ok((config, logging))
}

/// Loads and validates the config `file` (or defaults) with the
/// environment, then `--catalog` paths.
fn read_config(file: Option<&std::path::Path>, catalog: &[PathBuf]) -> Result<(Config, Vec<String>), String> {
    let (mut config, warnings) = Config::load(file).map_err(|e| e.to_string())?;
    if !catalog.is_empty() {
        for path in catalog {
            if !path.exists() {
                return Err(format!("--catalog {}: no such file or directory", path.display()));
            }
        }
        config.catalog.paths = catalog.to_vec();
    }
    Ok((config, warnings))
}

/// How a server reloads its config on SIGHUP: as [`load_config`] loaded
/// it (the environment's warnings were said at start).
fn reload_source(cli: &Cli) -> crate::server::reload::Source {
    let (file, catalog) = (cli.config.clone(), cli.catalog.clone());
    std::sync::Arc::new(move || read_config(file.as_deref(), &catalog).map(|(config, _)| config))
}

/// Logs to stderr. A server (`serve`) logs a line per request: there the
/// lines are batched and written by a thread of their own
/// ([`log_writer`]), so that a request neither waits for stderr nor makes
/// a system call for its line. Commands write at once, in order with what
/// they print. The servers (`serve`, `mcp`) also send their spans to
/// `telemetry.otlp_endpoint` when it is set ([`crate::telemetry`]); the
/// log never shows those spans.
fn init_logging(config: &Config, batched: bool, server: bool) -> Result<Logging, String> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // rmcp logs every session's start at info, a downstream server's whole
    // instructions included: warnings only, unless the filter names rmcp.
    let level = if config.log.level.contains("rmcp") {
        config.log.level.clone()
    } else {
        format!("{},rmcp=warn", config.log.level)
    };
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (writer, log) = if batched {
        let (writer, guard) = log_writer::batched(std::io::stderr());
        crate::metrics::global().set_dropped_log_lines(writer.dropped());
        (BoxMakeWriter::new(writer), Some(guard))
    } else {
        (BoxMakeWriter::new(std::io::stderr), None)
    };
    let telemetry = match server.then(|| crate::telemetry::layer(&config.telemetry)).transpose() {
        Ok(telemetry) => telemetry.flatten(),
        Err(e) => return Err(format!("telemetry.otlp_endpoint: the exporter cannot start: {e:#}")),
    };
    // The telemetry target is never logged. Without telemetry, one global
    // filter (its spans' call sites disabled once, for good); with it, a
    // filter per layer, which costs every span and event a little more
    // (docs/benchmarks.md, "This round's request path").
    let otel_off = format!("{level},{}=off", crate::telemetry::TARGET);
    let filter = || tracing_subscriber::EnvFilter::try_new(&otel_off).unwrap_or_else(|_| "info".into());
    let json = config.log.format == LogFormat::Json;
    // A second initialization (tests calling `run` twice) is harmless; ignore it.
    let guard = match telemetry {
        Some((layer, guard)) => {
            let fmt = tracing_subscriber::fmt::layer().with_writer(writer).with_ansi(ansi);
            let fmt = if json { fmt.json().boxed() } else { fmt.boxed() };
            let _ = tracing_subscriber::registry().with(fmt.with_filter(filter())).with(layer).try_init();
            Some(guard)
        }
        None => {
            let fmt = tracing_subscriber::fmt().with_env_filter(filter()).with_writer(writer).with_ansi(ansi);
            let _ = if json { fmt.json().try_init() } else { fmt.try_init() };
            None
        }
    };
    Ok(Logging { _log: log, _telemetry: guard })
}

/// The tokio runtime every subcommand runs its async work on: one kind,
/// multi-threaded as the one `serve` starts the engine on (its connections
/// are served on threads of their own, [`crate::server::conn::spawn`]).
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| CliError::Failure(e.into()))
}

/// Loads the trajectories of `paths` (files or directories); a missing
/// path is a usage error. Returns them and how many files or records were
/// skipped (each logged with its reason).
pub(crate) fn load_trajectories(paths: &[PathBuf]) -> Result<(Vec<crate::trajectory::Trajectory>, usize), CliError> {
    let mut all = Vec::new();
    let mut skipped = 0;
    for path in paths {
        if !path.exists() {
            return Err(CliError::Usage(format!("--trajectories {}: no such file or directory", path.display())));
        }
        let (mut found, report) = crate::trajectory::load_path(path);
        for s in &report.skipped {
            tracing::info!(location = %s.location, reason = %s.reason, "skipped: not a trajectory");
        }
        skipped += report.skipped.len();
        all.append(&mut found);
    }
    Ok((all, skipped))
}

/// Loads the configured catalog; a missing source is a usage error.
pub(crate) fn load_catalog(config: &Config) -> Result<Catalog, CliError> {
    let sources = Sources {
        paths: config.catalog.paths.clone(),
        include_embedded: config.catalog.include_embedded,
        query_files: config.catalog.query_files.clone(),
    };
    Catalog::load(&sources).map_err(|e| CliError::Usage(e.to_string()))
}

fn show_config(config: &Config) -> Result<ExitCode, CliError> {
    let text = toml::to_string_pretty(config).map_err(|e| CliError::Failure(e.into()))?;
    println!("{text}");
    println!("# secrets (values are never shown)");
    println!("# upstream rapidapi key: {}", config.rapidapi_key_source());
    println!("# llm api key: {}", config.llm_key_source());
    Ok(ExitCode::SUCCESS)
}
