//! `[planner]`: the graph-guided depth-first search over APIs
//! (docs/architecture.md §5), with the section's defaults and checks.

use serde::{Deserialize, Serialize};

/// `planner.max_steps`: steps one planner run may take.
pub const DEFAULT_MAX_STEPS: usize = 8;
/// `planner.max_backtracks`.
pub const DEFAULT_MAX_BACKTRACKS: usize = 8;
/// `planner.max_restarts`.
pub const DEFAULT_MAX_RESTARTS: usize = 2;
/// `planner.deadline_ms`: time one planner run may take.
pub const DEFAULT_PLAN_DEADLINE_MS: u64 = 10_000;
/// `planner.roots`: first steps offered.
pub const DEFAULT_ROOTS: usize = 10;
/// `planner.neighbors`: successors offered per step (K in docs/architecture.md §5).
pub const DEFAULT_NEIGHBORS: usize = 5;
/// `planner.alpha_min`: APIs whose calls seen in trajectories and runs
/// succeeded at a lower rate are not offered (α_min in docs/architecture.md
/// §5; the catalog's prior excludes none).
pub const DEFAULT_ALPHA_MIN: f64 = 0.2;
/// `planner.retry_failed_after_s`: an API left out by `alpha_min` after
/// failing in runs is offered again this long after its last failure (a
/// success keeps it, a failure leaves it out as long again).
pub const DEFAULT_RETRY_FAILED_AFTER_S: u64 = 600;
/// `planner.failure_half_life_s`: an API whose call failed for a task
/// ranks lower for similar tasks, by a weight that halves this often (0:
/// failures are not held against an API per kind of request).
pub const DEFAULT_FAILURE_HALF_LIFE_S: u64 = 3600;
/// `planner.hints`: remembered tasks consulted.
pub const DEFAULT_HINTS: usize = 3;

/// `[planner]`: the graph-guided depth-first search over APIs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlannerConfig {
    /// Steps a run may take (failed ones included).
    pub max_steps: usize,
    pub max_backtracks: usize,
    /// Restarts without the roots that led nowhere.
    pub max_restarts: usize,
    /// Time a run may take, in milliseconds.
    pub deadline_ms: u64,
    /// First steps offered (the retrieval ranking's top).
    pub roots: usize,
    /// Successors offered per step (graph neighbours padded from retrieval).
    pub neighbors: usize,
    /// APIs whose calls seen succeeded at a lower rate are not offered.
    pub alpha_min: f64,
    /// Seconds after its last failed call that such an API is offered again.
    pub retry_failed_after_s: u64,
    /// Half-life, in seconds, of a failed call's weight against its API
    /// for similar tasks.
    pub failure_half_life_s: u64,
    /// Similar remembered tasks whose paths are used as hints.
    pub hints: usize,
    /// Commit to every choice: no other API after a failed call, no
    /// backtracking, no restart (an ablation).
    pub greedy: bool,
}

impl Default for PlannerConfig {
    fn default() -> Self {
        PlannerConfig {
            max_steps: DEFAULT_MAX_STEPS,
            max_backtracks: DEFAULT_MAX_BACKTRACKS,
            max_restarts: DEFAULT_MAX_RESTARTS,
            deadline_ms: DEFAULT_PLAN_DEADLINE_MS,
            roots: DEFAULT_ROOTS,
            neighbors: DEFAULT_NEIGHBORS,
            alpha_min: DEFAULT_ALPHA_MIN,
            retry_failed_after_s: DEFAULT_RETRY_FAILED_AFTER_S,
            failure_half_life_s: DEFAULT_FAILURE_HALF_LIFE_S,
            hints: DEFAULT_HINTS,
            greedy: false,
        }
    }
}

impl PlannerConfig {
    /// `alpha_min` is a share and the limits are at least 1, as (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        if !(0.0..=1.0).contains(&self.alpha_min) {
            return Err(("planner.alpha_min".to_string(), format!("must be between 0 and 1, got {}", self.alpha_min)));
        }
        for (key, n) in [
            ("planner.max_steps", self.max_steps as u64),
            ("planner.deadline_ms", self.deadline_ms),
            ("planner.roots", self.roots as u64),
            ("planner.neighbors", self.neighbors as u64),
        ] {
            if n == 0 {
                return Err((key.to_string(), "must be at least 1".to_string()));
            }
        }
        Ok(())
    }
}
