//! Checking a chat-completions request before anything is sent upstream.
//!
//! A client sends the same tool list turn after turn, often hundreds of
//! tools: the `tools` array is kept as raw JSON text while the body is
//! parsed, and a list seen before (same text) is taken from [`ToolLists`]
//! instead of being parsed and checked again. Each tool's parameter schema
//! is checked against the JSON Schema meta-schema when its list is first
//! seen; its validator is compiled only when the model calls the tool,
//! and kept by a hash of the schema.

use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use axum::http::StatusCode;
use lru::LruCache;
use serde_json::value::RawValue;
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
    Schema(Schema),
    /// A catalog API: as `/v1/tools/call` checks them (strict mode,
    /// coercions), so that what plan mode accepts the call accepts.
    Api(Box<Api>, args::Options),
}

impl ClientTool {
    /// What is wrong with `arguments` (an object), in words for the model.
    pub fn issues(&self, arguments: &Value) -> Vec<String> {
        match &self.check {
            Check::Schema(schema) => schema
                .validator()
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

/// A client tool's parameter schema (meta-schema checked), its validator
/// compiled on first use.
pub struct Schema {
    value: Value,
    validator: OnceLock<Arc<jsonschema::Validator>>,
}

/// Compiled validators kept, by a hash of their schema's JSON text.
const VALIDATORS: usize = 4_096;

impl Schema {
    /// `value` checked against the JSON Schema meta-schema.
    pub fn new(value: Value) -> Result<Schema, String> {
        jsonschema::meta::validate(&value).map_err(|e| e.to_string())?;
        Ok(Schema { value, validator: OnceLock::new() })
    }

    /// The compiled validator: from this schema, from another with the
    /// same text, or compiled now.
    pub fn validator(&self) -> &jsonschema::Validator {
        // A process-wide cache: clients send the same tools in many lists.
        static CACHE: LazyLock<Mutex<LruCache<u64, Arc<jsonschema::Validator>>>> =
            LazyLock::new(|| Mutex::new(LruCache::new(NonZeroUsize::new(VALIDATORS).expect("not zero"))));
        self.validator.get_or_init(|| {
            let mut h = std::hash::DefaultHasher::new();
            self.value.to_string().hash(&mut h);
            let key = h.finish();
            if let Some(v) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
                return v.clone();
            }
            // The meta-schema check passed. What compiling can still refuse
            // (an unresolvable `$ref`, a regex the engine cannot compile)
            // leaves the arguments unchecked, as they would be without
            // toolrouter: the client's function sees them as the model wrote them.
            let compiled = jsonschema::validator_for(&self.value).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "a client tool's parameter schema does not compile; its calls pass unchecked");
                jsonschema::validator_for(&Value::Bool(true)).expect("`true` is a valid schema")
            });
            let v = Arc::new(compiled);
            CACHE.lock().unwrap_or_else(|e| e.into_inner()).put(key, v.clone());
            v
        })
    }
}

/// Tool lists parsed before, by a hash of their JSON text.
pub struct ToolLists(Mutex<LruCache<u64, Arc<[ClientTool]>>>);

/// Tool lists kept.
const TOOL_LISTS: usize = 256;

impl Default for ToolLists {
    fn default() -> ToolLists {
        ToolLists(Mutex::new(LruCache::new(NonZeroUsize::new(TOOL_LISTS).expect("not zero"))))
    }
}

impl ToolLists {
    /// The tools of a `tools` array (raw JSON), parsed and checked, or as
    /// parsed before.
    fn get_or_parse(&self, raw: &RawValue, max: usize) -> Result<Arc<[ClientTool]>, ApiError> {
        let mut h = std::hash::DefaultHasher::new();
        raw.get().hash(&mut h);
        let key = h.finish();
        if let Some(tools) = self.0.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(tools.clone());
        }
        let items: Vec<&RawValue> = serde_json::from_str(raw.get())
            .map_err(|_| ApiError::invalid("`tools` must be an array", Some("tools")))?;
        if items.len() > max {
            return Err(ApiError::invalid(
                format!(
                    "this request carries {} tools; at most {max} are accepted (openai.max_request_tools); \
                     send the tools the conversation could use",
                    items.len()
                ),
                Some("tools"),
            ));
        }
        let mut tools = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let value: Value = serde_json::from_str(item.get()).map_err(|e| {
                ApiError::invalid(format!("tools[{i}] is not valid JSON: {e}"), Some(&format!("tools[{i}]")))
            })?;
            tools.push(tool(i, &value)?);
        }
        let mut names = HashSet::new();
        for (i, t) in tools.iter().enumerate() {
            if !names.insert(t.name.as_str()) {
                return Err(ApiError::invalid(
                    format!("two tools are named `{}`", t.name),
                    Some(&format!("tools[{i}].function.name")),
                ));
            }
        }
        let tools: Arc<[ClientTool]> = tools.into();
        self.0.lock().unwrap_or_else(|e| e.into_inner()).put(key, tools.clone());
        Ok(tools)
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
    pub tools: Arc<[ClientTool]>,
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

/// A request body: every field but `tools` as JSON values, `tools` as raw text.
struct Fields {
    body: Map<String, Value>,
    tools: Option<Box<RawValue>>,
}

/// Parses a request body into its [`Fields`].
fn fields(bytes: &[u8]) -> Result<Fields, ApiError> {
    let raw: BTreeMap<String, Box<RawValue>> =
        serde_json::from_slice(bytes).map_err(|e| match serde_json::from_slice::<Value>(bytes) {
            Ok(_) => ApiError::invalid("the request body must be a JSON object", None),
            Err(_) => ApiError::invalid(format!("the request body is not valid JSON: {e}"), None),
        })?;
    let mut body = Map::new();
    let mut tools = None;
    for (key, value) in raw {
        if key == "tools" {
            tools = Some(value);
            continue;
        }
        let value: Value = serde_json::from_str(value.get())
            .map_err(|e| ApiError::invalid(format!("the request body is not valid JSON: {e}"), None))?;
        body.insert(key, value);
    }
    Ok(Fields { body, tools })
}

/// Parses and checks a request body; `lists`: the tool lists seen before.
pub fn parse(
    bytes: &[u8],
    config: &OpenAiConfig,
    header_mode: Option<&str>,
    lists: &ToolLists,
) -> Result<ChatRequest, ApiError> {
    let Fields { mut body, tools: raw_tools } = fields(bytes)?;
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
    let tools: Arc<[ClientTool]> = match raw_tools {
        None => Arc::new([]),
        Some(raw) if raw.get() == "null" => Arc::new([]),
        Some(raw) => lists.get_or_parse(&raw, config.max_request_tools)?,
    };
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
    let text = tool_text(name, f.get("description").and_then(Value::as_str).unwrap_or(""), &schema);
    let schema = Schema::new(schema).map_err(|e| {
        ApiError::invalid(
            format!("the parameters of `{name}` are not a valid JSON Schema: {e}"),
            Some(&param("function.parameters")),
        )
    })?;
    Ok(ClientTool { name: name.to_string(), text, definition: t.clone(), check: Check::Schema(schema) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(tools: &[Value]) -> Vec<u8> {
        serde_json::to_vec(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools}))
            .unwrap()
    }

    fn tool_def(name: &str, parameters: Value) -> Value {
        json!({"type": "function", "function": {"name": name, "description": "d", "parameters": parameters}})
    }

    #[test]
    fn a_tool_list_is_parsed_once_and_capped() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let tools: Vec<Value> = (0..3).map(|i| tool_def(&format!("t{i}"), schema.clone())).collect();
        let (config, lists) = (OpenAiConfig::default(), ToolLists::default());
        let first = parse(&body(&tools), &config, None, &lists).unwrap();
        let again = parse(&body(&tools), &config, None, &lists).unwrap();
        assert!(Arc::ptr_eq(&first.tools, &again.tools), "a list seen before is not parsed again");
        assert!(!first.body.contains_key("tools"), "the narrowed list is put back by route mode");

        // Tools with the same schema share one compiled validator; calls are checked.
        assert!(std::ptr::eq(
            match &first.tools[0].check {
                Check::Schema(s) => s.validator(),
                Check::Api(..) => unreachable!(),
            },
            match &first.tools[2].check {
                Check::Schema(s) => s.validator(),
                Check::Api(..) => unreachable!(),
            }
        ));
        assert!(first.tools[1].issues(&json!({"n": 1})).is_empty());
        assert!(first.tools[1].issues(&json!({"n": "x"}))[0].contains("/n"));

        let capped = OpenAiConfig { max_request_tools: 2, ..OpenAiConfig::default() };
        let e = parse(&body(&tools), &capped, None, &ToolLists::default()).err().unwrap();
        assert_eq!((e.status, e.param.as_deref()), (StatusCode::BAD_REQUEST, Some("tools")));
        assert!(e.message.contains("3 tools") && e.message.contains("openai.max_request_tools"), "{}", e.message);
    }

    #[test]
    fn bad_tool_lists_are_refused_clearly() {
        let (config, lists) = (OpenAiConfig::default(), ToolLists::default());
        let refused = |tools: &[Value]| parse(&body(tools), &config, None, &lists).err().expect("refused");
        let e = refused(&[tool_def("a", json!({"type": 12}))]);
        assert_eq!(e.param.as_deref(), Some("tools[0].function.parameters"));
        assert!(e.message.contains("not a valid JSON Schema"), "{}", e.message);
        let twice = [tool_def("a", json!({})), tool_def("a", json!({}))];
        assert!(refused(&twice).message.contains("two tools are named `a`"));
        let e = parse(br#"{"model": "m", "messages": [{"role": "user"}], "tools": {"a": 1}}"#, &config, None, &lists)
            .err()
            .unwrap();
        assert_eq!(e.param.as_deref(), Some("tools"));
        let e = parse(b"[1, 2]", &config, None, &lists).err().unwrap();
        assert!(e.message.contains("must be a JSON object"), "{}", e.message);
        let e = parse(b"{\"model\": ", &config, None, &lists).err().unwrap();
        assert!(e.message.contains("not valid JSON"), "{}", e.message);
        // Empty and huge descriptions, non-English text: accepted as they are.
        let odd = [
            json!({"type": "function", "function": {"name": "leer", "description": ""}}),
            json!({"type": "function", "function": {"name": "groß", "description": "天気予報 ".repeat(20_000)}}),
        ];
        assert!(
            refused(&odd[1..]).message.contains("must be 1-64 letters"),
            "non-ASCII names are refused by OpenAI too"
        );
        let ok = [odd[0].clone(), tool_def("wetter", json!({"description": "天気予報 ".repeat(20_000)}))];
        assert_eq!(parse(&body(&ok), &config, None, &lists).unwrap().tools.len(), 2);
    }
}
