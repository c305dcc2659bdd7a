//! Responses kept for `previous_response_id`: each stored response's whole
//! conversation (the input items it was answered on, its own output items)
//! under its id, readable only by the client key that made it, for
//! `openai.responses_ttl_s`, within `openai.responses_mb` (the oldest
//! dropped first). Kept in the state directory's `responses.jsonl` (an
//! fsync'd journal written by one thread with group commit, rewritten in
//! the background when mostly stale: [`super::writer`]) and, with `[cluster]`, in
//! Redis with the same expiry, written before the response leaves: a
//! follow-up works on any replica and after a restart.
//!
//! A whole conversation per response, not a link to the one before: a
//! follow-up is one lookup, and a dropped old response breaks no chain.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

pub(crate) use super::held::Kept;
use super::held::{Held, locked};
use super::writer::Writer;
use crate::cluster::Cluster;
use crate::journal::Journal;

/// A conversation larger than this is not kept (nor shared).
pub(crate) const MAX_KEPT_BYTES: usize = 16 << 20;

/// A response to keep once its output is known: the conversation before
/// it and who made it.
pub(crate) struct Keeper {
    pub(crate) store: Arc<ResponseStore>,
    pub(crate) owner: Option<String>,
    /// The input items it answers (a kept conversation's first).
    pub(crate) items: Vec<Value>,
}

impl Keeper {
    /// Keeps response `id` with its `output` items; whether it was kept.
    pub(crate) async fn keep(self, id: String, output: &[Value]) -> bool {
        let mut items = self.items;
        items.extend(output.iter().cloned());
        let kept = Kept { id, owner: self.owner, at_unix_ms: crate::metrics::unix_ms(), items };
        self.store.put(kept).await
    }
}

/// The kept responses.
pub(crate) struct ResponseStore {
    ttl: Duration,
    max_bytes: usize,
    held: Arc<Mutex<Held>>,
    /// The journal's writer (`None`: kept in memory only).
    writer: Option<Writer>,
    cluster: Option<Arc<Cluster>>,
}

impl ResponseStore {
    /// The store kept in `dir` (`None`: in memory only), loading what it
    /// kept before; with `cluster`, shared.
    pub(crate) fn open(
        dir: Option<PathBuf>,
        ttl: Duration,
        max_bytes: usize,
        cluster: Option<Arc<Cluster>>,
    ) -> ResponseStore {
        let held = Held::new(ttl, max_bytes);
        let mut store = ResponseStore { ttl, max_bytes, held: Arc::new(Mutex::new(held)), writer: None, cluster };
        let Some(dir) = dir.filter(|_| max_bytes > 0) else { return store };
        let path = dir.join("responses.jsonl");
        let opened = std::fs::create_dir_all(&dir).and_then(|()| Journal::open::<Kept>(&path));
        let (journal, records) = match opened {
            Ok((journal, records, report)) => {
                if report.dropped > 0 {
                    tracing::warn!(file = %path.display(), dropped = report.dropped, "damaged lines of the kept responses skipped");
                }
                (journal, records)
            }
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "responses are kept in memory only");
                return store;
            }
        };
        let mut held = locked(&store.held);
        let count = records.len();
        for (_, kept) in records {
            let bytes = serde_json::to_vec(&kept).map_or(0, |line| line.len());
            held.hold(Arc::new(kept), bytes);
        }
        // Rewritten now if mostly stale, before any request waits on it.
        let (journal, count) = match count > 2 * held.len() + 64 {
            true => match crate::journal::replace(&path, &held.records()).and_then(|()| Journal::open::<Kept>(&path)) {
                Ok((journal, _, _)) => (journal, held.len()),
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "the kept responses could not be compacted");
                    (journal, count)
                }
            },
            false => (journal, count),
        };
        drop(held);
        store.writer = Some(Writer::start(path, journal, count, store.held.clone()));
        store
    }

    /// Whether responses are kept at all (`openai.responses_mb` > 0).
    pub(crate) fn enabled(&self) -> bool {
        self.max_bytes > 0
    }

    /// Keeps `kept`: durable here (and, with a cluster, in Redis) when this
    /// returns `true`; `false` when it is too large or cannot be written.
    pub(crate) async fn put(self: &Arc<Self>, kept: Kept) -> bool {
        let Ok(line) = serde_json::to_vec(&kept) else { return false };
        if line.len() > MAX_KEPT_BYTES.min(self.max_bytes) {
            tracing::info!(id = %kept.id, bytes = line.len(), "a conversation too large to keep");
            return false;
        }
        let kept = Arc::new(kept);
        match &self.writer {
            Some(writer) => {
                if !writer.write(kept.clone(), line.len()).await {
                    return false;
                }
            }
            None => {
                let mut held = locked(&self.held);
                held.hold(kept.clone(), line.len());
            }
        }
        if let Some(cluster) = &self.cluster
            && let Ok(value) = serde_json::to_value(kept.as_ref())
        {
            // Best effort: with Redis down, a follow-up still works on this replica.
            cluster.put_owned("response", &kept.id, kept.owner.as_deref(), &value, self.ttl, MAX_KEPT_BYTES).await;
        }
        true
    }

    /// The conversation of response `id`, if kept (here or shared), not
    /// expired and made by `owner`.
    pub(crate) async fn get(&self, id: &str, owner: Option<&str>) -> Option<Arc<Kept>> {
        let local = { locked(&self.held).get(id) };
        let kept = match local {
            Some(kept) => kept,
            None => {
                let (_, value) = self.cluster.as_ref()?.get_owned("response", id).await?;
                Arc::new(serde_json::from_value::<Kept>(value).ok()?)
            }
        };
        (kept.owner.as_deref() == owner && !locked(&self.held).expired(&kept)).then_some(kept)
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
        drop(store);
        let lines = std::fs::read_to_string(dir.path().join("responses.jsonl")).unwrap().lines().count();
        assert!(lines < 100, "{lines} lines for a handful held");
        let store = ResponseStore::open(Some(dir.path().into()), Duration::from_secs(60), 300, None);
        assert!(store.get("resp_199", None).await.is_some());
    }

    /// Many responses at once while the journal is rewritten under them:
    /// each acknowledged one is read back after a restart, and the journal
    /// stays compact.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_responses_share_fsyncs_and_survive_rewrites() {
        let dir = tempfile::tempdir().unwrap();
        let open = || Arc::new(ResponseStore::open(Some(dir.path().into()), Duration::from_secs(60), 20_000, None));
        let store = open();
        let mut tasks = Vec::new();
        for i in 0..2_000 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move { store.put(kept(&format!("resp_{i}"), None, "some words")).await }));
        }
        for task in tasks {
            assert!(task.await.unwrap(), "every response is kept");
        }
        let held: Vec<String> = locked(&store.held).records().iter().map(|k| k.id.clone()).collect();
        assert!(held.len() > 50 && held.len() < 2_000, "{}", held.len());
        drop(store);
        let lines = std::fs::read_to_string(dir.path().join("responses.jsonl")).unwrap().lines().count();
        assert!(lines < 2 * held.len() + 64 + 256, "rewritten while written: {lines} lines for {} held", held.len());
        let store = open();
        for id in &held {
            assert!(store.get(id, None).await.is_some(), "{id} was acknowledged and held, then lost");
        }
    }
}
