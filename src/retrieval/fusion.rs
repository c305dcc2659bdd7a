//! The small list operations ranking is made of: the best `k` of a score
//! map, weighted reciprocal-rank fusion, named APIs put first, a part's
//! best API reserved a place in the top.

use std::collections::HashMap;

use super::{Signal, bm25};

/// The `k` best entries of a score map, best first.
pub(super) fn sorted(scores: HashMap<u32, f32>, k: usize) -> Vec<(u32, f32)> {
    let mut ranked: Vec<(u32, f32)> = scores.into_iter().collect();
    bm25::top_k(&mut ranked, k);
    ranked
}

/// Whether `name` is written like a code identifier: one token with `_`
/// or a lower-to-upper case change.
pub(super) fn is_identifier(name: &str) -> bool {
    let chars: Vec<char> = name.chars().collect();
    !name.contains(char::is_whitespace)
        && (name.contains('_') || chars.windows(2).any(|w| w[0].is_lowercase() && w[1].is_uppercase()))
}

/// Puts `named` first, in order (at the best score), the rest after them; at most `k`.
pub(super) fn first(ranked: &mut Vec<(u32, f32)>, named: &[u32], k: usize) {
    if named.is_empty() {
        return;
    }
    let top = ranked.first().map_or(1.0, |e| e.1);
    ranked.retain(|(d, _)| !named.contains(d));
    for (i, &doc) in named.iter().enumerate() {
        ranked.insert(i, (doc, top));
    }
    ranked.truncate(k);
}

/// Moves each of `bests` that ranks below `top` (or is absent) to the last
/// place within `top`, above the entries already moved; the others shift down.
pub(super) fn reserve(ranked: &mut Vec<(u32, f32)>, bests: &[u32], top: usize) {
    let mut slot = top.min(ranked.len().max(1)).saturating_sub(1);
    for &doc in bests {
        match ranked.iter().position(|(d, _)| *d == doc) {
            Some(at) if at <= slot => continue,
            Some(at) => {
                let entry = ranked.remove(at);
                ranked.insert(slot, entry);
            }
            None => ranked.insert(slot.min(ranked.len()), (doc, ranked.get(slot).map_or(0.0, |e| e.1))),
        }
        slot = slot.saturating_sub(1);
    }
}

pub(super) fn add_ranks(fused: &mut HashMap<u32, f32>, hits: &[(u32, f32)], weight: f32, rrf_k: f32) {
    for (rank, (doc, _)) in hits.iter().enumerate() {
        *fused.entry(*doc).or_default() += weight / (rrf_k + rank as f32 + 1.0);
    }
}

pub(super) fn signals(hits: &[(u32, f32)]) -> HashMap<u32, Signal> {
    hits.iter().enumerate().map(|(rank, (doc, score))| (*doc, Signal { rank: rank + 1, score: *score })).collect()
}
