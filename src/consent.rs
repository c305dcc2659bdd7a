//! Consent for destructive calls: execute mode never makes a destructive
//! call (an HTTP POST, PUT, PATCH or DELETE, an MCP tool not annotated
//! otherwise, or one `access.destructive` names) for a caller whose policy
//! does not allow it unattended, until the caller's user has said yes.
//!
//! The run that reaches such a step stops there and its answer lists the
//! pending call ([`Consent`]): its id, the function and the arguments. The
//! client confirms or refuses it (`POST /v1/consents/{id}`) and sends the
//! request again; that run finds the consent for exactly this call (same
//! client, function and arguments) and makes it, once. A pending call not
//! answered within `access.consent_timeout_s` is refused; so is a refused
//! one, for as long again, without asking anew. Kept in memory, on the
//! replica that asked.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

/// Consents kept at most (the oldest decided ones go first).
const MAX_KEPT: usize = 10_000;

/// Where a consent stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum State {
    /// Asked; no answer yet.
    Pending,
    /// Confirmed: the next run that reaches this call makes it.
    Allowed,
    /// Refused by the user, or not answered in time.
    Refused,
    /// Confirmed and made.
    Used,
}

/// One call that waits for (or had) the user's consent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Consent {
    pub(crate) id: String,
    pub(crate) function: String,
    pub(crate) arguments: Value,
    pub(crate) state: State,
    pub(crate) asked_at_unix_ms: u64,
    /// A pending call not answered by then is refused.
    pub(crate) expires_at_unix_ms: u64,
    #[serde(skip)]
    client: Option<String>,
}

/// What a run may do with a destructive call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// Make it (the user confirmed it).
    Go,
    /// Do not: the user refused, or did not answer in time.
    Refused,
    /// Stop and ask: the consent to answer.
    Ask(Consent),
}

/// Why a consent could not be answered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum ConsentError {
    #[error("no pending call `{0}` for this key")]
    NotFound(String),
    #[error("the call `{0}` was already {1}")]
    Decided(String, &'static str),
}

/// The consents of this replica.
#[derive(Debug)]
pub(crate) struct Consents {
    kept: Mutex<HashMap<String, Consent>>,
    timeout: Duration,
}

impl Consents {
    pub(crate) fn new(timeout: Duration) -> Consents {
        Consents { kept: Mutex::default(), timeout }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<String, Consent>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What a run of `client` may do with `function(arguments)`, now.
    pub(crate) fn verdict(&self, client: Option<&str>, function: &str, arguments: &Value) -> Verdict {
        let now = crate::metrics::unix_ms();
        let mut kept = self.kept();
        expire(&mut kept, now, self.timeout);
        let same =
            |c: &&mut Consent| c.client.as_deref() == client && c.function == function && c.arguments == *arguments;
        // The latest consent for this very call decides.
        if let Some(c) = kept.values_mut().filter(same).max_by_key(|c| c.asked_at_unix_ms) {
            match c.state {
                State::Allowed => {
                    c.state = State::Used;
                    return Verdict::Go;
                }
                State::Refused => return Verdict::Refused,
                State::Pending => return Verdict::Ask(c.clone()),
                State::Used => {}
            }
        }
        if kept.len() >= MAX_KEPT {
            let oldest = kept.values().filter(|c| c.state != State::Pending).min_by_key(|c| c.asked_at_unix_ms);
            if let Some(id) = oldest.map(|c| c.id.clone()) {
                kept.remove(&id);
            }
        }
        let consent = Consent {
            id: format!("consent_{:016x}", fastrand::u64(..)),
            function: function.to_string(),
            arguments: arguments.clone(),
            state: State::Pending,
            asked_at_unix_ms: now,
            expires_at_unix_ms: now + self.timeout.as_millis() as u64,
            client: client.map(str::to_string),
        };
        kept.insert(consent.id.clone(), consent.clone());
        Verdict::Ask(consent)
    }

    /// The consent `id` of `client`, as it stands.
    pub(crate) fn get(&self, id: &str, client: Option<&str>) -> Result<Consent, ConsentError> {
        let mut kept = self.kept();
        expire(&mut kept, crate::metrics::unix_ms(), self.timeout);
        kept.get(id).filter(|c| c.client.as_deref() == client).cloned().ok_or_else(|| ConsentError::NotFound(id.into()))
    }

    /// The user's answer to the pending call `id` of `client`.
    pub(crate) fn decide(&self, id: &str, client: Option<&str>, allow: bool) -> Result<Consent, ConsentError> {
        let mut kept = self.kept();
        expire(&mut kept, crate::metrics::unix_ms(), self.timeout);
        let Some(c) = kept.get_mut(id).filter(|c| c.client.as_deref() == client) else {
            return Err(ConsentError::NotFound(id.into()));
        };
        let decided = match c.state {
            State::Pending => None,
            State::Allowed => Some("allowed"),
            State::Refused => Some("refused (by the user, or not answered in time)"),
            State::Used => Some("allowed and made"),
        };
        if let Some(how) = decided {
            return Err(ConsentError::Decided(id.into(), how));
        }
        c.state = if allow { State::Allowed } else { State::Refused };
        // A refusal holds as long again; a consent waits as long again to be used.
        c.expires_at_unix_ms = crate::metrics::unix_ms() + self.timeout.as_millis() as u64;
        Ok(c.clone())
    }
}

/// Pending calls past their time are refused; anything decided and past
/// its time again is forgotten.
fn expire(kept: &mut HashMap<String, Consent>, now: u64, timeout: Duration) {
    let grace = timeout.as_millis() as u64;
    kept.retain(|_, c| c.state == State::Pending || now < c.expires_at_unix_ms + grace);
    for c in kept.values_mut().filter(|c| c.state == State::Pending && now >= c.expires_at_unix_ms) {
        c.state = State::Refused;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_is_asked_once_then_made_once_on_consent() {
        let consents = Consents::new(Duration::from_secs(60));
        let args = json!({"id": 7});
        let Verdict::Ask(asked) = consents.verdict(Some("k"), "delete_item", &args) else { panic!() };
        let Verdict::Ask(again) = consents.verdict(Some("k"), "delete_item", &args) else { panic!() };
        assert_eq!(asked.id, again.id, "the same call waits on the same consent");
        assert!(
            matches!(consents.verdict(Some("k"), "delete_item", &json!({"id": 8})), Verdict::Ask(c) if c.id != asked.id)
        );
        assert_eq!(consents.decide(&asked.id, Some("other"), true), Err(ConsentError::NotFound(asked.id.clone())));
        assert_eq!(consents.decide(&asked.id, Some("k"), true).unwrap().state, State::Allowed);
        assert!(matches!(consents.decide(&asked.id, Some("k"), false), Err(ConsentError::Decided(..))));
        assert_eq!(consents.verdict(Some("k"), "delete_item", &args), Verdict::Go);
        assert_eq!(consents.get(&asked.id, Some("k")).unwrap().state, State::Used);
        assert!(
            matches!(consents.verdict(Some("k"), "delete_item", &args), Verdict::Ask(c) if c.id != asked.id),
            "once"
        );
    }

    #[test]
    fn a_refused_or_unanswered_call_is_not_made() {
        let consents = Consents::new(Duration::from_millis(30));
        let args = json!({});
        let Verdict::Ask(asked) = consents.verdict(None, "drop_table", &args) else { panic!() };
        consents.decide(&asked.id, None, false).unwrap();
        assert_eq!(consents.verdict(None, "drop_table", &args), Verdict::Refused);
        let Verdict::Ask(late) = consents.verdict(None, "purge", &args) else { panic!() };
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(consents.get(&late.id, None).unwrap().state, State::Refused, "not answered in time");
        assert!(matches!(consents.decide(&late.id, None, true), Err(ConsentError::Decided(..))));
        assert_eq!(consents.verdict(None, "purge", &args), Verdict::Refused);
    }
}
