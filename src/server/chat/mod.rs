//! The chat pipeline every chat-speaking face is served by: a
//! chat-completions request (OpenAI's `POST /v1/chat/completions` as it
//! comes, the Responses API and Anthropic's Messages translated into one,
//! [`crate::server::translate`]) parsed and checked ([`request`], the
//! client's tools in [`tools`]), then handed to its mode: route (a request
//! with `tools`, [`route`], streamed by [`stream`]: the client's tools
//! narrowed to the `openai.max_tools` most relevant, the request sent to
//! the upstream model, returned `tool_calls` checked against the original
//! schemas and repaired through the model); plan ([`plan`]: the planner's
//! and retrieval's catalog APIs offered as the tools, then answered as
//! route mode is; the client executes the calls with `POST
//! /v1/tools/call`); execute ([`execute`]: toolrouter runs the request
//! itself and answers, its trace kept in [`traces`]). A route request
//! without `tools` is forwarded unchanged. Answers and errors are chat
//! completions' and OpenAI's.

pub mod execute;
pub mod plan;
pub mod request;
pub mod route;
pub mod stream;
pub mod tools;
pub mod traces;
mod unparsable;

use std::sync::Arc;

use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};

use tracing::Instrument;

use crate::llm::ChatModel;
use crate::server::app::App;
use crate::server::error::ApiError;
use crate::server::middleware::{ClientId, Requester, not_ready, unreadable};
use crate::telemetry;
use request::{ChatRequest, Mode};

/// Of `server.request_timeout_ms`, what a request's model requests leave
/// for answering.
const BUDGET_MARGIN_MS: u64 = 200;

pub(crate) async fn chat_completions(
    State(app): State<Arc<App>>,
    requester: Requester,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return unreadable(e),
    };
    let Requester { client, arrived, headers } = requester;
    let header_mode = headers.get("x-toolrouter-mode").and_then(|v| v.to_str().ok());
    // The request's time budget: model requests end by then, so that
    // retries and repairs fit and the answer says why (504), not `observe`.
    let spent = arrived.map_or(0, |a| a.0.elapsed().as_millis() as u64);
    let budget = app.config.server.request_timeout_ms.saturating_sub(BUDGET_MARGIN_MS + spent).max(1);
    let request = match request::parse(&body, &app.config.openai, header_mode, &app.tool_lists, budget) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let Some(llm) = app.llm.clone() else {
        return ApiError::from(crate::llm::LlmError::NotConfigured).into_response();
    };
    let span = tracing::info_span!(target: telemetry::TARGET, "chat",
        "otel.name" = format!("{} {}", request.mode.name(), request.model), "gen_ai.operation.name" = "chat",
        "gen_ai.request.model" = request.model.as_str(), "toolrouter.mode" = request.mode.name(),
        "toolrouter.tools.offered" = request.tools.len() as i64, "gen_ai.request.stream" = request.stream);
    answer(&app, request, client, &llm).instrument(span).await
}

/// Answers a parsed chat request in its mode.
async fn answer(
    app: &Arc<App>,
    mut request: ChatRequest,
    client: Option<ClientId>,
    llm: &Arc<dyn ChatModel>,
) -> Response {
    let engine = app.engine().ok().cloned();
    if request.mode == Mode::Execute
        && let Some(runner) = &app.runner
    {
        let engine = match app.engine() {
            Ok(engine) => engine.clone(),
            Err(e) => return not_ready(e),
        };
        let client = client.map(|c| c.0);
        return crate::server::chat::execute::respond(engine, runner.clone(), request, client, &app.config.openai)
            .await
            .unwrap_or_else(IntoResponse::into_response);
    }
    let mut planned = None;
    if request.mode == Mode::Plan {
        let engine = match app.engine() {
            Ok(engine) => engine,
            Err(e) => return not_ready(e),
        };
        let span = tracing::info_span!(target: telemetry::TARGET, "plan");
        match crate::server::chat::plan::offer(engine, &request, app.config.openai.max_tools).instrument(span).await {
            Ok((tools, steps)) => {
                request.tools = tools.into();
                planned = Some(steps);
            }
            Err(e) => return e.into_response(),
        }
    }
    let mut narrowing = app.narrowing();
    if let Some(runner) = &app.runner {
        // Decisions (tools narrowed out, plans) are kept for the console,
        // visible to the key that asked, as execute runs are.
        let (runner, client) = (runner.clone(), client.map(|c| c.0));
        narrowing.record = Some(Arc::new(move |decision| {
            let id = format!("{:016x}", fastrand::u64(..));
            runner.traces.insert(id.clone(), client.clone(), decision);
            id
        }));
    }
    if let Some(engine) = engine {
        narrowing.embedder = engine.embedder();
        narrowing.weight = Arc::new(move |from: &str, to: &str| engine.transition_weight(from, to));
    }
    let result = if request.stream {
        crate::server::chat::stream::stream(request, llm.clone(), app.config.openai.clone(), &narrowing, planned).await
    } else {
        crate::server::chat::route::complete(request, llm.as_ref(), &app.config.openai, &narrowing, planned).await
    };
    match result {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}
