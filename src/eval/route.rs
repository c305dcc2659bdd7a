//! Route mode's narrowing, measured (`toolrouter eval route`): for each
//! query, the client sends the APIs of its `api_list` plus distractors
//! (APIs of other queries' lists, then catalog APIs from a fixed random
//! pool) up to `tools` tools, shuffled with a fixed seed, as OpenAI tool
//! definitions. The server's own narrowing ([`crate::retrieval::tool_list`],
//! the steps of [`crate::chat::narrowing::Narrowing::narrow`]) keeps `k` of them,
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
//! needs; distractors come from the other requests' tools. Sessions
//! (`--sessions`, [`load_sessions`]) are route cases with a conversation:
//! the steps of multi-turn sessions over MCP servers' tools.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use super::queries::QueryRecord;
use crate::catalog::{ApiId, Catalog};
use crate::chat::narrowing::Asked;
use crate::chat::tools::{ClientTool, client_tool};
use crate::retrieval::Embedder;
use crate::retrieval::bm25::Bm25;
use crate::retrieval::tool_list::{self, Dense, ListWeights, ToolListRanker, ToolSet};
use crate::retrieval::tool_memory::Recalled;

/// Catalog APIs the random distractors are drawn from (a fixed pool keeps
/// the texts to embed within a few thousand).
const RANDOM_POOL: usize = 4_000;

/// How the tool lists are made.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct RouteOptions {
    /// Tools a request carries.
    pub(crate) tools: usize,
    /// Tools kept.
    pub(crate) k: usize,
    pub(crate) seed: u64,
    pub(crate) weights: ListWeights,
    /// Tools a list's first request gets embedded inline (what
    /// `openai.embed_budget_ms` buys: docs/benchmarks.md, "Tools, not lists").
    pub(crate) first_embedded: usize,
    /// Route mode learns from use: after each request, the needed tools it
    /// kept are remembered as called (a model calls the tools it needs
    /// among those offered), and route mode with that memory is measured
    /// beside it without; requests needing a tool an earlier one needed
    /// are also reported apart.
    pub(crate) learning: bool,
}

mod report;
mod sessions;

use report::Tally;
pub(crate) use report::{RouteReport, markdown};
pub(crate) use sessions::{all_tools, load_sessions, load_tasks};

/// The methods compared, in [`Measured::kept`]'s order.
const ROUTE: usize = 0;
const FIRST_REQUEST: usize = 1;
const WORDS_ONLY: usize = 2;
const EMBEDDING_ALONE: usize = 3;
const BM25: usize = 4;
const RANDOM: usize = 5;
const PERMUTED: usize = 6;
const LEARNING: usize = 7;
const METHODS: usize = 8;

/// One query's outcome: the kept tools per method (request indexes,
/// ascending), the latencies.
#[derive(Default)]
struct Measured {
    kept: [Vec<usize>; METHODS],
    ms: [f64; 4],
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

/// Runs the evaluation; with `embedder`, also route mode with tool
/// vectors and the embedding alone. `ranker` and `alone` keep tool
/// vectors between runs (a sweep embeds once).
pub(crate) fn evaluate(
    catalog: &Catalog,
    sets: &[(String, Vec<QueryRecord>)],
    options: RouteOptions,
    ranker: &ToolListRanker,
    embedder: Option<&Embedder>,
    alone: &AloneVectors,
) -> Result<RouteReport, crate::retrieval::EmbedError> {
    let mut rng = fastrand::Rng::with_seed(options.seed);
    let pool: Vec<ApiId> = sets.iter().flat_map(|(_, qs)| qs).flat_map(|q| resolved(catalog, &q.api_list)).collect();
    let apis = catalog.apis().len() as u32;
    let random_pool: Vec<ApiId> = (0..RANDOM_POOL.min(apis as usize)).map(|_| ApiId(rng.u32(..apis))).collect();
    ranker.forget();
    let mut tally = Tally::new(options, embedder.is_some());
    for (name, queries) in sets {
        tally.start(name);
        for q in queries {
            let relevant_apis: HashSet<ApiId> = resolved(catalog, &q.relevant).into_iter().collect();
            if relevant_apis.is_empty() {
                continue;
            }
            let mut own = resolved(catalog, &q.api_list);
            own.extend(relevant_apis.iter().copied());
            let list = tool_list(&own, &pool, &random_pool, &options, &mut rng);
            let definitions: Vec<Value> = list.iter().map(|&id| catalog.function_definition(catalog.api(id))).collect();
            let tools: Vec<Arc<ClientTool>> = definitions
                .iter()
                .map(|d| Arc::new(client_tool(d, false).expect("catalog definitions are valid tools")))
                .collect();
            let relevant: HashSet<usize> =
                list.iter().enumerate().filter(|(_, id)| relevant_apis.contains(id)).map(|(i, _)| i).collect();
            let messages = [crate::llm::Message::new("user", q.query.clone())];
            let measured = measure(&definitions, &tools, &messages, &options, ranker, embedder, alone, &mut rng)?;
            tally.add(&measured, &tools, &relevant);
            learn(ranker, embedder, &tools, &messages, &relevant, &measured, &options)?;
        }
    }
    Ok(tally.report())
}

/// Tool vectors of the plain-embedding baseline, by text (name and
/// description), kept between runs (a sweep embeds once).
pub(crate) type AloneVectors = std::sync::Mutex<HashMap<String, Vec<f32>>>;

/// One request's tools kept by each method: route mode (every tool known,
/// a first request, words only, the list permuted), the embedding alone,
/// BM25 top-k, random k.
#[allow(clippy::too_many_arguments)]
fn measure(
    definitions: &[Value],
    tools: &[Arc<ClientTool>],
    messages: &[crate::llm::Message],
    options: &RouteOptions,
    ranker: &ToolListRanker,
    embedder: Option<&Embedder>,
    alone: &AloneVectors,
    rng: &mut fastrand::Rng,
) -> Result<Measured, crate::retrieval::EmbedError> {
    let mut measured = narrow(ranker, tools, messages, options, embedder, rng)?;
    let query = &Asked::of(messages).latest;
    let mut random: Vec<usize> = (0..tools.len()).collect();
    rng.shuffle(&mut random);
    random.truncate(options.k);
    random.sort_unstable();
    measured.kept[BM25] = sorted(bm25_top_k(definitions, query, options.k));
    measured.kept[RANDOM] = random;
    if let Some(embedder) = embedder {
        measured.kept[EMBEDDING_ALONE] = sorted(embedding_top_k(
            definitions,
            &ranker.query_vectors(embedder, query)?.latest,
            options.k,
            embedder,
            alone,
        )?);
    }
    Ok(measured)
}

fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v
}

/// One request of a route-case file (a JSON line): the user's message, the
/// tools it comes with (OpenAI definitions), the names of those it needs.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Case {
    pub(crate) query: String,
    pub(crate) tools: Vec<Value>,
    pub(crate) relevant: Vec<String>,
    /// The conversation, when it is more than `query` (a session's step).
    #[serde(skip)]
    pub(crate) conversation: Vec<crate::llm::Message>,
}

impl Case {
    /// The messages the request carries.
    pub(crate) fn messages(&self) -> Vec<crate::llm::Message> {
        match self.conversation.is_empty() {
            true => vec![crate::llm::Message::new("user", self.query.clone())],
            false => self.conversation.clone(),
        }
    }
}

/// The cases of a route-case file, each checked: its tools valid OpenAI
/// tools with distinct names, its relevant names among them.
pub(crate) fn load_cases(path: &std::path::Path) -> Result<Vec<Case>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut cases = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = format!("{}:{}", path.display(), n + 1);
        let case: Case = serde_json::from_str(line)
            .map_err(|e| format!("{at}: {e} (a case is {{\"query\": …, \"tools\": […], \"relevant\": [names]}})"))?;
        let mut names = HashSet::new();
        for (i, tool) in case.tools.iter().enumerate() {
            let tool = client_tool(tool, false).map_err(|e| format!("{at}: tools[{i}]: {e}"))?;
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
/// distractors drawn from the other cases' tools (of every set and of
/// `distractors`, cases whose tools only serve as distractors; one per
/// name) up to `options.tools`, shuffled.
pub(crate) fn evaluate_cases(
    sets: &[(String, Vec<Case>)],
    distractors: &[Case],
    options: RouteOptions,
    ranker: &ToolListRanker,
    embedder: Option<&Embedder>,
    alone: &AloneVectors,
) -> Result<RouteReport, crate::retrieval::EmbedError> {
    let mut rng = fastrand::Rng::with_seed(options.seed);
    let name = |d: &Value| d["function"]["name"].as_str().unwrap_or("").to_string();
    let mut pool: Vec<&Value> = Vec::new();
    let mut pooled = HashSet::new();
    let cases = sets.iter().flat_map(|(_, cases)| cases).chain(distractors);
    for tool in cases.flat_map(|c| &c.tools) {
        if pooled.insert(name(tool)) {
            pool.push(tool);
        }
    }
    ranker.forget();
    let mut tally = Tally::new(options, embedder.is_some());
    for (set, cases) in sets {
        tally.start(set);
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
            let tools: Vec<Arc<ClientTool>> =
                definitions.iter().map(|d| Arc::new(client_tool(d, false).expect("checked when loaded"))).collect();
            let relevant: HashSet<usize> =
                tools.iter().enumerate().filter(|(_, t)| case.relevant.contains(&t.name)).map(|(i, _)| i).collect();
            let messages = case.messages();
            let measured = measure(&definitions, &tools, &messages, &options, ranker, embedder, alone, &mut rng)?;
            tally.add(&measured, &tools, &relevant);
            learn(ranker, embedder, &tools, &messages, &relevant, &measured, &options)?;
        }
    }
    Ok(tally.report())
}

/// With `--learning`, remembers that the request of `messages` called the
/// `relevant` tools route mode (learning) kept: a model can only call the
/// tools it is offered, and calls those it needs.
fn learn(
    ranker: &ToolListRanker,
    embedder: Option<&Embedder>,
    tools: &[Arc<ClientTool>],
    messages: &[crate::llm::Message],
    relevant: &HashSet<usize>,
    measured: &Measured,
    options: &RouteOptions,
) -> Result<(), crate::retrieval::EmbedError> {
    let Some(embedder) = embedder.filter(|_| options.learning) else { return Ok(()) };
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let texts: Vec<&str> = tools.iter().map(|t| t.text.as_str()).collect();
    let needs: Vec<&[String]> = tools.iter().map(|t| t.needs.as_slice()).collect();
    let set = ranker.set(&names, &texts, &needs);
    let asked = Asked::of(messages);
    let query = ranker.query_vectors(embedder, &asked.latest)?;
    let called: Vec<usize> = measured.kept[LEARNING].iter().copied().filter(|i| relevant.contains(i)).collect();
    let after = asked.called.last().map(String::as_str);
    ranker.learn(&set, &ranker.vectors(&set, embedder), &query, after, &called);
    Ok(())
}

/// Narrows one request the way the server does ([`Narrowing::narrow`]'s
/// steps, run synchronously): its tools new (by words), a known list with
/// a new message, the same request again, the list's first request (only
/// [`RouteOptions::first_embedded`] tools embedded), and the known tools
/// in another order.
fn narrow(
    ranker: &ToolListRanker,
    tools: &[Arc<ClientTool>],
    messages: &[crate::llm::Message],
    options: &RouteOptions,
    embedder: Option<&Embedder>,
    rng: &mut fastrand::Rng,
) -> Result<Measured, crate::retrieval::EmbedError> {
    let asked = Asked::of(messages);
    let after = asked.called.last().map(String::as_str);
    let conversation = asked.conversation(None);
    let keep = |set: &ToolSet, dense: Option<Dense>| {
        tool_list::keep(set, &conversation, dense, options.k, &options.weights, &|_, _| 0.0).tools
    };
    let mut measured = Measured::default();
    let started = Instant::now();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let texts: Vec<&str> = tools.iter().map(|t| t.text.as_str()).collect();
    let needs: Vec<&[String]> = tools.iter().map(|t| t.needs.as_slice()).collect();
    let set = ranker.set(&names, &texts, &needs);
    measured.kept[WORDS_ONLY] = keep(&set, None);
    measured.ms[0] = crate::units::ms(started.elapsed());
    let Some(embedder) = embedder else { return Ok(measured) };
    ranker.embed_missing(&set, embedder, Duration::MAX)?;
    // Timed as the server narrows (the memory read too, with `--learning`);
    // kept without the memory, and with it.
    type Timed = (Vec<usize>, Vec<usize>, f64);
    let timed = |names: &[&str], texts: &[&str], needs: &[&[String]]| -> Result<Timed, crate::retrieval::EmbedError> {
        let started = Instant::now();
        let set = ranker.set(names, texts, needs);
        let vectors = ranker.vectors(&set, embedder);
        let query = ranker.query_vectors(embedder, &asked.latest)?;
        let remembered = match options.learning {
            true => ranker.remembered(&set, &vectors, &query, after),
            false => Recalled::default(),
        };
        let learned = keep(&set, Some(Dense { query: &query, tools: &vectors, remembered: &remembered }));
        let ms = crate::units::ms(started.elapsed());
        let without = match options.learning {
            true => keep(&set, Some(Dense { query: &query, tools: &vectors, remembered: &Recalled::default() })),
            false => learned.clone(),
        };
        Ok((without, learned, ms))
    };
    (measured.kept[ROUTE], measured.kept[LEARNING], measured.ms[1]) = timed(&names, &texts, &needs)?;
    measured.ms[2] = timed(&names, &texts, &needs)?.2;
    let query = ranker.query_vectors(embedder, &asked.latest)?;
    let first = ranker.vectors(&set, embedder).first_request(&set, options.first_embedded);
    measured.kept[FIRST_REQUEST] =
        keep(&set, Some(Dense { query: &query, tools: &first, remembered: &Recalled::default() }));
    // The same tools in another order: kept by name, mapped back.
    let mut order: Vec<usize> = (0..tools.len()).collect();
    rng.shuffle(&mut order);
    let names: Vec<&str> = order.iter().map(|&i| names[i]).collect();
    let texts: Vec<&str> = order.iter().map(|&i| texts[i]).collect();
    let needs: Vec<&[String]> = order.iter().map(|&i| needs[i]).collect();
    let (permuted, _, ms) = timed(&names, &texts, &needs)?;
    measured.kept[PERMUTED] = sorted(permuted.into_iter().map(|j| order[j]).collect());
    measured.ms[3] = ms;
    Ok(measured)
}

/// The baseline: BM25 over each tool's name and description, top `k`
/// (fewer when fewer tools share a word with the request).
fn bm25_top_k(definitions: &[Value], query: &str, k: usize) -> Vec<usize> {
    let texts: Vec<String> = definitions.iter().map(name_and_description).collect();
    Bm25::build(&texts).search(query, k, None).into_iter().map(|(i, _)| i as usize).collect()
}

fn name_and_description(d: &Value) -> String {
    format!("{} {}", d["function"]["name"].as_str().unwrap_or(""), d["function"]["description"].as_str().unwrap_or(""))
}

/// The baseline: the embedding model used plainly, cosine of the request
/// (`query`, its vector) and each tool's name and description, top `k`.
fn embedding_top_k(
    definitions: &[Value],
    query: &[f32],
    k: usize,
    embedder: &Embedder,
    alone: &AloneVectors,
) -> Result<Vec<usize>, crate::retrieval::EmbedError> {
    let texts: Vec<String> = definitions.iter().map(name_and_description).collect();
    let mut alone = alone.lock().unwrap_or_else(|e| e.into_inner());
    let mut missing: Vec<String> = texts.iter().filter(|t| !alone.contains_key(*t)).cloned().collect();
    missing.sort();
    missing.dedup();
    for batch in missing.chunks(32) {
        for (text, v) in batch.iter().zip(embedder.embed_documents(batch)?) {
            alone.insert(text.clone(), v);
        }
    }
    let mut hits: Vec<(u32, f32)> =
        texts.iter().enumerate().map(|(i, t)| (i as u32, crate::retrieval::dense::dot(query, &alone[t]))).collect();
    crate::retrieval::bm25::top_k(&mut hits, k);
    Ok(hits.into_iter().map(|(i, _)| i as usize).collect())
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
