//! Embedding a tool list's tools: each tool once, whatever list it came
//! in ([`ToolVectors`]), inline while that fits a request's time budget
//! ([`ToolListRanker::embed_missing`]) or on a background thread
//! ([`ToolListRanker::embed_in_background`]); vectors another replica
//! embedded come in through [`ToolListRanker::insert`], and those
//! embedded here go out through [`ToolListRanker::on_embedded`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::{ListIndex, ListVectors, ToolListRanker, ToolSet, locked};
use crate::retrieval::EmbedError;
use crate::retrieval::cache::{Key, key};
use crate::retrieval::embedder::{Embedder, Role};
use crate::retrieval::tool_vectors::ToolVectors;

/// Tools embedded per model call. 16 rather than 32: embedding a
/// first-seen 1,000-tool list took `serve` to 155 MB at peak (120 MB
/// after) with 32, 119–126 MB (96 after) with 16, for about 15% more time
/// (docs/benchmarks.md, "A sitting on a faster host"). Inline embedding
/// checks its time budget between batches, so a batch is also the step
/// by which it may overrun the budget.
const EMBED_BATCH: usize = 16;
/// Characters of a tool's text that are embedded (the BM25 index reads it
/// all). 250 rather than the whole text (up to the model's 128 tokens):
/// 50 new tools embed in 0.28–0.35 s instead of 0.70–0.83 s, and route
/// mode kept the needed tools as often on the development sets (0.894 /
/// 0.790 against 0.893 / 0.790 at 300 → 5; docs/benchmarks.md, "Tools,
/// not lists").
const EMBEDDED_CHARS: usize = 250;
/// What one tool text is assumed to cost to embed before any was timed.
const FIRST_ESTIMATE: Duration = Duration::from_millis(6);

/// Called with the vectors of each batch of tools embedded here (to share
/// them with other replicas).
pub(crate) type OnEmbedded = dyn Fn(Vec<(Key, Arc<[f32]>)>) + Send + Sync;

/// What the background embedding thread shares with the ranker.
pub(super) struct Shared {
    store: ToolVectors,
    on_embedded: OnceLock<Arc<OnEmbedded>>,
    /// What embedding costs, in nanoseconds per [`cost_units`] (a running average).
    unit_ns: AtomicU64,
    /// A set is being embedded in the background.
    busy: AtomicBool,
}

/// What a text counts for in embedding time: a fixed part, and its
/// characters up to what the model reads of it.
fn cost_units(text: &str) -> u64 {
    64 + text.len().min(640) as u64
}

/// A tool text's key in the tool vectors (of the part embedded).
fn key_of(embedder: &Embedder, text: &str) -> Key {
    key(embedder.id(), &embedder.as_read(Role::Document, embedded_part(text)))
}

/// What of a tool's text is embedded: its first [`EMBEDDED_CHARS`]
/// characters (name, description, then parameters), cut at a word.
fn embedded_part(text: &str) -> &str {
    let Some((cut, _)) = text.char_indices().nth(EMBEDDED_CHARS) else { return text };
    let head = &text[..cut];
    head.rfind(char::is_whitespace).map_or(head, |at| &head[..at])
}

impl ToolListRanker {
    /// Calls `hook` with the vectors of every batch of tools embedded from
    /// now on (set once; later calls are ignored).
    pub(crate) fn on_embedded(&self, hook: Arc<OnEmbedded>) {
        let _ = self.shared.on_embedded.set(hook);
    }

    /// The keys of `set`'s tools without a vector under `embedder`'s model
    /// (each once): what another replica may have embedded.
    pub(crate) fn missing_keys(&self, set: &ToolSet, embedder: &Embedder) -> Vec<Key> {
        let vectors = self.vectors(set, embedder);
        let mut keys: Vec<Key> = set
            .index
            .texts
            .iter()
            .zip(&vectors.present)
            .filter(|(_, p)| !**p)
            .map(|(t, _)| key_of(embedder, t))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Keeps vectors embedded elsewhere, under `embedder`'s model (those
    /// of another length are left out).
    pub(crate) fn insert(&self, embedder: &Embedder, entries: Vec<(Key, Vec<f32>)>) {
        let dims = embedder.dims();
        let entries: Vec<_> = entries.into_iter().filter(|(_, v)| v.len() == dims).collect();
        if !entries.is_empty() {
            self.shared.store.put(embedder.id(), entries);
        }
    }

    /// The vectors `set`'s tools have under `embedder`'s model now.
    pub(crate) fn vectors(&self, set: &ToolSet, embedder: &Embedder) -> Arc<ListVectors> {
        gather(&self.shared.store, &set.index, embedder)
    }

    /// Embeds `set`'s tools that have no vector yet, shortest first, while
    /// the next batch is expected to end within `budget` (blocking: call it
    /// off the async threads); returns the vectors then known.
    pub(crate) fn embed_missing(
        &self,
        set: &ToolSet,
        embedder: &Embedder,
        budget: Duration,
    ) -> Result<Arc<ListVectors>, EmbedError> {
        let started = Instant::now();
        let vectors = self.vectors(set, embedder);
        if vectors.missing == 0 || budget.is_zero() {
            return Ok(vectors);
        }
        let texts = missing_texts(&set.index, &vectors);
        let mut done = 0;
        for batch in texts.chunks(EMBED_BATCH) {
            let units: u64 = batch.iter().map(|t| cost_units(t)).sum();
            let expected = Duration::from_nanos(units * self.shared.unit_ns.load(Ordering::Relaxed));
            if started.elapsed() + expected > budget {
                break;
            }
            self.shared.embed(embedder, batch)?;
            done += batch.len();
        }
        Ok(if done == 0 { vectors } else { self.vectors(set, embedder) })
    }

    /// Starts embedding `set`'s missing tools on a background thread,
    /// unless another set is being embedded (a later request carrying the
    /// set asks again).
    pub(crate) fn embed_in_background(&self, set: &ToolSet, embedder: &Arc<Embedder>) {
        if self.shared.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        if set.index.embedding.swap(true, Ordering::AcqRel) {
            self.shared.busy.store(false, Ordering::Release);
            return;
        }
        let (index, embedder, shared) = (set.index.clone(), embedder.clone(), self.shared.clone());
        let started = std::thread::Builder::new().name("embed-tool-list".into()).spawn(move || {
            let vectors = gather(&shared.store, &index, &embedder);
            for batch in missing_texts(&index, &vectors).chunks(EMBED_BATCH) {
                if let Err(e) = shared.embed(&embedder, batch) {
                    tracing::warn!(error = %e, "embedding a tool list failed; its tools are ranked by words");
                    break;
                }
            }
            gather(&shared.store, &index, &embedder);
            index.embedding.store(false, Ordering::Release);
            shared.busy.store(false, Ordering::Release);
        });
        if started.is_err() {
            set.index.embedding.store(false, Ordering::Release);
            self.shared.busy.store(false, Ordering::Release);
        }
    }
}

impl Shared {
    pub(super) fn new(store: ToolVectors) -> Shared {
        let unit_ns = FIRST_ESTIMATE.as_nanos() as u64 / cost_units(&" ".repeat(200));
        Shared { store, on_embedded: OnceLock::new(), unit_ns: AtomicU64::new(unit_ns), busy: AtomicBool::new(false) }
    }

    /// Tool vectors held.
    pub(super) fn held(&self) -> usize {
        self.store.len()
    }

    /// Embeds `texts` and keeps their vectors; times it.
    fn embed(&self, embedder: &Embedder, texts: &[String]) -> Result<(), EmbedError> {
        let started = Instant::now();
        let vectors = embedder.embed_documents(texts)?;
        let units: u64 = texts.iter().map(|t| cost_units(t)).sum();
        let measured = started.elapsed().as_nanos() as u64 / units.max(1);
        let old = self.unit_ns.load(Ordering::Relaxed);
        self.unit_ns.store((3 * old + measured) / 4, Ordering::Relaxed);
        let entries: Vec<(Key, Vec<f32>)> = texts.iter().map(|t| key_of(embedder, t)).zip(vectors).collect();
        if let Some(hook) = self.on_embedded.get() {
            hook(entries.iter().map(|(k, v)| (*k, Arc::from(v.as_slice()))).collect());
        }
        self.store.put(embedder.id(), entries);
        Ok(())
    }
}

/// The vectors of `index`'s tools held in `store` (the index's own copy
/// when it is complete), kept as the index's copy.
fn gather(store: &ToolVectors, index: &ListIndex, embedder: &Embedder) -> Arc<ListVectors> {
    let held = locked(&index.vectors).clone();
    if let Some(v) = held.filter(|v| v.model == embedder.id() && v.missing == 0) {
        return v;
    }
    let dims = embedder.dims();
    let keys: Vec<Key> = index.texts.iter().map(|t| key_of(embedder, t)).collect();
    let found = store.get(embedder.id(), dims, &keys);
    let mut flat = vec![0f32; index.len() * dims];
    let mut present = vec![false; index.len()];
    for (i, v) in found.iter().enumerate() {
        if let Some(v) = v.as_ref().filter(|v| v.len() == dims) {
            flat[i * dims..(i + 1) * dims].copy_from_slice(v);
            present[i] = true;
        }
    }
    let missing = present.iter().filter(|p| !**p).count();
    let model = embedder.id().to_string();
    let vectors = Arc::new(ListVectors { model, dims, flat, keys, present, missing });
    *locked(&index.vectors) = Some(vectors.clone());
    vectors
}

/// The texts of `index`'s tools without a vector, shortest first, each once.
fn missing_texts(index: &ListIndex, vectors: &ListVectors) -> Vec<String> {
    let mut texts: Vec<&str> =
        index.texts.iter().zip(&vectors.present).filter(|(_, p)| !**p).map(|(t, _)| embedded_part(t)).collect();
    texts.sort_by(|a, b| a.len().cmp(&b.len()).then(a.cmp(b)));
    texts.dedup();
    texts.into_iter().map(str::to_string).collect()
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_tool_text_is_embedded_up_to_a_word_within_the_limit() {
        assert_eq!(embedded_part("get_weather The weather"), "get_weather The weather");
        let long = "word ".repeat(100) + "天気".repeat(200).as_str();
        let part = embedded_part(&long);
        assert!(part.chars().count() <= EMBEDDED_CHARS && part.ends_with("word"), "{part}");
        let cjk = "天気".repeat(200);
        assert_eq!(embedded_part(&cjk).chars().count(), EMBEDDED_CHARS, "no space: cut at the limit");
    }
}
