//! JSON Schema for API parameters, and the safe value coercions.
//!
//! ToolBench parameter types are free text (`STRING`, `NUMBER`, `ENUM`,
//! `DATE (YYYY-MM-DD)`, `GEOPOINT (latitude, longitude)`, lower-case
//! variants, missing). [`toolbench_param`] maps them to JSON Schema
//! (docs/architecture.md §2) and normalizes the documented default to that schema: an empty
//! default means "none", a default the declared type cannot hold (`"integer"`
//! for a `NUMBER`, a sentence for a `BOOLEAN`) is a junk sample and is
//! dropped, with the reason reported.
//!
//! [`coerce`] holds the safe coercions that argument validation applies
//! (docs/architecture.md §6): numeric and boolean strings to numbers and booleans, numbers
//! and booleans to strings, JSON text to arrays and objects, a single value
//! to a one-element array. Defaults go through the same function, so a
//! default the catalog keeps is one a caller could have sent.

use serde_json::{Map, Value, json};

/// Pattern for ToolBench's `TIME (24-hour HH:MM)` parameters.
pub(crate) const TIME_PATTERN: &str = "^([01]?[0-9]|2[0-3]):[0-5][0-9]$";

/// The JSON types a parameter schema can declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonType {
    String,
    Number,
    Integer,
    Boolean,
    Array,
    Object,
}

impl JsonType {
    /// The name JSON Schema uses for this type.
    pub fn as_str(self) -> &'static str {
        match self {
            JsonType::String => "string",
            JsonType::Number => "number",
            JsonType::Integer => "integer",
            JsonType::Boolean => "boolean",
            JsonType::Array => "array",
            JsonType::Object => "object",
        }
    }

    /// "a string", "an array"…, for messages.
    pub(crate) fn with_article(self) -> &'static str {
        match self {
            JsonType::String => "a string",
            JsonType::Number => "a number",
            JsonType::Integer => "an integer",
            JsonType::Boolean => "a boolean",
            JsonType::Array => "an array",
            JsonType::Object => "an object",
        }
    }

    fn parse(name: &str) -> Option<JsonType> {
        Some(match name {
            "string" => JsonType::String,
            "number" => JsonType::Number,
            "integer" => JsonType::Integer,
            "boolean" => JsonType::Boolean,
            "array" => JsonType::Array,
            "object" => JsonType::Object,
            _ => return None,
        })
    }

    /// Whether `value` already has this type.
    pub(crate) fn matches(self, value: &Value) -> bool {
        match self {
            JsonType::String => value.is_string(),
            JsonType::Number => value.is_number(),
            JsonType::Integer => value.is_i64() || value.is_u64() || is_integral_float(value),
            JsonType::Boolean => value.is_boolean(),
            JsonType::Array => value.is_array(),
            JsonType::Object => value.is_object(),
        }
    }
}

/// The type(s) a schema declares with `type` (a name or a list of names).
pub fn declared_types(schema: &Value) -> Vec<JsonType> {
    match schema.get("type") {
        Some(Value::String(name)) => JsonType::parse(name).into_iter().collect(),
        Some(Value::Array(names)) => names.iter().filter_map(|n| n.as_str().and_then(JsonType::parse)).collect(),
        _ => Vec::new(),
    }
}

/// The name of a value's JSON type, for messages.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A ToolBench parameter mapped to JSON Schema.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MappedParam {
    /// The schema of the value, `default` included when one was kept.
    pub(crate) schema: Value,
    /// Why the documented default was dropped, if it was.
    pub(crate) dropped_default: Option<String>,
}

/// Maps a ToolBench parameter (`type` text, `default`) to JSON Schema.
pub(crate) fn toolbench_param(type_text: Option<&str>, default: &Value) -> MappedParam {
    let text = type_text.unwrap_or("").trim().to_ascii_uppercase();
    let mut schema = Map::new();
    let ty = match text.as_str() {
        "NUMBER" | "FLOAT" | "DOUBLE" => JsonType::Number,
        "INTEGER" | "INT" => JsonType::Integer,
        "BOOLEAN" | "BOOL" => JsonType::Boolean,
        "ARRAY" | "LIST" => JsonType::Array,
        // ToolBench parameters travel in the query string, where an object
        // can only be JSON text, and 2 in 3 `OBJECT` parameters document a
        // plain string sample (`Europe/London`): accept either.
        "OBJECT" => {
            schema.insert("type".into(), json!(["object", "string"]));
            JsonType::Object
        }
        t if t.starts_with("DATE") && !t.starts_with("DATETIME") => {
            schema.insert("format".into(), json!("date"));
            JsonType::String
        }
        t if t.starts_with("TIME") => {
            schema.insert("pattern".into(), json!(TIME_PATTERN));
            JsonType::String
        }
        // STRING, ENUM (ToolBench lists no enum values), GEOPOINT, BINARY,
        // missing and anything unknown.
        _ => JsonType::String,
    };
    schema.entry("type").or_insert_with(|| json!(ty.as_str()));
    if ty == JsonType::Array {
        let items = array_item_type(default).unwrap_or(JsonType::String);
        schema.insert("items".into(), json!({ "type": items.as_str() }));
    }
    let mut schema = Value::Object(schema);
    let dropped_default = match normalize_default(default, &schema) {
        Ok(Some(value)) => {
            schema["default"] = value;
            None
        }
        Ok(None) => None,
        Err(reason) => Some(reason),
    };
    MappedParam { schema, dropped_default }
}

/// The item type of an array default given as a JSON array (or its text).
fn array_item_type(default: &Value) -> Option<JsonType> {
    let parsed;
    let items = match default {
        Value::Array(items) => items,
        Value::String(text) if text.trim_start().starts_with('[') => {
            parsed = serde_json::from_str::<Value>(text).ok()?;
            parsed.as_array()?
        }
        _ => return None,
    };
    let first = items.first()?;
    let ty = match first {
        Value::String(_) => JsonType::String,
        Value::Number(_) => JsonType::Number,
        Value::Bool(_) => JsonType::Boolean,
        _ => return None,
    };
    items.iter().all(|v| ty.matches(v)).then_some(ty)
}

/// Brings a documented default to the schema's type. `Ok(None)`: there is
/// no default (absent, null, empty string or empty list); `Err`: the default
/// cannot be a value of this type, and says why.
pub(crate) fn normalize_default(default: &Value, schema: &Value) -> Result<Option<Value>, String> {
    match default {
        Value::Null => return Ok(None),
        Value::String(s) if s.trim().is_empty() => return Ok(None),
        Value::Array(a) if a.is_empty() && !declared_types(schema).contains(&JsonType::Array) => return Ok(None),
        _ => {}
    }
    let value = match coerce(default, schema) {
        Coerced::Unchanged => default.clone(),
        Coerced::Changed(v) => v,
        Coerced::Impossible => {
            let types: Vec<&str> = declared_types(schema).iter().map(|t| t.with_article()).collect();
            return Err(format!("default {} is not {}", short(default), types.join(" or ")));
        }
    };
    match check_format(&value, schema) {
        Some(problem) => Err(format!("default {} {problem}", short(default))),
        None => Ok(Some(value)),
    }
}

/// The outcome of a coercion attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Coerced {
    /// The value already has a declared type (or the schema declares none).
    Unchanged,
    /// The value was converted to this one.
    Changed(Value),
    /// No safe conversion exists.
    Impossible,
}

/// Applies the safe coercions toward the type(s) `schema` declares.
pub fn coerce(value: &Value, schema: &Value) -> Coerced {
    let types = declared_types(schema);
    if types.is_empty() {
        return Coerced::Unchanged;
    }
    if let Some(ty) = types.iter().find(|t| t.matches(value)) {
        return match (ty, value) {
            // A matching array may still hold items that need coercion.
            (JsonType::Array, Value::Array(items)) => coerce_items(items, schema),
            (JsonType::Integer, v) if !(v.is_i64() || v.is_u64()) => {
                Coerced::Changed(json!(v.as_f64().unwrap_or_default() as i64))
            }
            _ => Coerced::Unchanged,
        };
    }
    for ty in types {
        if let Some(v) = convert(value, ty, schema) {
            return Coerced::Changed(v);
        }
    }
    Coerced::Impossible
}

fn convert(value: &Value, ty: JsonType, schema: &Value) -> Option<Value> {
    match (ty, value) {
        (JsonType::Number, Value::String(s)) => parse_number(s),
        (JsonType::Integer, Value::String(s)) => parse_number(s)
            .filter(|n| JsonType::Integer.matches(n))
            .map(|n| if n.is_f64() { json!(n.as_f64().unwrap_or_default() as i64) } else { n }),
        (JsonType::Boolean, Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "1" => Some(json!(true)),
            "false" | "0" => Some(json!(false)),
            _ => None,
        },
        (JsonType::Boolean, Value::Number(n)) => match n.as_f64() {
            Some(1.0) => Some(json!(true)),
            Some(0.0) => Some(json!(false)),
            _ => None,
        },
        (JsonType::String, Value::Number(n)) => Some(json!(n.to_string())),
        (JsonType::String, Value::Bool(b)) => Some(json!(b.to_string())),
        (JsonType::Object, Value::String(s)) => serde_json::from_str::<Value>(s).ok().filter(Value::is_object),
        (JsonType::Array, Value::String(s)) if s.trim_start().starts_with('[') => {
            let parsed = serde_json::from_str::<Value>(s).ok().filter(Value::is_array)?;
            match coerce(&parsed, schema) {
                Coerced::Unchanged => Some(parsed),
                Coerced::Changed(v) => Some(v),
                Coerced::Impossible => None,
            }
        }
        (JsonType::Array, v) if !v.is_object() && !v.is_array() => {
            let one = Value::Array(vec![v.clone()]);
            match coerce(&one, schema) {
                Coerced::Unchanged => Some(one),
                Coerced::Changed(v) => Some(v),
                Coerced::Impossible => None,
            }
        }
        _ => None,
    }
}

fn coerce_items(items: &[Value], schema: &Value) -> Coerced {
    let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) else {
        return Coerced::Unchanged;
    };
    let mut changed = false;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match coerce(item, item_schema) {
            Coerced::Unchanged => out.push(item.clone()),
            Coerced::Changed(v) => {
                changed = true;
                out.push(v);
            }
            Coerced::Impossible => return Coerced::Impossible,
        }
    }
    if changed { Coerced::Changed(Value::Array(out)) } else { Coerced::Unchanged }
}

fn parse_number(text: &str) -> Option<Value> {
    let t = text.trim();
    if let Ok(i) = t.parse::<i64>() {
        return Some(json!(i));
    }
    // Only plain decimal notation: "inf", "NaN" and "0x10" are not numbers here.
    if !t.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E')) {
        return None;
    }
    let f = t.parse::<f64>().ok().filter(|f| f.is_finite())?;
    serde_json::Number::from_f64(f).map(Value::Number)
}

fn is_integral_float(value: &Value) -> bool {
    value.as_f64().is_some_and(|f| f.fract() == 0.0 && f.abs() < 9.0e15) && value.is_f64()
}

/// The `format`/`pattern` constraints the catalog itself writes, checked
/// without compiling a validator (the whole-catalog test cross-checks this
/// against the JSON Schema validator).
fn check_format(value: &Value, schema: &Value) -> Option<&'static str> {
    let s = value.as_str()?;
    if schema.get("format").and_then(Value::as_str) == Some("date") && !is_date(s) {
        return Some("is not a date (YYYY-MM-DD)");
    }
    if schema.get("pattern").and_then(Value::as_str) == Some(TIME_PATTERN) && !is_time(s) {
        return Some("is not a time (HH:MM)");
    }
    None
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| s[r].parse::<u32>().ok();
    let (Some(y), Some(m), Some(d)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    if !b.iter().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit()) {
        return false;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

fn is_time(s: &str) -> bool {
    let Some((h, m)) = s.split_once(':') else { return false };
    let ok = |p: &str, max: u32, len: std::ops::RangeInclusive<usize>| {
        len.contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u32>().is_ok_and(|v| v <= max)
    };
    ok(h, 23, 1..=2) && ok(m, 59, 2..=2)
}

/// A value shortened for messages.
pub(crate) fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 60 { text } else { format!("{}…", text.chars().take(57).collect::<String>()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toolbench_types_map_to_json_schema() {
        let p = toolbench_param(Some("NUMBER"), &json!("10"));
        assert_eq!(p.schema, json!({"type": "number", "default": 10}));
        let p = toolbench_param(Some("DATE (YYYY-MM-DD)"), &json!("2022-10-08"));
        assert_eq!(p.schema, json!({"type": "string", "format": "date", "default": "2022-10-08"}));
        let p = toolbench_param(None, &json!(""));
        assert_eq!(p.schema, json!({"type": "string"}));
        let p = toolbench_param(Some("ARRAY"), &json!("[\"gb\", \"ire\"]"));
        assert_eq!(p.schema, json!({"type": "array", "items": {"type": "string"}, "default": ["gb", "ire"]}));
        let p = toolbench_param(Some("boolean"), &json!("false"));
        assert_eq!(p.schema["default"], json!(false));
        let p = toolbench_param(Some("OBJECT"), &json!("Europe/London"));
        assert_eq!(p.schema, json!({"type": ["object", "string"], "default": "Europe/London"}));
        let p = toolbench_param(Some("ARRAY"), &json!({"a": 1}));
        assert_eq!(p.dropped_default.as_deref(), Some("default {\"a\":1} is not an array"));
    }

    #[test]
    fn junk_defaults_are_dropped_with_a_reason() {
        let p = toolbench_param(Some("NUMBER"), &json!("integer"));
        assert_eq!(p.schema, json!({"type": "number"}));
        assert_eq!(p.dropped_default.as_deref(), Some("default \"integer\" is not a number"));
        let p = toolbench_param(Some("DATE (YYYY-MM-DD)"), &json!("10/10/2015"));
        assert!(p.dropped_default.unwrap().contains("not a date"));
        let p = toolbench_param(Some("TIME (24-hour HH:MM)"), &json!("25:00"));
        assert!(p.dropped_default.is_some());
    }

    #[test]
    fn safe_coercions() {
        let num = json!({"type": "number"});
        assert_eq!(coerce(&json!("5"), &num), Coerced::Changed(json!(5)));
        assert_eq!(coerce(&json!(" 2.5 "), &num), Coerced::Changed(json!(2.5)));
        assert_eq!(coerce(&json!("NaN"), &num), Coerced::Impossible);
        assert_eq!(coerce(&json!("abc"), &num), Coerced::Impossible);
        let int = json!({"type": "integer"});
        assert_eq!(coerce(&json!("2.5"), &int), Coerced::Impossible);
        assert_eq!(coerce(&json!(3.0), &int), Coerced::Changed(json!(3)));
        let b = json!({"type": "boolean"});
        assert_eq!(coerce(&json!("TRUE"), &b), Coerced::Changed(json!(true)));
        assert_eq!(coerce(&json!("maybe"), &b), Coerced::Impossible);
        let s = json!({"type": "string"});
        assert_eq!(coerce(&json!(42), &s), Coerced::Changed(json!("42")));
        assert_eq!(coerce(&json!({"a": 1}), &s), Coerced::Impossible);
        let arr = json!({"type": "array", "items": {"type": "number"}});
        assert_eq!(coerce(&json!("7"), &arr), Coerced::Changed(json!([7])));
        assert_eq!(coerce(&json!("[1, \"2\"]"), &arr), Coerced::Changed(json!([1, 2])));
        assert_eq!(coerce(&json!({"a": 1}), &arr), Coerced::Impossible);
        let obj = json!({"type": "object"});
        assert_eq!(coerce(&json!("{\"a\":1}"), &obj), Coerced::Changed(json!({"a": 1})));
        assert_eq!(coerce(&json!(5), &obj), Coerced::Impossible);
    }

    #[test]
    fn dates_and_times() {
        assert!(is_date("2024-02-29"));
        assert!(!is_date("2023-02-29"));
        assert!(!is_date("2023-1-05"));
        assert!(is_time("9:05"));
        assert!(!is_time("24:00"));
    }
}
