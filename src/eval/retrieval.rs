//! Retrieval quality on ToolBench query files: every query is searched over
//! the whole catalog and its `relevant APIs` looked up in the ranking.
//! Relevant APIs that are not in the catalog at all count as missed (and
//! are reported). Metrics are averaged over queries, per file and overall.
//!
//! Searched cold by default (no long-term memory). With a memory per set
//! (built from runs on the other sets: [`super::plan::folds`]), each query
//! also ranks the APIs of remembered similar runs, as `serve` searches once
//! `graph build` has read trajectories.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;
use std::time::Instant;

use serde::Serialize;

use super::queries::QueryRecord;
use super::scores::{ndcg_at, recall_at, reciprocal_rank};
use crate::catalog::ApiId;
use crate::config::SearchMode;
use crate::planner::{LongTermMemory, remembered};
use crate::retrieval::{Filters, RetrievalError, Retriever, SearchOptions};

/// Depth of the ranking the reciprocal rank looks into.
pub(crate) const MRR_DEPTH: usize = 100;

/// Latency percentiles of one search (query embedding included), in ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct Latency {
    pub(crate) p50: f64,
    pub(crate) p99: f64,
}

impl Latency {
    /// The 50th and 99th percentiles (nearest rank) of `samples`.
    pub(crate) fn of(samples: &mut [f64]) -> Latency {
        samples.sort_by(f64::total_cmp);
        let pct =
            |p: f64| if samples.is_empty() { 0.0 } else { samples[((samples.len() - 1) as f64 * p).round() as usize] };
        Latency { p50: pct(0.5), p99: pct(0.99) }
    }
}

/// Metrics of one query file (or of all of them).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SetReport {
    pub(crate) name: String,
    pub(crate) queries: usize,
    /// Relevant (tool, API) pairs over all queries.
    pub(crate) relevant: usize,
    /// Relevant pairs the catalog does not have (always missed).
    pub(crate) missing_relevant: usize,
    /// `recall@k`, `ndcg@k` for each k, and `mrr`.
    pub(crate) metrics: BTreeMap<String, f64>,
    /// A whole search: embedding the query (and its intents) plus ranking.
    pub(crate) latency_ms: Latency,
    /// Ranking alone (the query's vectors given).
    pub(crate) rank_latency_ms: Latency,
}

/// The evaluation of one set of search options.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RetrievalReport {
    pub(crate) options: SearchOptions,
    pub(crate) catalog_apis: usize,
    pub(crate) sets: Vec<SetReport>,
    pub(crate) overall: SetReport,
}

/// What each set's queries remember: a long-term memory per set (in the
/// order of the sets) and the remembered tasks consulted per query.
pub(crate) struct Memories<'a> {
    pub(crate) per_set: &'a [LongTermMemory],
    pub(crate) hints: usize,
}

/// Searches every query of every set with each of `variants` and scores the
/// rankings. Each query is embedded once (with its intents) and ranked by
/// every variant; latency is preparation (embedding) plus ranking.
pub(crate) fn evaluate(
    retriever: &Retriever,
    sets: &[(String, Vec<QueryRecord>)],
    ks: &[usize],
    variants: &[SearchOptions],
    memories: Option<Memories<'_>>,
) -> Result<Vec<RetrievalReport>, RetrievalError> {
    let catalog = retriever.catalog().clone();
    let depth = ks.iter().copied().max().unwrap_or(10).max(MRR_DEPTH);
    let Some(first) = variants.first() else { return Ok(Vec::new()) };
    let mut prepare = *first;
    prepare.intents = variants.iter().any(|v| v.intents);
    prepare.embed_intents = variants.iter().any(|v| v.embed_intents);
    if variants.iter().any(|v| v.mode != SearchMode::Lexical) {
        prepare.mode = SearchMode::Hybrid;
    }
    let mut prepared = Vec::with_capacity(sets.len());
    for (i, (_, queries)) in sets.iter().enumerate() {
        let mut set = Vec::with_capacity(queries.len());
        for q in queries {
            let mut p = retriever.prepare(&q.query, prepare)?;
            if let (Some(m), Some(vector)) = (&memories, p.vectors.first()) {
                p.remembered = remembered(&m.per_set[i].examples(vector, m.hints), &catalog);
            }
            set.push(p);
        }
        prepared.push(set);
    }
    let mut reports = Vec::with_capacity(variants.len());
    for options in variants {
        let mut per_set = Vec::new();
        let mut all = Accumulator::new("overall", ks);
        for ((name, queries), set) in sets.iter().zip(&prepared) {
            let mut acc = Accumulator::new(name, ks);
            for (q, p) in queries.iter().zip(set) {
                let found: HashSet<ApiId> =
                    q.relevant.iter().filter_map(|(tool, api)| catalog.resolve_pair(tool, api)).collect();
                let started = Instant::now();
                let results = retriever.rank(p, depth, &Filters::default(), *options);
                let rank_ms = crate::units::ms(started.elapsed());
                let embed = if options.mode == SearchMode::Lexical { 0.0 } else { p.embed_ms };
                let ranked: Vec<ApiId> = results.hits.iter().map(|h| h.api).collect();
                acc.add(&ranked, &found, q.relevant.len(), (embed + rank_ms, rank_ms));
                all.add(&ranked, &found, q.relevant.len(), (embed + rank_ms, rank_ms));
            }
            per_set.push(acc.finish());
        }
        reports.push(RetrievalReport {
            options: *options,
            catalog_apis: catalog.apis().len(),
            sets: per_set,
            overall: all.finish(),
        });
    }
    Ok(reports)
}

struct Accumulator {
    name: String,
    ks: Vec<usize>,
    queries: usize,
    relevant: usize,
    missing: usize,
    sums: BTreeMap<String, f64>,
    latencies: Vec<f64>,
    rank_latencies: Vec<f64>,
}

impl Accumulator {
    fn new(name: &str, ks: &[usize]) -> Accumulator {
        Accumulator {
            name: name.to_string(),
            ks: ks.to_vec(),
            queries: 0,
            relevant: 0,
            missing: 0,
            sums: BTreeMap::new(),
            latencies: Vec::new(),
            rank_latencies: Vec::new(),
        }
    }

    /// `ms`: (whole search, ranking alone).
    fn add(&mut self, ranked: &[ApiId], found: &HashSet<ApiId>, total: usize, ms: (f64, f64)) {
        if total == 0 {
            return;
        }
        self.queries += 1;
        self.relevant += total;
        self.missing += total - found.len();
        self.latencies.push(ms.0);
        self.rank_latencies.push(ms.1);
        for &k in &self.ks {
            *self.sums.entry(format!("recall@{k}")).or_default() += recall_at(ranked, found, total, k);
            *self.sums.entry(format!("ndcg@{k}")).or_default() += ndcg_at(ranked, found, total, k);
        }
        *self.sums.entry("mrr".to_string()).or_default() += reciprocal_rank(ranked, found);
    }

    fn finish(mut self) -> SetReport {
        let n = self.queries.max(1) as f64;
        SetReport {
            latency_ms: Latency::of(&mut self.latencies),
            rank_latency_ms: Latency::of(&mut self.rank_latencies),
            metrics: self.sums.into_iter().map(|(k, v)| (k, v / n)).collect(),
            name: self.name,
            queries: self.queries,
            relevant: self.relevant,
            missing_relevant: self.missing,
        }
    }
}

/// The report as a Markdown table (one row per set, then overall).
pub(crate) fn markdown(report: &RetrievalReport, ks: &[usize]) -> String {
    let mut out = String::new();
    let o = &report.options;
    let _ = writeln!(out, "{}, catalog of {} APIs\n", describe(o), report.catalog_apis);
    let mut header = String::from("| set | queries | missing relevant |");
    let mut rule = String::from("| --- | ---: | ---: |");
    for k in ks {
        header.push_str(&format!(" R@{k} |"));
        rule.push_str(" ---: |");
    }
    for k in ks {
        header.push_str(&format!(" NDCG@{k} |"));
        rule.push_str(" ---: |");
    }
    header.push_str(" MRR | p50 ms | p99 ms | rank p50 ms | rank p99 ms |");
    rule.push_str(" ---: | ---: | ---: | ---: | ---: |");
    let _ = writeln!(out, "{header}\n{rule}");
    for set in report.sets.iter().chain(std::iter::once(&report.overall)) {
        let mut row = format!("| {} | {} | {}/{} |", set.name, set.queries, set.missing_relevant, set.relevant);
        for k in ks {
            row.push_str(&format!(" {:.3} |", set.metrics.get(&format!("recall@{k}")).copied().unwrap_or_default()));
        }
        for k in ks {
            row.push_str(&format!(" {:.3} |", set.metrics.get(&format!("ndcg@{k}")).copied().unwrap_or_default()));
        }
        row.push_str(&format!(
            " {:.3} | {:.1} | {:.1} | {:.2} | {:.2} |",
            set.metrics.get("mrr").copied().unwrap_or_default(),
            set.latency_ms.p50,
            set.latency_ms.p99,
            set.rank_latency_ms.p50,
            set.rank_latency_ms.p99
        ));
        let _ = writeln!(out, "{row}");
    }
    out
}

/// The options of a variant in words.
pub(crate) fn describe(o: &SearchOptions) -> String {
    let w = &o.weights;
    format!(
        "mode {}, dense index {}, intents {} ({}), weights lexical {} dense {} intent {} tool lists {} named tools {} rrf_k {}",
        format!("{:?}", o.mode).to_lowercase(),
        format!("{:?}", o.dense_index).to_lowercase(),
        if o.intents { "on" } else { "off" },
        format!("{:?}", o.intent_merge).to_lowercase(),
        w.lexical,
        w.dense,
        w.intent,
        w.tool,
        w.named_tool,
        w.rrf_k
    )
}

/// One line per variant: overall metrics and each set's Recall@10.
pub(crate) fn summary(reports: &[RetrievalReport]) -> String {
    let mut out = String::new();
    let Some(first) = reports.first() else { return out };
    let mut header = String::from(
        "| mode | intents | lex | dense | intent | tool | named tool | rrf_k | R@1 | R@5 | R@10 | NDCG@10 | MRR |",
    );
    let mut rule =
        String::from("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for set in &first.sets {
        header.push_str(&format!(" {} R@10 |", set.name));
        rule.push_str(" ---: |");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for r in reports {
        let (o, w, m) = (&r.options, &r.options.weights, &r.overall.metrics);
        let get = |k: &str| m.get(k).copied().unwrap_or_default();
        let mut row = format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            format!("{:?}", o.mode).to_lowercase(),
            if o.intents { format!("{:?}", o.intent_merge).to_lowercase() } else { "off".into() },
            w.lexical,
            w.dense,
            w.intent,
            w.tool,
            w.named_tool,
            w.rrf_k,
            get("recall@1"),
            get("recall@5"),
            get("recall@10"),
            get("ndcg@10"),
            get("mrr")
        );
        for set in &r.sets {
            row.push_str(&format!(" {:.3} |", set.metrics.get("recall@10").copied().unwrap_or_default()));
        }
        let _ = writeln!(out, "{row}");
    }
    out
}
