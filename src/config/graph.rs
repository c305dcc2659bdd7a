//! `[graph]`: the tool graph learned from trajectories and runs, with the
//! section's defaults (docs/architecture.md §4) and checks.

use serde::{Deserialize, Serialize};

/// `graph.a`: the `a` of `f(x)` in the online update (docs/architecture.md §4).
pub const DEFAULT_GRAPH_A: f64 = 0.1;
/// `graph.beta`: the share of static weights kept by online updates (docs/architecture.md §4).
pub const DEFAULT_GRAPH_BETA: f64 = 0.8;
/// `graph.max_calls`: longer trajectories are not used for transitions (docs/architecture.md §4).
pub const DEFAULT_GRAPH_MAX_CALLS: usize = 8;
/// `graph.snapshot_every`: runs recorded between two graph snapshots.
pub const DEFAULT_SNAPSHOT_EVERY: u64 = 100;

/// `[graph]`: the tool graph learned from trajectories and runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GraphConfig {
    /// `a` of `f(x)`: how fast online evaluations move transition weights.
    pub a: f64,
    /// `β`: the share of the static weights and availability kept online.
    pub beta: f64,
    /// Trajectories whose path has more calls are not used for transitions.
    pub max_calls: usize,
    /// Runs recorded between two snapshots of the graph.
    pub snapshot_every: u64,
}

impl Default for GraphConfig {
    fn default() -> Self {
        GraphConfig {
            a: DEFAULT_GRAPH_A,
            beta: DEFAULT_GRAPH_BETA,
            max_calls: DEFAULT_GRAPH_MAX_CALLS,
            snapshot_every: DEFAULT_SNAPSHOT_EVERY,
        }
    }
}

impl GraphConfig {
    /// `beta` is a share, `a` positive, the counts at least 1, as (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        if !(0.0..=1.0).contains(&self.beta) {
            return Err(("graph.beta".to_string(), format!("must be between 0 and 1, got {}", self.beta)));
        }
        if !(self.a > 0.0 && self.a.is_finite()) {
            return Err(("graph.a".to_string(), format!("must be a positive number, got {}", self.a)));
        }
        for (key, n) in [("graph.max_calls", self.max_calls as u64), ("graph.snapshot_every", self.snapshot_every)] {
            if n == 0 {
                return Err((key.to_string(), "must be at least 1".to_string()));
            }
        }
        Ok(())
    }
}
