//! Building a search index: embed every document (through the cache),
//! index the documents for BM25, build the HNSW graph.
//!
//! Documents whose vectors are not cached are embedded in chunks of
//! `embedding.batch_size`, which bounds memory, and each chunk is appended
//! to the cache before the next starts, so an interrupted build resumes
//! where it stopped. Progress goes to a bar with ETA on a terminal, and to
//! the log (every 10%) otherwise.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use super::RetrievalError;
use super::bm25::Bm25;
use super::cache::{self, EmbeddingCache};
use super::dense::Dense;
use super::document::Documents;
use super::embedder::Embedder;
use super::index_files::Index;
use super::tools::tool_bm25;
use crate::catalog::Catalog;
use crate::config::EmbeddingConfig;

/// What building an index did and how long it took.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BuildReport {
    pub apis: usize,
    /// Documents embedded now (the rest came from the cache).
    pub embedded: usize,
    pub cached: usize,
    pub embed_secs: f64,
    pub bm25_secs: f64,
    pub hnsw_secs: f64,
    pub total_secs: f64,
}

/// What a long start is doing and how far it has got, for a face to say
/// while the engine loads ("building the search index, 37% done, ready in
/// about 520 s"). Updated by whoever is loading; read from any thread.
#[derive(Debug, Default)]
pub struct Progress {
    stage: Mutex<&'static str>,
    /// Work to embed, and embedded so far (documents weighed by length).
    total: AtomicUsize,
    done: AtomicUsize,
    embedding_since: Mutex<Option<Instant>>,
}

/// A reading of [`Progress`].
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressReport {
    pub stage: &'static str,
    /// While embedding: the share done, 0-100.
    pub percent: Option<u32>,
    /// While embedding, once a batch is done: seconds left, at the rate so far.
    pub eta_s: Option<u64>,
}

impl Progress {
    pub fn set_stage(&self, stage: &'static str) {
        *self.stage.lock().unwrap_or_else(|e| e.into_inner()) = stage;
    }

    fn embedding(&self, total: usize) {
        self.set_stage("building the search index");
        self.total.store(total, Ordering::Relaxed);
        self.done.store(0, Ordering::Relaxed);
        *self.embedding_since.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    fn embedded(&self, n: usize) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }

    pub fn report(&self) -> ProgressReport {
        let stage = *self.stage.lock().unwrap_or_else(|e| e.into_inner());
        let since = *self.embedding_since.lock().unwrap_or_else(|e| e.into_inner());
        let (total, done) = (self.total.load(Ordering::Relaxed), self.done.load(Ordering::Relaxed));
        let embedding = since.is_some() && stage == "building the search index" && total > 0;
        let percent = embedding.then(|| (done * 100 / total) as u32);
        let eta_s = since.filter(|_| embedding && done > 0).map(|since| {
            let rate = done as f64 / since.elapsed().as_secs_f64().max(1e-3);
            ((total - done.min(total)) as f64 / rate).ceil() as u64
        });
        ProgressReport { stage, percent, eta_s }
    }
}

impl std::fmt::Display for ProgressReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.stage.is_empty() { "starting" } else { self.stage })?;
        if let Some(p) = self.percent {
            write!(f, ", {p}% done")?;
        }
        match self.eta_s {
            Some(s) => write!(f, ", ready in about {s} s"),
            None => Ok(()),
        }
    }
}

pub(super) fn build(
    catalog: &Catalog,
    documents: &Documents,
    embedder: &Embedder,
    config: &EmbeddingConfig,
    shown: &Progress,
) -> Result<(Index, BuildReport), RetrievalError> {
    let (lexical, documents) = (&documents.lexical, &documents.dense);
    let started = Instant::now();
    let cache_dir = config.cache_dir();
    let io = |context: String| move |source| RetrievalError::Io { context, source };
    let keys: Vec<cache::Key> = documents.iter().map(|d| cache::key(embedder.id(), d)).collect();
    let mut cache = EmbeddingCache::open_for(&cache_dir, embedder.id(), embedder.dims(), &keys)
        .map_err(io(format!("opening the embedding cache in {}", cache_dir.display())))?;
    let mut missing: Vec<usize> = (0..documents.len()).filter(|&i| cache.get(&keys[i]).is_none()).collect();
    // A batch is padded to its longest text: embedding texts of similar
    // length together is several times faster than catalog order.
    missing.sort_by_key(|&i| documents[i].len());
    tracing::info!(apis = documents.len(), to_embed = missing.len(), cache = %cache.path().display(), "building the search index");

    let embed_started = Instant::now();
    // Progress counts work, not documents: they come shortest first, so a
    // count of documents would promise the end far too soon. A document's
    // work is its length up to what the model reads (`max_length` tokens,
    // about four characters each).
    let read = config.max_length.max(1) * 4;
    let work = |i: usize| documents[i].len().min(read) + 1;
    shown.embedding(missing.iter().map(|&i| work(i)).sum());
    let progress = progress_bar(missing.len());
    let mut logged = 0;
    for chunk in missing.chunks(config.batch_size.max(1)) {
        let texts: Vec<String> = chunk.iter().map(|&i| documents[i].clone()).collect();
        let vectors = embedder.embed_documents(&texts)?;
        let entries: Vec<(cache::Key, Vec<f32>)> = chunk.iter().map(|&i| keys[i]).zip(vectors).collect();
        cache.put(&entries).map_err(io(format!("writing the embedding cache {}", cache.path().display())))?;
        progress.inc(chunk.len() as u64);
        shown.embedded(chunk.iter().map(|&i| work(i)).sum());
        let done = progress.position() as usize;
        if progress.is_hidden() && done * 10 / missing.len().max(1) > logged {
            logged = done * 10 / missing.len().max(1);
            let left = shown.report().eta_s.map_or(String::new(), |s| format!(", about {s} s left"));
            tracing::info!(
                "embedded {done}/{} documents ({:.0} s{left})",
                missing.len(),
                embed_started.elapsed().as_secs_f64()
            );
        }
    }
    progress.finish_and_clear();
    let embed_secs = embed_started.elapsed().as_secs_f64();

    let mut vectors = Vec::with_capacity(documents.len() * embedder.dims());
    for key in &keys {
        vectors.extend_from_slice(cache.get(key).expect("every document is cached now"));
    }
    drop(cache);
    shown.set_stage("indexing the catalog's words and vectors");
    let bm25_started = Instant::now();
    let bm25 = Bm25::build(lexical);
    let tools = tool_bm25(catalog);
    let bm25_secs = bm25_started.elapsed().as_secs_f64();
    let hnsw_started = Instant::now();
    let mut dense = Dense::new(embedder.dims(), vectors, None);
    dense.build_hnsw();
    let hnsw_secs = hnsw_started.elapsed().as_secs_f64();
    let report = BuildReport {
        apis: documents.len(),
        embedded: missing.len(),
        cached: documents.len() - missing.len(),
        embed_secs,
        bm25_secs,
        hnsw_secs,
        total_secs: started.elapsed().as_secs_f64(),
    };
    tracing::info!(?report, "search index built");
    Ok((Index { dense, bm25, tools }, report))
}

/// A progress bar on stderr when it is a terminal; hidden otherwise.
fn progress_bar(len: usize) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("embedding {pos}/{len} [{wide_bar}] {elapsed} elapsed, ETA {eta}") {
        bar.set_style(style);
    }
    bar
}
