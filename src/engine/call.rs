//! The one call pipeline every face's calls go through
//! ([`Engine::call`]): the name resolved, the caller's policy asked, the
//! arguments checked, the API called (rate-limited, guarded), the response
//! compressed, and every call, made or refused, written to the audit log
//! ([`crate::audit`]) and a telemetry span before it is answered.

use std::sync::Arc;

use serde_json::{Map, Value};
use tracing::Instrument;

use super::{Engine, MAX_ARGUMENTS_BYTES};
use crate::args::{self, Invalid, Options};
use crate::audit::{AuditEntry, Decision};
use crate::catalog::UnknownApi;
use crate::compress::{Compressed, compress};
use crate::graph::{RunCall, RunRecord};
use crate::upstream::{CallError, Response};

/// What a call came to.
#[derive(Debug)]
pub(crate) enum Called {
    /// No API has that function name (with the closest names).
    Unknown(UnknownApi),
    /// The arguments are not a JSON object or are too large: nothing checked or sent.
    Refused(String),
    /// The caller's policy does not allow the API: nothing checked or sent.
    NotAllowed(NotAllowed),
    /// The arguments do not fit the schema: every problem, nothing sent.
    Invalid(Invalid),
    /// The upstream call failed (classified, with its trace).
    Failed(CallError),
    Done {
        /// The API's function name, as the catalog spells it.
        function: String,
        response: Box<Response>,
        compressed: Compressed,
        /// What the caller should know: unknown parameters passed through,
        /// arguments not checked (the API's schema cannot be used).
        warnings: Vec<args::Problem>,
    },
}

/// A call refused whatever its arguments: the caller's policy does not
/// allow the tool, or the tool is held ([`crate::quarantine`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotAllowed {
    pub(crate) function: String,
    /// Why, in words: `policy `weather-desk``, `held: …`.
    pub(crate) why: String,
}

impl std::fmt::Display for NotAllowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` is not allowed ({})", self.function, self.why)
    }
}

/// A call for [`Engine::call`]: what every face (MCP, HTTP, execute runs) hands over.
pub(crate) struct CallRequest<'a> {
    /// The function name, in any spelling the catalog resolves.
    pub(crate) function: &'a str,
    pub(crate) arguments: &'a Value,
    /// The client's key id (its own upstream rate, its policy).
    pub(crate) client: Option<&'a str>,
    /// The request the call serves: ranks the response's fields when compressing.
    pub(crate) purpose: &'a str,
    /// The face or mode it comes through, for the audit log (`tools_call`,
    /// `mcp`, `execute`, `cli`).
    pub(crate) via: &'static str,
    /// A call on its own, recorded in the graph's availability at once;
    /// else a step of a run, recorded with the run ([`Engine::record_run`]).
    pub(crate) standalone: bool,
}

impl Engine {
    /// The one call pipeline: resolves the name (unknown: the closest
    /// names), asks the caller's policy, checks the arguments' size and
    /// shape, validates them once (`[args]`), calls the API (rate-limited,
    /// guarded), records a standalone call's outcome (off the async
    /// workers: it fsyncs) and compresses the response for the call's
    /// purpose. Whatever it came to is in the audit log before it returns.
    pub(crate) async fn call(self: &Arc<Self>, request: CallRequest<'_>) -> Called {
        let started = std::time::Instant::now();
        let span = tool_span(request.function, request.arguments, request.client);
        let called = self.call_within(&request, &span).await;
        let entry = audit_entry(&request, &called, started, self.config.access.audit_content);
        record_decision(&span, &entry);
        if let Some(audit) = &self.audit
            && !audit.record(entry).await
        {
            tracing::error!(tool = request.function, "a call is missing from the audit log (the log above says why)");
        }
        called
    }

    async fn call_within(self: &Arc<Self>, request: &CallRequest<'_>, span: &tracing::Span) -> Called {
        let catalog = self.catalog();
        let policy = self.policy(request.client);
        let api = match catalog.find(request.function) {
            Ok(api) => api,
            Err(mut unknown) => {
                // Never suggest what the caller may not use.
                if let Some(policy) = &policy {
                    let effects = self.effects_now();
                    unknown
                        .close
                        .retain(|c| catalog.find(c).is_ok_and(|api| policy.allows_api(&catalog, api, &effects)));
                }
                return Called::Unknown(unknown);
            }
        };
        if let Some(held) = self.quarantine().held(&api.function_name) {
            let why = format!("held until the operator allows it: {}", held.reasons.join("; "));
            return Called::NotAllowed(NotAllowed { function: api.function_name.clone(), why });
        }
        if let Some(policy) = policy.filter(|p| !p.allows_api(&catalog, api, &self.effects_now())) {
            let why = format!("policy `{}` of this key", policy.name);
            return Called::NotAllowed(NotAllowed { function: api.function_name.clone(), why });
        }
        if let Err(problem) = Engine::check_arguments(request.arguments) {
            return Called::Refused(problem);
        }
        let valid = match args::validate(api, request.arguments, Options::from(&self.config.args)) {
            Ok(v) => v,
            Err(invalid) => return Called::Invalid(invalid),
        };
        let started = std::time::Instant::now();
        let result = self.upstream.call(api, &valid.arguments, request.client).instrument(span.clone()).await;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let (outcome, attempts) = match &result {
            Ok(r) => (r.outcome(), r.trace.attempts.len()),
            Err(e) => (e.outcome(), e.trace.attempts.len()),
        };
        let class = outcome.class.map_or_else(|| "ok".to_string(), |c| c.name());
        span.record("toolrouter.outcome", class.as_str());
        if !outcome.ok {
            span.record("otel.status_code", "error");
            span.record("error.type", class.as_str());
        }
        crate::metrics::global().tool_call(&api.function_name, &class, attempts.saturating_sub(1) as u64, ms);
        // A call toolrouter refused itself teaches the graph nothing of the API.
        if request.standalone && result.as_ref().err().is_none_or(|e| e.asked) {
            let run = RunRecord {
                id: crate::graph::run_id("call"),
                task: String::new(),
                calls: vec![RunCall { function: outcome.function, ok: outcome.ok }],
                success: outcome.ok,
                standalone: true,
                at_unix_ms: crate::metrics::unix_ms(),
            };
            let engine = self.clone();
            if let Err(e) = tokio::task::spawn_blocking(move || engine.record_run(run)).await {
                tracing::warn!("recording a call in the graph failed: {e}");
            }
        }
        match result {
            Err(e) => Called::Failed(e),
            Ok(response) => {
                let context =
                    format!("{} {} {}", api.description, request.purpose, Value::Object(valid.arguments.clone()));
                let compressed = compress(
                    &response.body,
                    &context,
                    self.config.compress.budget,
                    self.choices.get(&api.function_name),
                );
                if crate::telemetry::capture_content() {
                    span.record("gen_ai.tool.call.result", compressed.text.as_str());
                }
                let (function, warnings) = (api.function_name.clone(), valid.warnings);
                Called::Done { function, response: Box::new(response), compressed, warnings }
            }
        }
    }

    /// Writes to the audit log a call a face refused before it reached
    /// [`Engine::call`] (its user said no).
    pub(crate) async fn record_refusal(&self, request: &CallRequest<'_>, reason: &str) {
        let content = self.config.access.audit_content;
        let entry = AuditEntry {
            decision: Decision::Refused,
            reason: Some(reason.to_string()),
            duration_ms: 0.0,
            ..AuditEntry::of(request, request.function.to_string(), content)
        };
        if let Some(audit) = &self.audit {
            audit.record(entry).await;
        }
    }

    /// Checks that `arguments` is an object of acceptable size.
    fn check_arguments(arguments: &Value) -> Result<&Map<String, Value>, String> {
        let size = arguments.to_string().len();
        if size > MAX_ARGUMENTS_BYTES {
            return Err(format!("the arguments are {size} bytes; the limit is {MAX_ARGUMENTS_BYTES}"));
        }
        arguments.as_object().ok_or_else(|| format!("the arguments must be a JSON object, got {arguments}"))
    }
}

/// What the audit log keeps of a call.
fn audit_entry(request: &CallRequest<'_>, called: &Called, started: std::time::Instant, content: bool) -> AuditEntry {
    let refused = |tool: &str, reason: String| (tool.to_string(), Decision::Refused, Some(reason), None, None);
    let (tool, decision, reason, outcome, status) = match called {
        Called::Unknown(_) => refused(request.function, "unknown tool".into()),
        Called::NotAllowed(n) => refused(&n.function, format!("not allowed ({})", n.why)),
        Called::Refused(problem) => refused(request.function, format!("arguments refused: {problem}")),
        Called::Invalid(_) => refused(request.function, "invalid arguments".into()),
        // toolrouter's own limits and guard stopped it before the API.
        Called::Failed(e) if !e.asked => refused(&e.outcome().function, e.class.name()),
        Called::Failed(e) => (e.outcome().function, Decision::Allowed, None, Some(e.class.name()), e.status),
        Called::Done { function, response, .. } => {
            (function.clone(), Decision::Allowed, None, Some("ok".to_string()), Some(response.status))
        }
    };
    let answer = match called {
        Called::Done { compressed, .. } if content => Some(compressed.text.clone()),
        _ => None,
    };
    AuditEntry {
        decision,
        reason,
        outcome,
        status,
        duration_ms: crate::units::ms(started.elapsed()),
        answer,
        ..AuditEntry::of(request, tool, content)
    }
}

impl AuditEntry {
    /// The entry of `request` for `tool`, its verdict not yet said (an
    /// allowed call of no time; its arguments if the log keeps `content`).
    fn of(request: &CallRequest<'_>, tool: String, content: bool) -> AuditEntry {
        AuditEntry {
            at_unix_ms: crate::metrics::unix_ms(),
            client: request.client.map(str::to_string),
            via: request.via.to_string(),
            tool,
            decision: Decision::Allowed,
            reason: None,
            outcome: None,
            status: None,
            duration_ms: 0.0,
            arguments: content.then(|| request.arguments.clone()),
            answer: None,
        }
    }
}

/// The audit's verdict on the call's span (OTLP, when telemetry is on).
fn record_decision(span: &tracing::Span, entry: &AuditEntry) {
    let decision = match entry.decision {
        Decision::Allowed => "allowed",
        Decision::Refused => "refused",
    };
    span.record("toolrouter.decision", decision);
    span.record("toolrouter.via", entry.via.as_str());
    if let Some(reason) = &entry.reason {
        span.record("otel.status_code", "error");
        span.record("error.type", "refused");
        span.record("toolrouter.reason", reason.as_str());
    }
}

/// The telemetry span of one tool call (`execute_tool {name}`, OpenTelemetry's
/// GenAI conventions), its arguments only with `telemetry.capture_content`.
fn tool_span(function: &str, arguments: &Value, client: Option<&str>) -> tracing::Span {
    let span = tracing::info_span!(target: crate::telemetry::TARGET, "tool call",
        "otel.name" = format!("execute_tool {function}"), "otel.kind" = "client",
        "otel.status_code" = tracing::field::Empty, "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = function, "gen_ai.tool.type" = "function",
        "toolrouter.outcome" = tracing::field::Empty, "error.type" = tracing::field::Empty,
        "toolrouter.client" = client, "toolrouter.via" = tracing::field::Empty,
        "toolrouter.decision" = tracing::field::Empty, "toolrouter.reason" = tracing::field::Empty,
        "gen_ai.tool.call.arguments" = tracing::field::Empty, "gen_ai.tool.call.result" = tracing::field::Empty);
    if crate::telemetry::capture_content() && !span.is_disabled() {
        span.record("gen_ai.tool.call.arguments", arguments.to_string());
    }
    span
}
