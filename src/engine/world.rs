//! What searches, plans and calls read, replaced whole when a downstream
//! MCP server's tools change: the catalog (the configured sources, then
//! the downstream tools as last listed) and its search index.
//!
//! A first start on a catalog without a stored index serves at once with
//! BM25 alone while [`build_dense_index`] builds the dense index on a
//! thread of its own (minutes on ToolBench's 43k APIs), then swaps in the
//! hybrid retriever; [`Engine::index_status`] says how far it has got.
//!
//! A reader takes the [`World`] as it is (an `Arc`) and keeps it for the
//! whole operation, so a search never mixes two catalogs. When the
//! downstream tools change, [`follow_downstream`] waits for the changes to
//! settle, builds the new catalog and index on the blocking pool (the
//! embedding cache makes a rebuild embed only the new tools; the old world
//! serves meanwhile), swaps it in and bumps [`Engine::tools_changed`], so
//! the faces can tell their clients (MCP `list_changed`).

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;

use super::{Engine, EngineError};
use crate::catalog::{Catalog, McpServerTools};
use crate::retrieval::{Progress, Retriever};

/// Downstream changes closer than this are one rebuild.
const SETTLE: Duration = Duration::from_millis(500);

/// A catalog and its search index.
pub struct World {
    pub catalog: Arc<Catalog>,
    /// `None` in an engine opened for calls alone.
    retriever: Option<Retriever>,
    /// The downstream tools the catalog holds.
    mcp: Vec<McpServerTools>,
}

impl World {
    pub(super) fn new(catalog: Arc<Catalog>, retriever: Option<Retriever>, mcp: Vec<McpServerTools>) -> World {
        World { catalog, retriever, mcp }
    }

    /// The retriever searches and plans rank with.
    pub fn retriever(&self) -> Result<&Retriever, EngineError> {
        self.retriever.as_ref().ok_or_else(|| {
            EngineError::Internal("this engine was opened for calls alone: it has no search index".into())
        })
    }

    pub fn has_retriever(&self) -> bool {
        self.retriever.is_some()
    }
}

impl Engine {
    /// The catalog and index as they are now.
    pub fn world(&self) -> Arc<World> {
        self.world.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The catalog as it is now.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.world().catalog.clone()
    }

    /// A counter bumped whenever the catalog's tools change (a downstream
    /// server's tools were added, changed or removed).
    pub fn tools_changed(&self) -> watch::Receiver<u64> {
        self.tools_changed.subscribe()
    }

    /// While search is BM25 alone because the dense index is being built:
    /// how far it has got ("lexical search only, dense index 37% built,
    /// about 6 min left"). `None` once it is there.
    pub fn index_status(&self) -> Option<String> {
        let pending = self.world().retriever.as_ref().is_some_and(Retriever::dense_pending);
        pending.then(|| {
            let report = self.dense_build.report();
            let mut status = "lexical search only, dense index ".to_string();
            match report.percent {
                Some(p) => status.push_str(&format!("{p}% built")),
                None => status.push_str("being built"),
            }
            if let Some(s) = report.eta_s {
                status.push_str(&match s {
                    0..=90 => format!(", about {s} s left"),
                    _ => format!(", about {} min left", s.div_ceil(60)),
                });
            }
            status
        })
    }

    /// Rebuilds the world from the downstream tools as listed now, unless
    /// they are those it holds. Blocking (index build). Whether it changed.
    fn rebuild_world(&self) -> anyhow::Result<bool> {
        let Some(downstream) = &self.downstream else { return Ok(false) };
        let tools = downstream.tools();
        let current = self.world();
        if current.mcp == tools {
            return Ok(false);
        }
        let started = std::time::Instant::now();
        let catalog = Arc::new(self.base.with_mcp_tools(&tools));
        // While the dense index is being built, the new catalog is searched
        // by BM25 too, and the build starts over on it.
        let retriever = match &current.retriever {
            Some(r) if r.dense_pending() => Some(
                Retriever::open_lexical_until_built(
                    catalog.clone(),
                    &self.config,
                    r.embedder().cloned(),
                    &Progress::default(),
                )?
                .0,
            ),
            Some(r) => Some(Retriever::open_with(
                catalog.clone(),
                &self.config,
                r.embedder().cloned(),
                false,
                &Progress::default(),
            )?),
            None => None,
        };
        let apis = catalog.apis().len();
        *self.world.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(World { catalog, retriever, mcp: tools });
        self.tools_changed.send_modify(|n| *n += 1);
        tracing::info!(
            apis,
            ms = started.elapsed().as_millis() as u64,
            "the catalog now holds the downstream tools as listed"
        );
        Ok(true)
    }
}

/// Rebuilds `engine`'s world after every settled downstream change, until
/// the engine is dropped.
pub(super) async fn follow_downstream(engine: Weak<Engine>, mut changes: watch::Receiver<u64>) {
    while changes.changed().await.is_ok() {
        tokio::time::sleep(SETTLE).await;
        changes.borrow_and_update();
        let Some(engine) = engine.upgrade() else { return };
        match tokio::task::spawn_blocking(move || engine.rebuild_world()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::error!("the catalog could not take the downstream tools' change: {e:#}"),
            Err(e) => tracing::error!("rebuilding the catalog failed: {e}"),
        }
    }
}

/// Builds the dense index of `engine`'s catalog on a thread of its own and
/// swaps the hybrid retriever in, unless the catalog changed meanwhile
/// (then builds again for the new one: the embedding cache makes that
/// quick). On failure search stays lexical, said in the log.
pub(super) fn build_dense_index(engine: &Arc<Engine>) {
    let (config, progress) = (engine.config.clone(), engine.dense_build.clone());
    // Only a weak reference while building: the engine may be dropped meanwhile.
    let engine = Arc::downgrade(engine);
    let spawned = std::thread::Builder::new().name("dense-index".into()).spawn(move || {
        tracing::info!("serving with BM25 alone while the dense index is built");
        let started = std::time::Instant::now();
        loop {
            let Some(world) = engine.upgrade().map(|e| e.world()) else { return };
            let Some(retriever) = world.retriever.as_ref().filter(|r| r.dense_pending()) else { return };
            let embedder = retriever.embedder().cloned();
            let full = match Retriever::open_with(world.catalog.clone(), &config, embedder, false, &progress) {
                Ok(full) => full,
                Err(e) => return tracing::error!("the dense index was not built; search stays lexical: {e}"),
            };
            let Some(engine) = engine.upgrade() else { return };
            let mut slot = engine.world.write().unwrap_or_else(|e| e.into_inner());
            if Arc::ptr_eq(&slot.catalog, &world.catalog) {
                let mcp = slot.mcp.clone();
                *slot = Arc::new(World { catalog: world.catalog.clone(), retriever: Some(full), mcp });
                let secs = started.elapsed().as_secs();
                return tracing::info!(secs, "the dense index is built: hybrid search from now on");
            }
        }
    });
    if let Err(e) = spawned {
        tracing::error!("the dense index cannot be built (no thread): {e}");
    }
}
