//! The OpenAI face in route mode, driven by the official `openai` Python
//! SDK and `langchain-openai` (`tests/python/openai_check.py`), with the
//! scripted model server (`tests/python/scripted_model.py`, tests only) as
//! the upstream model: plain, streaming, the stream helper, a two-turn tool
//! round trip, 300 tools narrowed to `max_tools`, a repaired call, a call
//! never repaired, bad requests and a wrong key; plan mode; off the happy
//! path (`openai_offpath_check.py`: a repair that ends in text, HTML and
//! plain-JSON answers to a stream, tool-call deltas at index 1, reasoning
//! and logprobs, object arguments, usage over repairs, plan mode's checks
//! equal to /v1/tools/call's); and execute
//! mode (`tests/python/openai_execute_check.py`) against the replay
//! upstream: one task, streaming, parallel and dependent sub-tasks,
//! argument completion, a question for the user, traces, a failing model;
//! the Responses API (`openai_responses_check.py`), an OpenAI Agents SDK
//! agent with two tools on both its models (`openai_agents_check.py`) and
//! the Anthropic face with the official `anthropic` SDK and LangChain's
//! `ChatAnthropic` (`anthropic_check.py`) on the same server; tool search on
//! every face (`tool_search_check.py` with the `openai` SDK and LangChain,
//! `anthropic_tool_search_check.py`, the Agents SDK's `ToolSearchTool`).

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::{python_env, start, wait_ready};

/// A second client's key: it must not see the first one's traces.
const OTHER_KEY: &str = "openai-other-key";

#[test]
fn openai_sdk_and_langchain_in_route_plan_and_execute_mode() {
    let Some(python) = python_env("py-openai", "bin/python") else { return };
    let scripts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let (_model, model_url) = common::scripted_model(&python);

    let state = tempfile::tempdir().unwrap();
    let key = "openai-test-key";
    let mut serve = Command::new(env!("CARGO_BIN_EXE_toolrouter"));
    serve
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", state.path())
        .env("TOOLROUTER_RETRIEVAL_MODE", "lexical")
        .env("TOOLROUTER_LLM_BASE_URL", format!("{model_url}/v1"))
        .env(
            "TOOLROUTER_SERVER_API_KEY_HASHES",
            format!("[\"{}\", \"{}\"]", toolrouter::server::hash_key(key), toolrouter::server::hash_key(OTHER_KEY)),
        )
        .env("TOOLROUTER_LOG_LEVEL", "warn");
    // Plan mode and /v1/tools/call over the ToolBench catalog (plus the
    // embedded one) with the replay upstream, when the data is there.
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets/toolbench");
    let data = std::env::var_os("TOOLBENCH_DIR").map(PathBuf::from).unwrap_or(data);
    if !data.join("tools").is_dir() {
        crate::common::skipped("no ToolBench data for plan mode and tools/call");
        return;
    }
    serve
        .env("TOOLROUTER_CATALOG_PATHS", data.join("tools"))
        .env("TOOLROUTER_CATALOG_INCLUDE_EMBEDDED", "true")
        .env("TOOLROUTER_UPSTREAM_MODE", "replay")
        .env("TOOLROUTER_UPSTREAM_REPLAY_DIR", data.join("cache/derived_from_trajectories"));
    let (server, url) = start(serve, Stdio::null());
    // Plan mode needs the engine: wait until it is ready.
    wait_ready(&url, Some(key));
    let _server = server;

    for check in ["openai_check.py", "openai_offpath_check.py", "openai_responses_check.py", "tool_search_check.py"] {
        let out = Command::new(&python).arg(scripts.join(check)).args([&url, &model_url, key]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("ok"),
            "{check}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // The SDK example runs as written (every mode it shows answers; the
    // scripted model knows no API for its execute request, which says so).
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/openai_sdk.py");
    let out = Command::new(&python).arg(example).args([&url, key, "scripted"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("tool call: get_weather") && stdout.contains("status: infeasible"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Execute mode: the model decides, toolrouter calls the replay upstream and answers.
    let out = Command::new(&python)
        .arg(scripts.join("openai_execute_check.py"))
        .args([&url, key, OTHER_KEY])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("ok"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));

    // An OpenAI Agents SDK agent with two tools, on its Responses and its Chat Completions model.
    let Some(agents) = python_env("py-agents", "bin/python") else { return };
    let out = Command::new(&agents).arg(scripts.join("openai_agents_check.py")).args([&url, key]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("ok"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));

    // The Anthropic face, with the official `anthropic` SDK, on the same server.
    let Some(anthropic) = python_env("py-anthropic", "bin/python") else { return };
    for check in ["anthropic_check.py", "anthropic_tool_search_check.py"] {
        let out = Command::new(&anthropic).arg(scripts.join(check)).args([&url, &model_url, key]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("ok"),
            "{check}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
