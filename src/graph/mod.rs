//! The tool graph (docs/architecture.md §4): which API tends to follow which, and how
//! available each API is, learned from tool-call trajectories and updated
//! after every run.
//!
//! Nodes are APIs, keyed by function name (stable across catalog versions),
//! plus one `Finish` node; an edge `i → j` carries how often `j` followed
//! `i` in cleaned successful trajectories ([`build()`]). With
//! `#(i → j)` those counts:
//!
//! ```text
//! w⁽⁰⁾(i,j) = #(i → j) / Σ_k #(i → k)                 static transition weight
//! α⁽⁰⁾_i    = #(calls of i that succeeded) / #(calls of i)   over all recorded calls;
//!             the tool's RapidAPI success rate / 100 (else 0.5) if never called
//! ```
//!
//! Online ([`ToolGraph::apply`]), after every finished run each node on it
//! gets Δ (+1: its call succeeded and the run succeeded; −1: its call
//! failed; 0 otherwise), accumulated into `s_i`, and with
//! `f(x) = a·x + 1` for `x ≥ 0`, `e^(a·x)` for `x < 0`:
//!
//! ```text
//! w⁽ⁿ⁾(i,j) = β·w⁽⁰⁾(i,j) + (1−β)·f(s_j) / Σ_{k ∈ out(i)} f(s_k)
//! α_i       = β·α⁽⁰⁾_i + (1−β)·(successes + 1) / (calls + 2)      over online calls
//! ```
//!
//! Until a successor of `i` has been scored online, `w(i,·)` is the static
//! weight (the formula would otherwise replace it by a uniform share before
//! any evidence). New transitions seen online create edges with
//! `w⁽⁰⁾ = 0`. Durability (snapshot + fsync'd log) is in [`store`].

pub(crate) mod build;
pub mod store;

use std::collections::HashMap;

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, DEFAULT_AVAILABILITY_PRIOR};

pub(crate) use build::{BuildReport, build};

/// A node: an API (by function name) or the end of a run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeKey {
    Finish,
    Api(String),
}

impl NodeKey {
    pub(crate) fn name(&self) -> &str {
        match self {
            NodeKey::Finish => "Finish",
            NodeKey::Api(name) => name,
        }
    }
}

/// What the graph knows about one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub key: NodeKey,
    /// α when the API was never called: RapidAPI's success rate / 100, or 0.5.
    pub prior: f64,
    /// Calls in the trajectories the graph was built from (known outcome only).
    pub static_calls: u64,
    pub static_successes: u64,
    /// Calls in runs recorded since.
    pub online_calls: u64,
    pub online_successes: u64,
    /// When its last failed call in a run ended (ms since the Unix
    /// epoch; 0: none, or none with a time).
    #[serde(default)]
    pub last_failure_ms: u64,
    /// `s_i`: the sum of the node's online evaluations Δ.
    pub score: f64,
    /// Scored online at least once.
    pub touched: bool,
}

impl Node {
    fn new(key: NodeKey, prior: f64) -> Node {
        Node {
            key,
            prior,
            static_calls: 0,
            static_successes: 0,
            online_calls: 0,
            online_successes: 0,
            last_failure_ms: 0,
            score: 0.0,
            touched: false,
        }
    }

    /// α⁽⁰⁾: the static success rate, or the prior.
    pub(crate) fn static_alpha(&self) -> f64 {
        if self.static_calls == 0 { self.prior } else { self.static_successes as f64 / self.static_calls as f64 }
    }
}

/// What the graph knows about one transition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Edge {
    /// Times the target followed the source in the cleaned trajectories.
    pub(crate) count: u64,
    /// `w⁽⁰⁾`: `count` over the source's total (0 for transitions seen only online).
    pub(crate) w0: f64,
    /// Times seen in runs recorded since.
    pub(crate) online: u64,
}

/// The online update's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Params {
    pub(crate) a: f64,
    pub(crate) beta: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params { a: crate::config::DEFAULT_GRAPH_A, beta: crate::config::DEFAULT_GRAPH_BETA }
    }
}

impl From<&crate::config::GraphConfig> for Params {
    fn from(c: &crate::config::GraphConfig) -> Self {
        Params { a: c.a, beta: c.beta }
    }
}

/// One call of a finished run, as the graph learns from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCall {
    /// Function name.
    pub function: String,
    pub ok: bool,
}

/// A fresh run id: where the run came from (`call`, `execute`,
/// `mcp-session`…) and 64 random bits, so that no two runs share one.
pub fn run_id(kind: &str) -> String {
    format!("{kind}-{:016x}", fastrand::u64(..))
}

/// A finished run: the input of an online update.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's id ([`run_id`]; kept in the log).
    pub id: String,
    pub task: String,
    pub calls: Vec<RunCall>,
    /// The run reached its goal.
    pub success: bool,
    /// Calls made on their own, outside a planned run (`toolrouter call`,
    /// MCP `call_api`): they teach availability α only, not transitions.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub standalone: bool,
    /// When the run ended (ms since the Unix epoch; 0 in logs written
    /// before it was recorded): how long ago its calls failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub at_unix_ms: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Counters about the graph's history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The report of the last static build, if any.
    pub build: Option<BuildReport>,
    /// Runs applied online since the graph was created.
    pub online_runs: u64,
    /// Sequence number of the last log record applied.
    pub seq: u64,
}

/// The tool graph.
#[derive(Debug, Clone)]
pub struct ToolGraph {
    graph: DiGraph<Node, Edge>,
    index: HashMap<NodeKey, NodeIndex>,
    params: Params,
    pub meta: Meta,
}

/// A successor of a node with its weights.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Successor {
    pub(crate) key: NodeKey,
    /// Current transition weight.
    pub(crate) w: f64,
    pub(crate) w0: f64,
    pub(crate) count: u64,
    /// Times the transition was seen in runs recorded since the build.
    pub(crate) online: u64,
    /// Availability of the successor (1 for `Finish`).
    pub(crate) alpha: f64,
}

/// A node's neighbourhood, as `GET /v1/graph/apis/{function}` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Neighbourhood {
    pub(crate) function: String,
    /// In the graph (seen in trajectories or runs); else α is the prior.
    pub(crate) known: bool,
    pub(crate) alpha: f64,
    pub(crate) static_calls: u64,
    pub(crate) static_successes: u64,
    pub(crate) online_calls: u64,
    pub(crate) online_successes: u64,
    /// `s_i`, the sum of the node's online evaluations.
    pub(crate) score: f64,
    /// Heaviest first, at most the limit asked for.
    pub(crate) successors: Vec<Link>,
    pub(crate) successors_total: usize,
    /// By the weight of the transition into this node, heaviest first.
    pub(crate) predecessors: Vec<Link>,
    pub(crate) predecessors_total: usize,
}

/// One transition from or to a node: the other end, `w` of the
/// transition, and the other end's availability.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Link {
    pub(crate) function: String,
    pub(crate) w: f64,
    pub(crate) w0: f64,
    pub(crate) count: u64,
    pub(crate) online: u64,
    pub(crate) alpha: f64,
}

impl ToolGraph {
    /// An empty graph (with its `Finish` node).
    pub(crate) fn new(params: Params) -> ToolGraph {
        let mut g = ToolGraph { graph: DiGraph::new(), index: HashMap::new(), params, meta: Meta::default() };
        g.node_or_insert(NodeKey::Finish, 1.0);
        g
    }

    pub(crate) fn set_params(&mut self, params: Params) {
        self.params = params;
    }

    pub(crate) fn node_count(&self) -> usize {
        self.graph.node_count()
    }

    pub(crate) fn edge_count(&self) -> usize {
        self.graph.edge_count()
    }

    pub(crate) fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.graph.node_weights()
    }

    /// Every edge as (source, target, edge).
    pub(crate) fn edges(&self) -> impl Iterator<Item = (&NodeKey, &NodeKey, &Edge)> {
        self.graph.edge_references().map(|e| (&self.graph[e.source()].key, &self.graph[e.target()].key, e.weight()))
    }

    pub fn node(&self, key: &NodeKey) -> Option<&Node> {
        self.index.get(key).map(|&i| &self.graph[i])
    }

    fn node_or_insert(&mut self, key: NodeKey, prior: f64) -> NodeIndex {
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let i = self.graph.add_node(Node::new(key.clone(), prior));
        self.index.insert(key, i);
        i
    }

    /// The node of an API, created with its tool's prior when new.
    fn api_node(&mut self, function: &str, catalog: Option<&Catalog>) -> NodeIndex {
        let prior = catalog
            .and_then(|c| c.resolve(function).first().map(|id| c.tool_of(c.api(id)).availability_prior()))
            .unwrap_or(DEFAULT_AVAILABILITY_PRIOR);
        self.node_or_insert(NodeKey::Api(function.to_string()), prior)
    }

    /// `f(x)` of the online update.
    pub(crate) fn f(&self, x: f64) -> f64 {
        if x >= 0.0 { self.params.a * x + 1.0 } else { (self.params.a * x).exp() }
    }

    /// α of a node: static, blended with the online success rate once it has one.
    pub(crate) fn alpha(&self, key: &NodeKey) -> Option<f64> {
        let node = self.node(key)?;
        Some(self.alpha_of(node))
    }

    /// The success rate of the calls the graph has seen to `key` (in
    /// trajectories and runs, Laplace-smoothed), without the catalog's
    /// prior; `None` before the first call. Unlike α, a few successful
    /// calls to an API whose tool has a low prior keep it high.
    pub(crate) fn call_success_rate(&self, key: &NodeKey) -> Option<f64> {
        let node = self.node(key)?;
        let calls = node.static_calls + node.online_calls;
        let successes = node.static_successes + node.online_successes;
        (calls > 0 && node.key != NodeKey::Finish).then(|| (successes as f64 + 1.0) / (calls as f64 + 2.0))
    }

    fn alpha_of(&self, node: &Node) -> f64 {
        if node.key == NodeKey::Finish {
            return 1.0;
        }
        let a0 = node.static_alpha();
        if node.online_calls == 0 {
            return a0;
        }
        let running = (node.online_successes as f64 + 1.0) / (node.online_calls as f64 + 2.0);
        self.params.beta * a0 + (1.0 - self.params.beta) * running
    }

    /// The successors of `key`, heaviest first (ties by name).
    pub(crate) fn successors(&self, key: &NodeKey) -> Vec<Successor> {
        let Some(&i) = self.index.get(key) else { return Vec::new() };
        let out: Vec<_> = self.graph.edges_directed(i, Direction::Outgoing).collect();
        let online = out.iter().any(|e| self.graph[e.target()].touched);
        // Summed in sorted order: replicas that created these edges in
        // different orders get the same bits.
        let mut terms: Vec<f64> =
            if online { out.iter().map(|e| self.f(self.graph[e.target()].score)).collect() } else { Vec::new() };
        terms.sort_by(f64::total_cmp);
        let total: f64 = terms.iter().sum();
        let mut list: Vec<Successor> = out
            .iter()
            .map(|e| {
                let target = &self.graph[e.target()];
                let edge = e.weight();
                let w = if online && total > 0.0 {
                    self.params.beta * edge.w0 + (1.0 - self.params.beta) * self.f(target.score) / total
                } else {
                    edge.w0
                };
                Successor {
                    key: target.key.clone(),
                    w,
                    w0: edge.w0,
                    count: edge.count,
                    online: edge.online,
                    alpha: self.alpha_of(target),
                }
            })
            .collect();
        list.sort_by(|a, b| b.w.total_cmp(&a.w).then_with(|| a.key.name().cmp(b.key.name())));
        list
    }

    /// The neighbourhood of `key` (up to `limit` links each way); `prior`
    /// is its α when the graph has never seen it.
    pub(crate) fn neighbourhood(&self, key: &NodeKey, prior: f64, limit: usize) -> Neighbourhood {
        let link = |s: Successor| Link {
            function: s.key.name().to_string(),
            w: s.w,
            w0: s.w0,
            count: s.count,
            online: s.online,
            alpha: s.alpha,
        };
        let successors = self.successors(key);
        let successors_total = successors.len();
        let mut predecessors: Vec<Link> = match self.index.get(key) {
            Some(&i) => self
                .graph
                .neighbors_directed(i, Direction::Incoming)
                .filter_map(|p| {
                    let from = &self.graph[p];
                    let into = self.successors(&from.key).into_iter().find(|s| &s.key == key)?;
                    Some(Link { function: from.key.name().to_string(), alpha: self.alpha_of(from), ..link(into) })
                })
                .collect(),
            None => Vec::new(),
        };
        let predecessors_total = predecessors.len();
        predecessors.sort_by(|a, b| b.w.total_cmp(&a.w).then_with(|| a.function.cmp(&b.function)));
        predecessors.truncate(limit);
        let node = self.node(key);
        Neighbourhood {
            function: key.name().to_string(),
            known: node.is_some(),
            alpha: node.map_or(prior, |n| self.alpha_of(n)),
            static_calls: node.map_or(0, |n| n.static_calls),
            static_successes: node.map_or(0, |n| n.static_successes),
            online_calls: node.map_or(0, |n| n.online_calls),
            online_successes: node.map_or(0, |n| n.online_successes),
            score: node.map_or(0.0, |n| n.score),
            successors: successors.into_iter().take(limit).map(link).collect(),
            successors_total,
            predecessors,
            predecessors_total,
        }
    }

    /// The catalog APIs that follow `function` (a function name), with
    /// their transition weight, heaviest first: the cue a caller's last
    /// call gives catalog search ([`crate::retrieval::Prepared::after`]).
    pub(crate) fn followers(&self, function: &str, catalog: &Catalog) -> Vec<(crate::catalog::ApiId, f32)> {
        self.successors(&NodeKey::Api(function.to_string()))
            .into_iter()
            .filter_map(|s| match &s.key {
                NodeKey::Api(name) => catalog.resolve(name).first().map(|api| (api, s.w as f32)),
                NodeKey::Finish => None,
            })
            .collect()
    }

    /// `w(from, to)`, 0 when there is no such edge.
    pub(crate) fn weight(&self, from: &NodeKey, to: &NodeKey) -> f64 {
        self.successors(from).into_iter().find(|s| &s.key == to).map_or(0.0, |s| s.w)
    }

    /// The online update of one finished run (docs/architecture.md §4). `catalog` gives
    /// the priors of APIs new to the graph.
    pub(crate) fn apply(&mut self, run: &RunRecord, catalog: Option<&Catalog>) {
        for call in &run.calls {
            let i = self.api_node(&call.function, catalog);
            let node = &mut self.graph[i];
            node.online_calls += 1;
            node.online_successes += u64::from(call.ok);
            if !call.ok {
                node.last_failure_ms = node.last_failure_ms.max(run.at_unix_ms);
            }
            if run.standalone {
                continue;
            }
            let delta = match (call.ok, run.success) {
                (true, true) => 1.0,
                (false, _) => -1.0,
                (true, false) => 0.0,
            };
            node.score += delta;
            node.touched = true;
        }
        if run.success && !run.standalone {
            let finish = self.index[&NodeKey::Finish];
            self.graph[finish].score += 1.0;
            self.graph[finish].touched = true;
            let path = build::clean_path(run.calls.iter().map(|c| (c.function.as_str(), c.ok)));
            let mut previous: Option<NodeIndex> = None;
            for function in path {
                let i = self.api_node(function, catalog);
                if let Some(p) = previous {
                    self.bump_online_edge(p, i);
                }
                previous = Some(i);
            }
            if let Some(p) = previous {
                self.bump_online_edge(p, finish);
            }
        }
        self.meta.online_runs += 1;
    }

    fn bump_online_edge(&mut self, from: NodeIndex, to: NodeIndex) {
        match self.graph.find_edge(from, to) {
            Some(e) => self.graph[e].online += 1,
            None => {
                self.graph.add_edge(from, to, Edge { count: 0, w0: 0.0, online: 1 });
            }
        }
    }

    /// Replaces the static part (counts, `w⁽⁰⁾`, static call statistics)
    /// with `other`'s, keeping this graph's online state.
    pub(crate) fn replace_static(&mut self, other: &ToolGraph) {
        for node in self.graph.node_weights_mut() {
            node.static_calls = 0;
            node.static_successes = 0;
        }
        self.graph.retain_edges(|g, e| g[e].online > 0);
        for e in self.graph.edge_weights_mut() {
            e.count = 0;
            e.w0 = 0.0;
        }
        for node in other.nodes() {
            let i = self.node_or_insert(node.key.clone(), node.prior);
            let mine = &mut self.graph[i];
            mine.prior = node.prior;
            mine.static_calls = node.static_calls;
            mine.static_successes = node.static_successes;
        }
        for (from, to, edge) in other.edges() {
            let (f, t) = (self.index[from], self.index[to]);
            match self.graph.find_edge(f, t) {
                Some(e) => {
                    self.graph[e].count = edge.count;
                    self.graph[e].w0 = edge.w0;
                }
                None => {
                    self.graph.add_edge(f, t, Edge { count: edge.count, w0: edge.w0, online: 0 });
                }
            }
        }
        self.meta.build = other.meta.build.clone();
    }

    /// The most frequent static transitions, most frequent first.
    pub(crate) fn top_transitions(&self, n: usize) -> Vec<(&NodeKey, &NodeKey, &Edge)> {
        let mut all: Vec<_> = self.edges().filter(|(_, _, e)| e.count > 0).collect();
        all.sort_by(|a, b| {
            b.2.count.cmp(&a.2.count).then_with(|| a.0.name().cmp(b.0.name())).then_with(|| a.1.name().cmp(b.1.name()))
        });
        all.truncate(n);
        all
    }
}

#[cfg(test)]
mod tests;
