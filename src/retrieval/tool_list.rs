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
//! * dense cosine of the latest user message against each tool's text
//!   vector, once the list has been embedded;
//! * the tool graph's transition weight from the last tool called.
//!
//! Before that order: the tools the conversation already called and the
//! `tool_choice` target (always kept), then the tools whose name the
//! latest message spells out (any case; `_`, `-` or spaces; with or
//! without a leading `get`), at most a quarter of the kept slots.
//!
//! Cost bound. A list's BM25 index and name keys are built when the list
//! is first seen and kept, by a hash of its tools' texts, for the next
//! requests that carry it (a client sends the same list turn after turn).
//! Embedding a new list (about 100 tools a second on 2 cores) never holds
//! a request: a list without vectors ranks lexically and is embedded on a
//! background thread, one list at a time; tool vectors are kept by text,
//! so a list that differs from a known one by a few tools embeds only
//! those. Query vectors are kept by text too: the turns of one
//! conversation repeat its user message.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use lru::LruCache;

use super::bm25::Bm25;
use super::embedder::Embedder;
use super::names::NameIndex;
use super::{dense::dot, intents};

/// Tool lists whose index is kept.
const LISTS: usize = 256;
/// Tool vectors kept by text (384 floats each: about 30 MB).
const TOOL_VECTORS: usize = 20_000;
/// Query vectors kept by text.
const QUERY_VECTORS: usize = 4_096;
/// Tools embedded per model call in the background. 16 rather than 32:
/// embedding a first-seen 1,000-tool list took `serve` to 155 MB at peak
/// (120 MB after) with 32, 119–126 MB (96 after) with 16, for about 15%
/// more time (1.2 s against 1.06 s for 1,000 tools; docs/benchmarks.md,
/// "A sitting on a faster host").
const EMBED_BATCH: usize = 16;

/// How much each signal counts (tuned on G1_instruction; docs/benchmarks.md).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ListWeights {
    /// BM25 of the latest user message.
    pub lexical: f32,
    /// BM25 of earlier user messages.
    pub earlier: f32,
    /// Dense cosine of the latest user message (0: lexical only).
    pub dense: f32,
    /// BM25 of each intent of the latest message.
    pub intent: f32,
    /// The graph's transition weight from the last tool called, as a
    /// first-rank list of this weight would count.
    pub graph: f32,
    pub rrf_k: f32,
}

impl Default for ListWeights {
    fn default() -> ListWeights {
        ListWeights { lexical: 1.0, earlier: 0.5, dense: 1.0, intent: 0.5, graph: 1.0, rrf_k: super::RRF_K }
    }
}

/// What the ranker reads of a conversation.
#[derive(Debug, Default, Clone, Copy)]
pub struct Conversation<'a> {
    /// The latest user message's text.
    pub latest: &'a str,
    /// The earlier user messages' text.
    pub earlier: &'a str,
    /// Tools the assistant called, in order.
    pub called: &'a [String],
    /// The `tool_choice` target.
    pub forced: Option<&'a str>,
}

/// A tool list's index, built once per list.
pub struct ListIndex {
    names: Vec<String>,
    texts: Vec<String>,
    bm25: Bm25,
    /// Tools by the words of their name.
    name_index: NameIndex,
    /// One vector per tool, flattened; set once the list is embedded.
    vectors: OnceLock<(String, Vec<f32>)>,
    embedding: AtomicBool,
}

impl ListIndex {
    fn build(names: Vec<String>, texts: Vec<String>) -> ListIndex {
        let mut name_index = NameIndex::default();
        for (i, name) in names.iter().enumerate() {
            name_index.insert(name, i as u32, 1);
        }
        let bm25 = Bm25::build(&texts);
        ListIndex { names, texts, bm25, name_index, vectors: OnceLock::new(), embedding: AtomicBool::new(false) }
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Whether the list's tools have vectors from the model `model_id`.
    pub fn embedded_by(&self, model_id: &str) -> bool {
        self.vectors.get().is_some_and(|(id, _)| id == model_id)
    }
}

/// Ranks tool lists; keeps their indexes and vectors.
pub struct ToolListRanker {
    lists: Mutex<LruCache<u64, Arc<ListIndex>>>,
    tool_vectors: Arc<Mutex<LruCache<u64, Arc<[f32]>>>>,
    query_vectors: Mutex<LruCache<u64, Arc<[f32]>>>,
    /// A list is being embedded in the background.
    busy: Arc<AtomicBool>,
}

impl Default for ToolListRanker {
    fn default() -> ToolListRanker {
        fn lru<T>(n: usize) -> LruCache<u64, T> {
            LruCache::new(NonZeroUsize::new(n).expect("not zero"))
        }
        ToolListRanker {
            lists: Mutex::new(lru(LISTS)),
            tool_vectors: Arc::new(Mutex::new(lru(TOOL_VECTORS))),
            query_vectors: Mutex::new(lru(QUERY_VECTORS)),
            busy: Arc::new(AtomicBool::new(false)),
        }
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
    /// The index of a tool list (`names[i]`, `texts[i]`: tool `i`), from
    /// the cache or built now.
    pub fn index(&self, names: &[&str], texts: &[&str]) -> Arc<ListIndex> {
        let mut h = std::hash::DefaultHasher::new();
        for (n, t) in names.iter().zip(texts) {
            n.hash(&mut h);
            t.hash(&mut h);
        }
        let key = h.finish();
        if let Some(index) = locked(&self.lists).get(&key) {
            return index.clone();
        }
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        let index = Arc::new(ListIndex::build(own(names), own(texts)));
        locked(&self.lists).put(key, index.clone());
        index
    }

    /// Starts embedding `index`'s tools on a background thread, unless it
    /// is embedded or another list is being embedded (a later request
    /// carrying the list asks again).
    pub fn embed_in_background(&self, index: &Arc<ListIndex>, embedder: &Arc<Embedder>) {
        if index.embedded_by(embedder.id()) || self.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        if index.embedding.swap(true, Ordering::AcqRel) {
            self.busy.store(false, Ordering::Release);
            return;
        }
        let (index, embedder) = (index.clone(), embedder.clone());
        let (vectors, busy) = (self.tool_vectors.clone(), self.busy.clone());
        let started = std::thread::Builder::new().name("embed-tool-list".into()).spawn(move || {
            if let Err(e) = embed_list(&index, &embedder, &vectors) {
                tracing::warn!(error = %e, "embedding a tool list failed; it is ranked lexically");
            }
            index.embedding.store(false, Ordering::Release);
            busy.store(false, Ordering::Release);
        });
        if started.is_err() {
            self.busy.store(false, Ordering::Release);
        }
    }

    /// Embeds `index`'s tools now (what the background thread runs).
    pub fn embed_now(&self, index: &ListIndex, embedder: &Embedder) -> Result<(), super::EmbedError> {
        embed_list(index, embedder, &self.tool_vectors)
    }

    /// The vector of a user message, from the cache or embedded now
    /// (blocking: call it off the async threads).
    pub fn query_vector(&self, embedder: &Embedder, text: &str) -> Result<Arc<[f32]>, super::EmbedError> {
        let key = hash_of(embedder.id(), text);
        if let Some(v) = locked(&self.query_vectors).get(&key) {
            return Ok(v.clone());
        }
        let v: Arc<[f32]> = embedder.embed_queries(&[text.to_string()])?.remove(0).into();
        locked(&self.query_vectors).put(key, v.clone());
        Ok(v)
    }

    /// The cached vector of a user message, if any.
    pub fn cached_query_vector(&self, embedder: &Embedder, text: &str) -> Option<Arc<[f32]>> {
        locked(&self.query_vectors).get(&hash_of(embedder.id(), text)).cloned()
    }
}

fn embed_list(
    index: &ListIndex,
    embedder: &Embedder,
    cache: &Mutex<LruCache<u64, Arc<[f32]>>>,
) -> Result<(), super::EmbedError> {
    let keys: Vec<u64> = index.texts.iter().map(|t| hash_of(embedder.id(), t)).collect();
    let mut found: HashMap<u64, Arc<[f32]>> = HashMap::new();
    {
        let mut cache = locked(cache);
        for k in &keys {
            if let Some(v) = cache.get(k) {
                found.insert(*k, v.clone());
            }
        }
    }
    let mut missing: Vec<usize> = (0..keys.len()).filter(|i| !found.contains_key(&keys[*i])).collect();
    missing.sort_by_key(|&i| index.texts[i].len());
    for chunk in missing.chunks(EMBED_BATCH) {
        let texts: Vec<String> = chunk.iter().map(|&i| index.texts[i].clone()).collect();
        let vectors = embedder.embed_documents(&texts)?;
        let mut cache = locked(cache);
        for (&i, v) in chunk.iter().zip(vectors) {
            let v: Arc<[f32]> = v.into();
            cache.put(keys[i], v.clone());
            found.insert(keys[i], v);
        }
    }
    let flat: Vec<f32> = keys.iter().flat_map(|k| found[k].iter().copied()).collect();
    let _ = index.vectors.set((embedder.id().to_string(), flat));
    Ok(())
}

/// Adds `weight / (rrf_k + rank)` for each hit.
fn add_ranks(scores: &mut [f32], hits: &[(u32, f32)], weight: f32, rrf_k: f32) {
    for (rank, (doc, _)) in hits.iter().enumerate() {
        scores[*doc as usize] += weight / (rrf_k + rank as f32 + 1.0);
    }
}

/// Indexes of the `k` tools to offer, in the list's order. `query`: the
/// latest message's vector when the list is embedded by the same model
/// (else the ranking is lexical). `weight(from, to)`: the tool graph's
/// transition weight.
pub fn keep(
    index: &ListIndex,
    conversation: &Conversation,
    query: Option<&[f32]>,
    k: usize,
    weights: &ListWeights,
    weight: &dyn Fn(&str, &str) -> f64,
) -> Vec<usize> {
    let n = index.len();
    if n <= k {
        return (0..n).collect();
    }
    let scores = scores(index, conversation, query, weights, weight);
    // Pinned first: called tools and the forced one, then tools named in the message.
    let must: HashSet<&str> = conversation.called.iter().map(String::as_str).chain(conversation.forced).collect();
    let mut rank: Vec<u32> = vec![u32::MAX; n];
    let mut next = 0;
    for (i, name) in index.names.iter().enumerate() {
        if must.contains(name.as_str()) {
            rank[i] = next;
            next += 1;
        }
    }
    let kept = k.max(next as usize);
    for t in index.name_index.found_in(conversation.latest).into_iter().take(k.div_ceil(4)) {
        if rank[t as usize] == u32::MAX {
            rank[t as usize] = next;
            next += 1;
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| rank[a].cmp(&rank[b]).then(scores[b].total_cmp(&scores[a])).then(a.cmp(&b)));
    order.truncate(kept);
    order.sort_unstable();
    order
}

/// Every tool's fused score.
fn scores(
    index: &ListIndex,
    conversation: &Conversation,
    query: Option<&[f32]>,
    w: &ListWeights,
    weight: &dyn Fn(&str, &str) -> f64,
) -> Vec<f32> {
    let n = index.len();
    let mut scores = vec![0f32; n];
    let lexical = |text: &str| index.bm25.search(text, n, None);
    add_ranks(&mut scores, &lexical(conversation.latest), w.lexical, w.rrf_k);
    if !conversation.earlier.is_empty() && w.earlier > 0.0 {
        add_ranks(&mut scores, &lexical(conversation.earlier), w.earlier, w.rrf_k);
    }
    if w.intent > 0.0 {
        for intent in intents::split(conversation.latest) {
            add_ranks(&mut scores, &lexical(&intent), w.intent, w.rrf_k);
        }
    }
    if let (Some(q), Some((_, vectors))) = (query.filter(|_| w.dense > 0.0), index.vectors.get()) {
        let dims = q.len();
        let mut hits: Vec<(u32, f32)> =
            vectors.chunks_exact(dims).enumerate().map(|(i, v)| (i as u32, dot(q, v))).collect();
        super::bm25::top_k(&mut hits, n);
        add_ranks(&mut scores, &hits, w.dense, w.rrf_k);
    }
    if let Some(from) = conversation.called.last() {
        let top = w.graph / (w.rrf_k + 1.0);
        for (i, name) in index.names.iter().enumerate() {
            scores[i] += top * weight(from, name) as f32;
        }
    }
    scores
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_tool_is_kept_even_without_other_evidence() {
        let mut names: Vec<String> = (0..40).map(|i| format!("weather_tool_{i}")).collect();
        names.push("zzqx_frobnicate".into());
        let texts: Vec<String> = names.iter().map(|n| format!("{n} weather forecast")).collect();
        let index = ListIndex::build(names.clone(), texts);
        let conversation = Conversation { latest: "weather forecast, then ZzqxFrobnicate it", ..Default::default() };
        let kept = keep(&index, &conversation, None, 3, &ListWeights::default(), &|_, _| 0.0);
        assert!(kept.contains(&40), "{kept:?}");
        assert_eq!(kept.len(), 3);
    }

    #[test]
    fn a_conversation_without_user_text_keeps_k_tools_and_the_called_ones() {
        let names: Vec<String> = (0..30).map(|i| format!("tool_{i}")).collect();
        let texts: Vec<String> = names.iter().map(|n| format!("{n} 天気予報")).collect();
        let index = ListIndex::build(names, texts);
        let called = vec!["tool_29".to_string()];
        let conversation = Conversation { latest: "", earlier: "", called: &called, forced: Some("tool_17") };
        let kept = keep(&index, &conversation, None, 5, &ListWeights::default(), &|_, _| 0.0);
        assert_eq!(kept.len(), 5);
        assert!(kept.contains(&29) && kept.contains(&17), "{kept:?}");
    }
}
