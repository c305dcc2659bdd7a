//! `GET /v1/tools/held` and `POST /v1/tools/held/{function}/accept`: the
//! tools held before they reach a model ([`crate::quarantine`]) and an
//! operator's release of one whose definition changed (instead of
//! `access.accept_changes` and a reload), naming the definition accepted
//! by the digest the list shows. Operators only.

use std::sync::Arc;

use axum::extract::State;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::engine::access::NotAccepted;
use crate::server::error::{ApiError, path_segment};
use crate::server::middleware::{Operator, body_and_engine, not_ready, operator_only};
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
                .map(|h| serde_json::json!({"function": h.function, "reasons": h.reasons, "definition": h.definition}))
                .collect();
            axum::Json(serde_json::json!({"object": "list", "data": held})).into_response()
        }
        Err(e) => not_ready(e),
    }
}

/// The body of an acceptance.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Acceptance {
    /// The digest of the definition accepted (`definition` in the list).
    definition: String,
}

/// `POST /v1/tools/held/{function}/accept {"definition": DIGEST}`: the
/// changed definition of `function` accepted and remembered as the one seen.
pub(crate) async fn accept(
    State(app): State<Arc<App>>,
    operator: Option<axum::Extension<Operator>>,
    function: Result<axum::extract::Path<String>, PathRejection>,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Response {
    if let Some(refused) = operator_only(operator.as_deref()) {
        return refused;
    }
    let function = match path_segment(function, "function name", None) {
        Ok(function) => function,
        Err(refused) => return *refused,
    };
    let (body, engine) = match body_and_engine(&app, body) {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    let acceptance: Acceptance = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(e) => {
            let message = format!(
                "the request body must be {{\"definition\": DIGEST}}, the digest `GET /v1/tools/held` shows: {e}"
            );
            return ApiError::invalid(message, Some("definition")).into_response();
        }
    };
    let accepted = {
        let function = function.clone();
        tokio::task::spawn_blocking(move || engine.accept_change(&function, &acceptance.definition)).await
    };
    let conflict = |code: &'static str, message: String| {
        ApiError::new(StatusCode::CONFLICT, "invalid_request_error", code, message).into_response()
    };
    match accepted {
        Ok(Ok(())) => axum::Json(serde_json::json!({"function": function, "held": false})).into_response(),
        Ok(Err(NotAccepted::NotHeld)) => ApiError::not_found(
            "tool_not_held",
            format!("no tool named `{function}` is held (GET /v1/tools/held lists them)"),
            None,
        )
        .into_response(),
        Ok(Err(NotAccepted::StillHeld(reasons))) => conflict(
            "tool_still_held",
            format!(
                "`{function}` stays held: {}; a tool the scan flags is released only by access.allow_flagged and a reload",
                reasons.join("; ")
            ),
        ),
        Ok(Err(NotAccepted::ChangedAgain(now))) => conflict(
            "definition_changed",
            format!(
                "`{function}` changed again: its definition is now `{now}`, not the one named; \
                 read GET /v1/tools/held again"
            ),
        ),
        Err(e) => ApiError::server(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("the review failed: {e}"))
            .into_response(),
    }
}
