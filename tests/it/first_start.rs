//! A first start without a stored index: `toolrouter serve` is ready in
//! seconds and searches with BM25 alone while the dense index is built in
//! the background (minutes on the full ToolBench catalog), saying so on
//! `/readyz` and in each search's answer; once built, the hybrid index
//! takes over without a restart.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{self, Killed};

/// `toolrouter serve` in hybrid mode over `catalog` (`None`: the embedded
/// one) with an empty state directory and embedding cache under `dir`.
fn first_start(dir: &Path, catalog: Option<&Path>) -> (Killed, String) {
    let mut cmd = std::process::Command::new(common::binary());
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", dir.join("state"))
        .env("TOOLROUTER_EMBEDDING_CACHE_DIR", dir.join("embeddings"))
        .env("TOOLROUTER_RETRIEVAL_MODE", "hybrid")
        .env("TOOLROUTER_SERVER_CLIENT_RATE", "0")
        .env("TOOLROUTER_LOG_LEVEL", "warn");
    if let Some(catalog) = catalog {
        cmd.env("TOOLROUTER_CATALOG_PATHS", catalog);
    }
    common::start(cmd, std::process::Stdio::null())
}

/// `POST /v1/tools/search` for `query`.
fn search(url: &str, query: &str) -> Value {
    let body = serde_json::json!({"query": query, "k": 5}).to_string();
    let (status, _, answer) = common::http(url, "POST", "/v1/tools/search", None, body.as_bytes());
    assert_eq!(status, 200, "{answer}");
    serde_json::from_str(&answer).unwrap()
}

/// `/readyz` once it answers 200 (within a minute): its text.
fn ready(url: &str) -> String {
    let started = Instant::now();
    loop {
        let (status, _, text) = common::http(url, "GET", "/readyz", None, b"");
        if status == 200 {
            return text;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "not ready: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_full_catalog_is_searched_by_words_while_its_dense_index_builds() {
    let Some(data) = common::toolbench_dir() else { return common::skipped("no ToolBench data") };
    if !common::model_available() {
        return common::skipped("no embedding model (scripts/fetch-models.sh)");
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = first_start(dir.path(), Some(&data.join("tools")));
    // Ready long before 43k documents are embedded (minutes), and says what it lacks.
    let readiness = ready(&url);
    assert!(readiness.starts_with("ready, degraded: lexical search only, dense index"), "{readiness}");
    let found = search(&url, "weather forecast for Berlin");
    let degraded = found["degraded"].as_str().unwrap_or_default();
    assert!(degraded.starts_with("lexical search only"), "{found}");
    let hits = found["data"].as_array().unwrap();
    assert_eq!(hits.len(), 5, "{found}");
    assert!(hits.iter().all(|h| h["why"]["dense"].is_null() && !h["why"]["lexical"].is_null()), "{found}");
    assert!(hits[0]["name"].as_str().unwrap().contains("weather"), "{found}");
}

#[test]
fn the_dense_index_takes_over_once_built() {
    if !common::model_available() {
        return common::skipped("no embedding model (scripts/fetch-models.sh)");
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = first_start(dir.path(), None);
    ready(&url);
    let started = Instant::now();
    loop {
        let (_, _, readiness) = common::http(&url, "GET", "/readyz", None, b"");
        if readiness == "ready" {
            break;
        }
        assert!(readiness.contains("lexical search only"), "{readiness}");
        assert!(started.elapsed() < Duration::from_secs(60), "the dense index never came: {readiness}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let found = search(&url, "Will it rain in Berlin tomorrow?");
    assert!(found.get("degraded").is_none(), "{found}");
    let hits = found["data"].as_array().unwrap();
    assert!(hits.iter().any(|h| !h["why"]["dense"].is_null()), "hybrid again: {found}");
}
