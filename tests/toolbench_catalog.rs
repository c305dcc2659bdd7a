//! The real ToolBench catalog, end to end: every file loads, every name is
//! unique and valid for OpenAI, every documented default validates, and
//! systematically corrupted arguments are rejected for every API.

mod common;

use std::collections::HashSet;

use serde_json::{Map, Value, json};
use toolrouter::args::{self, Options, ProblemKind};
use toolrouter::catalog::names::is_openai_name;
use toolrouter::catalog::schema::{Coerced, coerce, declared_types};
use toolrouter::catalog::{Api, Catalog, Param, Resolution, Sources};

#[test]
fn every_tool_file_loads() {
    let Some(catalog) = common::toolbench_catalog() else { return };
    let stats = catalog.stats();
    assert_eq!(stats.load.files_read, 12_238);
    assert_eq!(stats.tools, 12_238);
    // The dataset README says 42,863: its count skips the hidden file
    // `Artificial_Intelligence_Machine_Learning/.json`, whose one API is here.
    assert_eq!(stats.apis, 42_864);
    assert_eq!(stats.categories.len(), 49);
    assert!(stats.load.skipped_files.is_empty(), "{:?}", stats.load.skipped_files);
    assert!(
        stats.load.skipped_apis.is_empty(),
        "{:?}",
        &stats.load.skipped_apis[..5.min(stats.load.skipped_apis.len())]
    );
    assert_eq!(stats.apis_with_url, stats.apis);
}

#[test]
fn function_names_are_unique_and_valid_for_openai() {
    let Some(catalog) = common::toolbench_catalog() else { return };
    let mut seen = HashSet::new();
    for api in catalog.apis() {
        assert!(is_openai_name(&api.function_name), "{:?} breaks ^[a-zA-Z0-9_-]{{1,64}}$", api.function_name);
        assert!(seen.insert(api.function_name.as_str()), "{} is not unique", api.function_name);
    }
}

#[test]
fn every_api_resolves_by_its_names() {
    let Some(catalog) = common::toolbench_catalog() else { return };
    for api in catalog.apis() {
        let found = catalog.resolve(&format!("  {}  ", api.function_name.to_uppercase()));
        assert_eq!(found.first(), Some(api.id), "{}", api.function_name);
        let tool = catalog.tool_of(api);
        assert!(catalog.resolve_pair(&tool.name, &api.name).is_some(), "{} / {}", tool.name, api.name);
    }
    // A 2023 spelling without `get_` on a digit-leading API name.
    let api =
        catalog.apis().iter().find(|a| a.function_name == "get_120_hour_forecast_for_weather").expect("in the catalog");
    assert_eq!(catalog.resolve("120_hour_forecast_for_weather").first(), Some(api.id));
    // A ToolBench name shared by several APIs is ambiguous, holder first.
    let shared = catalog.resolve("listlocations_for_anadolu");
    assert!(matches!(shared, Resolution::Ambiguous(ref ids, _) if ids.len() == 3), "{shared:?}");
    assert_eq!(catalog.api(shared.first().unwrap()).function_name, "listlocations_for_anadolu");
    assert_eq!(catalog.resolve("invalid_hallucination_function_name"), Resolution::NotFound);
}

#[test]
fn documented_defaults_validate_against_their_schemas() {
    let Some(catalog) = common::toolbench_catalog() else { return };
    let exact = Options { strict: true, coerce: false };
    let mut checked = 0;
    for api in all_apis(catalog) {
        let defaults: Map<String, Value> =
            api.params.iter().filter_map(|p| Some((p.key.clone(), p.default_value()?.clone()))).collect();
        checked += defaults.len();
        if let Err(invalid) = args::validate(api, &Value::Object(defaults), exact) {
            let wrong: Vec<_> = invalid.problems.iter().filter(|p| p.kind != ProblemKind::Missing).collect();
            assert!(wrong.is_empty(), "{}: {wrong:?}", api.function_name);
        }
    }
    assert!(checked > 45_000, "only {checked} defaults checked");
}

#[test]
fn corrupted_arguments_are_rejected_for_every_api() {
    let Some(catalog) = common::toolbench_catalog() else { return };
    let strict = Options::default();
    let (mut missing, mut wrong_type, mut enums, mut unknown) = (0, 0, 0, 0);
    for api in all_apis(catalog) {
        let base = valid_arguments(api);
        let ok = args::validate(api, &Value::Object(base.clone()), strict);
        assert!(ok.is_ok(), "{}: a valid call is refused: {:?}", api.function_name, ok.err());

        for p in api.params.iter().filter(|p| p.required) {
            let mut args = base.clone();
            args.remove(&p.key);
            assert_problem(api, args, p, ProblemKind::Missing);
            missing += 1;
        }
        for p in &api.params {
            let mut args = base.clone();
            args.insert(p.key.clone(), wrong_type_for(p));
            assert_problem(api, args, p, ProblemKind::Type);
            wrong_type += 1;
            if p.schema.get("enum").is_some() {
                let mut args = base.clone();
                args.insert(p.key.clone(), json!("surely-not-an-allowed-value"));
                assert_problem(api, args, p, ProblemKind::Enum);
                enums += 1;
            }
        }
        let mut args = base.clone();
        args.insert("zz_not_a_parameter".into(), json!(1));
        let err = args::validate(api, &Value::Object(args), strict).expect_err(&api.function_name);
        assert!(err.problems.iter().any(|p| p.kind == ProblemKind::Unknown && p.pointer == "/zz_not_a_parameter"));
        unknown += 1;
    }
    eprintln!("rejected: {missing} missing, {wrong_type} wrong type, {enums} enum, {unknown} unknown");
    assert!(missing > 30_000 && wrong_type > 70_000 && enums > 0 && unknown > 42_000);
}

/// The ToolBench APIs plus the embedded examples (which carry the enums).
fn all_apis(catalog: &'static Catalog) -> impl Iterator<Item = &'static Api> {
    static EMBEDDED: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    let embedded = EMBEDDED.get_or_init(|| Catalog::load(&Sources::default()).unwrap());
    catalog.apis().iter().chain(embedded.apis())
}

fn assert_problem(api: &Api, args: Map<String, Value>, p: &Param, kind: ProblemKind) {
    let err = args::validate(api, &Value::Object(args.clone()), Options::default())
        .expect_err(&format!("{} accepted {kind:?} for {}: {args:?}", api.function_name, p.key));
    let pointer = format!("/{}", p.key);
    assert!(
        err.problems.iter().any(|x| x.kind == kind && x.pointer == pointer),
        "{}: expected {kind:?} at {pointer}, got {:?}",
        api.function_name,
        err.problems
    );
}

/// Arguments that should pass: defaults, else a value built from the schema.
fn valid_arguments(api: &Api) -> Map<String, Value> {
    api.params.iter().filter(|p| p.required).map(|p| (p.key.clone(), sample(&p.schema))).collect()
}

fn sample(schema: &Value) -> Value {
    if let Some(v) = schema.get("default").or_else(|| schema.get("enum").and_then(|e| e.get(0))) {
        return v.clone();
    }
    if let Some(v) = schema.get("examples").and_then(|e| e.get(0)) {
        return v.clone();
    }
    match (schema.get("format").and_then(Value::as_str), schema.get("pattern").and_then(Value::as_str)) {
        (Some("date"), _) => return json!("2024-01-31"),
        (_, Some(p)) if p.contains(':') => return json!("12:30"),
        (_, Some("^[A-Z]{3}$")) => return json!("USD"),
        (_, Some(p)) if p.contains("{2}") => return json!("DE"),
        _ => {}
    }
    let minimum = schema.get("minimum").cloned().unwrap_or(json!(1));
    match declared_types(schema).first().map(|t| t.as_str()) {
        Some("number" | "integer") => minimum,
        Some("boolean") => json!(true),
        Some("array") => json!([sample(schema.get("items").unwrap_or(&json!({"type": "string"})))]),
        Some("object") => json!({}),
        _ => json!("sample"),
    }
}

/// A value of a type the parameter does not take and no safe coercion fixes.
fn wrong_type_for(p: &Param) -> Value {
    [json!({"corrupt": true}), json!([{"corrupt": true}]), json!("corrupt-value"), json!(true)]
        .into_iter()
        .find(|v| coerce(v, &p.schema) == Coerced::Impossible)
        .unwrap_or_else(|| panic!("no wrong type for {:?}", p.schema))
}
