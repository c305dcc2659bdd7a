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
//! It also keeps which tool followed which: an entry names the tool the
//! conversation called last before it (`after`), and a later request whose
//! conversation last called that tool gets, for each of its tools, the
//! share of such entries that called it ([`Recalled::followed`]): the tool
//! graph of the client's own tools, keyed by content as the rest.
//!
//! And it learns each tool's vector from use: the mean of the vectors of the
//! held requests that called it ([`Recalled::served`], after Tool2Vec), which
//! route mode adds to the tool's own vector so that a *new* request worded
//! like the ones a tool served finds it, with no threshold of similarity.
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
pub(crate) const SIMILAR: f32 = 0.6;
/// Earlier requests a tool's recall reads, the latest first.
const PER_TOOL: usize = 256;

/// One request's calls, as kept (and as replicas share them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Called {
    /// Random, the same on every replica: one entry is applied once.
    #[serde(default)]
    pub(crate) id: u64,
    /// The embedding model of `query` (not kept in the journal: its file is the model's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) model: String,
    /// The latest user message's vector.
    pub(crate) query: Vec<f32>,
    /// The called tools' keys, in hex.
    pub(crate) tools: Vec<String>,
    /// The key (hex) of the tool the conversation called last before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) after: Option<String>,
}

/// What the memory recalls for a request's tools (each in the order asked;
/// empty: nothing held).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Recalled {
    /// The best cosine of an earlier request that called the tool, when at
    /// least [`SIMILAR`] (else 0).
    pub(crate) similar: Vec<f32>,
    /// Of the requests whose conversation last called the same tool as this
    /// one's, the share that called the tool.
    pub(crate) followed: Vec<f32>,
    /// Per tool, the held requests that called it and their vectors' mean,
    /// unit length (`(0, [])` for a tool never called).
    pub(crate) served: Vec<(u32, Vec<f32>)>,
}

/// A held entry.
struct Entry {
    seq: u64,
    query: Arc<[f32]>,
    tools: Vec<Key>,
    after: Option<Key>,
    /// [`Called::id`].
    id: u64,
}

/// Route mode's memory of which tools were called for which request.
pub(crate) struct ToolMemory {
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
    /// Per tool called last before an entry: such entries, and how many
    /// of them called each tool.
    follows: HashMap<Key, (u32, HashMap<Key, u32>)>,
    /// Per tool, the sum of the vectors of the held entries that called it.
    sums: HashMap<Key, Vec<f32>>,
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
    pub(crate) fn new(dir: Option<PathBuf>, bound: usize) -> ToolMemory {
        ToolMemory { inner: Mutex::new(None), dir, bound }
    }

    /// Requests remembered (of the model last used).
    pub(crate) fn len(&self) -> usize {
        locked(&self.inner).as_ref().map_or(0, |h| h.entries.len())
    }

    /// Forgets every request held (not the journal: for measuring afresh).
    pub(crate) fn forget(&self) {
        *locked(&self.inner) = None;
    }

    /// Remembers that `tools` were called for the request of vector
    /// `query`, after the conversation last called `after`; returns the
    /// entry, to share with other replicas.
    pub(crate) fn record(&self, model: &str, query: &[f32], tools: &[Key], after: Option<&Key>) -> Option<Called> {
        if tools.is_empty() || query.is_empty() || self.bound == 0 {
            return None;
        }
        let hex = |k: &Key| super::embedder::hex(k);
        let called = Called {
            id: fastrand::u64(1..),
            model: model.to_string(),
            query: query.to_vec(),
            tools: tools.iter().map(hex).collect(),
            after: after.map(hex),
        };
        self.keep(&called).then_some(called)
    }

    /// Keeps an entry another replica recorded (once; only of the model
    /// this memory holds, or of any while it holds none); whether it was new.
    pub(crate) fn record_called(&self, called: &Called) -> bool {
        let held_model = locked(&self.inner).as_ref().map(|h| h.model.clone());
        if self.bound == 0 || held_model.is_some_and(|m| m != called.model) {
            return false;
        }
        self.keep(called)
    }

    fn keep(&self, called: &Called) -> bool {
        let Some(tools) = called.tools.iter().map(|t| hex_key(t)).collect::<Option<Vec<Key>>>() else { return false };
        let after = match called.after.as_deref() {
            Some(text) => match hex_key(text) {
                Some(key) => Some(key),
                None => return false,
            },
            None => None,
        };
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
        held.push(Entry { seq: 0, query: called.query.as_slice().into(), tools, after, id: called.id }, self.bound);
        let rewrite = held.journal.as_ref().is_some_and(|(_, records)| *records > 2 * self.bound);
        if rewrite && let Err(e) = held.rewrite() {
            tracing::warn!(error = %e, "route mode's tool memory is no longer written to disk");
            held.journal = None;
        }
        true
    }

    /// For each of `tools`, what earlier requests say of it: for the
    /// request of vector `query`, whose conversation last called `after`.
    pub(crate) fn recall(&self, model: &str, query: &[f32], after: Option<&Key>, tools: &[Key]) -> Recalled {
        let mut inner = locked(&self.inner);
        let held = self.held(&mut inner, model);
        if held.entries.is_empty() {
            return Recalled::default();
        }
        let followed = match after.and_then(|a| held.follows.get(a)) {
            Some((n, next)) => tools.iter().map(|t| next.get(t).map_or(0.0, |c| *c as f32 / *n as f32)).collect(),
            None => vec![0.0; tools.len()],
        };
        Recalled { similar: held.similar(query, tools), followed, served: held.served(tools) }
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
            follows: HashMap::new(),
            sums: HashMap::new(),
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
                        let after = entry.after.as_deref().and_then(hex_key);
                        let (query, id) = (entry.query.into(), entry.id);
                        held.push(Entry { seq: 0, query, tools: tools.unwrap_or_default(), after, id }, self.bound);
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
    /// For each of `tools`, the best cosine between `query` and an earlier
    /// request that called it, when at least [`SIMILAR`] (else 0).
    fn similar(&self, query: &[f32], tools: &[Key]) -> Vec<f32> {
        let mut out = vec![0f32; tools.len()];
        let first = self.entries[0].seq;
        let mut similarity: HashMap<u64, f32> = HashMap::new();
        for (slot, key) in out.iter_mut().zip(tools) {
            let Some(ids) = self.by_tool.get(key) else { continue };
            for &id in ids.iter().rev().take(PER_TOOL) {
                let at = (id - first) as usize;
                let s = *similarity.entry(id).or_insert_with(|| dot(query, &self.entries[at].query));
                if s >= SIMILAR && s > *slot {
                    *slot = s;
                }
            }
        }
        out
    }

    /// For each of `tools`, how many held requests called it and their
    /// vectors' mean, unit length.
    fn served(&self, tools: &[Key]) -> Vec<(u32, Vec<f32>)> {
        let unit = |sum: &Vec<f32>| {
            let norm = dot(sum, sum).sqrt();
            sum.iter().map(|x| x / norm).collect::<Vec<f32>>()
        };
        tools
            .iter()
            .map(|key| match (self.by_tool.get(key), self.sums.get(key)) {
                (Some(ids), Some(sum)) if dot(sum, sum) > 0.0 => (ids.len() as u32, unit(sum)),
                _ => (0, Vec::new()),
            })
            .collect()
    }

    /// Adds (`sign` 1) or takes away (-1) `entry`'s vector from its tools' sums.
    fn add_to_sums(&mut self, entry: &Entry, sign: f32) {
        for key in &entry.tools {
            let sum = self.sums.entry(*key).or_insert_with(|| vec![0.0; entry.query.len()]);
            if sum.len() == entry.query.len() {
                sum.iter_mut().zip(entry.query.iter()).for_each(|(s, q)| *s += sign * q);
            }
        }
    }

    /// Holds `entry` (numbered here), dropping the oldest past `bound`.
    fn push(&mut self, mut entry: Entry, bound: usize) {
        entry.seq = self.next_seq;
        self.next_seq += 1;
        for key in &entry.tools {
            self.by_tool.entry(*key).or_default().push_back(entry.seq);
        }
        self.add_to_sums(&entry, 1.0);
        self.count_follows(&entry, 1);
        self.ids.insert(entry.id);
        self.entries.push_back(entry);
        while self.entries.len() > bound {
            let Some(old_entry) = self.entries.pop_front() else { break };
            self.count_follows(&old_entry, -1);
            self.add_to_sums(&old_entry, -1.0);
            let Entry { seq: old, tools, id, .. } = old_entry;
            self.ids.remove(&id);
            for key in tools {
                if let Some(ids) = self.by_tool.get_mut(&key) {
                    while ids.front().is_some_and(|&i| i <= old) {
                        ids.pop_front();
                    }
                    if ids.is_empty() {
                        self.by_tool.remove(&key);
                        self.sums.remove(&key);
                    }
                }
            }
        }
    }

    /// Adds (`by` 1) or takes away (-1) what `entry` says of which tool follows which.
    fn count_follows(&mut self, entry: &Entry, by: i32) {
        let Some(after) = entry.after else { return };
        let (n, next) = self.follows.entry(after).or_default();
        *n = n.saturating_add_signed(by);
        for tool in &entry.tools {
            let count = next.entry(*tool).or_default();
            *count = count.saturating_add_signed(by);
            if *count == 0 {
                next.remove(tool);
            }
        }
        if *n == 0 {
            self.follows.remove(&after);
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
                after: e.after.as_ref().map(|k| super::embedder::hex(k)),
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
        memory.record("m", &[1.0, 0.0], &[k(1), k(2)], None);
        memory.record("m", &[0.0, 1.0], &[k(3)], None);
        let recalled = memory.recall("m", &[0.8, 0.6], None, &[k(1), k(2), k(3), k(4)]);
        assert_eq!(recalled.similar, vec![0.8, 0.8, 0.6, 0.0]);
        assert_eq!(recalled.followed, vec![0.0; 4], "no tool called before: no follows");
        assert_eq!(
            memory.recall("m", &[0.0, -1.0], None, &[k(1), k(3)]).similar,
            vec![0.0, 0.0],
            "below SIMILAR: nothing"
        );
        assert_eq!(
            memory.recall("other-model", &[1.0, 0.0], None, &[k(1)]),
            Recalled::default(),
            "another model's vectors never count"
        );
    }

    /// A tool's vector learned from use: the mean of the requests that
    /// called it, forgotten with them.
    #[test]
    fn a_tool_is_known_by_the_requests_it_served() {
        let memory = ToolMemory::new(None, 3);
        memory.record("m", &[1.0, 0.0], &[k(1)], None);
        memory.record("m", &[0.0, 1.0], &[k(1), k(2)], None);
        let served = memory.recall("m", &[1.0, 0.0], None, &[k(1), k(2), k(3)]).served;
        let half = std::f32::consts::FRAC_1_SQRT_2;
        assert_eq!(served[0].0, 2);
        assert!((served[0].1[0] - half).abs() < 1e-6 && (served[0].1[1] - half).abs() < 1e-6, "{served:?}");
        assert_eq!(served[1], (1, vec![0.0, 1.0]));
        assert_eq!(served[2], (0, Vec::new()), "never called: nothing learned");
        memory.record("m", &[0.0, 1.0], &[k(3)], None);
        memory.record("m", &[0.0, 1.0], &[k(3)], None);
        let served = memory.recall("m", &[1.0, 0.0], None, &[k(1), k(2)]).served;
        assert_eq!(served[0], (1, vec![0.0, 1.0]), "the oldest request dropped, its vector with it");
        memory.record("m", &[0.0, 1.0], &[k(3)], None);
        assert_eq!(memory.recall("m", &[1.0, 0.0], None, &[k(1)]).served[0], (0, Vec::new()));
    }

    #[test]
    fn an_entry_from_another_replica_is_kept_once_and_only_of_the_same_model() {
        let (here, there) = (ToolMemory::new(None, 10), ToolMemory::new(None, 10));
        let called = here.record("m", &[1.0, 0.0], &[k(1)], None).expect("kept");
        assert!(!here.record_called(&called), "its own entry, read back, is not kept twice");
        assert!(there.record_called(&called));
        assert!(!there.record_called(&called));
        assert_eq!(there.recall("m", &[1.0, 0.0], None, &[k(1)]).similar, vec![1.0]);
        let other = Called { id: 7, model: "other-model".into(), ..called };
        assert!(!there.record_called(&other), "another model's vectors are never kept");
        assert_eq!(there.len(), 1);
    }

    #[test]
    fn the_memory_is_bounded_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let memory = ToolMemory::new(Some(dir.path().to_path_buf()), 3);
        for i in 0..10u8 {
            memory.record("m", &[1.0, 0.0], &[k(i)], None);
        }
        assert_eq!(memory.len(), 3);
        let file = dir.path().join("m.jsonl");
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        assert!(lines <= 2 * 3, "rewritten when it doubles: {lines} lines");
        drop(memory);
        let again = ToolMemory::new(Some(dir.path().to_path_buf()), 3);
        assert_eq!(
            again.recall("m", &[1.0, 0.0], None, &[k(9), k(7), k(6)]).similar,
            vec![1.0, 1.0, 0.0],
            "the latest three are back"
        );
        // A torn last line is cut; the rest stays.
        drop(again);
        let mut text = std::fs::read_to_string(&file).unwrap();
        text.push_str("{\"seq\": 99, \"sum\"");
        std::fs::write(&file, text).unwrap();
        let torn = ToolMemory::new(Some(dir.path().to_path_buf()), 3);
        assert_eq!(torn.recall("m", &[1.0, 0.0], None, &[k(9)]).similar, vec![1.0]);
    }

    /// Which tool followed which: the share of entries after a tool that
    /// called each, whatever the request's words; bounded as the rest, and
    /// kept across a restart and between replicas.
    #[test]
    fn the_tools_called_after_a_tool_are_recalled_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let memory = ToolMemory::new(Some(dir.path().to_path_buf()), 4);
        memory.record("m", &[1.0, 0.0], &[k(2)], Some(&k(1)));
        memory.record("m", &[0.0, 1.0], &[k(2)], Some(&k(1)));
        let shared = memory.record("m", &[0.6, 0.8], &[k(3)], Some(&k(1))).expect("kept");
        memory.record("m", &[1.0, 0.0], &[k(1)], None);
        let after = |m: &ToolMemory, tool: u8| m.recall("m", &[-1.0, 0.0], Some(&k(tool)), &[k(1), k(2), k(3)]);
        let recalled = after(&memory, 1);
        assert_eq!(recalled.followed, vec![0.0, 2.0 / 3.0, 1.0 / 3.0]);
        assert_eq!(recalled.similar, vec![0.0; 3], "a different request: nothing similar");
        assert_eq!(after(&memory, 2).followed, vec![0.0; 3], "nothing was called after k(2)");
        let there = ToolMemory::new(None, 4);
        assert!(there.record_called(&shared));
        assert_eq!(after(&there, 1).followed, vec![0.0, 0.0, 1.0], "another replica learns the step");
        drop(memory);
        let again = ToolMemory::new(Some(dir.path().to_path_buf()), 4);
        assert_eq!(after(&again, 1).followed, vec![0.0, 2.0 / 3.0, 1.0 / 3.0], "kept across a restart");
        again.record("m", &[1.0, 0.0], &[k(4)], None);
        again.record("m", &[1.0, 0.0], &[k(4)], None);
        assert_eq!(after(&again, 1).followed, vec![0.0, 0.0, 1.0], "the two oldest dropped: their steps too");
    }
}
