//! The traces of execute runs, for `GET /v1/traces/{id}`: kept in memory,
//! at most `openai.traces` of them (the oldest dropped first), each
//! visible only to the client key that made it.
//!
//! A trace is diagnostic, not state: a restart forgets traces, while what
//! the runs taught is already in the graph's durable log.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// The kept traces.
pub struct Traces {
    capacity: usize,
    inner: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    /// Ids, oldest first.
    order: VecDeque<String>,
    by_id: HashMap<String, (Option<String>, Arc<Value>)>,
}

impl Traces {
    pub fn new(capacity: usize) -> Traces {
        Traces { capacity: capacity.max(1), inner: Mutex::default() }
    }

    /// Keeps `trace` under `id` for `client` (`None`: no keys configured).
    pub fn insert(&self, id: String, client: Option<String>, trace: Value) {
        let mut kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        while kept.order.len() >= self.capacity {
            if let Some(old) = kept.order.pop_front() {
                kept.by_id.remove(&old);
            }
        }
        kept.order.push_back(id.clone());
        kept.by_id.insert(id, (client, Arc::new(trace)));
    }

    /// The trace `id`, if kept and made by `client`.
    pub fn get(&self, id: &str, client: Option<&str>) -> Option<Arc<Value>> {
        let kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (owner, trace) = kept.by_id.get(id)?;
        (owner.as_deref() == client).then(|| trace.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_the_newest_for_their_owner() {
        let traces = Traces::new(2);
        traces.insert("a".into(), Some("k1".into()), json!(1));
        traces.insert("b".into(), Some("k1".into()), json!(2));
        traces.insert("c".into(), None, json!(3));
        assert!(traces.get("a", Some("k1")).is_none(), "the oldest is dropped");
        assert_eq!(*traces.get("b", Some("k1")).unwrap(), json!(2));
        assert!(traces.get("b", Some("k2")).is_none(), "another key's trace is hidden");
        assert!(traces.get("b", None).is_none());
        assert_eq!(*traces.get("c", None).unwrap(), json!(3));
    }
}
