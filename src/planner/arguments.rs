//! Filling a planned step's arguments without a model (docs/architecture.md §5,
//! deterministic decider): explicit values of the request first, then the
//! parameter's documented default.
//!
//! Values are taken from the request by kind: quoted strings, ISO dates,
//! e-mail addresses, URLs and numbers. A parameter gets a value of its kind
//! when exactly one such value is left (dates for `format: date`, numbers
//! for numeric types, a URL or e-mail for parameters named so, a quoted
//! string for other strings); values are used once. Required parameters
//! still empty are reported as missing: the caller (or a model) must supply
//! them.
//!
//! [`complete`] is Reverse Chain's completion (docs/architecture.md §6): a required
//! parameter still empty takes a value from an earlier call's output — a
//! field of the same name (ignoring case and punctuation) whose value fits
//! the parameter's type, the latest output first.

use serde_json::{Map, Value, json};

use super::defaults::Fallback;
pub use super::explicit::{Explicit, explicit_values};
use crate::catalog::Api;
use crate::catalog::schema::{JsonType, declared_types};

/// A step's arguments as filled from the request.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Filled {
    pub(crate) arguments: Map<String, Value>,
    /// Required parameters left empty.
    pub(crate) missing: Vec<String>,
    /// Required parameters given their documented default: the request
    /// says nothing of them ([`super::defaults`]).
    pub(crate) defaulted: Vec<String>,
}

/// The arguments of a step: the request's values by kind, then, for
/// required parameters, a default the request does not contradict.
pub(crate) fn fill(api: &Api, explicit: &Explicit) -> Filled {
    let mut left = explicit.clone();
    let (mut args, mut missing, mut defaulted) = (Map::new(), Vec::new(), Vec::new());
    // Required parameters first: they need values most.
    let mut params: Vec<_> = api.params.iter().collect();
    params.sort_by_key(|p| !p.required);
    for p in params {
        let types = declared_types(&p.schema);
        let name = p.key.to_lowercase();
        let take_one = |v: &mut Vec<String>| if v.len() == 1 { v.pop() } else { None };
        let value = if p.schema.get("format").and_then(Value::as_str) == Some("date") {
            take_one(&mut left.dates).map(Value::String)
        } else if types.iter().any(|t| matches!(t, JsonType::Number | JsonType::Integer)) {
            (left.numbers.len() == 1).then(|| json!(left.numbers.remove(0)))
        } else if name.contains("email") {
            take_one(&mut left.emails).map(Value::String)
        } else if name.contains("url") || name.contains("link") {
            take_one(&mut left.urls).map(Value::String)
        } else if types.contains(&JsonType::String) || types.is_empty() {
            take_one(&mut left.quoted).map(Value::String)
        } else {
            None
        };
        let value = match value {
            Some(v) => Some(v),
            None if p.required => match super::defaults::fallback(p, explicit) {
                Fallback::Request(v) => Some(v),
                Fallback::Default(v) => {
                    defaulted.push(p.key.clone());
                    Some(v)
                }
                Fallback::Missing => None,
            },
            None => None,
        };
        match value {
            Some(v) => {
                args.insert(p.key.clone(), v);
            }
            None if p.required => missing.push(p.key.clone()),
            None => {}
        }
    }
    Filled { arguments: args, missing, defaulted }
}

/// Fields of an output searched for a value, at most.
const MAX_FIELDS_SEARCHED: usize = 10_000;

/// Fills required parameters still absent from `args` with values from
/// `outputs` (earlier calls' responses, oldest first). Returns the names filled.
pub(crate) fn complete(api: &Api, args: &mut Map<String, Value>, outputs: &[&Value]) -> Vec<String> {
    let mut filled = Vec::new();
    for p in api.params.iter().filter(|p| p.required) {
        if args.contains_key(&p.key) {
            continue;
        }
        // A name of no ASCII letters or digits normalizes to nothing: it matches nothing.
        let names: Vec<String> =
            [normalize(&p.key), normalize(&p.name)].into_iter().filter(|n| !n.is_empty()).collect();
        let types = declared_types(&p.schema);
        if names.is_empty() {
            continue;
        }
        if let Some(v) = outputs.iter().rev().find_map(|o| find_field(o, &names, &types)) {
            args.insert(p.key.clone(), v);
            filled.push(p.key.clone());
        }
    }
    filled
}

/// Lower-case letters and digits only: `cityId`, `city_id` and `City-ID` agree.
fn normalize(name: &str) -> String {
    name.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect()
}

/// The first field (breadth first) named like `names` whose value fits `types`.
fn find_field(output: &Value, names: &[String], types: &[JsonType]) -> Option<Value> {
    let mut queue = std::collections::VecDeque::from([output]);
    let mut seen = 0;
    while let Some(v) = queue.pop_front() {
        seen += 1;
        if seen > MAX_FIELDS_SEARCHED {
            return None;
        }
        match v {
            Value::Object(map) => {
                for (k, field) in map {
                    if names.contains(&normalize(k))
                        && let Some(fit) = fit(field, types)
                    {
                        return Some(fit);
                    }
                }
                queue.extend(map.values());
            }
            Value::Array(items) => queue.extend(items),
            _ => {}
        }
    }
    None
}

/// `value` as one of `types` (any scalar when none is declared), if it fits.
fn fit(value: &Value, types: &[JsonType]) -> Option<Value> {
    let scalar = !matches!(value, Value::Object(_) | Value::Array(_) | Value::Null);
    if types.is_empty() {
        return scalar.then(|| value.clone());
    }
    types.iter().find_map(|t| match (t, value) {
        (JsonType::String, Value::String(_)) => Some(value.clone()),
        (JsonType::String, Value::Number(n)) => Some(Value::String(n.to_string())),
        (JsonType::Integer, Value::Number(n)) if n.is_i64() || n.is_u64() => Some(value.clone()),
        (JsonType::Integer, Value::String(s)) => s.trim().parse::<i64>().ok().map(Value::from),
        (JsonType::Number, Value::Number(_)) => Some(value.clone()),
        (JsonType::Number, Value::String(s)) => {
            s.trim().parse::<f64>().ok().and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
        }
        (JsonType::Boolean, Value::Bool(_)) => Some(value.clone()),
        (JsonType::Array, Value::Array(_)) | (JsonType::Object, Value::Object(_)) => Some(value.clone()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, Sources};

    #[test]
    fn explicit_values_by_kind() {
        let e = explicit_values("Holidays in 'DE' for 2025, from 2025-05-01; mail me@x.org or see https://x.org/a.");
        assert_eq!(e.quoted, ["DE"]);
        assert_eq!(e.dates, ["2025-05-01"]);
        assert_eq!(e.emails, ["me@x.org"]);
        assert_eq!(e.urls, ["https://x.org/a"]);
        assert_eq!(e.numbers, [2025.0]);
    }

    #[test]
    fn fills_from_the_request_then_defaults() {
        let c = Catalog::load(&Sources::default()).unwrap();
        let api = c.api(c.resolve("public_holidays_for_nager_date").first().unwrap());
        let filled = fill(api, &explicit_values("Public holidays in 'DE' in 2025"));
        assert_eq!(Value::Object(filled.arguments), json!({"year": 2025.0, "countryCode": "DE"}));
        assert!(filled.missing.is_empty() && filled.defaulted.is_empty());
        let filled = fill(api, &explicit_values("public holidays please"));
        assert!(filled.arguments.is_empty());
        assert_eq!(filled.missing, ["year", "countryCode"]);
    }

    #[test]
    fn completes_required_values_from_earlier_outputs() {
        let c = Catalog::load(&Sources::default()).unwrap();
        let api = c.api(c.resolve("public_holidays_for_nager_date").first().unwrap());
        let older = json!({"countryCode": "FR", "year": 2020});
        let newer = json!({"results": [{"country_code": "DE", "name": "Germany", "Year": "2025"}]});
        let mut args = Map::new();
        let filled = complete(api, &mut args, &[&older, &newer]);
        assert_eq!(filled, ["year", "countryCode"]);
        // The latest output wins; "2025" fits an integer parameter as 2025.
        assert_eq!(Value::Object(args), json!({"year": 2025, "countryCode": "DE"}));
        // Values already given stay; nothing fits → nothing filled.
        let mut args = Map::from_iter([("year".to_string(), json!(1999))]);
        assert!(complete(api, &mut args, &[&json!({"country": {"nested": true}})]).is_empty());
        assert_eq!(Value::Object(args), json!({"year": 1999}));
    }
}
