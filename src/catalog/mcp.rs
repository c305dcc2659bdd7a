//! The tools of the user's own MCP servers as catalog APIs.
//!
//! Each downstream server is one [`Tool`] (its name is the server's
//! configured name, its origin [`Origin::Mcp`]) and each of its MCP tools
//! one [`Api`] whose function name is `<server>__<tool>` (made OpenAI-valid,
//! cut to 64 characters, unique). The MCP tool's `inputSchema` is kept
//! whole as the API's declared schema; its top-level properties are also
//! the API's parameters (in the body), so validation messages can name
//! them. [`Catalog::with_mcp_tools`] appends them after the catalog's own
//! APIs, whose ids do not change. Servers come in configured order and
//! each server's tools sorted by name, so names and ids are the same for
//! the same tool lists whatever order a server lists them in.

use std::collections::HashSet;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::loader::Skipped;
use super::names::{MAX_FUNCTION_NAME, last_chars, openai_safe};
use super::{Api, ApiId, Catalog, McpTarget, Method, Origin, Param, ParamLocation, Tool, ToolId};

/// Separates the server's name from the tool's in a function name.
pub const NAMESPACE_SEPARATOR: &str = "__";
/// The category of every downstream MCP tool.
const MCP_CATEGORY: &str = "MCP";

/// A tool as a downstream MCP server lists it (`tools/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpTool {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    /// The tool's `inputSchema`, as sent.
    pub input_schema: Value,
    /// The tool's `annotations` (`readOnlyHint`, `destructiveHint`…), as sent.
    pub annotations: Option<Value>,
}

/// The tools one downstream server offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerTools {
    /// The server's configured name (its namespace).
    pub server: String,
    /// What the server says of itself (its `instructions`, else its name and version).
    pub description: String,
    pub tools: Vec<McpTool>,
}

impl Catalog {
    /// This catalog with the tools of `servers` after its own APIs. Input
    /// schemas are read in any dialect; a tool whose schema still cannot be
    /// used is kept, its calls unchecked, with a warning naming server and
    /// tool (and in the report's `unchecked_apis`).
    pub fn with_mcp_tools(&self, servers: &[McpServerTools]) -> Catalog {
        let mut tools: Vec<Tool> = self.tools.iter().filter(|t| t.origin != Origin::Mcp).cloned().collect();
        let own: HashSet<ToolId> = tools.iter().map(|t| t.id).collect();
        let mut apis: Vec<Api> = self.apis.iter().filter(|a| own.contains(&a.tool)).cloned().collect();
        let mut report = self.report.clone();
        report.skipped_apis.retain(|s| !s.path.starts_with("mcp:"));
        report.unchecked_apis.retain(|s| !s.path.starts_with("mcp:"));
        let mut taken: HashSet<String> = apis.iter().map(|a| a.function_name.to_lowercase()).collect();
        for server in servers {
            let tool_id = ToolId(tools.len() as u32);
            let mut listed: Vec<&McpTool> = server.tools.iter().collect();
            listed.sort_by(|a, b| a.name.cmp(&b.name));
            listed.dedup_by(|a, b| a.name == b.name);
            for tool in listed {
                let location = format!("mcp:{}", server.server);
                let (params, declared, unchecked) = read_schema(&tool.input_schema);
                if let Some(reason) = &unchecked {
                    tracing::warn!(server = %server.server, tool = %tool.name, %reason, "a downstream MCP tool's input schema cannot be used; its calls pass unchecked");
                    report.unchecked_apis.push(Skipped { path: location, reason: format!("{}: {reason}", tool.name) });
                }
                let function_name = unique_name(&server.server, &tool.name, &mut taken);
                apis.push(Api {
                    id: ApiId(apis.len() as u32),
                    tool: tool_id,
                    name: tool.name.clone(),
                    function_name,
                    description: tool.description.clone(),
                    method: Method::Post,
                    url_template: None,
                    params,
                    declared_schema: Some(declared),
                    unchecked,
                    mcp: Some(McpTarget {
                        server: server.server.clone(),
                        title: tool.title.clone(),
                        annotations: tool.annotations.clone(),
                    }),
                });
            }
            tools.push(Tool {
                id: tool_id,
                name: server.server.clone(),
                std_name: server.server.to_lowercase(),
                category: MCP_CATEGORY.to_string(),
                description: server.description.clone(),
                host: None,
                score: None,
                origin: Origin::Mcp,
                source: PathBuf::from(format!("mcp:{}", server.server)),
            });
        }
        Catalog { stamp: self.stamp.clone(), notes: self.notes.clone(), ..Catalog::new(tools, apis, report) }
    }
}

/// `<server>__<tool>`, OpenAI-valid, at most 64 characters, not yet taken
/// (case-insensitively: the resolver ignores case); `_2`, `_3`… otherwise.
fn unique_name(server: &str, tool: &str, taken: &mut HashSet<String>) -> String {
    let prefix = format!("{server}{NAMESPACE_SEPARATOR}");
    let room = MAX_FUNCTION_NAME - prefix.len();
    let tool = openai_safe(tool);
    let base = format!("{prefix}{}", last_chars(&tool, room));
    let name = std::iter::once(base.clone())
        .chain((2..).map(|n| {
            let suffix = format!("_{n}");
            format!("{prefix}{}{suffix}", last_chars(&tool, room - suffix.len()))
        }))
        .find(|candidate| !taken.contains(&candidate.to_lowercase()))
        .expect("unbounded");
    taken.insert(name.to_lowercase());
    name
}

/// An MCP tool's input schema read in any dialect
/// ([`crate::catalog::dialect`]): its parameters (top-level properties), the
/// schema its calls are checked against, and why they pass unchecked when
/// the schema cannot be used (it is then `{"type": "object"}`).
fn read_schema(schema: &Value) -> (Vec<Param>, Value, Option<String>) {
    let normalized = crate::catalog::dialect::normalize(schema);
    let unusable = match &normalized {
        _ if !schema.is_object() => {
            Some(format!("its inputSchema is not a JSON object: {}", crate::text::clip(&schema.to_string(), 80)))
        }
        Value::Object(map) if map.get("type").is_some_and(|t| t != "object") => {
            Some(format!("its inputSchema has type {}, not \"object\"", map["type"]))
        }
        _ => crate::catalog::dialect::check(&normalized)
            .and_then(|()| jsonschema::draft202012::new(&normalized).map(drop).map_err(|e| e.to_string()))
            .err()
            .map(|e| format!("its inputSchema is not a valid JSON Schema ({e})")),
    };
    let required: HashSet<&str> =
        normalized.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let properties = normalized.get("properties").and_then(Value::as_object);
    let params = properties
        .into_iter()
        .flatten()
        .map(|(key, schema)| Param {
            name: key.clone(),
            key: key.clone(),
            location: ParamLocation::Body,
            required: required.contains(key.as_str()),
            description: schema.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
            schema: schema.clone(),
            explode: true,
        })
        .collect();
    let declared = if unusable.is_some() { serde_json::json!({"type": "object"}) } else { normalized.clone() };
    (params, declared, unusable)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::catalog::Sources;

    fn tool(name: &str, schema: Value) -> McpTool {
        McpTool {
            name: name.into(),
            title: None,
            description: format!("does {name}"),
            input_schema: schema,
            annotations: None,
        }
    }

    fn servers() -> Vec<McpServerTools> {
        let object = json!({"type": "object", "properties": {"timezone": {"type": "string", "description": "IANA zone"}}, "required": ["timezone"]});
        vec![
            McpServerTools {
                server: "time".into(),
                description: "clock".into(),
                tools: vec![tool("get_current_time", object.clone()), tool("convert.time/zone", object.clone())],
            },
            McpServerTools {
                server: "broken".into(),
                description: String::new(),
                tools: vec![
                    tool("bad_type", json!({"type": "string"})),
                    tool("bad_schema", json!({"type": "object", "properties": {"a": {"type": 5}}})),
                    tool("bad_regex", json!({"type": "object", "properties": {"a": {"pattern": "("}}})),
                    tool(
                        "draft_4",
                        json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                        "properties": {"page": {"type": "integer", "minimum": 1, "exclusiveMinimum": true}}}),
                    ),
                    tool("ok", json!({})),
                ],
            },
        ]
    }

    /// Downstream tools come after the catalog's own APIs (whose ids keep),
    /// namespaced, OpenAI-valid, with their schema whole (in 2020-12's
    /// forms); a schema that cannot be used leaves its tool unchecked, reported
    /// by server and tool, never left out.
    #[test]
    fn downstream_tools_join_the_catalog_namespaced() {
        let base = Catalog::load(&Sources::default()).unwrap();
        let catalog = base.with_mcp_tools(&servers());
        assert_eq!(
            &catalog.apis()[..base.apis().len()].iter().map(|a| &a.function_name).collect::<Vec<_>>(),
            &base.apis().iter().map(|a| &a.function_name).collect::<Vec<_>>()
        );
        let names: Vec<&str> = catalog.apis()[base.apis().len()..].iter().map(|a| a.function_name.as_str()).collect();
        assert_eq!(
            names,
            [
                "time__convert_time_zone",
                "time__get_current_time",
                "broken__bad_regex",
                "broken__bad_schema",
                "broken__bad_type",
                "broken__draft_4",
                "broken__ok"
            ]
        );
        let api = catalog.find("time__get_current_time").unwrap();
        assert_eq!(api.mcp.as_ref().unwrap().server, "time");
        assert_eq!(api.name, "get_current_time");
        assert_eq!(api.input_schema()["required"], json!(["timezone"]));
        assert!(api.param("timezone").unwrap().required);
        assert_eq!(catalog.tool_of(api).origin, Origin::Mcp);
        assert!(catalog.report().skipped_apis.is_empty());
        let unchecked: Vec<&str> = catalog.report().unchecked_apis.iter().map(|s| s.reason.as_str()).collect();
        assert_eq!(unchecked.len(), 2, "{unchecked:?}");
        assert!(unchecked[0].starts_with("bad_regex:") && unchecked[1].starts_with("bad_type:"), "{unchecked:?}");
        // A draft-4 bound is read as meant; an unusable schema lets calls through.
        let options = crate::args::Options::default();
        let draft_4 = catalog.find("broken__draft_4").unwrap();
        assert!(crate::args::validate(draft_4, &json!({"page": 2}), options).is_ok());
        assert!(crate::args::validate(draft_4, &json!({"page": 1}), options).is_err(), "1 is excluded");
        let bad = catalog.find("broken__bad_regex").unwrap();
        let valid = crate::args::validate(bad, &json!({"a": "x"}), options).unwrap();
        assert!(valid.warnings.iter().any(|w| w.kind == crate::args::ProblemKind::Unchecked), "{valid:?}");
        // Replacing the downstream tools drops the old ones and their reports.
        let again = catalog.with_mcp_tools(&servers()[..1]);
        assert_eq!(again.apis().len(), base.apis().len() + 2);
        assert!(again.report().unchecked_apis.is_empty());
        assert!(again.find("broken__ok").is_err());
    }

    #[test]
    fn long_and_clashing_names_stay_unique_and_valid() {
        let mut taken = HashSet::new();
        let long = "x".repeat(100);
        let a = unique_name("server", &long, &mut taken);
        let b = unique_name("server", &long, &mut taken);
        assert_eq!(a.len(), MAX_FUNCTION_NAME);
        assert!(b.ends_with("_2") && b.len() == MAX_FUNCTION_NAME && a != b);
        assert_eq!(unique_name("s", "Get Time!", &mut taken), "s__Get_Time_");
        assert!(crate::catalog::names::is_openai_name(&unique_name("s", "读取", &mut taken)));
    }
}
