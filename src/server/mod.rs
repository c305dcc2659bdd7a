//! Everything that speaks a protocol: thin adapters between the wire and
//! the engine, on a floor they share.
//!
//! The floor:
//!
//! * [`app`]: `toolrouter serve`: the state the faces share, each face's
//!   routes joined under the middleware, start, housekeeping and graceful
//!   shutdown;
//! * [`middleware`]: request ids, time limits, log lines, API keys (the
//!   client's identity, [`middleware::ClientId`]), client rates and body
//!   limits, before any handler;
//! * [`gate`]: the API keys and per-key request rate the middleware
//!   admits requests by, swapped whole by a reload;
//! * [`oauth`]: OAuth 2.1 bearer tokens beside the keys (the protected
//!   resource metadata, the challenge, the issuer's keys);
//! * [`reload`]: reloading the configuration on SIGHUP (`serve` and `mcp`);
//! * [`conn`]: accepting connections, with header-read and idle timeouts;
//! * [`tls`]: TLS on the listener, its certificate reloaded when it changes;
//! * [`error`]: the error every face answers with (OpenAI's shape; each
//!   face may rewrite it into its own);
//! * [`state`]: the state every face shares (configuration, gate, engine,
//!   cluster, the chat core), nothing face-specific;
//! * [`translate`]: what the faces whose shape is not chat's share (the
//!   Responses API, Anthropic's Messages): their event streams made from
//!   the chat core's chunks.
//!
//! The faces, each a folder with its own `routes()`, importing the floor
//! and never each other:
//!
//! * [`openai`]: the OpenAI-compatible face (chat completions, Responses,
//!   models) and toolrouter's own REST endpoints;
//! * [`anthropic`]: the Anthropic Messages face (`/v1/messages`);
//! * [`mcp`]: the MCP face (rmcp; stdio and `/mcp`);
//! * [`console`]: the operator's web console;
//! * [`replay_server`]: recorded API responses over HTTP in RapidAPI's
//!   request shape (`toolrouter replay`, a server of its own).

pub mod anthropic;
pub mod app;
pub mod conn;
pub mod console;
pub mod error;
pub mod gate;
pub mod mcp;
pub mod middleware;
pub mod oauth;
pub mod openai;
pub mod reload;
pub mod replay_server;
pub mod state;
pub mod tls;
pub mod translate;

pub use app::{router, serve};
pub use middleware::hash_key;
pub use state::App;
