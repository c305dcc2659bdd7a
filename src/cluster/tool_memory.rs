//! Route mode's memory shared by the replicas: the tools the model called
//! for a request, learned on one replica, count on all of them.
//!
//! Each entry ([`Called`]) is added to one Redis stream
//! (`<prefix>:stream:tool-memory`, trimmed to about
//! `openai.tool_memory_requests`), best effort: a learned signal, not an
//! acknowledged write, so an entry Redis missed is one the others do not
//! learn. Every replica reads the stream from its start when it starts and
//! then every second; an entry is kept once, by its id (its own included).

use super::{Cluster, ClusterError};
use crate::retrieval::tool_memory::Called;

/// The stream field holding a [`Called`] as JSON.
const FIELD: &str = "called";
/// Most entries one read carries.
const BATCH: usize = 256;

impl Cluster {
    /// Adds `called` to the stream, trimming it to about `max` entries.
    pub(crate) async fn publish_called(&self, called: &Called, max: usize) -> Result<(), ClusterError> {
        let text = serde_json::to_string(called).map_err(|e| ClusterError::Encode(e.to_string()))?;
        let mut command = redis::cmd("XADD");
        command.arg(self.tool_memory_key()).arg("MAXLEN").arg("~").arg(max.max(1)).arg("*").arg(FIELD).arg(text);
        let mut connection = self.publisher.clone();
        self.run_within(self.bulk_timeout, command.query_async::<String>(&mut connection)).await.map(drop)
    }

    /// The entries after stream id `after` (`0` from the start), without
    /// waiting: (stream id, entry; `None` for one that is not an entry).
    pub(crate) async fn read_called(&self, after: &str) -> Result<Vec<(String, Option<Called>)>, ClusterError> {
        let mut command = redis::cmd("XREAD");
        command.arg("COUNT").arg(BATCH).arg("STREAMS").arg(self.tool_memory_key()).arg(after);
        let mut connection = self.publisher.clone();
        let reply: Option<redis::streams::StreamReadReply> =
            self.run_within(self.bulk_timeout, command.query_async(&mut connection)).await?;
        let entries = reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids);
        Ok(entries
            .map(|entry| {
                let called = entry.get::<String>(FIELD).and_then(|text| serde_json::from_str(&text).ok());
                (entry.id, called)
            })
            .collect())
    }

    fn tool_memory_key(&self) -> String {
        self.key("stream", "tool-memory")
    }
}
