//! Ranking the tools a request carries (route mode): catalog search's
//! signals, over tools the catalog has never seen.
//!
//! A client sends its own tool list; the few the conversation needs go to
//! the model. Each tool is scored by weighted reciprocal rank fusion, as
//! in catalog search ([`super::RRF_K`]), of:
//!
//! * BM25 over each tool's text (its name split into words, description,
//!   parameter names and descriptions): the latest user message, earlier
//!   user messages at [`ListWeights::earlier`], each intent of the latest
//!   message ([`super::intents`]) at [`ListWeights::intent`];
//! * dense cosine against each tool's vector: the best of the latest user
//!   message's and its intents' (so each of several needs has its tools
//!   near the top);
//! * the tool graph's transition weight from the last tool called: the
//!   catalog graph's, by name, or the share of earlier requests that
//!   called the tool after that one ([`super::tool_memory`]), the larger;
//! * the tools earlier similar requests called ([`super::tool_memory`]);
//! * each tool's server (`server__tool`, `api_for_tool`), ranked by BM25
//!   over its tools' text together ([`servers`]), at [`ListWeights::server`]
//!   (off by default: measured, it helps ToolBench's lists and not real
//!   MCP servers').
//!
//! The dense signal reads each tool's vector plus, for a tool that served
//! earlier requests, the mean of theirs ([`ListWeights::learned`]).
//!
//! After that order, each of the best tools brings along the tool that
//! produces what it needs ([`companions`]), within the K kept.
//!
//! Before that order: the tools the conversation already called and the
//! `tool_choice` target (always kept), then the tools whose name the
//! latest message spells out (any case; `_`, `-` or spaces; with or
//! without a leading `get`), at most a quarter of the kept slots. (Each
//! intent keeping its best tool, as catalog search does, was measured
//! and not kept: docs/benchmarks.md, "Several needs in one request".)
//!
//! Tools, not lists. A list is known by the set of its tools (name and
//! text), not by their order: its BM25 index and name keys are built once
//! per set, over the tools sorted by name, and every tie is broken by name,
//! so nothing kept depends on the order a request lists its tools in.
//! Vectors are kept per tool ([`ToolVectors`]): a list made of tools seen
//! in any earlier list is ranked with the embedding at once. A request's
//! unknown tools are embedded inline while that fits a time budget
//! ([`ToolListRanker::embed_missing`]), the rest on a background thread;
//! until every tool has a vector the list ranks by words only, and
//! [`Kept::by_words`] says so. Replicas share their tools' vectors
//! ([`ToolListRanker::on_embedded`], [`ToolListRanker::insert`]).
//! Query vectors are kept by text too: the turns of one conversation
//! repeat its user message.

mod companions;
mod embedding;
mod rank;
mod servers;

use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use lru::LruCache;

use super::bm25::Bm25;
use super::embedder::Embedder;
use super::intents;
use super::names::NameIndex;
use super::tool_memory::{Recalled, ToolMemory};
use super::tool_vectors::ToolVectors;
use embedding::Shared;
pub(crate) use rank::{best, keep};

/// Tool sets whose index is kept.
const LISTS: usize = 256;
/// Query vectors kept by text.
const QUERY_VECTORS: usize = 4_096;

/// How much each signal counts (tuned on G1_instruction; docs/benchmarks.md).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct ListWeights {
    /// BM25 of the latest user message.
    pub(crate) lexical: f32,
    /// BM25 of earlier user messages.
    pub(crate) earlier: f32,
    /// Dense cosine of the latest user message (0: lexical only).
    pub(crate) dense: f32,
    /// BM25 of each intent of the latest message.
    pub(crate) intent: f32,

    /// The graph's transition weight from the last tool called, as a
    /// first-rank list of this weight would count.
    pub(crate) graph: f32,
    /// The tools earlier similar requests called ([`super::tool_memory`]).
    pub(crate) memory: f32,
    /// Each tool's server's BM25 rank for the latest message ([`servers`]).
    /// Off by default: on ToolBench's lists (a hundred small servers) it
    /// raised route mode by 0.006-0.012, on real MCP servers' sessions it
    /// lowered it by 0.010-0.015 (docs/benchmarks.md, "Servers in route
    /// mode").
    pub(crate) server: f32,
    /// How much a tool's vector learned from use (the mean of the requests
    /// it served, [`Recalled::served`]) adds to its own in the dense
    /// ranking, at full strength once it served many (`n / (n + 1)`).
    pub(crate) learned: f32,
    /// Whether a kept tool brings along the tool that produces what it
    /// needs ([`companions`]).
    pub(crate) companions: bool,
    pub(crate) rrf_k: f32,
}

impl Default for ListWeights {
    fn default() -> ListWeights {
        ListWeights {
            lexical: 1.0,
            earlier: 0.5,
            dense: 1.0,
            intent: 0.5,
            graph: 1.0,
            memory: 1.0,
            server: 0.0,
            learned: 1.0,
            companions: true,
            rrf_k: super::RRF_K,
        }
    }
}

/// What the ranker reads of a conversation.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Conversation<'a> {
    /// The latest user message's text.
    pub(crate) latest: &'a str,
    /// The earlier user messages' text.
    pub(crate) earlier: &'a str,
    /// Tools the assistant called, in order.
    pub(crate) called: &'a [String],
    /// The `tool_choice` target.
    pub(crate) forced: Option<&'a str>,
}

/// A tool set's index, built once per set, its tools sorted by name.
pub(crate) struct ListIndex {
    names: Vec<String>,
    texts: Vec<String>,
    /// Each tool's required parameters.
    needs: Vec<Vec<String>>,
    bm25: Bm25,
    /// Tools by the words of their name.
    name_index: NameIndex,
    /// Their servers, when the names say (at least two of two tools or
    /// more): indexed on first use, as the weight is off by default.
    servers: std::sync::OnceLock<Option<servers::Servers>>,
    /// The tools that produce what each tool needs, found on first use.
    companions: std::sync::OnceLock<companions::Companions>,
    /// The tools' vectors as last gathered; gathered again while some are missing.
    vectors: Mutex<Option<Arc<ListVectors>>>,
    /// Its missing tools are being embedded in the background.
    embedding: AtomicBool,
}

impl ListIndex {
    fn build(names: Vec<String>, texts: Vec<String>, needs: Vec<Vec<String>>) -> ListIndex {
        let mut name_index = NameIndex::default();
        for (i, name) in names.iter().enumerate() {
            name_index.insert(name, i as u32, 1);
        }
        let bm25 = Bm25::build(&texts);
        ListIndex {
            names,
            texts,
            needs,
            bm25,
            name_index,
            servers: std::sync::OnceLock::new(),
            companions: std::sync::OnceLock::new(),
            vectors: Mutex::new(None),
            embedding: AtomicBool::new(false),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }
}

/// The vectors of a tool set's tools under one model (in the set's
/// order); a tool not embedded yet has none.
pub(crate) struct ListVectors {
    model: String,
    dims: usize,
    /// `dims` floats per tool, zeros where `present` is false.
    flat: Vec<f32>,
    /// Each tool's key under the model (its vector's, and the tool memory's).
    keys: Vec<super::cache::Key>,
    present: Vec<bool>,
    missing: usize,
}

impl ListVectors {
    /// Tools without a vector.
    pub(crate) fn missing(&self) -> usize {
        self.missing
    }

    /// These vectors as a list's first request has them when none of its
    /// tools was known and `embedded` fit its time budget: the shortest
    /// texts first, as [`ToolListRanker::embed_missing`] takes them.
    pub(crate) fn first_request(&self, set: &ToolSet, embedded: usize) -> ListVectors {
        let texts = &set.index.texts;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by(|&a, &b| texts[a].len().cmp(&texts[b].len()).then(texts[a].cmp(&texts[b])));
        let mut present = vec![false; texts.len()];
        for &i in order.iter().take(embedded) {
            present[i] = self.present[i];
        }
        let missing = present.iter().filter(|p| !**p).count();
        let (model, dims, flat, keys) = (self.model.clone(), self.dims, self.flat.clone(), self.keys.clone());
        ListVectors { model, dims, flat, keys, present, missing }
    }
}

/// A request's tools as the ranker holds them: the index of their set,
/// and where each of its tools is in the request.
#[derive(Clone)]
pub(crate) struct ToolSet {
    index: Arc<ListIndex>,
    /// `positions[i]`: the request's index of the set's tool `i`.
    positions: Vec<usize>,
}

impl ToolSet {
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// The key under `vectors`' model of the tool named `name`, when the set has it.
    fn key_of(&self, vectors: &ListVectors, name: &str) -> Option<super::cache::Key> {
        let at = self.index.names.binary_search_by(|n| n.as_str().cmp(name)).ok()?;
        vectors.keys.get(at).copied()
    }
}

/// The vectors of the latest user message and of each of its intents
/// ([`intents::split`], in order), of one model.
#[derive(Debug, Clone)]
pub(crate) struct QueryVectors {
    pub(crate) latest: Arc<[f32]>,
    pub(crate) intents: Vec<Arc<[f32]>>,
}

impl QueryVectors {
    /// From the message's vector then its intents'.
    fn of(mut vectors: Vec<Arc<[f32]>>) -> QueryVectors {
        let intents = vectors.split_off(1);
        QueryVectors { latest: vectors.remove(0), intents }
    }
}

/// The latest message's vectors and the tools' vectors, of one model.
#[derive(Clone, Copy)]
pub(crate) struct Dense<'a> {
    pub(crate) query: &'a QueryVectors,
    pub(crate) tools: &'a ListVectors,
    /// Per tool (in the set's order), what earlier requests say of it
    /// ([`ToolListRanker::remembered`]); empty: nothing.
    pub(crate) remembered: &'a Recalled,
}

/// The tools to offer, as indexes into the request's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kept {
    /// Kept, ascending (the request's order).
    pub(crate) tools: Vec<usize>,
    /// Tools ranked by words only, ascending: every tool when some have
    /// no vector yet (or there is no model); empty when the embedding
    /// ranked them too, or nothing was narrowed out.
    pub(crate) by_words: Vec<usize>,
}

/// Ranks tool lists; keeps their indexes and vectors.
pub(crate) struct ToolListRanker {
    lists: Mutex<LruCache<u64, Arc<ListIndex>>>,
    shared: Arc<Shared>,
    memory: ToolMemory,
    query_vectors: Mutex<LruCache<u64, Arc<[f32]>>>,
}

impl Default for ToolListRanker {
    fn default() -> ToolListRanker {
        ToolListRanker::new(ToolVectors::new(None, Default::default()), ToolMemory::new(None, 1_000))
    }
}

fn hash_of(model: &str, text: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    model.hash(&mut h);
    text.hash(&mut h);
    h.finish()
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ToolListRanker {
    /// A ranker keeping tool vectors in `store`, and what was called for
    /// which request in `memory`.
    pub(crate) fn new(store: ToolVectors, memory: ToolMemory) -> ToolListRanker {
        fn lru<T>(n: usize) -> LruCache<u64, T> {
            LruCache::new(NonZeroUsize::new(n).expect("not zero"))
        }
        ToolListRanker {
            lists: Mutex::new(lru(LISTS)),
            shared: Arc::new(Shared::new(store)),
            memory,
            query_vectors: Mutex::new(lru(QUERY_VECTORS)),
        }
    }

    /// Tool vectors held.
    pub(crate) fn tool_vectors(&self) -> usize {
        self.shared.held()
    }

    /// The set of a request's tools (`names[i]`, `texts[i]`, `needs[i]`
    /// its required parameters: tool `i`), its index from the cache or
    /// built now. Any order of the same tools gives the same index.
    pub(crate) fn set(&self, names: &[&str], texts: &[&str], needs: &[&[String]]) -> ToolSet {
        let mut positions: Vec<usize> = (0..names.len()).collect();
        positions.sort_by(|&a, &b| names[a].cmp(names[b]).then(texts[a].cmp(texts[b])));
        let need = |i: usize| needs.get(i).copied().unwrap_or_default();
        let mut h = std::hash::DefaultHasher::new();
        for &i in &positions {
            names[i].hash(&mut h);
            texts[i].hash(&mut h);
            need(i).hash(&mut h);
        }
        let key = h.finish();
        if let Some(index) = locked(&self.lists).get(&key) {
            return ToolSet { index: index.clone(), positions };
        }
        let own = |v: &[&str]| positions.iter().map(|&i| v[i].to_string()).collect();
        let own_needs = positions.iter().map(|&i| need(i).to_vec()).collect();
        let index = Arc::new(ListIndex::build(own(names), own(texts), own_needs));
        locked(&self.lists).put(key, index.clone());
        ToolSet { index, positions }
    }

    /// The vectors of a user message and of its intents
    /// ([`intents::split`]), from the cache or embedded now, in one batch
    /// (blocking: call it off the async threads).
    pub(crate) fn query_vectors(&self, embedder: &Embedder, text: &str) -> Result<QueryVectors, super::EmbedError> {
        let texts = query_texts(text);
        let mut found = self.cached(embedder, &texts);
        let missing: Vec<String> =
            texts.iter().zip(&found).filter(|(_, v)| v.is_none()).map(|(t, _)| t.clone()).collect();
        if !missing.is_empty() {
            let mut embedded = super::embed_query(embedder, &missing)?.into_iter();
            let mut cache = locked(&self.query_vectors);
            for (text, slot) in texts.iter().zip(found.iter_mut()).filter(|(_, v)| v.is_none()) {
                let v: Arc<[f32]> = embedded.next().ok_or_else(|| short_answer(embedder))?.into();
                cache.put(hash_of(embedder.id(), text), v.clone());
                *slot = Some(v);
            }
        }
        Ok(QueryVectors::of(found.into_iter().flatten().collect()))
    }

    /// The cached vectors of a user message and its intents, when all are.
    pub(crate) fn cached_query_vectors(&self, embedder: &Embedder, text: &str) -> Option<QueryVectors> {
        let found: Option<Vec<Arc<[f32]>>> = self.cached(embedder, &query_texts(text)).into_iter().collect();
        found.map(QueryVectors::of)
    }

    /// Per tool of `set` (in its order), what earlier requests say of it
    /// ([`ToolMemory::recall`]), for the request of vector `query` whose
    /// conversation last called the tool named `after`.
    pub(crate) fn remembered(
        &self,
        set: &ToolSet,
        vectors: &ListVectors,
        query: &QueryVectors,
        after: Option<&str>,
    ) -> Recalled {
        let after = after.and_then(|name| set.key_of(vectors, name));
        self.memory.recall(&vectors.model, &query.latest, after.as_ref(), &vectors.keys)
    }

    /// Remembers that the request of vector `query`, whose conversation
    /// last called the tool named `after`, called the tools at `called`
    /// (request indexes) of `set`; returns the entry kept (to share with
    /// other replicas).
    pub(crate) fn learn(
        &self,
        set: &ToolSet,
        vectors: &ListVectors,
        query: &QueryVectors,
        after: Option<&str>,
        called: &[usize],
    ) -> Option<super::tool_memory::Called> {
        let keys: Vec<super::cache::Key> = (0..set.len())
            .filter(|&i| called.contains(&set.positions[i]))
            .filter_map(|i| vectors.keys.get(i).copied())
            .collect();
        let after = after.and_then(|name| set.key_of(vectors, name));
        self.memory.record(&vectors.model, &query.latest, &keys, after.as_ref())
    }

    /// Keeps what another replica learned ([`ToolMemory::record_called`]).
    pub(crate) fn learn_shared(&self, called: &super::tool_memory::Called) -> bool {
        self.memory.record_called(called)
    }

    /// Forgets what was learned (a measurement starting afresh).
    pub(crate) fn forget(&self) {
        self.memory.forget();
    }

    /// Requests whose calls are remembered.
    pub(crate) fn remembered_requests(&self) -> usize {
        self.memory.len()
    }

    fn cached(&self, embedder: &Embedder, texts: &[String]) -> Vec<Option<Arc<[f32]>>> {
        let mut cache = locked(&self.query_vectors);
        texts.iter().map(|t| cache.get(&hash_of(embedder.id(), t)).cloned()).collect()
    }
}

/// A user message, then each of its intents.
fn query_texts(text: &str) -> Vec<String> {
    std::iter::once(text.to_string()).chain(intents::split(text)).collect()
}

fn short_answer(embedder: &Embedder) -> super::EmbedError {
    super::EmbedError::Inference(format!("{} returned fewer vectors than texts", embedder.id()))
}

#[cfg(test)]
mod tests;
