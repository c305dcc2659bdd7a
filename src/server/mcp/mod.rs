//! The MCP face (docs/architecture.md §10): the whole catalog through three tools, for
//! any MCP-aware agent, over stdio (`toolrouter mcp`) or streamable HTTP
//! (`/mcp` on `toolrouter serve`).
//!
//! * `search_tools {query, k?, category?}`: the best APIs for a request;
//! * `plan {query, max_steps?}`: the chain of calls the planner proposes;
//! * `call_api {name, arguments}`: validates and calls an API; the
//!   compressed response comes back as text and as `structuredContent`.
//!
//! APIs found by `search_tools` or `plan` become tools of the session
//! ([`session`]), announced with `notifications/tools/list_changed` and
//! callable by name; `tools/list` pages through them. Bad arguments (to
//! any tool, the fixed ones included), unknown API names, rate limits and
//! upstream failures are `isError` results that say what happened (and
//! when to retry), as the 2025-11-25 specification asks, so that a model
//! can correct itself; unknown tools and malformed requests are JSON-RPC
//! errors. When the session ends, its calls are recorded as a run in the
//! tool graph.
//!
//! The 2025 protocol versions have sessions (`initialize`); with 2026-07-28
//! a client discovers with `server/discover` and sends every request on
//! its own (rmcp answers each with a fresh handler, over streamable HTTP
//! without a session id): it has the three fixed tools, `tools/list` never
//! grows, and any API `search_tools` or `plan` found is called by its
//! function name (directly, or through `call_api`).

mod consent;
pub(crate) mod http;
pub(crate) mod session;
mod tools;

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use crate::server::middleware::ClientId;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, Peer, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::engine::loading::{Loading, NotReady};
use crate::engine::{CallRequest, Called, Engine};
pub(crate) use session::Session;

/// The MCP face's route over streamable HTTP (keys and limits are the
/// floor's, around it), with the face's own state: rmcp's service, its
/// sessions made on the engine `app` loads (none in a server without one).
pub(crate) fn routes(app: &crate::server::state::App) -> axum::Router<Arc<crate::server::state::App>> {
    let service = app.chat.loading().map(|loading| Arc::new(http::service(&app.config, loading.clone())));
    axum::Router::new().route("/mcp", axum::routing::any(http::mcp)).layer(axum::Extension(service))
}

/// The tools every session has.
const FIXED: [&str; 3] = ["search_tools", "plan", "call_api"];
/// How long a call waits for an engine that is loading (not building its index).
const LOAD_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// Server instructions sent at `initialize`.
const INSTRUCTIONS: &str = "toolrouter reaches thousands of real REST APIs and the tools of its MCP servers. \
Call `search_tools` (or `plan` for a multi-step request) to find the APIs you need; then call them by name \
(they also appear as tools of your session), or through `call_api`.";

/// One MCP session's handler. It answers at once, even while the engine
/// is still loading: the tools then say how far loading has got.
pub(crate) struct McpServer {
    loading: Arc<Loading>,
    ready: OnceLock<Ready>,
    /// Who calls over stdio (`mcp.stdio_policy`); over HTTP, the request's key says.
    stdio_client: Option<String>,
    /// Over HTTP, the client (key or token) whose session this is: set by
    /// its first request after `initialize`; another client's requests in
    /// it are refused (a session id is never a credential).
    owner: OnceLock<Option<String>>,
}

/// A session with the engine loaded.
struct Ready {
    engine: Arc<Engine>,
    session: Session,
}

impl McpServer {
    pub(crate) fn new(loading: Arc<Loading>) -> McpServer {
        McpServer { loading, ready: OnceLock::new(), stdio_client: None, owner: OnceLock::new() }
    }

    /// The handler of `toolrouter mcp` over stdio, under the policy named
    /// by `mcp.stdio_policy` if one is.
    pub(crate) fn stdio(loading: Arc<Loading>) -> McpServer {
        let policy = &loading.config().mcp.stdio_policy;
        let stdio_client = (!policy.is_empty()).then(|| crate::policy::Policies::stdio_client(policy));
        McpServer { stdio_client, ..McpServer::new(loading) }
    }

    /// The client a request comes from: its key's or token's over HTTP
    /// (refused when the session is another client's), else stdio's.
    fn client_of(&self, extensions: &rmcp::model::Extensions) -> Result<Option<String>, McpError> {
        let Some(parts) = extensions.get::<axum::http::request::Parts>() else {
            return Ok(self.stdio_client.clone());
        };
        let client = parts.extensions.get::<ClientId>().map(|c| c.0.clone());
        if *self.owner.get_or_init(|| client.clone()) != client {
            let why = "this MCP session was opened with another API key or token: open a session of your own";
            return Err(McpError::invalid_request(why, None));
        }
        Ok(client)
    }

    /// The session, once the engine is loaded (waiting out a short load).
    async fn ready(&self) -> Result<&Ready, NotReady> {
        if let Some(ready) = self.ready.get() {
            return Ok(ready);
        }
        let engine = self.loading.engine_within(LOAD_PATIENCE).await?.clone();
        Ok(self.ready.get_or_init(|| Ready { session: Session::new(engine.clone()), engine }))
    }
}

fn text_result(text: String, structured: Option<Value>, is_error: bool) -> CallToolResult {
    let mut content = vec![ContentBlock::text(text)];
    // The spec asks that structured content also come as JSON text, for
    // clients that read text only.
    if let Some(structured) = &structured {
        content.push(ContentBlock::text(structured.to_string()));
    }
    let mut r = if is_error { CallToolResult::error(content) } else { CallToolResult::success(content) };
    r.structured_content = structured;
    r
}

/// Whether a request stands on its own (protocol 2026-07-28: no session,
/// so no session tools; any catalog API is called by its name).
fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    context.meta.protocol_version().is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Arguments a tool cannot take: an `isError` result naming the problem.
fn bad_arguments(tool: &str, problem: String) -> CallToolResult {
    text_result(format!("Invalid arguments for `{tool}`: {problem}. Fix them and call again."), None, true)
}

impl Ready {
    async fn search(
        &self,
        args: &serde_json::Map<String, Value>,
        client: Option<&str>,
    ) -> Result<CallToolResult, String> {
        tools::unknown(args, &["query", "k", "category"])?;
        let query = tools::string(args, "query")?;
        let k = crate::engine::search_k(tools::integer(args, "k")?)?;
        let category = tools::optional_string(args, "category")?;
        let after = self.session.last_done();
        let search = crate::engine::Search { query: &query, k, category, after: after.as_deref() };
        let (found, degraded) = match self.engine.search_explained(search, client).await {
            Ok(found) => (found.hits, found.degraded),
            Err(e) => return Ok(text_result(e.to_string(), None, true)),
        };
        self.session.note_task(&query);
        let added = self.session.add_tools(found.iter().map(|f| f.function.clone()));
        let results: Vec<Value> = found
            .iter()
            .map(|f| {
                json!({"name": f.function, "tool": f.tool, "category": f.category, "description": f.description,
                    "score": f.score, "availability": f.alpha, "input_schema": f.input_schema,
                    "effect": f.effect,
                    "why": {"lexical": f.lexical, "dense": f.dense, "remembered": f.remembered, "follows": f.follows}})
            })
            .collect();
        let mut text = String::new();
        for f in &found {
            text.push_str(&format!(
                "- {} ({}; {}): {}\n",
                f.function,
                f.tool,
                f.category,
                crate::text::clip(&f.description, 200)
            ));
        }
        if found.is_empty() {
            text.push_str("No API matches.");
        } else if added {
            text.push_str("These APIs are now tools of this session; call them by name, or through call_api.");
        }
        let names: Vec<&str> = found.iter().map(|f| f.function.as_str()).collect();
        let mut structured = json!({"query": query, "after": after, "found": names, "results": results});
        if let Some(degraded) = degraded {
            text.push_str(&format!("\n(Searched by words alone: {degraded}.)"));
            structured["degraded"] = json!(degraded);
        }
        Ok(text_result(text, Some(structured), false))
    }

    async fn plan(
        &self,
        args: &serde_json::Map<String, Value>,
        client: Option<&str>,
    ) -> Result<CallToolResult, String> {
        tools::unknown(args, &["query", "max_steps"])?;
        let query = tools::string(args, "query")?;
        let max_steps = tools::integer(args, "max_steps")?;
        let run = match self.engine.plan(&query, max_steps, client).await {
            Ok(run) => run,
            Err(e) => return Ok(text_result(e.to_string(), None, true)),
        };
        self.session.note_task(&query);
        self.session.add_tools(run.steps.iter().map(|s| s.function.clone()));
        let steps: Vec<Value> = run
            .steps
            .iter()
            .map(|s| {
                json!({"name": s.function, "reason": s.reason, "w": s.w, "alpha": s.alpha,
                    "arguments": s.arguments, "missing": s.missing,
                    "alternatives": s.alternatives.iter().map(|(f, _)| f).collect::<Vec<_>>()})
            })
            .collect();
        let mut text = String::new();
        for (i, s) in run.steps.iter().enumerate() {
            text.push_str(&format!("{}. {} — {}", i + 1, s.function, s.reason));
            if !s.missing.is_empty() {
                text.push_str(&format!(" (needs: {})", s.missing.join(", ")));
            }
            text.push('\n');
        }
        if run.steps.is_empty() {
            text.push_str("No plan: no API fits the request.");
        }
        Ok(text_result(text, Some(json!({"steps": steps, "parts": run.parts})), false))
    }

    /// Calls `name` with `arguments` (from `call_api` or a session tool).
    /// A destructive call waits for the user's consent, where the client can be asked ([`consent`]).
    async fn call(
        &self,
        name: &str,
        arguments: &Value,
        client: Option<&str>,
        peer: &Peer<RoleServer>,
    ) -> CallToolResult {
        let purpose = self.session.tasks();
        let call = CallRequest { function: name, arguments, client, via: "mcp", purpose: &purpose, standalone: false };
        if let Err(why) = consent::ask(&self.engine, peer, name, arguments, client).await {
            self.engine.record_refusal(&call, &why).await;
            return text_result(why, None, true);
        }
        match self.engine.call(call).await {
            Called::Unknown(unknown) => {
                let hint = if unknown.close.is_empty() { "; find APIs with search_tools" } else { "" };
                text_result(format!("{unknown}{hint}"), None, true)
            }
            Called::Refused(problem) => text_result(format!("Invalid arguments for `{name}`: {problem}"), None, true),
            Called::NotAllowed(refused) => text_result(refused.to_string(), None, true),
            Called::Invalid(invalid) => {
                let problems = serde_json::to_value(&invalid.problems).unwrap_or_default();
                text_result(invalid.to_string(), Some(json!({"problems": problems})), true)
            }
            Called::Failed(e) => {
                let function = e.outcome().function;
                if e.asked {
                    self.session.record_call(&function, false);
                }
                let mut text = format!("The call to `{function}` failed ({:?}): {}", e.class, e.message);
                if let Some(ms) = e.retry_after_ms {
                    text.push_str(&format!(" Retry after {:.1} s.", ms / 1e3));
                }
                let structured = json!({"error": {"class": e.class, "message": e.message, "status": e.status,
                    "retry_after_ms": e.retry_after_ms}});
                text_result(text, Some(structured), true)
            }
            Called::Done { function, response, compressed, warnings } => {
                self.session.record_call(&function, response.outcome().ok);
                let body: Value =
                    serde_json::from_str(&compressed.text).unwrap_or(Value::String(compressed.text.clone()));
                let mut structured = json!({"name": function, "status": response.status, "response": body,
                    "characters": {"before": compressed.chars_before, "after": compressed.chars_after}});
                if !warnings.is_empty() {
                    structured["warnings"] = serde_json::to_value(&warnings).unwrap_or_default();
                }
                text_result(compressed.text, Some(structured), false)
            }
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_server_info(Implementation::new("toolrouter", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    /// The 2025 revisions (sessions, `initialize`) and 2026-07-28
    /// (`server/discover`, every request on its own: rmcp serves each with a
    /// handler of its own, so a 2026 client has no session tools and calls
    /// catalog APIs by name).
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&[
            ProtocolVersion::V_2025_03_26,
            ProtocolVersion::V_2025_06_18,
            ProtocolVersion::V_2025_11_25,
            ProtocolVersion::V_2026_07_28,
        ])
    }

    /// Binds the session to its client, and tells the client when the
    /// catalog's tools change (a downstream MCP server's tools were added,
    /// changed or removed), for as long as the session lasts.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // The session is its opener's from now on (a mismatch is refused by its requests).
        let _ = self.client_of(&context.extensions);
        let (loading, peer) = (self.loading.clone(), context.peer);
        tokio::spawn(async move {
            let engine = loop {
                match loading.engine() {
                    Ok(engine) => break engine.clone(),
                    Err(NotReady::Failed(_)) => return,
                    Err(NotReady::Loading(_)) => tokio::time::sleep(std::time::Duration::from_secs(1)).await,
                }
            };
            let mut changes = engine.tools_changed();
            while changes.changed().await.is_ok() {
                if peer.notify_tool_list_changed().await.is_err() {
                    return;
                }
            }
        });
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        // A reload may have narrowed the caller's policy since a tool was found.
        let client = self.client_of(&context.extensions)?;
        let session_tools = match self.ready.get() {
            Some(r) => r.session.tools().into_iter().filter(|t| r.engine.allows(client.as_deref(), &t.name)).collect(),
            None => Vec::new(),
        };
        let all = tools::fixed().into_iter().chain(session_tools).collect::<Vec<_>>();
        let page = self.loading.config().mcp.page_size.max(1);
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(c) => c
                .parse::<usize>()
                .ok()
                .filter(|s| *s <= all.len())
                .ok_or_else(|| McpError::invalid_params(format!("invalid cursor {c:?}"), None))?,
        };
        let tools: Vec<_> = all.iter().skip(start).take(page).cloned().collect();
        let mut result = ListToolsResult::with_all_items(tools);
        if start + page < all.len() {
            result.next_cursor = Some((start + page).to_string());
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        let client = self.client_of(&context.extensions)?;
        let tool = request.name.as_ref();
        let ready = match self.ready().await {
            Ok(ready) => ready,
            Err(not_ready) if FIXED.contains(&tool) => return Ok(text_result(not_ready.to_string(), None, true).into()),
            Err(not_ready) => {
                return Err(McpError::invalid_params(format!("unknown tool `{tool}` ({not_ready})"), None));
            }
        };
        let (engine, session) = (&ready.engine, &ready.session);
        let before = session.version();
        let result = match tool {
            "search_tools" => ready.search(&args, client.as_deref()).await.unwrap_or_else(|e| bad_arguments(tool, e)),
            "plan" => ready.plan(&args, client.as_deref()).await.unwrap_or_else(|e| bad_arguments(tool, e)),
            "call_api" => {
                let name = tools::unknown(&args, &["name", "arguments"]).and_then(|()| tools::string(&args, "name"));
                match name {
                    Ok(name) => {
                        let arguments = args.get("arguments").cloned().unwrap_or_else(|| json!({}));
                        ready.call(&name, &arguments, client.as_deref(), &context.peer).await
                    }
                    Err(e) => bad_arguments(tool, e),
                }
            }
            name if session.has_tool(name) || (is_stateless(&context) && engine.catalog().find(name).is_ok()) => {
                let name = name.to_string();
                ready.call(&name, &Value::Object(args), client.as_deref(), &context.peer).await
            }
            name => {
                let hint = if engine.allows(client.as_deref(), name) {
                    format!(
                        "`{name}` is a catalog API but not a tool of this session: call it through call_api, or find it with search_tools first"
                    )
                } else {
                    format!("unknown tool `{name}`; the tools are search_tools, plan, call_api and the APIs they found")
                };
                return Err(McpError::invalid_params(hint, None));
            }
        };
        if session.version() != before {
            let _ = context.peer.notify_tool_list_changed().await;
        }
        Ok(result.into())
    }
}
