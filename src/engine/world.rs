//! What searches, plans and calls read, replaced whole when a downstream
//! MCP server's tools change: the catalog (the configured sources, then
//! the downstream tools as last listed) and its search index.
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
        let retriever = match &current.retriever {
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
