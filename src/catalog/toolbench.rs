//! ToolBench's formats: tool JSON files, compacted-tools JSONL lines and
//! the `api_list` entries of query files.
//!
//! A tool file is `{tool_name, tool_description, host, score, api_list: [...]}`
//! with one entry per API (`name`, `url`, `description`, `method`,
//! `required_parameters`, `optional_parameters`, `convert_code`…). Parsing
//! is typed for speed (the 98 MB of `code`/`schema` text is skipped, not
//! kept); a file that fails the typed parse is re-read loosely so that its
//! good entries survive and each bad one is reported.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::draft::{ApiDraft, Notes, ToolDraft};
use super::names::{category_dir_name, standardize, standardize_member};
use super::schema::toolbench_param;
use super::{Method, Origin, Param, ParamLocation, Score};

/// A tool file (or the `tool` object of a JSONL line). Unknown fields are ignored.
#[derive(Deserialize)]
pub(crate) struct ToolFile {
    #[serde(default, deserialize_with = "lenient_opt_string")]
    tool_name: Option<String>,
    #[serde(default, deserialize_with = "lenient_opt_string")]
    name: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    tool_description: String,
    #[serde(default, deserialize_with = "lenient_opt_string")]
    host: Option<String>,
    #[serde(default, deserialize_with = "lenient_score")]
    score: Option<Score>,
    api_list: Vec<ApiEntry>,
}

#[derive(Deserialize)]
struct ApiEntry {
    #[serde(deserialize_with = "lenient_string")]
    name: String,
    #[serde(default, deserialize_with = "lenient_opt_string")]
    url: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    description: String,
    #[serde(default, deserialize_with = "lenient_opt_string")]
    method: Option<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    required_parameters: Vec<ParamEntry>,
    #[serde(default, deserialize_with = "null_as_empty")]
    optional_parameters: Vec<ParamEntry>,
    #[serde(default, deserialize_with = "lenient_opt_string")]
    convert_code: Option<String>,
}

#[derive(Deserialize)]
struct ParamEntry {
    #[serde(deserialize_with = "lenient_string")]
    name: String,
    #[serde(rename = "type", default, deserialize_with = "lenient_opt_string")]
    ty: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    description: String,
    #[serde(default)]
    default: Value,
}

/// A query file's `api_list` entry.
#[derive(Deserialize)]
pub(crate) struct QueryApiEntry {
    #[serde(default, deserialize_with = "lenient_string")]
    pub(crate) category_name: String,
    #[serde(deserialize_with = "lenient_string")]
    pub(crate) tool_name: String,
    #[serde(deserialize_with = "lenient_string")]
    pub(crate) api_name: String,
    #[serde(default, deserialize_with = "lenient_string")]
    api_description: String,
    #[serde(default, deserialize_with = "lenient_opt_string")]
    method: Option<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    required_parameters: Vec<ParamEntry>,
    #[serde(default, deserialize_with = "null_as_empty")]
    optional_parameters: Vec<ParamEntry>,
}

/// Re-reads a tool that failed the typed parse entry by entry.
pub(crate) fn salvage(
    mut value: Value,
    category: &str,
    origin: Origin,
    notes: &mut Notes,
) -> Result<ToolDraft, String> {
    let Some(obj) = value.as_object_mut() else {
        return Err(format!("expected a JSON object, found {}", super::schema::type_name(&value)));
    };
    let entries = match obj.remove("api_list") {
        Some(Value::Array(entries)) => entries,
        Some(other) => return Err(format!("`api_list` is {}, not a list", super::schema::type_name(&other))),
        None => return Err("no `api_list` field".to_string()),
    };
    obj.insert("api_list".into(), Value::Array(Vec::new()));
    let mut file: ToolFile = serde_json::from_value(value).map_err(|e| format!("bad tool fields: {e}"))?;
    for (i, entry) in entries.into_iter().enumerate() {
        match serde_json::from_value::<ApiEntry>(entry) {
            Ok(api) => file.api_list.push(api),
            Err(e) => notes.skip_api(format!("api_list[{i}]: {e}")),
        }
    }
    tool_draft(file, category, origin, notes)
}

/// Turns a parsed tool file into a draft.
pub(crate) fn tool_draft(
    file: ToolFile,
    category: &str,
    origin: Origin,
    notes: &mut Notes,
) -> Result<ToolDraft, String> {
    let name =
        file.tool_name.or(file.name).filter(|n| !n.trim().is_empty()).ok_or_else(|| "no `tool_name`".to_string())?;
    let apis = file.api_list.into_iter().map(|api| api_draft(api, notes)).collect();
    Ok(ToolDraft {
        std_name: standardize(&name),
        name,
        category: category.to_string(),
        description: file.tool_description,
        host: file.host.filter(|h| !h.is_empty()),
        score: file.score,
        origin,
        apis,
    })
}

fn api_draft(entry: ApiEntry, notes: &mut Notes) -> ApiDraft {
    let template = entry.url.as_deref().map(|url| url_template(url, entry.convert_code.as_deref()));
    let mut params = params(entry.required_parameters, entry.optional_parameters, notes);
    let url_template = template.map(|t| bind_path_params(&t, &mut params, notes));
    ApiDraft {
        std_name: standardize_member(&entry.name),
        name: entry.name,
        description: entry.description.trim().to_string(),
        method: entry.method.as_deref().and_then(Method::parse).unwrap_or(Method::Get),
        url_template,
        params,
    }
}

/// Builds an API of a tool that has no tool file from a query's `api_list` entry.
pub(crate) fn query_api_draft(entry: QueryApiEntry, notes: &mut Notes) -> ApiDraft {
    ApiDraft {
        std_name: standardize_member(&entry.api_name),
        name: entry.api_name,
        description: entry.api_description.trim().to_string(),
        method: entry.method.as_deref().and_then(Method::parse).unwrap_or(Method::Get),
        url_template: None,
        params: params(entry.required_parameters, entry.optional_parameters, notes),
    }
}

/// A query entry's tool, without APIs (the loader groups entries by tool).
pub(crate) fn query_tool_draft(entry: &QueryApiEntry) -> ToolDraft {
    ToolDraft {
        name: entry.tool_name.trim().to_string(),
        std_name: standardize(&entry.tool_name),
        category: category_dir_name(&entry.category_name),
        description: String::new(),
        host: None,
        score: None,
        origin: Origin::QueryApiList,
        apis: Vec::new(),
    }
}

fn params(required: Vec<ParamEntry>, optional: Vec<ParamEntry>, notes: &mut Notes) -> Vec<Param> {
    let mut out: Vec<Param> = Vec::with_capacity(required.len() + optional.len());
    let entries = required.into_iter().map(|p| (p, true)).chain(optional.into_iter().map(|p| (p, false)));
    for (i, (entry, required)) in entries.enumerate() {
        if out.iter().any(|p| p.name == entry.name) {
            notes.duplicate_params += 1; // listed twice (usually required and optional): first wins
            continue;
        }
        let mapped = toolbench_param(entry.ty.as_deref(), &entry.default);
        if let Some(reason) = mapped.dropped_default {
            notes.drop_default(reason);
        }
        let mut key = standardize_member(&entry.name);
        if key.is_empty() {
            key = format!("param_{i}");
        }
        if out.iter().any(|p| p.key == key) {
            notes.renamed_params += 1;
            key = (2..).map(|n| format!("{key}_{n}")).find(|k| !out.iter().any(|p| &p.key == k)).expect("unbounded");
        }
        out.push(Param {
            name: entry.name,
            key,
            location: ParamLocation::Query,
            required,
            description: entry.description.trim().to_string(),
            schema: mapped.schema,
            explode: false,
        });
    }
    out
}

/// The URL template of an API: `url` holds sample values for path
/// parameters; the `url = "..."` line of `convert_code` has `{name}`
/// placeholders instead. A placeholder right after the host
/// (`https://h.com{path}`) starts the path: it gets its `/`, so that no
/// value can change the host.
fn url_template(url: &str, convert_code: Option<&str>) -> String {
    let from_code = convert_code.and_then(|code| {
        let start = code.find("url = \"")? + "url = \"".len();
        let len = code[start..].find('"')?;
        Some(&code[start..start + len])
    });
    let template = match from_code {
        Some(t) if t.contains('{') => t.trim(),
        _ => url.trim(),
    };
    let authority = template.find("://").map(|i| i + 3).unwrap_or(0);
    match template[authority..].find(['/', '?', '{']).map(|i| i + authority) {
        Some(at) if template[at..].starts_with('{') => format!("{}/{}", &template[..at], &template[at..]),
        _ => template.to_string(),
    }
}

/// Marks the parameters named by the template's placeholders as path
/// parameters and rewrites each placeholder to the parameter's wire name
/// ([`Param::placeholder`], what the request builder fills). Placeholders
/// spell names raw, standardized, with or without `is_`; they are matched
/// on the standardized form. A placeholder without a parameter gets a
/// required string parameter of its own.
fn bind_path_params(template: &str, params: &mut Vec<Param>, notes: &mut Notes) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(len) = rest[open..].find('}') else { break };
        out.push_str(&rest[..open]);
        let placeholder = &rest[open + 1..open + len];
        let std = standardize(placeholder);
        let found = params
            .iter()
            .position(|p| standardize(&p.name) == std || p.key == std || standardize_member(&p.name) == std);
        let index = found.unwrap_or_else(|| {
            notes.synthesized_path_params += 1;
            params.push(Param {
                name: placeholder.to_string(),
                key: standardize_member(placeholder),
                location: ParamLocation::Path,
                required: true,
                description: "Path parameter.".to_string(),
                schema: serde_json::json!({ "type": "string" }),
                explode: false,
            });
            params.len() - 1
        });
        let param = &mut params[index];
        param.location = ParamLocation::Path;
        if !param.required && param.default_value().is_none() {
            // The URL cannot be built without it.
            param.required = true;
            notes.path_params_made_required += 1;
        }
        out.push_str(&param.placeholder());
        rest = &rest[open + len + 1..];
    }
    out.push_str(rest);
    out
}

fn lenient_opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Null => None,
        Value::String(s) => Some(s),
        v @ (Value::Number(_) | Value::Bool(_)) => Some(v.to_string()),
        other => {
            return Err(serde::de::Error::custom(format!(
                "expected a string, found {}",
                super::schema::type_name(&other)
            )));
        }
    })
}

fn lenient_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    lenient_opt_string(d).map(Option::unwrap_or_default)
}

fn null_as_empty<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// `score` is an object of numbers, or null; anything else counts as absent.
fn lenient_score<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Score>, D::Error> {
    let Value::Object(map) = Value::deserialize(d)? else { return Ok(None) };
    let num = |k: &str| map.get(k).and_then(Value::as_f64);
    Ok(Some(Score {
        avg_service_level: num("avgServiceLevel"),
        avg_latency_ms: num("avgLatency"),
        avg_success_rate: num("avgSuccessRate"),
        popularity: num("popularityScore"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> (Result<ToolDraft, String>, Notes) {
        let mut notes = Notes::default();
        let tool = super::super::loader::parse_json(json.as_bytes(), "Data", &mut notes).map(|mut t| t.remove(0));
        (tool, notes)
    }

    #[test]
    fn recovers_path_templates_from_convert_code() {
        let (tool, _) = parse(
            r#"{"tool_name": "TheClique", "host": "theclique.p.rapidapi.com", "api_list": [{
                "name": "Rostr Company Details", "url": "https://theclique.p.rapidapi.com/api/v1/rostr/company/wme",
                "description": "Get company details", "method": "GET",
                "required_parameters": [{"name": "company_id", "type": "string", "description": "", "default": "wme"}],
                "optional_parameters": [],
                "convert_code": "import requests\n\nurl = \"https://theclique.p.rapidapi.com/api/v1/rostr/company/{company_id}\"\n"}]}"#,
        );
        let tool = tool.unwrap();
        let api = &tool.apis[0];
        assert_eq!(
            api.url_template.as_deref(),
            Some("https://theclique.p.rapidapi.com/api/v1/rostr/company/{company_id}")
        );
        assert_eq!(api.params[0].location, ParamLocation::Path);
        assert_eq!(api.std_name, "rostr_company_details");
    }

    #[test]
    fn placeholders_match_any_spelling_and_are_rewritten_to_wire_names() {
        let (tool, notes) = parse(
            r#"{"tool_name": "FOAAS", "api_list": [{"name": "Off", "url": "https://x.p.rapidapi.com/off/a/b",
                "required_parameters": [{"name": "from", "type": "STRING", "default": "me"}],
                "optional_parameters": [{"name": "show-slug", "type": "STRING", "default": ""}],
                "convert_code": "url = \"https://x.p.rapidapi.com/off/{is_from}/{show-slug}/{extra}\""}]}"#,
        );
        let api = &tool.unwrap().apis[0];
        assert_eq!(api.url_template.as_deref(), Some("https://x.p.rapidapi.com/off/{from}/{show-slug}/{extra}"));
        let keys: Vec<_> = api.params.iter().map(|p| (p.key.as_str(), p.required)).collect();
        assert_eq!(keys, [("is_from", true), ("show_slug", true), ("extra", true)]);
        assert_eq!(notes.synthesized_path_params, 1);
        assert_eq!(notes.path_params_made_required, 1);
    }

    #[test]
    fn bad_entries_are_skipped_and_the_rest_kept() {
        let (tool, notes) = parse(
            r#"{"tool_name": "T", "score": "n/a", "api_list": [
                {"name": "good", "url": "https://t.example/a", "required_parameters": null},
                {"name": ["not", "a", "string"]},
                {"name": "also good", "description": 5}]}"#,
        );
        let tool = tool.unwrap();
        assert_eq!(tool.apis.len(), 2);
        assert_eq!(tool.apis[1].description, "5");
        assert!(tool.score.is_none());
        assert_eq!(notes.skipped_apis.len(), 1);
        assert!(notes.skipped_apis[0].contains("api_list[1]"), "{:?}", notes.skipped_apis);
    }

    #[test]
    fn files_that_are_not_tools_say_why() {
        assert!(parse("{not json").0.unwrap_err().starts_with("invalid JSON"));
        assert!(parse(r#"{"tool_name": "x", "api_list": 3}"#).0.unwrap_err().contains("not a list"));
        assert_eq!(parse("[1, 2]").0.unwrap_err(), "expected a JSON object, found array");
        assert_eq!(parse(r#"{"tool_name": "x"}"#).0.unwrap_err(), "no `api_list` field");
        assert_eq!(parse(r#"{"api_list": []}"#).0.unwrap_err(), "no `tool_name`");
    }

    #[test]
    fn duplicate_parameter_keys_are_disambiguated() {
        let (tool, notes) = parse(
            r#"{"tool_name": "T", "api_list": [{"name": "a", "url": "https://t.example/a",
                "required_parameters": [{"name": "Page", "type": "NUMBER", "default": "1"}],
                "optional_parameters": [{"name": "page", "type": "NUMBER", "default": "2"}, {"name": "Page", "type": "STRING", "default": ""}]}]}"#,
        );
        let keys: Vec<_> = tool.unwrap().apis[0].params.iter().map(|p| p.key.clone()).collect();
        assert_eq!(keys, ["page", "page_2"]);
        assert_eq!((notes.renamed_params, notes.duplicate_params), (1, 1));
    }
}
