//! Whether a parameter's documented default may stand in for the request.
//!
//! Catalogs document placeholders as defaults (`"country": "US"`, `"year":
//! 2022`). A required parameter the request gives no value of its kind
//! for takes its default only where the request says nothing of it: a
//! request that says "Germany in 2024" gets `DE` and 2024, not `US` and
//! 2022. What the request says instead of the default is found by kind:
//!
//! * a number of the default's shape (an integer of as many digits: a
//!   year for a year, a page size for a page size);
//! * a date, for a date;
//! * one of the parameter's `enum` values, named in the request;
//! * a country, for a parameter about countries (named in the request, in
//!   English, by name or common alias, or by its upper-case ISO code;
//!   [`celes`]), written as the default is (alpha-2, alpha-3 or name).
//!
//! Exactly one such value: the request's value is used. Several: none is
//! guessed, the parameter is left missing. None: the default stands, and
//! the step says so ([`super::Step::defaulted`]).

use celes::Country;
use serde_json::Value;

use super::explicit::{Explicit, named_country};
use crate::catalog::Param;

/// What a required parameter without a value from the request gets.
#[derive(Debug, Clone, PartialEq)]
pub enum Fallback {
    /// The request's own value, where the default would contradict it.
    Request(Value),
    /// The documented default: the request says nothing of this parameter.
    Default(Value),
    /// The request names several candidates (or there is no default).
    Missing,
}

/// What `p` (required, given no value of its kind) falls back to.
pub fn fallback(p: &Param, request: &Explicit) -> Fallback {
    let Some(default) = p.schema.get("default").filter(|d| !d.is_null()) else { return Fallback::Missing };
    let said = said_instead(p, default, request);
    match said.as_slice() {
        [] => Fallback::Default(default.clone()),
        [one] => Fallback::Request(one.clone()),
        _ => Fallback::Missing,
    }
}

/// The values the request gives where `default` would go (the default's
/// own value left out: a request that agrees with it says nothing new).
fn said_instead(p: &Param, default: &Value, request: &Explicit) -> Vec<Value> {
    let as_number = default.as_f64().or_else(|| default.as_str().and_then(|s| s.trim().parse::<f64>().ok()));
    if let Some(d) = as_number {
        let same_shape = |n: &&f64| n.fract() == 0.0 && d.fract() == 0.0 && digits(**n) == digits(d) && **n != d;
        let found: Vec<f64> = request.numbers.iter().filter(same_shape).copied().collect();
        return found.into_iter().map(|n| written_like(n, default)).collect();
    }
    let text = default.as_str().unwrap_or_default();
    if is_date(text) || p.schema.get("format").and_then(Value::as_str) == Some("date") {
        return request.dates.iter().filter(|d| *d != text).map(|d| Value::String(d.clone())).collect();
    }
    if let Some(values) = p.schema.get("enum").and_then(Value::as_array) {
        let named = values.iter().filter(|v| *v != default).filter(|v| v.as_str().is_some_and(|s| request.names(s)));
        return named.cloned().collect();
    }
    if about_countries(p)
        && let Some(written) = country_of(text)
    {
        let others = request.countries.iter().filter(|c| c.alpha2 != written.alpha2);
        return others.map(|c| Value::String(spelled(c, text))).collect();
    }
    Vec::new()
}

fn digits(n: f64) -> usize {
    format!("{}", n.abs().trunc()).len()
}

/// `n` as the default is written: a number, or a string of it.
fn written_like(n: f64, default: &Value) -> Value {
    match default {
        Value::String(_) => Value::String(format!("{n}")),
        _ => serde_json::json!(n),
    }
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10 && b[4] == b'-' && b[7] == b'-' && s.chars().filter(char::is_ascii_digit).count() == 8
}

fn about_countries(p: &Param) -> bool {
    [&p.key, &p.name, &p.description].iter().any(|t| t.to_ascii_lowercase().contains("country"))
}

/// The country a default names: an ISO code (any case) or a name.
fn country_of(text: &str) -> Option<Country> {
    match text.len() {
        2 => Country::from_alpha2(text.to_ascii_uppercase()).ok(),
        3 => Country::from_alpha3(text.to_ascii_uppercase()).ok(),
        _ => named_country(&text.split_whitespace().collect::<Vec<_>>()),
    }
}

/// `c` written as `like` is: alpha-2, alpha-3 (in its case) or the name.
fn spelled(c: &Country, like: &str) -> String {
    let code = match like.len() {
        2 => c.alpha2,
        3 => c.alpha3,
        _ => return c.long_name.to_string(),
    };
    if like.chars().all(|ch| ch.is_ascii_lowercase()) { code.to_ascii_lowercase() } else { code.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::arguments::explicit_values;
    use serde_json::json;

    fn param(key: &str, schema: Value) -> Param {
        Param {
            name: key.into(),
            key: key.into(),
            location: crate::catalog::ParamLocation::Query,
            required: true,
            description: String::new(),
            schema,
            explode: false,
        }
    }

    #[test]
    fn a_default_the_request_contradicts_gives_way_to_the_requests_value() {
        let asked = explicit_values("Public holidays in Germany in 2024, top 10 please");
        let year = param("year", json!({"type": "integer", "default": 2022}));
        assert_eq!(fallback(&year, &asked), Fallback::Request(json!(2024.0)));
        let country = param("country_code", json!({"type": "string", "default": "US"}));
        assert_eq!(fallback(&country, &asked), Fallback::Request(json!("DE")));
        let name = param("country", json!({"type": "string", "default": "United States"}));
        assert_eq!(fallback(&name, &asked), Fallback::Request(json!("Germany")));
        let lower = param("country", json!({"type": "string", "default": "usa"}));
        assert_eq!(fallback(&lower, &asked), Fallback::Request(json!("deu")));
        // A page size of another shape than 2024 and 10: the default stands.
        let size = param("limit", json!({"type": "integer", "default": 100}));
        assert_eq!(fallback(&size, &asked), Fallback::Default(json!(100)));
        let unit = param("units", json!({"type": "string", "enum": ["metric", "imperial"], "default": "metric"}));
        assert_eq!(fallback(&unit, &explicit_values("in imperial units")), Fallback::Request(json!("imperial")));
        assert_eq!(fallback(&unit, &asked), Fallback::Default(json!("metric")));
    }

    #[test]
    fn a_request_that_agrees_or_says_nothing_keeps_the_default_and_several_candidates_keep_none() {
        let country = param("countryCode", json!({"type": "string", "default": "US"}));
        for agreeing in ["Holidays in the United States", "US holidays", "holidays please"] {
            assert_eq!(fallback(&country, &explicit_values(agreeing)), Fallback::Default(json!("US")), "{agreeing}");
        }
        let both = explicit_values("Compare France and Spain");
        assert_eq!(fallback(&country, &both), Fallback::Missing);
        let year = param("year", json!({"type": "string", "default": "2022"}));
        assert_eq!(fallback(&year, &explicit_values("from 2019 to 2021")), Fallback::Missing);
        assert_eq!(fallback(&year, &explicit_values("in 2023")), Fallback::Request(json!("2023")));
        // "us" the pronoun is no country; a date for a date.
        assert_eq!(fallback(&country, &explicit_values("tell us the holidays")), Fallback::Default(json!("US")));
        let day = param("date", json!({"type": "string", "default": "2022-01-01"}));
        assert_eq!(fallback(&day, &explicit_values("on 2024-03-05")), Fallback::Request(json!("2024-03-05")));
        let named: Vec<&str> =
            super::super::explicit::countries_in("Trips from Spain to South Korea, the USA and Japan.")
                .iter()
                .map(|c| c.alpha2)
                .collect();
        assert_eq!(named, ["ES", "KR", "US", "JP"]);
    }
}
