//! OAuth 2.1 on the MCP face (`[server.oauth]`), against a real
//! authorization server started here: the `mcp` SDK's own
//! authorization-server routes with a provider that signs RS256 JWTs
//! (`tests/python/oauth_server.py`). The `mcp` SDK's client completes the
//! whole flow from toolrouter's 401 and calls tools under the policy its
//! token's scope names (`tests/python/oauth_check.py`, with the SDK's 1.x
//! and 2.x). Then, over raw
//! HTTP: tokens for another audience, expired, not yet valid, signed by an
//! unknown key, malformed, huge or short of scope are refused with the
//! right status and challenge; the static key keeps working; an issuer
//! whose keys are slow or down leaves the keys held in use and is waited
//! for a bounded time; a reload that turns OAuth off refuses tokens at once.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolrouter::server::hash_key;

const KEY: &str = "oauth-test-static-key";
const SNOW: &str = "schneetage_for_ecoweather";

fn config(issuer: &str, resource: &str) -> String {
    format!(
        "[server]\napi_key_hashes = [\"{}\"]\n\n[server.oauth]\nissuer = \"{issuer}\"\nresource = \"{resource}\"\n\
         scopes = [\"tools:weather\", \"tools:all\"]\njwks_timeout_ms = 1000\n\n\
         [[access.policies]]\nname = \"weather-desk\"\nscopes = [\"tools:weather\"]\n\
         allow = [\"category:Weather\", \"server:ecoweather\"]\n\n\
         [[access.policies]]\nname = \"everything\"\nscopes = [\"tools:all\"]\n",
        hash_key(KEY)
    )
}

/// `POST /v1/tools/call` of the snow-days API with `token`: (status, head, body).
fn call(url: &str, token: &str) -> (u16, String, String) {
    let body = json!({"name": SNOW, "arguments": {"is_from": "2022-09-01", "lon": 1.5, "lat": 2.5}}).to_string();
    common::http(url, "POST", "/v1/tools/call", Some(token), body.as_bytes())
}

/// The `www-authenticate` line of a lower-cased head.
fn challenge(head: &str) -> &str {
    head.lines().find(|l| l.starts_with("www-authenticate:")).unwrap_or("")
}

#[test]
fn an_mcp_client_completes_the_oauth_flow_and_bad_tokens_are_refused() {
    let Some(data) = common::toolbench_dir() else { return };
    let Some(python) = common::python_env("py-mcp1", "bin/python") else { return };
    let Some(mcp2) = common::python_env("py-mcp2", "bin/python") else { return };
    let scripts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let mut server = Command::new(&python);
    server.arg(scripts.join("oauth_server.py"));
    let (_issuer_process, issuer) = common::start(server, Stdio::inherit());

    let url = format!("http://127.0.0.1:{}", common::free_port());
    let resource = format!("{url}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("toolrouter.toml");
    std::fs::write(&file, config(&issuer, &resource)).unwrap();
    let mut cmd = Command::new(common::binary());
    cmd.args(["serve", "--listen", url.trim_start_matches("http://"), "--config"]).arg(&file);
    common::on_toolbench_replay(&mut cmd, &data, &dir.path().join("state")).env("TOOLROUTER_LOG_LEVEL", "info");
    let log_path = dir.path().join("log");
    let (toolrouter, _) = common::start(cmd, Stdio::from(std::fs::File::create(&log_path).unwrap()));
    common::wait_ready(&url, Some(KEY));

    // The protected resource metadata, where the challenge says it is.
    let (status, _, body) = common::http(&url, "GET", "/.well-known/oauth-protected-resource/mcp", None, b"");
    assert_eq!(status, 200, "{body}");
    let metadata: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(metadata["resource"], resource.as_str());
    assert_eq!(metadata["authorization_servers"], json!([issuer]));
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).to_string();
    let (status, head, _) = common::http(&url, "POST", "/mcp", None, initialize.as_bytes());
    assert_eq!(status, 401);
    let expected = format!(
        "www-authenticate: bearer resource_metadata=\"{url}/.well-known/oauth-protected-resource/mcp\", \
         scope=\"tools:weather tools:all\""
    );
    assert_eq!(challenge(&head), expected);

    // The mcp SDK's whole flow (1.x and 2.x), then calls under the token's policy.
    for client in [&python, &mcp2] {
        let out = Command::new(client).arg(scripts.join("oauth_check.py")).arg(&url).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stdout.contains("oauth ok"), "{}: {stdout}\n{stderr}", client.display());
    }

    // Tokens minted by the same server, as asked.
    let mint = |query: &str| {
        let (status, _, token) = common::http(&issuer, "GET", &format!("/test/mint?{query}"), None, b"");
        assert_eq!(status, 200, "{token}");
        token
    };
    let good = mint(&format!("aud={resource}&scope=tools:weather"));
    let (status, _, body) = call(&url, &good);
    assert_eq!(status, 200, "a token on the HTTP endpoints too: {body}");
    let everything = mint(&format!("aud={resource}&scope=tools:all"));
    let body = json!({"query": "exchange rate of the euro, currency conversion", "k": 10}).to_string();
    let search = |token: &str| {
        let (status, _, text) = common::http(&url, "POST", "/v1/tools/search", Some(token), body.as_bytes());
        assert_eq!(status, 200, "{text}");
        let found: Value = serde_json::from_str(&text).unwrap();
        found["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["category"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert!(search(&good).iter().all(|c| c == "Weather" || c == "Energy"), "{:?}", search(&good));
    assert!(search(&everything).iter().any(|c| c != "Weather" && c != "Energy"), "tools:all's policy allows all");
    assert_eq!(call(&url, KEY).0, 200, "the static key keeps working beside tokens");

    let invalid = [
        (mint("aud=https://elsewhere.example/mcp&scope=tools:weather"), "another resource"),
        (mint(&format!("aud={resource}&scope=tools:weather&exp_in=-600")), "expired"),
        (mint(&format!("aud={resource}&scope=tools:weather&nbf_in=600")), "not valid yet"),
        (mint(&format!("aud={resource}&scope=tools:weather&key=unknown")), "does not publish"),
        ("eyJhbGciOiJSUzI1NiJ9.e30.c2ln".to_string(), ""),
        (format!("eyJhbGciOiJSUzI1NiJ9.{}.c2ln", "A".repeat(64 * 1024)), "over 8192 bytes"),
    ];
    for (token, why) in invalid {
        let (status, head, body) = call(&url, &token);
        assert_eq!(status, 401, "{why}: {body}");
        assert!(body.contains(why) && !body.contains(&token), "{why}: {body}");
        assert!(challenge(&head).contains("error=\"invalid_token\""), "{why}: {head}");
        assert!(challenge(&head).contains("resource_metadata="), "{head}");
    }
    let (status, head, _) = call(&url, "not-a-key-nor-a-token");
    assert_eq!(status, 401);
    assert!(challenge(&head).starts_with("www-authenticate: bearer resource_metadata="), "{head}");
    let (status, head, body) = call(&url, &mint(&format!("aud={resource}&scope=openid")));
    assert_eq!(status, 403, "{body}");
    assert!(challenge(&head).contains("error=\"insufficient_scope\""), "{head}");

    // The issuer's keys slow, then down: the key held still checks tokens;
    // an unknown key waits for one bounded fetch (jwks_timeout_ms = 1 s),
    // once the pause between fetches (10 s) is over.
    let jwks =
        |mode: &str| assert_eq!(common::http(&issuer, "GET", &format!("/test/jwks?mode={mode}"), None, b"").0, 200);
    jwks("slow");
    std::thread::sleep(Duration::from_millis(10_500));
    assert_eq!(call(&url, &good).0, 200, "the key held is used");
    let unknown = mint(&format!("aud={resource}&scope=tools:weather&key=unknown"));
    let started = Instant::now();
    assert_eq!(call(&url, &unknown).0, 401);
    assert!(started.elapsed() < Duration::from_secs(10), "bounded by the fetch's limit, not the issuer's 30 s");
    jwks("down");
    assert_eq!(call(&url, &good).0, 200, "the key held is used while the issuer is down");

    // OAuth turned off by a reload: tokens are refused at once, the key stays.
    let keys_only = format!("[server]\napi_key_hashes = [\"{}\"]\n", hash_key(KEY));
    std::fs::write(&file, keys_only).unwrap();
    assert_eq!(unsafe { libc::kill(toolrouter.0.id() as i32, libc::SIGHUP) }, 0);
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let reloaded = || log().contains("configuration reloaded");
    assert!(common::eventually(Duration::from_secs(20), reloaded), "{}", log());
    let applied = log().lines().find(|l| l.contains("configuration reloaded: applied")).unwrap_or("").to_string();
    assert!(applied.contains("server.oauth") && !log().contains("server.oauth changed: restart"), "{}", log());
    let (status, head, _) = call(&url, &good);
    assert!(status == 401 && challenge(&head).is_empty(), "no OAuth, no challenge: {status} {head}");
    assert_eq!(call(&url, KEY).0, 200);
    let (status, _, _) = common::http(&url, "GET", "/.well-known/oauth-protected-resource", None, b"");
    assert_eq!(status, 404, "no metadata without OAuth");
}
