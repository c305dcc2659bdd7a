//! The telemetry span of one model call (`chat {model}`, a client span
//! of OpenTelemetry's GenAI conventions): the model asked and answering,
//! token usage and finish reasons; the messages and the answer only with
//! `telemetry.capture_content`.

use futures_util::StreamExt;
use tracing::field::Empty;

use super::wire::{Completion, RequestBody};
use super::{Chunks, LlmError};
use crate::telemetry;

/// The span of a call with `body` (disabled, and free, without telemetry).
pub(super) fn model_call(body: &RequestBody) -> tracing::Span {
    let model = body.get("model").and_then(|m| serde_json::from_str::<String>(m.get()).ok()).unwrap_or_default();
    let span = tracing::info_span!(target: telemetry::TARGET, "model call",
        "otel.name" = format!("chat {model}"), "otel.kind" = "client", "otel.status_code" = Empty,
        "gen_ai.operation.name" = "chat", "gen_ai.provider.name" = "openai", "gen_ai.request.model" = model,
        "gen_ai.response.model" = Empty, "gen_ai.response.id" = Empty, "gen_ai.response.finish_reasons" = Empty,
        "gen_ai.usage.input_tokens" = Empty, "gen_ai.usage.output_tokens" = Empty,
        "gen_ai.input.messages" = Empty, "gen_ai.output.messages" = Empty, "error.type" = Empty);
    if telemetry::capture_content() && !span.is_disabled() {
        span.record("gen_ai.input.messages", body.get("messages").map_or("", |m| m.get()));
    }
    span
}

/// Records what an answer (or a chunk of one) says about itself; the
/// answer's text too when `whole` and content is captured.
pub(super) fn answered<C: serde::Serialize>(
    span: &tracing::Span,
    completion: &Completion<C>,
    finish: Vec<&str>,
    whole: bool,
) {
    if span.is_disabled() {
        return;
    }
    if let Some(model) = &completion.model {
        span.record("gen_ai.response.model", model.as_str());
    }
    if let Some(id) = &completion.id {
        span.record("gen_ai.response.id", id.as_str());
    }
    if let Some(usage) = &completion.usage {
        // As i64: tracing-opentelemetry sends a u64 as a string.
        if let Some(n) = usage.prompt_tokens.and_then(|n| i64::try_from(n).ok()) {
            span.record("gen_ai.usage.input_tokens", n);
        }
        if let Some(n) = usage.completion_tokens.and_then(|n| i64::try_from(n).ok()) {
            span.record("gen_ai.usage.output_tokens", n);
        }
    }
    if !finish.is_empty() {
        span.record("gen_ai.response.finish_reasons", finish.join(","));
    }
    if whole && telemetry::capture_content() {
        let choices = serde_json::to_string(&completion.choices).unwrap_or_default();
        span.record("gen_ai.output.messages", choices);
    }
}

/// Records a failed call.
pub(super) fn failed(span: &tracing::Span, error: &LlmError) {
    span.record("otel.status_code", "error");
    let kind = match error {
        LlmError::NotConfigured => "not_configured",
        LlmError::Timeout(_) => "timeout",
        LlmError::Deadline => "deadline",
        LlmError::Connect(_) => "unreachable",
        LlmError::Status { .. } => "status",
        LlmError::Malformed(_) => "malformed",
        LlmError::Stream(_) => "stream_error",
        LlmError::Truncated(_) => "truncated",
    };
    span.record("error.type", kind);
}

/// `chunks`, the span open until they end, recording the usage and finish
/// reasons they carry.
pub(super) fn streamed(span: tracing::Span, chunks: Chunks) -> Chunks {
    if span.is_disabled() {
        return chunks;
    }
    chunks
        .inspect(move |chunk| match chunk {
            Ok(chunk) => {
                let finish = chunk.choices.iter().filter_map(|c| c.finish_reason.as_deref()).collect();
                answered(&span, chunk, finish, false);
            }
            Err(e) => failed(&span, e),
        })
        .boxed()
}
