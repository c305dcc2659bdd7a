//! `GET /v1/models` and `GET /v1/models/{id}`, read alike by OpenAI and
//! Anthropic clients (the two share the path): each model carries both
//! shapes' fields (OpenAI's `object`, `created`, `owned_by`; Anthropic's
//! `type`, `display_name`, `created_at`), the list both `object: list` and
//! Anthropic's paging fields (`has_more`, `first_id`, `last_id`).

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::server::error::{ApiError, path_segment};
use crate::server::state::App;

/// `GET /v1/models`: the names of `openai.models`; without a map, the
/// upstream model server's own list (so model pickers fill).
pub(crate) async fn models(State(app): State<Arc<App>>) -> Response {
    match listed(&app).await {
        Ok(data) => axum::Json(list(data)).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /v1/models/{id}`: one model of the list, or 404 `model_not_found`.
pub(crate) async fn model(State(app): State<Arc<App>>, id: Result<Path<String>, PathRejection>) -> Response {
    let id = match path_segment(id, "model id", Some("id")) {
        Ok(id) => id,
        Err(refused) => return *refused,
    };
    let data = match listed(&app).await {
        Ok(data) => data,
        Err(e) => return e.into_response(),
    };
    match data.into_iter().find(|m| m["id"].as_str() == Some(id.as_str())) {
        Some(found) => axum::Json(found).into_response(),
        None => {
            let message = format!("The model `{id}` does not exist (GET /v1/models lists the models served)");
            ApiError::not_found("model_not_found", message, Some("model")).into_response()
        }
    }
}

/// The models served, each in both shapes.
async fn listed(app: &App) -> Result<Vec<Value>, ApiError> {
    let names = &app.config.openai.models;
    let data: Vec<Value> = match app.chat.model() {
        Some(llm) if names.is_empty() => {
            let list = llm.models().await.map_err(ApiError::from)?;
            list["data"].as_array().cloned().unwrap_or_default()
        }
        _ => {
            names.keys().map(|n| json!({"id": n, "object": "model", "created": 0, "owned_by": "toolrouter"})).collect()
        }
    };
    Ok(data.into_iter().filter(|m| m["id"].is_string()).map(both_shapes).collect())
}

/// A model as OpenAI lists it, with Anthropic's fields added.
fn both_shapes(mut model: Value) -> Value {
    let created = model["created"].as_i64().unwrap_or(0);
    let at = chrono::DateTime::from_timestamp(created, 0).unwrap_or_default();
    let fields = [
        ("object", json!("model")),
        ("created", json!(created)),
        ("owned_by", json!("toolrouter")),
        ("type", json!("model")),
        ("display_name", model["id"].clone()),
        ("created_at", json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))),
    ];
    if let Some(model) = model.as_object_mut() {
        for (key, value) in fields {
            model.entry(key).or_insert(value);
        }
    }
    model
}

/// The list, in OpenAI's and Anthropic's shapes at once.
fn list(data: Vec<Value>) -> Value {
    let id = |m: Option<&Value>| m.map(|m| m["id"].clone()).unwrap_or(Value::Null);
    json!({"object": "list", "first_id": id(data.first()), "last_id": id(data.last()), "has_more": false, "data": data})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_reads_as_openai_and_anthropic_list_it() {
        let model = both_shapes(json!({"id": "gpt-x", "object": "model", "created": 1700000000, "owned_by": "openai"}));
        assert_eq!(
            model,
            json!({"id": "gpt-x", "object": "model", "created": 1700000000, "owned_by": "openai", "type": "model",
                "display_name": "gpt-x", "created_at": "2023-11-14T22:13:20Z"})
        );
        let listed = list(vec![model, both_shapes(json!({"id": "m2"}))]);
        assert_eq!(
            (&listed["first_id"], &listed["last_id"], &listed["has_more"]),
            (&json!("gpt-x"), &json!("m2"), &json!(false))
        );
        assert_eq!(listed["data"][1]["created_at"], "1970-01-01T00:00:00Z");
        assert_eq!(list(vec![])["first_id"], Value::Null);
    }
}
