//! Rate limits on upstream calls (governor, GCRA): one global rate, and
//! keyed rates per host, per API and per client key. A call takes a cell
//! from each limit that applies, waiting for it up to `max_wait` in all;
//! when a limit would make it wait longer, it fails at once with
//! [`RateLimited`], naming the limit and when to retry. An upstream 429
//! slows its host: no call goes to it before its `Retry-After` has passed.
//!
//! With `[cluster]` on, the same limits (and slowed hosts) are shared by
//! every replica through Redis ([`crate::cluster::limits`]); when Redis
//! cannot answer within `cluster.timeout_ms`, a call takes this replica's
//! local cells instead, each rate divided by `cluster.replicas`.
//!
//! The rates themselves ([`Rates`]) sit behind an [`ArcSwap`]: a reload
//! ([`Limits::reconfigure`]) swaps them whole, and a call loads them once.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use dashmap::DashMap;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde::Serialize;

use crate::cluster::Cluster;
use crate::cluster::limits::{Cell, Verdict};
use crate::config::UpstreamConfig;

/// Which limit stopped a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    Global,
    Host,
    Api,
    Client,
    /// The host answered 429 and asked to wait.
    HostRetryAfter,
}

impl Limit {
    pub fn describe(self) -> &'static str {
        match self {
            Limit::Global => "the global upstream rate (upstream.global_rate)",
            Limit::Host => "the per-host rate (upstream.host_rate)",
            Limit::Api => "the per-API rate (upstream.api_rate)",
            Limit::Client => "the per-client rate (upstream.client_rate)",
            Limit::HostRetryAfter => "the host's Retry-After after a 429",
        }
    }
}

/// A call refused by a rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, thiserror::Error)]
#[error("rate limited by {}: retry after {:.1} s", limit.describe(), retry_after.as_secs_f64())]
pub(crate) struct RateLimited {
    pub(crate) limit: Limit,
    pub(crate) retry_after: Duration,
}

/// The configured limits and their state.
pub struct Limits {
    /// Shared by every replica through Redis, when `[cluster]` is on; the
    /// local limiters of `rates` are then this replica's fallback share.
    cluster: Option<Arc<Cluster>>,
    /// How many replicas share the rates (1 without a cluster).
    share: u32,
    rates: ArcSwap<Rates>,
    slowed: DashMap<String, Instant>,
    clock: DefaultClock,
}

/// The configured rates and their limiters, replaced whole on a reload
/// (the new limiters start full).
struct Rates {
    /// Emission interval of the global, per-host, per-API and per-client rates.
    intervals: [Option<Duration>; 4],
    burst: u32,
    global: Option<DefaultDirectRateLimiter>,
    host: Option<DefaultKeyedRateLimiter<String>>,
    api: Option<DefaultKeyedRateLimiter<String>>,
    client: Option<DefaultKeyedRateLimiter<String>>,
    max_wait: Duration,
    /// The keys they were built from, to tell whether a reload changes them.
    config: [f64; 4],
    max_wait_ms: u64,
}

impl Rates {
    /// The rates of `config`, each divided by `share` locally (as is the burst, rounded up).
    fn new(config: &UpstreamConfig, share: u32) -> Rates {
        let burst = config.burst;
        let local_burst = burst.div_ceil(share);
        let share = f64::from(share);
        let rates = [config.global_rate, config.host_rate, config.api_rate, config.client_rate];
        Rates {
            intervals: rates.map(interval),
            burst,
            global: quota(config.global_rate / share, local_burst).map(RateLimiter::direct),
            host: quota(config.host_rate / share, local_burst).map(RateLimiter::keyed),
            api: quota(config.api_rate / share, local_burst).map(RateLimiter::keyed),
            client: quota(config.client_rate / share, local_burst).map(RateLimiter::keyed),
            max_wait: Duration::from_millis(config.max_wait_ms),
            config: rates,
            max_wait_ms: config.max_wait_ms,
        }
    }

    /// The shared cells: `Ok(true)` once taken, `Ok(false)` when Redis
    /// cannot say (the caller takes the local ones instead).
    async fn take_shared(
        &self,
        cluster: &Cluster,
        host: Option<&str>,
        api: Option<&str>,
        client: Option<&str>,
        global: bool,
        deadline: Instant,
    ) -> Result<bool, RateLimited> {
        let [global_interval, host_interval, api_interval, client_interval] = self.intervals;
        let wanted = [
            (Limit::Client, "client", client, client_interval),
            (Limit::Api, "api", api, api_interval),
            (Limit::Host, "host", host, host_interval),
            (Limit::Global, "global", global.then_some(""), global_interval),
        ];
        let (limits, cells): (Vec<Limit>, Vec<Cell>) = wanted
            .into_iter()
            .filter_map(|(limit, kind, key, interval)| {
                Some((limit, Cell { kind, key: key?, interval: interval?, burst: self.burst }))
            })
            .unzip();
        loop {
            match cluster.take(host, &cells).await {
                Ok(Verdict::Taken) => return Ok(true),
                Ok(Verdict::Slowed(wait)) => wait_within(Limit::HostRetryAfter, wait, deadline).await?,
                Ok(Verdict::Wait(i, wait)) => wait_within(limits[i], wait, deadline).await?,
                Err(_) => return Ok(false),
            }
        }
    }

    fn same(&self, config: &UpstreamConfig) -> bool {
        let rates = [config.global_rate, config.host_rate, config.api_rate, config.client_rate];
        self.config == rates && self.burst == config.burst && self.max_wait_ms == config.max_wait_ms
    }
}

/// A quota of `rate` calls per second with bursts of `burst` (at least 1);
/// `None` when `rate` is 0 (no limit).
fn quota(rate: f64, burst: u32) -> Option<Quota> {
    if rate <= 0.0 {
        return None;
    }
    let period = Duration::from_secs_f64(1.0 / rate);
    Quota::with_period(period).map(|q| q.allow_burst(NonZeroU32::new(burst.max(1)).unwrap()))
}

impl std::fmt::Debug for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let intervals = self.rates.load().intervals;
        f.debug_struct("Limits").field("intervals", &intervals).field("shared", &self.cluster.is_some()).finish()
    }
}

/// Waits `wait` for `limit`, or refuses at once when that passes `deadline`.
async fn wait_within(limit: Limit, wait: Duration, deadline: Instant) -> Result<(), RateLimited> {
    if Instant::now() + wait > deadline {
        return Err(RateLimited { limit, retry_after: wait });
    }
    tokio::time::sleep(wait).await;
    Ok(())
}

/// The interval between cells of `rate` per second (`None`: no limit).
fn interval(rate: f64) -> Option<Duration> {
    (rate > 0.0).then(|| Duration::from_secs_f64(1.0 / rate))
}

impl Limits {
    #[cfg(test)]
    pub(crate) fn new(config: &UpstreamConfig) -> Limits {
        Limits::shared(config, None, 1)
    }

    /// Limits shared through `cluster` by `replicas` replicas: while Redis
    /// is unreachable, each enforces `1/replicas` of every rate and of the
    /// burst (rounded up) locally, so that together they stay near one burst.
    pub(crate) fn shared(config: &UpstreamConfig, cluster: Option<Arc<Cluster>>, replicas: u32) -> Limits {
        let share = if cluster.is_some() { replicas.max(1) } else { 1 };
        Limits {
            cluster,
            share,
            rates: ArcSwap::from_pointee(Rates::new(config, share)),
            slowed: DashMap::new(),
            clock: DefaultClock::default(),
        }
    }

    /// Takes the rates, burst and `max_wait_ms` of `config` (a reload),
    /// unless they are those in use: whether they changed. Calls waiting
    /// for a cell finish under the rates they started with; hosts slowed
    /// by a 429 stay slowed.
    pub(crate) fn reconfigure(&self, config: &UpstreamConfig) -> bool {
        if self.rates.load().same(config) {
            return false;
        }
        self.rates.store(Arc::new(Rates::new(config, self.share)));
        true
    }

    /// Takes a cell of every limit that applies, waiting up to `max_wait`
    /// in all. Returns the time waited.
    pub(crate) async fn acquire(&self, host: &str, api: &str, client: Option<&str>) -> Result<Duration, RateLimited> {
        self.take(Some(host), Some(api), client, true).await
    }

    /// The client's cell alone: a call to a downstream MCP tool, which has
    /// its server's own rate (the global, per-host and per-API rates guard
    /// RapidAPI's hosts).
    pub(crate) async fn acquire_for_client(&self, client: Option<&str>) -> Result<Duration, RateLimited> {
        self.take(None, None, client, false).await
    }

    async fn take(
        &self,
        host: Option<&str>,
        api: Option<&str>,
        client: Option<&str>,
        global: bool,
    ) -> Result<Duration, RateLimited> {
        let started = Instant::now();
        let rates = self.rates.load_full();
        let deadline = started + rates.max_wait;
        if let Some(cluster) = &self.cluster
            && rates.take_shared(cluster, host, api, client, global, deadline).await?
        {
            return Ok(started.elapsed());
        }
        if let Some(until) = host.and_then(|host| self.slowed.get(host).map(|u| *u)) {
            let now = Instant::now();
            if until > now {
                if until > deadline {
                    return Err(RateLimited { limit: Limit::HostRetryAfter, retry_after: until - now });
                }
                tokio::time::sleep(until - now).await;
            }
        }
        let keyed =
            [(Limit::Client, &rates.client, client), (Limit::Api, &rates.api, api), (Limit::Host, &rates.host, host)];
        for (limit, limiter, key) in keyed {
            let (Some(limiter), Some(key)) = (limiter, key) else { continue };
            let key = key.to_string();
            loop {
                match limiter.check_key(&key) {
                    Ok(()) => break,
                    Err(not_until) => wait_within(limit, not_until.wait_time_from(self.clock.now()), deadline).await?,
                }
            }
        }
        if let Some(global) = rates.global.as_ref().filter(|_| global) {
            loop {
                match global.check() {
                    Ok(()) => break,
                    Err(not_until) => {
                        wait_within(Limit::Global, not_until.wait_time_from(self.clock.now()), deadline).await?
                    }
                }
            }
        }
        Ok(started.elapsed())
    }

    /// No call goes to `host` for `wait` (an upstream 429's `Retry-After`).
    pub(crate) fn slow_host(&self, host: &str, wait: Duration) {
        if let Some(cluster) = self.cluster.clone() {
            let host = host.to_string();
            tokio::spawn(async move { cluster.slow_host(&host, wait).await });
        }
        let until = Instant::now() + wait;
        self.slowed.entry(host.to_string()).and_modify(|u| *u = (*u).max(until)).or_insert(until);
    }

    /// The cluster the limits are shared through, if any.
    pub(crate) fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.as_ref()
    }

    /// Forgets idle keys (call now and then on a long-running server).
    pub(crate) fn prune(&self) {
        let rates = self.rates.load();
        for limiter in [&rates.host, &rates.api, &rates.client].into_iter().flatten() {
            limiter.retain_recent();
        }
        let now = Instant::now();
        self.slowed.retain(|_, until| *until > now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(host_rate: f64, max_wait_ms: u64) -> UpstreamConfig {
        UpstreamConfig {
            global_rate: 0.0,
            host_rate,
            api_rate: 0.0,
            client_rate: 0.0,
            burst: 1,
            max_wait_ms,
            ..UpstreamConfig::default()
        }
    }

    #[tokio::test]
    async fn waits_within_max_wait_then_refuses_naming_the_limit() {
        let limits = Limits::new(&config(10.0, 150));
        limits.acquire("h", "a", None).await.unwrap();
        // The next cell comes 100 ms later: within max_wait, so it waits.
        let waited = limits.acquire("h", "a", None).await.unwrap();
        assert!(waited >= Duration::from_millis(80), "{waited:?}");
        // Another host has its own cell.
        assert!(limits.acquire("other", "a", None).await.unwrap() < Duration::from_millis(20));
        let strict = Limits::new(&config(1.0, 50));
        strict.acquire("h", "a", None).await.unwrap();
        let refused = strict.acquire("h", "a", None).await.unwrap_err();
        assert_eq!(refused.limit, Limit::Host);
        assert!(refused.retry_after > Duration::from_millis(500), "{refused:?}");
        assert!(refused.to_string().contains("upstream.host_rate"));
    }

    #[tokio::test]
    async fn a_429_slows_its_host() {
        let limits = Limits::new(&config(0.0, 100));
        limits.slow_host("h", Duration::from_secs(5));
        let refused = limits.acquire("h", "a", None).await.unwrap_err();
        assert_eq!(refused.limit, Limit::HostRetryAfter);
        assert!(limits.acquire("other", "a", None).await.is_ok());
    }

    /// A reload's rates apply to the next call; the same rates again keep
    /// the limiters (and the cells they have given out).
    #[tokio::test]
    async fn reconfigured_rates_apply_to_the_next_call() {
        let limits = Limits::new(&config(1.0, 0));
        limits.acquire("h", "a", None).await.unwrap();
        assert!(!limits.reconfigure(&config(1.0, 0)), "the same rates are no change");
        assert_eq!(limits.acquire("h", "a", None).await.unwrap_err().limit, Limit::Host);
        assert!(limits.reconfigure(&config(0.0, 0)));
        assert!(limits.acquire("h", "a", None).await.is_ok(), "no host rate any more");
        assert!(limits.reconfigure(&config(1.0, 0)));
        limits.acquire("h", "a", None).await.unwrap();
        assert_eq!(limits.acquire("h", "a", None).await.unwrap_err().limit, Limit::Host);
    }
}
