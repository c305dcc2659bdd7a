//! Accepting connections for `toolrouter serve`: HTTP/1.1 over TCP with
//! the timeouts a gateway needs, and graceful shutdown.
//!
//! `axum::serve` sets no timer, so hyper's header-read timeout never
//! fires there: a client that opens a socket and sends nothing, sends its
//! headers a byte at a time, or keeps an idle keep-alive connection, holds
//! a task and a descriptor forever. Here each connection is served by
//! hyper's HTTP/1 builder with a timer and `server.header_read_timeout_ms`:
//! a request's headers must arrive within it, counted from the
//! connection's start or from its last answer (so an idle keep-alive
//! connection closes after it too). The body's own timeout is
//! [`super::middleware`]'s (`server.body_timeout_ms`). Each connection gets
//! TCP_NODELAY (streamed answers are many small writes: without it,
//! Nagle's algorithm holds each one until the client's delayed ACK,
//! ~40 ms) and its peer address as [`axum::extract::ConnectInfo`].
//!
//! With `server.tls_cert_file`, each connection is a TLS one
//! ([`super::tls`]): its handshake must end within the header-read
//! timeout too, and runs on the connection's own task, so a slow
//! handshake never holds up accepting.
//!
//! `toolrouter serve` accepts on [`spawn`]'s threads: each runs a
//! current-thread tokio runtime and accepts from the same socket, so a
//! connection's request, the tasks it spawns and its model connection stay
//! on one thread. On tokio's work-stealing runtime every task woken by
//! the network also woke an idle worker to steal it (two `futex` calls a
//! request); on this project's 2-core machines that hand-off was about a
//! fifth of the CPU of a request at 1,000 req/s and 0.1 ms of an MCP
//! `tools/call` (docs/benchmarks.md, "One runtime per serving thread").

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// The serving threads of [`spawn`].
pub(crate) struct Threads {
    done: Vec<oneshot::Receiver<()>>,
}

impl Threads {
    /// Waits until every thread has stopped accepting and its connections'
    /// requests in flight have finished.
    pub(crate) async fn join(self) {
        for done in self.done {
            let _ = done.await;
        }
    }
}

/// How connections are served: the routes, the header-read timeout and,
/// for TLS, the acceptor.
#[derive(Clone)]
pub(crate) struct Serving {
    pub(crate) router: axum::Router,
    pub(crate) header_read_timeout: Duration,
    pub(crate) tls: Option<TlsAcceptor>,
}

/// Serves on `threads` threads, each with a current-thread tokio
/// runtime accepting from `listener` (the same socket: whichever thread is
/// idle takes a new connection first), until `stop` turns true.
pub(crate) fn spawn(
    listener: std::net::TcpListener,
    serving: Serving,
    threads: usize,
    stop: watch::Receiver<bool>,
) -> std::io::Result<Threads> {
    listener.set_nonblocking(true)?;
    let mut done = Vec::new();
    for i in 0..threads.max(1) {
        let (listener, serving, mut stop) = (listener.try_clone()?, serving.clone(), stop.clone());
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (finished, finished_rx) = oneshot::channel();
        std::thread::Builder::new().name(format!("serve-{i}")).spawn(move || {
            runtime.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(listener) => {
                        let stopped = async move {
                            let _ = stop.wait_for(|stop| *stop).await;
                        };
                        serve(listener, serving, stopped).await;
                    }
                    Err(e) => tracing::error!("serving thread {i} cannot accept: {e}"),
                }
            });
            let _ = finished.send(());
        })?;
        done.push(finished_rx);
    }
    Ok(Threads { done })
}

/// Serves on `listener` until `shutdown` completes, then waits for the
/// connections' requests in flight to finish (the caller bounds that wait).
pub(crate) async fn serve(listener: TcpListener, serving: Serving, shutdown: impl Future<Output = ()>) {
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(serving.header_read_timeout);
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, most often: wait for some to close.
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY not set: {e}");
        }
        let service = serving.router.clone().map_request(move |mut request: axum::extract::Request<_>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            request
        });
        let service = TowerToHyperService::new(service);
        match serving.tls.clone() {
            None => {
                let connection = graceful.watch(http.serve_connection(TokioIo::new(tcp), service));
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!(%peer, "connection ended: {e}");
                    }
                });
            }
            Some(acceptor) => {
                // The handshake is bounded like the headers that follow it,
                // and a shutdown during it drops the connection.
                let (http, watcher) = (http.clone(), graceful.watcher());
                let timeout = serving.header_read_timeout;
                tokio::spawn(async move {
                    let tls = match tokio::time::timeout(timeout, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(e)) => return tracing::debug!(%peer, "TLS handshake failed: {e}"),
                        Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
                    };
                    if let Err(e) = watcher.watch(http.serve_connection(TokioIo::new(tls), service)).await {
                        tracing::debug!(%peer, "connection ended: {e}");
                    }
                });
            }
        }
    }
    drop(listener);
    graceful.shutdown().await;
}

/// The peer address of a request served by [`serve`] (absent elsewhere,
/// e.g. in tests that call the router directly).
pub(crate) fn peer(request: &axum::extract::Request) -> Option<SocketAddr> {
    request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0)
}
