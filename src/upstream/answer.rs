//! Whether a 2xx answer carries what was asked for.
//!
//! An API can answer 200 with nothing (`null`, `""`, `{}`, `[]`) or with
//! an error instead of data (`{"error": "…"}`, `{"errors": […]}`, a lone
//! `{"message": "Endpoint … does not exist"}`). Such an answer is the
//! API's failure as much as a 5xx: the tool graph learns it, and the
//! planner tries another API for the sub-task ([`super::Response::outcome`]).
//! A call that changes something (any method but `GET`) may answer
//! nothing and be fine; only a lookup's empty answer is a failure.

use serde_json::Value;

/// Words of a lone `message` that say the call failed.
const FAILED: &[&str] = &[
    "not found",
    "does not exist",
    "doesn't exist",
    "not subscribed",
    "invalid",
    "disabled",
    "missing",
    "error",
    "unauthorized",
    "forbidden",
    "exceeded",
    "denied",
    "not allowed",
];

/// Why `body` (answered to a `method` request) is not data, if it is not.
pub(crate) fn failure(method: &str, body: &Value) -> Option<&'static str> {
    let empty = match body {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    if empty {
        return method.eq_ignore_ascii_case("GET").then_some("an empty answer");
    }
    let object = body.as_object()?;
    let set = |v: &Value| !matches!(v, Value::Null | Value::Bool(false)) && v != "" && v != &Value::Array(vec![]);
    if object.get("error").is_some_and(set) || object.get("errors").is_some_and(set) {
        return Some("an error instead of data");
    }
    let only_a_message = object.keys().all(|k| matches!(k.as_str(), "message" | "status" | "code" | "statusCode"));
    let message = object.get("message").and_then(Value::as_str).map(str::to_lowercase)?;
    let succeeded = object.get("status").and_then(Value::as_str).is_some_and(|s| s.eq_ignore_ascii_case("success"));
    (only_a_message && !succeeded && FAILED.iter().any(|w| message.contains(w)))
        .then_some("an error message instead of data")
}

#[cfg(test)]
mod tests {
    use super::failure;
    use serde_json::json;

    #[test]
    fn empty_and_error_answers_are_failures_and_data_is_not() {
        for body in [json!(null), json!(""), json!({}), json!([])] {
            assert_eq!(failure("GET", &body), Some("an empty answer"), "{body}");
            assert_eq!(failure("POST", &body), None, "a change may answer nothing: {body}");
        }
        assert!(failure("GET", &json!({"error": "quota"})).is_some());
        assert!(failure("GET", &json!({"errors": [{"code": 1}]})).is_some());
        assert!(failure("GET", &json!({"message": "Endpoint '/v1/x' does not exist"})).is_some());
        assert!(failure("GET", &json!({"message": "You are not subscribed to this API."})).is_some());
        for data in [
            json!({"message": "Input data is safe.", "status": "success"}),
            json!({"error": "", "result": [1]}),
            json!({"error": null, "data": {"a": 1}}),
            json!({"message": "Hello", "count": 3}),
            json!("Sunny, 21 °C"),
            json!([{"id": 1}]),
            json!(0),
        ] {
            assert_eq!(failure("GET", &data), None, "{data}");
        }
    }
}
