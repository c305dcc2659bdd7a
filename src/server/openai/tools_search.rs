//! `POST /v1/tools/search`: toolrouter's search as a backend for clients
//! that load tools on demand (client-side tool search): the ranked tool
//! names, each with its OpenAI function definition, and the same names as
//! `tool_reference` blocks, the shape a custom tool-search tool returns.
//! Each result says why it ranks (its lexical and dense ranks and scores,
//! whether a remembered run used it), as the console's playground shows.

use std::sync::Arc;

use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::engine::Search;
use crate::server::error::ApiError;
use crate::server::middleware::ClientId;
use crate::server::middleware::body_and_engine;
use crate::server::state::App;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchRequest {
    query: String,
    #[serde(default)]
    k: Option<usize>,
    #[serde(default)]
    category: Option<String>,
    /// The function the caller called last: the tool graph's cue.
    #[serde(default)]
    after: Option<String>,
}

/// `POST /v1/tools/search {query, k?, category?, after?}`.
pub(crate) async fn tools_search(
    State(app): State<Arc<App>>,
    client: Option<axum::Extension<ClientId>>,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Response {
    let (body, engine) = match body_and_engine(&app, body) {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    let request: SearchRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            let message = format!(
                "the request body must be {{\"query\": string, \"k\"?: integer, \"category\"?: string, \"after\"?: string}}: {e}"
            );
            return ApiError::invalid(message, None).into_response();
        }
    };
    let k = match crate::engine::search_k(request.k) {
        Ok(k) => k,
        Err(message) => return ApiError::invalid(message, Some("k")).into_response(),
    };
    let client = client.map(|c| c.0.0);
    if let Some(after) = &request.after
        && !engine.allows(client.as_deref(), after)
    {
        // An API the caller may not use is as unknown to them as a misspelt one.
        let unknown = match engine.catalog().find(after) {
            Ok(_) => format!("unknown function `{after}`"),
            Err(unknown) => unknown.to_string(),
        };
        return ApiError::invalid(format!("`after`: {unknown}"), Some("after")).into_response();
    }
    let search =
        Search { query: &request.query, k, category: request.category.as_deref(), after: request.after.as_deref() };
    let found = match engine.search_explained(search, client.as_deref()).await {
        Ok(found) => found,
        Err(e) => return ApiError::from_engine(e, "query").into_response(),
    };
    let catalog = engine.catalog();
    let data: Vec<Value> = found
        .hits
        .iter()
        .filter_map(|hit| {
            let api = catalog.find(&hit.function).ok()?;
            Some(json!({
                "name": hit.function,
                "score": hit.score,
                "availability": hit.alpha,
                "tool": hit.tool,
                "category": hit.category,
                "definition": catalog.function_definition(api),
                "effect": engine.effect(&catalog, api),
                "why": {"lexical": hit.lexical, "dense": hit.dense, "remembered": hit.remembered, "follows": hit.follows},
            }))
        })
        .collect();
    let references: Vec<Value> =
        data.iter().map(|d| json!({"type": "tool_reference", "tool_name": d["name"]})).collect();
    let mut answer = json!({"object": "list", "query": request.query, "after": request.after, "intents": found.intents, "data": data,
        "tool_references": references});
    if let Some(degraded) = found.degraded {
        answer["degraded"] = json!(degraded);
    }
    axum::Json(answer).into_response()
}
