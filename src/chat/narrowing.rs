//! Narrowing: ranking a request's tools for its conversation, as route
//! mode keeps the `openai.max_tools` best ([`Narrowing::narrow`]) and a
//! tool search finds the best of those not offered ([`Narrowing::best`]),
//! with the server's ranker (BM25, the embedding model once the list is
//! embedded, intents, names spelled out, the tool graph, the memory), and
//! what route mode learns from the answer ([`Learning`]).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::loaded::Loaded;
use super::tools::{ClientTool, ToolList};
use crate::llm::wire::Message;
use crate::retrieval::Embedder;
use crate::retrieval::tool_list::{
    self, Conversation, Dense, Kept, ListVectors, ListWeights, QueryVectors, ToolListRanker, ToolSet,
};
use crate::retrieval::tool_memory::Recalled;

/// What narrowing reads of a conversation, owned.
pub(crate) struct Asked {
    pub(crate) latest: String,
    pub(crate) earlier: String,
    /// Tools the assistant called, in order.
    pub(crate) called: Vec<String>,
}

impl Asked {
    pub(crate) fn of(messages: &[Message]) -> Asked {
        let users: Vec<String> = messages.iter().filter(|m| m.is("user")).map(Message::text).collect();
        let (latest, earlier) =
            users.split_last().map_or((String::new(), String::new()), |(l, e)| (l.clone(), e.join(" ")));
        let calls = messages.iter().flat_map(Message::calls);
        let called = calls.filter_map(|c| c.function.as_ref()?.name.clone()).collect();
        Asked { latest, earlier, called }
    }

    pub(crate) fn conversation<'a>(&'a self, forced: Option<&'a str>) -> Conversation<'a> {
        Conversation { latest: &self.latest, earlier: &self.earlier, called: &self.called, forced }
    }
}

/// `w(from, to)` of the tool graph.
pub(crate) type TransitionWeight = dyn Fn(&str, &str) -> f64 + Send + Sync;

/// What narrowing uses of the server: the tool-list ranker and, once the
/// engine is loaded, its embedding model and tool graph.
#[derive(Clone)]
pub(crate) struct Narrowing {
    pub(crate) ranker: Arc<ToolListRanker>,
    pub(crate) embedder: Option<Arc<Embedder>>,
    pub(crate) weight: Arc<TransitionWeight>,
    /// Keeps a decision (tools narrowed or planned) among the traces the
    /// console shows; returns its id. `None`: not kept.
    pub(crate) record: Option<Arc<RecordDecision>>,
    /// Time a request may spend embedding tools never seen before
    /// (`openai.embed_budget_ms`); the rest are embedded in the background.
    pub(crate) embed_budget: Duration,
    /// The replicas whose tool vectors this one reads before embedding,
    /// and with which it shares what it learns.
    pub(crate) cluster: Option<Arc<crate::cluster::Cluster>>,
    /// `openai.tool_memory_requests` (the shared stream's bound).
    pub(crate) memory_bound: usize,
    /// The tools conversations' searches loaded.
    pub(crate) loaded: Arc<Loaded>,
}

/// Keeps a route or plan decision; returns its trace id.
pub(crate) type RecordDecision = dyn Fn(Value) -> String + Send + Sync;

impl Narrowing {
    /// Lexical narrowing without a graph (no engine).
    pub(crate) fn lexical(ranker: Arc<ToolListRanker>) -> Narrowing {
        Narrowing {
            ranker,
            embedder: None,
            weight: Arc::new(|_, _| 0.0),
            record: None,
            embed_budget: Duration::ZERO,
            cluster: None,
            memory_bound: 0,
            loaded: Arc::default(),
        }
    }

    /// The set of a request's tools.
    pub(crate) fn set(&self, tools: &[Arc<ClientTool>]) -> ToolSet {
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        let texts: Vec<&str> = tools.iter().map(|t| t.text.as_str()).collect();
        let needs: Vec<&[String]> = tools.iter().map(|t| t.needs.as_slice()).collect();
        self.ranker.set(&names, &texts, &needs)
    }

    /// The tools to offer, in their original order: the `max` best by
    /// [`tool_list::keep`], and what to learn from the answer when the
    /// list was ranked with a model. Tools never seen are embedded first
    /// while that fits [`Narrowing::embed_budget`] (those another replica
    /// embedded are read from it first), the rest in the background
    /// (ranked by words until then: [`Kept::by_words`]).
    pub(crate) async fn narrow(
        &self,
        tools: &ToolList,
        messages: &[Message],
        max: usize,
        forced: Option<&str>,
    ) -> (Kept, Option<Learning>) {
        if tools.len() <= max {
            return (Kept { tools: (0..tools.len()).collect(), by_words: Vec::new() }, None);
        }
        let asked = Asked::of(messages);
        let keep = |set: &ToolSet, dense: Option<Dense>, weight: &TransitionWeight| {
            tool_list::keep(set, &asked.conversation(forced), dense, max, &ListWeights::default(), weight)
        };
        self.ranked(tools, &asked, keep).await
    }

    /// The `k` best of `among` (indexes in `tools`) for the conversation
    /// of `messages`, best first, ranked as [`Narrowing::narrow`] ranks
    /// (`tools`' index and vectors reused: a search over the tools not
    /// offered), and what to learn from the answer.
    pub(crate) async fn best(
        &self,
        tools: &ToolList,
        messages: &[Message],
        among: &[usize],
        k: usize,
    ) -> (Vec<usize>, Option<Learning>) {
        let asked = Asked::of(messages);
        let best = |set: &ToolSet, dense: Option<Dense>, weight: &TransitionWeight| {
            tool_list::best(set, &asked.conversation(None), dense, k, &ListWeights::default(), weight, among)
        };
        self.ranked(tools, &asked, best).await
    }

    /// `rank(set, dense, weight)` over `tools`' set, with the embedding of
    /// the latest message and of the tools (within the budget) and what
    /// the memory recalls, once the list is embedded.
    async fn ranked<T>(
        &self,
        tools: &ToolList,
        asked: &Asked,
        rank: impl FnOnce(&ToolSet, Option<Dense>, &TransitionWeight) -> T,
    ) -> (T, Option<Learning>) {
        let set = tools.set(|tools| self.set(tools)).clone();
        let embedded = match &self.embedder {
            Some(embedder) => self.embedded(&set, embedder, &asked.latest).await,
            None => None,
        };
        let after = asked.called.last().cloned();
        let remembered = match &embedded {
            Some((query, vectors)) if vectors.missing() == 0 => {
                self.ranker.remembered(&set, vectors, query, after.as_deref())
            }
            _ => Recalled::default(),
        };
        let dense = embedded.as_ref().map(|(query, tools)| Dense { query, tools, remembered: &remembered });
        let weight = self.weight.clone();
        let ranked = rank(&set, dense, &*weight);
        let (ranker, share) = (self.ranker.clone(), self.cluster.clone().map(|c| (c, self.memory_bound)));
        (ranked, embedded.map(|(query, vectors)| Learning { ranker, set, vectors, query, after, share }))
    }

    /// The vectors of the latest message and of `set`'s tools, embedding
    /// what is missing within the budget; `None` without a message vector.
    async fn embedded(
        &self,
        set: &ToolSet,
        embedder: &Arc<Embedder>,
        latest: &str,
    ) -> Option<(QueryVectors, Arc<ListVectors>)> {
        let mut vectors = self.ranker.vectors(set, embedder);
        // Not while Redis is down (each read would wait `cluster.timeout_ms`).
        let reachable = self.cluster.as_ref().filter(|c| c.health().0);
        if let Some(cluster) = reachable.filter(|_| vectors.missing() > 0) {
            let keys = self.ranker.missing_keys(set, embedder);
            let shared = cluster.tool_vectors(&keys, embedder.dims()).await;
            if !shared.is_empty() {
                tracing::debug!(tools = shared.len(), "tool vectors read from the other replicas");
                self.ranker.insert(embedder, shared);
                vectors = self.ranker.vectors(set, embedder);
            }
        }
        let mut query = self.ranker.cached_query_vectors(embedder, latest);
        let wants_query = query.is_none() && !latest.trim().is_empty();
        let wants_tools = vectors.missing() > 0 && !self.embed_budget.is_zero();
        if wants_query || wants_tools {
            let (ranker, embedder, text) = (self.ranker.clone(), embedder.clone(), latest.to_string());
            let (set, budget) = (set.clone(), self.embed_budget);
            let embedded = tokio::task::spawn_blocking(move || {
                let vectors = if wants_tools { ranker.embed_missing(&set, &embedder, budget).ok() } else { None };
                let query = if wants_query { ranker.query_vectors(&embedder, &text).ok() } else { None };
                (vectors, query)
            })
            .await;
            if let Ok((more, asked_query)) = embedded {
                vectors = more.unwrap_or(vectors);
                query = query.or(asked_query);
            }
        }
        if vectors.missing() > 0 {
            self.ranker.embed_in_background(set, embedder);
        }
        query.map(|q| (q, vectors))
    }
}

/// What route mode learns from the model's answer to a request it
/// narrowed with a model: which of the request's tools were called
/// ([`crate::retrieval::tool_memory`]).
pub(crate) struct Learning {
    ranker: Arc<ToolListRanker>,
    set: ToolSet,
    vectors: Arc<ListVectors>,
    query: QueryVectors,
    /// The tool the conversation called last.
    after: Option<String>,
    /// The replicas it is shared with, and the stream's bound.
    share: Option<(Arc<crate::cluster::Cluster>, usize)>,
}

impl Learning {
    /// Remembers the tools of `tools` that `message` calls (on a blocking
    /// thread: the memory's journal fsyncs).
    pub(crate) fn learn(self, message: &Message, tools: &[Arc<ClientTool>]) {
        let called: Vec<usize> =
            message.calls().iter().filter_map(|c| tools.iter().position(|t| t.name == c.name())).collect();
        if called.is_empty() {
            return;
        }
        let Learning { ranker, set, vectors, query, after, share } = self;
        tokio::spawn(async move {
            let learned =
                tokio::task::spawn_blocking(move || ranker.learn(&set, &vectors, &query, after.as_deref(), &called))
                    .await;
            if let (Ok(Some(called)), Some((cluster, max))) = (learned, share) {
                let _ = cluster.publish_called(&called, max).await;
            }
        });
    }
}
