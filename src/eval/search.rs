//! Tool search, measured (`toolrouter eval search`): multi-turn sessions
//! over real MCP servers' tools replayed as agent loops. Every step (the
//! task, then each needed tool called in turn) carries the same full list:
//! every tool of every server in `tools.json` (and, up to `tools`, other
//! collections' tools as distractors), shuffled with a fixed seed.
//!
//! * Route mode keeps `k` ([`crate::chat::narrowing::Narrowing::narrow`]); a
//!   model lacking a tool it needs searches once with the words of the
//!   step (its latest user message) over the tools left out, and `results`
//!   are loaded: by toolrouter's search ([`crate::chat::search`]: route
//!   mode's ranking with the conversation), by plain BM25 over names and
//!   descriptions, and by a regular expression of the step's words (`a|b|…`
//!   over names and descriptions, the first matches in list order, as a
//!   regex tool search returns them), in the same run. Reported: the share
//!   of needed tools reachable (kept, or found), and of steps whose needed
//!   tools all are.
//! * Deferred loading: every tool deferred, nothing loaded but what earlier
//!   steps found or called; a step lacking a needed tool searches once
//!   with toolrouter's search. Reported: the share reachable, and whether
//!   each step's tools block starts with the previous step's last one (the
//!   block only grows, so an upstream prompt cache holds).
//!
//! The latency is toolrouter's part of one search round (the model's
//! second request is the model's).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};

use super::retrieval::Latency;
use super::route::Case;
use crate::chat::loaded::Loaded;
use crate::chat::narrowing::Narrowing;
use crate::chat::search::{self, SEARCH_TOOL, Wanted};
use crate::chat::tools::{ClientTool, ToolList, client_tool};
use crate::config::OpenAiConfig;
use crate::llm::wire::{Message, ToolCall};
use crate::retrieval::bm25::Bm25;

/// How the sessions are replayed.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct SearchOptions {
    /// Tools route mode keeps.
    pub(crate) k: usize,
    /// Tools one search loads.
    pub(crate) results: usize,
    /// Tools every request carries at most (the sessions' servers' first,
    /// then distractors).
    pub(crate) tools: usize,
    pub(crate) seed: u64,
}

/// What was measured.
#[derive(Debug, Serialize)]
pub(crate) struct SearchReport {
    pub(crate) options: SearchOptions,
    pub(crate) tools: usize,
    pub(crate) steps: usize,
    pub(crate) needed: usize,
    /// Per method: (name, share of needed tools reachable, share of steps all reachable).
    pub(crate) methods: Vec<(String, f64, f64)>,
    /// Steps where route mode lacked a needed tool (and searched).
    pub(crate) searched: usize,
    /// toolrouter's part of one search round (the query's embedding cached).
    pub(crate) search_ms: Latency,
    /// Embedding a query not seen before (what a model's own query adds).
    pub(crate) query_embedding_ms: Latency,
    /// Deferred loading: steps whose tools block began with the previous
    /// step's last block, of the steps after a session's first.
    pub(crate) blocks_grown: (usize, usize),
}

const METHODS: [&str; 5] =
    ["route mode alone", "+ toolrouter's search", "+ BM25 search", "+ regex search", "deferred, toolrouter's search"];

/// Replays `cases` (sessions' steps, in order), each carrying their tools
/// and `others` (every server's, in practice).
pub(crate) async fn evaluate(
    cases: &[Case],
    others: &[Value],
    options: SearchOptions,
    narrowing: &Narrowing,
) -> SearchReport {
    let mut definitions: Vec<Value> = Vec::new();
    let mut names = HashSet::new();
    for tool in cases.iter().flat_map(|c| &c.tools).chain(others) {
        if definitions.len() >= options.tools {
            break;
        }
        if names.insert(tool["function"]["name"].as_str().unwrap_or_default().to_string()) {
            definitions.push(tool.clone());
        }
    }
    fastrand::Rng::with_seed(options.seed).shuffle(&mut definitions);
    let list = |deferred: bool| -> Arc<ToolList> {
        let tools = definitions.iter().map(|d| {
            let mut d = d.clone();
            d["defer_loading"] = json!(deferred);
            Arc::new(client_tool(&d, false).expect("checked when loaded"))
        });
        Arc::new(ToolList::from(tools.collect::<Vec<_>>()))
    };
    let (tools, deferred_tools) = (list(false), list(true));
    let config =
        OpenAiConfig { tool_search_results: options.results, tool_search_rounds: 1, ..OpenAiConfig::default() };
    let loaded: Arc<Loaded> = Arc::default();
    let mut tally = Tally::default();
    let mut previous: Option<(String, Vec<usize>)> = None;
    for case in cases {
        let messages = case.messages();
        let needed: Vec<usize> = case.relevant.iter().filter_map(|r| tools.iter().position(|t| &t.name == r)).collect();
        let (kept, _) = narrowing.narrow(&tools, &messages, options.k, None).await;
        let kept = kept.tools;
        let mut reachable = [kept.clone(), kept.clone(), kept.clone(), kept.clone(), Vec::new()];
        if needed.iter().any(|n| !kept.contains(n)) {
            tally.searched += 1;
            let left: Vec<usize> = (0..tools.len()).filter(|i| !kept.contains(i)).collect();
            let started = Instant::now();
            let mut ours =
                search::narrowed(&tools, &kept, Wanted::On(search::Flavor::Words), &config).expect("left out");
            let arguments = json!({"query": case.query}).to_string();
            let searched = ours.search("eval", &arguments, &messages, narrowing).await;
            tally.search_ms.push(crate::units::ms(started.elapsed()));
            // The query here is the step's words, which narrowing embedded
            // already; a model's own query is new text: its embedding, apart.
            if let Some(embedder) = &narrowing.embedder {
                let started = Instant::now();
                let fresh = format!("{} ({})", case.query, tally.searched);
                let _ = narrowing.ranker.query_vectors(embedder, &fresh);
                tally.embed_ms.push(crate::units::ms(started.elapsed()));
            }
            reachable[1].extend(searched.found.iter().filter_map(|n| tools.iter().position(|t| &t.name == n)));
            reachable[2].extend(bm25(&tools, &left, &case.query, options.results));
            reachable[3].extend(regex(&tools, &left, &case.query, options.results));
        }
        // Deferred loading, with what this conversation loaded before.
        let opening = messages.iter().find(|m| m.is("user")).map(Message::text).unwrap_or_default();
        let (keep, mut search) = search::deferred(&deferred_tools, &messages, Wanted::Default, &config, &loaded)
            .expect("every tool is deferred");
        if let Some((_, block)) = previous.as_ref().filter(|(o, _)| *o == opening) {
            tally.blocks.1 += 1;
            tally.blocks.0 += usize::from(keep.starts_with(block));
        }
        let mut block = keep.clone();
        if needed.iter().any(|n| !keep.contains(n)) {
            let arguments = json!({"query": case.query}).to_string();
            let asks = Message::calling(vec![ToolCall::function("search", SEARCH_TOOL, arguments)]);
            search.answer(&asks, &messages, narrowing).await;
            block.extend(&search.found);
        }
        reachable[4] = block.clone();
        previous = Some((opening, block));
        tally.add(&needed, &reachable);
    }
    tally.report(options, tools.len())
}

#[derive(Default)]
struct Tally {
    steps: usize,
    needed: usize,
    /// Per method: needed tools reachable, steps with all reachable.
    reached: [(usize, usize); 5],
    searched: usize,
    search_ms: Vec<f64>,
    embed_ms: Vec<f64>,
    blocks: (usize, usize),
}

impl Tally {
    fn add(&mut self, needed: &[usize], reachable: &[Vec<usize>; 5]) {
        self.steps += 1;
        self.needed += needed.len();
        for (reached, offered) in self.reached.iter_mut().zip(reachable) {
            let n = needed.iter().filter(|i| offered.contains(i)).count();
            reached.0 += n;
            reached.1 += usize::from(n == needed.len());
        }
    }

    fn report(mut self, options: SearchOptions, tools: usize) -> SearchReport {
        let share = |n: usize, of: usize| if of == 0 { 0.0 } else { n as f64 / of as f64 };
        let methods = METHODS
            .iter()
            .zip(self.reached)
            .map(|(name, (n, all))| (name.to_string(), share(n, self.needed), share(all, self.steps)))
            .collect();
        SearchReport {
            options,
            tools,
            steps: self.steps,
            needed: self.needed,
            methods,
            searched: self.searched,
            search_ms: Latency::of(&mut self.search_ms),
            query_embedding_ms: Latency::of(&mut self.embed_ms),
            blocks_grown: self.blocks,
        }
    }
}

/// Plain BM25 over the names and descriptions of `left`, top `k`.
fn bm25(tools: &ToolList, left: &[usize], query: &str, k: usize) -> Vec<usize> {
    let texts: Vec<String> = left.iter().map(|&i| name_and_description(&tools[i])).collect();
    Bm25::build(&texts).search(query, k, None).into_iter().map(|(d, _)| left[d as usize]).collect()
}

/// The first `k` of `left` (in list order) whose name or description a
/// regular expression of the query's words (four letters or more) matches.
fn regex(tools: &ToolList, left: &[usize], query: &str, k: usize) -> Vec<usize> {
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 4)
        .map(|w| regex::escape(&w.to_lowercase()))
        .collect();
    if words.is_empty() {
        return Vec::new();
    }
    let Ok(pattern) = regex::RegexBuilder::new(&words.join("|")).case_insensitive(true).build() else {
        return Vec::new();
    };
    left.iter().copied().filter(|&i| pattern.is_match(&name_and_description(&tools[i]))).take(k).collect()
}

fn name_and_description(tool: &ClientTool) -> String {
    format!("{} {}", tool.name, tool.description())
}

/// The report as a markdown table.
pub(crate) fn markdown(r: &SearchReport) -> String {
    let mut out = format!(
        "{} steps, {} needed tools, {} tools in every request; route mode keeps {}, a search loads {}\n\n\
         | method | needed tools reachable | steps with all reachable |\n| --- | ---: | ---: |\n",
        r.steps, r.needed, r.tools, r.options.k, r.options.results
    );
    for (name, reached, all) in &r.methods {
        out.push_str(&format!("| {name} | {reached:.3} | {all:.3} |\n"));
    }
    out.push_str(&format!(
        "\nsearches: {} (route mode lacking a needed tool); toolrouter's part of a search round: p50 {:.2} ms, \
         p99 {:.2} ms, and a new query's embedding p50 {:.2} ms, p99 {:.2} ms\n\
         deferred loading: the tools block began with the previous step's in {} of {} later steps\n",
        r.searched,
        r.search_ms.p50,
        r.search_ms.p99,
        r.query_embedding_ms.p50,
        r.query_embedding_ms.p99,
        r.blocks_grown.0,
        r.blocks_grown.1
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Route mode keeping one tool misses the step's second need; one
    /// search with the step's words reaches it; the deferred tools block
    /// only grows along the session.
    #[tokio::test]
    async fn a_search_reaches_what_narrowing_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let tool = |name: &str, description: &str| json!({"name": name, "description": description, "inputSchema": {"type": "object", "properties": {}}});
        let tools = json!({"git": [tool("git_status", "Show the working tree status"),
                tool("git_diff", "Show the changes in the working tree"), tool("git_commit", "Record changes")],
            "web": [tool("fetch", "Fetch a web page")]});
        std::fs::write(dir.path().join("tools.json"), tools.to_string()).unwrap();
        let path = dir.path().join("sessions.jsonl");
        let session = json!({"id": "a", "servers": ["git", "web"], "turns": [
            {"user": "show the working tree status and changes", "calls": ["git_status", "git_diff"]},
            {"user": "record the changes", "calls": ["git_commit"]}]});
        std::fs::write(&path, session.to_string()).unwrap();
        let cases = crate::eval::route::load_sessions(&path, false).unwrap();
        let others = crate::eval::route::all_tools(&path, false).unwrap();
        assert_eq!(others.len(), 4);
        let options = SearchOptions { k: 1, results: 1, tools: usize::MAX, seed: 1 };
        let report = evaluate(&cases, &others, options, &Narrowing::lexical(Arc::default())).await;
        assert_eq!((report.steps, report.needed, report.tools), (2, 3, 4));
        let reached = |method: &str| report.methods.iter().find(|m| m.0 == method).unwrap().1;
        assert!(reached("+ toolrouter's search") > reached("route mode alone"), "{report:?}");
        assert_eq!(report.blocks_grown, (1, 1), "{report:?}");
        assert!(markdown(&report).contains("| + regex search |"));
    }
}
