//! OpenTelemetry traces (`[telemetry]`): `tracing` spans on the target
//! [`TARGET`], bridged by `tracing-opentelemetry` and sent to a collector
//! over OTLP/HTTP (protobuf) in batches.
//!
//! Spans on [`TARGET`] are seen by this layer only (the log layer filters
//! them out), so with telemetry off their call sites are disabled once and
//! cost a branch. The spans, named and attributed after OpenTelemetry's
//! GenAI semantic conventions:
//!
//! * a server span per HTTP request ([`crate::server::middleware`]):
//!   method, route, status, the face;
//! * `chat {model}` for a chat-speaking request (mode, model, token usage);
//! * `narrow tools`, `plan` under it;
//! * `chat {model}` (client) per model call ([`crate::llm`]): model, token
//!   usage, finish reasons;
//! * `execute_tool {name}` per tool call ([`crate::engine`]): tool name,
//!   outcome.
//!
//! A client's W3C `traceparent` is continued ([`continue_trace`]), and the
//! current span's is passed on to the model server and the APIs
//! ([`inject`]). Message text, tool arguments and results are recorded
//! only with `telemetry.capture_content` ([`capture_content`]); keys and
//! headers never.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HeaderExtractor, HeaderInjector, HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

use crate::config::TelemetryConfig;

/// The target of every span meant for OpenTelemetry, and only for it.
pub(crate) const TARGET: &str = "otel";

/// How long an export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

static ENABLED: AtomicBool = AtomicBool::new(false);
static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);

/// Whether spans are sent anywhere.
pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Whether spans may carry message text, tool arguments and results.
pub(crate) fn capture_content() -> bool {
    CAPTURE_CONTENT.load(Ordering::Relaxed)
}

/// Flushes the spans not sent yet when dropped (at the process's end).
pub(crate) struct Guard {
    provider: SdkTracerProvider,
    /// Stops the exporter's runtime thread.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("toolrouter: the last spans were not sent: {e}");
        }
    }
}

/// The layer that sends [`TARGET`]'s spans to `config`'s collector, and
/// its guard (`None` when telemetry is off).
pub(crate) fn layer<S>(config: &TelemetryConfig) -> anyhow::Result<Option<(impl Layer<S> + use<S>, Guard)>>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    let Some(url) = config.traces_url() else { return Ok(None) };
    crate::outbound::install_crypto();
    let (handle, stop) = exporter_runtime()?;
    let client = TokioReqwest { client: reqwest::Client::builder().timeout(EXPORT_TIMEOUT).build()?, handle };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .with_timeout(EXPORT_TIMEOUT)
        .with_http_client(client)
        .build()?;
    let provider = SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::builder(exporter).build())
        .with_resource(Resource::builder().with_service_name(config.service_name.clone()).build())
        .build();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("toolrouter"))
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_filter(Targets::new().with_target(TARGET, tracing::Level::TRACE));
    ENABLED.store(true, Ordering::Relaxed);
    CAPTURE_CONTENT.store(config.capture_content, Ordering::Relaxed);
    Ok(Some((layer, Guard { provider, _stop: stop })))
}

/// A runtime thread of its own for the exporter's requests: the batch
/// processor exports from a plain thread, where reqwest finds no reactor,
/// and the serving threads' runtimes may be gone at the process's end,
/// when the last spans are flushed.
fn exporter_runtime() -> anyhow::Result<(tokio::runtime::Handle, tokio::sync::oneshot::Sender<()>)> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let handle = runtime.handle().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new().name("otlp-export".into()).spawn(move || {
        runtime.block_on(async {
            let _ = stopped.await;
        });
    })?;
    Ok((handle, stop))
}

/// The exporter's HTTP client: our reqwest, on [`exporter_runtime`].
/// (opentelemetry-otlp's own reqwest client would panic on the batch
/// processor's thread, which has no tokio reactor.)
#[derive(Debug, Clone)]
struct TokioReqwest {
    client: reqwest::Client,
    handle: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for TokioReqwest {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, HttpError> {
        let client = self.client.clone();
        let task = self.handle.spawn(async move {
            let response = client.execute(reqwest::Request::try_from(request)?).await?;
            let mut answer = http::Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = response.headers().clone();
            }
            let body = response.bytes().await?;
            Ok::<_, HttpError>(answer.body(body)?)
        });
        task.await?
    }
}

/// Makes `span` (not yet entered) a child of the trace the request's W3C
/// `traceparent` names, if it names one.
pub(crate) fn continue_trace(span: &tracing::Span, headers: &http::HeaderMap) {
    if enabled() && headers.contains_key("traceparent") {
        let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
        let _ = span.set_parent(parent);
    }
}

/// Adds the current span's W3C `traceparent` to an outgoing request's headers.
pub(crate) fn inject(headers: &mut http::HeaderMap) {
    if enabled() {
        let context = tracing::Span::current().context();
        TraceContextPropagator::new().inject_context(&context, &mut HeaderInjector(headers));
    }
}
