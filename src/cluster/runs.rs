//! The replicas' run stream: every run a replica records (with what the
//! long-term memory learned from it) is added to one Redis stream, and
//! every replica follows the stream and applies the others' runs, so all
//! of them learn from all runs. Graph updates commute (sums and counts),
//! so replicas that applied the same runs in any order hold the same
//! weights.
//!
//! A run is published from the replica's durable [`super::outbox`] (it is
//! acknowledged once there, before Redis sees it); following resumes from
//! the stream id the replica's graph store last applied.

use std::time::Duration;

use redis::streams::StreamReadReply;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{Cluster, ClusterError};
use crate::graph::RunRecord;

/// The stream field holding a [`SharedRun`] as JSON.
const FIELD: &str = "run";
/// Longest a follower's read waits for new runs before asking again.
pub(crate) const FOLLOW_BLOCK: Duration = Duration::from_secs(1);
/// Most runs one read or one publish round trip carries.
pub(crate) const BATCH: usize = 256;

/// A run as the replicas share it, with what the learner above took from
/// it (`M`: the planner's memory entry; generic so that the cluster, below
/// the planner, carries it without knowing it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SharedRun<M> {
    /// The replica that recorded it (its followers skip their own).
    pub(crate) origin: String,
    pub(crate) run: RunRecord,
    /// What the long-term memory learned from it (with the task's vector,
    /// so no replica embeds it again).
    #[serde(default = "none", skip_serializing_if = "Option::is_none")]
    pub(crate) memory: Option<M>,
}

/// `#[serde(default)]` would ask `M: Default`.
fn none<M>() -> Option<M> {
    None
}

impl Cluster {
    /// Adds `runs` to the stream in order (one round trip), trimming it to
    /// about `max_runs`.
    pub(crate) async fn publish_runs<M: Serialize>(
        &self,
        runs: &[SharedRun<M>],
        max_runs: usize,
    ) -> Result<(), ClusterError> {
        let mut pipe = redis::pipe();
        for run in runs {
            let text = serde_json::to_string(run).map_err(|e| ClusterError::Encode(e.to_string()))?;
            pipe.cmd("XADD").arg(self.runs_key()).arg("MAXLEN").arg("~").arg(max_runs).arg("*").arg(FIELD).arg(text);
        }
        let mut connection = self.publisher.clone();
        self.run_within(self.bulk_timeout, pipe.query_async::<Vec<String>>(&mut connection)).await.map(drop)
    }

    /// The runs after stream id `after` (`0` from the start), waiting up to
    /// [`FOLLOW_BLOCK`] for one: (stream id, run); an entry that is not a
    /// run is skipped with a warning (its id still returned, so following
    /// moves past it).
    pub(crate) async fn read_runs<M: DeserializeOwned>(
        &self,
        after: &str,
    ) -> Result<Vec<(String, Option<SharedRun<M>>)>, ClusterError> {
        let mut command = redis::cmd("XREAD");
        command
            .arg("COUNT")
            .arg(BATCH)
            .arg("BLOCK")
            .arg(FOLLOW_BLOCK.as_millis() as u64)
            .arg("STREAMS")
            .arg(self.runs_key())
            .arg(after);
        let mut connection = self.follower.clone();
        let reply: Option<StreamReadReply> =
            self.run_within(FOLLOW_BLOCK + self.bulk_timeout, command.query_async(&mut connection)).await?;
        let entries = reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids);
        Ok(entries
            .map(|entry| {
                let run = entry.get::<String>(FIELD).and_then(|text| match serde_json::from_str(&text) {
                    Ok(run) => Some(run),
                    Err(e) => {
                        tracing::warn!(id = entry.id, "an entry of the run stream is not a run ({e}); skipped");
                        None
                    }
                });
                (entry.id, run)
            })
            .collect())
    }

    /// Whether the stream's oldest entry comes after `position` (the runs
    /// in between, if any, were trimmed or lost before this replica read
    /// them); `None` when Redis cannot say or the stream is empty.
    pub(crate) async fn missed_runs(&self, position: &str) -> Option<bool> {
        let mut command = redis::cmd("XRANGE");
        command.arg(self.runs_key()).arg("-").arg("+").arg("COUNT").arg(1);
        let mut connection = self.publisher.clone();
        let first: redis::streams::StreamRangeReply =
            self.run_within(self.bulk_timeout, command.query_async(&mut connection)).await.ok()?;
        let oldest = first.ids.first()?.id.clone();
        Some(position != "0" && stream_id(position) < stream_id(&oldest).map(|(ms, seq)| (ms, seq.saturating_sub(1))))
    }

    fn runs_key(&self) -> String {
        self.key("stream", "runs")
    }
}

/// A stream id `ms-seq` as numbers.
fn stream_id(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}
