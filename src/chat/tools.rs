//! The tools a request offers the model — the client's own (route mode)
//! or catalog APIs (plan mode) — and the checking of the calls the model
//! makes to them.
//!
//! A client sends the same tools turn after turn, often hundreds, in
//! whatever order and subset its framework makes: a tool seen before (same
//! JSON text) is taken from [`ToolLists`] instead of being parsed and
//! checked again, whatever list it comes in (and a whole list seen before,
//! byte for byte, is one lookup). Each tool's parameter schema is read in
//! any dialect ([`crate::catalog::dialect`]: draft 4's forms, type names in the
//! wild) and checked against the draft 2020-12 meta-schema when the tool is
//! first seen; its validator is compiled only when the model calls the
//! tool, and kept by a hash of the schema. One tool's unusable schema never
//! fails the request: that tool is offered as sent and its calls pass
//! unchecked, with a warning in the log and in the answer's `toolrouter`
//! report (`unchecked_tools`).
//!
//! With `args.strict` (the default) a call's arguments may hold only the
//! parameters its tool declares, as for catalog APIs: client schemas
//! rarely say `additionalProperties: false`, and a model that invents an
//! argument would otherwise reach the client's function, which fails on
//! it. Every object schema that lists its `properties` and says nothing
//! of others is read as closed ([`closed`]); unknown parameters become
//! problems to repair like any other.

use std::collections::HashSet;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, OnceLock};

use lru::LruCache;
use serde_json::Value;
use serde_json::value::RawValue;

use super::error::ChatError;
use super::unparsable::unparsable;
use crate::args;
use crate::catalog::Api;
use crate::retrieval::tool_list::ToolSet;

/// A tool offered to the model: one of the client's, or a catalog API (plan mode).
#[derive(Debug)]
pub struct ClientTool {
    pub(crate) name: String,
    /// Name, description and parameter names, for relevance.
    pub(crate) text: String,
    /// Its required parameters' names (route mode brings along the tools
    /// that produce them: `retrieval::tool_list`).
    pub(crate) needs: Vec<String>,
    /// The tool as sent upstream: the client's own JSON text (without
    /// `defer_loading`).
    pub(crate) definition: Box<RawValue>,
    /// Its description (the model reads it in a search's results).
    pub(crate) description: Box<str>,
    /// Sent with `"defer_loading": true`: offered once a search finds it
    /// ([`super::search`]).
    pub(crate) deferred: bool,
    pub(crate) check: Check,
}

/// How a tool's call arguments are checked.
#[derive(Debug)]
pub(crate) enum Check {
    /// A client's tool: against its JSON Schema.
    Schema(Schema),
    /// A catalog API: as `/v1/tools/call` checks them (strict mode,
    /// coercions), so that what plan mode accepts the call accepts.
    Api(Box<Api>, args::Options),
}

impl ClientTool {
    /// What is wrong with `arguments` (an object), in words for the model.
    pub(crate) fn issues(&self, arguments: &Value) -> Vec<String> {
        match &self.check {
            Check::Schema(schema) if schema.unusable.is_some() => Vec::new(),
            Check::Schema(schema) => schema.validator().iter_errors(arguments).map(|e| schema.describe(&e)).collect(),
            Check::Api(api, options) => match args::validate(api, arguments, *options) {
                Ok(_) => Vec::new(),
                Err(invalid) => invalid.problems.iter().map(ToString::to_string).collect(),
            },
        }
    }

    pub(crate) fn description(&self) -> &str {
        &self.description
    }

    /// Why this tool's calls pass unchecked (its schema cannot be used).
    pub fn unchecked(&self) -> Option<&str> {
        match &self.check {
            Check::Schema(schema) => schema.unusable.as_deref(),
            Check::Api(..) => None,
        }
    }
}

/// A client tool's parameter schema (normalized to draft 2020-12 and
/// meta-schema checked), its validator compiled on first use; in strict
/// mode the schema checked is [`closed`].
#[derive(Debug)]
pub(crate) struct Schema {
    value: Value,
    validator: OnceLock<Arc<jsonschema::Validator>>,
    /// Why the schema cannot be used, if it cannot: its calls pass unchecked.
    unusable: Option<String>,
}

/// Enum values listed in full in a message for the model (more are counted).
const ENUM_LISTED: usize = 40;

impl Schema {
    /// `value` in draft 2020-12's forms, checked against its meta-schema
    /// (what fails is kept as the reason its calls pass unchecked);
    /// `strict`: calls may hold only the parameters it declares.
    pub(crate) fn new(value: &Value, strict: bool) -> Schema {
        let value = crate::catalog::dialect::normalize(value);
        let unusable = crate::catalog::dialect::check(&value).err();
        let value = if strict && unusable.is_none() { closed(value) } else { value };
        Schema { value, validator: OnceLock::new(), unusable }
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
    pub(crate) fn validator(&self) -> &jsonschema::Validator {
        self.validator.get_or_init(|| {
            // The meta-schema check passed. What compiling can still refuse
            // (an unresolvable `$ref`, a regex the engine cannot compile)
            // leaves the arguments unchecked, as they would be without
            // toolrouter: the client's function sees them as the model wrote them.
            let Ok(compiled) = args::validators::cached(args::validators::Dialect::Client, &self.value, |schema| {
                Ok::<_, std::convert::Infallible>(jsonschema::draft202012::new(schema).unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "a client tool's parameter schema does not compile; its calls pass unchecked");
                    jsonschema::validator_for(&Value::Bool(true)).expect("`true` is a valid schema")
                }))
            });
            compiled
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
/// that lists `properties` and none of `OPEN_ENDED`, through
/// `properties`, `items`, `$defs` and `definitions`.
pub(crate) fn closed(mut schema: Value) -> Value {
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

/// Tools parsed before, by a hash of their JSON text, and whole lists by
/// a hash of theirs; bounded by entries and by the bytes of the tools'
/// text.
pub(crate) struct ToolLists {
    inner: Mutex<Parsed>,
    /// `args.strict`: client tools take only the parameters they declare.
    strict: bool,
}

struct Parsed {
    lists: LruCache<u64, Arc<ToolList>>,
    tools: LruCache<u64, Arc<ClientTool>>,
    /// The tools' JSON text, counted twice (their parsed schema and text).
    bytes: usize,
}

/// Tool lists kept (each a list of shared tools: a few bytes a tool).
const TOOL_LISTS: usize = 256;
/// Tools kept.
const TOOLS: usize = 20_000;
/// Bytes the kept tools may take, as [`Parsed::bytes`] counts them.
const TOOL_BYTES: usize = 64 << 20;

/// The key of a tool's or a list's JSON text: XXH3 (already in the tree
/// through `redis`), about ten times as fast as std's SipHash on the
/// 300 KB of a 1,000-tool list, which every request with it hashes.
fn hash_of(text: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(text.as_bytes())
}

/// A request's tools as parsed, shared by every request that sends the
/// same list, with what route mode makes of the list once (its set in the
/// ranker, [`ToolList::set`]).
#[derive(Default)]
pub(crate) struct ToolList {
    tools: Box<[Arc<ClientTool>]>,
    set: OnceLock<ToolSet>,
}

impl ToolList {
    /// The ranker's set of these tools, made by `make` the first time.
    pub(crate) fn set(&self, make: impl FnOnce(&[Arc<ClientTool>]) -> ToolSet) -> &ToolSet {
        self.set.get_or_init(|| make(&self.tools))
    }
}

impl std::ops::Deref for ToolList {
    type Target = [Arc<ClientTool>];

    fn deref(&self) -> &[Arc<ClientTool>] {
        &self.tools
    }
}

impl From<Vec<Arc<ClientTool>>> for ToolList {
    fn from(tools: Vec<Arc<ClientTool>>) -> ToolList {
        ToolList { tools: tools.into(), set: OnceLock::new() }
    }
}

impl ToolLists {
    /// An empty cache; `strict`: `args.strict`.
    pub(crate) fn new(strict: bool) -> ToolLists {
        let lru = |n| NonZeroUsize::new(n).expect("not zero");
        let parsed = Parsed { lists: LruCache::new(lru(TOOL_LISTS)), tools: LruCache::new(lru(TOOLS)), bytes: 0 };
        ToolLists { inner: Mutex::new(parsed), strict }
    }

    fn parsed(&self) -> std::sync::MutexGuard<'_, Parsed> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tools of a `tools` array (raw JSON), each parsed and checked or
    /// as parsed before. A tool whose schema cannot be used is served
    /// unchecked ([`ClientTool::unchecked`]); what is wrong with the
    /// request itself (not an array, a tool without a valid name, two
    /// tools of one name, too many tools) is a 400 naming the tool.
    pub(crate) fn get_or_parse(&self, raw: &RawValue, max: usize) -> Result<Arc<ToolList>, ChatError> {
        let key = hash_of(raw.get());
        if let Some(tools) = self.parsed().lists.get(&key) {
            return Ok(tools.clone());
        }
        let items: Vec<&RawValue> = serde_json::from_str(raw.get())
            .map_err(|_| ChatError::invalid("`tools` must be an array", Some("tools")))?;
        if items.len() > max {
            return Err(ChatError::invalid(
                format!(
                    "this request carries {} tools; at most {max} are accepted (openai.max_request_tools); \
                     send the tools the conversation could use",
                    items.len()
                ),
                Some("tools"),
            ));
        }
        let keys: Vec<u64> = items.iter().map(|item| hash_of(item.get())).collect();
        let mut tools: Vec<Option<Arc<ClientTool>>> = {
            let mut parsed = self.parsed();
            keys.iter().map(|k| parsed.tools.get(k).cloned()).collect()
        };
        let mut new = Vec::new();
        for (i, item) in items.iter().enumerate() {
            if tools[i].is_some() {
                continue;
            }
            let value: Value = serde_json::from_str(item.get()).map_err(|e| {
                ChatError::invalid(unparsable(&format!("tools[{i}]"), &e), Some(&format!("tools[{i}]")))
            })?;
            let parsed = Arc::new(tool(i, &value, (*item).to_owned(), self.strict)?);
            if let Some(reason) = parsed.unchecked() {
                tracing::warn!(tool = %parsed.name, %reason, "a client tool's parameter schema cannot be used; its calls pass unchecked");
            }
            tools[i] = Some(parsed.clone());
            new.push((keys[i], item.get().len(), parsed));
        }
        let tools: Vec<Arc<ClientTool>> = tools.into_iter().map(|t| t.expect("every tool parsed")).collect();
        let mut names = HashSet::new();
        for (i, t) in tools.iter().enumerate() {
            if !names.insert(t.name.as_str()) {
                return Err(ChatError::invalid(
                    format!("two tools are named `{}`", t.name),
                    Some(&format!("tools[{i}].function.name")),
                ));
            }
        }
        let tools = Arc::new(ToolList::from(tools));
        let mut parsed = self.parsed();
        for (key, len, tool) in new {
            if let Some((_, old)) = parsed.tools.push(key, tool) {
                parsed.bytes = parsed.bytes.saturating_sub(2 * old.definition.get().len());
            }
            parsed.bytes += 2 * len;
        }
        while parsed.bytes > TOOL_BYTES {
            let Some((_, old)) = parsed.tools.pop_lru() else { break };
            parsed.bytes = parsed.bytes.saturating_sub(2 * old.definition.get().len());
        }
        parsed.lists.put(key, tools.clone());
        Ok(tools)
    }
}

/// A catalog API as a tool (plan mode). In strict mode its schema says
/// `additionalProperties: false`, as validation will.
pub(crate) fn catalog_tool(mut definition: Value, api: &Api, options: args::Options) -> ClientTool {
    if options.strict {
        definition["function"]["parameters"]["additionalProperties"] = Value::Bool(false);
    }
    let name = api.function_name.clone();
    let description = definition["function"]["description"].as_str().unwrap_or("");
    let text = tool_text(&name, description, &definition["function"]["parameters"]);
    let needs = required(&definition["function"]["parameters"]);
    let definition = raw(&definition);
    let description = description.into();
    ClientTool {
        text,
        name,
        needs,
        definition,
        description,
        deferred: false,
        check: Check::Api(Box::new(api.clone()), options),
    }
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

/// The names a JSON Schema object lists as `required`.
fn required(schema: &Value) -> Vec<String> {
    let names = schema.get("required").and_then(Value::as_array).into_iter().flatten();
    names.filter_map(Value::as_str).map(str::to_string).collect()
}

/// A client's tool definition (`{"type": "function", "function": {...}}`) checked and read.
pub fn client_tool(definition: &Value, strict: bool) -> Result<ClientTool, ChatError> {
    tool(0, definition, raw(definition), strict)
}

/// A JSON value's text.
fn raw(value: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("a JSON value is JSON")
}

/// Tool `i` of a list: `t` parsed, `definition` its text.
fn tool(i: usize, t: &Value, definition: Box<RawValue>, strict: bool) -> Result<ClientTool, ChatError> {
    let param = |p: &str| format!("tools[{i}].{p}");
    if t.get("type").and_then(Value::as_str) != Some("function") {
        return Err(ChatError::invalid("only tools of type `function` are supported", Some(&param("type"))));
    }
    let f = t
        .get("function")
        .and_then(Value::as_object)
        .ok_or_else(|| ChatError::invalid("a tool needs `function`", Some(&param("function"))))?;
    let name = f.get("name").and_then(Value::as_str).unwrap_or("");
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        return Err(ChatError::invalid(
            format!("tool name {name:?} must be 1-64 letters, digits, `_` or `-`"),
            Some(&param("function.name")),
        ));
    }
    let schema =
        f.get("parameters").cloned().unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
    if !schema.is_object() {
        return Err(ChatError::invalid(
            "`parameters` must be a JSON Schema object",
            Some(&param("function.parameters")),
        ));
    }
    let deferred = match t.get("defer_loading") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ChatError::invalid("`defer_loading` must be a boolean", Some(&param("defer_loading")))),
    };
    // The model behind may know nothing of `defer_loading`: it never sees it.
    let definition = match t.as_object() {
        Some(fields) if fields.contains_key("defer_loading") => {
            let mut fields = fields.clone();
            fields.remove("defer_loading");
            raw(&Value::Object(fields))
        }
        _ => definition,
    };
    let description = f.get("description").and_then(Value::as_str).unwrap_or("");
    let text = tool_text(name, description, &schema);
    let (needs, description) = (required(&schema), description.into());
    let check = Check::Schema(Schema::new(&schema, strict));
    Ok(ClientTool { name: name.to_string(), text, needs, definition, description, deferred, check })
}
