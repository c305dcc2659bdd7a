//! Connecting to one downstream server: starting its program (stdio) or
//! opening its endpoint (streamable HTTP), then the MCP handshake.
//!
//! A stdio program gets a small environment of its own, as MCP clients
//! usually give it (`HOME`, `PATH`, `USER`…), plus the configured `env`
//! and the `pass_env` variables: never toolrouter's own secrets. It runs
//! in a process group of its own, killed whole when the connection is
//! dropped (`npx` and `uvx` start children). Its stderr goes to the log,
//! line by line, under the server's name.

use std::collections::HashMap;
use std::process::Stdio;

use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceExt};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

use super::Signal;
use crate::config::{McpServerConfig, McpTransport};

/// Variables of toolrouter's environment a stdio program inherits.
const INHERITED_ENV: [&str; 9] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TMPDIR", "SYSTEMROOT"];
/// Longest stderr line of a downstream program that is logged.
const MAX_STDERR_LINE: usize = 500;

/// The client side of one connection: says who toolrouter is, and passes
/// `tools/list_changed` on to the supervisor.
#[derive(Clone)]
pub(super) struct Handler {
    pub(crate) signals: mpsc::Sender<Signal>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("toolrouter", env!("CARGO_PKG_VERSION")))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // A full channel already holds a signal: the change will be seen.
        let _ = self.signals.try_send(Signal::ListChanged);
    }
}

/// Why a handshake failed, in words (rmcp's messages for an unexpected
/// answer print its Rust types, which `/readyz` would show).
fn handshake_error(e: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError as E;
    match e {
        E::ExpectedInitResponse(_) | E::ExpectedInitResult(_) => {
            "the answer to `initialize` is not an initialize result".into()
        }
        E::ConnectionClosed(_) => "the server closed the connection during the handshake".into(),
        E::JsonRpcError(error) => {
            format!("the server refused `initialize`: {}", crate::text::clip(&error.message, 300))
        }
        // Its Display names the transport's Rust type: the cause and its
        // sources say what happened ("connection refused").
        E::TransportError { error, context } => {
            let mut reason = error.error.to_string();
            let mut source = error.error.source();
            while let Some(cause) = source {
                let text = cause.to_string();
                if !reason.contains(&text) {
                    reason = format!("{reason}: {text}");
                }
                source = cause.source();
            }
            crate::text::clip(&format!("the connection failed while {context}: {reason}"), 300)
        }
        other => crate::text::clip(&other.to_string(), 300),
    }
}

/// A live connection.
pub(super) type Connection = RunningService<RoleClient, Handler>;

/// Connects to `config`'s server and completes the handshake.
pub(super) async fn connect(config: &McpServerConfig, handler: Handler) -> Result<Connection, String> {
    match config.transport() {
        McpTransport::Stdio => {
            let transport = spawn(config)?;
            handler.serve(transport).await.map_err(|e| format!("the MCP handshake failed: {}", handshake_error(&e)))
        }
        McpTransport::Http => {
            let headers = headers(config)?;
            let client = reqwest::Client::builder()
                .user_agent(crate::outbound::USER_AGENT)
                .no_proxy()
                .build()
                .map_err(|e| format!("building the HTTP client: {e}"))?;
            let transport_config =
                StreamableHttpClientTransportConfig::with_uri(config.url.clone()).custom_headers(headers);
            let transport = StreamableHttpClientTransport::with_client(client, transport_config);
            handler
                .serve(transport)
                .await
                .map_err(|e| format!("the MCP handshake with {} failed: {}", config.url, handshake_error(&e)))
        }
    }
}

/// Starts the program of a stdio server.
fn spawn(config: &McpServerConfig) -> Result<TokioChildProcess, String> {
    let mut command = tokio::process::Command::new(&config.command);
    command.args(&config.args).env_clear();
    for name in INHERITED_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.envs(&config.env);
    for name in &config.pass_env {
        match std::env::var_os(name) {
            Some(value) => command.env(name, value),
            None => {
                tracing::warn!(server = %config.name, variable = %name, "a pass_env variable is not set in toolrouter's environment");
                &mut command
            }
        };
    }
    if !config.cwd.as_os_str().is_empty() {
        command.current_dir(&config.cwd);
    }
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
    let (transport, stderr) = TokioChildProcess::builder(wrapped)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", config.command))?;
    if let Some(stderr) = stderr {
        let server = config.name.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(server = %server, "downstream stderr: {}", crate::text::clip(&line, MAX_STDERR_LINE));
            }
        });
    }
    Ok(transport)
}

/// The headers of an HTTP server: the plain ones, then the secret ones
/// (marked sensitive, so they are never logged).
fn headers(config: &McpServerConfig) -> Result<HashMap<http::HeaderName, http::HeaderValue>, String> {
    let mut out = HashMap::new();
    let name = |n: &str| http::HeaderName::from_bytes(n.as_bytes()).map_err(|_| format!("{n:?} is not a header name"));
    for (n, v) in &config.headers {
        let value = http::HeaderValue::from_str(v).map_err(|_| format!("the value of header {n} is not valid"))?;
        out.insert(name(n)?, value);
    }
    for (n, secret) in &config.secret_headers {
        let secret = secret.read().map_err(|e| format!("the secret header {n}: {e}"))?;
        let mut value = http::HeaderValue::from_str(secret.expose())
            .map_err(|_| format!("the secret header {n} is not a valid header value"))?;
        value.set_sensitive(true);
        out.insert(name(n)?, value);
    }
    Ok(out)
}
