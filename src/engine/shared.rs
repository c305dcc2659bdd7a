//! Learning shared with the other replicas (`[cluster]`): every run this
//! replica records goes to its durable outbox and from there to the run
//! stream ([`crate::cluster::runs`]); every run another replica recorded
//! comes back from the stream and is applied here, in the graph (logged
//! with its stream id, so following resumes where the store left off) and
//! in the long-term memory.
//!
//! Two tasks per engine: the publisher (woken by each run, retrying with
//! backoff while Redis is away, so the runs recorded meanwhile reach the
//! others when it returns) and the follower (blocking reads of the stream).

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::Engine;
use crate::cluster::Cluster;
use crate::cluster::outbox::{self, Outbox};
use crate::cluster::runs::BATCH;
use crate::config::Config;
use crate::planner::Memory;

/// A run as this engine shares it: with the long-term memory's entry.
pub(super) type SharedRun = crate::cluster::runs::SharedRun<Memory>;

/// Longest pause between publishing attempts while Redis is away.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Run ids the follower remembers, to skip one published twice (a crash
/// between Redis taking a batch and the outbox noting it).
const RECENT_IDS: usize = 10_000;

/// This replica's side of the shared learning.
pub(super) struct Sharing {
    cluster: Arc<Cluster>,
    /// This replica's id in the stream.
    replica: String,
    outbox: Mutex<Outbox>,
    wake: tokio::sync::Notify,
    max_runs: usize,
    /// Runs from other replicas applied here.
    applied: AtomicU64,
}

/// What `/metrics` shows of the shared learning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SharingStats {
    /// Runs recorded here that Redis has not taken yet.
    pub(crate) backlog: u64,
    /// Runs from other replicas applied here since the start.
    pub(crate) applied: u64,
}

impl Sharing {
    /// Opens the outbox and replica id in the state directory.
    pub(super) fn open(config: &Config, cluster: Arc<Cluster>) -> std::io::Result<Sharing> {
        let dir = outbox::cluster_dir(&config.state.dir());
        let outbox = Outbox::open::<Memory>(&dir)?;
        if outbox.backlog() > 0 {
            tracing::info!(runs = outbox.backlog(), "runs recorded before the last stop are published now");
        }
        Ok(Sharing {
            cluster,
            replica: outbox::replica_id(&dir)?,
            outbox: Mutex::new(outbox),
            wake: tokio::sync::Notify::new(),
            max_runs: config.cluster.stream_max_runs,
            applied: AtomicU64::new(0),
        })
    }

    fn outbox(&self) -> std::sync::MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps a run recorded here in the outbox (fsync'd: blocking) and
    /// wakes the publisher.
    pub(super) fn share(&self, run: crate::graph::RunRecord, memory: Option<crate::planner::Memory>) {
        let shared = SharedRun { origin: self.replica.clone(), run, memory };
        if let Err(e) = self.outbox().append(&shared) {
            tracing::error!("a run could not be kept for the other replicas (the outbox refused it): {e}");
            return;
        }
        self.wake.notify_one();
    }

    pub(super) fn stats(&self) -> SharingStats {
        SharingStats { backlog: self.outbox().backlog(), applied: self.applied.load(Ordering::Relaxed) }
    }

    /// Publishes every pending run, a batch at a time, noting each batch.
    async fn publish_pending(self: &Arc<Self>) -> Result<(), String> {
        let me = self.clone();
        let pending = tokio::task::spawn_blocking(move || me.outbox().pending())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("reading the outbox: {e}"))?;
        for batch in pending.chunks(BATCH) {
            let runs: Vec<SharedRun> = batch.iter().map(|(_, run)| run.clone()).collect();
            self.cluster.publish_runs(&runs, self.max_runs).await.map_err(|e| e.to_string())?;
            let (me, last) = (self.clone(), batch[batch.len() - 1].0);
            tokio::task::spawn_blocking(move || me.outbox().mark_published(last))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("noting published runs: {e}"))?;
        }
        Ok(())
    }
}

/// Starts the publisher and the follower (from stream id `position`) of
/// `engine`, for as long as it lives.
pub(super) fn start(engine: &Arc<Engine>, sharing: Arc<Sharing>, position: String) {
    tokio::spawn(publish(sharing.clone(), Arc::downgrade(engine)));
    tokio::spawn(follow(sharing, Arc::downgrade(engine), position));
}

/// Publishes the outbox whenever a run is added (and every second), with
/// backoff while Redis is away.
async fn publish(sharing: Arc<Sharing>, engine: Weak<Engine>) {
    let mut backoff = Duration::from_millis(100);
    while engine.strong_count() > 0 {
        if sharing.outbox().backlog() == 0 {
            let _ = tokio::time::timeout(Duration::from_secs(1), sharing.wake.notified()).await;
            continue;
        }
        match sharing.publish_pending().await {
            Ok(()) => backoff = Duration::from_millis(100),
            Err(e) => {
                tracing::debug!("runs not published yet ({e}); trying again in {} ms", backoff.as_millis());
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Follows the run stream after `position`, applying the other replicas' runs.
async fn follow(sharing: Arc<Sharing>, engine: Weak<Engine>, mut position: String) {
    let mut recent = RecentIds::default();
    if sharing.cluster.missed_runs(&position).await == Some(true) {
        tracing::warn!(
            position,
            "the run stream no longer holds the runs right after this replica's position (trimmed by \
             cluster.stream_max_runs, or Redis lost its data): its graph may miss some; to catch up fully, \
             start it from a copy of another replica's state directory"
        );
    }
    while engine.strong_count() > 0 {
        let entries = match sharing.cluster.read_runs(&position).await {
            Ok(entries) => entries,
            Err(_) => {
                // The health and the log already say it; Redis is retried.
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let Some(last) = entries.last().map(|(id, _)| id.clone()) else { continue };
        let runs: Vec<(String, SharedRun)> = entries
            .into_iter()
            .filter_map(|(id, run)| run.map(|run| (id, run)))
            .filter(|(_, run)| run.origin != sharing.replica && recent.first_time(&run.run.id))
            .collect();
        if !runs.is_empty() {
            let Some(engine) = engine.upgrade() else { return };
            let n = runs.len() as u64;
            match tokio::task::spawn_blocking(move || engine.apply_shared(runs)).await {
                Ok(()) => {
                    sharing.applied.fetch_add(n, Ordering::Relaxed);
                }
                Err(e) => tracing::error!("applying other replicas' runs failed: {e}"),
            }
        }
        position = last;
    }
}

/// The last [`RECENT_IDS`] run ids seen.
#[derive(Default)]
struct RecentIds {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl RecentIds {
    /// Whether `id` is new (and remembers it).
    fn first_time(&mut self, id: &str) -> bool {
        if !self.set.insert(id.to_string()) {
            return false;
        }
        self.order.push_back(id.to_string());
        if self.order.len() > RECENT_IDS
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::RecentIds;

    #[test]
    fn a_run_id_seen_again_is_skipped() {
        let mut recent = RecentIds::default();
        assert!(recent.first_time("a") && recent.first_time("b"));
        assert!(!recent.first_time("a"));
    }
}
