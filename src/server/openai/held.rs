//! `GET /v1/tools/held` and `POST /v1/tools/held/{function}/accept`: the
//! tools held before they reach a model ([`crate::quarantine`]) and an
//! operator's release of one whose definition changed (instead of
//! `access.accept_changes` and a reload). Operators only.

use std::sync::Arc;

use axum::extract::State;
use axum::extract::rejection::PathRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::engine::access::NotAccepted;
use crate::server::error::ApiError;
use crate::server::middleware::{Operator, not_ready, operator_only};
use crate::server::state::App;

/// `GET /v1/tools/held`: every held tool, with why.
pub(crate) async fn held(State(app): State<Arc<App>>, operator: Option<axum::Extension<Operator>>) -> Response {
    if let Some(refused) = operator_only(operator.as_deref()) {
        return refused;
    }
    match app.engine() {
        Ok(engine) => {
            let held: Vec<_> = engine
                .held_tools()
                .into_iter()
                .map(|h| serde_json::json!({"function": h.function, "reasons": h.reasons}))
                .collect();
            axum::Json(serde_json::json!({"object": "list", "data": held})).into_response()
        }
        Err(e) => not_ready(e),
    }
}

/// `POST /v1/tools/held/{function}/accept`: the changed definition of
/// `function` accepted and remembered as the one seen.
pub(crate) async fn accept(
    State(app): State<Arc<App>>,
    operator: Option<axum::Extension<Operator>>,
    function: Result<axum::extract::Path<String>, PathRejection>,
) -> Response {
    if let Some(refused) = operator_only(operator.as_deref()) {
        return refused;
    }
    let function = match function {
        Ok(axum::extract::Path(function)) => function,
        Err(e) => return ApiError::invalid(format!("bad function name: {}", e.body_text()), None).into_response(),
    };
    let engine = match app.engine() {
        Ok(engine) => engine,
        Err(e) => return not_ready(e),
    };
    match engine.accept_change(&function) {
        Ok(()) => axum::Json(serde_json::json!({"function": function, "held": false})).into_response(),
        Err(NotAccepted::NotHeld) => ApiError::not_found(
            "tool_not_held",
            format!("no tool named `{function}` is held (GET /v1/tools/held lists them)"),
            None,
        )
        .into_response(),
        Err(NotAccepted::StillHeld(reasons)) => {
            let message = format!(
                "`{function}` stays held: {}; a tool the scan flags is released only by access.allow_flagged and a reload",
                reasons.join("; ")
            );
            ApiError::new(StatusCode::CONFLICT, "invalid_request_error", "tool_still_held", message).into_response()
        }
    }
}
