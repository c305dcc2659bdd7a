//! Long-term memory (docs/architecture.md §5): successful (task, API path) pairs,
//! embedded and searched by similarity. The paths of the most similar
//! remembered tasks are hints: the deterministic decider boosts their APIs,
//! the LLM decider shows them as worked examples.
//!
//! Stored as a [`crate::journal`] (`<state>/memory/memory.jsonl`),
//! each entry with its task's vector, so loading needs no embedding.
//! `graph build` writes what trajectory files teach; the engine appends
//! every successful live run ([`MemoryWriter`]). Entries are shared
//! (`Arc`), so a planner's snapshot of the memory costs no copy of them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::graph::build::{clean_path, successful};
use crate::journal::{self, Journal};
use crate::retrieval::RetrievalError;
use crate::retrieval::cache::{EmbeddingCache, embed_through};
use crate::retrieval::dense::dot;
use crate::retrieval::embedder::{Embedder, Role};
use crate::trajectory::Trajectory;

/// One remembered successful run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub task: String,
    /// Function names, in order.
    pub path: Vec<String>,
    /// The task's unit vector.
    pub vector: Vec<f32>,
    /// Learned from a live run (kept when trajectories are re-read), not
    /// from a trajectory file.
    #[serde(default)]
    pub online: bool,
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
    pub fn append(&mut self, memory: &Memory) -> std::io::Result<()> {
        self.journal.append(self.next_seq, memory)?;
        self.next_seq += 1;
        Ok(())
    }
}

/// The memory journal in a state directory.
pub fn memory_path(state_dir: &Path) -> PathBuf {
    state_dir.join("memory").join("memory.jsonl")
}

/// The successful runs among `trajectories` as (task, path of function
/// names), cleaned as the graph cleans them; unresolvable calls left out.
pub fn successful_paths(
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
pub fn embed_paths(
    paths: Vec<(String, Vec<String>)>,
    embedder: &Embedder,
    cache: &mut EmbeddingCache,
    batch: usize,
) -> Result<Vec<Memory>, RetrievalError> {
    let tasks: Vec<String> = paths.iter().map(|(task, _)| task.clone()).collect();
    let vectors = embed_through(cache, embedder, Role::Query, &tasks, batch)?;
    Ok(paths
        .into_iter()
        .zip(vectors)
        .map(|((task, path), vector)| Memory { task, path, vector, online: false })
        .collect())
}

impl LongTermMemory {
    /// Replaces what the journal at `path` learned from trajectory files by
    /// `entries`, keeping what live runs taught it with their tasks embedded
    /// again by `embed` (the model may have changed since; the embedding
    /// cache makes it cheap when it has not): written beside it, fsync'd,
    /// renamed into place. Returns the entries kept.
    pub fn rewrite(
        path: &Path,
        entries: &[Memory],
        embed: impl FnOnce(&[String]) -> std::io::Result<Vec<Vec<f32>>>,
    ) -> std::io::Result<usize> {
        let (old, _) = journal::read::<Memory>(path)?;
        let mut kept: Vec<Memory> = old.into_iter().map(|(_, m)| m).filter(|m| m.online).collect();
        let tasks: Vec<String> = kept.iter().map(|m| m.task.clone()).collect();
        for (memory, vector) in kept.iter_mut().zip(embed(&tasks)?) {
            memory.vector = vector;
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let aside = path.with_extension("jsonl.new");
        let _ = std::fs::remove_file(&aside);
        let (mut journal, _, _) = Journal::open::<Memory>(&aside)?;
        journal.append_all(1, &kept)?;
        journal.append_all(kept.len() as u64 + 1, entries)?;
        drop(journal);
        std::fs::rename(&aside, path)?;
        std::fs::File::open(dir)?.sync_all()?;
        Ok(kept.len())
    }

    /// A memory that lives only in this process (evaluation).
    pub fn in_memory(entries: Vec<Memory>) -> LongTermMemory {
        LongTermMemory { entries: entries.into_iter().map(Arc::new).collect() }
    }

    /// Loads the journal at `path` for writing (a torn last entry is cut off).
    pub fn open(path: &Path) -> std::io::Result<(LongTermMemory, MemoryWriter, journal::ReadReport)> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let (journal, records, report) = Journal::open::<Memory>(path)?;
        let next_seq = records.last().map_or(1, |(seq, _)| seq + 1);
        let memory = LongTermMemory::in_memory(records.into_iter().map(|(_, m)| m).collect());
        Ok((memory, MemoryWriter { journal, next_seq }, report))
    }

    /// Loads the journal at `path` without changing it (for readers).
    pub fn read(path: &Path) -> std::io::Result<LongTermMemory> {
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
    pub fn push(&mut self, memory: Memory) {
        self.entries.push(Arc::new(memory));
    }

    /// The `k` remembered tasks most similar to `vector`, as worked examples.
    pub fn examples(&self, vector: &[f32], k: usize) -> Vec<super::Example> {
        self.search(vector, k)
            .into_iter()
            .map(|(similarity, m)| super::Example { task: m.task.clone(), path: m.path.clone(), similarity })
            .collect()
    }

    /// The `k` remembered tasks most similar to `vector`, with their similarity.
    pub fn search(&self, vector: &[f32], k: usize) -> Vec<(f32, &Memory)> {
        let mut scored: Vec<(f32, &Memory)> = self
            .entries
            .iter()
            .filter(|m| m.vector.len() == vector.len())
            .map(|m| (dot(&m.vector, vector), &**m))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.truncate(k);
        scored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_durably_and_finds_the_closest() {
        let dir = tempfile::tempdir().unwrap();
        let path = memory_path(dir.path());
        let (_, mut writer, _) = LongTermMemory::open(&path).unwrap();
        writer
            .append(&Memory { task: "weather".into(), path: vec!["a".into()], vector: vec![1.0, 0.0], online: true })
            .unwrap();
        writer
            .append(&Memory {
                task: "rates".into(),
                path: vec!["b".into(), "c".into()],
                vector: vec![0.0, 1.0],
                online: false,
            })
            .unwrap();
        drop(writer);
        let (m, mut writer, _) = LongTermMemory::open(&path).unwrap();
        assert_eq!(m.len(), 2);
        let third = Memory { task: "news".into(), path: vec!["e".into()], vector: vec![0.0, 1.0], online: true };
        writer.append(&third).unwrap();
        drop(writer);
        assert_eq!(LongTermMemory::read(&path).unwrap().len(), 3, "appended after the records read");
        // Re-reading trajectories replaces their memories, keeps live ones
        // (embedded again: the model may have changed).
        let fresh = Memory { task: "news".into(), path: vec!["d".into()], vector: vec![0.6, 0.8], online: false };
        let embed = |tasks: &[String]| {
            assert_eq!(tasks, ["weather", "news"], "the live ones");
            Ok(vec![vec![0.0, 1.0], vec![1.0, 0.0]])
        };
        assert_eq!(LongTermMemory::rewrite(&path, &[fresh], embed).unwrap(), 2, "the two live ones kept");
        let read = LongTermMemory::read(&path).unwrap();
        let tasks: Vec<&str> = read.entries.iter().map(|m| m.task.as_str()).collect();
        assert_eq!(tasks, ["weather", "news", "news"]);
        assert_eq!(read.entries[0].vector, [0.0, 1.0], "re-embedded");
        let (m, _, _) = LongTermMemory::open(&path).unwrap();
        let found = m.search(&[0.1, 0.99], 1);
        assert_eq!(found[0].1.task, "weather", "its new vector");
    }
}
