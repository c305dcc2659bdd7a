//! JSON Schema as tools in the wild write it, read as draft 2020-12.
//!
//! MCP servers, OpenAPI specs and clients' function definitions declare
//! their parameters in every dialect there has been, often mixed: draft 4's
//! boolean `exclusiveMinimum` under a 2020-12 `$schema`, draft 3's
//! `required: true` on a property, OpenAPI 3.0's `nullable`, upper-case or
//! Python type names (`"STRING"`, `"float"`, `"dict"`), a bare type name
//! where a schema belongs (`"properties": {"city": "string"}`), tuple
//! `items`. [`normalize`] rewrites each form into its 2020-12 equivalent,
//! once per distinct schema (callers keep the result); what it cannot
//! read it drops rather than refuses, and [`check`] then tells whether the
//! result is a schema at all. No crate does this: `jsonschema` validates
//! one declared dialect and refuses mixtures, which is what real tool
//! lists are.

use serde_json::{Map, Value, json};

/// Deepest nesting rewritten; deeper subschemas become `{}` (any value).
/// serde_json refuses documents nested past 128 anyway.
const MAX_DEPTH: usize = 64;

/// Keywords whose value is one schema.
const ONE_SCHEMA: [&str; 11] = [
    "additionalProperties",
    "additionalItems",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];
/// Keywords whose value is a map of schemas.
const SCHEMA_MAPS: [&str; 5] = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];
/// Keywords whose value is a list of schemas.
const SCHEMA_LISTS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value must be a non-negative integer.
const COUNTS: [&str; 8] =
    ["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains"];
/// Keywords whose value must be a number.
const NUMBERS: [&str; 5] = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"];

/// `schema` in draft 2020-12's forms (see the module documentation).
pub(crate) fn normalize(schema: &Value) -> Value {
    let mut out = schema.clone();
    rewrite(&mut out, 0);
    out
}

/// Whether `schema` (normalized) is valid against draft 2020-12's
/// meta-schema; else why not, in words. Cheap next to compiling it, which
/// can still fail (a regex the engine refuses, a `$ref` that resolves
/// nowhere): callers compile when a call is checked.
pub(crate) fn check(schema: &Value) -> Result<(), String> {
    jsonschema::draft202012::meta::validate(schema).map_err(|e| {
        let at = e.instance_path().to_string();
        if at.is_empty() { e.to_string() } else { format!("at {at}: {e}") }
    })
}

/// The JSON Schema type a type name in the wild means (`None`: any type).
fn type_name(name: &str) -> Option<&'static str> {
    Some(match name.trim().to_ascii_lowercase().as_str() {
        "string" | "str" | "text" | "char" | "date" | "datetime" | "time" | "uuid" => "string",
        "number" | "float" | "double" | "decimal" | "real" => "number",
        "integer" | "int" | "long" | "int32" | "int64" => "integer",
        "boolean" | "bool" => "boolean",
        "object" | "dict" | "map" | "hash" | "record" => "object",
        "array" | "list" | "tuple" | "set" => "array",
        "null" | "none" | "nil" => "null",
        _ => return None,
    })
}

fn rewrite(schema: &mut Value, depth: usize) {
    if depth > MAX_DEPTH {
        *schema = json!({});
        return;
    }
    let map = match schema {
        Value::Bool(_) => return,
        Value::Object(map) => map,
        // A bare type name where a schema belongs: `{"city": "string"}`.
        Value::String(name) => {
            *schema = type_name(name).map_or_else(|| json!({}), |t| json!({"type": t}));
            return;
        }
        _ => {
            *schema = json!({});
            return;
        }
    };
    map.remove("$schema");
    if map.get("id").is_some_and(Value::is_string) && !map.contains_key("$id") {
        map.remove("id");
    }
    types(map);
    bounds(map);
    lists(map);
    if let Some(Value::Array(_)) = map.get("items") {
        // Tuple `items` (drafts 4–2019-09) is `prefixItems`; its
        // `additionalItems` is then what `items` says.
        let items = map.remove("items").expect("there");
        map.insert("prefixItems".into(), items);
        if let Some(rest) = map.remove("additionalItems") {
            map.insert("items".into(), rest);
        }
    } else {
        map.remove("additionalItems");
    }
    if let Some(Value::Object(dependencies)) = map.remove("dependencies") {
        for (name, dependency) in dependencies {
            let into = if dependency.is_array() { "dependentRequired" } else { "dependentSchemas" };
            let entry = map.entry(into).or_insert_with(|| json!({}));
            if let Some(entry) = entry.as_object_mut() {
                entry.insert(name, dependency);
            }
        }
    }
    required_on_properties(map);
    for key in ONE_SCHEMA.iter().chain(["items"].iter()) {
        if let Some(child) = map.get_mut(*key) {
            rewrite(child, depth + 1);
        }
    }
    for key in SCHEMA_MAPS {
        match map.get_mut(key) {
            Some(Value::Object(children)) => children.values_mut().for_each(|c| rewrite(c, depth + 1)),
            Some(_) => {
                map.remove(key);
            }
            None => {}
        }
    }
    for key in SCHEMA_LISTS {
        match map.get_mut(key) {
            Some(Value::Array(children)) => children.iter_mut().for_each(|c| rewrite(c, depth + 1)),
            Some(_) => {
                map.remove(key);
            }
            None => {}
        }
    }
}

/// `type` as JSON Schema names it: lower-case, Python and other names
/// mapped, unknown ones (`any`) dropped; OpenAPI 3.0's `nullable` added.
fn types(map: &mut Map<String, Value>) {
    let nullable = map.remove("nullable").and_then(|v| v.as_bool()) == Some(true);
    let mut names: Vec<&'static str> = match map.remove("type") {
        Some(Value::String(name)) => type_name(&name).into_iter().collect(),
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).filter_map(type_name).collect(),
        _ => Vec::new(),
    };
    let any = names.is_empty();
    if nullable && !any {
        names.push("null");
    }
    let mut seen = Vec::new();
    names.retain(|n| {
        let first = !seen.contains(n);
        seen.push(n);
        first
    });
    match names.as_slice() {
        [] => {}
        [one] => {
            map.insert("type".into(), json!(one));
        }
        many => {
            map.insert("type".into(), json!(many));
        }
    }
}

/// Draft 4's boolean `exclusiveMinimum`/`exclusiveMaximum` as the bound
/// itself; numbers written as text read as numbers; counts that are not
/// counts dropped.
fn bounds(map: &mut Map<String, Value>) {
    for (exclusive, bound) in [("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")] {
        if let Some(Value::Bool(is)) = map.get(exclusive) {
            let is = *is;
            map.remove(exclusive);
            if is && let Some(limit) = map.remove(bound) {
                map.insert(exclusive.into(), limit);
            }
        }
    }
    for key in NUMBERS {
        match map.get(key) {
            Some(Value::Number(_)) | None => {}
            Some(Value::String(text)) => match text.trim().parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
                Some(n) => {
                    map.insert(key.into(), Value::Number(n));
                }
                None => {
                    map.remove(key);
                }
            },
            Some(_) => {
                map.remove(key);
            }
        }
    }
    if map.get("multipleOf").and_then(Value::as_f64).is_some_and(|m| m <= 0.0) {
        map.remove("multipleOf");
    }
    for key in COUNTS {
        let count = match map.get(key) {
            None => continue,
            Some(Value::String(text)) => text.trim().parse::<u64>().ok(),
            Some(v) => v.as_u64().or_else(|| v.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0).map(|f| f as u64)),
        };
        match count {
            Some(n) => map.insert(key.into(), json!(n)),
            None => map.remove(key),
        };
    }
}

/// Keywords that take a list, given one value (`"enum": "a"`,
/// `"examples": 3`, `"required": "city"`), as a list; a `required`
/// list holds names only.
fn lists(map: &mut Map<String, Value>) {
    for key in ["enum", "examples", "required"] {
        match map.get_mut(key) {
            None | Some(Value::Array(_)) => {}
            // Draft 3's `required: true` on a property is read by the parent.
            Some(Value::Bool(_)) if key == "required" => {}
            Some(Value::Null) => {
                map.remove(key);
            }
            Some(one) => {
                let one = one.take();
                map.insert(key.into(), Value::Array(vec![one]));
            }
        }
    }
    if let Some(Value::Array(names)) = map.get_mut("required") {
        names.retain(Value::is_string);
        let mut seen = std::collections::HashSet::new();
        names.retain(|n| seen.insert(n.as_str().unwrap_or_default().to_string()));
    }
}

/// Draft 3's `required: true` on a property, as the object's `required` list.
fn required_on_properties(map: &mut Map<String, Value>) {
    let mut named = Vec::new();
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if let Some(Value::Bool(true)) = property.as_object_mut().and_then(|p| p.remove("required")) {
                named.push(Value::String(name.clone()));
            }
        }
    }
    if named.is_empty() {
        if matches!(map.get("required"), Some(Value::Bool(_))) {
            map.remove("required");
        }
        return;
    }
    let list = map.entry("required").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let list = list.as_array_mut().expect("an array");
    for name in named {
        if !list.contains(&name) {
            list.push(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draft_4_forms_under_a_newer_schema_are_read_as_meant() {
        // As the pdf-reader MCP server writes it.
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "id": "pages", "type": "object",
            "properties": {
                "page": {"type": "integer", "minimum": 0, "exclusiveMinimum": true},
                "scale": {"type": "number", "maximum": 5, "exclusiveMaximum": false},
                "tags": {"type": "array", "items": [{"type": "string"}], "additionalItems": false},
                "ref": {"$ref": "#/definitions/Ref"}
            },
            "definitions": {"Ref": {"type": "STRING", "required": true}}
        });
        let out = normalize(&schema);
        assert_eq!(out["properties"]["page"], json!({"type": "integer", "exclusiveMinimum": 0}));
        assert_eq!(out["properties"]["scale"], json!({"type": "number", "maximum": 5}));
        assert_eq!(
            out["properties"]["tags"],
            json!({"type": "array", "prefixItems": [{"type": "string"}], "items": false})
        );
        assert!(out.get("$schema").is_none() && out.get("id").is_none());
        assert_eq!(out["definitions"]["Ref"], json!({"type": "string"}));
        check(&out).unwrap();
        let validator = jsonschema::draft202012::new(&out).unwrap();
        assert!(validator.is_valid(&json!({"page": 1, "ref": "x"})));
        assert!(!validator.is_valid(&json!({"page": 0})), "0 is excluded");
        assert!(!validator.is_valid(&json!({"ref": 3})), "the $ref still resolves");
        assert!(check(&schema).is_err() || jsonschema::draft202012::new(&schema).is_err());
    }

    #[test]
    fn type_names_and_shorthands_in_the_wild() {
        let schema = json!({
            "type": "dict",
            "properties": {
                "city": "string", "n": {"type": "int", "minimum": "1", "maxLength": "x"},
                "x": {"type": "float", "nullable": true}, "any": {"type": "any"},
                "who": {"type": "string", "required": true}, "mode": {"enum": "fast"}
            },
            "required": "n"
        });
        let out = normalize(&schema);
        assert_eq!(out["type"], "object");
        assert_eq!(out["properties"]["city"], json!({"type": "string"}));
        assert_eq!(out["properties"]["n"], json!({"type": "integer", "minimum": 1.0}));
        assert_eq!(out["properties"]["x"], json!({"type": ["number", "null"]}));
        assert_eq!(out["properties"]["any"], json!({}));
        assert_eq!(out["properties"]["mode"], json!({"enum": ["fast"]}));
        assert_eq!(out["required"], json!(["n", "who"]));
        check(&out).unwrap();
    }

    #[test]
    fn what_cannot_be_read_is_dropped_and_loops_still_compile() {
        let looped = json!({"type": "object", "properties": {"node": {"$ref": "#"}}, "properties_extra": 1});
        check(&normalize(&looped)).unwrap();
        let junk = json!({"type": "object", "properties": [1, 2], "allOf": {"a": 1}, "minimum": {}, "items": 3});
        let out = normalize(&junk);
        assert_eq!(out, json!({"type": "object", "items": {}}));
        check(&out).unwrap();
        // A bad regex survives normalizing; compiling says so.
        assert!(jsonschema::draft202012::new(&normalize(&json!({"type": "string", "pattern": "("}))).is_err());
    }
}
