//! The `toolrouter` binary as users run it: outputs, exit codes, bad input.

use crate::common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn toolrouter(args: &[&str]) -> Output {
    toolrouter_env(args, &[])
}

fn toolrouter_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(common::binary());
    cmd.args(args).env_remove("TOOLROUTER_CONFIG").env_remove("TOOLROUTER_UPSTREAM_RAPIDAPI_KEY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn stats_of_the_toolbench_catalog_as_json() {
    let Some(dir) = common::toolbench_dir() else { return };
    let tools = dir.join("tools");
    let out = toolrouter(&["catalog", "stats", "--json", "--catalog", tools.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["tools"], 12_238);
    assert_eq!(stats["apis"], 42_864);
    assert_eq!(stats["skipped_files"], serde_json::json!([]));
    assert_eq!(stats["categories"].as_object().unwrap().len(), 49);
    assert_eq!(stats["categories"]["Data"]["tools"].as_u64().map(|n| n > 100), Some(true));
}

#[test]
fn without_arguments_the_embedded_catalog_is_there() {
    let out = toolrouter(&["catalog", "stats", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["tools"], 4);
    assert_eq!(stats["origins"]["embedded"]["apis"], 11);
}

#[test]
fn show_prints_description_url_and_schema() {
    let out = toolrouter(&["catalog", "show", "public_holidays_for_nager_date"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("GET https://date.nager.at/api/v3/PublicHolidays/{year}/{countryCode}"), "{text}");
    assert!(text.contains("Public holidays of a country in a year"), "{text}");
    assert!(text.contains("\"required\": ["), "{text}");

    let out = toolrouter(&["catalog", "show", "--json", "PUBLIC_HOLIDAYS_FOR_NAGER_DATE "]);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["definition"]["function"]["name"], "public_holidays_for_nager_date");
    assert_eq!(shown["definition"]["function"]["parameters"]["required"], serde_json::json!(["year", "countryCode"]));

    let out = toolrouter(&["catalog", "show", "holidays"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("did you mean `public_holidays_for_nager_date`"), "{}", stderr(&out));
}

#[test]
fn show_finds_toolbench_apis_by_trajectory_spellings() {
    let Some(dir) = common::toolbench_dir() else { return };
    let tools = dir.join("tools");
    let out = toolrouter(&["catalog", "show", "120_hour_forecast_for_weather", "--catalog", tools.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("get_120_hour_forecast_for_weather\n"), "{}", stdout(&out));
}

#[test]
fn validate_exit_codes() {
    let valid = toolrouter(&["validate", "latest_rates_for_frankfurter", r#"{"base": "USD", "symbols": "GBP"}"#]);
    assert_eq!(valid.status.code(), Some(0), "{}", stderr(&valid));
    assert!(stdout(&valid).contains(r#"valid: {"base":"USD","symbols":["GBP"]}"#), "{}", stdout(&valid));
    assert!(stdout(&valid).contains(r#"coerced: /symbols: "GBP" -> ["GBP"]"#), "{}", stdout(&valid));

    let invalid = toolrouter(&[
        "validate",
        "weather_forecast_for_open_meteo_forecast",
        r#"{"latitude": "north", "units": "si"}"#,
    ]);
    assert_eq!(invalid.status.code(), Some(1));
    let text = stdout(&invalid);
    assert!(text.contains("/latitude: expected number"), "{text}");
    assert!(text.contains("/longitude: missing required parameter"), "{text}");
    assert!(text.contains("/units: unknown parameter"), "{text}");

    let lenient = toolrouter(&[
        "validate",
        "--no-strict",
        "search_locations_for_open_meteo_geocoding",
        r#"{"name": "Oslo", "units": "si"}"#,
    ]);
    assert_eq!(lenient.status.code(), Some(0), "{}", stdout(&lenient));

    let malformed = toolrouter(&["validate", "latest_rates_for_frankfurter", r#"{"base": "#]);
    assert_eq!(malformed.status.code(), Some(2));
    assert!(stderr(&malformed).contains("not valid JSON"), "{}", stderr(&malformed));

    let unknown = toolrouter(&["validate", "no_such_function", "{}"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr(&unknown).contains("unknown function `no_such_function`"));
}

#[test]
fn validate_json_output_and_url_check() {
    let out = toolrouter(&[
        "validate",
        "--json",
        "--url",
        "https://evil.example/v1/latest",
        "latest_rates_for_frankfurter",
        "{}",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["valid"], false);
    assert_eq!(report["problems"][0]["kind"], "url");
    let ok = toolrouter(&[
        "validate",
        "--url",
        "https://api.frankfurter.dev/v1/latest?base=EUR",
        "latest_rates_for_frankfurter",
        "{}",
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
}

#[test]
fn validate_reads_stdin_and_files_with_a_size_cap() {
    let mut child = Command::new(common::binary())
        .args(["validate", "search_locations_for_open_meteo_geocoding", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(br#"{"name": "Lima", "count": "3"}"#).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    std::fs::write(&big, format!(r#"{{"name": "{}"}}"#, "x".repeat(2 << 20))).unwrap();
    let out = toolrouter(&["validate", "search_locations_for_open_meteo_geocoding", &format!("@{}", big.display())]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("exceed"), "{}", stderr(&out));
    let out = toolrouter(&["validate", "search_locations_for_open_meteo_geocoding", "@/no/such/file"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bad_tool_files_are_skipped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let cat = dir.path().join("Data");
    std::fs::create_dir(&cat).unwrap();
    std::fs::write(cat.join("broken.json"), "{ not json").unwrap();
    std::fs::write(cat.join("no_apis.json"), r#"{"tool_name": "No APIs"}"#).unwrap();
    std::fs::write(cat.join("odd.json"), r#"{"tool_name": "Odd", "api_list": [{"name": 7, "required_parameters": "x"}, {"name": "fine", "url": "https://odd.example/a"}]}"#).unwrap();
    std::fs::write(cat.join("good.json"), r#"{"tool_name": "Good", "host": "good.example", "api_list": [{"name": "Ping", "url": "https://good.example/ping", "method": "GET", "required_parameters": [], "optional_parameters": []}]}"#).unwrap();
    std::fs::write(cat.join("notes.txt"), "ignored").unwrap();
    let out = toolrouter(&["catalog", "stats", "--json", "--catalog", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["tools"], 2, "good and odd");
    assert_eq!(stats["apis"], 2, "Ping and fine");
    assert_eq!(stats["files_ignored"], 1);
    let skipped = stats["skipped_files"].as_array().unwrap();
    assert_eq!(skipped.len(), 2);
    assert!(skipped[0]["path"].as_str().unwrap().ends_with("broken.json"));
    assert!(skipped[0]["reason"].as_str().unwrap().starts_with("invalid JSON"));
    assert_eq!(skipped[1]["reason"], "no `api_list` field");
    assert!(stats["skipped_apis"][0]["reason"].as_str().unwrap().contains("api_list[0]"));
    assert!(stderr(&out).contains("skipping catalog file"), "warnings name the file: {}", stderr(&out));

    let missing = toolrouter(&["catalog", "stats", "--catalog", "/no/such/dir"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("/no/such/dir"));
}

#[test]
fn invalid_config_exits_2_naming_the_key() {
    let out = toolrouter_env(&["catalog", "stats"], &[("TOOLROUTER_ARGS_COERCE", "sometimes")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`args.coerce` (set by TOOLROUTER_ARGS_COERCE)"), "{}", stderr(&out));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.toml");
    std::fs::write(&file, "[catalog]\npaths = 3\n").unwrap();
    let out = toolrouter(&["catalog", "stats", "--config", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`catalog.paths`"), "{}", stderr(&out));

    std::fs::write(&file, "[upstream]\nrapidapi_key = \"k-123\"\n").unwrap();
    let out = toolrouter(&["config", "show", "--config", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!stderr(&out).contains("k-123"));
}

#[test]
fn config_show_never_prints_secrets() {
    let out = toolrouter_env(
        &["config", "show"],
        &[("TOOLROUTER_UPSTREAM_RAPIDAPI_KEY", "super-secret-value"), ("TOOLROUTER_LOG_LEVEL", "debug")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out) + &stderr(&out);
    assert!(!text.contains("super-secret-value"), "{text}");
    assert!(text.contains("rapidapi key: set (from TOOLROUTER_UPSTREAM_RAPIDAPI_KEY)"), "{text}");
    assert!(text.contains("level = \"debug\""), "{text}");
}

#[test]
fn coverage_of_the_trajectories_by_cause() {
    let Some(dir) = common::toolbench_dir() else { return };
    let tools = dir.join("tools");
    let trajectories = dir.join("trajectories");
    let args = [
        "catalog",
        "coverage",
        "--json",
        "--catalog",
        tools.to_str().unwrap(),
        "--trajectories",
        trajectories.to_str().unwrap(),
    ];
    let out = toolrouter(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let cov: Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls = cov["calls"].as_u64().unwrap();
    let resolved = cov["resolved_calls"].as_u64().unwrap();
    // The dataset README: about 27% of StepTool calls cannot be mapped to a tool file.
    assert!(calls > 7_000 && (0.70..0.80).contains(&(resolved as f64 / calls as f64)), "{resolved}/{calls}");
    let unresolved: u64 = cov["unresolved"].as_object().unwrap().values().map(|u| u["calls"].as_u64().unwrap()).sum();
    assert_eq!(resolved + unresolved, calls, "every call is resolved or has a cause");
    let hallucinated = &cov["unresolved"]["hallucinated"]["names"];
    assert!(hallucinated.as_array().unwrap().iter().any(|n| n["name"] == "invalid_hallucination_function_name"));
    let api_missing = &cov["unresolved"]["api_missing"]["names"];
    assert!(
        api_missing.as_array().unwrap().iter().any(|n| n["name"] == "search_basic_free_for_streaming_availability")
    );
    assert!(cov["unresolved"]["tool_missing"]["calls"].as_u64().unwrap() > 0);
    assert!(cov["resolved_by"]["variant"].as_u64().unwrap() > 0, "2023 spellings resolve");

    let markdown = toolrouter(&args[..args.len()].iter().filter(|a| **a != "--json").copied().collect::<Vec<_>>());
    assert!(stdout(&markdown).contains("| resolved |"), "{}", stdout(&markdown));
    let none = toolrouter(&["catalog", "coverage", "--trajectories", "/no/such/path"]);
    assert_eq!(none.status.code(), Some(2));
}
