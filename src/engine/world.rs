//! What searches, plans and calls read, replaced whole when a downstream
//! MCP server's tools change: the catalog (the configured sources, then
//! the downstream tools as last listed) and its search index.
//!
//! A first start on a catalog without a stored index serves at once with
//! BM25 alone while [`build_full_index`] builds the dense index on a
//! thread of its own (about 5 minutes on ToolBench's 47k APIs), then swaps in the
//! hybrid retriever; [`Engine::index_status`] says how far it has got.
//!
//! A reader takes the [`World`] as it is (an `Arc`) and keeps it for the
//! whole operation, so a search never mixes two catalogs. When the
//! downstream tools change, [`follow_downstream`] waits for the changes to
//! settle, builds the new catalog on the blocking pool with an index carried
//! over from the one in use (unchanged APIs keep their vectors and postings;
//! new ones are embedded; the HNSW graph is shared, removed APIs skipped:
//! `Retriever::carry_over`), swaps it in and bumps [`Engine::tools_changed`],
//! so the faces can tell their clients (MCP `list_changed`); then
//! [`build_full_index`] builds the full index in the background.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;

use super::{Engine, EngineError};
use crate::catalog::{Catalog, McpServerTools, Sources};
use crate::config::Config;
use crate::retrieval::Retriever;

/// Downstream changes closer than this are one rebuild.
/// (A rebuild is a carry-over of milliseconds: little is saved by waiting long.)
const SETTLE: Duration = Duration::from_millis(50);

/// A catalog and its search index.
pub(crate) struct World {
    pub(crate) catalog: Arc<Catalog>,
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
    pub(crate) fn retriever(&self) -> Result<&Retriever, EngineError> {
        self.retriever.as_ref().ok_or_else(|| {
            EngineError::Internal("this engine was opened for calls alone: it has no search index".into())
        })
    }

    pub(crate) fn has_retriever(&self) -> bool {
        self.retriever.is_some()
    }
}

impl Engine {
    /// The catalog and index as they are now.
    pub(crate) fn world(&self) -> Arc<World> {
        self.world.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The catalog as it is now.
    pub(crate) fn catalog(&self) -> Arc<Catalog> {
        self.world().catalog.clone()
    }

    /// A counter bumped whenever the catalog's tools change (a downstream
    /// server's tools were added, changed or removed).
    pub(crate) fn tools_changed(&self) -> watch::Receiver<u64> {
        self.tools_changed.subscribe()
    }

    /// While search is BM25 alone because the dense index is being built:
    /// how far it has got ("lexical search only, dense index 37% built,
    /// about 6 min left"). `None` once it is there.
    pub(crate) fn index_status(&self) -> Option<String> {
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

    /// Loads the catalog's sources as `config` names them (paths added or
    /// removed, OpenAPI specs edited: a reload) and, if that changes the
    /// catalog, swaps the world for one made of it, its index carried over,
    /// and builds the full index in the background. Blocking (reading the
    /// sources). Whether the catalog changed.
    pub(crate) fn reload_catalog(self: &Arc<Self>, config: &Config) -> anyhow::Result<bool> {
        let started = std::time::Instant::now();
        let sources = sources(config);
        let current = self.base();
        // No file written since the catalog was read: nothing to read (the
        // full catalog's sources are walked and stated in milliseconds).
        if sources.stamp()? == *current.stamp() {
            return Ok(false);
        }
        let base = Arc::new(current.reload(&sources)?);
        // Any field counts (a spec's server URL changes calls, not
        // documents). A file written again unchanged is read again at the
        // next reload.
        let same = current.tools() == base.tools() && current.apis() == base.apis();
        let read_ms = started.elapsed().as_millis() as u64;
        if same {
            tracing::info!(read_ms, "the catalog's sources were written but hold the same catalog");
            return Ok(false);
        }
        self.upstream.set_catalog(&base);
        *self.base.write().unwrap_or_else(|e| e.into_inner()) = base;
        if self.rebuild_world(true)? {
            build_full_index(self);
        }
        let ms = started.elapsed().as_millis() as u64;
        tracing::info!(read_ms, ms, "the catalog's sources changed: the catalog and its index follow");
        Ok(true)
    }

    /// The catalog of the configured sources alone.
    fn base(&self) -> Arc<Catalog> {
        self.base.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Rebuilds the world from the catalog's sources and the downstream
    /// tools as listed now, unless they are those it holds (`force`: the
    /// sources changed): the new catalog's index is carried over from the
    /// one in use (milliseconds), the full index built afterwards
    /// ([`build_full_index`]). Whether it changed.
    fn rebuild_world(&self, force: bool) -> anyhow::Result<bool> {
        let _one_at_a_time = self.rebuilding.lock().unwrap_or_else(|e| e.into_inner());
        let tools = self.downstream.as_ref().map(|d| d.tools()).unwrap_or_default();
        let current = self.world();
        if current.mcp == tools && !force {
            return Ok(false);
        }
        let started = std::time::Instant::now();
        // Without downstream tools the catalog is the sources' own, as at
        // start (no copy: 250 ms of the full catalog's change).
        let catalog = match tools.is_empty() {
            true => self.base(),
            false => Arc::new(self.base().with_mcp_tools(&tools)),
        };
        let retriever = match &current.retriever {
            Some(r) => Some(r.carry_over(catalog.clone(), &self.config)?),
            None => None,
        };
        let apis = catalog.apis().len();
        *self.world.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(World { catalog, retriever, mcp: tools });
        self.review_tools();
        self.tools_changed.send_modify(|n| *n += 1);
        tracing::info!(
            apis,
            ms = started.elapsed().as_millis() as u64,
            "the catalog now holds the downstream tools as listed"
        );
        Ok(true)
    }
}

/// The catalog sources `config` names.
pub(super) fn sources(config: &Config) -> Sources {
    Sources {
        paths: config.catalog.paths.clone(),
        include_embedded: config.catalog.include_embedded,
        query_files: config.catalog.query_files.clone(),
    }
}

/// Rebuilds `engine`'s world after every settled downstream change, until
/// the engine is dropped.
pub(super) async fn follow_downstream(engine: Weak<Engine>, mut changes: watch::Receiver<u64>) {
    while changes.changed().await.is_ok() {
        tokio::time::sleep(SETTLE).await;
        changes.borrow_and_update();
        let Some(engine) = engine.upgrade() else { return };
        let rebuilding = engine.clone();
        match tokio::task::spawn_blocking(move || rebuilding.rebuild_world(false)).await {
            Ok(Ok(true)) => build_full_index(&engine),
            Ok(Ok(false)) => {}
            Ok(Err(e)) => tracing::error!("the catalog could not take the downstream tools' change: {e:#}"),
            Err(e) => tracing::error!("rebuilding the catalog failed: {e}"),
        }
    }
}

/// While the world's index is provisional (BM25 alone on a first start, or
/// carried over to a changed catalog), builds the full one on a thread of
/// its own and swaps it in, unless the catalog changed meanwhile (then
/// builds again for the new one: the embedding cache makes that quick).
/// One such thread at a time: it follows the catalog until the index in
/// use is full. On failure the provisional index stays, said in the log.
pub(super) fn build_full_index(engine: &Arc<Engine>) {
    if engine.building_index.swap(true, Ordering::SeqCst) {
        return;
    }
    let (config, progress) = (engine.config.clone(), engine.dense_build.clone());
    // Only a weak reference while building: the engine may be dropped meanwhile.
    let weak = Arc::downgrade(engine);
    let spawned = std::thread::Builder::new().name("index-build".into()).spawn(move || {
        let started = std::time::Instant::now();
        loop {
            let Some(engine) = weak.upgrade() else { return };
            let world = {
                // Checked and given up under the lock a change swaps its
                // world in under: a change after this starts a thread anew.
                let slot = engine.world.read().unwrap_or_else(|e| e.into_inner());
                if !slot.retriever.as_ref().is_some_and(Retriever::provisional) {
                    engine.building_index.store(false, Ordering::SeqCst);
                    return;
                }
                slot.clone()
            };
            drop(engine);
            let retriever = world.retriever.as_ref().expect("a provisional index is an index");
            if retriever.dense_pending() {
                tracing::info!("serving with BM25 alone while the dense index is built");
            } else {
                tracing::info!("building the changed catalog's full search index in the background");
            }
            let embedder = retriever.embedder().cloned();
            let built = Retriever::open_with(world.catalog.clone(), &config, embedder, false, &progress);
            let Some(engine) = weak.upgrade() else { return };
            let full = match built {
                Ok(full) => full,
                Err(e) => {
                    engine.building_index.store(false, Ordering::SeqCst);
                    return tracing::error!("the full search index was not built; the provisional one stays: {e}");
                }
            };
            let mut slot = engine.world.write().unwrap_or_else(|e| e.into_inner());
            if Arc::ptr_eq(&slot.catalog, &world.catalog) {
                let (mcp, secs) = (slot.mcp.clone(), started.elapsed().as_secs());
                let was_lexical = retriever.dense_pending();
                *slot = Arc::new(World { catalog: world.catalog.clone(), retriever: Some(full), mcp });
                if was_lexical {
                    tracing::info!(secs, "the dense index is built: hybrid search from now on");
                } else {
                    tracing::info!(secs, "the full search index of the changed catalog is in use");
                }
            }
        }
    });
    if let Err(e) = spawned {
        engine.building_index.store(false, Ordering::SeqCst);
        tracing::error!("the full search index cannot be built (no thread): {e}");
    }
}
