//! Plan mode: the catalog APIs for the conversation's latest request —
//! the planner's steps first, then the best retrieval hits — offered to the
//! model as tools (with the catalog's schemas, so its calls are checked
//! like a client's). A destructive one says so at the head of its
//! description, and its step in the report has `"effect": "destructive"`.

use std::sync::Arc;

use serde_json::{Value, json};

use super::error::ChatError;
use super::request::ChatRequest;
use super::tools::{ClientTool, catalog_tool};
use crate::catalog::Effect;
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
        .map(|api| {
            Arc::new(catalog_tool(marked(catalog.function_definition(api), engine.effect(&catalog, api)), api, options))
        })
        .collect();
    let steps: Vec<Value> = run
        .steps
        .iter()
        .map(|s| {
            let effect = catalog.find(&s.function).map(|api| engine.effect(&catalog, api)).ok();
            json!({"name": s.function, "reason": s.reason, "arguments": s.arguments, "missing": s.missing,
                "effect": effect})
        })
        .collect();
    Ok((tools, json!(steps)))
}

/// What a model reads first of a destructive API, so that it (and the
/// person it asks) knows before calling.
const DESTRUCTIVE: &str = "[Destructive: this call may change or delete data.] ";

/// `definition` with its description marked when the API is destructive.
fn marked(mut definition: Value, effect: Effect) -> Value {
    if effect == Effect::Destructive
        && let Some(description) = definition["function"]["description"].as_str()
    {
        definition["function"]["description"] = Value::String(format!("{DESTRUCTIVE}{description}"));
    }
    definition
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every API of the embedded catalog, as it is (GET: untouched) and as
    /// if each of the unsafe methods served it (marked).
    #[test]
    fn every_destructive_api_is_marked_and_no_other() {
        use crate::catalog::Method;
        let catalog = crate::catalog::Catalog::load(&crate::catalog::Sources::default()).unwrap();
        for api in catalog.apis() {
            let definition = catalog.function_definition(api);
            assert_eq!(marked(definition.clone(), api.effect()), definition, "{}", api.function_name);
            for method in [Method::Post, Method::Put, Method::Patch, Method::Delete] {
                let unsafe_api = crate::catalog::Api { method, ..api.clone() };
                let offered = marked(definition.clone(), unsafe_api.effect());
                let description = definition["function"]["description"].as_str().unwrap();
                assert_eq!(offered["function"]["description"], format!("{DESTRUCTIVE}{description}"));
            }
        }
    }
}
