//! The traces of execute runs (and of route and plan decisions: the tools
//! kept out of how many, the plan), for `GET /v1/traces/{id}`: kept in memory,
//! at most `openai.traces` of them (the oldest dropped first), each
//! visible only to the client key that made it. With `[cluster]` on, each
//! is also kept in Redis for `cluster.trace_ttl_s` (up to
//! `cluster.max_trace_bytes`), so that any replica answers for it: an
//! execute run's before its answer leaves, a decision's just after.
//!
//! A trace is diagnostic, not state: a restart forgets traces, while what
//! the runs taught is already in the graph's durable log.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::cluster::Cluster;
use crate::config::ClusterConfig;

/// The kept traces.
pub struct Traces {
    capacity: usize,
    inner: Mutex<Kept>,
    shared: Option<Shared>,
}

/// Where traces are shared with the other replicas.
struct Shared {
    cluster: Arc<Cluster>,
    ttl: Duration,
    max_bytes: usize,
}

#[derive(Default)]
struct Kept {
    /// Ids, oldest first.
    order: VecDeque<String>,
    by_id: HashMap<String, Entry>,
}

struct Entry {
    owner: Option<String>,
    trace: Arc<Value>,
    at_unix_ms: u64,
}

impl Traces {
    pub(crate) fn new(capacity: usize) -> Traces {
        Traces { capacity: capacity.max(1), inner: Mutex::default(), shared: None }
    }

    /// Traces also shared through `cluster` (see the module documentation).
    pub fn shared(capacity: usize, cluster: Option<Arc<Cluster>>, config: &ClusterConfig) -> Traces {
        let shared = cluster.map(|cluster| Shared {
            cluster,
            ttl: Duration::from_secs(config.trace_ttl_s),
            max_bytes: config.max_trace_bytes,
        });
        Traces { shared, ..Traces::new(capacity) }
    }

    /// Keeps `trace` under `id` for `client` (`None`: no keys configured).
    /// The other replicas get it shortly after (see [`Traces::insert_shared`]).
    pub fn insert(&self, id: String, client: Option<String>, trace: Value) {
        let trace = self.keep(id.clone(), client.clone(), trace);
        if let Some(shared) = &self.shared {
            let (cluster, ttl, max_bytes) = (shared.cluster.clone(), shared.ttl, shared.max_bytes);
            tokio::spawn(async move { cluster.put_trace(&id, client.as_deref(), &trace, ttl, max_bytes).await });
        }
    }

    /// [`Traces::insert`], returning once the other replicas have it too:
    /// an execute run's answer names its trace, which the client may read
    /// back from any replica at once.
    pub(crate) async fn insert_shared(&self, id: String, client: Option<String>, trace: Value) {
        let trace = self.keep(id.clone(), client.clone(), trace);
        if let Some(shared) = &self.shared {
            shared.cluster.put_trace(&id, client.as_deref(), &trace, shared.ttl, shared.max_bytes).await;
        }
    }

    /// Keeps `trace` in this replica's memory.
    fn keep(&self, id: String, client: Option<String>, trace: Value) -> Arc<Value> {
        let trace = Arc::new(trace);
        let mut kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        while kept.order.len() >= self.capacity {
            if let Some(old) = kept.order.pop_front() {
                kept.by_id.remove(&old);
            }
        }
        kept.order.push_back(id.clone());
        kept.by_id.insert(id, Entry { owner: client, trace: trace.clone(), at_unix_ms: crate::metrics::unix_ms() });
        trace
    }

    /// Summaries of the newest traces kept here (not the other replicas'),
    /// `client`'s own or, for an operator, everyone's: id, time, status,
    /// the request, calls made, duration.
    pub(crate) fn recent(&self, client: Option<&str>, everyone: bool, limit: usize) -> Vec<Value> {
        let kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        kept.order
            .iter()
            .rev()
            .filter_map(|id| Some((id, kept.by_id.get(id)?)))
            .filter(|(_, e)| everyone || e.owner.as_deref() == client)
            .take(limit)
            .map(|(id, e)| {
                // Kept as the answer's `toolrouter` field: the run is under `trace`.
                let run = e.trace.get("trace").unwrap_or(&e.trace);
                let subtasks = run["subtasks"].as_array().map(Vec::as_slice).unwrap_or_default();
                let calls: usize = subtasks.iter().map(|s| s["calls"].as_array().map_or(0, Vec::len)).sum();
                let task = match run["request"].as_str() {
                    Some(request) => request.to_string(),
                    None => subtasks.iter().filter_map(|s| s["task"].as_str()).collect::<Vec<_>>().join(" · "),
                };
                serde_json::json!({
                    "id": id,
                    "at_unix_ms": e.at_unix_ms,
                    "mode": e.trace["mode"],
                    "status": run["status"],
                    "task": task,
                    "subtasks": subtasks.len(),
                    "calls": calls,
                    "elapsed_ms": run["elapsed_ms"],
                })
            })
            .collect()
    }

    /// The trace `id`, if kept here or shared, and made by `client`.
    pub async fn get(&self, id: &str, client: Option<&str>) -> Option<Arc<Value>> {
        if let Some((owner, trace)) = self.get_local(id) {
            return (owner.as_deref() == client).then_some(trace);
        }
        let (owner, trace) = self.shared.as_ref()?.cluster.get_trace(id).await?;
        (owner.as_deref() == client).then(|| Arc::new(trace))
    }

    fn get_local(&self, id: &str) -> Option<(Option<String>, Arc<Value>)> {
        let kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        kept.by_id.get(id).map(|e| (e.owner.clone(), e.trace.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn keeps_the_newest_for_their_owner() {
        let traces = Traces::new(2);
        traces.insert("a".into(), Some("k1".into()), json!(1));
        traces.insert("b".into(), Some("k1".into()), json!(2));
        traces.insert("c".into(), None, json!(3));
        assert!(traces.get("a", Some("k1")).await.is_none(), "the oldest is dropped");
        assert_eq!(*traces.get("b", Some("k1")).await.unwrap(), json!(2));
        assert!(traces.get("b", Some("k2")).await.is_none(), "another key's trace is hidden");
        assert!(traces.get("b", None).await.is_none());
        assert_eq!(*traces.get("c", None).await.unwrap(), json!(3));
    }
}
