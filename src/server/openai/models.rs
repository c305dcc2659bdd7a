//! `GET /v1/models`.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::server::app::App;
use crate::server::error::ApiError;

/// `GET /v1/models`: the names of `openai.models`; without a map, the
/// upstream model server's own list (so model pickers fill).
pub(crate) async fn models(State(app): State<Arc<App>>) -> Response {
    let models = &app.config.openai.models;
    if models.is_empty()
        && let Some(llm) = &app.llm
    {
        return match llm.models().await {
            Ok(list) => axum::Json(list).into_response(),
            Err(e) => ApiError::from(e).into_response(),
        };
    }
    let data: Vec<serde_json::Value> =
        models.keys().map(|n| json!({"id": n, "object": "model", "created": 0, "owned_by": "toolrouter"})).collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}
