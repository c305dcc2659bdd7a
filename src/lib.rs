//! toolrouter: a tool-routing proxy between AI agents and thousands of real APIs.
//!
//! # Layout
//!
//! Four rooms, bottom to top; a module imports only from its own room and
//! the ones below. The protocol rule is checkable: nothing outside
//! `server/` and `cli/` uses axum or rmcp, the crates of the faces'
//! protocols, except `downstream/`, which speaks MCP as a client as `llm`
//! speaks OpenAI (`grep -rln "axum\|rmcp" src --include=*.rs | grep -v
//! "src/server/\|src/cli/\|src/downstream/"` finds only this file). docs/architecture.md tells how a request flows through
//! them.
//!
//! **Foundations and the domain** (no protocol, no network):
//!
//! * [`config`]: the TOML configuration file plus `TOOLROUTER_*` environment
//!   overrides, validated at start; secrets only from env or files.
//! * [`journal`]: an append-only, fsync'd, per-line checksummed JSON-lines
//!   log (the graph's run log, the planner's memory).
//! * [`text`]: text cut short for a person or a model (`clip`).
//! * [`units`]: milliseconds, the unit of every reported duration (`ms`).
//! * [`metrics`]: process counters the engine and the server count,
//!   rendered in Prometheus' text format for `GET /metrics`.
//! * [`telemetry`]: OpenTelemetry traces: the spans every layer opens on
//!   one `tracing` target, sent over OTLP, and W3C trace context in and out.
//! * [`json_text`]: JSON that arrives as text (JSON or Python literals in
//!   strings, documents cut short) read as the value it stands for.
//! * [`catalog`]: loads ToolBench tool JSON, compacted JSONL, OpenAPI 3
//!   specs, query `api_list` entries and the embedded example specs into
//!   one model of tools and APIs, each with a JSON Schema and a unique,
//!   OpenAI-valid function name; resolves the name variants of trajectories;
//!   reads JSON Schema of any dialect as draft 2020-12 (`catalog::dialect`);
//!   on a reload, reads only the source files written since
//!   (`catalog::stamp`, `catalog::reuse`).
//! * [`args`]: validates a call's arguments against its API's schema, with
//!   safe coercions, strict mode and LLM-actionable errors (compiled
//!   validators cached by schema); checks URLs against the catalog's hosts.
//! * [`trajectory`]: parses tool-call trajectories (ToolBench DFS trees and
//!   CoT chains, converted answers, StepTool runs, SFT conversations) into
//!   one model, and maps their function names to catalog APIs.
//! * [`retrieval`]: finds the APIs for a request: BM25 over APIs and whole
//!   tools, fastembed embeddings (toolrouter's own model, trained for
//!   tools: `models/tool-minilm/`) with an HNSW graph or
//!   exact scan, fused by weighted reciprocal rank; multi-part requests
//!   split into intents; the index persists in the state directory. Route
//!   mode ranks a client's own tools (`tool_list`; a kept tool brings the
//!   tool that produces what it needs, `tool_list::companions`), their vectors kept per
//!   tool (`tool_vectors`), learning which tools the model called for
//!   which request and each tool's vector from the requests it served
//!   (`tool_memory`).
//! * [`graph`]: the tool graph (petgraph): transition weights and API
//!   availability learned from trajectories, updated online after every
//!   run, durable as a snapshot plus an fsync'd run log.
//! * [`planner`]: graph-guided depth-first search for a chain of API calls,
//!   with backtracking, budgets, reflection, memory, argument completion
//!   and repair; `Decider` and `Caller` traits (a deterministic decider
//!   and a dry run here; the LLM decider is the engine's).
//! * [`rule`]: a rule naming tools (`source:`, `server:`, `category:`,
//!   `name:` globs, `read-only`, `destructive`) and what it matches them by.
//! * [`policy`]: who may use which tools: `[[access.policies]]`' rules
//!   per API key, as a mask over the catalog.
//! * [`quarantine`]: tools held before they reach a model: MCP and OpenAPI
//!   tools scanned for hidden text, instructions and secrets' paths, MCP
//!   tools changed since first seen.
//! * [`audit`]: the audit log of every tool call made or refused, fsync'd
//!   in groups by one thread.
//! * [`compress`]: shortens responses to a character budget for a model,
//!   always as valid JSON.
//!
//! **Outbound HTTP** (toolrouter as a client):
//!
//! * [`outbound`]: what every outbound request shares (the model's, the
//!   APIs' and the downstream MCP servers'): backoff with jitter,
//!   `Retry-After`, bodies read up to a cap, the `User-Agent`, the TLS
//!   crypto provider.
//! * [`upstream`]: calls the APIs: requests in RapidAPI's conventions, the
//!   SSRF guard, rate limits (governor), retries, size and time caps, and
//!   the replay table of recorded responses.
//! * [`cluster`]: what replicas share through Redis (`[cluster]`): the
//!   rate limits, atomically (GCRA in a Lua script), with a local
//!   fallback; the run stream every replica learns from, fed from a
//!   durable outbox; execute traces.
//! * [`downstream`]: the user's own MCP servers, with toolrouter as their
//!   client (rmcp's client side): connects over stdio or streamable HTTP,
//!   lists their tools for the catalog, calls them, reconnects.
//! * [`llm`]: the client of an upstream OpenAI-compatible model (typed
//!   wire types read in one pass; non-streaming and streaming, every way a
//!   stream ends told apart; one time budget per request; hyper-util's
//!   pooled client, not reqwest's layers).
//!
//! **The engine and the chat core** (what every face shares,
//! protocol-neutral):
//!
//! * [`engine`]: search, plan, the one call pipeline (resolve the name
//!   with suggestions, validate, call upstream, compress, learn), recording
//!   runs; [`engine::loading`] loads it in the background;
//!   [`engine::solve`] carries a request out (execute mode's loop, the
//!   model choosing moves through [`engine::llm_decider`]).
//! * [`chat`]: a typed chat request in, a typed whole answer, chunk
//!   stream or error out: route mode (the client's tools narrowed by
//!   [`chat::narrowing`], tool calls checked and repaired; [`chat::search`]:
//!   the model's tool search over deferred or narrowed-out tools), plan and execute modes, their
//!   decision records and traces. Every chat face is a codec over it;
//!   `eval` and `bench` call it directly.
//!
//! **The faces** (everything that speaks a protocol):
//!
//! * [`server`]: `toolrouter serve` (the shared state, middleware,
//!   connections, graceful shutdown), the OpenAI-compatible face
//!   ([`server::openai`]: chat completions and the Responses API), the
//!   Anthropic face ([`server::anthropic`]), the MCP face
//!   ([`server::mcp`]), the console and the replay server of recorded
//!   responses; no face imports another or the router.
//! * [`eval`]: measures retrieval (Recall@k, NDCG@k, MRR), planning
//!   (precision, recall and F1 of the planned APIs) and response
//!   compression against plain baselines.
//! * [`cli`]: the `toolrouter` command line, one file per subcommand (the
//!   binary's `main` only calls it).
//!
//! Tests only: `fuzz`, property tests of every parser that reads untrusted
//! input (proptest).

pub mod args;
pub(crate) mod audit;
pub mod catalog;
pub mod chat;
pub mod cli;
pub mod cluster;
pub(crate) mod compress;
pub mod config;
pub(crate) mod consent;
pub(crate) mod downstream;
pub mod engine;
pub mod eval;
#[cfg(test)]
mod fuzz;
pub mod graph;
pub(crate) mod journal;
pub(crate) mod json_text;
pub mod llm;
pub(crate) mod metrics;
pub(crate) mod outbound;
pub mod planner;
pub(crate) mod policy;
pub mod quarantine;
pub mod retrieval;
pub(crate) mod rule;
pub mod server;
pub(crate) mod telemetry;
pub(crate) mod text;
pub(crate) mod trajectory;
pub(crate) mod units;
pub mod upstream;
