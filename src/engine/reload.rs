//! A reload of the engine's share of the configuration, in place: the
//! upstream credentials (secrets read again) and rate limits, and the
//! downstream MCP servers (added, removed, restarted; the catalog and
//! index follow their tools as after any `list_changed`). The catalog's
//! own sources are reloaded by `Engine::reload_catalog` (engine::world).
//! What else the engine was opened with (index settings, graph, state
//! directory) needs a restart.

use crate::config::Config;
use crate::downstream;
use crate::policy::Policies;
use crate::quarantine::Exceptions;
use crate::upstream::Credentials;

use super::Engine;

/// What [`Engine::reconfigure`] changed.
#[derive(Debug, Default)]
pub(crate) struct Reconfigured {
    /// The upstream rate limits were replaced.
    pub(crate) limits: bool,
    /// The downstream MCP servers started and stopped.
    pub(crate) servers: downstream::Reconfigured,
}

impl Engine {
    /// Takes the upstream credentials (`credentials`, read from `config`
    /// beforehand, so that nothing changes if one cannot be read), the
    /// upstream rate limits and the downstream MCP servers of `config`
    /// (validated) in place of those in use.
    pub(crate) fn reconfigure(&self, config: &Config, credentials: Credentials) -> Reconfigured {
        let limits = self.upstream.reconfigure(&config.upstream, credentials);
        let servers = match &self.downstream {
            Some(downstream) => downstream.reconfigure(&config.catalog.mcp_servers),
            None => {
                if !config.catalog.mcp_servers.is_empty() {
                    tracing::warn!("no async runtime here: the downstream MCP servers are not reconfigured");
                }
                downstream::Reconfigured::default()
            }
        };
        self.set_effects(&config.access);
        match Policies::of(&config.access) {
            Ok(policies) => self.set_policies(policies),
            Err(e) => tracing::error!("the policies were not reloaded, the ones in use stay: {e}"),
        }
        match Exceptions::of(&config.access.allow_flagged, &config.access.accept_changes) {
            Ok(exceptions) => {
                self.exceptions.store(std::sync::Arc::new(exceptions));
                self.review_tools();
            }
            Err(e) => tracing::error!("access.allow_flagged / accept_changes were not reloaded: {e}"),
        }
        Reconfigured { limits, servers }
    }
}
