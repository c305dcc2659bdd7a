//! The upstream client against a loopback fault server: every fault ends
//! in a clear, classified error within the call's deadline, with every
//! attempt in the trace; none panics or hangs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolrouter::catalog::{Catalog, Sources};
use toolrouter::config::Config;
use toolrouter::upstream::{CallError, ErrorClass, Limit, Response, Upstream};

/// Reads a request's head and returns its path.
async fn read_head(stream: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&byte[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf);
    head.split_whitespace().nth(1).unwrap_or("/").to_string()
}

async fn reply(stream: &mut TcpStream, status: &str, headers: &str, body: &str) {
    let text = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\n{headers}\r\n{body}", body.len());
    let _ = stream.write_all(text.as_bytes()).await;
}

/// The fault server: the first path segment names the fault.
async fn fault_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { continue };
            let counter = counter.clone();
            tokio::spawn(async move {
                let path = read_head(&mut stream).await;
                counter.fetch_add(1, Ordering::SeqCst);
                let fault = path.trim_start_matches('/').split('/').next().unwrap_or("").to_string();
                match fault.as_str() {
                    "ok" => {
                        reply(&mut stream, "200 OK", "content-type: application/json\r\n", r#"{"rates":{"GBP":0.86}}"#)
                            .await
                    }
                    "slow" => tokio::time::sleep(Duration::from_secs(30)).await,
                    "500" => reply(&mut stream, "500 Internal Server Error", "", "boom").await,
                    "404" => reply(&mut stream, "404 Not Found", "", "no such thing").await,
                    "429-after" => reply(&mut stream, "429 Too Many Requests", "retry-after: 1\r\n", "slow down").await,
                    "429" => reply(&mut stream, "429 Too Many Requests", "", "slow down").await,
                    "endless" => {
                        let head =
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                        let _ = stream.write_all(head.as_bytes()).await;
                        let _ = stream.write_all(b"1\r\n[\r\n").await;
                        loop {
                            if stream.write_all(b"2\r\n1,\r\n").await.is_err() {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                    "huge" => {
                        reply(
                            &mut stream,
                            "200 OK",
                            "content-type: application/json\r\n",
                            &format!("\"{}\"", "x".repeat(100_000)),
                        )
                        .await
                    }
                    "huge-chunked" => {
                        let head =
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                        let _ = stream.write_all(head.as_bytes()).await;
                        let chunk = "y".repeat(4096);
                        for _ in 0..40 {
                            let _ = stream.write_all(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes()).await;
                        }
                        let _ = stream.write_all(b"0\r\n\r\n").await;
                    }
                    "malformed" => {
                        reply(&mut stream, "200 OK", "content-type: application/json\r\n", r#"{"rates": {"GBP": 0.8"#)
                            .await
                    }
                    "html" => {
                        reply(
                            &mut stream,
                            "200 OK",
                            "content-type: text/html\r\n",
                            "<html><body>Please log in</body></html>",
                        )
                        .await
                    }
                    "reset" => {
                        let std = stream.into_std().unwrap();
                        let socket = socket_with_linger_zero(std);
                        drop(socket);
                    }
                    "redirect" => {
                        reply(&mut stream, "302 Found", "location: http://169.254.169.254/latest/meta-data\r\n", "")
                            .await
                    }
                    _ => reply(&mut stream, "400 Bad Request", "", "unknown fault").await,
                }
            });
        }
    });
    (port, hits)
}

/// Closing a socket with SO_LINGER 0 sends a TCP reset.
fn socket_with_linger_zero(stream: std::net::TcpStream) -> std::net::TcpStream {
    use std::os::fd::AsRawFd;
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: a valid socket descriptor and a correctly sized linger struct.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &linger as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    stream
}

const DEADLINE_MS: u64 = 2_500;

fn upstream(port: u16, fault: &str) -> (Upstream, Catalog) {
    let catalog = Catalog::load(&Sources::default()).unwrap();
    let mut config = Config::default();
    let u = &mut config.upstream;
    u.base_url = format!("http://127.0.0.1:{port}/{fault}");
    u.allowed_hosts = vec![format!("127.0.0.1:{port}")];
    u.allow_private = true;
    u.timeout_ms = 300;
    u.deadline_ms = DEADLINE_MS;
    u.backoff_ms = 20;
    u.max_response_bytes = 50_000;
    u.max_wait_ms = 100;
    (Upstream::new(&catalog, &config).unwrap(), catalog)
}

async fn call(port: u16, fault: &str) -> (Result<Response, CallError>, Duration) {
    let (up, catalog) = upstream(port, fault);
    let api = catalog.api(catalog.resolve("latest_rates_for_frankfurter").first().unwrap());
    let args: Map<String, Value> = json!({"base": "EUR"}).as_object().unwrap().clone();
    let started = Instant::now();
    // Nothing may hang: the call's own deadline plus a margin.
    let result = tokio::time::timeout(Duration::from_millis(DEADLINE_MS + 2_000), up.call(api, &args, None))
        .await
        .unwrap_or_else(|_| panic!("`{fault}` hung past the deadline"));
    (result, started.elapsed())
}

async fn failure(port: u16, fault: &str, class: ErrorClass, attempts: usize) -> CallError {
    let (result, took) = call(port, fault).await;
    let e = result.expect_err(fault);
    assert_eq!(e.class, class, "{fault}: {e:?}");
    assert_eq!(e.trace.attempts.len(), attempts, "{fault}: {:#?}", e.trace.attempts);
    assert!(took < Duration::from_millis(DEADLINE_MS + 500), "{fault} took {took:?}");
    assert!(!e.message.is_empty());
    e
}

#[tokio::test]
async fn every_fault_is_a_classified_error_within_the_deadline() {
    let (port, _) = fault_server().await;
    let (ok, _) = call(port, "ok").await;
    assert_eq!(ok.unwrap().body, json!({"rates": {"GBP": 0.86}}));

    // Retried: timeouts, 5xx, 429, resets — three attempts, then the error.
    let e = failure(port, "slow", ErrorClass::Timeout, 3).await;
    assert!(e.message.contains("no complete answer within"), "{}", e.message);
    let e = failure(port, "500", ErrorClass::ServerError, 3).await;
    assert_eq!(e.status, Some(500));
    assert!(e.message.contains("after 3 attempts"), "{}", e.message);
    assert!(e.trace.attempts[..2].iter().all(|a| a.retry_in_ms.is_some()));
    // A 429 without Retry-After backs off like a 5xx (it used to retry at once).
    let e = failure(port, "429", ErrorClass::RateLimited, 3).await;
    assert!(e.trace.attempts[..2].iter().all(|a| a.retry_in_ms.is_some_and(|ms| ms > 0.0)), "{:#?}", e.trace.attempts);
    failure(port, "endless", ErrorClass::Timeout, 3).await;
    let e = failure(port, "reset", ErrorClass::Connect, 3).await;
    assert!(!e.message.contains("panicked"));

    // Not retried: other 4xx, oversized bodies, bad bodies, refused redirects.
    let e = failure(port, "404", ErrorClass::ClientError, 1).await;
    assert!(e.message.starts_with("404 Not Found"), "{}", e.message);
    let e = failure(port, "huge", ErrorClass::TooLarge, 1).await;
    assert!(e.message.contains("50000 bytes"), "{}", e.message);
    failure(port, "huge-chunked", ErrorClass::TooLarge, 1).await;
    let e = failure(port, "malformed", ErrorClass::MalformedJson, 1).await;
    assert!(e.message.contains("not valid JSON"), "{}", e.message);
    let e = failure(port, "html", ErrorClass::NotJson, 1).await;
    assert!(e.message.contains("text/html"), "{}", e.message);
    let e = failure(port, "redirect", ErrorClass::Refused, 1).await;
    assert!(e.message.contains("169.254.169.254"), "{}", e.message);
}

#[tokio::test]
async fn retry_after_is_honoured_and_slows_the_host() {
    let (port, hits) = fault_server().await;
    let (up, catalog) = upstream(port, "429-after");
    let api = catalog.api(catalog.resolve("latest_rates_for_frankfurter").first().unwrap());
    let args = Map::new();
    let started = Instant::now();
    let e = up.call(api, &args, None).await.unwrap_err();
    assert_eq!(e.class, ErrorClass::RateLimited);
    // The first retry waited the full second the server asked for.
    assert_eq!(e.trace.attempts[0].retry_in_ms, Some(1000.0));
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(e.retry_after_ms, Some(1000.0));
    let before = hits.load(Ordering::SeqCst);
    // The host is slowed: the next call is refused without reaching it.
    let e = up.call(api, &args, None).await.unwrap_err();
    assert_eq!(e.class, ErrorClass::RateLimited, "{e:?}");
    assert!(e.message.contains(Limit::HostRetryAfter.describe()), "{}", e.message);
    assert!(e.trace.attempts.is_empty());
    assert_eq!(hits.load(Ordering::SeqCst), before);
}

#[tokio::test]
async fn the_guard_refuses_before_connecting() {
    let catalog = Catalog::load(&Sources::default()).unwrap();
    let api = catalog.api(catalog.resolve("latest_rates_for_frankfurter").first().unwrap());
    let (port, hits) = fault_server().await;
    // Loopback without allow_private, even when the host is allowlisted.
    let mut config = Config::default();
    config.upstream.base_url = format!("http://127.0.0.1:{port}/ok");
    config.upstream.allowed_hosts = vec![format!("127.0.0.1:{port}")];
    let up = Upstream::new(&catalog, &config).unwrap();
    let e = up.call(api, &Map::new(), None).await.unwrap_err();
    assert_eq!(e.class, ErrorClass::Refused);
    assert!(e.message.contains("loopback"), "{}", e.message);
    // A host outside the catalog and the allowlist.
    config.upstream.base_url = "http://example.invalid/".into();
    let e = Upstream::new(&catalog, &config).unwrap().call(api, &Map::new(), None).await.unwrap_err();
    assert_eq!(e.class, ErrorClass::Refused);
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}
