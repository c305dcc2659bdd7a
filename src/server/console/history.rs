//! The last minutes of the process's counters, for the console's
//! overview: [`Totals`] sampled every [`INTERVAL`], kept for [`KEPT`]
//! samples, turned into per-interval rates and latency percentiles.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

use crate::metrics::{LATENCY_BOUNDS, Totals, unix_ms};

/// Time between samples.
pub(crate) const INTERVAL: Duration = Duration::from_secs(5);
/// Samples kept: ten minutes.
pub(crate) const KEPT: usize = 121;

/// Samples, oldest first.
#[derive(Default)]
pub(crate) struct History {
    samples: Mutex<VecDeque<(u64, Totals)>>,
}

/// One interval between two samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Point {
    /// The interval's end (Unix milliseconds).
    pub(crate) t: u64,
    pub(crate) requests_per_s: f64,
    /// Latency percentiles of the interval's requests, interpolated within
    /// the histogram's buckets (`None` without requests).
    pub(crate) p50_ms: Option<f64>,
    pub(crate) p95_ms: Option<f64>,
    pub(crate) p99_ms: Option<f64>,
    pub(crate) client_errors: u64,
    pub(crate) server_errors: u64,
    pub(crate) tool_ok: u64,
    pub(crate) tool_failed: u64,
    /// Requests and upstream calls refused by a rate limit.
    pub(crate) refused: u64,
}

impl History {
    /// Takes a sample of `totals` now.
    pub(crate) fn sample(&self, totals: Totals) {
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if samples.len() == KEPT {
            samples.pop_front();
        }
        samples.push_back((unix_ms(), totals));
    }

    /// The intervals between the samples, with the current totals as the last.
    pub(crate) fn points(&self, now: Totals) -> Vec<Point> {
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let now = (unix_ms(), now);
        let all: Vec<&(u64, Totals)> = samples.iter().chain(std::iter::once(&now)).collect();
        all.windows(2).map(|w| point(w[0], w[1])).collect()
    }
}

fn point((t0, a): &(u64, Totals), (t1, b): &(u64, Totals)) -> Point {
    let seconds = (t1.saturating_sub(*t0) as f64 / 1e3).max(1e-3);
    let requests = b.requests.saturating_sub(a.requests);
    let buckets: Vec<u64> = b.latency.iter().zip(&a.latency).map(|(b, a)| b.saturating_sub(*a)).collect();
    let quantile = |q: f64| percentile(&buckets, requests, q);
    Point {
        t: *t1,
        requests_per_s: requests as f64 / seconds,
        p50_ms: quantile(0.5),
        p95_ms: quantile(0.95),
        p99_ms: quantile(0.99),
        client_errors: b.client_errors.saturating_sub(a.client_errors),
        server_errors: b.server_errors.saturating_sub(a.server_errors),
        tool_ok: b.tool_ok.saturating_sub(a.tool_ok),
        tool_failed: b.tool_failed.saturating_sub(a.tool_failed),
        refused: (b.refused_incoming + b.refused_upstream).saturating_sub(a.refused_incoming + a.refused_upstream),
    }
}

/// The `q` quantile (ms) of `count` requests over cumulative `buckets`,
/// interpolated linearly within the bucket it falls in (as Prometheus'
/// `histogram_quantile`); past the last bound, the last bound.
fn percentile(buckets: &[u64], count: u64, q: f64) -> Option<f64> {
    if count == 0 {
        return None;
    }
    let rank = q * count as f64;
    let mut lower = (0.0, 0u64);
    for (bound, &n) in LATENCY_BOUNDS.iter().zip(buckets) {
        if n as f64 >= rank {
            let within = (rank - lower.1 as f64) / (n - lower.1).max(1) as f64;
            return Some((lower.0 + (bound - lower.0) * within) * 1e3);
        }
        lower = (*bound, n);
    }
    Some(LATENCY_BOUNDS[LATENCY_BOUNDS.len() - 1] * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten requests within 1 ms and ten within 2.5 ms: the median is at
    /// the first bucket's bound, the 95th inside the second bucket.
    #[test]
    fn percentiles_interpolate_within_buckets() {
        let mut buckets = [20u64; LATENCY_BOUNDS.len()];
        buckets[0] = 10;
        assert_eq!(percentile(&buckets, 20, 0.5), Some(1.0));
        let p95 = percentile(&buckets, 20, 0.95).unwrap();
        assert!((p95 - 2.35).abs() < 1e-9, "{p95}");
        assert_eq!(percentile(&buckets, 0, 0.5), None);
    }

    #[test]
    fn points_are_the_differences_between_samples() {
        let history = History::default();
        history.sample(Totals { requests: 5, tool_ok: 1, ..Totals::default() });
        let points = history.points(Totals { requests: 9, tool_ok: 4, refused_incoming: 2, ..Totals::default() });
        assert_eq!(points.len(), 1);
        assert_eq!((points[0].tool_ok, points[0].refused), (3, 2));
        assert!(points[0].requests_per_s > 0.0);
    }
}
