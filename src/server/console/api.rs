//! The JSON endpoints the console reads (documented in
//! `openapi/toolrouter.yaml` with the rest of the HTTP API):
//!
//! * `GET /v1/console/overview` (operators only): readiness, sizes,
//!   downstream servers, the cluster, and the last minutes' traffic;
//! * `POST /v1/plan {query, max_steps?}`: a dry-run plan with its search
//!   trace (moves, candidates, backtracks, reasons);
//! * `GET /v1/traces?limit=&all=`: the newest execute runs kept on this
//!   replica, the key's own (`all=true`: everyone's, operators only);
//! * `GET /v1/apis/{function}`: one API's schema, limits and recent calls.

use std::sync::Arc;

use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::server::error::{ApiError, path_segment};
use crate::server::middleware::ClientId;
use crate::server::middleware::{Operator, body_and_engine, not_ready, operator_only};
use crate::server::state::App;

/// Most traces one listing returns.
pub(crate) const MAX_TRACES: usize = 200;
/// Longest plan one request may ask for.
pub(crate) const MAX_PLAN_STEPS: usize = 20;

/// `GET /v1/console/overview`.
pub(crate) async fn overview(
    State(app): State<Arc<App>>,
    axum::Extension(history): axum::Extension<Arc<super::history::History>>,
    operator: Option<axum::Extension<Operator>>,
) -> Response {
    if let Some(refused) = operator_only(operator.as_deref()) {
        return refused;
    }
    let engine = match app.engine() {
        Ok(engine) => engine,
        Err(e) => return not_ready(e),
    };
    let world = engine.world();
    let catalog = &world.catalog;
    let graph = engine.graph();
    let categories: std::collections::HashSet<&str> = catalog.tools().iter().map(|t| t.category.as_str()).collect();
    let cluster = engine.cluster().map(|c| {
        let stats = engine.sharing_stats();
        json!({"up": c.health().0, "outbox": stats.map(|s| s.backlog), "applied": stats.map(|s| s.applied)})
    });
    let metrics = crate::metrics::global();
    axum::Json(json!({
        "readiness": crate::server::state::readiness(engine).await,
        "catalog": {"apis": catalog.apis().len(), "tools": catalog.tools().len(), "categories": categories.len()},
        "index": {"mode": format!("{:?}", app.config.retrieval.mode).to_lowercase(), "ready": world.has_retriever()},
        "graph": {"nodes": graph.node_count(), "edges": graph.edge_count(), "online_runs": graph.meta.online_runs},
        "memory": engine.memory().len(),
        "downstream": engine.downstream_health(),
        "cluster": cluster,
        "interval_s": super::history::INTERVAL.as_secs(),
        "series": history.points(metrics.totals()),
    }))
    .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanRequest {
    query: String,
    #[serde(default)]
    max_steps: Option<usize>,
}

/// `POST /v1/plan {query, max_steps?}`.
pub(crate) async fn plan(
    State(app): State<Arc<App>>,
    client: Option<axum::Extension<crate::server::middleware::ClientId>>,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Response {
    let (body, engine) = match body_and_engine(&app, body) {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    let request: PlanRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            let message = format!("the request body must be {{\"query\": string, \"max_steps\"?: integer}}: {e}");
            return ApiError::invalid(message, None).into_response();
        }
    };
    if let Some(n) = request.max_steps
        && !(1..=MAX_PLAN_STEPS).contains(&n)
    {
        let message = format!("`max_steps` must be 1 to {MAX_PLAN_STEPS}, got {n}");
        return ApiError::invalid(message, Some("max_steps")).into_response();
    }
    let client = client.map(|c| c.0.0);
    match engine.plan(&request.query, request.max_steps, client.as_deref()).await {
        Ok(run) => axum::Json(run).into_response(),
        Err(e) => ApiError::from_engine(e, "query").into_response(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TraceQuery {
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    all: Option<bool>,
}

/// `GET /v1/traces?limit=&all=`.
pub(crate) async fn traces(
    State(app): State<Arc<App>>,
    client: Option<axum::Extension<ClientId>>,
    operator: Option<axum::Extension<Operator>>,
    query: Result<Query<TraceQuery>, QueryRejection>,
) -> Response {
    let Query(query) = match query {
        Ok(q) => q,
        Err(e) => return ApiError::invalid(e.body_text(), None).into_response(),
    };
    let limit = query.limit.unwrap_or(50);
    if !(1..=MAX_TRACES).contains(&limit) {
        return ApiError::invalid(format!("`limit` must be 1 to {MAX_TRACES}, got {limit}"), Some("limit"))
            .into_response();
    }
    let everyone = query.all.unwrap_or(false);
    if everyone && let Some(refused) = operator_only(operator.as_deref()) {
        return refused;
    }
    let client = client.map(|c| c.0.0);
    let data = match app.chat.traces() {
        Some(traces) => traces.recent(client.as_deref(), everyone, limit),
        None => Vec::new(),
    };
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

/// `GET /v1/apis/{function}`.
pub(crate) async fn api(
    State(app): State<Arc<App>>,
    client: Option<axum::Extension<crate::server::middleware::ClientId>>,
    function: Result<Path<String>, PathRejection>,
) -> Response {
    let function = match path_segment(function, "function name", None) {
        Ok(function) => function,
        Err(refused) => return *refused,
    };
    let engine = match app.engine() {
        Ok(engine) => engine,
        Err(e) => return not_ready(e),
    };
    let catalog = engine.catalog();
    let client = client.map(|c| c.0.0);
    let api = match catalog.find(&function) {
        // A key under a policy knows nothing of the APIs it may not use.
        Ok(_) if !engine.allows(client.as_deref(), &function) => {
            let unknown = format!("unknown function `{function}`");
            return ApiError::not_found("unknown_tool", unknown, Some("function")).into_response();
        }
        Ok(api) => api,
        Err(unknown) => {
            return ApiError::not_found("unknown_tool", unknown.to_string(), Some("function")).into_response();
        }
    };
    let tool = catalog.tool_of(api);
    let upstream = &app.config.upstream;
    let host = api
        .url_template
        .as_deref()
        .and_then(|u| url::Url::parse(u).ok())
        .and_then(|u| u.host_str().map(str::to_string));
    let limits = match &api.mcp {
        Some(target) => json!({"mcp_server": target.server, "client_rate": upstream.client_rate}),
        None => json!({
            "host": host,
            "global_rate": upstream.global_rate,
            "host_rate": upstream.host_rate,
            "api_rate": upstream.api_rate,
            "client_rate": upstream.client_rate,
            "burst": upstream.burst,
            "max_wait_ms": upstream.max_wait_ms,
        }),
    };
    let metrics = crate::metrics::global();
    let outcomes: serde_json::Map<String, Value> =
        metrics.call_outcomes(&api.function_name).into_iter().map(|(k, n)| (k, json!(n))).collect();
    let neighbourhood = engine.neighbourhood(&api.function_name, 10).ok();
    axum::Json(json!({
        "function": api.function_name,
        "name": api.name,
        "tool": tool.name,
        "category": tool.category,
        "description": api.description,
        "method": api.method.as_str(),
        "url": api.url_template,
        "definition": catalog.function_definition(api),
        "limits": limits,
        "calls": {"outcomes": outcomes, "recent": metrics.recent_calls(&api.function_name)},
        "graph": neighbourhood,
    }))
    .into_response()
}
