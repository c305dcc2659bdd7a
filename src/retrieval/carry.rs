//! A changed catalog's index made from the index in use, in well under a
//! second, so that APIs added, changed or removed (a downstream server's
//! `list_changed`) are searched as they are at once.
//!
//! An API whose function name and documents are unchanged keeps its vector
//! and BM25 postings; a new or changed one is embedded (through the
//! embedding cache) and tokenized. The HNSW graph is not rebuilt: it is
//! shared, its removed points skipped and the APIs it lacks scanned exactly
//! beside it ([`Dense::carry_over`]). Such an index is provisional
//! ([`Retriever::provisional`]): the engine builds the full one in the
//! background and swaps it in.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use super::bm25::Carried;
use super::cache::{self, EmbeddingCache};
use super::dense::Dense;
use super::document::{self, Documents};
use super::embedder::Role;
use super::index_files::{self, Index};
use super::tools::tool_documents_of;
use super::{Embedder, RetrievalError, Retriever};
use crate::catalog::Catalog;
use crate::config::Config;

/// What each API's and each tool's indexed text was made from, to tell
/// what a changed catalog kept without making the old texts again: per API
/// a hash of its function name and documents, per tool a hash of its name,
/// description, category and its APIs' hashes (what its BM25 document is
/// made of). 64-bit SipHash: in a catalog of 50,000 APIs the chance that
/// two texts share one is about 1e-10.
#[derive(Debug, Default)]
pub(super) struct Fingerprints {
    apis: Vec<u64>,
    tools: Vec<u64>,
}

impl Fingerprints {
    pub(super) fn of(catalog: &Catalog, docs: &Documents) -> Fingerprints {
        let apis: Vec<u64> = (0..docs.dense.len())
            .map(|i| hash((&catalog.apis()[i].function_name, &docs.dense[i], &docs.lexical[i])))
            .collect();
        let mut tools: Vec<DefaultHasher> = catalog
            .tools()
            .iter()
            .map(|t| {
                let mut h = DefaultHasher::new();
                (&t.name, &t.description, &t.category).hash(&mut h);
                h
            })
            .collect();
        for (api, fingerprint) in catalog.apis().iter().zip(&apis) {
            fingerprint.hash(&mut tools[api.tool.0 as usize]);
        }
        Fingerprints { apis, tools: tools.iter().map(Hasher::finish).collect() }
    }
}

fn hash(value: impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// Per item of `new`, the item of `old` with the same fingerprint, if any;
/// each old item is kept once (two tools alike in every word are two
/// documents, the second made anew).
fn kept(old: &[u64], new: &[u64]) -> Vec<Option<u32>> {
    let mut by_fingerprint: HashMap<u64, u32> = old.iter().enumerate().map(|(i, f)| (*f, i as u32)).collect();
    new.iter().map(|f| by_fingerprint.remove(f)).collect()
}

impl Retriever {
    /// The index of `catalog`, a changed version of this retriever's
    /// catalog, made from this one (see the module's documentation). Its
    /// parts are made side by side: on 2 cores that halves the time.
    pub fn carry_over(&self, catalog: Arc<Catalog>, config: &Config) -> Result<Retriever, RetrievalError> {
        let started = std::time::Instant::now();
        let docs = document::documents(&catalog);
        let fingerprints = Fingerprints::of(&catalog, &docs);
        let old_of_new = kept(&self.fingerprints.apis, &fingerprints.apis);
        let old_tool_of_new = kept(&self.fingerprints.tools, &fingerprints.tools);
        let (bm25, tools, dense, hash) = std::thread::scope(|scope| {
            let bm25 = scope.spawn(|| {
                let lexical: Vec<Carried<'_>> = old_of_new
                    .iter()
                    .zip(&docs.lexical)
                    .map(|(old, text)| old.map_or(Carried::New(text), Carried::Kept))
                    .collect();
                self.index.bm25.carry_over(&lexical)
            });
            let tools = scope.spawn(|| {
                let new_docs = tool_documents_of(&catalog, &old_tool_of_new);
                let carried: Vec<Carried<'_>> = old_tool_of_new
                    .iter()
                    .enumerate()
                    .map(|(t, old)| old.map_or_else(|| Carried::New(&new_docs[&t]), Carried::Kept))
                    .collect();
                self.index.tools.carry_over(&carried)
            });
            let dense = match &self.embedder {
                // An index without vectors (lexical mode, or the dense index
                // still being built) stays without.
                Some(embedder) if !self.index.dense.is_empty() => self
                    .vectors(embedder, &docs, &old_of_new, config)
                    .map(|vectors| self.index.dense.carry_over(vectors, &old_of_new)),
                _ => Ok(Dense::new(1, Vec::new(), None)),
            };
            let hash = document::catalog_hash(&catalog, &docs);
            let joined = |panicked| std::panic::resume_unwind(panicked);
            Ok::<_, RetrievalError>((
                bm25.join().unwrap_or_else(joined),
                tools.join().unwrap_or_else(joined),
                dense?,
                hash,
            ))
        })?;
        let dir = index_files::index_dir(&config.state.dir(), &hash);
        let kept = old_of_new.iter().flatten().count();
        let (apis, removed) = (docs.dense.len(), self.fingerprints.apis.len() - kept);
        let index = Index { dense, bm25, tools };
        let retriever =
            Retriever::assemble(catalog, config, self.embedder.clone(), index, dir, None, self.dense_pending);
        let ms = started.elapsed().as_millis() as u64;
        tracing::info!(
            apis,
            kept,
            new = apis - kept,
            removed,
            ms,
            "the search index carried over to the changed catalog"
        );
        Ok(retriever.with(fingerprints))
    }

    /// This retriever, knowing what its index was made from.
    pub(super) fn with(mut self, fingerprints: Fingerprints) -> Retriever {
        self.fingerprints = fingerprints;
        self
    }

    /// Whether this index is makeshift: BM25 alone while the dense index is
    /// built, or carried over from another catalog. The full index should be
    /// built in the background ([`Retriever::open_with`]).
    pub fn provisional(&self) -> bool {
        self.dense_pending || self.index.dense.is_carried()
    }

    /// Every new document's vector: an unchanged API's from this index, the
    /// rest from the embedding cache or embedded now (and cached).
    fn vectors(
        &self,
        embedder: &Embedder,
        docs: &Documents,
        old_of_new: &[Option<u32>],
        config: &Config,
    ) -> Result<Vec<f32>, RetrievalError> {
        let dims = self.index.dense.dims();
        let missing: Vec<usize> = (0..docs.dense.len()).filter(|&i| old_of_new[i].is_none()).collect();
        let mut fresh: HashMap<usize, Vec<f32>> = HashMap::new();
        if !missing.is_empty() {
            // Keyed as the index build keys them, so that it finds them.
            let keys: Vec<cache::Key> = missing.iter().map(|&i| cache::key(embedder.id(), &docs.dense[i])).collect();
            let dir = config.embedding.cache_dir();
            let mut cache = EmbeddingCache::open_for(&dir, embedder.id(), dims, &keys).map_err(|source| {
                RetrievalError::Io { context: format!("opening the embedding cache in {}", dir.display()), source }
            })?;
            let texts: Vec<String> = missing.iter().map(|&i| docs.dense[i].clone()).collect();
            let batch = config.embedding.batch_size;
            let embedded = cache::embed_keyed(&mut cache, embedder, Role::Document, &texts, &keys, batch, None)?;
            fresh.extend(missing.iter().copied().zip(embedded));
        }
        let old = self.index.dense.vectors();
        let mut vectors = Vec::with_capacity(docs.dense.len() * dims);
        for (i, kept) in old_of_new.iter().enumerate() {
            match kept {
                Some(o) => vectors.extend_from_slice(&old[*o as usize * dims..(*o as usize + 1) * dims]),
                None => vectors.extend_from_slice(&fresh[&i]),
            }
        }
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_item_is_kept_once() {
        assert_eq!(kept(&[7, 8, 9], &[9, 1, 7]), [Some(2), None, Some(0)]);
        assert_eq!(kept(&[5, 5], &[5, 5, 5]), [Some(1), None, None], "alike items: the second made anew");
    }
}
