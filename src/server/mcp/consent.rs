//! Consent over MCP: before a destructive call a session's client asked
//! for ([`crate::consent`]'s rule: the effect, `access.consent`, the key's
//! policy), toolrouter asks the client's user through elicitation, where
//! the client declared it can be asked (a 2025 session). A yes makes the
//! call; a no, a dismissal or no answer within `access.consent_timeout_s`
//! refuses it. A client that cannot be asked decides itself: it sees each
//! session tool's `destructiveHint`.

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer};
use serde_json::Value;

use crate::engine::Engine;

/// `Ok` when the call may go ahead; `Err` with why not, for the model.
pub(super) async fn ask(
    engine: &Engine,
    peer: &Peer<RoleServer>,
    name: &str,
    arguments: &Value,
    client: Option<&str>,
) -> Result<(), String> {
    let catalog = engine.catalog();
    let Ok(api) = catalog.find(name) else { return Ok(()) };
    if !engine.needs_consent(client, &catalog, api)
        || !peer.supported_elicitation_modes().contains(&ElicitationMode::Form)
    {
        return Ok(());
    }
    let function = api.function_name.clone();
    let message = format!(
        "Allow toolrouter to call `{function}` with {}? It may change or delete data.",
        crate::text::clip(&arguments.to_string(), 500)
    );
    let schema = ElicitationSchema::builder()
        .required_bool("allow")
        .description("Check to allow this call.")
        .build()
        .map_err(|e| format!("the consent form could not be made ({e}); `{function}` was not called"))?;
    let params = ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: schema };
    let timeout = Duration::from_secs(engine.config.access.consent_timeout_s);
    match peer.create_elicitation_with_timeout(params, Some(timeout)).await {
        Ok(answer) if answer.action == ElicitationAction::Accept => {
            match answer.content.as_ref().and_then(|c| c.get("allow")).and_then(Value::as_bool) {
                Some(true) => Ok(()),
                _ => Err(format!("the user did not allow the call to `{function}`; it was not made")),
            }
        }
        Ok(answer) => {
            let how = if answer.action == ElicitationAction::Decline { "refused" } else { "dismissed" };
            Err(format!("the user {how} the call to `{function}`; it was not made"))
        }
        Err(e) => Err(format!("the user's consent to `{function}` could not be had ({e}); it was not made")),
    }
}
