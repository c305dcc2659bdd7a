//! Rate limits under load: calls driven at ten times a configured limit
//! against a loopback server; what arrives must stay within the limit plus
//! the burst, per key.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Map;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use toolrouter::catalog::{Catalog, Sources};
use toolrouter::config::Config;
use toolrouter::upstream::{ErrorClass, Upstream};

/// A server that answers `{}` at once and counts what arrives.
async fn counting_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { continue };
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut head = Vec::new();
                // Keep-alive: answer every request on the connection.
                loop {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                    while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                        head.drain(..end + 4);
                        counter.fetch_add(1, Ordering::SeqCst);
                        let ok = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                        if stream.write_all(ok).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (port, hits)
}

fn config(port: u16) -> Config {
    let mut config = Config::default();
    let u = &mut config.upstream;
    u.base_url = format!("http://127.0.0.1:{port}");
    u.allowed_hosts = vec![format!("127.0.0.1:{port}")];
    u.allow_private = true;
    u.global_rate = 0.0;
    u.host_rate = 0.0;
    u.api_rate = 0.0;
    u.client_rate = 0.0;
    u.burst = 5;
    u.max_wait_ms = 0;
    config
}

/// Drives `rate` calls per second for `secs` seconds, each on behalf of
/// `keys[i % keys.len()]`; returns the successes per key.
async fn drive(up: Arc<Upstream>, catalog: Arc<Catalog>, rate: f64, secs: f64, keys: &[&'static str]) -> Vec<usize> {
    let api = catalog.resolve("latest_rates_for_frankfurter").first().unwrap();
    let total = (rate * secs) as usize;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let started = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for i in 0..total {
        tokio::time::sleep_until(started + interval * i as u32).await;
        let (up, catalog, key) = (up.clone(), catalog.clone(), keys[i % keys.len()]);
        tasks.push(tokio::spawn(async move {
            let r = up.call(catalog.api(api), &Map::new(), Some(key)).await;
            if let Err(e) = &r {
                assert_eq!(e.class, ErrorClass::RateLimited, "{e:?}");
            }
            (key, r.is_ok())
        }));
    }
    let mut ok = vec![0; keys.len()];
    for t in tasks {
        let (key, success) = t.await.unwrap();
        if success {
            ok[keys.iter().position(|k| *k == key).unwrap()] += 1;
        }
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrivals_stay_within_the_host_limit() {
    let (port, hits) = counting_server().await;
    let catalog = Arc::new(Catalog::load(&Sources::default()).unwrap());
    let mut config = config(port);
    config.upstream.host_rate = 20.0;
    let up = Arc::new(Upstream::new(&catalog, &config).unwrap());
    let secs = 3.0;
    let started = Instant::now();
    let ok = drive(up, catalog, 200.0, secs, &["a"]).await;
    let elapsed = started.elapsed().as_secs_f64();
    let arrived = hits.load(Ordering::SeqCst);
    assert_eq!(arrived, ok[0], "every call let through arrived, nothing else");
    let ceiling = (20.0 * elapsed).ceil() as usize + 5;
    eprintln!("host limit 20/s burst 5, driven at 200/s for {elapsed:.2} s: {arrived} arrived (ceiling {ceiling})");
    assert!(arrived <= ceiling, "{arrived} > {ceiling}");
    assert!(arrived as f64 >= 0.8 * 20.0 * secs, "the limit let too few through: {arrived}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_key_has_its_own_limit() {
    let (port, hits) = counting_server().await;
    let catalog = Arc::new(Catalog::load(&Sources::default()).unwrap());
    let mut config = config(port);
    config.upstream.client_rate = 10.0;
    let up = Arc::new(Upstream::new(&catalog, &config).unwrap());
    let secs = 2.0;
    let started = Instant::now();
    let ok = drive(up, catalog, 200.0, secs, &["alice", "bob"]).await;
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(hits.load(Ordering::SeqCst), ok.iter().sum::<usize>());
    let ceiling = (10.0 * elapsed).ceil() as usize + 5;
    eprintln!(
        "client limit 10/s burst 5 per key, 100/s per key for {elapsed:.2} s: {ok:?} arrived (ceiling {ceiling} each)"
    );
    for n in ok {
        assert!(n <= ceiling && n as f64 >= 0.8 * 10.0 * secs, "{n} outside [{}, {ceiling}]", 0.8 * 10.0 * secs);
    }
}
