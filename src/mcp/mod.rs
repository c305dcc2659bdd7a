//! The MCP face (DESIGN §10): the whole catalog through three tools, for
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
//! callable by name; `tools/list` pages through them. Bad arguments, rate
//! limits and upstream failures are `isError` results that say what
//! happened (and when to retry); unknown tools and malformed requests are
//! JSON-RPC errors. When the session ends, its calls are recorded as a
//! run in the tool graph.
//!
//! Sessions need the 2025 protocol versions: `server/discover` (protocol
//! 2026-07-28, which has no sessions) is answered with -32601 so that newer
//! clients fall back to `initialize`.

pub mod session;
mod tools;

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, DiscoverResult, ErrorCode, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::engine::{Called, Engine};
pub use session::Session;

/// Server instructions sent at `initialize`.
const INSTRUCTIONS: &str = "toolrouter reaches thousands of real REST APIs. Call `search_tools` (or `plan` for \
a multi-step request) to find the APIs you need; they then appear as tools you can call directly, or call \
them through `call_api`.";

/// The client on whose behalf an HTTP request runs (set by the server's
/// auth layer as a request extension): rate limits are kept per client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientId(pub String);

/// One MCP session's handler.
pub struct McpServer {
    engine: Arc<Engine>,
    session: Session,
}

impl McpServer {
    pub fn new(engine: Arc<Engine>) -> McpServer {
        let session = Session::new(engine.clone());
        McpServer { engine, session }
    }
}

fn text_result(text: String, structured: Option<Value>, is_error: bool) -> CallToolResult {
    let mut r = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    r.structured_content = structured;
    r
}

fn client_of(context: &RequestContext<RoleServer>) -> Option<String> {
    let parts = context.extensions.get::<axum::http::request::Parts>()?;
    parts.extensions.get::<ClientId>().map(|c| c.0.clone())
}

impl McpServer {
    async fn search(&self, args: &serde_json::Map<String, Value>) -> Result<CallToolResult, McpError> {
        let query = tools::string(args, "query")?;
        let k = tools::integer(args, "k")?.unwrap_or(tools::DEFAULT_K).clamp(1, tools::MAX_K);
        let category = args.get("category").and_then(Value::as_str);
        let found = match self.engine.search(&query, k, category).await {
            Ok(found) => found,
            Err(e) => return Ok(text_result(e.to_string(), None, true)),
        };
        self.session.note_task(&query);
        let added = self.session.add_tools(found.iter().map(|f| f.function.clone()));
        let results: Vec<Value> = found
            .iter()
            .map(|f| {
                json!({"name": f.function, "tool": f.tool, "category": f.category, "description": f.description,
                    "score": f.score, "availability": f.alpha, "input_schema": f.input_schema})
            })
            .collect();
        let mut text = String::new();
        for f in &found {
            text.push_str(&format!(
                "- {} ({}; {}): {}\n",
                f.function,
                f.tool,
                f.category,
                tools::clip(&f.description, 200)
            ));
        }
        if found.is_empty() {
            text.push_str("No API matches.");
        } else if added {
            text.push_str("These APIs are now tools of this session; call them by name, or through call_api.");
        }
        Ok(text_result(text, Some(json!({"results": results})), false))
    }

    async fn plan(&self, args: &serde_json::Map<String, Value>) -> Result<CallToolResult, McpError> {
        let query = tools::string(args, "query")?;
        let max_steps = tools::integer(args, "max_steps")?;
        let run = match self.engine.plan(&query, max_steps).await {
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
    async fn call(&self, name: &str, arguments: &Value, client: Option<&str>) -> Result<CallToolResult, McpError> {
        let api = self.engine.api(name).map_err(|e| McpError::invalid_params(e, None))?;
        if let Err(problem) = Engine::check_arguments(arguments) {
            return Ok(text_result(format!("Invalid arguments for `{name}`: {problem}"), None, true));
        }
        let request = self.session.tasks();
        match self.engine.call(api, arguments, client, &request, false).await {
            Called::Invalid(invalid) => {
                let problems = serde_json::to_value(&invalid.problems).unwrap_or_default();
                Ok(text_result(invalid.to_string(), Some(json!({"problems": problems})), true))
            }
            Called::Failed(e) => {
                self.session.record_call(&api.function_name, false);
                let mut text = format!("The call to `{}` failed ({:?}): {}", api.function_name, e.class, e.message);
                if let Some(ms) = e.retry_after_ms {
                    text.push_str(&format!(" Retry after {:.1} s.", ms / 1e3));
                }
                let structured = json!({"error": {"class": e.class, "message": e.message, "status": e.status,
                    "retry_after_ms": e.retry_after_ms}});
                Ok(text_result(text, Some(structured), true))
            }
            Called::Done { response, compressed } => {
                self.session.record_call(&api.function_name, true);
                let body: Value =
                    serde_json::from_str(&compressed.text).unwrap_or(Value::String(compressed.text.clone()));
                let structured = json!({"name": api.function_name, "status": response.status, "response": body,
                    "characters": {"before": compressed.chars_before, "after": compressed.chars_after}});
                Ok(text_result(compressed.text, Some(structured), false))
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

    /// 2026-07-28 is listed so that its `server/discover` reaches
    /// [`Self::discover`] and gets -32601 (rather than a version error).
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&[
            ProtocolVersion::V_2025_03_26,
            ProtocolVersion::V_2025_06_18,
            ProtocolVersion::V_2025_11_25,
            ProtocolVersion::V_2026_07_28,
        ])
    }

    async fn discover(&self, _context: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        Err(McpError::new(
            ErrorCode::METHOD_NOT_FOUND,
            "server/discover is not supported: send initialize (protocol 2025-11-25)",
            None,
        ))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let all = tools::fixed().into_iter().chain(self.session.tools()).collect::<Vec<_>>();
        let page = self.engine.config.mcp.page_size.max(1);
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
        let client = client_of(&context);
        let before = self.session.version();
        let result = match request.name.as_ref() {
            "search_tools" => self.search(&args).await?,
            "plan" => self.plan(&args).await?,
            "call_api" => {
                let name = tools::string(&args, "name")?;
                let arguments = args.get("arguments").cloned().unwrap_or_else(|| json!({}));
                self.call(&name, &arguments, client.as_deref()).await?
            }
            name if self.session.has_tool(name) => {
                let name = name.to_string();
                self.call(&name, &Value::Object(args), client.as_deref()).await?
            }
            name => {
                let hint = if self.engine.api(name).is_ok() {
                    format!(
                        "`{name}` is a catalog API but not a tool of this session: call it through call_api, or find it with search_tools first"
                    )
                } else {
                    format!("unknown tool `{name}`; the tools are search_tools, plan, call_api and the APIs they found")
                };
                return Err(McpError::invalid_params(hint, None));
            }
        };
        if self.session.version() != before {
            let _ = context.peer.notify_tool_list_changed().await;
        }
        Ok(result.into())
    }
}
