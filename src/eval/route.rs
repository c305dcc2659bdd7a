//! Route mode's narrowing, measured (`toolrouter eval route`): for each
//! query, the client sends the APIs of its `api_list` plus distractors
//! (APIs of other queries' lists, then random catalog APIs) up to `tools`
//! tools, shuffled with a fixed seed, as OpenAI tool definitions. The
//! server's own narrowing ([`crate::openai::route::narrow`]) keeps `k` of
//! them; so do a plain BM25 top-`k` over the tools' names and descriptions
//! and a random `k`, in the same run. Reported: the recall of the query's
//! relevant APIs among the kept tools, and the share of queries whose
//! relevant APIs were all kept, per set and overall.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};

use super::queries::QueryRecord;
use super::retrieval::Latency;
use crate::catalog::{ApiId, Catalog};
use crate::openai::route::narrow;
use crate::openai::validate::{ClientTool, client_tool};
use crate::retrieval::bm25::Bm25;

/// How the tool lists are made.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RouteOptions {
    /// Tools a request carries.
    pub tools: usize,
    /// Tools kept.
    pub k: usize,
    pub seed: u64,
}

/// Recall and all-kept share of one method.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Scores {
    /// Mean over queries of the share of relevant APIs kept.
    pub recall: f64,
    /// Share of queries whose relevant APIs were all kept.
    pub all_kept: f64,
}

/// One set's (or all sets') results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetReport {
    pub name: String,
    /// Queries with at least one relevant API in the catalog.
    pub queries: usize,
    pub route: Scores,
    pub bm25: Scores,
    pub random: Scores,
    /// Route mode's narrowing of a request whose tool list is new.
    pub route_latency_ms: Latency,
    /// The same request again: its tool list was seen before.
    pub route_seen_latency_ms: Latency,
}

/// The whole evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteReport {
    pub options: RouteOptions,
    pub sets: Vec<SetReport>,
    pub overall: SetReport,
}

#[derive(Default)]
struct Acc {
    queries: usize,
    sums: [(f64, f64); 3],
    latency: Vec<f64>,
    seen_latency: Vec<f64>,
}

impl Acc {
    fn add(&mut self, kept: [&[usize]; 3], relevant: &HashSet<usize>, ms: (f64, f64)) {
        self.queries += 1;
        for (sum, kept) in self.sums.iter_mut().zip(kept) {
            let found = kept.iter().filter(|i| relevant.contains(i)).count();
            sum.0 += found as f64 / relevant.len() as f64;
            sum.1 += f64::from(u8::from(found == relevant.len()));
        }
        self.latency.push(ms.0);
        self.seen_latency.push(ms.1);
    }

    fn report(&self, name: &str) -> SetReport {
        let n = self.queries.max(1) as f64;
        let scores = |i: usize| Scores { recall: self.sums[i].0 / n, all_kept: self.sums[i].1 / n };
        SetReport {
            name: name.to_string(),
            queries: self.queries,
            route: scores(0),
            bm25: scores(1),
            random: scores(2),
            route_latency_ms: Latency::of(&mut self.latency.clone()),
            route_seen_latency_ms: Latency::of(&mut self.seen_latency.clone()),
        }
    }
}

/// The catalog APIs of (tool, API) pairs; the unknown ones left out.
fn resolved(catalog: &Catalog, pairs: &[(String, String)]) -> Vec<ApiId> {
    pairs.iter().filter_map(|(tool, api)| catalog.resolve_pair(tool, api)).collect()
}

/// The tools of one request: the query's list, then distractors, shuffled.
fn tool_list(
    catalog: &Catalog,
    own: &[ApiId],
    others: &[ApiId],
    options: &RouteOptions,
    rng: &mut fastrand::Rng,
) -> Vec<ApiId> {
    let mut list: Vec<ApiId> = Vec::with_capacity(options.tools);
    let mut seen: HashSet<ApiId> = HashSet::new();
    for &api in own {
        if seen.insert(api) {
            list.push(api);
        }
    }
    // Half the distractors from other queries' lists (similar requests), the rest from the catalog.
    let from_others = (options.tools.saturating_sub(list.len())) / 2;
    for _ in 0..from_others * 4 {
        if list.len() >= own.len() + from_others || others.is_empty() {
            break;
        }
        let api = others[rng.usize(..others.len())];
        if seen.insert(api) {
            list.push(api);
        }
    }
    let apis = catalog.apis().len();
    while list.len() < options.tools.min(apis) {
        let api = ApiId(rng.u32(..apis as u32));
        if seen.insert(api) {
            list.push(api);
        }
    }
    rng.shuffle(&mut list);
    list
}

/// Runs the evaluation.
pub fn evaluate(catalog: &Catalog, sets: &[(String, Vec<QueryRecord>)], options: RouteOptions) -> RouteReport {
    let mut rng = fastrand::Rng::with_seed(options.seed);
    let mut all = Acc::default();
    let mut reports = Vec::new();
    let pool: Vec<ApiId> = sets.iter().flat_map(|(_, qs)| qs).flat_map(|q| resolved(catalog, &q.api_list)).collect();
    for (name, queries) in sets {
        let mut acc = Acc::default();
        for q in queries {
            let relevant_apis: HashSet<ApiId> = resolved(catalog, &q.relevant).into_iter().collect();
            if relevant_apis.is_empty() {
                continue;
            }
            let mut own = resolved(catalog, &q.api_list);
            own.extend(relevant_apis.iter().copied());
            let list = tool_list(catalog, &own, &pool, &options, &mut rng);
            let definitions: Vec<Value> = list.iter().map(|&id| catalog.function_definition(catalog.api(id))).collect();
            let tools: Vec<ClientTool> =
                definitions.iter().map(|d| client_tool(d).expect("catalog definitions are valid tools")).collect();
            let relevant: HashSet<usize> =
                list.iter().enumerate().filter(|(_, id)| relevant_apis.contains(id)).map(|(i, _)| i).collect();
            let messages = vec![json!({"role": "user", "content": q.query})];
            let timed = || {
                let started = Instant::now();
                let kept = narrow(&tools, &messages, options.k, None, &|_, _| 0.0);
                (kept, started.elapsed().as_secs_f64() * 1e3)
            };
            let ((route, first), (_, again)) = (timed(), timed());
            let ms = (first, again);
            let bm25 = bm25_top_k(&definitions, &q.query, options.k);
            let mut random: Vec<usize> = (0..list.len()).collect();
            rng.shuffle(&mut random);
            random.truncate(options.k);
            acc.add([&route, &bm25, &random], &relevant, ms);
            all.add([&route, &bm25, &random], &relevant, ms);
        }
        reports.push(acc.report(name));
    }
    RouteReport { options, sets: reports, overall: all.report("overall") }
}

/// The baseline: BM25 over each tool's name and description, top `k`
/// (fewer when fewer tools share a word with the request).
fn bm25_top_k(definitions: &[Value], query: &str, k: usize) -> Vec<usize> {
    let texts: Vec<String> = definitions
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d["function"]["name"].as_str().unwrap_or(""),
                d["function"]["description"].as_str().unwrap_or("")
            )
        })
        .collect();
    Bm25::build(&texts).search(query, k, None).into_iter().map(|(i, _)| i as usize).collect()
}

/// The report as a Markdown table.
pub fn markdown(report: &RouteReport) -> String {
    let o = &report.options;
    let mut out = format!(
        "{} tools per request, {} kept (seed {}); recall of the relevant APIs / share of queries with all kept\n\n",
        o.tools, o.k, o.seed
    );
    out.push_str("| set | queries | route mode | BM25 top-k | random k | route p50 / p99, new list | seen list |\n");
    out.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    let mut rows: BTreeMap<usize, &SetReport> = report.sets.iter().enumerate().collect();
    rows.insert(usize::MAX, &report.overall);
    for set in rows.values() {
        let s = |x: &Scores| format!("{:.3} / {:.3}", x.recall, x.all_kept);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.2} / {:.2} ms | {:.2} / {:.2} ms |",
            set.name,
            set.queries,
            s(&set.route),
            s(&set.bm25),
            s(&set.random),
            set.route_latency_ms.p50,
            set.route_latency_ms.p99,
            set.route_seen_latency_ms.p50,
            set.route_seen_latency_ms.p99
        );
    }
    out
}
