//! Long-term memory (docs/architecture.md §5): successful (task, API path) pairs,
//! embedded and searched by similarity. The paths of the most similar
//! remembered tasks are hints: the deterministic decider boosts their APIs,
//! the LLM decider shows them as worked examples. Live runs also leave the
//! APIs whose calls failed: for a while they rank lower for similar tasks
//! ([`LongTermMemory::failures`]), the weight halving every half-life.
//!
//! Stored as a [`crate::journal`] (`<state>/memory/memory.jsonl`),
//! each entry with its task's vector and the model that made it, so
//! loading needs no embedding; vectors of another model are never
//! compared with the current one's (the writer embeds them again at
//! start, [`reembed_stale`]).
//! `graph build` writes what trajectory files teach; the engine appends
//! every successful live run ([`MemoryWriter`]). Entries are shared
//! (`Arc`), so a planner's snapshot of the memory costs no copy of them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::graph::build::{clean_path, successful};
use crate::journal::{self, Journal};
use crate::retrieval::Progress;
use crate::retrieval::RetrievalError;
use crate::retrieval::cache::{EmbeddingCache, Key, embed_through_counted, key};
use crate::retrieval::dense::dot;
use crate::retrieval::embedder::{Embedder, Role};
use crate::trajectory::Trajectory;

/// One remembered run: a successful one's path, the failed calls of any.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub(crate) task: String,
    /// Function names, in order.
    pub(crate) path: Vec<String>,
    /// The task's unit vector.
    pub(crate) vector: Vec<f32>,
    /// Learned from a live run (kept when trajectories are re-read), not
    /// from a trajectory file.
    #[serde(default)]
    pub(crate) online: bool,
    /// The embedding model that made `vector` ([`Embedder::id`]); empty in
    /// journals written before it was recorded (then taken as stale).
    /// Left out of the JSON when empty, so that the checksum of an entry
    /// written before the field existed still matches.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) model: String,
    /// Functions whose calls failed in the run (the API's fault: what
    /// toolrouter refused itself is never recorded). Empty fields are left
    /// out of the JSON, as `model`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) failed: Vec<String>,
    /// When the run ended (ms since the Unix epoch; 0: not recorded).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) at_unix_ms: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Remembered runs, searchable.
#[derive(Debug, Default, Clone)]
pub struct LongTermMemory {
    entries: Vec<Arc<Memory>>,
}

/// Appends remembered runs to the memory journal (one process holds it).
#[derive(Debug)]
pub struct MemoryWriter {
    journal: Journal,
    next_seq: u64,
}

impl MemoryWriter {
    /// Writes `memory` durably (fsync'd) before it is used.
    pub(crate) fn append(&mut self, memory: &Memory) -> std::io::Result<()> {
        self.journal.append(self.next_seq, memory)?;
        self.next_seq += 1;
        Ok(())
    }
}

/// The memory journal in a state directory.
pub(crate) fn memory_path(state_dir: &Path) -> PathBuf {
    state_dir.join("memory").join("memory.jsonl")
}

/// The successful runs among `trajectories` as (task, path of function
/// names), cleaned as the graph cleans them; unresolvable calls left out.
pub(crate) fn successful_paths(
    catalog: &Catalog,
    trajectories: &[Trajectory],
    max_calls: usize,
) -> Vec<(String, Vec<String>)> {
    trajectories
        .iter()
        .filter(|t| successful(t) && t.calls.len() <= max_calls && !t.query.trim().is_empty())
        .filter_map(|t| {
            let path: Vec<String> = clean_path(t.calls.iter().map(|c| (c.name.as_str(), c.failed != Some(true))))
                .into_iter()
                .filter_map(|name| catalog.resolve(name).first().map(|id| catalog.api(id).function_name.clone()))
                .collect();
            (!path.is_empty()).then(|| (t.query.clone(), path))
        })
        .collect()
}

/// Memories of `paths`, their tasks embedded through the embedding cache.
pub(crate) fn embed_paths(
    paths: Vec<(String, Vec<String>)>,
    embedder: &Embedder,
    cache: &mut EmbeddingCache,
    batch: usize,
) -> Result<Vec<Memory>, RetrievalError> {
    let tasks: Vec<String> = paths.iter().map(|(task, _)| task.clone()).collect();
    let shown = (&Progress::default(), "embedding the successful runs' tasks");
    let vectors = embed_through_counted(cache, embedder, Role::Query, &tasks, batch, Some(shown))?;
    Ok(paths
        .into_iter()
        .zip(vectors)
        .map(|((task, path), vector)| Memory {
            task,
            path,
            vector,
            online: false,
            model: embedder.id().to_string(),
            ..Memory::default()
        })
        .collect())
}

/// Embeds task texts as queries (through the embedding cache, in the callers).
pub(crate) type Embed<'a> = &'a mut dyn FnMut(&[String]) -> std::io::Result<Vec<Vec<f32>>>;

/// Gives `entries` new vectors from `embed`, recorded as `model`'s.
fn embed_again(entries: Vec<&mut Memory>, model: &str, embed: Embed<'_>) -> std::io::Result<()> {
    let tasks: Vec<String> = entries.iter().map(|m| m.task.clone()).collect();
    let vectors = embed(&tasks)?;
    if vectors.len() != entries.len() {
        return Err(std::io::Error::other("the embedder returned fewer vectors than tasks"));
    }
    for (memory, vector) in entries.into_iter().zip(vectors) {
        memory.vector = vector;
        memory.model = model.to_string();
    }
    Ok(())
}

/// Embeds again (through the embedding cache in `cache_dir`) the entries of
/// the memory journal at `path` that another model embedded: after
/// `embedding.model` changes, remembered runs keep counting. Returns how many.
pub(crate) fn reembed_stale(
    path: &Path,
    embedder: &Embedder,
    cache_dir: &Path,
    batch: usize,
    progress: &Progress,
) -> std::io::Result<usize> {
    if !path.exists() {
        return Ok(0);
    }
    let mut embed = |tasks: &[String]| {
        // Only these tasks' records: the cache may hold a whole catalog's vectors.
        let keys: Vec<Key> = tasks.iter().map(|t| key(embedder.id(), &embedder.as_read(Role::Query, t))).collect();
        let mut cache = EmbeddingCache::open_for(cache_dir, embedder.id(), embedder.dims(), &keys)?;
        let shown = Some((progress, "embedding remembered runs again"));
        embed_through_counted(&mut cache, embedder, Role::Query, tasks, batch, shown).map_err(std::io::Error::other)
    };
    LongTermMemory::refresh(path, embedder.id(), &mut embed)
}

impl LongTermMemory {
    /// Replaces what the journal at `path` learned from trajectory files by
    /// `entries`, keeping what live runs taught it with their tasks embedded
    /// again by `embed` as `model` (the model may have changed since; the
    /// embedding cache makes it cheap when it has not): written beside it,
    /// fsync'd, renamed into place. Returns the entries kept.
    pub(crate) fn rewrite(path: &Path, entries: &[Memory], model: &str, embed: Embed<'_>) -> std::io::Result<usize> {
        let (old, _) = journal::read::<Memory>(path)?;
        let mut kept: Vec<Memory> = old.into_iter().map(|(_, m)| m).filter(|m| m.online).collect();
        let all: Vec<&mut Memory> = kept.iter_mut().collect();
        embed_again(all, model, embed)?;
        kept.extend_from_slice(entries);
        crate::journal::replace(path, &kept)?;
        Ok(kept.len() - entries.len())
    }

    /// Embeds again, as `model`, the entries of the journal at `path` that
    /// another model (or an unrecorded one) embedded, and rewrites it as
    /// [`LongTermMemory::rewrite`] does; nothing is written when none is
    /// stale. Returns how many were embedded again.
    pub fn refresh(path: &Path, model: &str, embed: Embed<'_>) -> std::io::Result<usize> {
        let (old, _) = journal::read::<Memory>(path)?;
        let mut entries: Vec<Memory> = old.into_iter().map(|(_, m)| m).collect();
        let stale: Vec<&mut Memory> = entries.iter_mut().filter(|m| m.model != model).collect();
        let n = stale.len();
        if n > 0 {
            embed_again(stale, model, embed)?;
            crate::journal::replace(path, &entries)?;
        }
        Ok(n)
    }

    /// How many entries another model (or an unrecorded one) embedded.
    pub(crate) fn stale(&self, model: &str) -> usize {
        self.entries.iter().filter(|m| m.model != model).count()
    }

    /// Leaves out of this view the entries another model embedded (the
    /// journal keeps them); returns how many.
    pub(crate) fn keep_model(&mut self, model: &str) -> usize {
        let before = self.entries.len();
        self.entries.retain(|m| m.model == model);
        before - self.entries.len()
    }

    /// A memory that lives only in this process (evaluation).
    pub(crate) fn in_memory(entries: Vec<Memory>) -> LongTermMemory {
        LongTermMemory { entries: entries.into_iter().map(Arc::new).collect() }
    }

    /// Loads the journal at `path` for writing (a torn last entry is cut off).
    pub(crate) fn open(path: &Path) -> std::io::Result<(LongTermMemory, MemoryWriter, journal::ReadReport)> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let (journal, records, report) = Journal::open::<Memory>(path)?;
        let next_seq = records.last().map_or(1, |(seq, _)| seq + 1);
        let memory = LongTermMemory::in_memory(records.into_iter().map(|(_, m)| m).collect());
        Ok((memory, MemoryWriter { journal, next_seq }, report))
    }

    /// Loads the journal at `path` without changing it (for readers).
    pub(crate) fn read(path: &Path) -> std::io::Result<LongTermMemory> {
        let (records, _) = journal::read::<Memory>(path)?;
        Ok(LongTermMemory::in_memory(records.into_iter().map(|(_, m)| m).collect()))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Remembers a run (in this process; [`MemoryWriter::append`] makes it durable).
    pub(crate) fn push(&mut self, memory: Memory) {
        self.entries.push(Arc::new(memory));
    }

    /// The `k` remembered tasks most similar to `vector`, as worked examples.
    pub(crate) fn examples(&self, vector: &[f32], k: usize) -> Vec<super::Example> {
        self.search(vector, k)
            .into_iter()
            .map(|(similarity, m)| super::Example { task: m.task.clone(), path: m.path.clone(), similarity })
            .collect()
    }

    /// The `k` remembered successful tasks most similar to `vector`, with
    /// their similarity.
    pub(crate) fn search(&self, vector: &[f32], k: usize) -> Vec<(f32, &Memory)> {
        let mut scored: Vec<(f32, &Memory)> = self
            .entries
            .iter()
            .filter(|m| m.vector.len() == vector.len() && !m.path.is_empty())
            .map(|m| (dot(&m.vector, vector), &**m))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.truncate(k);
        scored
    }

    /// Per function, how much tasks like `vector` saw it fail lately: the
    /// sum, over remembered runs at least `min_similarity` close whose
    /// calls to it failed, of their similarity · 0.5^(age / `half_life`),
    /// at most 1. (Runs without a time count as old: nothing.)
    pub(crate) fn failures(
        &self,
        vector: &[f32],
        min_similarity: f32,
        now_ms: u64,
        half_life: std::time::Duration,
    ) -> HashMap<String, f32> {
        let mut out: HashMap<String, f32> = HashMap::new();
        let half_life_ms = half_life.as_millis().max(1) as f64;
        for m in &self.entries {
            if m.failed.is_empty() || m.at_unix_ms == 0 || m.vector.len() != vector.len() {
                continue;
            }
            let similarity = dot(&m.vector, vector);
            if similarity < min_similarity {
                continue;
            }
            let age = now_ms.saturating_sub(m.at_unix_ms) as f64;
            let weight = similarity * 0.5f64.powf(age / half_life_ms) as f32;
            for function in &m.failed {
                let total = out.entry(function.clone()).or_default();
                *total = (*total + weight).min(1.0);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(task: &str, path: &[&str], vector: [f32; 2], online: bool, model: &str) -> Memory {
        let path = path.iter().map(|s| s.to_string()).collect();
        Memory { task: task.into(), path, vector: vector.to_vec(), online, model: model.into(), ..Memory::default() }
    }

    #[test]
    fn remembers_durably_and_finds_the_closest() {
        let dir = tempfile::tempdir().unwrap();
        let path = memory_path(dir.path());
        let (_, mut writer, _) = LongTermMemory::open(&path).unwrap();
        writer.append(&memory("weather", &["a"], [1.0, 0.0], true, "m1")).unwrap();
        writer.append(&memory("rates", &["b", "c"], [0.0, 1.0], false, "m1")).unwrap();
        drop(writer);
        let (m, mut writer, _) = LongTermMemory::open(&path).unwrap();
        assert_eq!(m.len(), 2);
        writer.append(&memory("news", &["e"], [0.0, 1.0], true, "m1")).unwrap();
        drop(writer);
        assert_eq!(LongTermMemory::read(&path).unwrap().len(), 3, "appended after the records read");
        // Re-reading trajectories replaces their memories, keeps live ones
        // (embedded again: the model may have changed).
        let fresh = memory("news", &["d"], [0.6, 0.8], false, "m2");
        let mut embed = |tasks: &[String]| {
            assert_eq!(tasks, ["weather", "news"], "the live ones");
            Ok(vec![vec![0.0, 1.0], vec![1.0, 0.0]])
        };
        assert_eq!(LongTermMemory::rewrite(&path, &[fresh], "m2", &mut embed).unwrap(), 2, "the two live ones kept");
        let read = LongTermMemory::read(&path).unwrap();
        let tasks: Vec<&str> = read.entries.iter().map(|m| m.task.as_str()).collect();
        assert_eq!(tasks, ["weather", "news", "news"]);
        assert_eq!(read.entries[0].vector, [0.0, 1.0], "re-embedded");
        assert!(read.entries.iter().all(|m| m.model == "m2"), "recorded as the new model's");
        let (m, _, _) = LongTermMemory::open(&path).unwrap();
        let found = m.search(&[0.1, 0.99], 1);
        assert_eq!(found[0].1.task, "weather", "its new vector");
    }

    /// After a change of embedding model, remembered runs are embedded
    /// again (all of them, old journals' unrecorded ones too) or, until
    /// then, left out: vectors of two models are never compared.
    #[test]
    fn runs_of_another_model_are_embedded_again_or_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = memory_path(dir.path());
        let (_, mut writer, _) = LongTermMemory::open(&path).unwrap();
        writer.append(&memory("weather", &["a"], [1.0, 0.0], true, "m1")).unwrap();
        writer.append(&memory("rates", &["b"], [0.0, 1.0], false, "m2")).unwrap();
        drop(writer);
        // An entry written before models were recorded: no `model` field,
        // its checksum taken over the record without it.
        #[derive(Serialize)]
        struct Legacy {
            task: &'static str,
            path: [&'static str; 1],
            vector: [f32; 2],
            online: bool,
        }
        let (mut journal, _, _) = Journal::open::<Memory>(&path).unwrap();
        let legacy = Legacy { task: "news", path: ["c"], vector: [0.0, 1.0], online: true };
        journal.append(3, &legacy).unwrap();
        drop(journal);
        let (view, _, report) = LongTermMemory::open(&path).unwrap();
        assert_eq!((view.len(), report.dropped), (3, 0), "the legacy entry is read, not taken as damaged");

        let mut view = LongTermMemory::read(&path).unwrap();
        assert_eq!(view.keep_model("m2"), 2, "m1's and the unrecorded one left out");
        assert_eq!(view.search(&[1.0, 0.0], 3).len(), 1);

        let mut asked = Vec::new();
        let mut embed = |tasks: &[String]| {
            asked.extend_from_slice(tasks);
            Ok(tasks.iter().map(|_| vec![0.8, 0.6]).collect())
        };
        assert_eq!(LongTermMemory::refresh(&path, "m2", &mut embed).unwrap(), 2);
        assert_eq!(asked, ["weather", "news"], "only the stale ones are embedded");
        let mut view = LongTermMemory::read(&path).unwrap();
        assert_eq!(view.keep_model("m2"), 0);
        let tasks: Vec<(&str, &[f32])> = view.entries.iter().map(|m| (m.task.as_str(), &m.vector[..])).collect();
        assert_eq!(tasks, [("weather", &[0.8, 0.6][..]), ("rates", &[0.0, 1.0]), ("news", &[0.8, 0.6])], "order kept");

        let mut never = |_: &[String]| -> std::io::Result<Vec<Vec<f32>>> { panic!("nothing is stale") };
        let before = std::fs::read(&path).unwrap();
        assert_eq!(LongTermMemory::refresh(&path, "m2", &mut never).unwrap(), 0);
        assert_eq!(std::fs::read(&path).unwrap(), before, "nothing rewritten");
        let mut short = |_: &[String]| Ok(Vec::new());
        assert!(
            LongTermMemory::refresh(&path, "m3", &mut short).is_err(),
            "a short answer is refused, not half-applied"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    /// A failed call weighs against its API for similar tasks only, by
    /// their similarity, halving every half-life; failed runs are never
    /// worked examples.
    #[test]
    fn failures_count_for_similar_tasks_and_fade() {
        let hour = std::time::Duration::from_secs(3600);
        let now = 10 * 3_600_000;
        let failed = |vector: [f32; 2], at_unix_ms: u64, failed: &[&str]| Memory {
            failed: failed.iter().map(|f| f.to_string()).collect(),
            at_unix_ms,
            ..memory("t", &[], vector, true, "m")
        };
        let m = LongTermMemory::in_memory(vec![
            failed([1.0, 0.0], now, &["down"]),
            failed([0.8, 0.6], now - 3_600_000, &["down", "slow"]),
            failed([0.0, 1.0], now, &["other"]),
            failed([1.0, 0.0], 0, &["untimed"]),
        ]);
        let seen = m.failures(&[1.0, 0.0], 0.5, now, hour);
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(seen["down"], 1.0, "1 + 0.8 / 2, capped at 1");
        assert!((seen["slow"] - 0.4).abs() < 1e-6, "{seen:?}");
        let later = m.failures(&[1.0, 0.0], 0.5, now + 3 * 3_600_000, hour);
        assert!((later["down"] - (0.125 + 0.0625 * 0.8)).abs() < 1e-6, "{later:?}");
        assert!(m.search(&[1.0, 0.0], 5).is_empty(), "a run without a path is no worked example");
    }
}
