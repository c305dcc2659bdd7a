//! Calls to APIs a downstream MCP server serves: the per-client rate of
//! every call, then the server's own rate and time limit in
//! [`crate::downstream`] (the global, per-host and per-API rates guard
//! RapidAPI's hosts and do not apply). An answer
//! larger than `upstream.max_response_bytes` is cut to that size, and the
//! trace says so.

use std::time::Instant;

use serde_json::{Map, Value};

use super::{Attempt, CallError, CallTrace, ErrorClass, Response, Upstream, error, finish, not_asked};
use crate::catalog::{Api, McpTarget};
use crate::downstream::CallFailure;
use crate::units::ms;

impl Upstream {
    pub(super) async fn mcp_call(
        &self,
        api: &Api,
        target: &McpTarget,
        arguments: &Map<String, Value>,
        client: Option<&str>,
    ) -> Result<Response, CallError> {
        let started = Instant::now();
        let mut trace = CallTrace {
            function: api.function_name.clone(),
            method: "MCP tools/call".into(),
            url: format!("mcp://{}/{}", target.server, api.name),
            ..CallTrace::default()
        };
        let Some(downstream) = &self.downstream else {
            let message = format!("the MCP server `{}` is not connected in this process", target.server);
            return Err(finish(not_asked(ErrorClass::Unavailable, message, trace), started));
        };
        match self.limits.acquire_for_client(client).await {
            Ok(waited) => trace.rate_limit_wait_ms = ms(waited),
            Err(limited) => {
                let mut e = not_asked(ErrorClass::RateLimited, limited.to_string(), trace);
                e.retry_after_ms = Some(ms(limited.retry_after));
                return Err(finish(e, started));
            }
        }
        let at = ms(started.elapsed());
        let result = downstream.call(&target.server, &api.name, arguments.clone()).await;
        let elapsed = ms(started.elapsed()) - at;
        // The downstream layer's own rate limit refuses before asking the server.
        let asked = !matches!(result, Err(CallFailure::RateLimited { .. }));
        let (class, message, retry_after_ms) = match result {
            Ok(answer) => {
                let cap = self.config.max_response_bytes;
                let (body, outcome) = if answer.bytes > cap {
                    let text = answer.body.to_string();
                    let cut = crate::text::clip(&text, cap);
                    (Value::String(cut), format!("ok; the result was cut from {} to {cap} bytes", answer.bytes))
                } else {
                    (answer.body, "ok".to_string())
                };
                trace.attempts.push(Attempt { started_ms: at, elapsed_ms: elapsed, outcome, retry_in_ms: None });
                trace.elapsed_ms = ms(started.elapsed());
                return Ok(Response { status: 200, body, bytes: answer.bytes, trace });
            }
            Err(failure) => match &failure {
                CallFailure::Unavailable { .. } => (ErrorClass::Unavailable, failure.to_string(), None),
                CallFailure::Timeout { .. } => (ErrorClass::Timeout, failure.to_string(), None),
                CallFailure::RateLimited { retry_after } => {
                    (ErrorClass::RateLimited, failure.to_string(), Some(ms(*retry_after)))
                }
                CallFailure::Refused { .. } => (ErrorClass::ClientError, failure.to_string(), None),
                CallFailure::ToolError { .. } => (ErrorClass::ToolError, failure.to_string(), None),
            },
        };
        trace.attempts.push(Attempt {
            started_ms: at,
            elapsed_ms: elapsed,
            outcome: message.clone(),
            retry_in_ms: None,
        });
        let mut e = error(class, message, trace);
        (e.retry_after_ms, e.asked) = (retry_after_ms, asked);
        Err(finish(e, started))
    }
}
