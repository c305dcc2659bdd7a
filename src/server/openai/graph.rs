//! `GET /v1/graph` and `GET /v1/graph/apis/{function}`: what the tool
//! graph has learned, as a whole (with the last runs it learned from) and
//! around one API (its transitions with
//! their weight `w` and the other end's availability α). Every replica of
//! a cluster answers the same once it has applied the same runs.

use std::sync::Arc;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use crate::graph::NodeKey;
use crate::server::error::{ApiError, path_segment};
use crate::server::middleware::{ClientId, not_ready};
use crate::server::state::App;

/// Links shown each way when the request does not say.
pub(crate) const DEFAULT_LINKS: usize = 50;
/// Most links shown each way (a hub has thousands).
pub(crate) const MAX_LINKS: usize = 500;
/// Transitions `GET /v1/graph` lists.
const HEAVIEST: usize = 20;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Limit {
    #[serde(default)]
    limit: Option<usize>,
}

/// `GET /v1/graph`: sizes, runs learned from, the heaviest transitions.
/// A key under a policy sees only the transitions between APIs it may
/// use, and no runs (they are other clients' tasks and calls).
pub(crate) async fn graph_summary(State(app): State<Arc<App>>, client: Option<axum::Extension<ClientId>>) -> Response {
    let engine = match app.engine() {
        Ok(engine) => engine,
        Err(e) => return not_ready(e),
    };
    let client = client.map(|c| c.0.0);
    let governed = engine.policy(client.as_deref()).is_some();
    let shown = |name: &str| name == NodeKey::Finish.name() || engine.allows(client.as_deref(), name);
    let graph = engine.graph();
    let heaviest: Vec<_> = graph
        .top_transitions(if governed { HEAVIEST * 4 } else { HEAVIEST })
        .into_iter()
        .filter(|(from, to, _)| !governed || (shown(from.name()) && shown(to.name())))
        .take(HEAVIEST)
        .map(|(from, to, edge)| json!({"from": from.name(), "to": to.name(), "count": edge.count, "online": edge.online}))
        .collect();
    let recent = if governed { Vec::new() } else { engine.recent_runs() };
    axum::Json(json!({
        "nodes": graph.node_count(),
        "edges": graph.edge_count(),
        "online_runs": graph.meta.online_runs,
        "heaviest": heaviest,
        "recent": recent,
    }))
    .into_response()
}

/// `GET /v1/graph/apis/{function}?limit=N`.
pub(crate) async fn graph_api(
    State(app): State<Arc<App>>,
    client: Option<axum::Extension<ClientId>>,
    function: Result<Path<String>, PathRejection>,
    limit: Result<Query<Limit>, QueryRejection>,
) -> Response {
    let function = match path_segment(function, "function name", None) {
        Ok(function) => function,
        Err(refused) => return *refused,
    };
    let limit = match limit {
        Ok(Query(Limit { limit })) => limit.unwrap_or(DEFAULT_LINKS),
        Err(e) => return ApiError::invalid(e.body_text(), Some("limit")).into_response(),
    };
    if !(1..=MAX_LINKS).contains(&limit) {
        return ApiError::invalid(format!("`limit` must be 1 to {MAX_LINKS}, got {limit}"), Some("limit"))
            .into_response();
    }
    let engine = match app.engine() {
        Ok(engine) => engine,
        Err(e) => return not_ready(e),
    };
    let client = client.map(|c| c.0.0);
    if !engine.allows(client.as_deref(), &function) {
        let unknown = format!("unknown function `{function}`");
        return ApiError::not_found("unknown_tool", unknown, Some("function")).into_response();
    }
    match engine.neighbourhood(&function, limit) {
        Ok(mut found) => {
            let shown = |link: &crate::graph::Link| {
                link.function == NodeKey::Finish.name() || engine.allows(client.as_deref(), &link.function)
            };
            found.successors.retain(shown);
            found.predecessors.retain(shown);
            axum::Json(found).into_response()
        }
        Err(unknown) => ApiError::not_found("unknown_tool", unknown.to_string(), Some("function")).into_response(),
    }
}
