//! Dense retrieval: cosine similarity between unit vectors, by exact scan
//! or through an instant-distance HNSW graph.
//!
//! Vectors are L2-normalized, so similarity is a dot product and HNSW's
//! distance is `1 - dot`. The exact scan is the reference (and the path
//! for filtered searches, whose candidate sets are small); the HNSW graph
//! answers unfiltered searches in a fraction of the time at a recall@10 the
//! benchmarks measure against the scan (docs/benchmarks.md).

use instant_distance::{Builder, HnswMap, Search};
use serde::{Deserialize, Serialize};

use super::bm25::top_k;

/// HNSW `efConstruction`: neighbours considered while building.
pub const HNSW_EF_CONSTRUCTION: usize = 100;
/// HNSW `ef` at search time: candidates kept while searching (caps `k`).
pub const HNSW_EF_SEARCH: usize = 50;
/// Seed of the HNSW level generator, so builds are reproducible.
const HNSW_SEED: u64 = 42;

/// One vector as an HNSW point.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Point(pub Vec<f32>);

impl instant_distance::Point for Point {
    fn distance(&self, other: &Self) -> f32 {
        1.0 - dot(&self.0, &other.0)
    }
}

/// Dot product with eight independent accumulators, so the compiler can
/// vectorize it (a plain iterator sum cannot be reordered).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
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
pub struct Dense {
    dims: usize,
    vectors: Vec<f32>,
    hnsw: Option<HnswMap<Point, u32>>,
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
    pub fn new(dims: usize, vectors: Vec<f32>, hnsw: Option<HnswMap<Point, u32>>) -> Dense {
        assert!(dims > 0 && vectors.len().is_multiple_of(dims), "vectors must be whole");
        Dense { dims, vectors, hnsw }
    }

    /// Builds the HNSW graph (parallel, on every core).
    pub fn build_hnsw(&mut self) {
        let points: Vec<Point> = self.vectors.chunks_exact(self.dims).map(|v| Point(v.to_vec())).collect();
        let ids: Vec<u32> = (0..points.len() as u32).collect();
        let builder =
            Builder::default().ef_construction(HNSW_EF_CONSTRUCTION).ef_search(HNSW_EF_SEARCH).seed(HNSW_SEED);
        self.hnsw = Some(builder.build(points, ids));
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    pub fn len(&self) -> usize {
        self.vectors.len() / self.dims
    }

    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// The raw vectors (for persistence).
    pub fn vectors(&self) -> &[f32] {
        &self.vectors
    }

    pub fn hnsw(&self) -> Option<&HnswMap<Point, u32>> {
        self.hnsw.as_ref()
    }

    /// The vector of document `i`.
    #[cfg(test)]
    pub fn vector(&self, i: usize) -> &[f32] {
        &self.vectors[i * self.dims..(i + 1) * self.dims]
    }

    /// The `k` most similar documents by scanning all; `mask[d]` says
    /// whether document `d` may be returned (`None`: all may).
    pub fn exact(&self, query: &[f32], k: usize, mask: Option<&[bool]>) -> Vec<(u32, f32)> {
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
    pub fn approximate(&self, query: &[f32], k: usize) -> Option<Vec<(u32, f32)>> {
        let hnsw = self.hnsw.as_ref()?;
        let mut search = Search::default();
        let point = Point(query.to_vec());
        Some(hnsw.search(&point, &mut search).take(k).map(|item| (*item.value, 1.0 - item.distance)).collect())
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
    fn dot_matches_the_naive_sum() {
        let a: Vec<f32> = (0..19).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..19).map(|i| 1.0 - i as f32 * 0.1).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-4);
    }
}
