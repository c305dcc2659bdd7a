//! Evaluation on ToolBench query files (DESIGN §12): how well toolrouter
//! finds the `relevant APIs` of real requests.
//!
//! * [`queries`] reads the query files;
//! * [`metrics`] computes Recall@k, NDCG@k and reciprocal rank;
//! * [`retrieval`] runs every query through the retriever and reports per
//!   file and overall.

pub mod metrics;
pub mod queries;
pub mod retrieval;
