//! What the tool graph learns from calls is the API's doing, never
//! toolrouter's: its own rate limits, argument checks and refusals leave
//! an API's learned availability as it was (a real `toolrouter serve`
//! and a real upstream on loopback).

use crate::cluster::counting_upstream;
use crate::common;

use serde_json::Value;
use std::sync::atomic::Ordering;

const API: &str = "latest_rates_for_frankfurter";

fn learned(url: &str) -> Value {
    let (status, _, body) = common::http(url, "GET", &format!("/v1/graph/apis/{API}"), None, b"");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn toolrouters_own_refusals_leave_an_apis_availability_unchanged() {
    let (upstream_port, hits) = counting_upstream();
    let base_url = format!("http://127.0.0.1:{upstream_port}");
    let allowed = format!("127.0.0.1:{upstream_port}");
    let env = [
        ("TOOLROUTER_UPSTREAM_BASE_URL", base_url.as_str()),
        ("TOOLROUTER_UPSTREAM_ALLOWED_HOSTS", allowed.as_str()),
        ("TOOLROUTER_UPSTREAM_ALLOW_PRIVATE", "true"),
        ("TOOLROUTER_UPSTREAM_API_RATE", "0.2"),
        ("TOOLROUTER_UPSTREAM_BURST", "2"),
        ("TOOLROUTER_UPSTREAM_MAX_WAIT_MS", "0"),
        ("TOOLROUTER_SERVER_CLIENT_RATE", "0"),
    ];
    let (_server, url) = common::serve(&env);
    common::wait_ready(&url, None);
    let before = learned(&url);

    // A burst far over the API's rate: toolrouter answers most with its own 429.
    let body = format!(r#"{{"name": "{API}", "arguments": {{"base": "EUR"}}}}"#);
    let statuses: Vec<u16> =
        (0..20).map(|_| common::http(&url, "POST", "/v1/tools/call", None, body.as_bytes()).0).collect();
    let answered = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(answered, hits.load(Ordering::SeqCst), "{statuses:?}");
    assert!(statuses.iter().filter(|s| **s == 429).count() >= 15, "{statuses:?}");
    // Arguments toolrouter refuses never reach the API either.
    let invalid = format!(r#"{{"name": "{API}", "arguments": ["EUR"]}}"#);
    let (status, _, text) = common::http(&url, "POST", "/v1/tools/call", None, invalid.as_bytes());
    assert_eq!(status, 400, "{text}");

    // Runs are recorded off the request path: wait for the answered ones.
    let started = std::time::Instant::now();
    let after = loop {
        let after = learned(&url);
        if after["online_calls"].as_u64() >= Some(answered as u64) || started.elapsed().as_secs() > 10 {
            break after;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let calls = |v: &Value| v["online_calls"].as_u64().unwrap();
    assert_eq!(calls(&after) - calls(&before), answered as u64, "only the API's answers are learned: {after}");
    assert_eq!(after["online_successes"], after["online_calls"], "{after}");
    assert!(
        after["alpha"].as_f64() >= before["alpha"].as_f64(),
        "toolrouter's refusals lowered the API's availability: {before} → {after}"
    );
}
