//! One server's supervisor: connect, list, keep the list current, and
//! reconnect with backoff when the connection ends.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rmcp::service::{Peer, RoleClient};
use tokio::sync::{mpsc, watch};

use super::connect::{Handler, connect};
use super::{Health, Server, ServerState, Signal, unix_ms};
use crate::catalog::{McpServerTools, McpTool};

/// First wait before reconnecting; doubled after each failure.
const BACKOFF_START: Duration = Duration::from_millis(500);
/// Longest wait before reconnecting.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// `list_changed` notifications closer than this are one change.
const DEBOUNCE: Duration = Duration::from_millis(100);
/// Tools are listed again this often (servers that change without saying
/// so; a server that no longer answers is found out).
const RELIST_EVERY: Duration = Duration::from_secs(60);

pub(super) struct Context {
    pub(crate) server: Arc<Server>,
    pub(crate) changes: watch::Sender<u64>,
    pub(crate) tried: Arc<(Mutex<()>, Condvar)>,
}

/// Runs until the `Downstream` is dropped (`stop` then changes).
pub(super) async fn supervise(context: Context, mut stop: watch::Receiver<()>) {
    let mut failures = 0u32;
    loop {
        let ended = tokio::select! {
            ended = session(&context) => ended,
            _ = stop.changed() => return,
        };
        if ended.connected {
            failures = 0;
        }
        failures += 1;
        let wait = crate::outbound::backoff(BACKOFF_START.as_millis() as u64, failures).min(BACKOFF_MAX);
        let name = &context.server.config.name;
        tracing::warn!(server = %name, reason = %ended.reason, retry_in_ms = wait.as_millis() as u64, "downstream MCP server is down");
        context.server.set_down(ended.reason);
        context.mark_tried();
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
    }
}

/// How a connection ended.
struct Ended {
    /// It was up (tools listed) before it ended.
    connected: bool,
    reason: String,
}

/// One connection, from connecting to its end.
async fn session(context: &Context) -> Ended {
    let server = &context.server;
    let config = &server.config;
    let limit = Duration::from_millis(config.connect_timeout_ms);
    let (signals, mut received) = mpsc::channel(1);
    let handler = Handler { signals: signals.clone() };
    let failed = |reason: String| Ended { connected: false, reason };
    let connection = match tokio::time::timeout(limit, connect(config, handler)).await {
        Err(_) => return failed(format!("no answer to the handshake within {} ms", config.connect_timeout_ms)),
        Ok(Err(e)) => return failed(e),
        Ok(Ok(c)) => c,
    };
    let peer = connection.peer().clone();
    let description = describe(&peer, &config.name);
    let listed = match tokio::time::timeout(limit, list(&peer, &config.name, &description)).await {
        Err(_) => return failed(format!("tools/list got no answer within {} ms", config.connect_timeout_ms)),
        Ok(Err(e)) => return failed(e),
        Ok(Ok(listed)) => listed,
    };
    tracing::info!(server = %config.name, tools = listed.tools.len(), "downstream MCP server connected");
    server.set_up(peer.clone(), signals, listed);
    context.announce();
    context.mark_tried();

    let waiting = connection.waiting();
    tokio::pin!(waiting);
    let mut relist = tokio::time::interval(RELIST_EVERY);
    relist.reset();
    loop {
        tokio::select! {
            quit = &mut waiting => {
                let reason = match quit {
                    Ok(reason) => format!("the connection ended ({reason:?})"),
                    Err(e) => format!("the connection's task failed ({e})"),
                };
                return Ended { connected: true, reason };
            }
            signal = received.recv() => match signal {
                Some(Signal::Reconnect) | None => {
                    return Ended { connected: true, reason: "a call found the connection broken".into() };
                }
                Some(Signal::ListChanged) => {
                    // A flood of notifications is one re-list.
                    tokio::time::sleep(DEBOUNCE).await;
                    while received.try_recv().is_ok() {}
                    if let Err(reason) = refresh(context, &peer, &description).await {
                        return Ended { connected: true, reason };
                    }
                }
            },
            _ = relist.tick() => {
                if let Err(reason) = refresh(context, &peer, &description).await {
                    return Ended { connected: true, reason };
                }
            }
        }
    }
}

/// Lists the tools again; announces a change. An error ends the connection.
async fn refresh(context: &Context, peer: &Peer<RoleClient>, description: &str) -> Result<(), String> {
    let config = &context.server.config;
    let limit = Duration::from_millis(config.connect_timeout_ms);
    let listed = match tokio::time::timeout(limit, list(peer, &config.name, description)).await {
        Err(_) => return Err(format!("tools/list got no answer within {} ms", config.connect_timeout_ms)),
        Ok(listed) => listed?,
    };
    if context.server.replace_tools(listed) {
        tracing::info!(server = %config.name, "downstream MCP server's tools changed");
        context.announce();
    }
    Ok(())
}

/// Every page of `tools/list`, as catalog entries. A tool the protocol's
/// types cannot read (an `inputSchema` that is not an object…) is left out
/// with a warning; the rest are kept.
async fn list(peer: &Peer<RoleClient>, server: &str, description: &str) -> Result<McpServerTools, String> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let (page, next) = list_page(peer, server, cursor.take()).await?;
        tools.extend(page.into_iter().map(|t| McpTool {
            name: t.name.to_string(),
            title: t.title.clone(),
            description: t.description.as_deref().unwrap_or_default().to_string(),
            input_schema: serde_json::Value::Object((*t.input_schema).clone()),
            annotations: t.annotations.as_ref().and_then(|a| serde_json::to_value(a).ok()),
        }));
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok(McpServerTools { server: server.to_string(), description: description.to_string(), tools })
}

/// One page of `tools/list` and the next page's cursor. Sent as a custom
/// request: rmcp's typed `list_tools` fails the whole page on one tool it
/// cannot read, while its untyped answer lets each tool be read alone.
async fn list_page(
    peer: &Peer<RoleClient>,
    server: &str,
    cursor: Option<String>,
) -> Result<(Vec<rmcp::model::Tool>, Option<String>), String> {
    use rmcp::model::{ClientRequest, CustomRequest, ServerResult};
    let params = cursor.map(|c| serde_json::json!({"cursor": c}));
    let request = ClientRequest::CustomRequest(CustomRequest::new("tools/list", params));
    let answer = peer.send_request(request).await.map_err(|e| format!("tools/list failed: {e}"))?;
    match answer {
        ServerResult::ListToolsResult(page) => Ok((page.tools, page.next_cursor)),
        ServerResult::CustomResult(rmcp::model::CustomResult(value)) => {
            let Some(listed) = value.get("tools").and_then(serde_json::Value::as_array) else {
                return Err("tools/list failed: the answer has no `tools` list".into());
            };
            let mut tools = Vec::new();
            for (i, tool) in listed.iter().enumerate() {
                match serde_json::from_value::<rmcp::model::Tool>(tool.clone()) {
                    Ok(tool) => tools.push(tool),
                    Err(e) => {
                        let name = tool.get("name").and_then(serde_json::Value::as_str).unwrap_or("(no name)");
                        tracing::warn!(server, tool = %crate::text::clip(name, 100), index = i, error = %e,
                            "a tool of a downstream MCP server cannot be read and is left out");
                    }
                }
            }
            let next = value.get("nextCursor").and_then(serde_json::Value::as_str).map(str::to_string);
            Ok((tools, next))
        }
        other => Err(format!(
            "tools/list failed: an answer of another kind ({})",
            crate::text::clip(&format!("{other:?}"), 200)
        )),
    }
}

/// What a server says of itself: its instructions, else its name and version.
fn describe(peer: &Peer<RoleClient>, server: &str) -> String {
    let Some(info) = peer.peer_info() else { return format!("MCP server {server}") };
    if let Some(instructions) = info.instructions.as_deref().filter(|i| !i.trim().is_empty()) {
        return crate::text::clip(instructions.trim(), 500);
    }
    match &info.server_info {
        Some(i) => format!("MCP server {} {}", i.title.as_deref().unwrap_or(&i.name), i.version),
        None => format!("MCP server {server}"),
    }
}

impl Context {
    fn announce(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    fn mark_tried(&self) {
        let newly = {
            let mut live = self.server.live();
            !std::mem::replace(&mut live.tried, true)
        };
        if newly {
            let (lock, woken) = &*self.tried;
            let _guard = lock.lock().unwrap_or_else(|e| e.into_inner());
            woken.notify_all();
        }
    }
}

impl Server {
    fn set_up(&self, peer: Peer<RoleClient>, signals: mpsc::Sender<Signal>, listed: McpServerTools) {
        super::known::save(&self.state_dir, &listed);
        let mut live = self.live();
        let reconnects = live.health.reconnects + u64::from(live.tried && live.health.state != ServerState::Up);
        live.health = Health {
            server: self.config.name.clone(),
            state: ServerState::Up,
            error: None,
            tools: listed.tools.len(),
            reconnects,
            since_unix_ms: unix_ms(),
        };
        live.peer = Some(peer);
        live.signals = Some(signals);
        live.listed = Some(listed);
    }

    fn set_down(&self, reason: String) {
        let mut live = self.live();
        live.peer = None;
        live.signals = None;
        if live.health.state != ServerState::Down || live.health.error.as_deref() != Some(&reason) {
            live.health.since_unix_ms = unix_ms();
        }
        live.health.state = ServerState::Down;
        live.health.error = Some(reason);
    }

    /// Replaces the known tools; whether they changed.
    fn replace_tools(&self, listed: McpServerTools) -> bool {
        let mut live = self.live();
        let sorted = |t: &McpServerTools| {
            let mut tools = t.tools.clone();
            tools.sort_by(|a, b| a.name.cmp(&b.name));
            tools
        };
        let changed = live.listed.as_ref().is_none_or(|old| sorted(old) != sorted(&listed));
        if changed {
            super::known::save(&self.state_dir, &listed);
        }
        live.health.tools = listed.tools.len();
        live.listed = Some(listed);
        changed
    }
}
