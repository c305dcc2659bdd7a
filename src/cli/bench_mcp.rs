//! `toolrouter bench mcp`: what toolrouter adds to a downstream MCP
//! server's `tools/call`.
//!
//! One of the configured `[[catalog.mcp_servers]]` (a stdio one) is
//! started twice: once on its own, with an MCP client (rmcp) talking to it
//! directly, and once behind `toolrouter mcp` (this binary, the same
//! configuration with a fresh state directory and lexical search), with
//! the same client calling the namespaced tool through `call_api`. Calls
//! alternate one by one between the two paths after a warm-up; reported:
//! p50 and p99 of each, their differences, and the median of the
//! per-call differences.

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Map, Value, json};

use super::CliError;
use crate::config::{Config, McpTransport, SearchMode};
use crate::eval::retrieval::Latency;

/// Calls of each path made before measuring.
const WARM_UP: usize = 50;

#[derive(Debug, Args)]
pub(super) struct McpBenchArgs {
    /// The configured server (its `name` in `[[catalog.mcp_servers]]`; stdio).
    #[arg(long)]
    server: String,
    /// The tool to call, by its own name (without the namespace).
    #[arg(long)]
    tool: String,
    /// Its arguments, as a JSON object.
    #[arg(long, default_value = "{}")]
    arguments: String,
    /// Calls per path.
    #[arg(long, default_value_t = 2000)]
    calls: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: &McpBenchArgs, config: &Config) -> Result<ExitCode, CliError> {
    super::runtime()?.block_on(bench(args, config))
}

type Client = RunningService<RoleClient, ()>;

async fn connect(command: tokio::process::Command) -> Result<Client, CliError> {
    let transport = TokioChildProcess::new(command).map_err(|e| CliError::Failure(e.into()))?;
    ().serve(transport).await.map_err(|e| CliError::Failure(anyhow::anyhow!("the MCP handshake failed: {e}")))
}

async fn call(client: &Client, name: &str, arguments: &Map<String, Value>) -> Result<f64, CliError> {
    let started = Instant::now();
    let params = CallToolRequestParams::new(name.to_string()).with_arguments(arguments.clone());
    let result =
        client.peer().call_tool(params).await.map_err(|e| CliError::Failure(anyhow::anyhow!("{name}: {e}")))?;
    if result.is_error == Some(true) {
        return Err(CliError::Failure(anyhow::anyhow!("{name} answered an error: {:?}", result.content)));
    }
    Ok(crate::units::ms(started.elapsed()))
}

async fn bench(args: &McpBenchArgs, config: &Config) -> Result<ExitCode, CliError> {
    let server = config.catalog.mcp_servers.iter().find(|s| s.name == args.server).ok_or_else(|| {
        CliError::Usage(format!("no [[catalog.mcp_servers]] is named {:?} in the configuration", args.server))
    })?;
    if server.transport() != McpTransport::Stdio {
        return Err(CliError::Usage(format!(
            "{:?} is reached over HTTP; this bench starts stdio servers",
            server.name
        )));
    }
    let arguments: Map<String, Value> = serde_json::from_str(&args.arguments)
        .map_err(|e| CliError::Usage(format!("--arguments must be a JSON object: {e}")))?;

    let mut direct = tokio::process::Command::new(&server.command);
    direct.args(&server.args).envs(&server.env).stderr(std::process::Stdio::null());
    if !server.cwd.as_os_str().is_empty() {
        direct.current_dir(&server.cwd);
    }
    let direct = connect(direct).await?;

    let state = tempfile::tempdir().map_err(|e| CliError::Failure(e.into()))?;
    let mut through_config = config.clone();
    through_config.state.dir = state.path().to_path_buf();
    through_config.retrieval.mode = SearchMode::Lexical;
    through_config.log.level = "warn".into();
    let config_file = state.path().join("toolrouter.toml");
    let text = toml::to_string(&through_config).map_err(|e| CliError::Failure(e.into()))?;
    std::fs::write(&config_file, text).map_err(|e| CliError::Failure(e.into()))?;
    let exe = std::env::current_exe().map_err(|e| CliError::Failure(e.into()))?;
    let mut through = tokio::process::Command::new(exe);
    through.arg("--config").arg(&config_file).arg("mcp").stderr(std::process::Stdio::null());
    let through = connect(through).await?;
    let function = format!("{}{}{}", server.name, crate::catalog::NAMESPACE_SEPARATOR, args.tool);
    let via: Map<String, Value> =
        json!({"name": function, "arguments": arguments}).as_object().cloned().unwrap_or_default();

    let (mut alone, mut behind, mut added) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..args.calls + WARM_UP {
        let a = call(&direct, &args.tool, &arguments).await?;
        let b = call(&through, "call_api", &via).await?;
        if i >= WARM_UP {
            alone.push(a);
            behind.push(b);
            added.push(b - a);
        }
    }
    let (a, b, d) = (Latency::of(&mut alone), Latency::of(&mut behind), Latency::of(&mut added));
    if args.json {
        let cost = json!({"p50": b.p50 - a.p50, "p99": b.p99 - a.p99, "median_of_differences": d.p50});
        println!("{}", json!({"calls": args.calls, "direct_ms": a, "through_toolrouter_ms": b, "added_ms": cost}));
    } else {
        println!("{} calls each of `{}` on `{}`, alternating, stdio", args.calls, args.tool, server.name);
        println!("direct             p50 {:.3} ms  p99 {:.3} ms", a.p50, a.p99);
        println!("through toolrouter p50 {:.3} ms  p99 {:.3} ms", b.p50, b.p99);
        println!("added              p50 {:.3} ms  p99 {:.3} ms", b.p50 - a.p50, b.p99 - a.p99);
        println!("median of per-call differences {:.3} ms", d.p50);
    }
    let _ = direct.cancel().await;
    let _ = through.cancel().await;
    Ok(ExitCode::SUCCESS)
}
