//! Policies (`[[access.policies]]`) through the real clients: one key
//! limited to weather APIs (category Weather, and the ecoweather tool) and
//! to its own route-mode tools not named `*delete*`, another no policy names, on the ToolBench catalog with the
//! replay upstream and the scripted model (`tests/python/policy_check.py`
//! with the `openai`, `anthropic` and `mcp` SDKs); then reloads: a policy
//! that does not check is refused whole (the old one stays), one that
//! lifts the limit applies at once; the audit log, read after the server
//! is killed, has every call made or refused. And `toolrouter mcp` over
//! stdio under `mcp.stdio_policy`; an MCP session refusing another key.

use crate::common;
use common::eventually;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use toolrouter::server::hash_key;

const LIMITED: &str = "policy-limited-key";
const FREE: &str = "policy-free-key";
const SNOW: &str = "schneetage_for_ecoweather";

fn config(allow: &str) -> String {
    format!(
        "[server]\napi_key_hashes = [\"{}\", \"{}\"]\n\n[access]\nconsent_timeout_s = 2\n\
         destructive = [\"name:{SNOW}\"]\n\n[[access.policies]]\nname = \"weather-desk\"\n\
         key_hashes = [\"{}\"]\nallow = [{allow}]\ndeny = [\"name:*delete*\"]\n",
        hash_key(LIMITED),
        hash_key(FREE),
        hash_key(LIMITED)
    )
}

fn run(python: &Path, args: &[&str]) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/policy_check.py");
    let out = Command::new(python).arg(script).args(args).output().expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("ok"),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `POST /v1/tools/call` of a non-weather API with `key`: its status.
fn call_status(url: &str, key: &str, name: &str) -> u16 {
    let body = json!({"name": name, "arguments": {}}).to_string();
    common::http(url, "POST", "/v1/tools/call", Some(key), body.as_bytes()).0
}

#[test]
fn a_limited_key_sees_and_calls_only_its_tools_on_every_face() {
    let Some(data) = common::toolbench_dir() else { return };
    let Some(openai) = common::python_env("py-openai", "bin/python") else { return };
    let Some(anthropic) = common::python_env("py-anthropic", "bin/python") else { return };
    let Some(mcp) = common::python_env("py-mcp2", "bin/python") else { return };
    let (_model, model_url) = common::scripted_model(&openai);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("toolrouter.toml");
    std::fs::write(&file, config("\"category:Weather\", \"server:ecoweather\", \"source:client\"")).unwrap();
    let log_path = dir.path().join("log");
    let mut cmd = Command::new(common::binary());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--config"]).arg(&file);
    common::on_toolbench_replay(&mut cmd, &data, &dir.path().join("state"))
        .env("TOOLROUTER_LLM_BASE_URL", format!("{model_url}/v1"))
        .env("TOOLROUTER_LOG_LEVEL", "info");
    let (server, url) = common::start(cmd, Stdio::from(std::fs::File::create(&log_path).unwrap()));
    common::wait_ready(&url, Some(FREE));

    run(&openai, &["openai", &url, LIMITED, FREE, &model_url]);
    run(&anthropic, &["anthropic", &url, LIMITED, FREE]);
    run(&mcp, &["mcp", &url, LIMITED, FREE]);
    run(&openai, &["consent", &url, LIMITED, FREE]);
    run(&mcp, &["mcp-consent", &url, LIMITED, FREE]);

    // A non-weather API the free key finds (the one the checks refused).
    let body = json!({"query": "exchange rate of the euro, currency conversion", "k": 10}).to_string();
    let (_, _, text) = common::http(&url, "POST", "/v1/tools/search", Some(FREE), body.as_bytes());
    let found: Value = serde_json::from_str(&text).unwrap();
    let allowed =
        |d: &&Value| d["category"] == "Weather" || d["tool"].as_str().unwrap().eq_ignore_ascii_case("ecoweather");
    let other =
        found["data"].as_array().unwrap().iter().find(|d| !allowed(d)).unwrap()["name"].as_str().unwrap().to_string();
    assert_eq!(call_status(&url, LIMITED, &other), 403);

    // An MCP session is its opener's: another key's requests in it are refused.
    let (limited, free) = (format!("Bearer {LIMITED}"), format!("Bearer {FREE}"));
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let session = common::mcp_session(&common::mcp_post(&url, &[("authorization", &limited)], init));
    let in_session = |key: &str, body: &str| {
        let headers = [("authorization", key), ("mcp-session-id", &session), ("mcp-protocol-version", "2025-11-25")];
        common::mcp_post(&url, &headers, body)
    };
    in_session(&limited, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let hijack = in_session(&free, list);
    assert!(hijack.contains("opened with another API key") && !hijack.contains("search_tools"), "{hijack}");
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"call_api","arguments":{{"name":"{SNOW}","arguments":{{}}}}}}}}"#
    );
    assert!(in_session(&free, &call).contains("opened with another API key"));
    assert!(in_session(&limited, list).contains("search_tools"), "the opener's own requests go on");

    // `toolrouter mcp` over stdio has no key: `mcp.stdio_policy` puts it under one.
    let stdio_config = dir.path().join("stdio.toml");
    let weather = "\"category:Weather\", \"server:ecoweather\"";
    std::fs::write(&stdio_config, format!("{}\n[mcp]\nstdio_policy = \"weather-desk\"\n", config(weather))).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/policy_check.py");
    let mut stdio = Command::new(&mcp);
    stdio.arg(script).arg("mcp-stdio").arg(common::binary()).arg(&stdio_config).arg(&other);
    let out = common::on_toolbench_replay(&mut stdio, &data, &dir.path().join("stdio-state"))
        .env("TOOLROUTER_LOG_LEVEL", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("mcp-stdio ok"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let hangup = |n: usize| {
        assert_eq!(unsafe { libc::kill(server.0.id() as i32, libc::SIGHUP) }, 0);
        let ended = |log: &str| log.matches("configuration reloaded").count() + log.matches("not reloaded").count();
        assert!(eventually(Duration::from_secs(20), || ended(&log()) >= n), "reload {n} never ended: {}", log());
    };

    // A rule that does not read: refused whole, the policy in use stays.
    std::fs::write(&file, config("\"owner:me\"")).unwrap();
    hangup(1);
    assert!(log().contains("access.policies[0].allow") && log().contains("unknown rule kind `owner`"), "{}", log());
    assert_eq!(call_status(&url, LIMITED, &other), 403, "the old policy stays");
    assert_eq!(call_status(&url, LIMITED, SNOW), 400, "…and still lets weather APIs through (to their checks)");

    // Lifting the limit applies at once.
    std::fs::write(&file, config("\"category:*\", \"source:client\"")).unwrap();
    hangup(2);
    assert_ne!(call_status(&url, LIMITED, &other), 403, "the new policy allows it: {}", log());

    // The audit log has every call, made or refused, read by another
    // process after the server was killed (no clean shutdown).
    drop(server);
    let audit = || {
        let out = Command::new(common::binary())
            .args(["audit", "--json"])
            .env_remove("TOOLROUTER_CONFIG")
            .env("TOOLROUTER_STATE_DIR", dir.path().join("state"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let entries: Vec<Value> =
            String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        entries
    };
    let entries = audit();
    let limited = toolrouter::server::hash_key(LIMITED)[..12].to_string();
    let of = |via: &str| entries.iter().filter(|e| e["via"] == via).collect::<Vec<_>>();
    // tools_call: the check's refused and allowed calls, then the four above.
    let calls = of("tools_call");
    assert_eq!(calls.len(), 6, "{calls:#?}");
    assert!(calls.iter().all(|e| e["client"] == limited.as_str() && e.get("arguments").is_none()), "{calls:#?}");
    let by_policy = |e: &&&Value| {
        e["reason"].as_str().is_some_and(|r| r.contains("not allowed (policy `weather-desk` of this key)"))
    };
    assert_eq!(calls.iter().filter(by_policy).count(), 3, "{calls:#?}");
    assert!(calls.iter().any(|e| e["tool"] == SNOW && e["reason"] == "invalid arguments"), "{calls:#?}");
    assert!(calls.iter().any(|e| e["tool"] == SNOW && e["decision"] == "allowed" && e["outcome"] == "ok"));
    let mcp: Vec<_> = of("mcp").into_iter().filter(|e| e["client"] == limited.as_str()).collect();
    assert_eq!(mcp.len(), 2, "call_api refused, then a weather API called: {mcp:#?}");
    assert!(mcp[0]["decision"] == "refused" && mcp[1]["tool"] == SNOW && mcp[1]["status"] == 200, "{mcp:#?}");
    // The free key's MCP calls of the snow API (destructive here): three the user
    // did not allow, then one allowed and one by a client that cannot be asked.
    let asked: Vec<_> = of("mcp").into_iter().filter(|e| e["client"] != limited.as_str()).collect();
    let by_user = |e: &&&Value| e["reason"].as_str().is_some_and(|r| r.contains("the user"));
    assert_eq!((asked.len(), asked.iter().filter(by_user).count()), (5, 3), "{asked:#?}");
    assert!(asked[3..].iter().all(|e| e["decision"] == "allowed" && e["outcome"] == "ok"), "{asked:#?}");
    // Execute mode: every stop for consent is a refusal, the one call the user allowed ran.
    let executed = of("execute");
    let made: Vec<_> = executed.iter().filter(|e| e["decision"] == "allowed").collect();
    assert!(made.len() == 1 && made[0]["tool"] == SNOW && made[0]["outcome"] == "ok", "{executed:#?}");
    let stops = executed
        .iter()
        .filter(|e| e["reason"].as_str().is_some_and(|r| r.contains("consent") || r.contains("refused")));
    assert!(stops.count() >= 4 && executed.len() >= 5, "{executed:#?}");
}
