//! How a search ranks: its signals, the fusion's weights and the limits
//! of each list, tuned on G1_instruction (docs/benchmarks.md).

use serde::Serialize;

use crate::config::{DenseIndex, RetrievalConfig, SearchMode};

/// Reciprocal rank fusion constant (`weight / (RRF_K + rank)`, rank from 1).
/// Small: the first few ranks of each list carry most of the evidence here
/// (60, the usual value, scored 0.60 Recall@10 on G1_instruction; 5 scores 0.73).
pub(crate) const RRF_K: f32 = 5.0;
/// Candidates taken from each ranked list before fusion.
pub(crate) const POOL: usize = 50;
/// Each intent's best hit is kept within this many first results.
pub(crate) const RESERVED_TOP: usize = 10;
/// APIs a request names (by function name, or by an identifier-like API
/// name that at most this many APIs share) rank first, then the best API
/// of each tool it names (by a name at most this many tools share); at
/// most this many in all.
pub(crate) const NAMED_TOP: usize = 3;
/// Tools taken from each tool-level list.
pub(crate) const TOOL_POOL: usize = 30;
/// Weight of the BM25 lists in the fusion.
pub(crate) const LEXICAL_WEIGHT: f32 = 1.0;
/// Weight of the dense lists in the fusion (all-MiniLM-L6-v2 is the weaker signal).
pub(crate) const DENSE_WEIGHT: f32 = 0.7;
/// Weight of each intent's lists relative to the whole query's.
pub(crate) const INTENT_WEIGHT: f32 = 0.5;
/// Weight of the list of APIs that served similar requests before.
pub(crate) const MEMORY_WEIGHT: f32 = 1.0;
/// Weight of the tool graph's transitions from the caller's last call
/// ([`super::Prepared::after`]): a transition of weight 1 counts as a first
/// place in a list, as in route mode ([`super::tool_list::ListWeights::graph`]).
pub(crate) const GRAPH_WEIGHT: f32 = 1.0;
/// Weight of the tool-level lists (tools ranked by their whole text), added to each of the tool's APIs.
pub(crate) const TOOL_WEIGHT: f32 = 1.0;
/// Weight of the tool-level list of the tools a request names ("the News
/// Sentiment API"): each of their APIs gets `weight / (RRF_K + 1)`, a first
/// place in that list.
pub(crate) const NAMED_TOOL_WEIGHT: f32 = 1.0;

/// How a search ranks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SearchOptions {
    pub mode: SearchMode,
    pub dense_index: DenseIndex,
    /// Retrieve each intent of a multi-part request too.
    pub intents: bool,
    /// Rank intents by their own vectors too (else by BM25 alone).
    pub embed_intents: bool,
    pub intent_merge: IntentMerge,
    pub weights: Weights,
}

/// How the rankings of a query's intents join the whole query's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IntentMerge {
    /// Scores add up, each intent's weighted by `Weights::intent`.
    Sum,
    /// As `Sum`, and each intent's best hit is moved up into the first
    /// [`RESERVED_TOP`] if it ranks below: every intent keeps its best hit.
    #[default]
    Reserve,
}

/// The fusion's parameters (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Weights {
    pub lexical: f32,
    pub dense: f32,
    /// Of each intent's lists, relative to the whole query's.
    pub intent: f32,
    /// Weight of the tool-level lists; 0: off.
    pub tool: f32,
    /// Weight of the list of tools the request names ("the News Sentiment
    /// API"); 0: off (their APIs are then not put first either).
    pub named_tool: f32,
    pub rrf_k: f32,
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            lexical: LEXICAL_WEIGHT,
            dense: DENSE_WEIGHT,
            intent: INTENT_WEIGHT,
            tool: TOOL_WEIGHT,
            named_tool: NAMED_TOOL_WEIGHT,
            rrf_k: RRF_K,
        }
    }
}

impl SearchOptions {
    pub(crate) fn from_config(config: &RetrievalConfig) -> SearchOptions {
        SearchOptions {
            mode: config.mode,
            dense_index: config.dense_index,
            intents: config.intents,
            embed_intents: config.embed_intents,
            intent_merge: IntentMerge::default(),
            weights: Weights::default(),
        }
    }
}
