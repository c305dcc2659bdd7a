//! Ranking metrics with binary relevance.
//!
//! * Recall@k: the share of the relevant items found in the top k.
//! * NDCG@k: DCG of the top k (gain 1 for a relevant item at rank r,
//!   discounted by log2(r + 1)) over the DCG of an ideal ranking
//!   (min(|relevant|, k) relevant items first).
//! * Reciprocal rank: 1 / rank of the first relevant item, 0 if none is
//!   ranked; MRR is its mean over queries.

use std::collections::HashSet;
use std::hash::Hash;

/// Recall@k. `relevant_total` may exceed `relevant.len()` when some relevant
/// items cannot be ranked at all (they still count as missed).
pub(crate) fn recall_at<T: Eq + Hash>(ranked: &[T], relevant: &HashSet<T>, relevant_total: usize, k: usize) -> f64 {
    if relevant_total == 0 {
        return 0.0;
    }
    let found = ranked.iter().take(k).filter(|r| relevant.contains(r)).count();
    found as f64 / relevant_total as f64
}

/// NDCG@k with binary gains.
pub(crate) fn ndcg_at<T: Eq + Hash>(ranked: &[T], relevant: &HashSet<T>, relevant_total: usize, k: usize) -> f64 {
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .filter(|(_, r)| relevant.contains(r))
        .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
        .sum();
    let ideal: f64 = (0..relevant_total.min(k)).map(|i| 1.0 / ((i + 2) as f64).log2()).sum();
    if ideal == 0.0 { 0.0 } else { dcg / ideal }
}

/// 1 / rank of the first relevant item (0 when none is ranked).
pub(crate) fn reciprocal_rank<T: Eq + Hash>(ranked: &[T], relevant: &HashSet<T>) -> f64 {
    ranked.iter().position(|r| relevant.contains(r)).map_or(0.0, |i| 1.0 / (i + 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_on_a_known_ranking() {
        let relevant: HashSet<u32> = [2, 5].into();
        let ranked = [7, 2, 9, 5, 1];
        assert_eq!(recall_at(&ranked, &relevant, 2, 1), 0.0);
        assert_eq!(recall_at(&ranked, &relevant, 2, 2), 0.5);
        assert_eq!(recall_at(&ranked, &relevant, 2, 4), 1.0);
        assert_eq!(recall_at(&ranked, &relevant, 4, 4), 0.5, "unrankable relevant items count as missed");
        assert_eq!(reciprocal_rank(&ranked, &relevant), 0.5);
        let ideal = 1.0 + 1.0 / 3f64.log2();
        let dcg = 1.0 / 3f64.log2() + 1.0 / 5f64.log2();
        assert!((ndcg_at(&ranked, &relevant, 2, 5) - dcg / ideal).abs() < 1e-12);
        assert_eq!(ndcg_at(&[2, 5], &relevant, 2, 2), 1.0);
        assert_eq!(reciprocal_rank(&[1, 3], &relevant), 0.0);
    }
}
