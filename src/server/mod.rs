//! HTTP servers: thin adapters between a protocol and the engine.
//!
//! * [`replay`]: recorded API responses over HTTP in RapidAPI's request
//!   shape (`toolrouter replay`).

pub mod replay;
