//! Who may use which tool, and what a call does, as the engine answers
//! it for every face: the caller's policy ([`crate::policy`]), the held
//! tools ([`crate::quarantine`]), the configuration's word on effects
//! ([`crate::rule::Effects`]) and whether a call needs consent
//! ([`crate::consent`]).

use std::sync::Arc;

use super::Engine;
use crate::catalog::{Api, Catalog, Effect};
use crate::config::{AccessConfig, ConsentMode};
use crate::policy::{Effects, Policies, Policy};
use crate::quarantine::{Exceptions, HeldTool, Quarantine};

/// Why an operator's acceptance of a changed tool did not release it.
#[derive(Debug, PartialEq)]
pub(crate) enum NotAccepted {
    /// No tool of that name is held.
    NotHeld,
    /// It is held for these reasons besides (or instead of) its change:
    /// the scan's, which only `access.allow_flagged` lifts.
    StillHeld(Vec<String>),
    /// Its definition is no longer the one named: it is now this one.
    ChangedAgain(String),
}

impl Engine {
    /// The policy governing `client` (`None`: it may use every tool).
    pub(crate) fn policy(&self, client: Option<&str>) -> Option<Arc<Policy>> {
        self.policies.load().governing(client)
    }

    /// Whether `client` may use the catalog API named `function`: not held,
    /// and allowed by its policy (an unknown name is not allowed).
    pub(crate) fn allows(&self, client: Option<&str>, function: &str) -> bool {
        let catalog = self.catalog();
        let Ok(api) = catalog.find(function) else { return false };
        self.quarantine().held(&api.function_name).is_none()
            && self.policy(client).is_none_or(|p| p.allows_api(&catalog, api, &self.effects.load()))
    }

    /// Which of `catalog`'s APIs `client` may be shown, by id: its policy's
    /// and the quarantine's masks together (`None`: every API).
    pub(crate) fn allowed_mask(&self, client: Option<&str>, catalog: &Arc<Catalog>) -> Option<Arc<Vec<bool>>> {
        let policy = self.policy(client).map(|p| p.mask(catalog, &self.effects.load()));
        match (policy, self.quarantine().mask(catalog)) {
            (Some(p), Some(q)) => Some(Arc::new(p.iter().zip(q.iter()).map(|(a, b)| *a && *b).collect())),
            (p, q) => p.or(q),
        }
    }

    /// What calling `api` does: the configuration's `access.read_only` /
    /// `access.destructive`, else the catalog's [`Api::effect`].
    pub(crate) fn effect(&self, catalog: &Catalog, api: &Api) -> Effect {
        self.effects.load().effect(catalog, api)
    }

    /// `access.read_only` and `access.destructive` as they are now.
    pub(crate) fn effects_now(&self) -> Arc<Effects> {
        self.effects.load_full()
    }

    /// Whether a run of `client` must ask before calling `api`.
    pub(crate) fn needs_consent(&self, client: Option<&str>, catalog: &Catalog, api: &Api) -> bool {
        **self.consent.load() == ConsentMode::Destructive
            && self.effect(catalog, api) == Effect::Destructive
            && !self.policy(client).is_some_and(|p| p.unattended)
    }

    /// Puts `access`'s effects and consent in force (a reload).
    pub(crate) fn set_effects(&self, access: &AccessConfig) {
        match Effects::of(&access.read_only, &access.destructive) {
            Ok(effects) => self.effects.store(Arc::new(effects)),
            Err(e) => tracing::error!("access.read_only / destructive were not reloaded: {e}"),
        }
        self.consent.store(Arc::new(access.consent));
    }

    /// The tools held now ([`Engine::accept_change`] releases a changed one).
    pub(crate) fn quarantine(&self) -> Arc<Quarantine> {
        self.quarantine.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Every tool held, with why (for `/readyz`).
    pub(crate) fn held_tools(&self) -> Vec<HeldTool> {
        self.quarantine().list()
    }

    /// Reviews the catalog's MCP and OpenAPI tools ([`Quarantine::review`]):
    /// at start, after the catalog changes, after a reload.
    pub(crate) fn review_tools(&self) {
        self.review_with(&self.exceptions.load());
    }

    /// A review with `exceptions`, stored (one at a time, of the catalog now).
    fn review_with(&self, exceptions: &Exceptions) -> Arc<Quarantine> {
        let _one = self.reviewing.lock().unwrap_or_else(|e| e.into_inner());
        let review = Arc::new(Quarantine::review(&self.catalog(), &self.config.state.dir(), exceptions));
        *self.quarantine.write().unwrap_or_else(|e| e.into_inner()) = review.clone();
        review
    }

    /// Accepts the changed definition of the held tool `function` (an
    /// operator's call, instead of `access.accept_changes` and a reload),
    /// if it is still the one the operator saw (`definition`, the digest
    /// `GET /v1/tools/held` shows): it is recorded as the one seen and the
    /// tool is offered again. A tool the scan holds is left as it is.
    /// Blocking (the review writes `tools-seen.json`).
    pub(crate) fn accept_change(&self, function: &str, definition: &str) -> Result<(), NotAccepted> {
        let held = self.quarantine().held(function).cloned().ok_or(NotAccepted::NotHeld)?;
        if held.reasons.iter().any(|r| !r.starts_with(crate::quarantine::CHANGED)) {
            return Err(NotAccepted::StillHeld(held.reasons));
        }
        if held.definition.as_deref() != Some(definition) {
            return Err(NotAccepted::ChangedAgain(held.definition.unwrap_or_default()));
        }
        let accepted = Some((function.to_string(), definition.to_string()));
        let review = self.review_with(&Exceptions { accepted, ..(**self.exceptions.load()).clone() });
        match review.held(function) {
            Some(still) => Err(NotAccepted::ChangedAgain(still.definition.clone().unwrap_or_default())),
            None => Ok(()),
        }
    }

    /// Puts `policies` in force (a reload).
    pub(crate) fn set_policies(&self, policies: Policies) {
        self.policies.store(Arc::new(policies));
    }
}
