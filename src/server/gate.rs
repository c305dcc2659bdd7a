//! What admits a request to a protected route: the API keys' hashes,
//! each key's request rate (`server.api_key_hashes`, `admin_key_hashes`,
//! `client_rate`, `client_burst`), the OAuth resource server
//! (`[server.oauth]`) and the policies OAuth scopes put tokens under
//! (`access.policies[].scopes`). The [`Gate`] sits in the app behind an
//! [`arc_swap::ArcSwap`]: a request reads it with one atomic load, a
//! reload swaps it whole.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::oauth::Verifier;
use crate::config::{AccessConfig, Config};
use crate::policy::Policies;

/// Requests per client key (or peer address, without keys).
pub(super) type ClientLimiter = governor::DefaultKeyedRateLimiter<String>;

/// The keys and the per-key request rate in force.
pub(crate) struct Gate {
    /// Every accepted key's hash (operators' included).
    pub(super) key_hashes: HashSet<String>,
    /// The operators' keys' hashes (`server.admin_key_hashes`).
    pub(super) admin_hashes: HashSet<String>,
    /// Requests per client key (`None`: no limit).
    pub(super) limiter: Option<Arc<ClientLimiter>>,
    /// `server.client_rate` and `server.client_burst` (whole, for the
    /// cluster's shared cells and for messages).
    pub(super) client_rate: f64,
    pub(super) client_burst: u32,
    /// The policies, for the scopes that choose them ([`Gate::token_client`]).
    access: AccessConfig,
    /// The OAuth resource server (`None`: keys only).
    pub(super) oauth: Option<Arc<Verifier>>,
}

impl Gate {
    /// The gate of `server`, its rate divided among `share` replicas
    /// (which each admit their share of the rate and of the burst).
    pub(super) fn new(config: &Config, share: u32) -> Gate {
        let server = &config.server;
        let admin_hashes: HashSet<String> = server.admin_key_hashes.iter().map(|h| h.to_ascii_lowercase()).collect();
        let key_hashes =
            server.api_key_hashes.iter().map(|h| h.to_ascii_lowercase()).chain(admin_hashes.clone()).collect();
        let burst = server.client_burst.max(1).div_ceil(share);
        let limiter = (server.client_rate > 0.0)
            .then(|| Duration::from_secs_f64(f64::from(share) / server.client_rate))
            .and_then(governor::Quota::with_period)
            .map(|q| q.allow_burst(std::num::NonZeroU32::new(burst).expect("at least 1")))
            .map(|q| Arc::new(governor::RateLimiter::keyed(q)));
        let (client_rate, client_burst) = (server.client_rate, server.client_burst);
        let oauth = server.oauth.enabled().then(|| Arc::new(Verifier::new(&server.oauth)));
        Gate { key_hashes, admin_hashes, limiter, client_rate, client_burst, access: config.access.clone(), oauth }
    }

    /// Whether every request is let in (no key and no OAuth configured).
    pub(super) fn open(&self) -> bool {
        self.key_hashes.is_empty() && self.oauth.is_none()
    }

    /// The client id of a token from `issuer` held by `subject` with
    /// `scopes`: it names the policy the scopes put it under.
    pub(super) fn token_client(&self, issuer: &str, subject: &str, scopes: &[String]) -> String {
        Policies::token_client(issuer, subject, Policies::scoped(&self.access, scopes))
    }

    /// The gate of `server` after this one (a reload): the same limiter,
    /// with the cells each client has used, when the rate and burst are
    /// the same (a new one, every client starting full, when they
    /// changed); the same OAuth resource server, with the keys and tokens
    /// it holds, when `[server.oauth]` is the same.
    pub(super) fn reconfigured(&self, config: &Config, share: u32) -> Gate {
        let mut gate = Gate::new(config, share);
        if (gate.client_rate, gate.client_burst) == (self.client_rate, self.client_burst) {
            gate.limiter = self.limiter.clone();
        }
        if let (Some(old), Some(_)) = (&self.oauth, &gate.oauth)
            && old.config() == &config.server.oauth
        {
            gate.oauth = Some(old.clone());
        }
        gate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(keys: &[&str], rate: f64, burst: u32) -> Config {
        let mut config = Config::default();
        config.server.api_key_hashes = keys.iter().map(|k| k.to_string()).collect();
        config.server.client_rate = rate;
        config.server.client_burst = burst;
        config
    }

    #[test]
    fn a_reconfigured_gate_keeps_its_limiter_only_for_the_same_rate() {
        let gate = Gate::new(&server(&["AB"], 1.0, 1), 1);
        assert!(gate.key_hashes.contains("ab"), "hashes are kept in lower case");
        let limiter = gate.limiter.as_ref().unwrap();
        assert!(limiter.check_key(&"k".to_string()).is_ok());
        assert!(limiter.check_key(&"k".to_string()).is_err(), "a burst of 1");
        let same = gate.reconfigured(&server(&["cd"], 1.0, 1), 1);
        assert!(same.key_hashes.contains("cd") && !same.key_hashes.contains("ab"));
        assert!(same.limiter.as_ref().unwrap().check_key(&"k".to_string()).is_err(), "the same cells");
        let faster = gate.reconfigured(&server(&["cd"], 1.0, 5), 1);
        assert!(faster.limiter.as_ref().unwrap().check_key(&"k".to_string()).is_ok(), "a new limiter");
        assert!(gate.reconfigured(&server(&[], 0.0, 5), 1).limiter.is_none(), "no rate, no limiter");
    }

    #[test]
    fn a_reload_keeps_the_oauth_server_only_while_its_config_is_the_same() {
        let mut config = server(&[], 1.0, 1);
        assert!(Gate::new(&config, 1).open() && Gate::new(&config, 1).oauth.is_none());
        config.server.oauth.issuer = "https://as.example".into();
        config.server.oauth.resource = "https://tr.example/mcp".into();
        let gate = Gate::new(&config, 1);
        assert!(!gate.open(), "tokens are asked for, even without keys");
        let same = gate.reconfigured(&config, 1);
        assert!(Arc::ptr_eq(same.oauth.as_ref().unwrap(), gate.oauth.as_ref().unwrap()), "its keys and tokens kept");
        config.server.oauth.scopes = vec!["tools".into()];
        let changed = gate.reconfigured(&config, 1);
        assert!(!Arc::ptr_eq(changed.oauth.as_ref().unwrap(), gate.oauth.as_ref().unwrap()));
        config.server.oauth = Default::default();
        assert!(gate.reconfigured(&config, 1).oauth.is_none(), "OAuth off at once");
    }
}
