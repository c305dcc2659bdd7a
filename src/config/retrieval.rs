//! `[retrieval]`: finding the APIs for a request — which ranking signals
//! and index are used, with the section's defaults and checks.

use serde::{Deserialize, Serialize};

/// Longest query searched, in characters (`retrieval.max_query_chars`); the rest is cut and reported.
pub const DEFAULT_MAX_QUERY_CHARS: usize = 2000;

/// Which ranking signals a search uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// Dense and lexical ranks fused.
    #[default]
    Hybrid,
    /// Embedding similarity only.
    Dense,
    /// BM25 only.
    Lexical,
}

/// How the dense side finds nearest neighbours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DenseIndex {
    /// instant-distance HNSW (approximate).
    #[default]
    Hnsw,
    /// A scan of every vector (exact).
    Exact,
}

/// `[retrieval]`: finding the APIs for a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetrievalConfig {
    pub mode: SearchMode,
    pub dense_index: DenseIndex,
    /// Split multi-part requests into intents and retrieve each too (by
    /// BM25; also by their own vectors with `embed_intents`).
    pub intents: bool,
    /// Embed each intent too (one more batch of the model: about 35 ms
    /// more at p99 on two cores for 0.004 Recall@10, docs/benchmarks.md).
    pub embed_intents: bool,
    /// Build (or rebuild) the index when it is missing, stale or damaged;
    /// otherwise refuse with a message to run `toolrouter index`.
    pub auto_index: bool,
    /// Longest query searched, in characters; the rest is cut and reported.
    pub max_query_chars: usize,
}

impl Default for RetrievalConfig {
    fn default() -> Self {
        RetrievalConfig {
            mode: SearchMode::Hybrid,
            dense_index: DenseIndex::Hnsw,
            intents: true,
            embed_intents: false,
            auto_index: true,
            max_query_chars: DEFAULT_MAX_QUERY_CHARS,
        }
    }
}

impl RetrievalConfig {
    /// `max_query_chars` is at least 1, as (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        if self.max_query_chars == 0 {
            return Err(("retrieval.max_query_chars".to_string(), "must be at least 1".to_string()));
        }
        Ok(())
    }
}
