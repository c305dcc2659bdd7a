//! Evaluation on ToolBench query files (docs/architecture.md §12): how well toolrouter
//! finds the `relevant APIs` of real requests.
//!
//! * [`queries`] reads the query files;
//! * [`scores`] computes Recall@k, NDCG@k and reciprocal rank;
//! * [`retrieval`] runs every query through the retriever and reports per
//!   file and overall;
//! * [`compress`] compresses every recorded response of a replay table;
//! * [`plan`] runs every query through the planner (and baselines), with
//!   the tool graph built leave-one-set-out;
//! * [`route`] runs route mode's narrowing over each query's tools among
//!   distractors, against BM25 and random picks;
//! * [`next`] searches the catalog for each next call of held-out runs,
//!   with and without the tool graph's cue from the call before;
//! * [`learning`] runs queries in a fixed order, recording each solution
//!   after scoring it, against the same order with learning off.

pub(crate) mod compress;
pub(crate) mod learning;
pub(crate) mod next;
pub(crate) mod plan;
pub mod queries;
pub(crate) mod retrieval;
pub(crate) mod route;
pub(crate) mod scores;
pub(crate) mod search;
