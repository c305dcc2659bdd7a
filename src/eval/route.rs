//! Route mode's narrowing, measured (`toolrouter eval route`): for each
//! query, the client sends the APIs of its `api_list` plus distractors
//! (APIs of other queries' lists, then catalog APIs from a fixed random
//! pool) up to `tools` tools, shuffled with a fixed seed, as OpenAI tool
//! definitions. The server's own narrowing ([`crate::retrieval::tool_list`],
//! the steps of [`crate::server::openai::route::Narrowing::narrow`]) keeps `k` of them,
//! once as a list seen for the first time (lexical) and once embedded;
//! so do a plain BM25 top-`k` over the tools' names and descriptions and
//! a random `k`, in the same run. Reported: the recall of the query's
//! relevant APIs among the kept tools and the share of queries whose
//! relevant APIs were all kept, per set and overall, and the narrowing's
//! latency for a new list, a known list with a new message, and a known
//! conversation.
//!
//! Route cases ([`Case`], `--cases`) measure the same on any tool
//! collection: each request brings its own tools and names the ones it
//! needs; distractors come from the other requests' tools.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::queries::QueryRecord;
use super::retrieval::Latency;
use crate::catalog::{ApiId, Catalog};
use crate::retrieval::Embedder;
use crate::retrieval::bm25::Bm25;
use crate::retrieval::tool_list::{self, ListWeights, ToolListRanker};
use crate::server::openai::route::Asked;
use crate::server::openai::tools::{ClientTool, client_tool};

/// Catalog APIs the random distractors are drawn from (a fixed pool keeps
/// the texts to embed within a few thousand).
const RANDOM_POOL: usize = 4_000;

/// How the tool lists are made.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RouteOptions {
    /// Tools a request carries.
    pub tools: usize,
    /// Tools kept.
    pub k: usize,
    pub seed: u64,
    pub weights: ListWeights,
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
    /// Tools the requests carried, on average (below `tools` when there
    /// were not as many distinct ones to draw from).
    pub mean_tools: f64,
    /// Route mode, the list embedded (absent without an embedding model).
    pub route: Option<Scores>,
    /// Route mode on a list seen for the first time (lexical).
    pub route_first_seen: Scores,
    pub bm25: Scores,
    pub random: Scores,
    /// Narrowing a request whose tool list is new.
    pub new_list_ms: Latency,
    /// A known (embedded) list with a new message: the message is embedded.
    pub new_message_ms: Latency,
    /// The same request again.
    pub seen_ms: Latency,
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
    /// Per method (route, first seen, BM25, random): recall and all-kept sums.
    sums: [(f64, f64); 4],
    ms: [Vec<f64>; 3],
    tools: usize,
}

/// One query's outcome: the kept tools per method, the latencies.
struct Measured {
    kept: [Vec<usize>; 4],
    ms: [f64; 3],
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
        for (all, ms) in self.ms.iter_mut().zip(m.ms) {
            all.push(ms);
        }
    }

    fn report(&self, name: &str, embedded: bool) -> SetReport {
        let n = self.queries.max(1) as f64;
        let scores = |i: usize| Scores { recall: self.sums[i].0 / n, all_kept: self.sums[i].1 / n };
        let latency = |i: usize| Latency::of(&mut self.ms[i].clone());
        SetReport {
            name: name.to_string(),
            queries: self.queries,
            mean_tools: self.tools as f64 / n,
            route: embedded.then(|| scores(0)),
            route_first_seen: scores(1),
            bm25: scores(2),
            random: scores(3),
            new_list_ms: latency(0),
            new_message_ms: latency(1),
            seen_ms: latency(2),
        }
    }
}

/// The catalog APIs of (tool, API) pairs; the unknown ones left out.
fn resolved(catalog: &Catalog, pairs: &[(String, String)]) -> Vec<ApiId> {
    pairs.iter().filter_map(|(tool, api)| catalog.resolve_pair(tool, api)).collect()
}

/// The tools of one request: the query's list, then distractors, shuffled.
fn tool_list(
    own: &[ApiId],
    others: &[ApiId],
    random_pool: &[ApiId],
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
    let fill = options.tools.min(own.len() + from_others + random_pool.len());
    while list.len() < fill {
        let api = random_pool[rng.usize(..random_pool.len())];
        if seen.insert(api) {
            list.push(api);
        }
    }
    rng.shuffle(&mut list);
    list
}

/// Runs the evaluation; with `embedder`, also route mode on embedded
/// lists. `ranker` keeps tool vectors between runs (a sweep embeds once).
pub fn evaluate(
    catalog: &Catalog,
    sets: &[(String, Vec<QueryRecord>)],
    options: RouteOptions,
    ranker: &ToolListRanker,
    embedder: Option<&Embedder>,
) -> Result<RouteReport, crate::retrieval::EmbedError> {
    let mut rng = fastrand::Rng::with_seed(options.seed);
    let pool: Vec<ApiId> = sets.iter().flat_map(|(_, qs)| qs).flat_map(|q| resolved(catalog, &q.api_list)).collect();
    let apis = catalog.apis().len() as u32;
    let random_pool: Vec<ApiId> = (0..RANDOM_POOL.min(apis as usize)).map(|_| ApiId(rng.u32(..apis))).collect();
    let (mut all, mut reports) = (Acc::default(), Vec::new());
    for (name, queries) in sets {
        let mut acc = Acc::default();
        for q in queries {
            let relevant_apis: HashSet<ApiId> = resolved(catalog, &q.relevant).into_iter().collect();
            if relevant_apis.is_empty() {
                continue;
            }
            let mut own = resolved(catalog, &q.api_list);
            own.extend(relevant_apis.iter().copied());
            let list = tool_list(&own, &pool, &random_pool, &options, &mut rng);
            let definitions: Vec<Value> = list.iter().map(|&id| catalog.function_definition(catalog.api(id))).collect();
            let tools: Vec<ClientTool> = definitions
                .iter()
                .map(|d| client_tool(d, false).expect("catalog definitions are valid tools"))
                .collect();
            let relevant: HashSet<usize> =
                list.iter().enumerate().filter(|(_, id)| relevant_apis.contains(id)).map(|(i, _)| i).collect();
            let measured = measure(&definitions, &tools, &q.query, &options, ranker, embedder, &mut rng)?;
            acc.add(&measured, &relevant, list.len());
            all.add(&measured, &relevant, list.len());
        }
        reports.push(acc.report(name, embedder.is_some()));
    }
    Ok(RouteReport { options, sets: reports, overall: all.report("overall", embedder.is_some()) })
}

/// One request's tools kept by each method: route mode (embedded, first
/// seen), BM25 top-k, random k.
fn measure(
    definitions: &[Value],
    tools: &[ClientTool],
    query: &str,
    options: &RouteOptions,
    ranker: &ToolListRanker,
    embedder: Option<&Embedder>,
    rng: &mut fastrand::Rng,
) -> Result<Measured, crate::retrieval::EmbedError> {
    let mut measured = narrow(ranker, tools, query, options, embedder)?;
    let mut random: Vec<usize> = (0..tools.len()).collect();
    rng.shuffle(&mut random);
    random.truncate(options.k);
    measured.kept[2] = bm25_top_k(definitions, query, options.k);
    measured.kept[3] = random;
    Ok(measured)
}

/// One request of a route-case file (a JSON line): the user's message, the
/// tools it comes with (OpenAI definitions), the names of those it needs.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub query: String,
    pub tools: Vec<Value>,
    pub relevant: Vec<String>,
}

/// The cases of a route-case file, each checked: its tools valid OpenAI
/// tools with distinct names, its relevant names among them.
pub fn load_cases(path: &std::path::Path) -> Result<Vec<Case>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut cases = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = format!("{}:{}", path.display(), n + 1);
        let case: Case = serde_json::from_str(line)
            .map_err(|e| format!("{at}: {e} (a case is {{\"query\": …, \"tools\": […], \"relevant\": [names]}})"))?;
        let mut names = HashSet::new();
        for (i, tool) in case.tools.iter().enumerate() {
            let tool = client_tool(tool, false).map_err(|e| format!("{at}: tools[{i}]: {}", e.message))?;
            if !names.insert(tool.name) {
                return Err(format!("{at}: tools[{i}] repeats a tool name"));
            }
        }
        if case.query.trim().is_empty() || case.relevant.is_empty() {
            return Err(format!("{at}: a case needs a query and at least one relevant tool"));
        }
        if let Some(missing) = case.relevant.iter().find(|r| !names.contains(*r)) {
            return Err(format!("{at}: relevant tool {missing:?} is not among the case's tools"));
        }
        cases.push(case);
    }
    Ok(cases)
}

/// [`evaluate`] on route cases: each request carries its own tools, then
/// distractors drawn from the other cases' tools (of every set; one per
/// name) up to `options.tools`, shuffled.
pub fn evaluate_cases(
    sets: &[(String, Vec<Case>)],
    options: RouteOptions,
    ranker: &ToolListRanker,
    embedder: Option<&Embedder>,
) -> Result<RouteReport, crate::retrieval::EmbedError> {
    let mut rng = fastrand::Rng::with_seed(options.seed);
    let name = |d: &Value| d["function"]["name"].as_str().unwrap_or("").to_string();
    let mut pool: Vec<&Value> = Vec::new();
    let mut pooled = HashSet::new();
    for tool in sets.iter().flat_map(|(_, cases)| cases).flat_map(|c| &c.tools) {
        if pooled.insert(name(tool)) {
            pool.push(tool);
        }
    }
    let (mut all, mut reports) = (Acc::default(), Vec::new());
    for (set, cases) in sets {
        let mut acc = Acc::default();
        for case in cases {
            let mut seen: HashSet<String> = case.tools.iter().map(name).collect();
            let mut definitions: Vec<Value> = case.tools.clone();
            let fill = options.tools.min(pooled.len()).max(definitions.len());
            while definitions.len() < fill {
                let tool = pool[rng.usize(..pool.len())];
                if seen.insert(name(tool)) {
                    definitions.push(tool.clone());
                }
            }
            rng.shuffle(&mut definitions);
            let tools: Vec<ClientTool> =
                definitions.iter().map(|d| client_tool(d, false).expect("checked when loaded")).collect();
            let relevant: HashSet<usize> =
                tools.iter().enumerate().filter(|(_, t)| case.relevant.contains(&t.name)).map(|(i, _)| i).collect();
            let measured = measure(&definitions, &tools, &case.query, &options, ranker, embedder, &mut rng)?;
            acc.add(&measured, &relevant, tools.len());
            all.add(&measured, &relevant, tools.len());
        }
        reports.push(acc.report(set, embedder.is_some()));
    }
    Ok(RouteReport { options, sets: reports, overall: all.report("overall", embedder.is_some()) })
}

/// Narrows one request the way the server does ([`Narrowing::narrow`]'s
/// steps, run synchronously): a new list (lexical), then, embedded, a new
/// message and the same request again.
fn narrow(
    ranker: &ToolListRanker,
    tools: &[ClientTool],
    query: &str,
    options: &RouteOptions,
    embedder: Option<&Embedder>,
) -> Result<Measured, crate::retrieval::EmbedError> {
    let asked = Asked::of(&[crate::llm::Message::new("user", query)]);
    let conversation = asked.conversation(None);
    let keep = |index: &tool_list::ListIndex, vector: Option<&[f32]>| {
        tool_list::keep(index, &conversation, vector, options.k, &options.weights, &|_, _| 0.0)
    };
    // A new list: index built, ranked lexically (the server starts embedding it in the background).
    let started = Instant::now();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let texts: Vec<&str> = tools.iter().map(|t| t.text.as_str()).collect();
    let index = ranker.index(&names, &texts);
    let first_seen = keep(&index, None);
    let new_list = crate::units::ms(started.elapsed());
    let Some(embedder) = embedder else {
        return Ok(Measured { kept: [Vec::new(), first_seen, Vec::new(), Vec::new()], ms: [new_list, 0.0, 0.0] });
    };
    ranker.embed_now(&index, embedder)?;
    let timed = || -> Result<(Vec<usize>, f64), crate::retrieval::EmbedError> {
        let started = Instant::now();
        let index = ranker.index(&names, &texts);
        let vector = ranker.query_vector(embedder, &asked.latest)?;
        Ok((keep(&index, Some(&vector)), crate::units::ms(started.elapsed())))
    };
    let (embedded, new_message) = timed()?;
    let (_, seen) = timed()?;
    Ok(Measured { kept: [embedded, first_seen, Vec::new(), Vec::new()], ms: [new_list, new_message, seen] })
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
    let mean = report.overall.mean_tools;
    let carried =
        if (mean - o.tools as f64).abs() > 0.05 { format!(" (carried {mean:.1} on average)") } else { String::new() };
    let mut out = format!(
        "{} tools per request{carried}, {} kept (seed {}); recall of the relevant APIs / share of queries with all kept\n\n",
        o.tools, o.k, o.seed
    );
    out.push_str("| set | queries | route mode | route, first-seen list | BM25 top-k | random k |\n");
    out.push_str("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    let mut rows: BTreeMap<usize, &SetReport> = report.sets.iter().enumerate().collect();
    rows.insert(usize::MAX, &report.overall);
    let s = |x: &Scores| format!("{:.3} / {:.3}", x.recall, x.all_kept);
    for set in rows.values() {
        let route = set.route.as_ref().map_or_else(|| "(no model)".to_string(), s);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            set.name,
            set.queries,
            route,
            s(&set.route_first_seen),
            s(&set.bm25),
            s(&set.random)
        );
    }
    let l = |x: &Latency| format!("{:.2} / {:.2} ms", x.p50, x.p99);
    let all = &report.overall;
    let _ = writeln!(
        out,
        "\nNarrowing latency p50 / p99: new list {}; known list, new message {}; same request again {}",
        l(&all.new_list_ms),
        l(&all.new_message_ms),
        l(&all.seen_ms)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> Value {
        serde_json::json!({"type": "function", "function": {"name": name, "description": "d", "parameters": {"type": "object", "properties": {}}}})
    }

    /// A bad case is refused with its file and line and what is wrong.
    #[test]
    fn route_cases_are_checked_when_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cases.jsonl");
        let case = |query: &str, tools: Vec<Value>, relevant: &[&str]| {
            serde_json::json!({"query": query, "tools": tools, "relevant": relevant}).to_string()
        };
        let good = case("weather in Paris", vec![tool("weather"), tool("rates")], &["weather"]);
        let load = |lines: &[String]| {
            std::fs::write(&path, lines.join("\n")).unwrap();
            load_cases(&path)
        };
        let cases = load(&[good.clone(), String::new(), good.clone()]).unwrap();
        assert_eq!(cases.len(), 2, "blank lines skipped");
        for (bad, says) in [
            (case("q", vec![tool("weather")], &["rates"]), "relevant tool \"rates\" is not among"),
            (case("q", vec![tool("weather"), tool("weather")], &["weather"]), "repeats a tool name"),
            (case("q", vec![tool("get.weather")], &["get.weather"]), "tools[0]: tool name"),
            (case(" ", vec![tool("weather")], &["weather"]), "needs a query"),
            (case("q", vec![tool("weather")], &[]), "at least one relevant tool"),
            ("{\"query\": \"q\"}".to_string(), "missing field"),
            ("not json".to_string(), "a case is"),
        ] {
            let error = load(&[good.clone(), bad]).unwrap_err();
            assert!(error.contains("cases.jsonl:2") && error.contains(says), "{error}");
        }
    }
}
