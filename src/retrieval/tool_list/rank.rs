//! Ranking a tool set for a conversation: every tool's fused score
//! (BM25 of the latest and earlier user messages and of each intent, the
//! embedding, the memory, the servers, the tool graph; the module's doc
//! has the weights), then the tools to offer ([`keep`]) or a search's
//! best among those not offered ([`best`]).

use std::collections::HashSet;

use super::{Conversation, Dense, Kept, ListIndex, ListWeights, ToolSet, companions, servers};
use crate::retrieval::{dense::dot, intents};

/// Adds `weight / (rrf_k + rank)` for each hit.
fn add_ranks(scores: &mut [f32], hits: &[(u32, f32)], weight: f32, rrf_k: f32) {
    for (rank, (doc, _)) in hits.iter().enumerate() {
        scores[*doc as usize] += weight / (rrf_k + rank as f32 + 1.0);
    }
}

/// Whether `dense` covers every one of a set's `n` tools with the query's
/// model (else the set ranks by words: a tool without a vector would fall
/// below every known one).
fn whole(dense: &Dense, n: usize) -> bool {
    dense.tools.dims == dense.query.latest.len() && dense.tools.present.len() == n && dense.tools.missing == 0
}

/// The `k` tools to offer (request indexes, ascending). `dense`: the
/// latest message's vector and the tools' vectors, when there is a model
/// (else the ranking is lexical). `weight(from, to)`: the tool graph's
/// transition weight.
pub(crate) fn keep(
    set: &ToolSet,
    conversation: &Conversation,
    dense: Option<Dense>,
    k: usize,
    weights: &ListWeights,
    weight: &dyn Fn(&str, &str) -> f64,
) -> Kept {
    let index = &set.index;
    let n = index.len();
    if n <= k {
        return Kept { tools: (0..n).collect(), by_words: Vec::new() };
    }
    // A set some of whose tools have no vector yet ranks by words: ranked by
    // cosine among the rest, the new ones would fall below every known one
    // (tried, with their place taken from BM25: below words alone on
    // the development sets; docs/benchmarks.md, "Tools, not lists").
    let dense = dense.filter(|d| whole(d, n));
    let scores = scores(index, conversation, dense, weights, weight);
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
    // Only the `kept` first are sorted (a total order: ties go to the earlier tool).
    let first = |a: &usize, b: &usize| rank[*a].cmp(&rank[*b]).then(scores[*b].total_cmp(&scores[*a])).then(a.cmp(b));
    let mut order: Vec<usize> = (0..n).collect();
    if kept < n {
        order.select_nth_unstable_by(kept, first);
    }
    order.truncate(kept);
    order.sort_by(first);
    if weights.companions {
        let called = |i: usize| must.contains(index.names[i].as_str());
        companions::bring_along(index, &mut order, &rank, &scores, k, &called);
    }
    let mut tools: Vec<usize> = order.into_iter().map(|i| set.positions[i]).collect();
    tools.sort_unstable();
    let by_words = if dense.is_some() { Vec::new() } else { (0..n).collect() };
    Kept { tools, by_words }
}

/// The `k` best of `among` (request indexes) for `conversation`, best
/// first, as [`keep`] ranks: tools named in the latest message first, then
/// by score (what the conversation called is not among them: a search's
/// results, among tools not offered yet).
pub(crate) fn best(
    set: &ToolSet,
    conversation: &Conversation,
    dense: Option<Dense>,
    k: usize,
    weights: &ListWeights,
    weight: &dyn Fn(&str, &str) -> f64,
    among: &[usize],
) -> Vec<usize> {
    let index = &set.index;
    let n = index.len();
    let dense = dense.filter(|d| whole(d, n));
    let scores = scores(index, conversation, dense, weights, weight);
    let mut wanted = vec![false; set.positions.len()];
    for &r in among {
        if let Some(w) = wanted.get_mut(r) {
            *w = true;
        }
    }
    let mut rank: Vec<u32> = vec![u32::MAX; n];
    for (r, t) in index.name_index.found_in(conversation.latest).into_iter().take(k.div_ceil(4)).enumerate() {
        rank[t as usize] = r as u32;
    }
    let wanted = |i: &usize| wanted[set.positions[*i]];
    let mut order: Vec<usize> = (0..n).filter(wanted).collect();
    order.sort_by(|a, b| rank[*a].cmp(&rank[*b]).then(scores[*b].total_cmp(&scores[*a])).then(a.cmp(b)));
    order.truncate(k);
    if weights.companions {
        companions::bring_along(index, &mut order, &rank, &scores, k, &|_| false);
        order.retain(wanted);
    }
    order.into_iter().map(|i| set.positions[i]).collect()
}

/// Every tool's fused score (in the set's order).
fn scores(
    index: &ListIndex,
    conversation: &Conversation,
    dense: Option<Dense>,
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
    if let Some(d) = dense.filter(|_| w.dense > 0.0) {
        add_ranks(&mut scores, &closest(d, w.learned), w.dense, w.rrf_k);
    }
    let servers = || index.servers.get_or_init(|| servers::Servers::of(&index.names, &index.texts)).as_ref();
    if let Some(servers) = (w.server > 0.0).then(servers).flatten() {
        for (tool, rank) in servers.ranked_tools(conversation.latest) {
            scores[tool as usize] += w.server / (w.rrf_k + rank as f32 + 1.0);
        }
    }
    if let Some(d) = dense.filter(|d| w.memory > 0.0 && d.remembered.similar.len() == n) {
        let mut hits: Vec<(u32, f32)> =
            d.remembered.similar.iter().enumerate().filter(|(_, s)| **s > 0.0).map(|(i, s)| (i as u32, *s)).collect();
        let found = hits.len();
        crate::retrieval::bm25::top_k(&mut hits, found);
        add_ranks(&mut scores, &hits, w.memory, w.rrf_k);
    }
    if let Some(from) = conversation.called.last() {
        // The catalog's graph knows tools by name; what route mode learned
        // of the client's tools, by content (`remembered.followed`).
        let learned = dense.map(|d| d.remembered.followed.as_slice()).filter(|f| f.len() == n);
        let top = w.graph / (w.rrf_k + 1.0);
        for (i, name) in index.names.iter().enumerate() {
            let followed = learned.map_or(0.0, |f| f[i]);
            scores[i] += top * (weight(from, name) as f32).max(followed);
        }
    }
    scores
}

/// Every tool by its best cosine to the latest message or to one of its
/// intents, best first: a tool that serves one need of several ranks as
/// high as the need's own sentence puts it. (The whole message's vector
/// alone leans to one need; ToolBench 300 → 5 0.894 / 0.790 with it
/// alone, 0.904 / 0.812 with the best of the intents too; each intent's
/// cosine as a ranking of its own in the fusion, or each intent keeping
/// its best tool, was below that: docs/benchmarks.md, "Several needs in
/// one request".)
///
/// A tool that served earlier requests is its own vector plus, at
/// `learned`, the mean of theirs ([`Recalled::served`]).
fn closest(d: Dense, learned: f32) -> Vec<(u32, f32)> {
    let queries: Vec<&[f32]> = std::iter::once(&d.query.latest).chain(&d.query.intents).map(|q| &q[..]).collect();
    let served = d.remembered.served.as_slice();
    let mut blended = Vec::new();
    let mut hits: Vec<(u32, f32)> = d
        .tools
        .flat
        .chunks_exact(d.tools.dims)
        .enumerate()
        .map(|(i, v)| {
            let v = match served.get(i) {
                Some((n, mean)) if *n > 0 && learned > 0.0 && mean.len() == v.len() => {
                    let share = learned * *n as f32 / (*n as f32 + 1.0);
                    blended.clear();
                    blended.extend(v.iter().zip(mean).map(|(a, b)| a + share * b));
                    let norm = dot(&blended, &blended).sqrt().max(f32::MIN_POSITIVE);
                    blended.iter_mut().for_each(|x| *x /= norm);
                    &blended[..]
                }
                _ => v,
            };
            (i as u32, queries.iter().map(|q| dot(q, v)).fold(f32::MIN, f32::max))
        })
        .collect();
    let n = hits.len();
    crate::retrieval::bm25::top_k(&mut hits, n);
    hits
}
