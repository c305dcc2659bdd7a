//! toolrouter: a tool-routing proxy between AI agents and thousands of real APIs.
//!
//! # Layout
//!
//! Layers, bottom to top; a module imports only from layers below its own,
//! and nothing below the servers knows a protocol.
//!
//! * [`config`]: the TOML configuration file plus `TOOLROUTER_*` environment
//!   overrides, validated at start; secrets only from env or files.
//! * [`journal`]: an append-only, fsync'd, per-line checksummed JSON-lines
//!   log (the graph's run log, the planner's memory).
//! * [`catalog`]: loads ToolBench tool JSON, compacted JSONL, OpenAPI 3
//!   specs, query `api_list` entries and the embedded example specs into
//!   one model of tools and APIs, each with a JSON Schema and a unique,
//!   OpenAI-valid function name; resolves the name variants of trajectories.
//! * [`args`]: validates a call's arguments against its API's schema, with
//!   safe coercions, strict mode and LLM-actionable errors; checks URLs
//!   against the catalog's hosts.
//! * [`trajectory`]: parses tool-call trajectories (ToolBench DFS trees and
//!   CoT chains, converted answers, StepTool runs, SFT conversations) into
//!   one model, and maps their function names to catalog APIs, saying why
//!   a name does not resolve.
//! * [`json_text`]: JSON that arrives as text (JSON or Python literals in
//!   strings, documents cut short) read as the value it stands for.
//! * [`retrieval`]: finds the APIs for a request: fastembed embeddings
//!   (offline model), an instant-distance HNSW graph or exact scan, BM25
//!   over APIs and over whole tools, fused by weighted reciprocal rank,
//!   multi-part requests split into intents; the index persists in the
//!   state directory, embeddings are cached by text hash.
//! * [`graph`]: the tool graph (petgraph): transition weights and API
//!   availability learned from trajectories, updated online after every
//!   run, durable as a snapshot plus an fsync'd run log.
//! * [`text`]: text cut short for a person or a model (`clip`).
//! * [`retry`]: exponential backoff with jitter and `Retry-After`, for
//!   every outbound request (the model's and the APIs').
//! * [`llm`]: the client of an upstream OpenAI-compatible model
//!   (non-streaming and streaming, every way a stream ends told apart, one
//!   time budget per request for its retries and `Retry-After` waits, size
//!   caps).
//! * [`planner`]: graph-guided depth-first search for a chain of API calls,
//!   with backtracking, budgets, reflection, short- and long-term memory,
//!   argument completion from earlier outputs and repair; `Decider` and
//!   `Executor` traits (deterministic and LLM deciders, dry run).
//! * [`upstream`]: calls the APIs: requests in RapidAPI's conventions, the
//!   SSRF guard, rate limits (governor), retries, size and time caps, and
//!   the replay table of recorded responses.
//! * [`compress`]: shortens responses to a character budget for a model,
//!   always as valid JSON.
//! * [`engine`]: what the faces share: search, plan, the one call pipeline
//!   (resolve the name with suggestions, validate, call upstream, compress,
//!   learn) and recording runs in the graph.
//! * [`loading`]: the engine loading in the background, so that the faces
//!   answer at once and say how far a first index build has got.
//! * [`execute`]: execute mode: a request split into sub-tasks (independent
//!   ones concurrently), each run by the planner with the LLM decider and
//!   real calls, learned by the graph, answered or turned into a question.
//! * [`mcp`]: the MCP face: `search_tools`, `plan`, `call_api` and the
//!   APIs they find as session tools (rmcp; stdio and streamable HTTP).
//! * [`metrics`]: process counters in Prometheus' text format.
//! * [`openai`]: the OpenAI-compatible face: `/v1/chat/completions` (route
//!   mode: tool narrowing, tool-call checks and repair; plan mode; execute
//!   mode), `/v1/models` and the traces of execute runs.
//! * [`server`]: the HTTP servers, thin adapters: `toolrouter serve`
//!   (connections with header-read, idle and body timeouts, health,
//!   readiness, API keys, limits, graceful shutdown, `/mcp`) and the replay
//!   server of recorded responses.
//! * [`eval`]: measures retrieval (Recall@k, NDCG@k, MRR), planning
//!   (precision, recall and F1 of the planned APIs, the tool graph built
//!   leave-one-set-out) and response compression.
//! * [`cli`]: the `toolrouter` command line (the binary's `main` only calls it).

pub mod args;
pub mod catalog;
pub mod cli;
pub mod compress;
pub mod config;
pub mod engine;
pub mod eval;
pub mod execute;
pub mod graph;
pub mod journal;
pub mod json_text;
pub mod llm;
pub mod loading;
pub mod mcp;
pub mod metrics;
pub mod openai;
pub mod planner;
pub mod retrieval;
pub mod retry;
pub mod server;
pub mod text;
pub mod trajectory;
pub mod upstream;
