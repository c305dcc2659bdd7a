//! Process metrics in Prometheus' text format (`GET /metrics`).
//!
//! Counters keyed by their label set, request latency as a histogram with
//! fixed buckets, and gauges of the tool graph's last recovery that found
//! damage (what `recovery.json` holds when the engine opens). Hand-written rather than a metrics crate: a handful
//! of counters do not justify the dependency tree, and the text format is
//! a few lines.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use dashmap::DashMap;

use crate::graph::store::LastRecovery;

/// Upper bounds (seconds) of the request-latency histogram buckets.
const BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0];

/// Statuses counted, 100 to 599.
const STATUSES: std::ops::Range<u16> = 100..600;

/// One route's requests: how many by status, and their latency.
struct RouteStats {
    /// `toolrouter_requests_total{route, status}`, indexed by status − 100.
    statuses: [AtomicU64; STATUSES.end as usize - STATUSES.start as usize],
    /// Latency histogram: bucket counts, sum (µs) and count.
    buckets: [AtomicU64; BUCKETS.len()],
    sum_us: AtomicU64,
    count: AtomicU64,
}

impl Default for RouteStats {
    fn default() -> Self {
        RouteStats {
            statuses: std::array::from_fn(|_| AtomicU64::new(0)),
            buckets: Default::default(),
            sum_us: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }
}

/// All metrics of the process.
#[derive(Default)]
pub(crate) struct Metrics {
    /// Requests by route (looked up by `&str`: counting a request allocates nothing).
    routes: DashMap<String, RouteStats>,
    /// Log lines the server's log writer dropped (its queue was full).
    dropped_log_lines: OnceLock<std::sync::Arc<AtomicU64>>,
    /// `toolrouter_tool_calls_total{api, outcome}`.
    tool_calls: DashMap<(String, String), AtomicU64>,
    upstream_retries: AtomicU64,
    /// `toolrouter_rate_limited_total{side}`: `incoming` (429 to a client) or `upstream`.
    rate_limited: DashMap<&'static str, AtomicU64>,
    /// The tool graph's last recovery that found damage, if any.
    graph_recovery: Mutex<Option<LastRecovery>>,
    /// The last [`RECENT_CALLS`] calls of each API called (the console's API page).
    recent_calls: DashMap<String, std::collections::VecDeque<RecentCall>>,
}

/// Calls kept per API for [`Metrics::recent_calls`].
pub(crate) const RECENT_CALLS: usize = 20;

/// One upstream call as the console shows it (no arguments: they may be private).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct RecentCall {
    pub(crate) at_unix_ms: u64,
    /// `ok` or the error class.
    pub(crate) outcome: String,
    pub(crate) retries: u64,
    pub(crate) ms: f64,
}

/// The process's counters summed over routes and APIs, at one moment (the
/// console's overview samples them).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Totals {
    pub(crate) requests: u64,
    /// Answers with a 4xx status, and with a 5xx one.
    pub(crate) client_errors: u64,
    pub(crate) server_errors: u64,
    /// Requests per latency bucket (cumulative, as [`LATENCY_BOUNDS`]).
    pub(crate) latency: [u64; BUCKETS.len()],
    pub(crate) tool_ok: u64,
    pub(crate) tool_failed: u64,
    pub(crate) refused_incoming: u64,
    pub(crate) refused_upstream: u64,
}

/// Upper bounds (seconds) of the latency buckets of [`Totals::latency`].
pub(crate) const LATENCY_BOUNDS: [f64; BUCKETS.len()] = BUCKETS;

/// Milliseconds since the Unix epoch.
pub(crate) fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The process's metrics.
pub(crate) fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::default)
}

fn bump<K: std::hash::Hash + Eq>(map: &DashMap<K, AtomicU64>, key: K, n: u64) {
    map.entry(key).or_insert_with(|| AtomicU64::new(0)).fetch_add(n, Ordering::Relaxed);
}

/// A label value with `\`, `"` and newlines escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl Metrics {
    /// A finished HTTP request. `route` is the matched route, not the raw path.
    pub(crate) fn request(&self, route: &str, status: u16, seconds: f64) {
        let stats = match self.routes.get(route) {
            Some(stats) => stats,
            None => self.routes.entry(route.to_string()).or_default().downgrade(),
        };
        let status = status.clamp(STATUSES.start, STATUSES.end - 1) - STATUSES.start;
        stats.statuses[usize::from(status)].fetch_add(1, Ordering::Relaxed);
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                stats.buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        stats.sum_us.fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
        stats.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Where the server's log writer counts the lines it dropped.
    pub(crate) fn set_dropped_log_lines(&self, counter: std::sync::Arc<AtomicU64>) {
        let _ = self.dropped_log_lines.set(counter);
    }

    /// An upstream API call: its outcome (`ok` or an error class), retries
    /// and time taken.
    pub(crate) fn tool_call(&self, api: &str, outcome: &str, retries: u64, ms: f64) {
        bump(&self.tool_calls, (api.to_string(), outcome.to_string()), 1);
        let call = RecentCall { at_unix_ms: unix_ms(), outcome: outcome.to_string(), retries, ms };
        let mut recent = self.recent_calls.entry(api.to_string()).or_default();
        if recent.len() == RECENT_CALLS {
            recent.pop_front();
        }
        recent.push_back(call);
        drop(recent);
        self.upstream_retries.fetch_add(retries, Ordering::Relaxed);
        if outcome == "rate_limited" {
            self.rate_limited("upstream");
        }
    }

    pub(crate) fn rate_limited(&self, side: &'static str) {
        bump(&self.rate_limited, side, 1);
    }

    /// The last calls of `api`, newest first.
    pub(crate) fn recent_calls(&self, api: &str) -> Vec<RecentCall> {
        self.recent_calls.get(api).map(|r| r.iter().rev().cloned().collect()).unwrap_or_default()
    }

    /// Calls of `api` by outcome, since the start.
    pub(crate) fn call_outcomes(&self, api: &str) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = self
            .tool_calls
            .iter()
            .filter(|e| e.key().0 == api)
            .map(|e| (e.key().1.clone(), e.value().load(Ordering::Relaxed)))
            .collect();
        out.sort();
        out
    }

    /// The counters now, summed.
    pub(crate) fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for e in self.routes.iter() {
            let stats = e.value();
            for (status, n) in STATUSES.zip(&stats.statuses) {
                let n = n.load(Ordering::Relaxed);
                t.requests += n;
                match status {
                    400..=499 => t.client_errors += n,
                    500..=599 => t.server_errors += n,
                    _ => {}
                }
            }
            for (i, n) in stats.buckets.iter().enumerate() {
                t.latency[i] += n.load(Ordering::Relaxed);
            }
        }
        for e in self.tool_calls.iter() {
            let n = e.value().load(Ordering::Relaxed);
            if e.key().1 == "ok" {
                t.tool_ok += n;
            } else {
                t.tool_failed += n;
            }
        }
        let side = |s| self.rate_limited.get(s).map_or(0, |v| v.load(Ordering::Relaxed));
        (t.refused_incoming, t.refused_upstream) = (side("incoming"), side("upstream"));
        t
    }

    /// The tool graph's last recovery that found damage (`None`: none ever did).
    pub(crate) fn graph_recovery(&self, last: Option<LastRecovery>) {
        *self.graph_recovery.lock().unwrap_or_else(|e| e.into_inner()) = last;
    }

    /// The text exposition format.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# HELP toolrouter_requests_total HTTP requests by route and status.");
        let _ = writeln!(out, "# TYPE toolrouter_requests_total counter");
        for e in self.routes.iter() {
            let route = label(e.key());
            for (status, n) in STATUSES.zip(&e.value().statuses) {
                let n = n.load(Ordering::Relaxed);
                if n > 0 {
                    let _ = writeln!(out, "toolrouter_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}");
                }
            }
        }
        let _ = writeln!(out, "# HELP toolrouter_request_duration_seconds HTTP request latency by route.");
        let _ = writeln!(out, "# TYPE toolrouter_request_duration_seconds histogram");
        for e in self.routes.iter() {
            let (route, stats) = (label(e.key()), e.value());
            let (buckets, sum, count) = (&stats.buckets, &stats.sum_us, &stats.count);
            for (i, bound) in BUCKETS.iter().enumerate() {
                let n = buckets[i].load(Ordering::Relaxed);
                let _ =
                    writeln!(out, "toolrouter_request_duration_seconds_bucket{{route=\"{route}\",le=\"{bound}\"}} {n}");
            }
            let count = count.load(Ordering::Relaxed);
            let _ =
                writeln!(out, "toolrouter_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {count}");
            let sum = sum.load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(out, "toolrouter_request_duration_seconds_sum{{route=\"{route}\"}} {sum}");
            let _ = writeln!(out, "toolrouter_request_duration_seconds_count{{route=\"{route}\"}} {count}");
        }
        let _ = writeln!(out, "# HELP toolrouter_tool_calls_total Upstream API calls by API and outcome.");
        let _ = writeln!(out, "# TYPE toolrouter_tool_calls_total counter");
        for e in self.tool_calls.iter() {
            let ((api, outcome), n) = (e.key(), e.value().load(Ordering::Relaxed));
            let _ = writeln!(
                out,
                "toolrouter_tool_calls_total{{api=\"{}\",outcome=\"{}\"}} {n}",
                label(api),
                label(outcome)
            );
        }
        let _ = writeln!(out, "# HELP toolrouter_upstream_retries_total Upstream attempts after the first.");
        let _ = writeln!(out, "# TYPE toolrouter_upstream_retries_total counter");
        let _ = writeln!(out, "toolrouter_upstream_retries_total {}", self.upstream_retries.load(Ordering::Relaxed));
        let _ =
            writeln!(out, "# HELP toolrouter_rate_limited_total Calls refused by a rate limit (incoming or upstream).");
        let _ = writeln!(out, "# TYPE toolrouter_rate_limited_total counter");
        for side in ["incoming", "upstream"] {
            let n = self.rate_limited.get(side).map_or(0, |v| v.load(Ordering::Relaxed));
            let _ = writeln!(out, "toolrouter_rate_limited_total{{side=\"{side}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP toolrouter_log_lines_dropped_total Log lines dropped because the log writer fell behind."
        );
        let _ = writeln!(out, "# TYPE toolrouter_log_lines_dropped_total counter");
        let dropped = self.dropped_log_lines.get().map_or(0, |c| c.load(Ordering::Relaxed));
        let _ = writeln!(out, "toolrouter_log_lines_dropped_total {dropped}");
        self.render_graph_recovery(&mut out);
        out
    }

    /// Gauges of the graph's last recovery that found damage (all 0 if none did).
    fn render_graph_recovery(&self, out: &mut String) {
        let last = self.graph_recovery.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let r = last.as_ref().map(|l| &l.recovery);
        let gauges: [(&str, &str, u64); 7] = [
            (
                "timestamp_seconds",
                "When the graph's last recovery that found damage ran (Unix time; 0: never).",
                last.as_ref().map_or(0, |l| l.at_unix),
            ),
            (
                "lost_runs",
                "Runs folded into a damaged graph snapshot that the last such recovery could not get back.",
                r.map_or(0, |r| r.lost_runs),
            ),
            (
                "damaged_snapshots",
                "Damaged graph snapshots the last such recovery passed over.",
                r.map_or(0, |r| r.damaged_snapshots as u64),
            ),
            (
                "dropped_records",
                "Damaged or torn graph log lines the last such recovery dropped.",
                r.map_or(0, |r| r.dropped as u64),
            ),
            (
                "unterminated_records",
                "Intact graph log records lacking their final newline that the last such recovery kept.",
                r.map_or(0, |r| r.unterminated as u64),
            ),
            (
                "replayed_records",
                "Graph log records the last such recovery replayed on top of the snapshot.",
                r.map_or(0, |r| r.replayed as u64),
            ),
            (
                "truncated_bytes",
                "Bytes of a torn last graph log line the last such recovery cut off.",
                r.map_or(0, |r| r.truncated_bytes),
            ),
        ];
        for (name, help, value) in gauges {
            let _ = writeln!(out, "# HELP toolrouter_graph_recovery_{name} {help}");
            let _ = writeln!(out, "# TYPE toolrouter_graph_recovery_{name} gauge");
            let _ = writeln!(out, "toolrouter_graph_recovery_{name} {value}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_a_histogram() {
        let m = Metrics::default();
        m.request("/v1/chat/completions", 200, 0.003);
        m.request("/v1/chat/completions", 200, 0.2);
        m.tool_call("get_\"x\"", "ok", 0, 1.0);
        m.tool_call("y", "rate_limited", 2, 1.0);
        let text = m.render();
        assert!(text.contains("toolrouter_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 2"), "{text}");
        assert!(text.contains("le=\"0.005\"} 1") && text.contains("le=\"0.5\"} 2") && text.contains("le=\"+Inf\"} 2"));
        assert!(text.contains("toolrouter_tool_calls_total{api=\"get_\\\"x\\\"\",outcome=\"ok\"} 1"), "{text}");
        assert!(text.contains("toolrouter_upstream_retries_total 2"));
        assert!(text.contains("toolrouter_rate_limited_total{side=\"upstream\"} 1"));
        assert!(text.contains("toolrouter_graph_recovery_lost_runs 0\n"), "{text}");
        assert!(text.contains("toolrouter_log_lines_dropped_total 0\n"), "{text}");
        m.request("/v1/chat/completions", 503, 0.001);
        m.request("other", 1000, 0.001);
        let text = m.render();
        assert!(text.contains("route=\"/v1/chat/completions\",status=\"200\"} 2\n"), "{text}");
        assert!(text.contains("route=\"/v1/chat/completions\",status=\"503\"} 1\n"), "{text}");
        assert!(text.contains("route=\"other\",status=\"599\"} 1\n"), "an odd status is counted, clamped: {text}");
    }

    #[test]
    fn renders_the_last_graph_recovery() {
        let m = Metrics::default();
        let recovery = crate::graph::store::Recovery {
            lost_runs: 10,
            damaged_snapshots: 1,
            dropped: 2,
            unterminated: 1,
            replayed: 3,
            ..Default::default()
        };
        m.graph_recovery(Some(LastRecovery { at_unix: 1_700_000_000, recovery }));
        let text = m.render();
        for line in [
            "toolrouter_graph_recovery_timestamp_seconds 1700000000",
            "toolrouter_graph_recovery_lost_runs 10",
            "toolrouter_graph_recovery_damaged_snapshots 1",
            "toolrouter_graph_recovery_dropped_records 2",
            "toolrouter_graph_recovery_unterminated_records 1",
            "toolrouter_graph_recovery_replayed_records 3",
            "toolrouter_graph_recovery_truncated_bytes 0",
            "# TYPE toolrouter_graph_recovery_lost_runs gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in {text}");
        }
    }
}
