//! The OpenAI-compatible face (docs/architecture.md §9), so that OpenAI SDK,
//! Agents SDK and LangChain clients work by pointing `base_url` at
//! toolrouter: `POST /v1/chat/completions` (served as it comes by the chat
//! core, [`crate::chat`]), `POST /v1/responses` ([`responses`],
//! translated), `GET /v1/models` ([`models`]), and toolrouter's own
//! endpoints beside them: `/v1/tools/search`, `/v1/tools/call`, `/v1/tools/held`, `/v1/graph`
//! and `/v1/traces/{id}`. Errors use OpenAI's shape
//! ([`crate::server::error`]).

pub(crate) mod chat;
mod consents;
pub(crate) mod graph;
mod held;
pub(crate) mod models;
pub(crate) mod responses;
pub(crate) mod tools_call;
pub(crate) mod tools_search;
pub(crate) mod traces;

use std::sync::Arc;

use axum::routing::{get, post};

use crate::server::state::App;

/// The OpenAI face's routes (keys and limits are the floor's, around
/// them), with the face's own state: the kept responses.
pub(crate) fn routes(app: &App) -> axum::Router<Arc<App>> {
    let kept = responses::store::ResponseStore::open(
        Some(app.config.state.dir()),
        std::time::Duration::from_secs(app.config.openai.responses_ttl_s),
        app.config.openai.responses_mb << 20,
        app.cluster.clone(),
    );
    let responses = post(responses::responses).layer(axum::Extension(Arc::new(kept)));
    axum::Router::new()
        .route("/v1/models", get(models::models))
        .route("/v1/models/{id}", get(models::model))
        .route("/v1/chat/completions", post(chat::chat_completions))
        .route("/v1/responses", responses)
        .route("/v1/tools/call", post(tools_call::tools_call))
        .route("/v1/tools/search", post(tools_search::tools_search))
        .route("/v1/traces/{id}", get(traces::trace))
        .route("/v1/consents/{id}", get(consents::consent).post(consents::decide))
        .route("/v1/tools/held", get(held::held))
        .route("/v1/tools/held/{function}/accept", post(held::accept))
        .route("/v1/graph", get(graph::graph_summary))
        .route("/v1/graph/apis/{function}", get(graph::graph_api))
}
