//! Responses kept for `previous_response_id`: each stored response's whole
//! conversation (the input items it was answered on, its own output items)
//! under its id, readable only by the client key that made it, for
//! `openai.responses_ttl_s`, within `openai.responses_mb` (the oldest
//! dropped first). Kept in the state directory's `responses.jsonl` (an
//! fsync'd journal, rewritten when mostly stale) and, with `[cluster]`, in
//! Redis with the same expiry, written before the response leaves: a
//! follow-up works on any replica and after a restart.
//!
//! A whole conversation per response, not a link to the one before: a
//! follow-up is one lookup, and a dropped old response breaks no chain.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cluster::Cluster;
use crate::journal::Journal;

/// A conversation larger than this is not kept (nor shared).
pub const MAX_KEPT_BYTES: usize = 16 << 20;

/// One kept response.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Kept {
    pub id: String,
    /// The client key's id (`None`: no keys configured).
    pub owner: Option<String>,
    pub at_unix_ms: u64,
    /// Input items, then output items, in order.
    pub items: Vec<Value>,
}

/// A response to keep once its output is known: the conversation before
/// it and who made it.
pub struct Keeper {
    pub store: Arc<ResponseStore>,
    pub owner: Option<String>,
    /// The input items it answers (a kept conversation's first).
    pub items: Vec<Value>,
}

impl Keeper {
    /// Keeps response `id` with its `output` items; whether it was kept.
    pub async fn keep(self, id: String, output: &[Value]) -> bool {
        let mut items = self.items;
        items.extend(output.iter().cloned());
        let kept = Kept { id, owner: self.owner, at_unix_ms: crate::metrics::unix_ms(), items };
        self.store.put(kept).await
    }
}

/// The kept responses.
pub struct ResponseStore {
    ttl: Duration,
    max_bytes: usize,
    inner: Mutex<Held>,
    cluster: Option<Arc<Cluster>>,
}

#[derive(Default)]
struct Held {
    /// Ids, oldest first.
    order: VecDeque<String>,
    by_id: HashMap<String, (Arc<Kept>, usize)>,
    bytes: usize,
    /// The journal and the records in it.
    journal: Option<(Journal, usize)>,
}

impl ResponseStore {
    /// The store kept in `dir` (`None`: in memory only), loading what it
    /// kept before; with `cluster`, shared.
    pub fn open(dir: Option<PathBuf>, ttl: Duration, max_bytes: usize, cluster: Option<Arc<Cluster>>) -> ResponseStore {
        let store = ResponseStore { ttl, max_bytes, inner: Mutex::default(), cluster };
        if max_bytes == 0 {
            return store;
        }
        let Some(dir) = dir else { return store };
        let path = dir.join("responses.jsonl");
        let opened = std::fs::create_dir_all(&dir).and_then(|()| Journal::open::<Kept>(&path));
        let mut held = store.held();
        match opened {
            Ok((journal, records, report)) => {
                if report.dropped > 0 {
                    tracing::warn!(file = %path.display(), dropped = report.dropped, "damaged lines of the kept responses skipped");
                }
                let count = records.len();
                for (_, kept) in records {
                    let bytes = serde_json::to_vec(&kept).map_or(0, |line| line.len());
                    store.hold(&mut held, Arc::new(kept), bytes);
                }
                held.journal = Some((journal, count));
                store.compact(&mut held);
            }
            Err(e) => tracing::warn!(file = %path.display(), error = %e, "responses are kept in memory only"),
        }
        drop(held);
        store
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether responses are kept at all (`openai.responses_mb` > 0).
    pub fn enabled(&self) -> bool {
        self.max_bytes > 0
    }

    /// Keeps `kept`: durable here (and, with a cluster, in Redis) when this
    /// returns `true`; `false` when it is too large or cannot be written.
    pub async fn put(self: &Arc<Self>, kept: Kept) -> bool {
        let kept = Arc::new(kept);
        let store = self.clone();
        let local = kept.clone();
        let written = tokio::task::spawn_blocking(move || store.keep(local)).await.unwrap_or(false);
        if !written {
            return false;
        }
        if let Some(cluster) = &self.cluster
            && let Ok(value) = serde_json::to_value(kept.as_ref())
        {
            // Best effort: with Redis down, a follow-up still works on this replica.
            cluster.put_owned("response", &kept.id, kept.owner.as_deref(), &value, self.ttl, MAX_KEPT_BYTES).await;
        }
        true
    }

    /// Writes `kept` to the journal (fsync) and holds it.
    fn keep(&self, kept: Arc<Kept>) -> bool {
        let Ok(line) = serde_json::to_vec(kept.as_ref()) else { return false };
        if line.len() > MAX_KEPT_BYTES.min(self.max_bytes) {
            tracing::info!(id = %kept.id, bytes = line.len(), "a conversation too large to keep");
            return false;
        }
        let mut held = self.held();
        if let Some((journal, count)) = &mut held.journal {
            if let Err(e) = journal.append(0, kept.as_ref()) {
                tracing::error!(error = %e, "a response could not be kept in the state directory");
                return false;
            }
            *count += 1;
        }
        self.hold(&mut held, kept, line.len());
        self.compact(&mut held);
        true
    }

    /// Holds `kept` (`bytes` as a journal line) unless expired, dropping
    /// the oldest beyond the bound.
    fn hold(&self, held: &mut Held, kept: Arc<Kept>, bytes: usize) {
        if self.expired(&kept) {
            return;
        }
        if let Some((_, old)) = held.by_id.remove(&kept.id) {
            held.bytes -= old;
            held.order.retain(|id| id != &kept.id);
        }
        held.order.push_back(kept.id.clone());
        held.bytes += bytes;
        held.by_id.insert(kept.id.clone(), (kept, bytes));
        while held.bytes > self.max_bytes || held.order.front().is_some_and(|id| self.expired(&held.by_id[id].0)) {
            let Some(id) = held.order.pop_front() else { break };
            if let Some((_, bytes)) = held.by_id.remove(&id) {
                held.bytes -= bytes;
            }
        }
    }

    /// Rewrites the journal when most of its records are no longer held.
    fn compact(&self, held: &mut Held) {
        let live = held.order.len();
        let Some((journal, count)) = &held.journal else { return };
        if *count <= 2 * live + 64 {
            return;
        }
        let path = journal.path().to_path_buf();
        let records: Vec<Kept> = held.order.iter().map(|id| held.by_id[id].0.as_ref().clone()).collect();
        let rewritten = crate::journal::replace(&path, &records).and_then(|()| Journal::open::<Kept>(&path));
        match rewritten {
            Ok((journal, _, _)) => held.journal = Some((journal, live)),
            Err(e) => tracing::warn!(file = %path.display(), error = %e, "the kept responses could not be compacted"),
        }
    }

    fn expired(&self, kept: &Kept) -> bool {
        crate::metrics::unix_ms().saturating_sub(kept.at_unix_ms) > self.ttl.as_millis() as u64
    }

    /// The conversation of response `id`, if kept (here or shared), not
    /// expired and made by `owner`.
    pub async fn get(&self, id: &str, owner: Option<&str>) -> Option<Arc<Kept>> {
        let local = self.held().by_id.get(id).map(|(kept, _)| kept.clone());
        let kept = match local {
            Some(kept) => kept,
            None => {
                let (_, value) = self.cluster.as_ref()?.get_owned("response", id).await?;
                Arc::new(serde_json::from_value::<Kept>(value).ok()?)
            }
        };
        (kept.owner.as_deref() == owner && !self.expired(&kept)).then_some(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kept(id: &str, owner: Option<&str>, text: &str) -> Kept {
        Kept {
            id: id.into(),
            owner: owner.map(str::to_string),
            at_unix_ms: crate::metrics::unix_ms(),
            items: vec![json!({"role": "user", "content": text})],
        }
    }

    #[tokio::test]
    async fn kept_responses_survive_a_restart_for_their_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let open = || Arc::new(ResponseStore::open(Some(dir.path().into()), Duration::from_secs(60), 1 << 20, None));
        let store = open();
        assert!(store.put(kept("resp_a", Some("k1"), "hello")).await);
        assert!(store.put(kept("resp_b", None, "hi")).await);
        drop(store);
        let store = open();
        assert_eq!(store.get("resp_a", Some("k1")).await.unwrap().items[0]["content"], "hello");
        assert!(store.get("resp_a", Some("k2")).await.is_none(), "another key's response is hidden");
        assert!(store.get("resp_a", None).await.is_none());
        assert!(store.get("resp_b", None).await.is_some());
        assert!(store.get("resp_c", None).await.is_none());
    }

    #[tokio::test]
    async fn the_oldest_go_first_past_the_bound_and_expired_ones_are_gone() {
        let store = Arc::new(ResponseStore::open(None, Duration::from_secs(60), 400, None));
        for i in 0..10 {
            assert!(store.put(kept(&format!("resp_{i}"), None, &"x".repeat(50))).await);
        }
        assert!(store.get("resp_0", None).await.is_none(), "the oldest is dropped");
        assert!(store.get("resp_9", None).await.is_some());
        assert!(!store.put(kept("resp_big", None, &"x".repeat(500))).await, "larger than the whole bound");
        let mut old = kept("resp_old", None, "x");
        old.at_unix_ms -= 61_000;
        assert!(store.put(old).await);
        assert!(store.get("resp_old", None).await.is_none(), "past its time to live");
    }

    #[tokio::test]
    async fn the_journal_is_rewritten_when_mostly_stale() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(ResponseStore::open(Some(dir.path().into()), Duration::from_secs(60), 300, None));
        for i in 0..200 {
            assert!(store.put(kept(&format!("resp_{i}"), None, "some words")).await);
        }
        let lines = std::fs::read_to_string(dir.path().join("responses.jsonl")).unwrap().lines().count();
        assert!(lines < 100, "{lines} lines for a handful held");
        drop(store);
        let store = ResponseStore::open(Some(dir.path().into()), Duration::from_secs(60), 300, None);
        assert!(store.get("resp_199", None).await.is_some());
    }
}
