//! The model client's HTTP: hyper-util's pooled client over rustls (the
//! platform's roots; HTTP/2 when the server offers it by ALPN, else
//! HTTP/1.1), requests sent to one address parsed once.
//!
//! Not reqwest, which the rest of toolrouter uses for APIs and MCP
//! servers: every model request went through reqwest's redirect,
//! decompression and retry layers and had its URL parsed three more times
//! (the redirect policy, the URI conversion, the response's URL), ~8% of
//! `serve`'s CPU at saturation (docs/benchmarks.md, "Proxy cost"). The
//! model server is one address the operator configured: there is nothing
//! to follow a redirect to (a 3xx is an error status saying to set
//! `llm.base_url`), no proxy to match, and nothing comes compressed that
//! was not asked for. Bodies are read by [`crate::outbound::read_capped`],
//! as the APIs' are.

use std::error::Error as StdError;
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, USER_AGENT};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::outbound::PerThread;

/// A model server's answer, its body still to read.
pub(super) type Response = http::Response<Incoming>;

/// Why a request got no answer: its text (causes joined, no URL) and
/// whether it was a timeout (of the connection's setup).
#[derive(Debug)]
pub(super) struct SendError {
    pub(crate) text: String,
    pub(crate) timed_out: bool,
}

/// The pooled client with the model server's address and headers.
pub(super) struct Http {
    /// A pool per thread ([`PerThread`]).
    client: PerThread<Client<HttpsConnector<HttpConnector>, Full<Bytes>>>,
    /// `{base_url}/chat/completions`.
    completions: http::Uri,
    /// `{base_url}/models`.
    models: http::Uri,
    /// `Bearer KEY`, marked sensitive (never logged).
    authorization: Option<HeaderValue>,
}

impl Http {
    /// A client of the model server at `base_url` (an `http://` or
    /// `https://` URL), connecting within `connect_timeout`.
    pub(crate) fn new(base_url: &str, key: Option<&str>, connect_timeout: Duration) -> Result<Http, String> {
        let base = base_url.trim_end_matches('/');
        let uri = |path: &str| -> Result<http::Uri, String> {
            let uri: http::Uri = format!("{base}/{path}")
                .parse()
                .map_err(|e| format!("llm.base_url is not a URL ({e}); write it as http://host:port/v1"))?;
            match (uri.scheme_str(), uri.host()) {
                (Some("http" | "https"), Some(_)) => Ok(uri),
                _ => {
                    Err("llm.base_url must be an http:// or https:// URL with a host, e.g. http://host:port/v1".into())
                }
            }
        };
        let (completions, models) = (uri("chat/completions")?, uri("models")?);
        let authorization = key.map(|key| {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {key}")).unwrap_or_else(|_| HeaderValue::from_static(""));
            value.set_sensitive(true);
            value
        });
        let mut tcp = HttpConnector::new();
        tcp.set_connect_timeout(Some(connect_timeout));
        tcp.set_nodelay(true);
        tcp.enforce_http(false);
        let tls = hyper_rustls::HttpsConnectorBuilder::new()
            .try_with_platform_verifier()
            .map_err(|e| format!("no TLS roots for the model server: {e}"))?
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(tcp);
        let client = PerThread::new(move || {
            Client::builder(TokioExecutor::new())
                .timer(TokioTimer::new())
                .pool_timer(TokioTimer::new())
                .build(tls.clone())
        });
        Ok(Http { client, completions, models, authorization })
    }

    /// `POST {base_url}/chat/completions` with `body` (JSON), until the
    /// answer's head arrives.
    pub(crate) async fn post_completions(&self, body: Bytes) -> Result<Response, SendError> {
        let request = self.request(http::Method::POST, &self.completions, body);
        self.send(request).await
    }

    /// `GET {base_url}/models`, until the answer's head arrives.
    pub(crate) async fn get_models(&self) -> Result<Response, SendError> {
        self.send(self.request(http::Method::GET, &self.models, Bytes::new())).await
    }

    fn request(&self, method: http::Method, uri: &http::Uri, body: Bytes) -> http::Request<Full<Bytes>> {
        let post = method == http::Method::POST;
        let mut request = http::Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = uri.clone();
        let headers = request.headers_mut();
        headers.insert(USER_AGENT, HeaderValue::from_static(crate::outbound::USER_AGENT));
        if post {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        if let Some(value) = &self.authorization {
            headers.insert(AUTHORIZATION, value.clone());
        }
        crate::telemetry::inject(headers);
        request
    }

    async fn send(&self, request: http::Request<Full<Bytes>>) -> Result<Response, SendError> {
        self.client.get().request(request).await.map_err(|e| SendError { timed_out: timed_out(&e), text: cause(&e) })
    }
}

pub(super) use crate::outbound::cause;

/// Whether an error (or one of its causes) is a timeout.
fn timed_out(e: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(e) = next {
        if e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut) {
            return true;
        }
        next = e.source();
    }
    false
}
