//! What a catalog search returns: the hits, each with its fused score and
//! the ranks the dense and lexical signals gave it, and how the query was
//! read (intents, characters cut, timings).

use serde::Serialize;

use crate::catalog::ApiId;

/// A signal's view of one hit: its rank (from 1) and raw score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Signal {
    pub(crate) rank: usize,
    pub(crate) score: f32,
}

/// One retrieved API.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    pub api: ApiId,
    /// The fused score that ranks the hits.
    pub score: f32,
    /// The whole query's dense and lexical ranks, when the API was in their pools.
    pub dense: Option<Signal>,
    pub lexical: Option<Signal>,
}

/// The outcome of a search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchResults {
    pub hits: Vec<Hit>,
    /// The intents the query was split into (empty: searched as one).
    pub intents: Vec<String>,
    /// Characters cut from an over-long query (`retrieval.max_query_chars`).
    pub cut_chars: usize,
    pub embed_ms: f64,
    pub search_ms: f64,
}
