//! `GET /v1/traces/{id}`: a trace of the chat pipeline's
//! ([`crate::chat::traces`]), for the key that made it.

use std::sync::Arc;

use axum::extract::State;
use axum::extract::rejection::PathRejection;
use axum::response::{IntoResponse, Response};

use crate::server::error::{ApiError, path_segment};
use crate::server::middleware::ClientId;
use crate::server::state::App;

/// `GET /v1/traces/{id}`: an execute run's trace (the client's own, while kept).
pub(crate) async fn trace(
    State(app): State<Arc<App>>,
    client: Option<axum::Extension<ClientId>>,
    id: Result<axum::extract::Path<String>, PathRejection>,
) -> Response {
    let id = match path_segment(id, "trace id", Some("id")) {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    let client = client.map(|c| c.0.0);
    let found = match app.chat.traces() {
        Some(traces) => traces.get(&id, client.as_deref()).await,
        None => None,
    };
    match found {
        Some(trace) => axum::Json(trace.as_ref().clone()).into_response(),
        None => {
            let message = format!("no trace `{id}` (traces are kept for a while, per key)");
            ApiError::not_found("trace_not_found", message, None).into_response()
        }
    }
}
