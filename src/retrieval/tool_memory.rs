//! What route mode learns from use: which of the client's own tools the
//! model called for which request.
//!
//! Each time the model answers a narrowed request with valid tool calls,
//! the request's vector and the called tools' keys (the same content keys
//! as [`super::tool_vectors`]: the model id and the text embedded, so a
//! tool is remembered whatever list it comes in, and a changed tool is a
//! new one) are kept. A later request gets, for each of its tools, the
//! best cosine of an earlier request that called it, when that is at
//! least [`SIMILAR`]: a ranking route mode fuses with its others
//! ([`super::tool_list::ListWeights::memory`]).
//!
//! The memory holds one model's entries (vectors of two models are never
//! compared), at most `bound` of them, oldest dropped first, and with a
//! directory it is a [`Journal`] (`<dir>/<model id>.jsonl`, each entry
//! fsync'd when kept), rewritten atomically from what is held when it
//! reaches twice the bound. Being learned, not configured, a damaged line
//! is skipped with a warning.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::cache::Key;
use super::dense::dot;
use crate::journal::Journal;

/// The least cosine between two requests for the earlier one's tools to
/// count (0.5, 0.6 and 0.7 measured on ToolBench's sets, 0.5 below the
/// others: docs/benchmarks.md, "Route mode learns from use").
pub const SIMILAR: f32 = 0.6;
/// Earlier requests a tool's recall reads, the latest first.
const PER_TOOL: usize = 256;

/// One request's calls, as kept (and as replicas share them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Called {
    /// Random, the same on every replica: one entry is applied once.
    #[serde(default)]
    pub id: u64,
    /// The embedding model of `query` (not kept in the journal: its file is the model's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// The latest user message's vector.
    pub query: Vec<f32>,
    /// The called tools' keys, in hex.
    pub tools: Vec<String>,
}

/// A held entry.
struct Entry {
    seq: u64,
    query: Arc<[f32]>,
    tools: Vec<Key>,
    /// [`Called::id`].
    id: u64,
}

/// Route mode's memory of which tools were called for which request.
pub struct ToolMemory {
    inner: Mutex<Option<Held>>,
    dir: Option<PathBuf>,
    bound: usize,
}

/// The entries of one model.
struct Held {
    model: String,
    /// Oldest first; sequence numbers count up.
    entries: VecDeque<Entry>,
    /// The ids of the entries held.
    ids: std::collections::HashSet<u64>,
    /// The ids of the entries that called each tool, oldest first.
    by_tool: HashMap<Key, VecDeque<u64>>,
    next_seq: u64,
    journal: Option<(Journal, usize)>,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn hex_key(text: &str) -> Option<Key> {
    let bytes: Vec<u8> = (0..text.len())
        .step_by(2)
        .map(|i| text.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect::<Option<_>>()?;
    bytes.try_into().ok()
}

impl ToolMemory {
    /// An empty memory of at most `bound` requests (0: it remembers
    /// nothing); `dir`: where it is kept across restarts (`None`: memory only).
    pub fn new(dir: Option<PathBuf>, bound: usize) -> ToolMemory {
        ToolMemory { inner: Mutex::new(None), dir, bound }
    }

    /// Requests remembered (of the model last used).
    pub fn len(&self) -> usize {
        locked(&self.inner).as_ref().map_or(0, |h| h.entries.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every request held (not the journal: for measuring afresh).
    pub fn forget(&self) {
        *locked(&self.inner) = None;
    }

    /// Remembers that `tools` were called for the request of vector
    /// `query`; returns the entry, to share with other replicas.
    pub fn record(&self, model: &str, query: &[f32], tools: &[Key]) -> Option<Called> {
        if tools.is_empty() || query.is_empty() || self.bound == 0 {
            return None;
        }
        let tools = tools.iter().map(|k| super::embedder::hex(k)).collect();
        let called = Called { id: fastrand::u64(1..), model: model.to_string(), query: query.to_vec(), tools };
        self.keep(&called).then_some(called)
    }

    /// Keeps an entry another replica recorded (once; only of the model
    /// this memory holds, or of any while it holds none); whether it was new.
    pub fn record_called(&self, called: &Called) -> bool {
        let held_model = locked(&self.inner).as_ref().map(|h| h.model.clone());
        if self.bound == 0 || held_model.is_some_and(|m| m != called.model) {
            return false;
        }
        self.keep(called)
    }

    fn keep(&self, called: &Called) -> bool {
        let Some(tools) = called.tools.iter().map(|t| hex_key(t)).collect::<Option<Vec<Key>>>() else { return false };
        let mut inner = locked(&self.inner);
        let held = self.held(&mut inner, &called.model);
        if held.ids.contains(&called.id) {
            return false;
        }
        if let Some((journal, records)) = &mut held.journal {
            let entry = Called { model: String::new(), ..called.clone() };
            match journal.append(held.next_seq, &entry) {
                Ok(()) => *records += 1,
                Err(e) => {
                    tracing::warn!(file = %journal.path().display(), error = %e, "route mode's tool memory is no longer written to disk");
                    held.journal = None;
                }
            }
        }
        held.push(called.query.as_slice().into(), tools, called.id, self.bound);
        let rewrite = held.journal.as_ref().is_some_and(|(_, records)| *records > 2 * self.bound);
        if rewrite && let Err(e) = held.rewrite() {
            tracing::warn!(error = %e, "route mode's tool memory is no longer written to disk");
            held.journal = None;
        }
        true
    }

    /// For each of `tools`, the best cosine between `query` and an earlier
    /// request that called it, when at least [`SIMILAR`] (else 0).
    pub fn recall(&self, model: &str, query: &[f32], tools: &[Key]) -> Vec<f32> {
        let mut inner = locked(&self.inner);
        let held = self.held(&mut inner, model);
        let mut out = vec![0f32; tools.len()];
        if held.entries.is_empty() {
            return out;
        }
        let first = held.entries[0].seq;
        let mut similarity: HashMap<u64, f32> = HashMap::new();
        for (slot, key) in out.iter_mut().zip(tools) {
            let Some(ids) = held.by_tool.get(key) else { continue };
            for &id in ids.iter().rev().take(PER_TOOL) {
                let at = (id - first) as usize;
                let s = *similarity.entry(id).or_insert_with(|| dot(query, &held.entries[at].query));
                if s >= SIMILAR && s > *slot {
                    *slot = s;
                }
            }
        }
        out
    }

    /// The held entries of `model`, read from its journal on first use.
    fn held<'a>(&self, inner: &'a mut Option<Held>, model: &str) -> &'a mut Held {
        if inner.as_ref().is_some_and(|h| h.model == model) {
            return inner.as_mut().expect("checked");
        }
        let mut held = Held {
            model: model.to_string(),
            entries: VecDeque::new(),
            ids: Default::default(),
            by_tool: HashMap::new(),
            next_seq: 1,
            journal: None,
        };
        if let Some(dir) = &self.dir {
            let path = dir.join(format!("{model}.jsonl"));
            let opened = std::fs::create_dir_all(dir).and_then(|()| Journal::open::<Called>(&path));
            match opened {
                Ok((journal, records, report)) => {
                    if report.dropped > 0 {
                        tracing::warn!(file = %path.display(), dropped = report.dropped, "damaged lines of the tool memory skipped");
                    }
                    let count = records.len();
                    for (_, entry) in records {
                        let tools: Option<Vec<Key>> = entry.tools.iter().map(|t| hex_key(t)).collect();
                        held.push(entry.query.into(), tools.unwrap_or_default(), entry.id, self.bound);
                    }
                    held.journal = Some((journal, count));
                }
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "route mode's tool memory is kept in memory only")
                }
            }
        }
        inner.insert(held)
    }
}

impl Held {
    fn push(&mut self, query: Arc<[f32]>, tools: Vec<Key>, id: u64, bound: usize) {
        let seq = self.next_seq;
        self.next_seq += 1;
        for key in &tools {
            self.by_tool.entry(*key).or_default().push_back(seq);
        }
        self.ids.insert(id);
        self.entries.push_back(Entry { seq, query, tools, id });
        while self.entries.len() > bound {
            let Some(Entry { seq: old, tools, id, .. }) = self.entries.pop_front() else { break };
            self.ids.remove(&id);
            for key in tools {
                if let Some(ids) = self.by_tool.get_mut(&key) {
                    while ids.front().is_some_and(|&i| i <= old) {
                        ids.pop_front();
                    }
                    if ids.is_empty() {
                        self.by_tool.remove(&key);
                    }
                }
            }
        }
    }

    /// Replaces the journal by the entries held.
    fn rewrite(&mut self) -> std::io::Result<()> {
        let Some((journal, _)) = &self.journal else { return Ok(()) };
        let path = journal.path().to_path_buf();
        let entries: Vec<Called> = self
            .entries
            .iter()
            .map(|e| Called {
                id: e.id,
                model: String::new(),
                query: e.query.to_vec(),
                tools: e.tools.iter().map(|k| super::embedder::hex(k)).collect(),
            })
            .collect();
        crate::journal::replace(&path, &entries)?;
        let (journal, _, _) = Journal::open::<Called>(&path)?;
        self.journal = Some((journal, entries.len()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: u8) -> Key {
        [i; 32]
    }

    #[test]
    fn a_similar_request_recalls_the_tools_called_and_a_different_one_does_not() {
        let memory = ToolMemory::new(None, 10);
        memory.record("m", &[1.0, 0.0], &[k(1), k(2)]);
        memory.record("m", &[0.0, 1.0], &[k(3)]);
        let recalled = memory.recall("m", &[0.8, 0.6], &[k(1), k(2), k(3), k(4)]);
        assert_eq!(recalled, vec![0.8, 0.8, 0.6, 0.0]);
        assert_eq!(memory.recall("m", &[0.0, -1.0], &[k(1), k(3)]), vec![0.0, 0.0], "below SIMILAR: nothing");
        assert_eq!(
            memory.recall("other-model", &[1.0, 0.0], &[k(1)]),
            vec![0.0],
            "another model's vectors never count"
        );
    }

    #[test]
    fn an_entry_from_another_replica_is_kept_once_and_only_of_the_same_model() {
        let (here, there) = (ToolMemory::new(None, 10), ToolMemory::new(None, 10));
        let called = here.record("m", &[1.0, 0.0], &[k(1)]).expect("kept");
        assert!(!here.record_called(&called), "its own entry, read back, is not kept twice");
        assert!(there.record_called(&called));
        assert!(!there.record_called(&called));
        assert_eq!(there.recall("m", &[1.0, 0.0], &[k(1)]), vec![1.0]);
        let other = Called { id: 7, model: "other-model".into(), ..called };
        assert!(!there.record_called(&other), "another model's vectors are never kept");
        assert_eq!(there.len(), 1);
    }

    #[test]
    fn the_memory_is_bounded_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let memory = ToolMemory::new(Some(dir.path().to_path_buf()), 3);
        for i in 0..10u8 {
            memory.record("m", &[1.0, 0.0], &[k(i)]);
        }
        assert_eq!(memory.len(), 3);
        let file = dir.path().join("m.jsonl");
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        assert!(lines <= 2 * 3, "rewritten when it doubles: {lines} lines");
        drop(memory);
        let again = ToolMemory::new(Some(dir.path().to_path_buf()), 3);
        assert_eq!(
            again.recall("m", &[1.0, 0.0], &[k(9), k(7), k(6)]),
            vec![1.0, 1.0, 0.0],
            "the latest three are back"
        );
        // A torn last line is cut; the rest stays.
        drop(again);
        let mut text = std::fs::read_to_string(&file).unwrap();
        text.push_str("{\"seq\": 99, \"sum\"");
        std::fs::write(&file, text).unwrap();
        let torn = ToolMemory::new(Some(dir.path().to_path_buf()), 3);
        assert_eq!(torn.recall("m", &[1.0, 0.0], &[k(9)]), vec![1.0]);
    }
}
