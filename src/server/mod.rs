//! Everything that speaks a protocol: thin adapters between the wire and
//! the engine.
//!
//! * [`app`]: `toolrouter serve`: the listener's routes, its start,
//!   housekeeping and graceful shutdown;
//! * [`middleware`]: request ids, time limits, log lines, API keys, client
//!   rates and body limits, before any handler;
//! * [`conn`]: accepting connections, with header-read and idle timeouts;
//! * [`openai`]: the OpenAI-compatible face (one file per mode and per
//!   handler);
//! * [`anthropic`]: the Anthropic Messages face (`/v1/messages`), served
//!   by translation through the OpenAI face's chat pipeline;
//! * [`mcp`]: the MCP face (rmcp; stdio and `/mcp`);
//! * [`translate`]: what the faces served by translation through the chat
//!   pipeline share (the Responses API, Anthropic's Messages);
//! * [`replay_server`]: recorded API responses over HTTP in RapidAPI's
//!   request shape (`toolrouter replay`).

pub mod anthropic;
pub mod app;
pub mod conn;
pub mod console;
pub mod mcp;
pub mod middleware;
pub mod openai;
pub mod replay_server;
pub mod translate;

pub use app::{App, router, serve};
pub use middleware::hash_key;
