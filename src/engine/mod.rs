//! The engine the servers and `toolrouter call` share: catalog, retrieval,
//! tool graph, planner, upstream and compression behind four operations —
//! [`Engine::search`], [`Engine::plan`], [`Engine::call`] and
//! [`Engine::record_run`]. It knows nothing of HTTP, MCP or OpenAI; the
//! faces translate.
//!
//! Embedding a query is CPU work behind a lock, so searches and plans run
//! on tokio's blocking pool, never on the async workers.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::args::Options;
use crate::catalog::{Catalog, UnknownApi};
use crate::compress::FieldChoices;
use crate::config::Config;
use crate::consent::Consents;
use crate::downstream::{Downstream, Health};
use crate::graph::store::{self, GraphStore};
use crate::graph::{Neighbourhood, NodeKey, Params, ToolGraph};
use crate::planner::{
    Caller, Decider, DeterministicDecider, DryRun, LongTermMemory, MemoryWriter, PlanRun, Planner, Settings,
};
use crate::policy::{Effects, Policies};
use crate::quarantine::{Exceptions, Quarantine};
use crate::retrieval::{Embedder, Filters, Progress, Retriever, Signal};
use crate::upstream::Upstream;

pub(crate) mod access;
mod call;
mod error;
mod learning;
pub(crate) mod llm_decider;
pub(crate) mod loading;
mod reload;
mod shared;
pub(crate) mod solve;
mod world;

pub(crate) use call::{CallRequest, Called};
pub(crate) use error::EngineError;
pub(crate) use shared::SharingStats;
pub(crate) use world::World;

/// Largest serialized arguments accepted by [`Engine::call`].
pub(crate) const MAX_ARGUMENTS_BYTES: usize = 64 * 1024;

/// Results of one search when the request does not say, and at most (the
/// same rule on every face: `search_k`).
pub(crate) const DEFAULT_SEARCH_RESULTS: usize = 5;
pub(crate) const MAX_SEARCH_RESULTS: usize = 50;

/// How many results a search asked for `k` returns, or why `k` is refused.
pub(crate) fn search_k(k: Option<usize>) -> Result<usize, String> {
    match k.unwrap_or(DEFAULT_SEARCH_RESULTS) {
        k @ 1..=MAX_SEARCH_RESULTS => Ok(k),
        k => Err(format!("`k` must be 1 to {MAX_SEARCH_RESULTS}, got {k}")),
    }
}

/// One search hit.
#[derive(Debug, Clone, Serialize)]
pub struct SearchHit {
    pub function: String,
    pub tool: String,
    pub category: String,
    pub description: String,
    pub score: f32,
    /// Availability α: the graph's, else the tool's RapidAPI success-rate prior.
    pub alpha: f64,
    pub input_schema: Value,
    /// The API's rank and score in the lexical (BM25) and dense pools of
    /// the whole query, when it was in them.
    pub lexical: Option<Signal>,
    pub dense: Option<Signal>,
    /// A remembered successful run for a similar task used it.
    pub remembered: bool,
    /// The tool graph's weight from the caller's last call to it (0: no edge, or no last call).
    pub follows: f32,
    /// What calling it does.
    pub effect: crate::catalog::Effect,
}

/// What a catalog search is for ([`Engine::search_explained`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Search<'a> {
    pub(crate) query: &'a str,
    pub(crate) k: usize,
    /// Only this category.
    pub(crate) category: Option<&'a str>,
    /// The function the caller called last: the tool graph's cue.
    pub(crate) after: Option<&'a str>,
}

/// A search with its explanation ([`Engine::search_explained`]).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Found {
    pub(crate) hits: Vec<SearchHit>,
    /// The intents the query was split into (empty: searched as one).
    pub(crate) intents: Vec<String>,
    /// Why the search was less than the configured one ("lexical search
    /// only, dense index 37% built, about 6 min left"), for the answer's report.
    pub(crate) degraded: Option<String>,
}

/// The engine.
pub struct Engine {
    pub(crate) config: Config,
    /// The catalog of the configured sources alone; the world's adds the
    /// downstream MCP servers' tools to it. Replaced when a reload changes
    /// the sources ([`Engine::reload_catalog`]).
    base: RwLock<Arc<Catalog>>,
    /// Held while a new world is made, so that two changes (a reload, a
    /// downstream server's) never make worlds from the same old one.
    rebuilding: Mutex<()>,
    /// The catalog and index as they are now ([`World`]).
    world: RwLock<Arc<World>>,
    /// The user's own MCP servers, when any is configured.
    downstream: Option<Arc<Downstream>>,
    tools_changed: tokio::sync::watch::Sender<u64>,
    /// Readers take a snapshot (an `Arc`), so a long execute run never
    /// holds the lock; a write copies the graph only while a snapshot is out.
    graph: RwLock<Arc<ToolGraph>>,
    /// `None` when another process holds the graph (it is then read-only here).
    store: Mutex<Option<GraphStore>>,
    /// Long-term memory; readers take a snapshot, as of the graph.
    memory: RwLock<Arc<LongTermMemory>>,
    /// `None` when another process holds the graph (and so the memory).
    memory_writer: Mutex<Option<MemoryWriter>>,
    upstream: Upstream,
    choices: FieldChoices,
    /// Learning shared with the other replicas (with `[cluster]` on, in
    /// the process that holds the graph).
    sharing: Option<Arc<shared::Sharing>>,
    /// The last runs the graph learned from (the console shows them).
    recent_runs: Mutex<std::collections::VecDeque<learning::RecentRun>>,
    /// How far the background build of the dense index has got
    /// ([`Engine::index_status`]).
    dense_build: Arc<Progress>,
    /// Whether a thread is building the full index ([`world::build_full_index`]).
    building_index: std::sync::atomic::AtomicBool,
    /// Who may use which tools (`[access]`), swapped whole by a reload.
    policies: arc_swap::ArcSwap<Policies>,
    /// Every call made or refused (`access.audit`; `None`: off).
    audit: Option<crate::audit::AuditLog>,
    /// The tools of the world's catalog held from every caller, reviewed
    /// whenever the catalog or the exceptions change.
    quarantine: RwLock<Arc<Quarantine>>,
    /// Held while a review runs and its result is stored: reviews (and
    /// their writes of `tools-seen.json`) one at a time, the last stored
    /// of the newest catalog.
    reviewing: std::sync::Mutex<()>,
    /// `access.allow_flagged` and `access.accept_changes`, swapped by a reload.
    exceptions: arc_swap::ArcSwap<Exceptions>,
    /// `access.read_only` and `access.destructive`, swapped by a reload.
    effects: arc_swap::ArcSwap<Effects>,
    /// Execute mode's calls waiting for the user's consent ([`crate::consent`]).
    pub(crate) consents: Consents,
    /// `access.consent`, swapped by a reload.
    consent: arc_swap::ArcSwap<crate::config::ConsentMode>,
}

/// What [`Engine::open_reporting`] does when the catalog has no stored
/// index: build it before returning (commands, which must rank as
/// configured), or search with BM25 alone meanwhile and build it in the
/// background (the servers, which must answer at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FirstBuild {
    Wait,
    InBackground,
}

impl Engine {
    /// Loads everything `config` names (catalog, index, graph, memory, upstream).
    pub fn open(config: &Config) -> anyhow::Result<Arc<Engine>> {
        Engine::open_reporting(config, &Progress::default(), FirstBuild::Wait)
    }

    /// [`Engine::open`], saying what it does in `progress` (a first index
    /// build takes minutes), building a missing index as `first_build` says.
    pub(crate) fn open_reporting(
        config: &Config,
        progress: &Progress,
        first_build: FirstBuild,
    ) -> anyhow::Result<Arc<Engine>> {
        progress.set_stage("loading the catalog");
        let base = Arc::new(Catalog::load(&world::sources(config))?);
        let downstream = Engine::connect_downstream(config, progress);
        let (catalog, mcp) = Engine::with_downstream_tools(&base, downstream.as_ref());
        let embedder = match config.retrieval.mode {
            crate::config::SearchMode::Lexical => None,
            _ => {
                progress.set_stage("loading the embedding model");
                Some(Arc::new(Embedder::load(&config.embedding)?))
            }
        };
        progress.set_stage("loading the search index");
        let (retriever, pending) = match first_build {
            FirstBuild::InBackground => {
                Retriever::open_lexical_until_built(catalog.clone(), config, embedder, progress)?
            }
            FirstBuild::Wait => (Retriever::open_with(catalog.clone(), config, embedder, false, progress)?, false),
        };
        let engine = Engine::assemble(config, base, World::new(catalog, Some(retriever), mcp), downstream, progress)?;
        if pending {
            world::build_full_index(&engine);
        }
        Ok(engine)
    }

    /// Starts the downstream MCP servers' supervisors and waits for their
    /// first connection attempts (each within its `connect_timeout_ms`).
    /// `None` outside a tokio runtime (said in the log when servers are
    /// configured); without servers, none are started, but a reload may
    /// add some ([`Engine::reconfigure`]).
    fn connect_downstream(config: &Config, progress: &Progress) -> Option<Arc<Downstream>> {
        let servers = &config.catalog.mcp_servers;
        if tokio::runtime::Handle::try_current().is_err() {
            if !servers.is_empty() {
                tracing::warn!("no async runtime here: the downstream MCP servers are not connected");
            }
            return None;
        }
        if servers.is_empty() {
            return Some(Downstream::start(servers, &config.state.dir()));
        }
        progress.set_stage("connecting to the MCP servers");
        let downstream = Downstream::start(servers, &config.state.dir());
        let patience = servers.iter().map(|s| s.connect_timeout_ms).max().unwrap_or(0) + 1_000;
        downstream.wait_first_attempts(Duration::from_millis(patience));
        for health in downstream.health().iter().filter(|h| h.error.is_some()) {
            tracing::warn!(server = %health.server, error = ?health.error, "a downstream MCP server is not connected; its tools join the catalog when it is");
        }
        Some(downstream)
    }

    /// `base` with the tools `downstream` has listed (and those tools).
    fn with_downstream_tools(
        base: &Arc<Catalog>,
        downstream: Option<&Arc<Downstream>>,
    ) -> (Arc<Catalog>, Vec<crate::catalog::McpServerTools>) {
        match downstream.map(|d| d.tools()).filter(|tools| !tools.is_empty()) {
            Some(tools) => (Arc::new(base.with_mcp_tools(&tools)), tools),
            None => (base.clone(), Vec::new()),
        }
    }

    /// An engine for [`Engine::call`] alone (`toolrouter call`): the same
    /// call pipeline, upstream, field choices and run recording in the tool
    /// graph as [`Engine::open`]'s, without what only searches and plans
    /// read: the embedding model, the search index (a first build takes
    /// minutes) and the long-term memory (a standalone call is never
    /// remembered). [`Engine::search`], [`Engine::plan`] and [`Engine::run`]
    /// fail on it.
    pub(crate) fn open_for_calls(config: &Config, base: Arc<Catalog>) -> anyhow::Result<Arc<Engine>> {
        let progress = Progress::default();
        let downstream = Engine::connect_downstream(config, &progress);
        let (catalog, mcp) = Engine::with_downstream_tools(&base, downstream.as_ref());
        Engine::assemble(config, base, World::new(catalog, None, mcp), downstream, &progress)
    }

    /// The rest of the engine around a loaded catalog (and retriever).
    fn assemble(
        config: &Config,
        base: Arc<Catalog>,
        world: World,
        downstream: Option<Arc<Downstream>>,
        progress: &Progress,
    ) -> anyhow::Result<Arc<Engine>> {
        // Read the changes counter before the tools: a change after this is followed.
        let changes = downstream.as_ref().map(|d| {
            let mut changes = d.changes();
            changes.borrow_and_update();
            changes
        });
        let catalog = world.catalog.clone();
        progress.set_stage("loading the tool graph");
        let state = config.state.dir();
        let params = Params::from(&config.graph);
        let dir = store::graph_dir(&state);
        let (graph, store) = match GraphStore::open(&dir, params, Some(&catalog)) {
            Ok((store, graph, _)) => (graph, Some(store)),
            Err(e) => {
                tracing::warn!("the tool graph is read-only in this process: {e}");
                (store::read(&dir, params, Some(&catalog))?.0, None)
            }
        };
        // What a writer (this process or another) found and repaired, for `/metrics`.
        match store::last_recovery(&dir) {
            Ok(last) => crate::metrics::global().graph_recovery(last),
            Err(e) => tracing::warn!("the graph's last recovery report is unreadable: {e}"),
        }
        // Only searches and plans read the memory; a call alone is never remembered.
        progress.set_stage("loading the long-term memory");
        let (memory, memory_writer) = match world.retriever() {
            Ok(retriever) => learning::open_memory(config, retriever.embedder(), store.is_some(), progress)?,
            Err(_) => (LongTermMemory::default(), None),
        };
        let mut upstream = Upstream::new(&base, config)?;
        if let Some(d) = &downstream {
            upstream = upstream.with_downstream(d.clone());
        }
        let choices = FieldChoices::load(&FieldChoices::path_in(&state)).unwrap_or_default();
        let runtime = tokio::runtime::Handle::try_current().is_ok();
        let (sharing, position) = match (upstream.limits().cluster(), &store) {
            (Some(cluster), Some(store)) if runtime => {
                let sharing = shared::Sharing::open(config, cluster.clone())?;
                (Some(Arc::new(sharing)), store.position().unwrap_or("0").to_string())
            }
            _ => (None, String::new()),
        };
        let engine = Arc::new(Engine {
            config: config.clone(),
            base: RwLock::new(base),
            rebuilding: Mutex::default(),
            world: RwLock::new(Arc::new(world)),
            downstream,
            tools_changed: tokio::sync::watch::channel(0).0,
            graph: RwLock::new(Arc::new(graph)),
            store: Mutex::new(store),
            memory: RwLock::new(Arc::new(memory)),
            memory_writer: Mutex::new(memory_writer),
            upstream,
            choices,
            sharing: sharing.clone(),
            recent_runs: Mutex::default(),
            dense_build: Arc::default(),
            building_index: Default::default(),
            policies: arc_swap::ArcSwap::from_pointee(Policies::of(&config.access).map_err(anyhow::Error::msg)?),
            quarantine: RwLock::default(),
            reviewing: std::sync::Mutex::new(()),
            effects: arc_swap::ArcSwap::from_pointee(
                Effects::of(&config.access.read_only, &config.access.destructive).map_err(anyhow::Error::msg)?,
            ),
            consents: Consents::new(std::time::Duration::from_secs(config.access.consent_timeout_s)),
            consent: arc_swap::ArcSwap::from_pointee(config.access.consent),
            exceptions: arc_swap::ArcSwap::from_pointee(
                Exceptions::of(&config.access.allow_flagged, &config.access.accept_changes)
                    .map_err(anyhow::Error::msg)?,
            ),
            audit: if config.access.audit {
                let audit = crate::audit::AuditLog::open(&state);
                Some(audit.map_err(|e| anyhow::anyhow!("starting the audit log's writer: {e}"))?)
            } else {
                None
            },
        });
        engine.review_tools();
        if let Some(sharing) = sharing {
            shared::start(&engine, sharing, position);
        }
        if let Some(changes) = changes {
            tokio::spawn(world::follow_downstream(Arc::downgrade(&engine), changes));
        }
        Ok(engine)
    }

    /// The Redis cluster the replicas share limits through, if configured.
    pub(crate) fn cluster(&self) -> Option<&Arc<crate::cluster::Cluster>> {
        self.upstream.limits().cluster()
    }

    /// The downstream MCP servers' health (empty without servers).
    pub(crate) fn downstream_health(&self) -> Vec<Health> {
        self.downstream.as_ref().map(|d| d.health()).unwrap_or_default()
    }

    /// Forgets the rate limiters' idle keys (clients, APIs, hosts) and
    /// expired `Retry-After` holds; a long-running server calls it now and then.
    pub(crate) fn prune_limits(&self) {
        self.upstream.limits().prune();
    }

    /// The `k` APIs that best fit `query` (optionally within a category).
    pub async fn search(
        self: &Arc<Self>,
        query: &str,
        k: usize,
        category: Option<&str>,
    ) -> Result<Vec<SearchHit>, EngineError> {
        Ok(self.search_explained(Search { query, k, category, after: None }, None).await?.hits)
    }

    /// [`Engine::search`] with why each API ranks where it does, and the
    /// intents the query was split into. `after`, the function the caller
    /// called last, is the tool graph's cue: the APIs that follow it rank
    /// higher, as in route mode. Only the APIs `client`'s policy allows are
    /// ranked.
    pub(crate) async fn search_explained(
        self: &Arc<Self>,
        search: Search<'_>,
        client: Option<&str>,
    ) -> Result<Found, EngineError> {
        let Search { query, k, category, after } = search;
        if query.trim().is_empty() {
            return Err(EngineError::BadInput("the query is empty".into()));
        }
        let (engine, query) = (self.clone(), query.to_string());
        let allowed = self.allowed_mask(client, &self.catalog());
        let filters = Filters { category: category.map(str::to_string), tool: None, allowed };
        let follows = match after {
            Some(function) => self.graph().followers(function, &self.catalog()),
            None => Vec::new(),
        };
        let (results, remembered, follows, catalog) = tokio::task::spawn_blocking(move || {
            let world = engine.world();
            let retriever = world.retriever()?;
            let options = retriever.options();
            let mut prepared = retriever.prepare(&query, options)?;
            if let Some(vector) = prepared.vectors.first() {
                let examples = engine.memory().examples(vector, engine.config.planner.hints);
                prepared.remembered = crate::planner::remembered(&examples, &world.catalog);
            }
            prepared.after = follows;
            let remembered: Vec<_> = prepared.remembered.iter().map(|(id, _)| *id).collect();
            let results = retriever.rank(&prepared, k, &filters, options);
            Ok::<_, EngineError>((results, remembered, prepared.after, world.catalog.clone()))
        })
        .await
        .map_err(|e| EngineError::Internal(e.to_string()))??;
        let graph = self.graph();
        let hits = results
            .hits
            .iter()
            .map(|h| {
                let api = catalog.api(h.api);
                let tool = catalog.tool(api.tool);
                let alpha =
                    graph.alpha(&NodeKey::Api(api.function_name.clone())).unwrap_or_else(|| tool.availability_prior());
                SearchHit {
                    function: api.function_name.clone(),
                    tool: tool.name.clone(),
                    category: tool.category.clone(),
                    description: api.description.clone(),
                    score: h.score,
                    alpha,
                    input_schema: api.input_schema(),
                    lexical: h.lexical,
                    dense: h.dense,
                    remembered: remembered.contains(&h.api),
                    follows: follows.iter().find(|(api, _)| *api == h.api).map_or(0.0, |(_, w)| *w),
                    effect: self.effect(&catalog, api),
                }
            })
            .collect();
        Ok(Found { hits, intents: results.intents, degraded: self.index_status() })
    }

    /// Plans the chain of calls for `query` (dry run) with the graph and
    /// memory, over the APIs `client`'s policy allows.
    pub async fn plan(
        self: &Arc<Self>,
        query: &str,
        max_steps: Option<usize>,
        client: Option<&str>,
    ) -> Result<PlanRun, EngineError> {
        if query.trim().is_empty() {
            return Err(EngineError::BadInput("the query is empty".into()));
        }
        let (engine, query) = (self.clone(), query.to_string());
        let allowed = self.allowed_mask(client, &self.catalog());
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let mut settings = Settings::from(&engine.config);
            if let Some(n) = max_steps {
                settings.budget.max_steps = n.clamp(1, settings.budget.max_steps.max(1));
            }
            let (graph, memory, world) = (engine.graph(), engine.memory(), engine.world());
            let planner = Planner::new(world.retriever()?, Some(&graph), Some(&memory), settings).with_allowed(allowed);
            Ok(runtime.block_on(planner.run(&query, &DeterministicDecider::default(), &DryRun))?)
        })
        .await
        .map_err(|e| EngineError::Internal(e.to_string()))?
    }

    /// Runs the planner on `task` with `decider` and `caller` over a
    /// snapshot of the graph (the task is embedded on the blocking pool).
    /// `outputs`: responses of calls made before, for argument completion.
    /// Only the APIs `client`'s policy allows are planned.
    pub(crate) async fn run<D: Decider, E: Caller>(
        self: &Arc<Self>,
        task: &str,
        mut settings: Settings,
        outputs: Vec<Value>,
        (decider, caller): (&D, &E),
        client: Option<&str>,
    ) -> Result<PlanRun, EngineError> {
        settings.args = Options::from(&self.config.args);
        let started = std::time::Instant::now();
        let world = self.world();
        let (retriever_world, text) = (world.clone(), task.to_string());
        let prepared = tokio::task::spawn_blocking(move || {
            let retriever = retriever_world.retriever()?;
            Ok::<_, EngineError>(retriever.prepare(&text, retriever.options())?)
        })
        .await
        .map_err(|e| EngineError::Internal(e.to_string()))??;
        let (graph, memory) = (self.graph(), self.memory());
        let allowed = self.allowed_mask(client, &world.catalog);
        let planner = Planner::new(world.retriever()?, Some(&graph), Some(&memory), settings)
            .with_outputs(outputs)
            .with_allowed(allowed);
        Ok(planner.run_prepared(task, &prepared, started, decider, caller).await?)
    }

    /// The long-term memory as it is now.
    pub fn memory(&self) -> Arc<LongTermMemory> {
        self.memory.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The tool graph as it is now.
    pub(crate) fn graph(&self) -> Arc<ToolGraph> {
        self.graph.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// What the graph knows of the API `function` (any spelling the catalog
    /// resolves) and its transitions, up to `limit` each way.
    pub(crate) fn neighbourhood(&self, function: &str, limit: usize) -> Result<Neighbourhood, UnknownApi> {
        let catalog = self.catalog();
        let api = catalog.find(function)?;
        let prior = catalog.tool_of(api).availability_prior();
        Ok(self.graph().neighbourhood(&NodeKey::Api(api.function_name.clone()), prior, limit))
    }

    /// The embedding model, when dense retrieval is on.
    pub fn embedder(&self) -> Option<Arc<Embedder>> {
        self.world().retriever().ok().and_then(Retriever::embedder).cloned()
    }

    /// `w(from, to)` in the tool graph (0 without such an edge).
    pub(crate) fn transition_weight(&self, from: &str, to: &str) -> f64 {
        let graph = self.graph.read().unwrap_or_else(|e| e.into_inner());
        graph.weight(&NodeKey::Api(from.to_string()), &NodeKey::Api(to.to_string()))
    }
}

#[cfg(test)]
mod tests;
