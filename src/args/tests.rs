use serde_json::json;

use super::*;
use crate::catalog::{Catalog, Sources};

fn embedded() -> Catalog {
    Catalog::load(&Sources::default()).unwrap()
}

fn api<'a>(catalog: &'a Catalog, name: &str) -> &'a Api {
    catalog.api(catalog.resolve(name).first().unwrap())
}

const FORECAST: &str = "weather_forecast_for_open_meteo_forecast";

#[test]
fn valid_arguments_pass_with_coercions_reported() {
    let c = embedded();
    let ok = validate(
        api(&c, FORECAST),
        &json!({"latitude": "52.52", "longitude": 13.41, "hourly": "temperature_2m", "timezone": null}),
        Options::default(),
    )
    .unwrap();
    assert_eq!(
        ok.arguments,
        *json!({"latitude": 52.52, "longitude": 13.41, "hourly": ["temperature_2m"]}).as_object().unwrap()
    );
    assert_eq!(
        ok.coercions,
        [
            Coercion::Converted { pointer: "/latitude".into(), from: json!("52.52"), to: json!(52.52) },
            Coercion::Converted {
                pointer: "/hourly".into(),
                from: json!("temperature_2m"),
                to: json!(["temperature_2m"])
            },
            Coercion::DroppedNull { pointer: "/timezone".into() },
        ]
    );
}

#[test]
fn every_problem_is_reported_with_its_pointer() {
    let c = embedded();
    let err = validate(
        api(&c, FORECAST),
        &json!({"longitude": "east", "temperature_unit": "kelvin", "forecast_days": 40, "start_date": "2024-13-01", "colour": "red"}),
        Options::default(),
    )
    .unwrap_err();
    let found: Vec<(&str, ProblemKind)> = err.problems.iter().map(|p| (p.pointer.as_str(), p.kind)).collect();
    for expected in [
        ("/latitude", ProblemKind::Missing),
        ("/longitude", ProblemKind::Type),
        ("/temperature_unit", ProblemKind::Enum),
        ("/forecast_days", ProblemKind::Constraint),
        ("/start_date", ProblemKind::Format),
        ("/colour", ProblemKind::Unknown),
    ] {
        assert!(found.contains(&expected), "{expected:?} not in {found:?}");
    }
    let text = err.to_string();
    assert!(text.starts_with(&format!("Invalid arguments for `{FORECAST}`:")), "{text}");
    assert!(text.contains("/latitude: missing required parameter `latitude` (number): Latitude in degrees"), "{text}");
    assert!(
        text.contains(r#"/temperature_unit: must be one of "celsius", "fahrenheit"; got string "kelvin""#),
        "{text}"
    );
    assert!(text.contains("/longitude: expected number, got string \"east\""), "{text}");
    assert!(text.contains("/start_date: must be a valid date (YYYY-MM-DD)"), "{text}");
}

#[test]
fn strict_mode_decides_about_unknown_parameters() {
    let c = embedded();
    let a = api(&c, "search_locations_for_open_meteo_geocoding");
    let args = json!({"name": "Berlin", "cuont": 3});
    let err = validate(a, &args, Options { strict: true, coerce: true }).unwrap_err();
    assert_eq!(err.problems.len(), 1);
    assert!(err.problems[0].message.contains("did you mean `count`?"), "{}", err.problems[0].message);
    let ok = validate(a, &args, Options { strict: false, coerce: true }).unwrap();
    assert_eq!(ok.arguments["cuont"], json!(3));
    assert_eq!(ok.warnings.len(), 1);
}

#[test]
fn coercion_can_be_turned_off() {
    let c = embedded();
    let a = api(&c, "search_locations_for_open_meteo_geocoding");
    let err =
        validate(a, &json!({"name": "Berlin", "count": "5"}), Options { strict: true, coerce: false }).unwrap_err();
    assert_eq!(err.problems[0].kind, ProblemKind::Type);
    assert!(validate(a, &json!({"name": "Berlin", "count": "5"}), Options::default()).is_ok());
}

#[test]
fn arguments_that_are_not_an_object() {
    let c = embedded();
    let a = api(&c, "currencies_for_frankfurter");
    assert!(validate(a, &json!(null), Options::default()).is_ok());
    let err = validate(a, &json!([1, 2]), Options::default()).unwrap_err();
    assert_eq!(err.problems[0].kind, ProblemKind::NotAnObject);
    assert_eq!(err.problems[0].pointer, "");
    let g = api(&c, "search_locations_for_open_meteo_geocoding");
    let ok = validate(g, &json!("{\"name\": \"Paris\"}"), Options::default()).unwrap();
    assert_eq!(ok.coercions, [Coercion::ParsedString]);
    assert!(validate(g, &json!("name=Paris"), Options::default()).is_err());
}

#[test]
fn upstream_names_are_renamed_to_schema_keys() {
    let api = Api {
        id: crate::catalog::ApiId(0),
        tool: crate::catalog::ToolId(0),
        name: "Off".into(),
        function_name: "off_for_foaas".into(),
        description: String::new(),
        method: crate::catalog::Method::Get,
        url_template: None,
        params: vec![Param {
            name: "from".into(),
            key: "is_from".into(),
            location: crate::catalog::ParamLocation::Query,
            required: true,
            description: String::new(),
            schema: json!({"type": "string"}),
            explode: false,
        }],
        declared_schema: None,
        unchecked: None,
        mcp: None,
    };
    let ok = validate(&api, &json!({"from": "me"}), Options::default()).unwrap();
    assert_eq!(ok.arguments["is_from"], json!("me"));
    assert_eq!(ok.coercions, [Coercion::Renamed { from: "from".into(), to: "is_from".into() }]);
    // Given under both spellings: the schema key wins and the other is unknown.
    let err = validate(&api, &json!({"from": "a", "is_from": "b"}), Options::default()).unwrap_err();
    assert_eq!(err.problems[0].kind, ProblemKind::Unknown);
}

#[test]
fn comma_joined_lists_are_split_when_the_wire_form_is_the_same() {
    let c = embedded();
    let a = api(&c, "latest_rates_for_frankfurter");
    let ok = validate(a, &json!({"symbols": "GBP, JPY"}), Options::default()).unwrap();
    assert_eq!(ok.arguments["symbols"], json!(["GBP", "JPY"]));
    assert_eq!(
        ok.coercions,
        [Coercion::Converted { pointer: "/symbols".into(), from: json!("GBP, JPY"), to: json!(["GBP", "JPY"]) }]
    );
    assert!(validate(a, &json!({"symbols": "GBP,JPY"}), Options { strict: true, coerce: false }).is_err());
}

#[test]
fn nested_pointers_are_escaped_and_precise() {
    let c = embedded();
    let a = api(&c, "latest_rates_for_frankfurter");
    let err = validate(a, &json!({"symbols": ["USD", "usd"]}), Options::default()).unwrap_err();
    assert_eq!(err.problems[0].pointer, "/symbols/1");
    assert_eq!(err.problems[0].kind, ProblemKind::Format);
}
