//! Argument validation (docs/architecture.md §6, validation).
//!
//! A call's arguments are checked against its API's JSON Schema with the
//! `jsonschema` crate. Before that, safe coercions are applied and reported
//! (`"5"` → 5 for a number, `"true"` → true, a lone value → a one-element
//! array, `"a,b"` → `["a", "b"]` for a list sent comma-joined; see
//! [`crate::catalog::schema::coerce`]), `null` optional arguments are
//! dropped, and arguments spelled by the upstream name instead of the
//! schema key (`id` for `is_id`) are renamed. In strict mode an unknown
//! parameter is an error; otherwise it is passed through with a warning.
//!
//! Every problem carries the JSON pointer of the offending value and a
//! message written for an LLM to act on: what was expected, what came,
//! and what the parameter is for. [`check_url`] checks a URL a call
//! carries against the catalog's host and path.

mod url;
pub(crate) mod validators;

use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::catalog::names::standardize_member;
use crate::catalog::schema::{Coerced, coerce, short, type_name};
use crate::catalog::{Api, Param};
use crate::config;

pub(crate) use url::check_url;

/// How much of a parameter's description a message quotes.
const DESCRIPTION_IN_MESSAGE: usize = 120;

/// Validation options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Unknown parameters are errors (else warnings, passed through).
    pub strict: bool,
    /// Apply the safe coercions (else only exact types pass).
    pub coerce: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { strict: config::DEFAULT_ARGS_STRICT, coerce: config::DEFAULT_ARGS_COERCE }
    }
}

impl From<&config::ArgsConfig> for Options {
    fn from(c: &config::ArgsConfig) -> Self {
        Options { strict: c.strict, coerce: c.coerce }
    }
}

/// A change made to the arguments before validation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Coercion {
    /// A value converted to the declared type.
    Converted { pointer: String, from: Value, to: Value },
    /// A `null` optional argument removed.
    DroppedNull { pointer: String },
    /// An argument given under another spelling of a parameter's name.
    Renamed { from: String, to: String },
    /// The arguments arrived as a JSON string and were parsed.
    ParsedString,
}

impl fmt::Display for Coercion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Coercion::Converted { pointer, from, to } => write!(f, "{pointer}: {} -> {}", short(from), short(to)),
            Coercion::DroppedNull { pointer } => write!(f, "{pointer}: null optional argument dropped"),
            Coercion::Renamed { from, to } => write!(f, "/{from} renamed to /{to}"),
            Coercion::ParsedString => write!(f, "arguments given as a JSON string were parsed"),
        }
    }
}

/// What kind of problem an argument has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// The arguments are not a JSON object.
    NotAnObject,
    /// A required parameter is absent (or null).
    Missing,
    /// A value of the wrong JSON type that no safe coercion fixes.
    Type,
    /// A value outside the declared `enum`.
    Enum,
    /// A string that does not match its `format` or `pattern`.
    Format,
    /// A parameter the API does not declare (strict mode; a warning otherwise).
    Unknown,
    /// Any other schema constraint (range, length, item count…).
    Constraint,
    /// A URL that is not the API's (host, scheme, path).
    Url,
    /// The API's schema cannot be used: the arguments were not checked
    /// against it (a warning).
    Unchecked,
}

/// One problem with one argument.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    /// JSON pointer to the offending value (`/limit`, `/symbols/0`; `` for the whole).
    pub pointer: String,
    pub kind: ProblemKind,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pointer = if self.pointer.is_empty() { "(arguments)" } else { &self.pointer };
        write!(f, "{pointer}: {}", self.message)
    }
}

/// Arguments that passed validation, as they should be sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Valid {
    pub arguments: Map<String, Value>,
    pub coercions: Vec<Coercion>,
    /// Unknown parameters passed through (non-strict mode), or a schema
    /// that could not be used (the arguments passed unchecked).
    pub warnings: Vec<Problem>,
}

/// Arguments that failed validation: every problem, for the caller or an LLM to fix.
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
pub struct Invalid {
    pub function: String,
    pub problems: Vec<Problem>,
    pub coercions: Vec<Coercion>,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Invalid arguments for `{}`:", self.function)?;
        for p in &self.problems {
            writeln!(f, "- {p}")?;
        }
        write!(f, "Fix these and call again.")
    }
}

/// Validates `args` for `api`. `Ok` holds the arguments to send (coerced);
/// `Err` lists every problem found.
pub fn validate(api: &Api, args: &Value, options: Options) -> Result<Valid, Invalid> {
    let mut coercions = Vec::new();
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    let invalid = |problems, coercions| Invalid { function: api.function_name.clone(), problems, coercions };

    let input = match args {
        Value::Object(map) => map.clone(),
        Value::Null => Map::new(),
        Value::String(text) if options.coerce && serde_json::from_str::<Value>(text).is_ok_and(|v| v.is_object()) => {
            coercions.push(Coercion::ParsedString);
            match serde_json::from_str(text) {
                Ok(Value::Object(map)) => map,
                _ => unreachable!("checked above"),
            }
        }
        other => {
            let message =
                format!("arguments must be a JSON object of parameters, got {} {}", type_name(other), short(other));
            let problem = Problem { pointer: String::new(), kind: ProblemKind::NotAnObject, message };
            return Err(invalid(vec![problem], coercions));
        }
    };

    let mut arguments = Map::new();
    for (key, value) in &input {
        let param = match api.param(key) {
            Some(p) => p,
            None => match alias(api, key, &input) {
                Some(p) => {
                    coercions.push(Coercion::Renamed { from: key.clone(), to: p.key.clone() });
                    p
                }
                None => {
                    let problem = unknown(api, key);
                    if options.strict {
                        problems.push(problem);
                    } else {
                        warnings.push(problem);
                        arguments.insert(key.clone(), value.clone());
                    }
                    continue;
                }
            },
        };
        let pointer = format!("/{}", escape_pointer(&param.key));
        if value.is_null() && !param.required && !null_allowed(param) {
            coercions.push(Coercion::DroppedNull { pointer });
            continue;
        }
        let split = if options.coerce { split_list(param, value) } else { None };
        let value = split.as_ref().unwrap_or(value);
        let value = match coerce(value, &param.schema) {
            Coerced::Changed(to) if options.coerce => {
                coercions.push(Coercion::Converted { pointer, from: input[key].clone(), to: to.clone() });
                to
            }
            _ if split.is_some() => {
                coercions.push(Coercion::Converted { pointer, from: input[key].clone(), to: value.clone() });
                value.clone()
            }
            _ => value.clone(),
        };
        arguments.insert(param.key.clone(), value);
    }

    let instance = Value::Object(arguments);
    let compiled = match &api.unchecked {
        Some(reason) => {
            Err(format!("this API's input schema cannot be used ({reason}), so its arguments are not checked"))
        }
        None => compile(api),
    };
    match compiled {
        Ok(validator) => problems.extend(validator.iter_errors(&instance).map(|e| problem(api, &e))),
        // One API's unusable schema does not make it uncallable: its
        // arguments go as given, and the caller is told.
        Err(message) => {
            tracing::debug!(api = %api.function_name, reason = %message, "an API's arguments pass unchecked");
            warnings.push(Problem { pointer: String::new(), kind: ProblemKind::Unchecked, message });
        }
    }
    let Value::Object(arguments) = instance else { unreachable!("built as an object") };
    if problems.is_empty() { Ok(Valid { arguments, coercions, warnings }) } else { Err(invalid(problems, coercions)) }
}

/// The API's input schema compiled (draft 2020-12, formats checked), once
/// per distinct schema while it stays in [`validators`]' cache.
fn compile(api: &Api) -> Result<std::sync::Arc<jsonschema::Validator>, String> {
    validators::cached(validators::Dialect::Catalog, &api.input_schema(), |schema| {
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(schema)
            .map_err(|e| format!("this API's input schema cannot be used ({e}), so its arguments are not checked"))
    })
}

/// The parameter an unknown key most likely means: its upstream name
/// (`id` for `is_id`), its standardized form, or a case variant. Only when
/// that parameter was not also given under its own key.
fn alias<'a>(api: &'a Api, key: &str, input: &Map<String, Value>) -> Option<&'a Param> {
    let std = standardize_member(key);
    let lower = key.to_lowercase();
    let mut matches = api
        .params
        .iter()
        .filter(|p| p.name == key || p.key == std || p.key.to_lowercase() == lower)
        .filter(|p| !input.contains_key(&p.key));
    let first = matches.next()?;
    matches.next().is_none().then_some(first)
}

/// `"a,b"` for a list sent comma-joined (`explode: false`) is `["a", "b"]`:
/// both put the same text on the wire.
fn split_list(param: &Param, value: &Value) -> Option<Value> {
    let text = value.as_str()?;
    let is_list = crate::catalog::schema::declared_types(&param.schema) == [crate::catalog::schema::JsonType::Array];
    if param.explode || !is_list || !text.contains(',') || text.trim_start().starts_with('[') {
        return None;
    }
    Some(Value::Array(text.split(',').map(|s| Value::String(s.trim().to_string())).collect()))
}

fn null_allowed(param: &Param) -> bool {
    crate::catalog::schema::declared_types(&param.schema).is_empty()
        || param.schema.get("type").and_then(Value::as_array).is_some_and(|t| t.iter().any(|t| t == "null"))
}

fn unknown(api: &Api, key: &str) -> Problem {
    let known: Vec<&str> = api.params.iter().map(|p| p.key.as_str()).collect();
    let close = known
        .iter()
        .map(|k| (strsim::jaro_winkler(&key.to_lowercase(), &k.to_lowercase()), *k))
        .filter(|(s, _)| *s >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let mut message = format!("unknown parameter `{key}`");
    if let Some((_, k)) = close {
        message.push_str(&format!("; did you mean `{k}`?"));
    }
    if known.is_empty() {
        message.push_str("; this API takes no parameters");
    } else {
        message.push_str(&format!("; parameters are: {}", known.join(", ")));
    }
    Problem { pointer: format!("/{}", escape_pointer(key)), kind: ProblemKind::Unknown, message }
}

/// Turns a `jsonschema` error into a [`Problem`] that names the parameter.
fn problem(api: &Api, error: &jsonschema::ValidationError) -> Problem {
    use jsonschema::error::ValidationErrorKind as K;
    let pointer = error.instance_path().as_str().to_string();
    let instance = error.instance();
    let got = format!("got {} {}", type_name(instance), short(instance));
    let (pointer, kind, message) = match error.kind() {
        K::Required { property } => {
            let key = property.as_str().unwrap_or_default();
            let about = api.param(key).map(describe).unwrap_or_else(|| format!("`{key}`"));
            (
                format!("{pointer}/{}", escape_pointer(key)),
                ProblemKind::Missing,
                format!("missing required parameter {about}"),
            )
        }
        K::Type { kind } => {
            let expected = match kind {
                jsonschema::error::TypeKind::Single(t) => t.to_string(),
                jsonschema::error::TypeKind::Multiple(ts) => {
                    ts.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" or ")
                }
            };
            let about = param_at(api, &pointer).map(|p| format!(" (parameter {})", describe(p))).unwrap_or_default();
            (pointer, ProblemKind::Type, format!("expected {expected}, {got}{about}"))
        }
        K::Enum { options } => {
            let allowed = options
                .as_array()
                .map(|o| o.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", "))
                .unwrap_or_default();
            (pointer, ProblemKind::Enum, format!("must be one of {allowed}; {got}"))
        }
        K::Format { format } => {
            let hint = match format.as_str() {
                "date" => " (YYYY-MM-DD)",
                "date-time" => " (RFC 3339, e.g. 2024-05-01T12:00:00Z)",
                "time" => " (HH:MM:SS with offset)",
                _ => "",
            };
            (pointer, ProblemKind::Format, format!("must be a valid {format}{hint}; {got}"))
        }
        K::Pattern { pattern } => (pointer, ProblemKind::Format, format!("must match the pattern {pattern}; {got}")),
        _ => (pointer, ProblemKind::Constraint, error.to_string()),
    };
    Problem { pointer, kind, message }
}

/// The parameter a top-level pointer (`/key`, `/key/0`) refers to.
fn param_at<'a>(api: &'a Api, pointer: &str) -> Option<&'a Param> {
    let first = pointer.strip_prefix('/')?.split('/').next()?;
    api.param(&first.replace("~1", "/").replace("~0", "~"))
}

/// "`key` (type): description", for messages.
fn describe(param: &Param) -> String {
    let ty = crate::catalog::schema::declared_types(&param.schema).first().map_or("any", |t| t.as_str());
    let mut text = format!("`{}` ({ty})", param.key);
    if !param.description.is_empty() {
        let d: String = param.description.chars().take(DESCRIPTION_IN_MESSAGE).collect();
        text.push_str(": ");
        text.push_str(d.trim());
    }
    text
}

/// Escapes a key for use in a JSON pointer (RFC 6901).
fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests;
