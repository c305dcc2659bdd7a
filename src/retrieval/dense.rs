//! Dense retrieval: cosine similarity between unit vectors, by exact scan
//! or through an instant-distance HNSW graph.
//!
//! Vectors are L2-normalized, so similarity is a dot product and HNSW's
//! distance is `1 - dot`. The exact scan is the reference (and the path
//! for filtered searches, whose candidate sets are small); the HNSW graph
//! answers unfiltered searches in a fraction of the time at a recall@10 the
//! benchmarks measure against the scan (docs/benchmarks.md).

use std::sync::Arc;

use instant_distance::{Builder, HnswMap, Search};
use serde::{Deserialize, Serialize};

use super::bm25::top_k;

/// HNSW `efConstruction`: neighbours considered while building.
pub(crate) const HNSW_EF_CONSTRUCTION: usize = 40;
/// HNSW `ef` at search time: candidates kept while searching (caps `k`).
pub(crate) const HNSW_EF_SEARCH: usize = 50;
/// Seed of the HNSW level generator, so builds are reproducible.
const HNSW_SEED: u64 = 42;

/// One vector as an HNSW point.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Point(pub(crate) Vec<f32>);

impl instant_distance::Point for Point {
    fn distance(&self, other: &Self) -> f32 {
        1.0 - dot(&self.0, &other.0)
    }
}

/// Dot product with eight independent accumulators, so the compiler can
/// vectorize it (a plain iterator sum cannot be reordered).
#[inline]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// The vectors of every document, and optionally an HNSW graph over them.
pub(crate) struct Dense {
    dims: usize,
    vectors: Vec<f32>,
    hnsw: Option<Arc<HnswMap<Point, u32>>>,
    /// Set when the graph was built for an earlier set of documents
    /// ([`Dense::carry_over`]).
    carried: Option<Remap>,
}

/// How a graph built for other documents serves these.
#[derive(Debug)]
struct Remap {
    /// Per graph value: the document it is now (`None`: removed or changed).
    from_graph: Vec<Option<u32>>,
    /// Documents the graph lacks, scanned exactly beside it.
    fresh: Vec<u32>,
    /// How many of the graph's points are gone: a search asks the graph
    /// for that many more, so that what is left still fills `k`.
    dropped: usize,
}

impl std::fmt::Debug for Dense {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dense")
            .field("dims", &self.dims)
            .field("len", &self.len())
            .field("hnsw", &self.hnsw.is_some())
            .finish()
    }
}

impl Dense {
    /// Vectors of `dims` floats each, concatenated; document `i` is the `i`-th.
    pub(crate) fn new(dims: usize, vectors: Vec<f32>, hnsw: Option<HnswMap<Point, u32>>) -> Dense {
        assert!(dims > 0 && vectors.len().is_multiple_of(dims), "vectors must be whole");
        Dense { dims, vectors, hnsw: hnsw.map(Arc::new), carried: None }
    }

    /// The dense index of new documents made from this one without building
    /// a graph: `vectors` are the new documents' (concatenated), and
    /// `old_of_new[d]` is the document of this index that new document `d`
    /// is unchanged from. The graph is shared; searches skip what it holds
    /// that is gone and scan the documents it lacks. Building the graph for
    /// ToolBench's 47,000 APIs takes a minute; this takes milliseconds,
    /// so a changed catalog is searched at once and the graph is rebuilt in
    /// the background (chosen over an HNSW crate that inserts and deletes
    /// in place: see docs/benchmarks.md, "A catalog that changes").
    pub(crate) fn carry_over(&self, vectors: Vec<f32>, old_of_new: &[Option<u32>]) -> Dense {
        let mut new_of_old: Vec<Option<u32>> = vec![None; self.len()];
        for (new, old) in old_of_new.iter().enumerate() {
            if let Some(old) = old {
                new_of_old[*old as usize] = Some(new as u32);
            }
        }
        let carried = self.hnsw.as_ref().map(|_| {
            let from_graph: Vec<Option<u32>> = match &self.carried {
                Some(remap) => remap.from_graph.iter().map(|d| d.and_then(|d| new_of_old[d as usize])).collect(),
                None => new_of_old.clone(),
            };
            let mut in_graph = vec![false; old_of_new.len()];
            for d in from_graph.iter().flatten() {
                in_graph[*d as usize] = true;
            }
            // The graph's values are its documents' ids, 0..n.
            Remap {
                dropped: from_graph.len() - from_graph.iter().flatten().count(),
                fresh: (0..old_of_new.len() as u32).filter(|&d| !in_graph[d as usize]).collect(),
                from_graph,
            }
        });
        let dense = Dense { dims: self.dims, vectors, hnsw: self.hnsw.clone(), carried };
        assert_eq!(dense.len(), old_of_new.len(), "a vector per document");
        dense
    }

    /// Whether the graph was built for other documents (searches work
    /// around it; it should be rebuilt).
    pub(crate) fn is_carried(&self) -> bool {
        self.carried.is_some()
    }

    /// Builds the HNSW graph (parallel, on every core).
    pub(crate) fn build_hnsw(&mut self) {
        self.carried = None;
        let points: Vec<Point> = self.vectors.chunks_exact(self.dims).map(|v| Point(v.to_vec())).collect();
        let ids: Vec<u32> = (0..points.len() as u32).collect();
        let builder =
            Builder::default().ef_construction(HNSW_EF_CONSTRUCTION).ef_search(HNSW_EF_SEARCH).seed(HNSW_SEED);
        self.hnsw = Some(Arc::new(builder.build(points, ids)));
    }

    pub(crate) fn dims(&self) -> usize {
        self.dims
    }

    pub(crate) fn len(&self) -> usize {
        self.vectors.len() / self.dims
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// The raw vectors (for persistence).
    pub(crate) fn vectors(&self) -> &[f32] {
        &self.vectors
    }

    /// The graph, when it was built for these documents (one carried over
    /// from others is never stored).
    pub(crate) fn hnsw(&self) -> Option<&HnswMap<Point, u32>> {
        if self.carried.is_some() {
            return None;
        }
        self.hnsw.as_deref()
    }

    /// The vector of document `i`.
    #[cfg(test)]
    pub(crate) fn vector(&self, i: usize) -> &[f32] {
        self.doc(i as u32)
    }

    fn doc(&self, d: u32) -> &[f32] {
        let i = d as usize;
        &self.vectors[i * self.dims..(i + 1) * self.dims]
    }

    /// The `k` most similar documents by scanning all; `mask[d]` says
    /// whether document `d` may be returned (`None`: all may).
    pub(crate) fn exact(&self, query: &[f32], k: usize, mask: Option<&[bool]>) -> Vec<(u32, f32)> {
        let mut hits: Vec<(u32, f32)> = self
            .vectors
            .chunks_exact(self.dims)
            .enumerate()
            .filter(|(i, _)| mask.is_none_or(|m| m[*i]))
            .map(|(i, v)| (i as u32, dot(v, query)))
            .collect();
        top_k(&mut hits, k);
        hits
    }

    /// The (approximately) `k` most similar documents through HNSW;
    /// `None` without a graph. At most [`HNSW_EF_SEARCH`] results.
    pub(crate) fn approximate(&self, query: &[f32], k: usize) -> Option<Vec<(u32, f32)>> {
        let hnsw = self.hnsw.as_ref()?;
        let mut search = Search::default();
        let point = Point(query.to_vec());
        let found = hnsw.search(&point, &mut search).map(|item| (*item.value, 1.0 - item.distance));
        let Some(remap) = &self.carried else { return Some(found.take(k).collect()) };
        let mut hits: Vec<(u32, f32)> = found
            .take(k + remap.dropped)
            .filter_map(|(value, score)| remap.from_graph[value as usize].map(|d| (d, score)))
            .collect();
        hits.extend(remap.fresh.iter().map(|&d| (d, dot(self.doc(d), query))));
        top_k(&mut hits, k);
        Some(hits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        super::super::embedder::normalize(v.to_vec())
    }

    #[test]
    fn exact_and_hnsw_agree_on_a_small_set() {
        let mut vectors = Vec::new();
        for i in 0..200 {
            let a = i as f32 * 0.05;
            vectors.extend(unit(&[a.cos(), a.sin(), (a * 0.3).cos(), 0.1]));
        }
        let mut dense = Dense::new(4, vectors, None);
        let q = unit(&[1.0, 0.2, 0.9, 0.1]);
        assert!(dense.approximate(&q, 5).is_none());
        let exact = dense.exact(&q, 5, None);
        dense.build_hnsw();
        let approx = dense.approximate(&q, 5).unwrap();
        assert_eq!(exact.iter().map(|h| h.0).collect::<Vec<_>>(), approx.iter().map(|h| h.0).collect::<Vec<_>>());
        assert!((exact[0].1 - approx[0].1).abs() < 1e-5);
        let mask: Vec<bool> = (0..200).map(|i| i % 2 == 0).collect();
        let even = dense.exact(&q, 3, Some(&mask));
        assert!(even.iter().all(|h| h.0 % 2 == 0) && even.len() == 3);
    }

    #[test]
    fn a_carried_graph_finds_new_documents_and_never_removed_ones() {
        let point = |i: usize| {
            let a = i as f32 * 0.05;
            unit(&[a.cos(), a.sin(), (a * 0.3).cos(), 0.1])
        };
        let mut dense = Dense::new(4, (0..200).flat_map(point).collect(), None);
        dense.build_hnsw();
        // Documents 0..100 removed; 100..200 kept, now 0..100; a new
        // document (old 10's vector, near the query) is 100.
        let mut old_of_new: Vec<Option<u32>> = (100..200).map(Some).collect();
        old_of_new.push(None);
        let vectors: Vec<f32> = (100..200).chain([10]).flat_map(point).collect();
        let carried = dense.carry_over(vectors.clone(), &old_of_new);
        assert!(carried.is_carried() && carried.hnsw().is_none(), "a carried graph is never stored");
        let q = point(10);
        let approx = carried.approximate(&q, 5).unwrap();
        assert_eq!(approx[0].0, 100, "the new document, scanned beside the graph: {approx:?}");
        assert!((approx[0].1 - 1.0).abs() < 1e-5);
        let mut rebuilt = Dense::new(4, vectors, None);
        let exact = rebuilt.exact(&q, 5, None);
        let ids = |hits: &[(u32, f32)]| hits.iter().map(|h| h.0).collect::<Vec<_>>();
        assert_eq!(ids(&approx), ids(&exact), "the kept documents map to their new ids");
        // Carried twice: 100 (the new one) removed.
        let twice = carried.carry_over((100..200).flat_map(point).collect(), &(0..100).map(Some).collect::<Vec<_>>());
        let hits = twice.approximate(&q, 5).unwrap();
        assert!(hits.iter().all(|h| h.0 < 100), "{hits:?}");
        assert_eq!(ids(&hits), ids(&twice.exact(&q, 5, None)), "maps compose over two changes");
        rebuilt.build_hnsw();
        assert!(!rebuilt.is_carried());
    }

    #[test]
    fn dot_matches_the_naive_sum() {
        let a: Vec<f32> = (0..19).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..19).map(|i| 1.0 - i as f32 * 0.1).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-4);
    }
}
