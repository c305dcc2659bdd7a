//! What the engine learns from runs: each finished run recorded in the
//! tool graph (durably) and, when it succeeded, in the long-term memory;
//! with `[cluster]` on, kept for the other replicas, whose runs are
//! applied here the same way ([`super::shared`]).

use std::sync::Arc;

use super::shared::SharedRun;
use super::{Engine, SharingStats};
use crate::config::Config;
use crate::graph::RunRecord;
use crate::graph::build::clean_path;
use crate::planner::memory::{self, MemoryWriter};
use crate::planner::{LongTermMemory, Memory};
use crate::retrieval::{Embedder, Progress, Retriever};

/// Runs kept for [`Engine::recent_runs`].
pub(crate) const RECENT_RUNS: usize = 20;

/// A run the graph learned from, and where it was recorded.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct RecentRun {
    pub(crate) at_unix_ms: u64,
    /// `here` or `replica` (another replica recorded it).
    pub(crate) origin: &'static str,
    #[serde(flatten)]
    pub(crate) run: RunRecord,
}

/// The long-term memory of the state directory, with its writer when this
/// process holds the graph (`writer`). Runs another embedding model
/// remembered are embedded again first (by the writer) or left out (by a
/// reader): their vectors do not compare with this model's.
pub(super) fn open_memory(
    config: &Config,
    embedder: Option<&Arc<Embedder>>,
    writer: bool,
    progress: &Progress,
) -> std::io::Result<(LongTermMemory, Option<MemoryWriter>)> {
    let path = memory::memory_path(&config.state.dir());
    let model = embedder.map_or("", |e| e.id());
    let (mut memory, mut journal) = load_memory(&path, writer)?;
    if let (Some(embedder), Some(_)) = (embedder, &journal)
        && memory.stale(model) > 0
    {
        // Read again only after a change of model: the journal is rewritten.
        drop(journal.take());
        let (cache, batch) = (config.embedding.cache_dir(), config.embedding.batch_size);
        match memory::reembed_stale(&path, embedder, &cache, batch, progress) {
            Ok(n) => tracing::info!("{n} remembered runs embedded again with {model}"),
            Err(e) => tracing::warn!("remembered runs of another embedding model could not be embedded again: {e}"),
        }
        (memory, journal) = load_memory(&path, writer)?;
    }
    let stale = memory.keep_model(model);
    if stale > 0 {
        tracing::warn!(
            "{stale} remembered runs were embedded by another model than {model} (or before models were recorded); they are left out until the \
             process that holds the state directory (or `toolrouter graph build`) embeds them again"
        );
    }
    Ok((memory, journal))
}

/// The memory journal at `path`, opened for appending (`writer`) or read.
fn load_memory(path: &std::path::Path, writer: bool) -> std::io::Result<(LongTermMemory, Option<MemoryWriter>)> {
    if !writer {
        return Ok((LongTermMemory::read(path)?, None));
    }
    let (memory, writer, report) = LongTermMemory::open(path)?;
    if report.dropped > 0 {
        tracing::warn!(dropped = report.dropped, problems = ?report.problems, "the memory journal had damaged entries; they were skipped");
    }
    Ok((memory, Some(writer)))
}

impl Engine {
    /// Records a finished run in the graph (durably, when this process
    /// holds the graph) and, when it succeeded, in the long-term memory.
    /// Returns its graph sequence number. Blocking (fsync, embedding).
    /// With `[cluster]` on, the run is also kept for the other replicas
    /// (durably, in the outbox) before this returns.
    pub fn record_run(&self, run: RunRecord) -> Option<u64> {
        let seq = self.record_in_graph(&run);
        if seq.is_some() {
            self.note_recent(&run, "here");
        }
        let failed = run.calls.iter().any(|c| !c.ok);
        let memory = if (run.success || failed) && !run.standalone { self.remember(&run) } else { None };
        if let (Some(sharing), Some(_)) = (&self.sharing, seq) {
            sharing.share(run, memory);
        }
        seq
    }

    /// Applies runs other replicas recorded (with their stream ids): their
    /// memories first, then the graph (one fsync), so that a crash between
    /// the two re-reads them rather than losing a memory. Blocking.
    pub(super) fn apply_shared(&self, runs: Vec<(String, SharedRun)>) {
        for (_, shared) in &runs {
            if let Some(memory) = &shared.memory {
                self.remember_shared(memory);
            }
        }
        let runs: Vec<(String, RunRecord)> = runs.into_iter().map(|(id, shared)| (id, shared.run)).collect();
        for (_, run) in &runs {
            self.note_recent(run, "replica");
        }
        let mut store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        let Some(store) = store.as_mut() else { return };
        let mut graph = self.graph.write().unwrap_or_else(|e| e.into_inner());
        let before = graph.meta.seq;
        match store.record_shared(Arc::make_mut(&mut graph), runs, Some(&self.catalog())) {
            Ok(seq) => {
                let every = self.config.graph.snapshot_every;
                if seq / every > before / every
                    && let Err(e) = store.snapshot(&graph)
                {
                    tracing::warn!("graph snapshot failed (the log still holds every run): {e}");
                }
            }
            Err(e) => tracing::error!("other replicas' runs could not be recorded in the tool graph: {e}"),
        }
    }

    /// Adds a memory another replica learned, when its vector is this
    /// replica's model's (replicas with another model skip it).
    fn remember_shared(&self, memory: &Memory) {
        let ours = self.embedder().is_some_and(|e| e.id() == memory.model && e.dims() == memory.vector.len());
        if !ours {
            return;
        }
        let mut writer = self.memory_writer.lock().unwrap_or_else(|e| e.into_inner());
        let Some(writer) = writer.as_mut() else { return };
        if let Err(e) = writer.append(memory) {
            tracing::error!("another replica's run could not be remembered (the memory journal refused it): {e}");
            return;
        }
        let mut shared = self.memory.write().unwrap_or_else(|e| e.into_inner());
        Arc::make_mut(&mut shared).push(memory.clone());
    }

    /// Keeps `run` among the last [`RECENT_RUNS`] the graph learned from.
    fn note_recent(&self, run: &RunRecord, origin: &'static str) {
        let mut recent = self.recent_runs.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() == RECENT_RUNS {
            recent.pop_front();
        }
        recent.push_back(RecentRun { at_unix_ms: crate::metrics::unix_ms(), origin, run: run.clone() });
    }

    /// The last runs the graph learned from, newest first.
    pub(crate) fn recent_runs(&self) -> Vec<RecentRun> {
        self.recent_runs.lock().unwrap_or_else(|e| e.into_inner()).iter().rev().cloned().collect()
    }

    /// The shared learning's counters (`None` without `[cluster]`).
    pub(crate) fn sharing_stats(&self) -> Option<SharingStats> {
        self.sharing.as_ref().map(|s| s.stats())
    }

    /// Adds a run to the long-term memory: its task embedded, its path
    /// when it succeeded (the successful calls, cleaned as the graph
    /// cleans them) and the functions whose calls failed, written to the
    /// journal, then shown to later plans. Returns what it remembered.
    fn remember(&self, run: &RunRecord) -> Option<Memory> {
        let catalog = self.catalog();
        let function = |f: &str| catalog.resolve(f).first().map(|id| catalog.api(id).function_name.clone());
        let path: Vec<String> = match run.success {
            true => clean_path(run.calls.iter().map(|c| (c.function.as_str(), c.ok)))
                .into_iter()
                .filter_map(function)
                .collect(),
            false => Vec::new(),
        };
        let mut failed: Vec<String> =
            run.calls.iter().filter(|c| !c.ok).filter_map(|c| function(&c.function)).collect();
        failed.sort();
        failed.dedup();
        let world = self.world();
        let embedder = world.retriever().ok().and_then(Retriever::embedder);
        let nothing = path.is_empty() && failed.is_empty();
        let (Some(embedder), false, false) = (embedder, nothing, run.task.trim().is_empty()) else {
            return None;
        };
        let mut writer = self.memory_writer.lock().unwrap_or_else(|e| e.into_inner());
        let writer = writer.as_mut()?;
        let vector = match embedder.embed_queries(std::slice::from_ref(&run.task)) {
            Ok(mut v) => v.remove(0),
            Err(e) => {
                tracing::warn!("a run could not be remembered (embedding its task failed): {e}");
                return None;
            }
        };
        let memory = Memory {
            task: run.task.clone(),
            path,
            vector,
            online: true,
            model: embedder.id().to_string(),
            failed,
            at_unix_ms: run.at_unix_ms,
        };
        if let Err(e) = writer.append(&memory) {
            tracing::error!("a run could not be remembered (the memory journal refused it): {e}");
            return None;
        }
        let mut shared = self.memory.write().unwrap_or_else(|e| e.into_inner());
        Arc::make_mut(&mut shared).push(memory.clone());
        Some(memory)
    }

    fn record_in_graph(&self, run: &RunRecord) -> Option<u64> {
        let mut store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        let store = store.as_mut()?;
        let mut graph = self.graph.write().unwrap_or_else(|e| e.into_inner());
        match store.record(Arc::make_mut(&mut graph), run, Some(&self.catalog())) {
            Ok(seq) => {
                if seq % self.config.graph.snapshot_every == 0
                    && let Err(e) = store.snapshot(&graph)
                {
                    tracing::warn!("graph snapshot failed (the log still holds every run): {e}");
                }
                Some(seq)
            }
            Err(e) => {
                tracing::error!("a run could not be recorded in the tool graph: {e}");
                None
            }
        }
    }
}
