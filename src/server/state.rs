//! The state every face shares, and nothing face-specific: the
//! configuration, the gate (API keys, OAuth, client rates), the engine (loading or
//! loaded, through the chat core that holds it), the cluster, the shutdown cut-off and the chat core. A face's
//! own state (the Responses store, the MCP service, the console's history)
//! is the face's, attached to its routes as an extension. Every face and
//! the floor import this; it imports no face and not the router.

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::gate::Gate;
use crate::chat::ChatCore;
use crate::config::Config;
use crate::downstream::ServerState;
use crate::engine::Engine;
use crate::engine::loading::{Loading, NotReady};
use crate::llm::{ChatModel, LlmClient};

/// What the routes share.
pub struct App {
    /// The configuration the server started with (a reload changes the
    /// gate, and the engine's share, in place; the rest needs a restart).
    pub(crate) config: Config,
    /// The API keys and the per-key request rate, swapped by a reload.
    pub(crate) gate: ArcSwap<Gate>,
    /// The Redis cluster the per-key request rate is shared through (the
    /// gate's local limiter is then this replica's share, used without Redis).
    pub(crate) cluster: Option<Arc<crate::cluster::Cluster>>,
    /// Set when the shutdown grace is over: requests still running get 503.
    pub(crate) cut_off: tokio::sync::watch::Sender<bool>,
    /// Route, plan and execute modes, for every face that speaks chat.
    pub(crate) chat: Arc<ChatCore>,
}

impl App {
    /// The app of `config`, its model the server at `llm.base_url` (none without one).
    pub fn new(config: &Config) -> Arc<App> {
        let llm = LlmClient::new(config).ok().map(|client| Arc::new(client) as Arc<dyn ChatModel>);
        App::with_model(config, llm)
    }

    /// The app of `config` with `llm` as its model (tests script one).
    pub fn with_model(config: &Config, llm: Option<Arc<dyn ChatModel>>) -> Arc<App> {
        let cluster = crate::cluster::Cluster::open(&config.cluster).unwrap_or_else(|e| {
            tracing::error!("the cluster cannot be used, so limits are this replica's alone: {e:#}");
            None
        });
        let gate = Gate::new(config, rate_share(config, cluster.is_some()));
        Arc::new(App {
            chat: Arc::new(ChatCore::new(config, llm, cluster.clone())),
            config: config.clone(),
            gate: ArcSwap::from_pointee(gate),
            cluster,
            cut_off: tokio::sync::watch::Sender::new(false),
        })
    }

    /// Serves the engine `loading` loads (set before the routes are made:
    /// the MCP face's sessions are made on it).
    pub fn set_loading(&self, loading: Arc<Loading>) {
        self.chat.set_loading(loading);
    }

    /// The chat core every chat face answers with.
    pub fn chat(&self) -> &Arc<ChatCore> {
        &self.chat
    }

    /// The loaded engine, or why there is none yet.
    pub fn engine(&self) -> Result<&Arc<Engine>, NotReady> {
        self.chat.engine()
    }
}

/// The replicas the per-key request rate is divided among: without Redis,
/// each replica admits its share of the rate and of the burst.
pub(crate) fn rate_share(config: &Config, cluster: bool) -> u32 {
    if cluster { config.cluster.replicas.max(1) } else { 1 }
}

/// `ready`, or `ready, degraded: ` and what is down (the dense index
/// still being built, downstream MCP servers, Redis).
pub(crate) async fn readiness(engine: &Engine) -> String {
    let building = engine.index_status();
    let mut down: Vec<String> = building.into_iter().collect();
    down.extend(engine.downstream_health().into_iter().filter(|h| h.state != ServerState::Up).map(|h| {
        format!(
            "the MCP server `{}` is {} ({})",
            h.server,
            h.state.as_str(),
            h.error.as_deref().unwrap_or("connecting")
        )
    }));
    if let Some(cluster) = engine.cluster()
        && let Err(e) = cluster.ping().await
    {
        let waiting = engine.sharing_stats().map_or(0, |s| s.backlog);
        down.push(format!(
            "{e}; each replica enforces its share of the limits (cluster.replicas); {waiting} runs wait to be shared"
        ));
    }
    // Held tools are named with why: their text is the server's, shown as data (quoted, cut short).
    down.extend(
        engine
            .held_tools()
            .into_iter()
            .map(|h| format!("the tool `{}` is held: {}", h.function, crate::text::clip(&h.reasons.join("; "), 300))),
    );
    if down.is_empty() { "ready".to_string() } else { format!("ready, degraded: {}", down.join("; ")) }
}
