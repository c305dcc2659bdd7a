//! The engine loading in the background, so that a face answers at once:
//! an MCP client's `initialize` must not wait for a first index build
//! (minutes on a large catalog), and health checks must answer during it.
//!
//! [`Loading::start`] loads the engine on a thread of its own; until it is
//! there, [`Loading::engine`] says what is happening and how far it has
//! got ("building the search index, 37% done, ready in about 520 s"), or
//! why loading failed. [`Loading::engine_within`] waits out a load that
//! takes seconds, so that a client calling at once is merely slowed.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::engine::Engine;
use crate::retrieval::Progress;

/// An engine that is loading, loaded, or failed to load.
pub struct Loading {
    config: Config,
    engine: OnceLock<Arc<Engine>>,
    failed: OnceLock<String>,
    progress: Progress,
}

/// Why the engine cannot serve yet, in words for a user or a model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotReady {
    #[error("toolrouter is still starting ({0}); try again then")]
    Loading(String),
    #[error("toolrouter's engine failed to load: {0}")]
    Failed(String),
}

impl Loading {
    /// Starts loading the engine of `config`.
    pub(crate) fn start(config: &Config) -> Arc<Loading> {
        let loading = Arc::new(Loading {
            config: config.clone(),
            engine: OnceLock::new(),
            failed: OnceLock::new(),
            progress: Progress::default(),
        });
        let worker = loading.clone();
        // Inside the caller's runtime, if any (the HTTP clients register with it).
        let runtime = tokio::runtime::Handle::try_current().ok();
        std::thread::spawn(move || {
            let _entered = runtime.as_ref().map(tokio::runtime::Handle::enter);
            worker.load();
        });
        loading
    }

    fn load(&self) {
        // A panic while loading must not leave the engine "starting" forever.
        let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Engine::open_reporting(&self.config, &self.progress, crate::engine::FirstBuild::InBackground)
        }));
        let opened =
            opened.unwrap_or_else(|_| Err(anyhow::anyhow!("loading panicked (a bug; the log has its message)")));
        match opened {
            Ok(engine) => {
                let _ = self.engine.set(engine);
                tracing::info!("ready");
            }
            Err(e) => {
                tracing::error!("the engine did not load: {e:#}");
                let _ = self.failed.set(format!("{e:#}"));
            }
        }
    }

    /// The configuration the engine is (being) loaded with.
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// The engine, waiting up to `patience` for a load that is nearly done
    /// (the catalog, a stored index); a first index build (minutes) or a
    /// failed load is said at once.
    pub(crate) async fn engine_within(&self, patience: Duration) -> Result<&Arc<Engine>, NotReady> {
        let until = Instant::now() + patience;
        loop {
            let building = self.progress.report().percent.is_some();
            match self.engine() {
                Err(NotReady::Loading(_)) if !building && Instant::now() < until => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                done => return done,
            }
        }
    }

    /// Whether the engine is still loading (neither there nor failed).
    pub(crate) fn is_loading(&self) -> bool {
        self.engine.get().is_none() && self.failed.get().is_none()
    }

    /// The engine, or why it cannot serve yet.
    pub(crate) fn engine(&self) -> Result<&Arc<Engine>, NotReady> {
        if let Some(engine) = self.engine.get() {
            return Ok(engine);
        }
        match self.failed.get() {
            Some(e) => Err(NotReady::Failed(e.clone())),
            None => Err(NotReady::Loading(self.progress.report().to_string())),
        }
    }
}
