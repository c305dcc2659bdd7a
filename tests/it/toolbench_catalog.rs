//! The real ToolBench catalog, end to end: every file loads, every name is
//! unique and valid for OpenAI, every documented default validates,
//! systematically corrupted arguments are rejected for every API, and
//! every API's URL template is filled by arguments built from its schema
//! and read back by the replay server.

use crate::common;

use std::collections::HashSet;

use serde_json::{Map, Value, json};
use toolrouter::args::{self, Options, ProblemKind};
use toolrouter::catalog::names::is_openai_name;
use toolrouter::catalog::schema::{Coerced, coerce, declared_types};
use toolrouter::catalog::{Api, Catalog, Param, ParamLocation, Resolution, Sources};
use toolrouter::server::replay_server::Routes;
use toolrouter::upstream::request::{self, UrlTemplate};

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

/// For every API with a URL: arguments built from its schema (every path
/// parameter given, required or not) pass validation and fill every
/// placeholder of the template; and unless the template is malformed (a
/// placeholder in the host or a query key), the request reads back,
/// through the replay server's routes, as the same API and the same
/// arguments.
#[test]
fn every_url_template_is_filled_and_read_back() {
    let Some(catalog) = common::toolbench_catalog() else { return };
    let strict = Options::default();
    let routes = Routes::new(catalog);
    let (mut templated, mut renamed, mut shared_routes, mut checked, mut malformed) = (0, 0, 0, 0, 0);
    let mut failures = Vec::new();
    for api in catalog.apis().iter().filter(|a| a.url_template.is_some()) {
        let path_params: Vec<&Param> = api.params.iter().filter(|p| p.location == ParamLocation::Path).collect();
        templated += usize::from(!path_params.is_empty());
        renamed += usize::from(path_params.iter().any(|p| p.key != p.name));
        let mut arguments = valid_arguments(api);
        for (i, p) in path_params.iter().enumerate() {
            let free_text = ["format", "pattern", "enum"].iter().all(|k| p.schema.get(k).is_none());
            let value = match declared_types(&p.schema).first().map(|t| t.as_str()) {
                Some("string") | None if free_text => json!(format!("value-{i}")),
                _ => sample(&p.schema),
            };
            arguments.insert(p.key.clone(), value);
        }
        let valid = match args::validate(api, &Value::Object(arguments), strict) {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{}: invalid: {e}", api.function_name));
                continue;
            }
        };
        let call = match request::build(api, &valid.arguments, None) {
            Ok(c) => c,
            Err(_) if UrlTemplate::of(api).is_none() => {
                malformed += 1;
                continue;
            }
            Err(e) => {
                failures.push(format!("{}: {e}", api.function_name));
                continue;
            }
        };
        // No placeholder is left, under either name, raw or percent-encoded.
        let url = call.url.as_str();
        let left = |n: &String| url.contains(&format!("{{{n}}}")) || url.contains(&format!("%7B{n}%7D"));
        if let Some(p) = path_params.iter().find(|p| left(&p.name) || left(&p.key)) {
            failures.push(format!("{}: `{}` is left in {url}", api.function_name, p.placeholder()));
            continue;
        }
        if UrlTemplate::of(api).is_none() {
            malformed += 1;
            continue;
        }
        let query: Vec<(String, String)> = call.url.query_pairs().map(|(k, v)| (k.into(), v.into())).collect();
        let best = routes.ranked(&call.api_host, call.method.as_str(), call.url.path(), &query).into_iter().next();
        let Some((found, path)) = best else {
            failures.push(format!("{}: no route for {}", api.function_name, call.url));
            continue;
        };
        if found != api.id {
            // Another API that makes this very request from what it reads
            // back (the same endpoint documented twice, with other names or
            // a fixed value): nothing, for the replay server as for the API
            // itself, tells the two apart.
            let other = catalog.api(found);
            let read = request::arguments(other, &path, &query, call.body.as_ref().and_then(Value::as_object));
            if request::build(other, &read, None).is_ok_and(|again| same_request(&again.url, &call.url)) {
                shared_routes += 1;
                continue;
            }
            failures.push(format!("{}: routed to {} for {}", api.function_name, other.function_name, call.url));
            continue;
        }
        let back = request::arguments(api, &path, &query, call.body.as_ref().and_then(Value::as_object));
        for (key, sent) in &valid.arguments {
            if back.get(key).map(as_text) != Some(as_text(sent)) {
                failures.push(format!("{}: `{key}` sent {sent}, read back {:?}", api.function_name, back.get(key)));
            }
        }
        checked += 1;
    }
    eprintln!(
        "URL templates: {checked} APIs filled and read back, {templated} with path parameters, \
         {renamed} of them renamed by standardization, {shared_routes} read back as another API making the same request, \
         {malformed} with a malformed template (not read back)"
    );
    assert!(failures.is_empty(), "{} failures, first: {:#?}", failures.len(), &failures[..failures.len().min(10)]);
    assert!(templated > 4_000 && renamed > 1_700, "{templated} templated, {renamed} renamed");
    assert!(malformed < 100, "{malformed} malformed templates");
}

/// Two URLs an API cannot tell apart: the same path (a trailing slash
/// aside) and the same query pairs in any order.
fn same_request(a: &url::Url, b: &url::Url) -> bool {
    let pairs = |u: &url::Url| {
        let mut p: Vec<(String, String)> = u.query_pairs().map(|(k, v)| (k.into(), v.into())).collect();
        p.sort();
        p
    };
    a.host() == b.host() && a.path().trim_end_matches('/') == b.path().trim_end_matches('/') && pairs(a) == pairs(b)
}

/// A value as it reads back from a URL: text, arrays comma-joined.
fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(as_text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
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

/// Catalog placeholders (`"US"`, `2022`) stand only where the request says
/// nothing of their parameter: over every required parameter of the
/// catalog with a documented default, a silent request keeps the default,
/// and a request naming another year or country gets its own.
#[test]
fn every_default_stands_for_silence_and_gives_way_to_the_request() {
    use toolrouter::planner::arguments::explicit_values;
    use toolrouter::planner::defaults::{Fallback, fallback};
    let Some(catalog) = common::toolbench_catalog() else { return };
    let silent = explicit_values("Please help me with this.");
    let (mut defaults, mut years, mut countries) = (0, 0, 0);
    for api in catalog.apis() {
        for p in api.params.iter().filter(|p| p.required && p.default_value().is_some_and(|d| !d.is_null())) {
            defaults += 1;
            let default = p.default_value().unwrap();
            let name = format!("{} {}", api.function_name, p.key);
            assert_eq!(fallback(p, &silent), Fallback::Default(default.clone()), "{name}");
            let number = default.as_f64().or_else(|| default.as_str().and_then(|s| s.trim().parse().ok()));
            if let Some(year) = number.filter(|y: &f64| y.fract() == 0.0 && (1900.0..=2100.0).contains(y)) {
                years += 1;
                let other = if year == 2024.0 { 2023.0 } else { 2024.0 };
                let Fallback::Request(given) = fallback(p, &explicit_values(&format!("For the year {other}."))) else {
                    panic!("{name}: the default {default} stood against {other}")
                };
                let given = given.as_f64().or_else(|| given.as_str().and_then(|s| s.parse().ok()));
                assert_eq!(given, Some(other), "{name}");
            }
            let code = default.as_str().filter(|s| s.len() == 2 && s.chars().all(|c| c.is_ascii_alphabetic()));
            if let Some(code) = code.filter(|_| p.key.to_ascii_lowercase().contains("country")) {
                let (asked, expected) =
                    if code.eq_ignore_ascii_case("JP") { ("Germany", "DE") } else { ("Japan", "JP") };
                if celes::Country::from_alpha2(code.to_ascii_uppercase()).is_err() {
                    continue; // not an ISO code ("UK"): nothing to compare with
                }
                countries += 1;
                let Fallback::Request(given) = fallback(p, &explicit_values(&format!("Something in {asked}."))) else {
                    panic!("{name}: the default {default} stood against {asked}")
                };
                assert!(given.as_str().is_some_and(|g| g.eq_ignore_ascii_case(expected)), "{name}: {given}");
            }
        }
    }
    eprintln!("{defaults} required parameters with a default; {years} year-like, {countries} country codes");
    assert!(years >= 20 && countries >= 20, "{years} years, {countries} countries");
}

/// A reload takes the tools of unchanged files from the catalog in use: on
/// the whole catalog, with files changed, removed, added and unreadable
/// beside it, the result is what a fresh load makes (every tool, API,
/// function name and report entry), and only the changed files are read.
#[test]
fn a_reload_makes_what_a_fresh_load_makes() {
    let Some(dir) = common::toolbench_dir() else { return };
    let changing = tempfile::tempdir().unwrap();
    // A category copied beside the catalog: the same tools twice, so names
    // are disambiguated across sources.
    let weather = changing.path().join("Weather");
    std::fs::create_dir(&weather).unwrap();
    for entry in std::fs::read_dir(dir.join("tools/Weather")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, weather.join(path.file_name().unwrap())).unwrap();
    }
    let sources = Sources {
        paths: vec![dir.join("tools"), changing.path().to_path_buf(), dir.join("tools_dropped_compact.jsonl")],
        ..Sources::default()
    };
    let first = Catalog::load(&sources).unwrap();
    let unchanged = first.reload(&sources).unwrap();
    assert_same(&unchanged, &first);
    assert_eq!(unchanged.report().files_reused, first.report().files_read, "nothing written: nothing read");

    let mut files: Vec<_> = std::fs::read_dir(&weather).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut edited: Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    edited["tool_description"] = json!("Edited while serving: tide tables and storm surge warnings");
    std::fs::write(&files[0], edited.to_string()).unwrap();
    std::fs::remove_file(&files[1]).unwrap();
    std::fs::write(changing.path().join("broken.json"), "{ not json").unwrap();
    let spec = json!({
        "openapi": "3.0.3",
        "info": {"title": "harbour", "version": "1"},
        "servers": [{"url": "https://tides.example.com"}],
        "paths": {"/tides": {"get": {"operationId": "tide_tables", "summary": "High and low water times"}}}
    });
    std::fs::write(changing.path().join("harbour.json"), spec.to_string()).unwrap();
    let reloaded = first.reload(&sources).unwrap();
    let fresh = Catalog::load(&sources).unwrap();
    assert_same(&reloaded, &fresh);
    assert_eq!(reloaded.report().files_read, first.report().files_read + 1, "one removed, two added");
    assert_eq!(reloaded.report().files_reused, first.report().files_read - 2, "all but the edited and removed");
    assert_eq!(reloaded.report().skipped_files.len(), 1, "the unreadable file is reported");
    assert!(reloaded.apis().iter().any(|a| a.function_name == "tide_tables_for_harbour"));
    let tool = reloaded.tools().iter().find(|t| t.source == files[0]).unwrap();
    assert_eq!(tool.description, "Edited while serving: tide tables and storm surge warnings");
    // And back: a reload of the reloaded catalog, reusing what it read.
    assert_same(&reloaded.reload(&sources).unwrap(), &fresh);
}

fn assert_same(got: &Catalog, want: &Catalog) {
    assert_eq!(got.tools().len(), want.tools().len());
    assert!(got.tools() == want.tools(), "the tools differ");
    assert_eq!(got.apis().len(), want.apis().len());
    for (a, b) in got.apis().iter().zip(want.apis()) {
        assert!(a == b, "{} differs from {}", a.function_name, b.function_name);
    }
    let report = |c: &Catalog| {
        let mut r = serde_json::to_value(c.report()).unwrap();
        r["elapsed_ms"] = json!(0);
        r["files_reused"] = json!(0);
        r
    };
    assert_eq!(report(got), report(want));
    assert!(got.stamp() == want.stamp());
}
