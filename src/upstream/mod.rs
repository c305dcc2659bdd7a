//! Calls to the APIs themselves (docs/architecture.md §7).
//!
//! [`Upstream::call`] takes an API and validated arguments and returns the
//! response or a classified [`CallError`], with a [`CallTrace`] of every
//! attempt either way. On the way:
//!
//! 1. [`request`] builds the HTTP request in RapidAPI's conventions
//!    (`X-RapidAPI-Key` from the environment or a file, never logged;
//!    `X-RapidAPI-Host`);
//! 2. [`guard`] refuses hosts the catalog does not name and internal
//!    addresses (in the DNS resolver, so redirects are covered too);
//! 3. [`limits`] takes a cell of the global, per-host, per-API and
//!    per-client rates, or refuses with when to retry;
//! 4. the request is sent with a pooled client (one per thread, rustls, gzip) at most
//!    `max_attempts` times: again after connect errors, timeouts, 5xx and
//!    429 (after `Retry-After`, which also slows the host), with
//!    exponential backoff and jitter, never after other 4xx, and never past
//!    the call's deadline; each attempt has its own timeout covering the
//!    whole read, and the body is cut off at `max_response_bytes`.
//!
//! An API a downstream MCP server serves goes to it instead ([`mcp`]),
//! through the same rate limits.
//!
//! With `mode = "replay"` the answer comes from the [`replay`] table in
//! the process instead (limits still apply). Every result carries an
//! [`Outcome`] (success, error class, latency) for the tool graph's
//! availability.
//!
//! A reload ([`Upstream::reconfigure`]) swaps the credentials (secrets
//! read again) and the rate limits in place.

pub(crate) mod answer;
mod credentials;
pub(crate) mod guard;
pub(crate) mod limits;
mod mcp;
pub mod replay;
pub mod request;

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use serde::Serialize;
use serde_json::{Map, Value};
use url::Url;

use crate::catalog::{Api, Catalog};
use crate::config::{Config, UpstreamConfig, UpstreamMode};
use crate::downstream::Downstream;
use crate::outbound::{PerThread, ReadError};
use crate::units::ms;
pub use credentials::Credentials;
pub use guard::Guard;
pub use limits::{Limit, Limits};
pub use replay::{Match, Outage, ReplayTable, replay_body};

/// The longest `Retry-After` honoured within a call; longer ones end it.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// What kind of failure a call ended in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The request could not be built (an argument the URL needs is missing…).
    Request,
    /// The guard refused the target (host, address, redirect).
    Refused,
    RateLimited,
    Connect,
    Timeout,
    /// The call's overall deadline passed.
    Deadline,
    /// The API answered 4xx (429 is `rate_limited` once retries are spent).
    ClientError,
    /// The API answered 5xx.
    ServerError,
    /// The body was larger than `max_response_bytes`.
    TooLarge,
    /// The connection broke while reading the body.
    Body,
    /// The API said JSON but sent something else.
    MalformedJson,
    /// The API answered with an HTML page instead of data.
    NotJson,
    /// Replay: nothing recorded for this API.
    NoRecording,
    /// The downstream MCP server serving the API is not connected.
    Unavailable,
    /// A downstream MCP tool ran and reported an error (`isError`).
    ToolError,
    /// The API answered 2xx with nothing, or an error instead of data
    /// ([`answer::failure`]); the answer still reaches the caller.
    ErrorAnswer,
}

impl ErrorClass {
    /// The class as serialized: `rate_limited`, `server_error`…
    pub(crate) fn name(self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
    }
}

/// One attempt of a call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attempt {
    pub started_ms: f64,
    pub elapsed_ms: f64,
    /// `200 OK`, `timeout`, `connect error: …`
    pub outcome: String,
    /// The wait before the next attempt, if there is one.
    pub retry_in_ms: Option<f64>,
}

/// What happened during a call.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CallTrace {
    pub function: String,
    pub method: String,
    /// The API's URL requested (no credentials: the key travels in a
    /// header; never `upstream.base_url`, an address of the operator's).
    pub url: String,
    pub rate_limit_wait_ms: f64,
    pub attempts: Vec<Attempt>,
    pub elapsed_ms: f64,
    /// Replay: how the recording was found.
    pub replay: Option<Match>,
}

/// A call's result as the tool graph sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Outcome {
    pub(crate) function: String,
    pub(crate) ok: bool,
    pub(crate) class: Option<ErrorClass>,
    pub(crate) latency_ms: f64,
}

/// A successful response.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Response {
    pub status: u16,
    /// The body as JSON; a text body is a JSON string.
    pub body: Value,
    pub bytes: usize,
    pub trace: CallTrace,
}

/// A failed call.
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
#[error("{message}")]
pub struct CallError {
    pub class: ErrorClass,
    pub message: String,
    pub status: Option<u16>,
    /// When to try again (rate limits, `Retry-After`).
    pub retry_after_ms: Option<f64>,
    pub trace: Box<CallTrace>,
    /// The API was asked. `false`: toolrouter refused the call itself (a
    /// request it could not build, the guard, its own rate limits, a host
    /// held back after its 429, a downstream server not connected here),
    /// which says nothing about the API: the tool graph does not learn it.
    #[serde(skip_serializing_if = "is_true")]
    pub asked: bool,
}

impl Response {
    /// A 2xx answer is a success unless it carries nothing or an error
    /// instead of data ([`answer::failure`]).
    pub(crate) fn outcome(&self) -> Outcome {
        let ok = self.failure().is_none();
        let class = (!ok).then_some(ErrorClass::ErrorAnswer);
        Outcome { function: self.trace.function.clone(), ok, class, latency_ms: self.trace.elapsed_ms }
    }

    /// Why the answer is not data, if it is not.
    pub(crate) fn failure(&self) -> Option<&'static str> {
        answer::failure(&self.trace.method, &self.body)
    }
}

impl CallError {
    pub(crate) fn outcome(&self) -> Outcome {
        Outcome {
            function: self.trace.function.clone(),
            ok: false,
            class: Some(self.class),
            latency_ms: self.trace.elapsed_ms,
        }
    }
}

enum Backend {
    /// A pool per thread ([`PerThread`]).
    Live(Box<PerThread<reqwest::Client>>),
    Replay(ReplayTable),
}

/// The upstream layer: one per process.
pub struct Upstream {
    backend: Backend,
    limits: Limits,
    guard: Arc<Guard>,
    config: UpstreamConfig,
    base_url: Option<Url>,
    /// The downstream MCP servers serving the catalog's MCP tools.
    downstream: Option<Arc<Downstream>>,
    /// Credentials of the user's own services, by host, and the RapidAPI
    /// key (shared with the clients' redirect policy).
    credentials: Arc<ArcSwap<Credentials>>,
}

impl Upstream {
    /// The upstream layer of `config` over `catalog` (loads the replay table in replay mode).
    pub fn new(catalog: &Catalog, config: &Config) -> anyhow::Result<Upstream> {
        let c = &config.upstream;
        let credentials = Credentials::read(config)?;
        let guard = Arc::new(
            Guard::new(catalog, &c.allowed_hosts, c.allow_private).with_private_hosts(&credentials.private_hosts),
        );
        let credentials = Arc::new(ArcSwap::from_pointee(credentials));
        let backend = match c.mode {
            UpstreamMode::Replay => Backend::Replay(
                ReplayTable::load(&c.replay_dir, catalog)
                    .map_err(|e| anyhow::anyhow!("reading the replay table {}: {e}", c.replay_dir.display()))?,
            ),
            UpstreamMode::Live => {
                let (c, guard, hosts) = (c.clone(), guard.clone(), credentials.clone());
                let first = client(&c, guard.clone(), hosts.clone())?;
                // The same settings built once already: another thread's
                // build fails only if the machine does (then it shares the first pool).
                Backend::Live(Box::new(PerThread::new(move || {
                    client(&c, guard.clone(), hosts.clone()).unwrap_or_else(|_| first.clone())
                })))
            }
        };
        let base_url = (!c.base_url.is_empty()).then(|| Url::parse(&c.base_url)).transpose()?;
        let cluster = crate::cluster::Cluster::open(&config.cluster)?;
        let limits = Limits::shared(c, cluster, config.cluster.replicas);
        Ok(Upstream { backend, limits, guard, config: c.clone(), base_url, downstream: None, credentials })
    }

    /// Takes `credentials` (read beforehand: [`Credentials::read`]) and the
    /// rate limits of `config` in place of those in use (a reload); calls
    /// under way finish with what they started with. Whether the rate
    /// limits changed.
    pub(crate) fn reconfigure(&self, config: &UpstreamConfig, credentials: Credentials) -> bool {
        self.guard.set_private_hosts(&credentials.private_hosts);
        self.credentials.store(Arc::new(credentials));
        self.limits.reconfigure(config)
    }

    /// Calls the hosts `catalog` names (its sources were reloaded). The
    /// replay table stays as loaded at start.
    pub(crate) fn set_catalog(&self, catalog: &Catalog) {
        self.guard.set_catalog(catalog);
    }

    /// Sends calls to the catalog's MCP tools to `downstream`.
    pub(crate) fn with_downstream(mut self, downstream: Arc<Downstream>) -> Upstream {
        self.downstream = Some(downstream);
        self
    }

    /// The rate limits calls go through.
    pub(crate) fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Calls `api` with validated `arguments` on behalf of `client` (a client key id).
    pub async fn call(
        &self,
        api: &Api,
        arguments: &Map<String, Value>,
        client: Option<&str>,
    ) -> Result<Response, CallError> {
        if let Some(target) = &api.mcp {
            return self.mcp_call(api, target, arguments, client).await;
        }
        let started = Instant::now();
        let deadline = started + Duration::from_millis(self.config.deadline_ms);
        let mut trace = CallTrace { function: api.function_name.clone(), ..CallTrace::default() };
        let fail = |class, message: String, trace: &CallTrace| not_asked(class, message, trace.clone());
        let http = match request::build(api, arguments, self.base_url.as_ref()) {
            Ok(h) => h,
            Err(message) => return Err(fail(ErrorClass::Request, message, &trace)),
        };
        trace.method = http.method.to_string();
        trace.url = http.api_url.to_string();
        if let Err(refused) = self.guard.check_url(&http.url) {
            return Err(fail(ErrorClass::Refused, refused.0, &trace));
        }
        match self.limits.acquire(&http.api_host, &api.function_name, client).await {
            Ok(waited) => trace.rate_limit_wait_ms = ms(waited),
            Err(limited) => {
                let mut e = fail(ErrorClass::RateLimited, limited.to_string(), &trace);
                e.retry_after_ms = Some(ms(limited.retry_after));
                return Err(finish(e, started));
            }
        }
        let result = match &self.backend {
            Backend::Replay(table) => replay::call(table, api, arguments, trace, started),
            Backend::Live(clients) => self.live_call(clients.get(), &http, trace, started, deadline).await,
        };
        match result {
            Ok(mut r) => {
                r.trace.elapsed_ms = ms(started.elapsed());
                Ok(r)
            }
            Err(e) => Err(finish(e, started)),
        }
    }

    async fn live_call(
        &self,
        client: &reqwest::Client,
        http: &request::HttpCall,
        mut trace: CallTrace,
        started: Instant,
        deadline: Instant,
    ) -> Result<Response, CallError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let now = Instant::now();
            if now >= deadline {
                return Err(error(ErrorClass::Deadline, "the call's deadline passed before an answer".into(), trace));
            }
            let timeout = Duration::from_millis(self.config.timeout_ms).min(deadline - now);
            let at = ms(now - started);
            let result = tokio::time::timeout(timeout, self.send(client, http)).await;
            let elapsed = ms(now.elapsed());
            let failure = match result {
                Err(_) => {
                    Failure::retry(ErrorClass::Timeout, format!("no complete answer within {:.0} ms", ms(timeout)))
                }
                Ok(Err(f)) => f,
                Ok(Ok((status, body, bytes))) => {
                    trace.attempts.push(Attempt {
                        started_ms: at,
                        elapsed_ms: elapsed,
                        outcome: status_text(status),
                        retry_in_ms: None,
                    });
                    return Ok(Response { status, body, bytes, trace });
                }
            };
            let mut retry_in = (failure.retryable && attempt < self.config.max_attempts)
                .then(|| crate::outbound::backoff(self.config.backoff_ms, attempt));
            if let Some(after) = failure.retry_after {
                self.limits.slow_host(&http.api_host, after.min(MAX_RETRY_AFTER));
                retry_in = retry_in.map(|_| after).filter(|a| *a <= MAX_RETRY_AFTER);
            }
            if let Some(wait) = retry_in
                && Instant::now() + wait >= deadline
            {
                retry_in = None;
            }
            trace.attempts.push(Attempt {
                started_ms: at,
                elapsed_ms: elapsed,
                outcome: failure.message.clone(),
                retry_in_ms: retry_in.map(ms),
            });
            match retry_in {
                Some(wait) => tokio::time::sleep(wait).await,
                None => {
                    let attempts = trace.attempts.len();
                    let tries = if attempts == 1 { String::new() } else { format!(" (after {attempts} attempts)") };
                    let mut e = error(failure.class, format!("{}{tries}", failure.message), trace);
                    e.status = failure.status;
                    e.retry_after_ms = failure.retry_after.map(ms);
                    return Err(e);
                }
            }
        }
    }

    /// One attempt: send, read the body up to the cap, interpret it.
    async fn send(&self, client: &reqwest::Client, http: &request::HttpCall) -> Result<(u16, Value, usize), Failure> {
        let credentials = self.credentials.load();
        let credential = credentials.for_url(&http.url);
        let url = credential.map_or_else(|| http.url.clone(), |c| c.url(&http.url));
        let mut req = client.request(http.method.clone(), url).header("X-RapidAPI-Host", &http.api_host);
        if let Some(credential) = credential {
            req = credential.authorize(req).map_err(|message| Failure::fatal(ErrorClass::Request, message))?;
        }
        // The RapidAPI key goes to RapidAPI's hosts (or to the base URL standing in for them), no other.
        if let Some(key) =
            credentials.rapidapi_key.as_ref().filter(|_| self.base_url.is_some() || is_rapidapi_host(&http.api_host))
        {
            let mut value = reqwest::header::HeaderValue::from_str(key.expose()).map_err(|_| {
                Failure::fatal(ErrorClass::Request, "the RapidAPI key is not a valid header value".into())
            })?;
            value.set_sensitive(true);
            req = req.header("X-RapidAPI-Key", value);
        }
        for (name, value) in &http.headers {
            req = req.header(name, value);
        }
        if crate::telemetry::enabled() {
            let mut trace = http::HeaderMap::new();
            crate::telemetry::inject(&mut trace);
            req = req.headers(trace);
        }
        if let Some(body) = &http.body {
            req = req.header("content-type", "application/json").body(body.to_string());
        }
        let response = req.send().await.map_err(classify)?;
        let status = response.status();
        let content_type =
            response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
        let retry_after =
            response.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(crate::outbound::retry_after);
        let cap = self.config.max_response_bytes;
        let bytes = match crate::outbound::read_capped(http::Response::from(response), cap).await {
            Ok(bytes) => bytes,
            Err(ReadError::TooLarge { declared: true }) => {
                return Err(Failure::fatal(ErrorClass::TooLarge, format!("the response is larger than {cap} bytes")));
            }
            Err(ReadError::TooLarge { declared: false }) => {
                let message = format!("the response is larger than {cap} bytes; cut off");
                return Err(Failure::fatal(ErrorClass::TooLarge, message));
            }
            Err(ReadError::Read(e)) => return Err(classify(e)),
        };
        let code = status.as_u16();
        if status.as_u16() == 429 {
            let mut f = Failure::retry(ErrorClass::RateLimited, format!("{}: {}", status_text(code), snippet(&bytes)));
            f.status = Some(code);
            // Without a Retry-After the retry backs off like any other.
            f.retry_after = retry_after;
            return Err(f);
        }
        if status.is_server_error() {
            let mut f = Failure::retry(ErrorClass::ServerError, format!("{}: {}", status_text(code), snippet(&bytes)));
            f.status = Some(code);
            return Err(f);
        }
        if !status.is_success() {
            let mut f = Failure::fatal(ErrorClass::ClientError, format!("{}: {}", status_text(code), snippet(&bytes)));
            f.status = Some(code);
            return Err(f);
        }
        let body = interpret(&bytes, &content_type)?;
        Ok((code, body, bytes.len()))
    }
}

/// Whether `host` is one of RapidAPI's (`*.rapidapi.com`).
fn is_rapidapi_host(host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    host == "rapidapi.com" || host.ends_with(".rapidapi.com")
}

/// The pooled HTTP client: rustls, gzip, the guarded resolver, redirects
/// re-checked (and never followed to another host from a host that has a
/// credential, which would carry it there).
fn client(
    c: &UpstreamConfig,
    guard: Arc<Guard>,
    credentials: Arc<ArcSwap<Credentials>>,
) -> anyhow::Result<reqwest::Client> {
    crate::outbound::install_crypto();
    let max_redirects = c.max_redirects;
    let resolver = guard.resolver();
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > max_redirects {
            return attempt.error(format!("more than {max_redirects} redirects"));
        }
        let from = attempt.previous().first().map(credentials::host_key).unwrap_or_default();
        let to = credentials::host_key(attempt.url());
        if from != to && credentials.load().hosts.contains(&from) {
            return attempt
                .error(format!("redirect refused: {from} has a credential and redirected to another host ({to})"));
        }
        match guard.check_url(attempt.url()) {
            Ok(()) => attempt.follow(),
            Err(refused) => attempt.error(format!("redirect refused: {refused}")),
        }
    });
    Ok(reqwest::Client::builder()
        .user_agent(crate::outbound::USER_AGENT)
        .redirect(policy)
        .dns_resolver(Arc::new(resolver))
        .connect_timeout(Duration::from_millis(c.timeout_ms))
        .pool_idle_timeout(Duration::from_secs(60))
        .build()?)
}

/// Why an attempt failed, and whether another may help.
struct Failure {
    class: ErrorClass,
    message: String,
    status: Option<u16>,
    retryable: bool,
    retry_after: Option<Duration>,
}

impl Failure {
    fn retry(class: ErrorClass, message: String) -> Failure {
        Failure { class, message, status: None, retryable: true, retry_after: None }
    }

    fn fatal(class: ErrorClass, message: String) -> Failure {
        Failure { class, message, status: None, retryable: false, retry_after: None }
    }
}

/// Classifies a reqwest error, naming its innermost cause.
fn classify(e: reqwest::Error) -> Failure {
    // The URL may carry a credential (a query API key): never in a message.
    let e = e.without_url();
    let mut cause = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        cause = s.to_string();
        source = s.source();
    }
    if e.is_redirect() || cause.contains("redirect refused") || cause.contains("resolves only to private") {
        return Failure::fatal(ErrorClass::Refused, cause);
    }
    if e.is_timeout() {
        return Failure::retry(ErrorClass::Timeout, format!("timeout: {cause}"));
    }
    if e.is_connect() {
        return Failure::retry(ErrorClass::Connect, format!("connect error: {cause}"));
    }
    if e.is_body() || e.is_decode() {
        return Failure::retry(ErrorClass::Body, format!("the connection broke while reading the body: {cause}"));
    }
    Failure::retry(ErrorClass::Connect, format!("request failed: {cause}"))
}

/// The body as JSON: parsed when it is JSON. Text that stands for an
/// object or array (JSON served as `text/plain`, a Python literal, a
/// document cut short: [`crate::json_text`]) is that value; other text,
/// XML included, is a string. Declared JSON that does not parse and HTML
/// pages (a login or error page where data was expected) are errors.
fn interpret(bytes: &[u8], content_type: &str) -> Result<Value, Failure> {
    let text = String::from_utf8_lossy(bytes);
    let trimmed = text.trim_start();
    let xml = content_type.contains("xml") || trimmed.starts_with("<?xml");
    match serde_json::from_str::<Value>(&text) {
        Ok(v) => Ok(v),
        Err(e) if content_type.contains("json") => Err(Failure::fatal(
            ErrorClass::MalformedJson,
            format!("the response is not valid JSON ({e}): {}", snippet(bytes)),
        )),
        Err(_) if !xml && (content_type.contains("html") || trimmed.starts_with('<')) => {
            let kind = if content_type.is_empty() { "markup" } else { content_type.split(';').next().unwrap_or("") };
            Err(Failure::fatal(
                ErrorClass::NotJson,
                format!("the API answered with a page ({kind}), not data: {}", snippet(bytes)),
            ))
        }
        Err(_) => Ok(crate::json_text::parse(&text).map_or_else(|| Value::String(text.into_owned()), |(v, _)| v)),
    }
}

fn error(class: ErrorClass, message: String, trace: CallTrace) -> CallError {
    CallError { class, message, status: None, retry_after_ms: None, trace: Box::new(trace), asked: true }
}

fn is_true(b: &bool) -> bool {
    *b
}

/// A call toolrouter refused itself ([`CallError::asked`] false).
fn not_asked(class: ErrorClass, message: String, trace: CallTrace) -> CallError {
    CallError { asked: false, ..error(class, message, trace) }
}

fn finish(mut e: CallError, started: Instant) -> CallError {
    e.trace.elapsed_ms = ms(started.elapsed());
    e
}

fn status_text(code: u16) -> String {
    match reqwest::StatusCode::from_u16(code).ok().and_then(|s| s.canonical_reason()) {
        Some(reason) => format!("{code} {reason}"),
        None => code.to_string(),
    }
}

/// The start of a body, for error messages.
fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut s: String = text.chars().take(200).collect();
    if text.chars().count() > 200 {
        s.push('…');
    }
    if s.trim().is_empty() { "(empty body)".into() } else { s }
}
