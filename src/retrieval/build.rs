//! Building a search index: embed every document (through the cache),
//! index the documents for BM25, build the HNSW graph.
//!
//! Documents whose vectors are not cached are embedded in chunks of
//! `embedding.batch_size`, which bounds memory, and each chunk is appended
//! to the cache before the next starts, so an interrupted build resumes
//! where it stopped. Progress goes to a bar with ETA on a terminal, and to
//! the log (every 10%, with the time left) otherwise.

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
use super::progress::Progress;
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

/// The stage of embedding a catalog's documents.
const BUILDING: &str = "building the search index";

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
    shown.count(BUILDING, missing.iter().map(|&i| work(i)).sum());
    let workers = if missing.len() > config.batch_size { embedder.workers()? } else { Vec::new() };
    let progress = progress_bar(missing.len());
    let mut logged = 0;
    for chunk in missing.chunks(config.batch_size.max(1)) {
        let texts: Vec<String> = chunk.iter().map(|&i| documents[i].clone()).collect();
        let vectors = embedder.embed_documents_with(&workers, &texts)?;
        let entries: Vec<(cache::Key, Vec<f32>)> = chunk.iter().map(|&i| keys[i]).zip(vectors).collect();
        cache.put(&entries).map_err(io(format!("writing the embedding cache {}", cache.path().display())))?;
        progress.inc(chunk.len() as u64);
        shown.advance(chunk.iter().map(|&i| work(i)).sum());
        if progress.is_hidden() {
            // No bar on a terminal: the log says each tenth instead.
            shown.log_tenths(&mut logged);
        }
    }
    progress.finish_and_clear();
    drop(workers);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counted_stage_says_its_share_and_time_left() {
        let progress = Progress::default();
        assert_eq!(progress.report().to_string(), "starting");
        progress.count("embedding remembered runs again", 200);
        let report = progress.report();
        assert_eq!((report.percent, report.eta_s), (Some(0), None), "no estimate before any work is done");
        progress.advance(50);
        let report = progress.report();
        assert_eq!(report.percent, Some(25));
        assert!(report.eta_s.is_some());
        assert!(
            report.to_string().starts_with("embedding remembered runs again, 25% done, ready in about "),
            "{report}"
        );
        let mut logged = 0;
        progress.log_tenths(&mut logged);
        assert_eq!(logged, 2, "the tenths crossed are remembered");
        progress.set_stage("loading the tool graph");
        assert_eq!(progress.report().to_string(), "loading the tool graph", "another stage is not counted");
    }
}
