//! Plan mode: the catalog APIs for the conversation's latest request —
//! the planner's steps first, then the best retrieval hits — offered to the
//! model as tools (with the catalog's schemas, so its calls are checked
//! like a client's).

use std::sync::Arc;

use serde_json::{Value, json};

use super::error::ChatError;
use super::request::ChatRequest;
use super::tools::{ClientTool, catalog_tool};
use crate::engine::Engine;
use crate::llm::wire::Message;

/// The text of the latest user message that has some.
fn latest_request(req: &ChatRequest) -> Result<Option<String>, ChatError> {
    let messages = req.messages()?;
    Ok(messages.iter().rev().filter(|m| m.is("user")).map(Message::text).find(|t| !t.trim().is_empty()))
}

/// The tools to offer (at most `max`) and the plan, for the answer's `toolrouter` field.
pub(crate) async fn offer(
    engine: &Arc<Engine>,
    req: &ChatRequest,
    max: usize,
    client: Option<&str>,
) -> Result<(Vec<Arc<ClientTool>>, Value), ChatError> {
    let query = latest_request(req)?
        .filter(|q| !q.trim().is_empty())
        .ok_or_else(|| ChatError::invalid("plan mode needs a user message to plan for", Some("messages")))?;
    let run = engine.plan(&query, None, client).await.map_err(ChatError::Engine)?;
    let search = crate::engine::Search { query: &query, k: max, category: None, after: None };
    let found = engine.search_explained(search, client).await.map_err(ChatError::Engine)?;
    let mut names: Vec<String> = run.steps.iter().map(|s| s.function.clone()).collect();
    for f in found.hits {
        if !names.contains(&f.function) {
            names.push(f.function);
        }
    }
    names.truncate(max);
    let options = crate::args::Options::from(&engine.config.args);
    let catalog = engine.catalog();
    let tools = names
        .iter()
        .filter_map(|n| catalog.find(n).ok())
        .map(|api| Arc::new(catalog_tool(catalog.function_definition(api), api, options)))
        .collect();
    let steps: Vec<Value> = run
        .steps
        .iter()
        .map(|s| json!({"name": s.function, "reason": s.reason, "arguments": s.arguments, "missing": s.missing}))
        .collect();
    Ok((tools, json!(steps)))
}
