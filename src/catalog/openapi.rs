//! OpenAPI 3.x specs (YAML or JSON) as catalog tools.
//!
//! One spec is one tool (`info.title`, `info.description`, category from
//! `info.x-category`, else [`DEFAULT_OPENAPI_CATEGORY`]); every operation
//! is one API. Parameters (path-level and operation-level, `$ref`s to
//! `#/components/...` resolved) and the properties of an
//! `application/json` request body become the function's arguments;
//! `servers[0]` (with its variables' defaults) gives the base URL.
//!
//! Hand-written on `serde_json::Value` rather than a typed OpenAPI crate:
//! only a dozen fields matter here, and one walker then reads 3.0 and 3.1
//! alike (the typed crates each cover one of them).

use super::dialect::normalize;
use serde_json::{Map, Value, json};

use super::draft::{ApiDraft, Notes, ToolDraft};
use super::names::{standardize, standardize_member};
use super::{Method, Origin, Param, ParamLocation};

/// Category of an OpenAPI tool whose spec names none (`info.x-category`).
pub(crate) const DEFAULT_OPENAPI_CATEGORY: &str = "OpenAPI";

/// How deep `$ref`s are followed inside one schema before giving up (cycles).
const MAX_REF_DEPTH: usize = 16;

const METHODS: [&str; 7] = ["get", "post", "put", "patch", "delete", "head", "options"];

/// Whether a parsed document looks like an OpenAPI or Swagger spec.
pub(crate) fn is_spec(doc: &Value) -> bool {
    doc.get("openapi").is_some() || doc.get("swagger").is_some()
}

/// Parses a spec into one tool. `Err` says why the whole spec is unusable.
pub(crate) fn parse(doc: &Value, origin: Origin, notes: &mut Notes) -> Result<ToolDraft, String> {
    if let Some(v) = doc.get("swagger") {
        return Err(format!("Swagger {} is not supported; convert the spec to OpenAPI 3", short_str(v)));
    }
    // YAML reads an unquoted `openapi: 3.0` as a number.
    let version = doc.get("openapi").map(short_str).unwrap_or_default();
    if !version.starts_with("3.") {
        return Err(format!("unsupported OpenAPI version {version:?} (expected 3.x)"));
    }
    let info = doc.get("info").unwrap_or(&Value::Null);
    let title = info.get("title").and_then(Value::as_str).map(str::trim).filter(|t| !t.is_empty());
    let title = title.ok_or("`info.title` is missing")?.to_string();
    let base_url = server_url(doc);
    let host = base_url.as_deref().and_then(|u| url::Url::parse(u).ok()).and_then(|u| u.host_str().map(str::to_string));
    if host.is_none() {
        notes.skip_api("no absolute `servers[0].url`: the spec's APIs have no URL".to_string());
    }
    let paths = doc.get("paths").and_then(Value::as_object).ok_or("`paths` is missing")?;
    let resolver = Refs { doc };
    let mut apis = Vec::new();
    for (path, item) in paths {
        let item = resolver.deref(item);
        let shared = item.get("parameters").and_then(Value::as_array).cloned().unwrap_or_default();
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            match operation(&resolver, path, method, op, &shared, base_url.as_deref(), notes) {
                Ok(api) => apis.push(api),
                Err(reason) => notes.skip_api(format!("{} {path}: {reason}", method.to_uppercase())),
            }
        }
    }
    Ok(ToolDraft {
        std_name: standardize(&title),
        name: title,
        category: info.get("x-category").and_then(Value::as_str).unwrap_or(DEFAULT_OPENAPI_CATEGORY).to_string(),
        description: info.get("description").and_then(Value::as_str).unwrap_or("").trim().to_string(),
        host,
        score: None,
        origin,
        apis,
    })
}

/// `servers[0].url` with server variables replaced by their defaults.
fn server_url(doc: &Value) -> Option<String> {
    let server = doc.get("servers")?.get(0)?;
    let mut url = server.get("url")?.as_str()?.trim_end_matches('/').to_string();
    if let Some(vars) = server.get("variables").and_then(Value::as_object) {
        for (name, var) in vars {
            let default = var.get("default").and_then(Value::as_str).unwrap_or("");
            url = url.replace(&format!("{{{name}}}"), default);
        }
    }
    Some(url)
}

fn operation(
    refs: &Refs,
    path: &str,
    method: &str,
    op: &Value,
    shared: &[Value],
    base_url: Option<&str>,
    notes: &mut Notes,
) -> Result<ApiDraft, String> {
    let op = refs.deref(op);
    let name =
        op.get("operationId").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| format!("{method} {path}"));
    let text = |k: &str| op.get(k).and_then(Value::as_str).unwrap_or("").trim().to_string();
    let description = match (text("summary"), text("description")) {
        (s, d) if s.is_empty() => d,
        (s, d) if d.is_empty() || d.starts_with(&s) => s,
        (s, d) => format!("{s}. {d}"),
    };

    // Operation parameters override path-level ones with the same name and location.
    let own = op.get("parameters").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut params: Vec<Param> = Vec::new();
    for raw in own.iter().chain(shared) {
        let raw = refs.deref(raw);
        let (Some(pname), Some(location)) =
            (raw.get("name").and_then(Value::as_str), raw.get("in").and_then(Value::as_str))
        else {
            return Err("a parameter lacks `name` or `in`".to_string());
        };
        let location = match location {
            "query" => ParamLocation::Query,
            "path" => ParamLocation::Path,
            "header" => ParamLocation::Header,
            other => {
                notes.skip_api(format!("{} {path}: `{other}` parameter {pname:?} ignored", method.to_uppercase()));
                continue;
            }
        };
        if params.iter().any(|p| p.name == pname && p.location == location) {
            continue;
        }
        let mut schema = normalize(&refs.inline(raw.get("schema").unwrap_or(&json!({"type": "string"})), 0));
        if let (Some(example), Value::Object(map)) = (raw.get("example"), &mut schema) {
            map.entry("examples").or_insert_with(|| json!([example]));
        }
        let explode = raw.get("explode").and_then(Value::as_bool).unwrap_or(true);
        params.push(Param {
            name: pname.to_string(),
            key: property_key(pname),
            location,
            required: location == ParamLocation::Path || raw.get("required").and_then(Value::as_bool).unwrap_or(false),
            description: raw.get("description").and_then(Value::as_str).unwrap_or("").trim().to_string(),
            schema,
            explode,
        });
    }
    if let Some(body) = op.get("requestBody") {
        body_params(refs, refs.deref(body), &mut params)?;
    }
    dedupe_keys(&mut params);
    Ok(ApiDraft {
        std_name: standardize_member(&name),
        name,
        description,
        method: Method::parse(method).expect("METHODS are valid"),
        url_template: base_url.filter(|u| u.contains("://")).map(|u| format!("{u}{path}")),
        params,
    })
}

/// Flattens an `application/json` body's top-level properties into
/// parameters (a non-object body becomes one `body` parameter).
fn body_params(refs: &Refs, body: &Value, params: &mut Vec<Param>) -> Result<(), String> {
    let content = body.get("content").and_then(Value::as_object).ok_or("request body without `content`")?;
    let Some(media) = content.iter().find(|(k, _)| k.starts_with("application/json")).map(|(_, v)| v) else {
        let kinds: Vec<&str> = content.keys().map(String::as_str).collect();
        return Err(format!("unsupported request body type {}", kinds.join(", ")));
    };
    let schema = normalize(&refs.inline(media.get("schema").unwrap_or(&json!({})), 0));
    let body_required = body.get("required").and_then(Value::as_bool).unwrap_or(false);
    match schema.get("properties").and_then(Value::as_object) {
        Some(props) => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for (name, prop) in props {
                params.push(Param {
                    name: name.clone(),
                    key: property_key(name),
                    location: ParamLocation::Body,
                    required: body_required && required.contains(&name.as_str()),
                    description: prop.get("description").and_then(Value::as_str).unwrap_or("").trim().to_string(),
                    schema: prop.clone(),
                    explode: true,
                });
            }
        }
        None => params.push(Param {
            name: String::new(),
            key: "body".to_string(),
            location: ParamLocation::Body,
            required: body_required,
            description: body.get("description").and_then(Value::as_str).unwrap_or("Request body.").to_string(),
            schema,
            explode: true,
        }),
    }
    Ok(())
}

/// A parameter name as a schema property: kept when it is a plain
/// identifier (`[A-Za-z0-9_.-]`), standardized otherwise.
fn property_key(name: &str) -> String {
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')) {
        name.to_string()
    } else {
        standardize_member(name)
    }
}

/// The same key in two locations (`id` in the path and in the body): later ones get a suffix.
fn dedupe_keys(params: &mut [Param]) {
    for i in 1..params.len() {
        if params[..i].iter().any(|p| p.key == params[i].key) {
            let base = params[i].key.clone();
            let key =
                (2..).map(|n| format!("{base}_{n}")).find(|k| !params.iter().any(|p| &p.key == k)).expect("unbounded");
            params[i].key = key;
        }
    }
}

/// Local `$ref` resolution within one document.
struct Refs<'a> {
    doc: &'a Value,
}

impl Refs<'_> {
    /// Follows a top-level `$ref` chain (bounded), returning the target.
    fn deref<'v>(&'v self, mut value: &'v Value) -> &'v Value {
        for _ in 0..MAX_REF_DEPTH {
            match value.get("$ref").and_then(Value::as_str).and_then(|r| self.target(r)) {
                Some(target) => value = target,
                None => break,
            }
        }
        value
    }

    fn target(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        self.doc.pointer(pointer)
    }

    /// A copy of `schema` with every local `$ref` inlined, OpenAPI 3.0's
    /// `nullable` turned into a JSON Schema type list, and OpenAPI-only
    /// keywords dropped (its callers then read it in draft 2020-12's forms,
    /// [`crate::catalog::dialect::normalize`]: OpenAPI 3.0's boolean
    /// `exclusiveMinimum`, say). References deeper than [`MAX_REF_DEPTH`] (cycles)
    /// and external ones become `{}` (any value).
    fn inline(&self, schema: &Value, depth: usize) -> Value {
        match schema {
            Value::Object(map) => {
                if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                    return match self.target(reference) {
                        Some(target) if depth < MAX_REF_DEPTH => self.inline(target, depth + 1),
                        _ => json!({}),
                    };
                }
                let mut out = Map::with_capacity(map.len());
                for (k, v) in map {
                    match k.as_str() {
                        "nullable" | "discriminator" | "xml" | "externalDocs" | "example" => {}
                        _ => {
                            out.insert(k.clone(), self.inline(v, depth));
                        }
                    }
                }
                if map.get("nullable").and_then(Value::as_bool) == Some(true)
                    && let Some(Value::String(ty)) = out.get("type").cloned()
                {
                    out.insert("type".into(), json!([ty, "null"]));
                }
                if let Some(example) = map.get("example") {
                    out.entry("examples").or_insert_with(|| json!([example]));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| self.inline(v, depth)).collect()),
            other => other.clone(),
        }
    }
}

fn short_str(v: &Value) -> String {
    v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r##"
openapi: 3.0.3
info: {title: Pet Store, description: Pets., x-category: Animals}
servers: [{url: "https://{env}.pets.example/v1", variables: {env: {default: api}}}]
components:
  parameters:
    Limit: {name: limit, in: query, schema: {type: integer, default: 10, maximum: 100}}
  schemas:
    Pet: {type: object, required: [name], properties: {name: {type: string}, tag: {type: string, nullable: true}, parent: {$ref: "#/components/schemas/Pet"}}}
paths:
  /pets/{petId}:
    parameters: [{name: petId, in: path, schema: {type: string}}]
    get:
      operationId: showPetById
      summary: Info for a pet
      parameters: [{$ref: "#/components/parameters/Limit"}, {name: X-Trace, in: header}, {name: session, in: cookie}]
  /pets:
    post:
      summary: Create a pet
      requestBody: {required: true, content: {application/json: {schema: {$ref: "#/components/schemas/Pet"}}}}
    put:
      requestBody: {content: {application/xml: {schema: {type: string}}}}
"##;

    fn load(text: &str) -> (Result<ToolDraft, String>, Notes) {
        let doc: Value = serde_saphyr::from_str(text).unwrap();
        let mut notes = Notes::default();
        (parse(&doc, Origin::OpenApi, &mut notes), notes)
    }

    #[test]
    fn operations_become_apis() {
        let (tool, notes) = load(SPEC);
        let tool = tool.unwrap();
        assert_eq!((tool.name.as_str(), tool.category.as_str()), ("Pet Store", "Animals"));
        assert_eq!(tool.host.as_deref(), Some("api.pets.example"));
        assert_eq!(tool.apis.len(), 2, "the XML-only PUT is skipped");
        let get = tool.apis.iter().find(|a| a.name == "showPetById").unwrap();
        assert_eq!(get.std_name, "showpetbyid");
        assert_eq!(get.url_template.as_deref(), Some("https://api.pets.example/v1/pets/{petId}"));
        let keys: Vec<_> = get.params.iter().map(|p| (p.key.as_str(), p.location, p.required)).collect();
        assert_eq!(
            keys,
            [
                ("limit", ParamLocation::Query, false),
                ("X-Trace", ParamLocation::Header, false),
                ("petId", ParamLocation::Path, true)
            ]
        );
        assert_eq!(get.params[0].schema["default"], json!(10));
        let post = tool.apis.iter().find(|a| a.method == Method::Post).unwrap();
        assert_eq!(post.name, "post /pets");
        let name = post.params.iter().find(|p| p.key == "name").unwrap();
        assert!(name.required && name.location == ParamLocation::Body);
        let tag = post.params.iter().find(|p| p.key == "tag").unwrap();
        assert_eq!(tag.schema["type"], json!(["string", "null"]));
        assert_eq!(notes.skipped_apis.len(), 2, "{:?}", notes.skipped_apis);
    }

    #[test]
    fn unsupported_documents_say_why() {
        assert!(load("swagger: '2.0'\ninfo: {title: x}").0.unwrap_err().contains("Swagger 2.0"));
        assert!(load("openapi: 2.5\ninfo: {title: x}").0.unwrap_err().contains("unsupported OpenAPI version"));
        assert!(load("openapi: 3.1.0\ninfo: {}\npaths: {}").0.unwrap_err().contains("info.title"));
    }
}
