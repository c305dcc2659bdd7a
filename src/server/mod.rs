//! HTTP servers: thin adapters between a protocol and the engine.
//!
//! * [`http`]: `toolrouter serve`: health, readiness, API keys, body
//!   limits, graceful shutdown, and the MCP face at `/mcp`;
//! * [`conn`]: accepting its connections, with header-read and idle
//!   timeouts;
//! * [`replay`]: recorded API responses over HTTP in RapidAPI's request
//!   shape (`toolrouter replay`).

pub mod conn;
pub mod http;
pub mod replay;
