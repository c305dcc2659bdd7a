//! `toolrouter bench mcp`: what toolrouter adds to an MCP `tools/call`.
//!
//! Two set-ups, each timing a direct path against the path through
//! toolrouter with one MCP client (rmcp), alternating call by call after a
//! warm-up:
//!
//! - `--server NAME`: one of the configured `[[catalog.mcp_servers]]` (a
//!   stdio one) is started twice: on its own, its tool called directly,
//!   and behind `toolrouter mcp` (this binary, the same configuration with
//!   a fresh state directory and lexical search), the namespaced tool
//!   called through `call_api`.
//! - `--url URL --direct GET_URL`: a running `toolrouter serve`'s
//!   streamable HTTP endpoint called with `--tool` (usually `call_api`
//!   naming a catalog API), against a plain keep-alive GET (reqwest) of
//!   the upstream URL that call makes, the replay server for instance.
//!
//! Reported: p50 and p99 of each path, their differences, and the median
//! of the per-call differences.

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Map, Value, json};

use super::CliError;
use crate::config::{Config, McpTransport, SearchMode};
use crate::eval::retrieval::Latency;

/// Calls of each path made before measuring.
const WARM_UP: usize = 50;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["server", "url"])))]
pub(super) struct McpBenchArgs {
    /// The configured server to start twice (its `name` in `[[catalog.mcp_servers]]`; stdio).
    #[arg(long)]
    server: Option<String>,
    /// A running toolrouter's MCP endpoint (`http://HOST:PORT/mcp`) to call instead.
    #[arg(long, requires = "direct")]
    url: Option<String>,
    /// With `--url`: the upstream URL the call reaches, fetched with a plain GET as the direct path.
    #[arg(long)]
    direct: Option<String>,
    /// With `--direct`: a header of that GET, `NAME: VALUE` (repeatable).
    #[arg(long = "direct-header")]
    direct_headers: Vec<String>,
    /// With `--url`: speak MCP 2026-07-28 (`server/discover`, every request
    /// on its own) instead of a 2025-11-25 session.
    #[arg(long, requires = "url")]
    stateless: bool,
    /// The tool to call: with `--server` by its own name (without the
    /// namespace), with `--url` as toolrouter names it (`call_api`).
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

/// On one thread: the client makes one call at a time, and on a
/// work-stealing runtime each of its network wake-ups would also wake an
/// idle worker, time that rmcp's client (a task per connection and per
/// request) pays more often than reqwest's and that is not the server's.
pub(super) fn run(args: &McpBenchArgs, config: &Config) -> Result<ExitCode, CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    runtime.map_err(|e| CliError::Failure(e.into()))?.block_on(bench(args, config))
}

type Client = RunningService<RoleClient, ()>;

/// One of the two paths a call can take.
enum Path {
    /// An MCP tool, its name and arguments.
    Mcp { client: Client, tool: String, arguments: Map<String, Value> },
    /// A GET with its headers.
    Get { client: reqwest::Client, url: String, headers: reqwest::header::HeaderMap },
}

impl Path {
    /// Makes the call; its latency in ms.
    async fn time(&self) -> Result<f64, CliError> {
        let started = Instant::now();
        match self {
            Path::Mcp { client, tool, arguments } => {
                let params = CallToolRequestParams::new(tool.clone()).with_arguments(arguments.clone());
                let result = client
                    .peer()
                    .call_tool(params)
                    .await
                    .map_err(|e| CliError::Failure(anyhow::anyhow!("{tool}: {e}")))?;
                if result.is_error == Some(true) {
                    return Err(CliError::Failure(anyhow::anyhow!("{tool} answered an error: {:?}", result.content)));
                }
            }
            Path::Get { client, url, headers } => {
                let failed = |e: reqwest::Error| CliError::Failure(anyhow::anyhow!("GET {url}: {e}"));
                let response = client.get(url).headers(headers.clone()).send().await.map_err(failed)?;
                let status = response.status();
                response.bytes().await.map_err(failed)?;
                if !status.is_success() {
                    return Err(CliError::Failure(anyhow::anyhow!("GET {url} answered {status}")));
                }
            }
        }
        Ok(crate::units::ms(started.elapsed()))
    }

    async fn close(self) {
        if let Path::Mcp { client, .. } = self {
            let _ = client.cancel().await;
        }
    }
}

async fn connect<T, E, A>(transport: T) -> Result<Client, CliError>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    ().serve(transport).await.map_err(|e| CliError::Failure(anyhow::anyhow!("the MCP handshake failed: {e}")))
}

fn json_object(text: &str) -> Result<Map<String, Value>, CliError> {
    serde_json::from_str(text).map_err(|e| CliError::Usage(format!("--arguments must be a JSON object: {e}")))
}

/// `--server`: the stdio server alone and behind `toolrouter mcp`.
async fn stdio_paths(
    name: &str,
    state: &std::path::Path,
    args: &McpBenchArgs,
    config: &Config,
) -> Result<(Path, Path, String), CliError> {
    let server =
        config.catalog.mcp_servers.iter().find(|s| s.name == name).ok_or_else(|| {
            CliError::Usage(format!("no [[catalog.mcp_servers]] is named {name:?} in the configuration"))
        })?;
    if server.transport() != McpTransport::Stdio {
        return Err(CliError::Usage(format!("{name:?} is reached over HTTP; --server starts stdio servers")));
    }
    let arguments = json_object(&args.arguments)?;
    let mut direct = tokio::process::Command::new(&server.command);
    direct.args(&server.args).envs(&server.env).stderr(std::process::Stdio::null());
    if !server.cwd.as_os_str().is_empty() {
        direct.current_dir(&server.cwd);
    }
    let transport = TokioChildProcess::new(direct).map_err(|e| CliError::Failure(e.into()))?;
    let direct = Path::Mcp { client: connect(transport).await?, tool: args.tool.clone(), arguments: arguments.clone() };

    let mut through_config = config.clone();
    through_config.state.dir = state.to_path_buf();
    through_config.retrieval.mode = SearchMode::Lexical;
    through_config.log.level = "warn".into();
    let config_file = state.join("toolrouter.toml");
    let text = toml::to_string(&through_config).map_err(|e| CliError::Failure(e.into()))?;
    std::fs::write(&config_file, text).map_err(|e| CliError::Failure(e.into()))?;
    let exe = std::env::current_exe().map_err(|e| CliError::Failure(e.into()))?;
    let mut through = tokio::process::Command::new(exe);
    through.arg("--config").arg(&config_file).arg("mcp").stderr(std::process::Stdio::null());
    let transport = TokioChildProcess::new(through).map_err(|e| CliError::Failure(e.into()))?;
    let function = format!("{}{}{}", server.name, crate::catalog::NAMESPACE_SEPARATOR, args.tool);
    let via = json!({"name": function, "arguments": arguments}).as_object().cloned().unwrap_or_default();
    let through = Path::Mcp { client: connect(transport).await?, tool: "call_api".into(), arguments: via };
    Ok((direct, through, format!("`{}` on `{name}`, stdio", args.tool)))
}

/// `--url`: a GET of the upstream against toolrouter's streamable HTTP.
async fn http_paths(url: &str, args: &McpBenchArgs) -> Result<(Path, Path, String), CliError> {
    let Some(direct_url) = args.direct.clone() else {
        return Err(CliError::Usage("--url needs --direct, the upstream URL the call reaches".into()));
    };
    let mut headers = reqwest::header::HeaderMap::new();
    for header in &args.direct_headers {
        let parsed = header.split_once(':').and_then(|(name, value)| {
            let name = reqwest::header::HeaderName::from_bytes(name.trim().as_bytes()).ok()?;
            Some((name, reqwest::header::HeaderValue::from_str(value.trim()).ok()?))
        });
        let Some((name, value)) = parsed else {
            return Err(CliError::Usage(format!("--direct-header {header:?} is not `NAME: VALUE`")));
        };
        headers.insert(name, value);
    }
    crate::outbound::install_crypto();
    let http = reqwest::Client::builder().no_proxy().build().map_err(|e| CliError::Failure(e.into()))?;
    let direct = Path::Get { client: http.clone(), url: direct_url, headers };
    let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url);
    let transport = StreamableHttpClientTransport::with_client(http, config);
    let arguments = json_object(&args.arguments)?;
    let client = if args.stateless {
        use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
        let lifecycle =
            ClientLifecycleMode::Discover { preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28] };
        ().serve_with_lifecycle(transport, lifecycle)
            .await
            .map_err(|e| CliError::Failure(anyhow::anyhow!("server/discover failed: {e}")))?
    } else {
        connect(transport).await?
    };
    let protocol = if args.stateless { "2026-07-28, no session" } else { "a 2025-11-25 session" };
    let through = Path::Mcp { client, tool: args.tool.clone(), arguments };
    Ok((direct, through, format!("`{}` at {url}, streamable HTTP ({protocol}), against a GET", args.tool)))
}

async fn bench(args: &McpBenchArgs, config: &Config) -> Result<ExitCode, CliError> {
    // `toolrouter mcp`'s state directory, removed once it has stopped.
    let state = tempfile::tempdir().map_err(|e| CliError::Failure(e.into()))?;
    let (direct, through, what) = match (&args.server, &args.url) {
        (Some(name), _) => stdio_paths(name, state.path(), args, config).await?,
        (None, Some(url)) => http_paths(url, args).await?,
        (None, None) => return Err(CliError::Usage("give --server NAME or --url URL".into())),
    };
    let (mut alone, mut behind, mut added) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..args.calls + WARM_UP {
        let a = direct.time().await?;
        let b = through.time().await?;
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
        println!("{} calls each of {what}, alternating", args.calls);
        println!("direct             p50 {:.3} ms  p99 {:.3} ms", a.p50, a.p99);
        println!("through toolrouter p50 {:.3} ms  p99 {:.3} ms", b.p50, b.p99);
        println!("added              p50 {:.3} ms  p99 {:.3} ms", b.p50 - a.p50, b.p99 - a.p99);
        println!("median of per-call differences {:.3} ms", d.p50);
    }
    direct.close().await;
    through.close().await;
    Ok(ExitCode::SUCCESS)
}
