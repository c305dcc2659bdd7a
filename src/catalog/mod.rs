//! The API catalog: every callable API, its JSON Schema and how to reach it.
//!
//! Sources (docs/architecture.md §2), all read by [`Catalog::load`]:
//!
//! * ToolBench tool JSON files (`tools/<Category>/<tool>.json`), one [`Api`]
//!   per `api_list` entry, URL templates recovered from `convert_code`;
//! * JSONL files of compacted tools (`tools_dropped_compact.jsonl`);
//! * OpenAPI 3.x specs, YAML or JSON, one [`Api`] per operation;
//! * optionally, the `api_list` entries of ToolBench query files for tools
//!   that have no tool file (schema and description, no URL);
//! * the embedded examples shipped with the binary (`openapi/examples/`);
//! * the tools of the user's own MCP servers ([`Catalog::with_mcp_tools`],
//!   one [`Api`] per MCP tool, served by the `downstream` module).
//!
//! Every API gets a function name unique in the catalog and valid for
//! OpenAI (`^[a-zA-Z0-9_-]{1,64}$`); [`Catalog::resolve`] also finds it by
//! the variant spellings trajectories use. Bad files are skipped and
//! reported in the [`LoadReport`], never fatal.

pub(crate) mod dialect;
mod draft;
mod embedded;
mod loader;
#[cfg(test)]
pub(crate) use draft::Notes;
#[cfg(test)]
pub(crate) use loader::parse_json;
mod mcp;
pub mod names;
mod openapi;
mod resolve;
mod reuse;
pub mod schema;
mod stamp;
mod stats;
mod toolbench;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Map, Value, json};

pub use loader::{LoadReport, Sources};
pub use mcp::{McpServerTools, McpTool, NAMESPACE_SEPARATOR};
pub use resolve::{Resolution, ResolvedBy};
pub(crate) use stamp::Stamp;

/// Availability prior of an API whose tool has no RapidAPI success rate (docs/architecture.md §4).
pub(crate) const DEFAULT_AVAILABILITY_PRIOR: f64 = 0.5;

/// Index of an API in its catalog. Stable for a given set of sources; use
/// the function name to refer to an API across catalog changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ApiId(pub(crate) u32);

/// Index of a tool (a group of APIs sharing a host) in its catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ToolId(pub(crate) u32);

/// Where a tool's definition came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A ToolBench tool JSON file.
    ToolBench,
    /// A line of a compacted-tools JSONL file (no `convert_code`).
    ToolBenchCompact,
    /// The `api_list` of ToolBench query files: schema only, no URL.
    QueryApiList,
    /// An OpenAPI 3.x spec.
    OpenApi,
    /// An OpenAPI spec embedded in the binary.
    Embedded,
    /// A downstream MCP server's `tools/list`.
    Mcp,
}

/// RapidAPI hub statistics of a tool, kept as priors.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Score {
    pub(crate) avg_service_level: Option<f64>,
    pub(crate) avg_latency_ms: Option<f64>,
    pub(crate) avg_success_rate: Option<f64>,
    pub(crate) popularity: Option<f64>,
}

/// A tool: a named group of APIs, usually one host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tool {
    pub id: ToolId,
    /// The original name (`tool_name`, or an OpenAPI spec's `info.title`).
    pub name: String,
    /// The standardized name used in function names.
    pub std_name: String,
    /// Category, as a directory name (`News_Media`).
    pub category: String,
    pub description: String,
    /// The host the tool's APIs are served from, when known.
    pub host: Option<String>,
    pub score: Option<Score>,
    pub origin: Origin,
    /// The file it was read from.
    pub source: PathBuf,
}

impl Tool {
    /// The availability prior α of this tool's APIs: RapidAPI's average
    /// success rate / 100, or [`DEFAULT_AVAILABILITY_PRIOR`].
    pub(crate) fn availability_prior(&self) -> f64 {
        self.score
            .as_ref()
            .and_then(|s| s.avg_success_rate)
            .map(|r| (r / 100.0).clamp(0.0, 1.0))
            .unwrap_or(DEFAULT_AVAILABILITY_PRIOR)
    }
}

/// HTTP method of an API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
    Head,
    Options,
}

impl Method {
    /// Parses a method name, case-insensitively.
    pub(crate) fn parse(name: &str) -> Option<Method> {
        Some(match name.trim().to_ascii_uppercase().as_str() {
            "GET" => Method::Get,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "PATCH" => Method::Patch,
            "DELETE" => Method::Delete,
            "HEAD" => Method::Head,
            "OPTIONS" => Method::Options,
            _ => return None,
        })
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
            Method::Head => "HEAD",
            Method::Options => "OPTIONS",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a parameter goes in the HTTP request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamLocation {
    Query,
    Path,
    Header,
    /// A property of the JSON request body.
    Body,
}

/// One parameter of an API.
///
/// A parameter has two names, and this is the one mapping between them:
/// `key` is what models and clients see and send (the schema's property),
/// `name` is what goes on the wire (the query key, the header, the body
/// property, the URL template's `{placeholder}`). Everything that crosses
/// between the two (the schema, the validator, the request builder, the
/// replay server) goes through [`Api::param`] and [`Api::param_on_wire`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Param {
    /// The name sent upstream (query key, header name, body property,
    /// path placeholder).
    pub name: String,
    /// The property name in the function schema (ToolBench standardizes
    /// parameter names: `id` -> `is_id`, `anime-cap` -> `anime_cap`).
    pub key: String,
    pub location: ParamLocation,
    pub required: bool,
    pub description: String,
    /// JSON Schema of the value (`type`, `format`, `enum`, `default`…).
    pub schema: Value,
    /// How an array goes in a query: `true` repeats the key (`a=1&a=2`,
    /// OpenAPI's default), `false` joins with commas (`a=1,2`, RapidAPI's habit).
    pub explode: bool,
}

impl Param {
    /// The `{placeholder}` of a path parameter in its API's URL template:
    /// its wire name, which the request builder fills and the replay
    /// server reads back.
    pub fn placeholder(&self) -> String {
        format!("{{{}}}", self.name)
    }

    /// The documented default, if the catalog kept one.
    pub fn default_value(&self) -> Option<&Value> {
        self.schema.get("default")
    }
}

/// One callable API (an endpoint).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Api {
    pub id: ApiId,
    pub tool: ToolId,
    /// The original API name.
    pub name: String,
    /// The unique, OpenAI-valid function name.
    pub function_name: String,
    pub description: String,
    pub method: Method,
    /// Absolute URL with `{key}` placeholders for path parameters; `None`
    /// for APIs known only by their schema (query `api_list` entries).
    pub url_template: Option<String>,
    pub params: Vec<Param>,
    /// The input schema as its source declared it whole (an MCP tool's
    /// `inputSchema`); `None`: the schema is built from `params`.
    pub declared_schema: Option<Value>,
    /// Why this API's input schema cannot be used, when it cannot: its
    /// calls pass unchecked (a downstream MCP tool's, say).
    pub unchecked: Option<String>,
    /// Set when a downstream MCP server serves this API (a tool of it)
    /// instead of HTTP; `name` is then the MCP tool's name.
    pub mcp: Option<McpTarget>,
}

/// The downstream MCP server that serves an API, and what it said of the tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpTarget {
    /// The server's configured name.
    pub(crate) server: String,
    pub(crate) title: Option<String>,
    /// The tool's `annotations`, as the server sent them.
    pub(crate) annotations: Option<Value>,
}

/// What calling an API does, as far as the catalog knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Reads only: an MCP tool with `readOnlyHint`, an HTTP GET, HEAD or OPTIONS.
    ReadOnly,
    /// Writes without destroying: an MCP tool with `destructiveHint: false`.
    Additive,
    /// May destroy or change what exists: any other MCP tool (the
    /// specification's defaults), an HTTP POST, PUT, PATCH or DELETE.
    Destructive,
}

impl Api {
    /// What calling it does: an MCP tool's annotations (with the
    /// specification's defaults: not read-only, destructive), else its
    /// HTTP method.
    pub fn effect(&self) -> Effect {
        if let Some(target) = &self.mcp {
            let hint = |name: &str| target.annotations.as_ref().and_then(|a| a.get(name)).and_then(Value::as_bool);
            return match (hint("readOnlyHint"), hint("destructiveHint")) {
                (Some(true), _) => Effect::ReadOnly,
                (_, Some(false)) => Effect::Additive,
                _ => Effect::Destructive,
            };
        }
        match self.method {
            Method::Get | Method::Head | Method::Options => Effect::ReadOnly,
            Method::Post | Method::Put | Method::Patch | Method::Delete => Effect::Destructive,
        }
    }

    /// The parameter whose schema key is `key`.
    pub(crate) fn param(&self, key: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.key == key)
    }

    /// The parameter sent upstream as `name` at `location`.
    pub(crate) fn param_on_wire(&self, location: ParamLocation, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.location == location && p.name == name)
    }

    /// The JSON Schema of the API's arguments: an object with one property
    /// per parameter. Unknown properties are not forbidden here; strict
    /// mode is a validation option (see `args`).
    pub fn input_schema(&self) -> Value {
        if let Some(schema) = &self.declared_schema {
            return schema.clone();
        }
        let mut properties = Map::new();
        let mut required = Vec::new();
        for p in &self.params {
            let mut schema = p.schema.clone();
            if !p.description.is_empty()
                && let Value::Object(map) = &mut schema
            {
                map.entry("description").or_insert_with(|| json!(p.description));
            }
            properties.insert(p.key.clone(), schema);
            if p.required {
                required.push(json!(p.key));
            }
        }
        json!({ "type": "object", "properties": properties, "required": required })
    }
}

/// Longest function description offered to a model (OpenAI's limit is 1024).
pub(crate) const MAX_FUNCTION_DESCRIPTION: usize = 1024;

/// The loaded catalog. Immutable once built; share it behind an `Arc`.
#[derive(Debug)]
pub struct Catalog {
    tools: Vec<Tool>,
    apis: Vec<Api>,
    resolver: resolve::Resolver,
    report: LoadReport,
    /// What its source files were when read, and what reading each noted
    /// (files with notes only): for a reload to reuse them.
    stamp: Stamp,
    notes: HashMap<PathBuf, draft::Notes>,
}

impl Catalog {
    fn new(tools: Vec<Tool>, apis: Vec<Api>, report: LoadReport) -> Catalog {
        let resolver = resolve::Resolver::build(&tools, &apis);
        Catalog { tools, apis, resolver, report, stamp: Stamp::default(), notes: HashMap::new() }
    }

    /// All APIs, indexed by [`ApiId`].
    pub fn apis(&self) -> &[Api] {
        &self.apis
    }

    /// All tools, indexed by [`ToolId`].
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    pub fn api(&self, id: ApiId) -> &Api {
        &self.apis[id.0 as usize]
    }

    pub(crate) fn tool(&self, id: ToolId) -> &Tool {
        &self.tools[id.0 as usize]
    }

    /// The tool an API belongs to.
    pub fn tool_of(&self, api: &Api) -> &Tool {
        self.tool(api.tool)
    }

    /// What loading found: sources, skipped files and entries, adjustments.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    /// What its sources' files were when they were read.
    pub fn stamp(&self) -> &Stamp {
        &self.stamp
    }

    /// Finds an API by function name, including the variant spellings of
    /// trajectories (case, surrounding spaces, ToolBench's raw names, the
    /// 2023 names without `get_` on digit-leading API names).
    pub fn resolve(&self, name: &str) -> Resolution {
        self.resolver.resolve(name)
    }

    /// Finds an API by its original tool and API names (the `[tool, api]`
    /// pairs of query files), matching on standardized names.
    pub fn resolve_pair(&self, tool: &str, api: &str) -> Option<ApiId> {
        self.resolver.resolve_pair(tool, api)
    }

    /// The API as an OpenAI tool definition (`{"type": "function", "function": {...}}`):
    /// its function name, a description naming the tool, and its input schema.
    pub(crate) fn function_definition(&self, api: &Api) -> Value {
        let tool = self.tool_of(api);
        let mut description = if api.description.is_empty() { api.name.clone() } else { api.description.clone() };
        match &api.mcp {
            Some(target) => description.push_str(&format!(" (tool `{}` of MCP server `{}`", api.name, target.server)),
            None => description.push_str(&format!(" (API `{}` of tool `{}`", api.name, tool.name)),
        }
        if !tool.description.is_empty() {
            description.push_str(&format!(": {}", tool.description));
        }
        description.push(')');
        if description.chars().count() > MAX_FUNCTION_DESCRIPTION {
            description = description.chars().take(MAX_FUNCTION_DESCRIPTION - 1).collect::<String>() + "…";
        }
        json!({
            "type": "function",
            "function": { "name": api.function_name, "description": description, "parameters": api.input_schema() }
        })
    }

    /// Whether a tool with this standardized name (or its punctuation
    /// variant) is in the catalog.
    pub(crate) fn has_tool(&self, std_name: &str) -> bool {
        self.resolver.has_tool(std_name)
    }

    /// Function names close to `name`, for "did you mean" messages.
    pub(crate) fn suggest(&self, name: &str, max: usize) -> Vec<&str> {
        self.resolver.suggest(&self.apis, name, max)
    }

    /// The API a function name (in any spelling [`Catalog::resolve`]
    /// accepts) names; unknown, the [`SUGGESTIONS`] closest names. Every
    /// face (MCP, HTTP, the CLI) answers an unknown name with these.
    pub fn find(&self, name: &str) -> Result<&Api, UnknownApi> {
        match self.resolve(name).first() {
            Some(id) => Ok(self.api(id)),
            None => Err(UnknownApi {
                name: name.trim().to_string(),
                close: self.suggest(name, SUGGESTIONS).into_iter().map(str::to_string).collect(),
            }),
        }
    }
}

/// Close names an unknown function name is answered with.
pub(crate) const SUGGESTIONS: usize = 3;

/// A function name no API has, with the closest ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownApi {
    pub(crate) name: String,
    /// Function names close to it, closest first (may be empty).
    pub(crate) close: Vec<String>,
}

impl std::fmt::Display for UnknownApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown function `{}`", self.name)?;
        if !self.close.is_empty() {
            let close: Vec<String> = self.close.iter().map(|c| format!("`{c}`")).collect();
            write!(f, "; did you mean {}?", close.join(", "))?;
        }
        Ok(())
    }
}
