//! Reloading the configuration without a restart: on SIGHUP, `serve` and
//! `mcp` load it again exactly as at start (the same file, the process
//! environment, the same command-line flags: a [`Source`]) and apply in
//! place what can change:
//!
//! * `serve` alone: the API keys and the per-key request rate
//!   (`server.api_key_hashes`, `admin_key_hashes`, `client_rate`,
//!   `client_burst`: the app's [`super::gate::Gate`], swapped whole);
//! * the engine's share ([`crate::engine::Engine::reconfigure`]): the
//!   policies (`access.policies`), the held tools' exceptions
//!   (`access.allow_flagged`, `accept_changes`), what calls do and whether
//!   they need consent (`access.read_only`, `destructive`, `consent`), the
//!   upstream credentials and the RapidAPI key (their secrets read again,
//!   even when the config names the same files), the upstream rate limits,
//!   and the downstream MCP servers (started, stopped, restarted; the
//!   catalog follows their tools);
//! * the catalog's sources (`catalog.paths`, `include_embedded`,
//!   `query_files`) are read again, even when the keys are unchanged (a
//!   spec edited in place): a changed catalog is searched at once, its
//!   index carried over ([`crate::engine::Engine::reload_catalog`]);
//! * the TLS certificate and key files are read again (as their watcher
//!   does when they change).
//!
//! A config that does not load (unreadable, not TOML, a value that fails
//! its check) or names a secret that cannot be read is refused whole: an
//! ERROR says why and nothing changes. Every other changed key needs a
//! restart: a WARN names each ("server.listen changed: restart to apply")
//! until the process is restarted. An INFO line lists what was applied.
//! Reloads run one at a time, in the order the signals came. (Unix only:
//! elsewhere there is no SIGHUP, and a change needs a restart.)

use std::sync::Arc;
use std::time::Duration;

use super::state::{App, rate_share};
use super::tls::Certificates;
use crate::config::Config;
use crate::engine::loading::Loading;
use crate::upstream::Credentials;

/// Loads the configuration again as it was loaded at start (the config
/// file, the environment, the command line's overrides), or says why not.
pub(crate) type Source = Arc<dyn Fn() -> Result<Config, String> + Send + Sync>;

/// The keys a reload applies in place in every face; any other changed key
/// needs a restart.
const ENGINE_KEYS: [&str; 18] = [
    "access.policies",
    "access.allow_flagged",
    "access.accept_changes",
    "access.read_only",
    "access.destructive",
    "access.consent",
    "catalog.paths",
    "catalog.include_embedded",
    "catalog.query_files",
    "catalog.mcp_servers",
    "upstream.credentials",
    "upstream.rapidapi_key_file",
    "upstream.global_rate",
    "upstream.host_rate",
    "upstream.api_rate",
    "upstream.client_rate",
    "upstream.burst",
    "upstream.max_wait_ms",
];

/// The keys a reload applies in place in `serve`.
const SERVER_KEYS: [&str; 5] =
    ["server.api_key_hashes", "server.admin_key_hashes", "server.client_rate", "server.client_burst", "server.oauth"];

/// What a reload changes, and what it compares with.
pub(crate) struct Reloader {
    source: Source,
    /// What the process started with: a key that cannot change in place
    /// needs a restart for as long as it differs from this.
    started: Config,
    /// What the last reload applied (at first, what the process started with).
    applied: Config,
    /// `serve`'s app (`None` in `mcp`, which has no keys or listener).
    app: Option<Arc<App>>,
    loading: Arc<Loading>,
    certificates: Option<Arc<Certificates>>,
}

/// The process's SIGHUPs, from now on (before this, SIGHUP ends the
/// process). Call it before the server says it is up.
#[cfg(unix)]
pub(crate) fn hangups() -> std::io::Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
}

impl Reloader {
    /// A reloader of `loading`'s configuration, read again from `source`,
    /// applied to `app` (`serve`) or to the engine alone (`mcp`).
    pub(crate) fn new(source: Source, loading: Arc<Loading>, app: Option<Arc<App>>) -> Reloader {
        let started = loading.config().clone();
        Reloader { source, applied: started.clone(), started, app, loading, certificates: None }
    }

    /// Also reads these TLS certificate files again on each reload.
    pub(crate) fn with_certificates(mut self, certificates: Option<Arc<Certificates>>) -> Reloader {
        self.certificates = certificates;
        self
    }

    /// Reloads on every SIGHUP `hangups` receives, for ever.
    #[cfg(unix)]
    pub(crate) async fn follow(mut self, mut hangups: tokio::signal::unix::Signal) {
        while hangups.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading the configuration");
            self.reload().await;
        }
    }

    /// Loads the configuration again and applies it, or refuses it whole.
    pub(crate) async fn reload(&mut self) {
        let config = match (self.source)() {
            Ok(config) => config,
            Err(e) => {
                tracing::error!("the configuration was not reloaded, the one in use stays: {e}");
                return;
            }
        };
        let credentials = match Credentials::read(&config) {
            Ok(credentials) => credentials,
            Err(e) => {
                tracing::error!("the configuration was not reloaded, the one in use stays: {e:#}");
                return;
            }
        };
        let serving = self.app.is_some();
        let in_place = |key: &String| ENGINE_KEYS.contains(&key.as_str()) || SERVER_KEYS.contains(&key.as_str());
        // `mcp` serves no HTTP: its `[server]` keys are not used, so not reported.
        let used = |key: &String| serving || !key.starts_with("server.");
        for key in self.started.changed_keys(&config).iter().filter(|k| used(k) && !in_place(k)) {
            tracing::warn!("{key} changed: restart to apply");
        }
        let applied: Vec<String> =
            self.applied.changed_keys(&config).into_iter().filter(|k| used(k) && in_place(k)).collect();
        if let Some(app) = &self.app {
            self.reload_gate(app, &config);
        }
        if let Some(certificates) = &self.certificates
            && let Err(e) = certificates.reload()
        {
            tracing::error!("TLS certificate not reloaded, the previous one stays in use: {e:#}");
        }
        self.reload_engine(&config, credentials).await;
        let applied = if applied.is_empty() { "no changed key".to_string() } else { applied.join(", ") };
        tracing::info!("configuration reloaded: applied {applied}; upstream secrets read again");
        self.applied = config;
    }

    /// Swaps `app`'s keys, OAuth and per-key rate for those of `config`.
    fn reload_gate(&self, app: &App, config: &Config) {
        let old = app.gate.load();
        let gate = old.reconfigured(config, rate_share(&app.config, app.cluster.is_some()));
        if gate.open() && !old.open() {
            tracing::warn!(listen = %app.config.server.listen, "no API keys configured any more (server.api_key_hashes): anyone who can reach the listener can use it");
        }
        app.gate.store(Arc::new(gate));
    }

    /// Applies the engine's share of `config`, once the engine is loaded
    /// (a reload during a long first index build waits for it).
    async fn reload_engine(&self, config: &Config, credentials: Credentials) {
        if self.loading.is_loading() {
            tracing::info!("the engine is still loading: its share of the configuration applies once it is loaded");
            while self.loading.is_loading() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        let Ok(engine) = self.loading.engine() else {
            return; // It failed to load (said in the log): nothing to apply to.
        };
        let done = engine.reconfigure(config, credentials);
        if done.limits {
            tracing::info!("upstream rate limits replaced");
        }
        let servers = &done.servers;
        if !servers.is_empty() {
            tracing::info!(
                added = ?servers.added,
                removed = ?servers.removed,
                restarted = ?servers.restarted,
                "downstream MCP servers reconfigured"
            );
        }
        // The sources are looked at even when the keys did not change: a
        // spec edited in place is a change too (files not written since
        // the catalog was read are not read again).
        let (config, engine) = (config.clone(), engine.clone());
        match tokio::task::spawn_blocking(move || engine.reload_catalog(&config)).await {
            Ok(Ok(_)) => {} // Said by the engine, with its timings.
            Ok(Err(e)) => tracing::error!("the catalog's sources were not reloaded, the catalog in use stays: {e:#}"),
            Err(e) => tracing::error!("reloading the catalog's sources failed: {e}"),
        }
    }
}
