//! The integration tests, in one binary (one link of the crate instead of
//! one per file): each module drives the built `toolrouter` binary, the
//! library, or real clients (the Python SDKs, the MCP Inspector) over loopback. Tests
//! over the ToolBench data say SKIPPED without it, and fail so in CI
//! (`CI=true`, [`common::skipped`]), which provides it.

mod common;

mod cli;
mod cluster;
mod cluster_learning;
mod console;
mod downstream;
mod faults;
mod first_start;
mod graph_crash;
mod learning;
mod llm_client;
mod mcp_python;
mod memory;
mod oauth;
mod openai_inprocess;
mod openai_python;
mod openapi_auth;
mod openapi_schemathesis;
mod outage;
mod planning;
mod policies;
mod quarantine;
mod reload;
mod replay_all;
mod replay_cli;
mod retrieval;
mod route_eval;
mod route_tools;
mod serve_http;
mod telemetry;
mod tls;
mod toolbench_catalog;
mod upstream_faults;
mod upstream_limits;
