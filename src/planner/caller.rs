//! Who carries out a planned step. The planner calls a [`Caller`] for
//! every step it takes; [`DryRun`] carries out nothing (plans only), and
//! execute mode's `Calls` (in [`crate::engine::solve`]) really calls the API
//! through the engine. The method is async because a real call is.

use std::future::Future;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::catalog::Api;

/// What came of a step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepOutcome {
    /// The step did what it should (for a dry run: it was planned).
    pub(crate) ok: bool,
    /// In words: `planned`, `200 OK`, `timeout after 10 s`…
    pub(crate) status: String,
    /// The (compressed) response, when there is one.
    pub(crate) response: Option<Value>,
    pub(crate) elapsed_ms: f64,
}

/// Carries out steps.
pub trait Caller: Sync {
    fn call(&self, api: &Api, arguments: &Map<String, Value>) -> impl Future<Output = StepOutcome> + Send;

    /// Whether this caller only plans. A real one is never called with
    /// arguments that fail validation; a planning one sees every step.
    fn plans_only(&self) -> bool {
        false
    }
}

/// Plans only: every step "succeeds" without being executed.
#[derive(Debug, Clone, Copy, Default)]
pub struct DryRun;

impl Caller for DryRun {
    async fn call(&self, _api: &Api, _arguments: &Map<String, Value>) -> StepOutcome {
        StepOutcome { ok: true, status: "planned (dry run, not executed)".into(), response: None, elapsed_ms: 0.0 }
    }

    fn plans_only(&self) -> bool {
        true
    }
}
