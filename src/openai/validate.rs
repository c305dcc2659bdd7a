//! Checking a chat-completions request before anything is sent upstream.
//!
//! A client sends the same tool list turn after turn, often hundreds of
//! tools: the `tools` array is kept as raw JSON text while the body is
//! parsed, and a list seen before (same text) is taken from [`ToolLists`]
//! instead of being parsed and checked again. Each tool's parameter schema
//! is checked against the JSON Schema meta-schema when its list is first
//! seen; its validator is compiled only when the model calls the tool,
//! and kept by a hash of the schema.
//!
//! With `args.strict` (the default) a call's arguments may hold only the
//! parameters its tool declares, as for catalog APIs: client schemas
//! rarely say `additionalProperties: false`, and a model that invents an
//! argument would otherwise reach the client's function, which fails on
//! it. Every object schema that lists its `properties` and says nothing
//! of others is read as closed ([`closed`]); unknown parameters become
//! problems to repair like any other.

use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::{Duration, Instant};

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
            Check::Schema(schema) => schema.validator().iter_errors(arguments).map(|e| schema.describe(&e)).collect(),
            Check::Api(api, options) => match args::validate(api, arguments, *options) {
                Ok(_) => Vec::new(),
                Err(invalid) => invalid.problems.iter().map(ToString::to_string).collect(),
            },
        }
    }
}

/// A client tool's parameter schema (meta-schema checked), its validator
/// compiled on first use; in strict mode the schema checked is [`closed`].
pub struct Schema {
    value: Value,
    validator: OnceLock<Arc<jsonschema::Validator>>,
}

/// Enum values listed in full in a message for the model (more are counted).
const ENUM_LISTED: usize = 40;

/// Compiled validators kept, by a hash of their schema's JSON text.
const VALIDATORS: usize = 4_096;

impl Schema {
    /// `value` checked against the JSON Schema meta-schema; `strict`:
    /// calls may hold only the parameters it declares.
    pub fn new(value: Value, strict: bool) -> Result<Schema, String> {
        jsonschema::meta::validate(&value).map_err(|e| e.to_string())?;
        let value = if strict { closed(value) } else { value };
        Ok(Schema { value, validator: OnceLock::new() })
    }

    /// A validation error in words for the model: where, what, and what
    /// would be right (the parameters a tool takes, every enum value).
    fn describe(&self, e: &jsonschema::ValidationError) -> String {
        use jsonschema::error::ValidationErrorKind as Kind;
        let at = e.instance_path().to_string();
        let what = match e.kind() {
            Kind::AdditionalProperties { unexpected } => {
                let names: Vec<String> = unexpected.iter().map(|n| format!("`{n}`")).collect();
                // The object schema the keyword belongs to lists what is known.
                let keyword = e.schema_path().to_string();
                let object = keyword.strip_suffix("/additionalProperties").and_then(|p| self.value.pointer(p));
                let known: Vec<String> = object
                    .and_then(|o| o.get("properties")?.as_object())
                    .map(|p| p.keys().map(|k| format!("`{k}`")).collect())
                    .unwrap_or_default();
                let takes = if known.is_empty() { "none".to_string() } else { known.join(", ") };
                format!("unknown parameter {}: remove it (the parameters here are: {takes})", names.join(", "))
            }
            Kind::Enum { options } => {
                let all = options.as_array().map(Vec::as_slice).unwrap_or_default();
                let mut listed: Vec<String> = all.iter().take(ENUM_LISTED).map(Value::to_string).collect();
                if all.len() > ENUM_LISTED {
                    listed.push(format!("and {} more", all.len() - ENUM_LISTED));
                }
                format!("{} is not one of {}", e.instance(), listed.join(", "))
            }
            _ => e.to_string(),
        };
        if at.is_empty() { what } else { format!("{at}: {what}") }
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

/// Object-schema keywords that decide about other properties themselves
/// (or combine schemas, where `additionalProperties: false` would refuse
/// what a sibling allows): a schema with one of them is left open.
const OPEN_ENDED: [&str; 9] = [
    "additionalProperties",
    "patternProperties",
    "unevaluatedProperties",
    "allOf",
    "anyOf",
    "oneOf",
    "$ref",
    "if",
    "dependentSchemas",
];

/// `schema` with `additionalProperties: false` on every object schema
/// that lists `properties` and none of [`OPEN_ENDED`], through
/// `properties`, `items`, `$defs` and `definitions`.
pub fn closed(mut schema: Value) -> Value {
    fn close(s: &mut Value, depth: usize) {
        let Some(map) = s.as_object_mut().filter(|_| depth < 64) else { return };
        if map.get("properties").is_some_and(Value::is_object) && !OPEN_ENDED.iter().any(|k| map.contains_key(*k)) {
            map.insert("additionalProperties".into(), Value::Bool(false));
        }
        for key in ["properties", "$defs", "definitions"] {
            for child in map.get_mut(key).and_then(Value::as_object_mut).into_iter().flat_map(|m| m.values_mut()) {
                close(child, depth + 1);
            }
        }
        if let Some(items) = map.get_mut("items") {
            close(items, depth + 1);
        }
    }
    close(&mut schema, 0);
    schema
}

/// Tool lists parsed before, by a hash of their JSON text.
pub struct ToolLists {
    lists: Mutex<LruCache<u64, Arc<[ClientTool]>>>,
    /// `args.strict`: client tools take only the parameters they declare.
    strict: bool,
}

/// Tool lists kept.
const TOOL_LISTS: usize = 256;

impl ToolLists {
    /// An empty cache; `strict`: `args.strict`.
    pub fn new(strict: bool) -> ToolLists {
        ToolLists { lists: Mutex::new(LruCache::new(NonZeroUsize::new(TOOL_LISTS).expect("not zero"))), strict }
    }

    /// The tools of a `tools` array (raw JSON), parsed and checked, or as
    /// parsed before.
    fn get_or_parse(&self, raw: &RawValue, max: usize) -> Result<Arc<[ClientTool]>, ApiError> {
        let mut h = std::hash::DefaultHasher::new();
        raw.get().hash(&mut h);
        let key = h.finish();
        if let Some(tools) = self.lists.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
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
            let value: Value = serde_json::from_str(item.get())
                .map_err(|e| ApiError::invalid(unparsable(&format!("tools[{i}]"), &e), Some(&format!("tools[{i}]"))))?;
            tools.push(tool(i, &value, self.strict)?);
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
        self.lists.lock().unwrap_or_else(|e| e.into_inner()).put(key, tools.clone());
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
    /// When the request's time budget runs out: the model requests made
    /// for it (retries, repairs) end by then.
    pub deadline: Instant,
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

/// Nesting levels serde_json parses (its recursion limit, not configurable
/// without risking the stack).
const MAX_JSON_DEPTH: usize = 128;

/// Why `what` could not be parsed, in words: JSON nested past
/// [`MAX_JSON_DEPTH`] is valid JSON, and saying otherwise misleads.
/// (serde_json reports depth as a syntax error: only its message tells.)
fn unparsable(what: &str, e: &serde_json::Error) -> String {
    if e.to_string().starts_with("recursion limit exceeded") {
        format!("{what} is nested more than {MAX_JSON_DEPTH} levels deep, the most toolrouter reads; flatten it")
    } else {
        format!("{what} is not valid JSON: {e}")
    }
}

/// Parses a request body into its [`Fields`].
fn fields(bytes: &[u8]) -> Result<Fields, ApiError> {
    let raw: BTreeMap<String, Box<RawValue>> =
        serde_json::from_slice(bytes).map_err(|e| match serde_json::from_slice::<Value>(bytes) {
            Ok(_) => ApiError::invalid("the request body must be a JSON object", None),
            Err(_) => ApiError::invalid(unparsable("the request body", &e), None),
        })?;
    let mut body = Map::new();
    let mut tools = None;
    for (key, value) in raw {
        if key == "tools" {
            tools = Some(value);
            continue;
        }
        let value: Value = serde_json::from_str(value.get())
            .map_err(|e| ApiError::invalid(unparsable(&format!("`{key}`"), &e), Some(&key)))?;
        body.insert(key, value);
    }
    Ok(Fields { body, tools })
}

/// Parses and checks a request body; `lists`: the tool lists seen before;
/// `budget_ms`: the request's time budget, from now.
pub fn parse(
    bytes: &[u8],
    config: &OpenAiConfig,
    header_mode: Option<&str>,
    lists: &ToolLists,
    budget_ms: u64,
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
            code: Some("model_not_found"),
            ..ApiError::invalid(format!("the model `{model}` does not exist; see GET /v1/models"), Some("model"))
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
    // Every choice would need its own checks, repairs and stream: refused
    // rather than half served (only the first choice checked, streamed
    // choices merged).
    match body.get("n") {
        None | Some(Value::Null) => {}
        Some(n) if n.as_u64() == Some(1) => {}
        Some(n) if n.as_u64().is_some_and(|n| n > 1) => {
            return Err(ApiError::invalid(
                format!("toolrouter answers one choice per request (`n` is {n}): send {n} requests instead"),
                Some("n"),
            ));
        }
        Some(_) => return Err(ApiError::invalid("`n` must be a positive integer", Some("n"))),
    }
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
    let deadline = Instant::now() + Duration::from_millis(budget_ms);
    Ok(ChatRequest { body, model, upstream_model, stream, include_usage, tools, mode, decompose, deadline })
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
pub fn client_tool(definition: &Value, strict: bool) -> Result<ClientTool, ApiError> {
    tool(0, definition, strict)
}

fn tool(i: usize, t: &Value, strict: bool) -> Result<ClientTool, ApiError> {
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
    let schema = Schema::new(schema, strict).map_err(|e| {
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
        let (config, lists) = (OpenAiConfig::default(), ToolLists::new(true));
        let first = parse(&body(&tools), &config, None, &lists, 1000).unwrap();
        let again = parse(&body(&tools), &config, None, &lists, 1000).unwrap();
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
        let e = parse(&body(&tools), &capped, None, &ToolLists::new(true), 1000).err().unwrap();
        assert_eq!((e.status, e.param.as_deref()), (StatusCode::BAD_REQUEST, Some("tools")));
        assert!(e.message.contains("3 tools") && e.message.contains("openai.max_request_tools"), "{}", e.message);
    }

    #[test]
    fn bad_tool_lists_are_refused_clearly() {
        let (config, lists) = (OpenAiConfig::default(), ToolLists::new(true));
        let refused = |tools: &[Value]| parse(&body(tools), &config, None, &lists, 1000).err().expect("refused");
        let e = refused(&[tool_def("a", json!({"type": 12}))]);
        assert_eq!(e.param.as_deref(), Some("tools[0].function.parameters"));
        assert!(e.message.contains("not a valid JSON Schema"), "{}", e.message);
        let twice = [tool_def("a", json!({})), tool_def("a", json!({}))];
        assert!(refused(&twice).message.contains("two tools are named `a`"));
        let e =
            parse(br#"{"model": "m", "messages": [{"role": "user"}], "tools": {"a": 1}}"#, &config, None, &lists, 1000)
                .err()
                .unwrap();
        assert_eq!(e.param.as_deref(), Some("tools"));
        let e = parse(b"[1, 2]", &config, None, &lists, 1000).err().unwrap();
        assert!(e.message.contains("must be a JSON object"), "{}", e.message);
        let e = parse(b"{\"model\": ", &config, None, &lists, 1000).err().unwrap();
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
        assert_eq!(parse(&body(&ok), &config, None, &lists, 1000).unwrap().tools.len(), 2);
    }

    #[test]
    fn strict_client_tools_name_unknown_parameters_and_every_enum_value() {
        let schema = json!({"type": "object", "required": ["city"], "properties": {
            "city": {"type": "string"},
            "unit": {"enum": ["a", "b", "c", "d", "e"]},
            "where": {"type": "object", "properties": {"lat": {"type": "number"}}},
            "extra": {"type": "object", "additionalProperties": true, "properties": {}}}});
        let strict = ToolLists::new(true);
        let config = OpenAiConfig::default();
        let tools = parse(&body(&[tool_def("w", schema.clone())]), &config, None, &strict, 1000).unwrap().tools;
        let issues = tools[0].issues(&json!({"city": "Paris", "country": "FR"}));
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert!(
            issues[0].contains("unknown parameter `country`") && issues[0].contains("`city`, `unit`, `where`, `extra`"),
            "{issues:?}"
        );
        let nested = tools[0].issues(&json!({"city": "P", "where": {"lat": 1, "lng": 2}}));
        assert!(nested[0].starts_with("/where: unknown parameter `lng`") && nested[0].contains("`lat`"), "{nested:?}");
        assert!(tools[0].issues(&json!({"city": "P", "extra": {"any": 1}})).is_empty(), "open objects stay open");
        let e = tools[0].issues(&json!({"city": "P", "unit": "z"}));
        assert!(e[0].contains(r#""a", "b", "c", "d", "e""#) && !e[0].contains("other candidates"), "{e:?}");
        // Off (args.strict = false): unknown parameters pass, as the schema says.
        let open = ToolLists::new(false);
        let tools = parse(&body(&[tool_def("w", schema)]), &config, None, &open, 1000).unwrap().tools;
        assert!(tools[0].issues(&json!({"city": "Paris", "country": "FR"})).is_empty());
    }

    #[test]
    fn n_above_one_and_deep_nesting_are_refused_for_what_they_are() {
        let (config, lists) = (OpenAiConfig::default(), ToolLists::new(true));
        let with_n = |n: Value| {
            let b = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": n});
            parse(&serde_json::to_vec(&b).unwrap(), &config, None, &lists, 1000)
        };
        assert!(with_n(json!(1)).is_ok());
        let e = with_n(json!(3)).err().unwrap();
        assert_eq!((e.status, e.param.as_deref()), (StatusCode::BAD_REQUEST, Some("n")));
        assert!(e.message.contains("send 3 requests"), "{}", e.message);
        assert_eq!(with_n(json!(0)).err().unwrap().param.as_deref(), Some("n"));
        let mut deep = json!({"type": "string"});
        for _ in 0..200 {
            deep = json!({"type": "object", "properties": {"x": deep}});
        }
        let e = parse(&body(&[tool_def("deep", deep)]), &config, None, &lists, 1000).err().unwrap();
        assert!(e.message.contains("nested more than 128 levels") && !e.message.contains("not valid"), "{}", e.message);
    }
}
