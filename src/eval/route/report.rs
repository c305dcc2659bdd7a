//! What `eval route` reports: each method's recall and all-kept share
//! per set and overall (with `--learning`, also over the requests needing
//! a tool an earlier one needed), latencies, and the Markdown table.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;
use std::sync::Arc;

use serde::Serialize;

use super::{
    BM25, EMBEDDING_ALONE, FIRST_REQUEST, LEARNING, METHODS, Measured, PERMUTED, RANDOM, ROUTE, RouteOptions,
    WORDS_ONLY,
};
use crate::chat::tools::ClientTool;
use crate::eval::retrieval::Latency;

/// Recall and all-kept share of one method.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct Scores {
    /// Mean over queries of the share of relevant APIs kept.
    pub(crate) recall: f64,
    /// Share of queries whose relevant APIs were all kept.
    pub(crate) all_kept: f64,
}

/// One set's (or all sets') results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SetReport {
    pub(crate) name: String,
    /// Queries with at least one relevant API in the catalog.
    pub(crate) queries: usize,
    /// Tools the requests carried, on average (below `tools` when there
    /// were not as many distinct ones to draw from).
    pub(crate) mean_tools: f64,
    /// Route mode, every tool known (absent without an embedding model).
    pub(crate) route: Option<Scores>,
    /// Route mode, the list's first request: only
    /// [`RouteOptions::first_embedded`] of its tools embedded (absent without a model).
    pub(crate) route_first_request: Option<Scores>,
    /// Route mode by words alone (no model, or none of the tools known).
    pub(crate) route_words_only: Scores,
    /// The embedding used plainly: cosine of the request and each tool's
    /// name and description, top k (absent without a model).
    pub(crate) embedding_alone: Option<Scores>,
    pub(crate) bm25: Scores,
    pub(crate) random: Scores,
    /// Route mode with what earlier requests called (`--learning`).
    pub(crate) route_learning: Option<Scores>,
    /// Share of requests whose kept tools were the same with the list
    /// in another order (absent without a model).
    pub(crate) same_when_permuted: Option<f64>,
    /// Narrowing a request whose tools are all new, by words.
    pub(crate) new_list_ms: Latency,
    /// A known list with a new message: the message is embedded.
    pub(crate) new_message_ms: Latency,
    /// The same request again.
    pub(crate) seen_ms: Latency,
    /// Known tools in a new order, the message known.
    pub(crate) permuted_ms: Latency,
}

/// The whole evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RouteReport {
    pub(crate) options: RouteOptions,
    pub(crate) sets: Vec<SetReport>,
    pub(crate) overall: SetReport,
}

#[derive(Default)]
struct Acc {
    queries: usize,
    /// Per method: recall and all-kept sums.
    sums: [(f64, f64); METHODS],
    /// Requests that kept the same tools in another order.
    same: usize,
    ms: [Vec<f64>; 4],
    tools: usize,
}

impl Acc {
    fn add(&mut self, m: &Measured, relevant: &HashSet<usize>, tools: usize) {
        self.queries += 1;
        self.tools += tools;
        for (sum, kept) in self.sums.iter_mut().zip(&m.kept) {
            let found = kept.iter().filter(|i| relevant.contains(i)).count();
            sum.0 += found as f64 / relevant.len() as f64;
            sum.1 += f64::from(u8::from(found == relevant.len()));
        }
        self.same += usize::from(m.kept[PERMUTED] == m.kept[ROUTE]);
        for (all, ms) in self.ms.iter_mut().zip(m.ms) {
            all.push(ms);
        }
    }

    fn report(&self, name: &str, embedded: bool, learning: bool) -> SetReport {
        let n = self.queries.max(1) as f64;
        let scores = |i: usize| Scores { recall: self.sums[i].0 / n, all_kept: self.sums[i].1 / n };
        let latency = |i: usize| Latency::of(&mut self.ms[i].clone());
        SetReport {
            name: name.to_string(),
            queries: self.queries,
            mean_tools: self.tools as f64 / n,
            route: embedded.then(|| scores(ROUTE)),
            route_first_request: embedded.then(|| scores(FIRST_REQUEST)),
            route_words_only: scores(WORDS_ONLY),
            embedding_alone: embedded.then(|| scores(EMBEDDING_ALONE)),
            bm25: scores(BM25),
            random: scores(RANDOM),
            route_learning: (embedded && learning).then(|| scores(LEARNING)),
            same_when_permuted: embedded.then(|| self.same as f64 / n),
            new_list_ms: latency(0),
            new_message_ms: latency(1),
            seen_ms: latency(2),
            permuted_ms: latency(3),
        }
    }
}

/// A run's accumulators: per set and overall, and with `--learning` the
/// same over the requests that need a tool an earlier request needed.
pub(super) struct Tally {
    options: RouteOptions,
    embedded: bool,
    /// (set, all its requests, its repeats), in order.
    sets: Vec<(String, Acc, Acc)>,
    all: Acc,
    repeats: Acc,
    /// The texts of the tools earlier requests needed.
    needed: HashSet<String>,
}

impl Tally {
    pub(super) fn new(options: RouteOptions, embedded: bool) -> Tally {
        let (sets, all, repeats, needed) = (Vec::new(), Acc::default(), Acc::default(), HashSet::new());
        Tally { options, embedded, sets, all, repeats, needed }
    }

    pub(super) fn start(&mut self, set: &str) {
        self.sets.push((set.to_string(), Acc::default(), Acc::default()));
    }

    pub(super) fn add(&mut self, measured: &Measured, tools: &[Arc<ClientTool>], relevant: &HashSet<usize>) {
        let texts: Vec<&String> = relevant.iter().map(|&i| &tools[i].text).collect();
        let repeat = texts.iter().any(|t| self.needed.contains(*t));
        self.needed.extend(texts.into_iter().cloned());
        let (_, set, set_repeats) = self.sets.last_mut().expect("a set was started");
        for acc in [set, &mut self.all] {
            acc.add(measured, relevant, tools.len());
        }
        if repeat {
            for acc in [set_repeats, &mut self.repeats] {
                acc.add(measured, relevant, tools.len());
            }
        }
    }

    pub(super) fn report(self) -> RouteReport {
        let (embedded, learning) = (self.embedded, self.options.learning);
        let mut sets = Vec::new();
        for (name, acc, repeats) in &self.sets {
            sets.push(acc.report(name, embedded, learning));
            if learning {
                sets.push(repeats.report(&format!("{name}: needs a tool needed before"), embedded, learning));
            }
        }
        if learning {
            sets.push(self.repeats.report("overall: needs a tool needed before", embedded, learning));
        }
        RouteReport { options: self.options, sets, overall: self.all.report("overall", embedded, learning) }
    }
}

/// The report as a Markdown table.
pub(crate) fn markdown(report: &RouteReport) -> String {
    let o = &report.options;
    let mean = report.overall.mean_tools;
    let carried =
        if (mean - o.tools as f64).abs() > 0.05 { format!(" (carried {mean:.1} on average)") } else { String::new() };
    let mut out = format!(
        "{} tools per request{carried}, {} kept (seed {}); recall of the relevant APIs / share of queries with all kept\n\n",
        o.tools, o.k, o.seed
    );
    let learning = if o.learning { " route, learning from earlier requests |" } else { "" };
    let _ = writeln!(
        out,
        "| set | queries | route mode |{learning} route, first request ({} embedded) | route, words only | embedding alone | BM25 top-k | random k |",
        o.first_embedded
    );
    let _ = writeln!(
        out,
        "| --- | ---: | ---: |{} ---: | ---: | ---: | ---: | ---: |",
        if o.learning { " ---: |" } else { "" }
    );
    let mut rows: BTreeMap<usize, &SetReport> = report.sets.iter().enumerate().collect();
    rows.insert(usize::MAX, &report.overall);
    let s = |x: &Scores| format!("{:.3} / {:.3}", x.recall, x.all_kept);
    let model = |x: &Option<Scores>| x.as_ref().map_or_else(|| "(no model)".to_string(), s);
    for set in rows.values() {
        let learned = if o.learning { format!(" {} |", model(&set.route_learning)) } else { String::new() };
        let _ = writeln!(
            out,
            "| {} | {} | {} |{learned} {} | {} | {} | {} | {} |",
            set.name,
            set.queries,
            model(&set.route),
            model(&set.route_first_request),
            s(&set.route_words_only),
            model(&set.embedding_alone),
            s(&set.bm25),
            s(&set.random)
        );
    }
    let l = |x: &Latency| format!("{:.2} / {:.2} ms", x.p50, x.p99);
    let all = &report.overall;
    let _ = writeln!(
        out,
        "\nNarrowing latency p50 / p99: new list (by words) {}; known list, new message {}; same request again {}; \
         known tools in a new order {}",
        l(&all.new_list_ms),
        l(&all.new_message_ms),
        l(&all.seen_ms),
        l(&all.permuted_ms)
    );
    if let Some(same) = all.same_when_permuted {
        let _ = writeln!(out, "The same tools in another order kept the same tools for {:.3} of requests.", same);
    }
    out
}
