//! The stored responses held in memory, within their bounds (time to
//! live, bytes): what the store answers from and the journal's writer
//! rewrites from.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One kept response.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Kept {
    pub(crate) id: String,
    /// The client key's id (`None`: no keys configured).
    pub(crate) owner: Option<String>,
    pub(crate) at_unix_ms: u64,
    /// Input items, then output items, in order.
    pub(crate) items: Vec<Value>,
}

/// The responses held, within their bounds.
pub(super) struct Held {
    ttl: Duration,
    max_bytes: usize,
    /// Ids, oldest first.
    order: VecDeque<String>,
    by_id: HashMap<String, (Arc<Kept>, usize)>,
    bytes: usize,
}

pub(super) fn locked(held: &Mutex<Held>) -> std::sync::MutexGuard<'_, Held> {
    held.lock().unwrap_or_else(|e| e.into_inner())
}

impl Held {
    /// None held yet: each for `ttl`, `max_bytes` of journal lines in all.
    pub(super) fn new(ttl: Duration, max_bytes: usize) -> Held {
        Held { ttl, max_bytes, order: VecDeque::new(), by_id: HashMap::new(), bytes: 0 }
    }

    /// Response `id`, if held.
    pub(super) fn get(&self, id: &str) -> Option<Arc<Kept>> {
        self.by_id.get(id).map(|(kept, _)| kept.clone())
    }

    /// Holds `kept` (`bytes` as a journal line) unless expired, dropping
    /// the oldest beyond the bound.
    pub(super) fn hold(&mut self, kept: Arc<Kept>, bytes: usize) {
        if self.expired(&kept) {
            return;
        }
        if let Some((_, old)) = self.by_id.remove(&kept.id) {
            self.bytes -= old;
            self.order.retain(|id| id != &kept.id);
        }
        self.order.push_back(kept.id.clone());
        self.bytes += bytes;
        self.by_id.insert(kept.id.clone(), (kept, bytes));
        while self.bytes > self.max_bytes || self.order.front().is_some_and(|id| self.expired(&self.by_id[id].0)) {
            let Some(id) = self.order.pop_front() else { break };
            if let Some((_, bytes)) = self.by_id.remove(&id) {
                self.bytes -= bytes;
            }
        }
    }

    /// Responses held.
    pub(super) fn len(&self) -> usize {
        self.order.len()
    }

    /// The responses held, oldest first.
    pub(super) fn records(&self) -> Vec<Arc<Kept>> {
        self.order.iter().map(|id| self.by_id[id].0.clone()).collect()
    }

    pub(super) fn expired(&self, kept: &Kept) -> bool {
        crate::metrics::unix_ms().saturating_sub(kept.at_unix_ms) > self.ttl.as_millis() as u64
    }
}
