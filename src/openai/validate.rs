//! Checking a chat-completions request before anything is sent upstream.

use std::collections::HashSet;

use axum::http::StatusCode;
use serde_json::{Map, Value};

use super::ApiError;
use crate::args;
use crate::catalog::Api;
use crate::config::OpenAiConfig;

/// A tool offered to the model: one of the client's, or a catalog API (plan mode).
pub struct ClientTool {
    pub name: String,
    /// Name, description and parameter names, for relevance.
    pub text: String,
    pub definition: Value,
    pub check: Check,
}

/// How a tool's call arguments are checked.
pub enum Check {
    /// A client's tool: against its JSON Schema.
    Schema(jsonschema::Validator),
    /// A catalog API: as `/v1/tools/call` checks them (strict mode,
    /// coercions), so that what plan mode accepts the call accepts.
    Api(Box<Api>, args::Options),
}

impl ClientTool {
    /// What is wrong with `arguments` (an object), in words for the model.
    pub fn issues(&self, arguments: &Value) -> Vec<String> {
        match &self.check {
            Check::Schema(validator) => validator
                .iter_errors(arguments)
                .map(|e| {
                    let at = e.instance_path().to_string();
                    if at.is_empty() { e.to_string() } else { format!("{at}: {e}") }
                })
                .collect(),
            Check::Api(api, options) => match args::validate(api, arguments, *options) {
                Ok(_) => Vec::new(),
                Err(invalid) => invalid.problems.iter().map(ToString::to_string).collect(),
            },
        }
    }
}

/// A checked request.
pub struct ChatRequest {
    pub body: Map<String, Value>,
    /// The name the client asked for.
    pub model: String,
    /// The name sent upstream.
    pub upstream_model: String,
    pub stream: bool,
    pub include_usage: bool,
    pub tools: Vec<ClientTool>,
    /// `toolrouter.mode` in the body, else the `x-toolrouter-mode` header,
    /// else route for a request with `tools`, else `openai.default_mode`.
    pub mode: Mode,
    /// Execute mode: split into sub-tasks (`toolrouter.decompose`, else `openai.decompose`).
    pub decompose: bool,
}

/// How a request is served.
pub use crate::config::ChatMode as Mode;

/// A catalog API as a tool (plan mode). In strict mode its schema says
/// `additionalProperties: false`, as validation will.
pub fn catalog_tool(mut definition: Value, api: &Api, options: args::Options) -> ClientTool {
    if options.strict {
        definition["function"]["parameters"]["additionalProperties"] = Value::Bool(false);
    }
    let name = api.function_name.clone();
    let description = definition["function"]["description"].as_str().unwrap_or("");
    let text = tool_text(&name, description, &definition["function"]["parameters"]);
    ClientTool { text, name, definition, check: Check::Api(Box::new(api.clone()), options) }
}

const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

/// Parses and checks a request body.
pub fn parse(bytes: &[u8], config: &OpenAiConfig, header_mode: Option<&str>) -> Result<ChatRequest, ApiError> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::invalid(format!("the request body is not valid JSON: {e}"), None))?;
    let Value::Object(mut body) = value else {
        return Err(ApiError::invalid("the request body must be a JSON object", None));
    };
    // toolrouter's own options never go upstream.
    let options = match body.remove("toolrouter") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(ApiError::invalid("`toolrouter` must be an object of options", Some("toolrouter"))),
    };
    let named = match options.get("mode") {
        None | Some(Value::Null) => header_mode,
        Some(Value::String(m)) => Some(m.as_str()),
        Some(_) => return Err(ApiError::invalid("`toolrouter.mode` must be a string", Some("toolrouter.mode"))),
    };
    let named = match named.map(|m| (m, Mode::parse(m))) {
        None => None,
        Some((_, Some(mode))) => Some(mode),
        Some((other, None)) => {
            return Err(ApiError::invalid(
                format!("unknown mode `{other}`: route, plan or execute"),
                Some("toolrouter.mode"),
            ));
        }
    };
    let decompose = match options.get("decompose") {
        None | Some(Value::Null) => config.decompose,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(ApiError::invalid("`toolrouter.decompose` must be a boolean", Some("toolrouter.decompose")));
        }
    };
    let model = match body.get("model") {
        Some(Value::String(m)) if !m.trim().is_empty() => m.clone(),
        Some(_) => return Err(ApiError::invalid("`model` must be a non-empty string", Some("model"))),
        None => return Err(ApiError::invalid("you must provide a model parameter", Some("model"))),
    };
    let upstream_model = if config.models.is_empty() {
        model.clone()
    } else {
        config.models.get(&model).cloned().ok_or_else(|| ApiError {
            status: StatusCode::NOT_FOUND,
            message: format!("the model `{model}` does not exist; see GET /v1/models"),
            kind: "invalid_request_error",
            param: Some("model".into()),
            code: Some("model_not_found"),
        })?
    };
    let messages = match body.get("messages") {
        Some(Value::Array(m)) if !m.is_empty() => m,
        Some(Value::Array(_)) => return Err(ApiError::invalid("`messages` must not be empty", Some("messages"))),
        _ => return Err(ApiError::invalid("`messages` must be an array of messages", Some("messages"))),
    };
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str);
        if !role.is_some_and(|r| ROLES.contains(&r)) {
            return Err(ApiError::invalid(
                format!("messages[{i}] needs a role: one of {}", ROLES.join(", ")),
                Some(&format!("messages[{i}].role")),
            ));
        }
    }
    let stream = match body.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::invalid("`stream` must be a boolean", Some("stream"))),
    };
    let include_usage =
        body.get("stream_options").and_then(|o| o.get("include_usage")).and_then(Value::as_bool) == Some(true);
    let tools = match body.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools.iter().enumerate().map(|(i, t)| tool(i, t)).collect::<Result<_, _>>()?,
        Some(_) => return Err(ApiError::invalid("`tools` must be an array", Some("tools"))),
    };
    let mut names = HashSet::new();
    for (i, t) in tools.iter().enumerate() {
        if !names.insert(t.name.as_str()) {
            return Err(ApiError::invalid(
                format!("two tools are named `{}`", t.name),
                Some(&format!("tools[{i}].function.name")),
            ));
        }
    }
    let mode = match named {
        Some(mode) => mode,
        None if !tools.is_empty() => Mode::Route,
        None => config.default_mode,
    };
    if mode != Mode::Route && !tools.is_empty() {
        return Err(ApiError::invalid(
            "plan and execute modes use catalog APIs: send no `tools` (or use route mode)",
            Some("tools"),
        ));
    }
    Ok(ChatRequest { body, model, upstream_model, stream, include_usage, tools, mode, decompose })
}

/// What a tool is about, for ranking: its name (split into words by the
/// tokenizer), its description, and each parameter's name and description.
fn tool_text(name: &str, description: &str, schema: &Value) -> String {
    let mut text = format!("{name} {description}");
    for (key, property) in schema.get("properties").and_then(Value::as_object).into_iter().flatten() {
        text.push(' ');
        text.push_str(key);
        if let Some(d) = property.get("description").and_then(Value::as_str) {
            text.push(' ');
            text.push_str(d);
        }
    }
    text
}

/// A client's tool definition (`{"type": "function", "function": {...}}`) checked and read.
pub fn client_tool(definition: &Value) -> Result<ClientTool, ApiError> {
    tool(0, definition)
}

fn tool(i: usize, t: &Value) -> Result<ClientTool, ApiError> {
    let param = |p: &str| format!("tools[{i}].{p}");
    if t.get("type").and_then(Value::as_str) != Some("function") {
        return Err(ApiError::invalid("only tools of type `function` are supported", Some(&param("type"))));
    }
    let f = t
        .get("function")
        .and_then(Value::as_object)
        .ok_or_else(|| ApiError::invalid("a tool needs `function`", Some(&param("function"))))?;
    let name = f.get("name").and_then(Value::as_str).unwrap_or("");
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        return Err(ApiError::invalid(
            format!("tool name {name:?} must be 1-64 letters, digits, `_` or `-`"),
            Some(&param("function.name")),
        ));
    }
    let schema =
        f.get("parameters").cloned().unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
    if !schema.is_object() {
        return Err(ApiError::invalid(
            "`parameters` must be a JSON Schema object",
            Some(&param("function.parameters")),
        ));
    }
    let validator = jsonschema::validator_for(&schema).map_err(|e| {
        ApiError::invalid(
            format!("the parameters of `{name}` are not a valid JSON Schema: {e}"),
            Some(&param("function.parameters")),
        )
    })?;
    let text = tool_text(name, f.get("description").and_then(Value::as_str).unwrap_or(""), &schema);
    Ok(ClientTool { name: name.to_string(), text, definition: t.clone(), check: Check::Schema(validator) })
}
