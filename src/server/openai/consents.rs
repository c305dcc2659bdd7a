//! `GET` and `POST /v1/consents/{id}`: the user's answer to a destructive
//! call an execute run stopped at ([`crate::consent`]), for the key that
//! made the run.

use std::sync::Arc;

use axum::extract::State;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::consent::ConsentError;
use crate::server::error::{ApiError, path_segment};
use crate::server::middleware::{ClientId, body_and_engine};
use crate::server::state::App;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Decision {
    allow: bool,
}

fn refused(e: ConsentError) -> Response {
    match e {
        ConsentError::NotFound(_) => ApiError::not_found("consent_not_found", e.to_string(), None),
        ConsentError::Decided(..) => {
            ApiError::new(StatusCode::CONFLICT, "invalid_request_error", "consent_decided", e.to_string())
        }
    }
    .into_response()
}

/// `GET /v1/consents/{id}`: the pending call and where it stands.
pub(crate) async fn consent(
    State(app): State<Arc<App>>,
    client: Option<axum::Extension<ClientId>>,
    id: Result<axum::extract::Path<String>, PathRejection>,
) -> Response {
    let id = match path_segment(id, "consent id", Some("id")) {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    let engine = match app.engine() {
        Ok(engine) => engine,
        Err(e) => return crate::server::middleware::not_ready(e),
    };
    let client = client.map(|c| c.0.0);
    match engine.consents.get(&id, client.as_deref()) {
        Ok(consent) => axum::Json(consent).into_response(),
        Err(e) => refused(e),
    }
}

/// `POST /v1/consents/{id} {"allow": bool}`: the user's answer.
pub(crate) async fn decide(
    State(app): State<Arc<App>>,
    client: Option<axum::Extension<ClientId>>,
    id: Result<axum::extract::Path<String>, PathRejection>,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Response {
    let id = match path_segment(id, "consent id", Some("id")) {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    let (body, engine) = match body_and_engine(&app, body) {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    let decision: Decision = match serde_json::from_slice(&body) {
        Ok(d) => d,
        Err(e) => {
            return ApiError::invalid(
                format!("the request body must be {{\"allow\": true or false}}: {e}"),
                Some("allow"),
            )
            .into_response();
        }
    };
    let client = client.map(|c| c.0.0);
    match engine.consents.decide(&id, client.as_deref(), decision.allow) {
        Ok(consent) => axum::Json(consent).into_response(),
        Err(e) => refused(e),
    }
}
