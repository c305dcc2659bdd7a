//! What every outbound request shares, the model client's
//! ([`crate::llm`]) and the APIs' ([`crate::upstream`]), so that both read
//! alike: when to try again (exponential backoff with jitter, a server's
//! `Retry-After`), reading a body up to a size cap, and a client per
//! thread; the `User-Agent` and the TLS crypto provider of every client.

use std::time::{Duration, SystemTime};

use bytes::Buf;
use http_body_util::BodyExt;

/// The `User-Agent` of upstream calls.
pub(crate) const USER_AGENT: &str = concat!("toolrouter/", env!("CARGO_PKG_VERSION"));

/// Installs rustls' crypto provider (ring) once per process (reqwest is
/// built without one).
pub(crate) fn install_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A pooled HTTP client per thread. A pool's connections are tasks of the
/// runtime that opened them: shared between `toolrouter serve`'s threads
/// (each its own runtime, [`crate::server::conn`]), a request on one thread
/// would wake the other twice to use a connection it opened. Each thread
/// builds its own client the first time it sends.
pub(crate) struct PerThread<C: Send> {
    clients: thread_local::ThreadLocal<C>,
    make: Box<dyn Fn() -> C + Send + Sync>,
}

impl<C: Send> PerThread<C> {
    /// Clients made by `make`, one per thread that asks.
    pub(crate) fn new(make: impl Fn() -> C + Send + Sync + 'static) -> PerThread<C> {
        PerThread { clients: thread_local::ThreadLocal::new(), make: Box::new(make) }
    }

    /// This thread's client.
    pub(crate) fn get(&self) -> &C {
        self.clients.get_or(&self.make)
    }
}

/// The longest `Retry-After` believed (longer ones are read as this).
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(86_400);

/// The wait before retry `attempt` (1 = the first retry): about
/// `base_ms`, doubling each time, with ±50% jitter so that clients that
/// failed together do not retry together.
pub(crate) fn backoff(base_ms: u64, attempt: u32) -> Duration {
    let base = base_ms as f64 * 2f64.powi(attempt.saturating_sub(1).min(30) as i32);
    Duration::from_secs_f64(base * (0.5 + fastrand::f64()) / 1000.0)
}

/// A `Retry-After` header's wait: delay-seconds (fractions accepted) or an
/// HTTP date (a date already past: no wait), capped at [`MAX_RETRY_AFTER`].
/// Anything else (empty, negative, garbage): `None`.
pub(crate) fn retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    let wait = match value.parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Duration::from_secs_f64(s.min(MAX_RETRY_AFTER.as_secs_f64())),
        Ok(_) => return None,
        Err(_) => {
            let at = httpdate::parse_http_date(value).ok()?;
            at.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO)
        }
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// An error's text with its causes (`client error (Connect): tcp connect
/// error: Connection refused`), each said once.
pub(crate) fn cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text = format!("{text}: {s_text}");
        }
        source = s.source();
    }
    text
}

/// Why a body could not be read whole.
#[derive(Debug)]
pub(crate) enum ReadError<E> {
    /// It is larger than the cap; `declared`: its `Content-Length` said so
    /// before anything was read.
    TooLarge { declared: bool },
    /// The connection failed while reading.
    Read(E),
}

/// `response`'s body, up to `cap` bytes: refused at once when its
/// `Content-Length` is larger, cut off as soon as it grows larger. Any
/// body: reqwest's (APIs, as `http::Response::from(response)`) and
/// hyper's (the model).
pub(crate) async fn read_capped<B>(response: http::Response<B>, cap: usize) -> Result<Vec<u8>, ReadError<B::Error>>
where
    B: hyper::body::Body + Unpin,
{
    let declared =
        response.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > cap as u64) {
        return Err(ReadError::TooLarge { declared: true });
    }
    let mut body = response.into_body();
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.map_err(ReadError::Read)?.into_data() {
            if out.len() + data.remaining() > cap {
                return Err(ReadError::TooLarge { declared: false });
            }
            out.extend_from_slice(data.chunk());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(retry_after(" 2 "), Some(Duration::from_secs(2)));
        assert_eq!(retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(retry_after("99999999"), Some(MAX_RETRY_AFTER));
        assert_eq!(retry_after("-1"), None);
        assert_eq!(retry_after("soon"), None);
        assert_eq!(retry_after(""), None);
        let in_a_minute = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(60));
        let wait = retry_after(&in_a_minute).unwrap();
        assert!(wait > Duration::from_secs(55) && wait <= Duration::from_secs(60), "{wait:?}");
        assert_eq!(retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO));
    }

    #[test]
    fn backoff_doubles_with_jitter() {
        for attempt in 1..=4 {
            let wait = backoff(100, attempt).as_secs_f64() * 1000.0;
            let base = 100.0 * 2f64.powi(attempt as i32 - 1);
            assert!((0.5 * base..1.5 * base).contains(&wait), "attempt {attempt}: {wait} ms");
        }
    }
}
