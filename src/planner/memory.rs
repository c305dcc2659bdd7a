//! Long-term memory (DESIGN §5): successful (task, API path) pairs,
//! embedded and searched by similarity. The paths of the most similar
//! remembered tasks are hints: the deterministic decider boosts their APIs,
//! an LLM decider would see them as examples.
//!
//! Stored as a [`journal`](crate::journal) (`<state>/memory/memory.jsonl`),
//! each entry with its task's vector, so loading needs no embedding.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::journal::{self, Journal};
use crate::retrieval::dense::dot;

/// One remembered successful run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub task: String,
    /// Function names, in order.
    pub path: Vec<String>,
    /// The task's unit vector.
    pub vector: Vec<f32>,
}

/// Remembered runs, searchable; optionally backed by a journal.
#[derive(Debug, Default)]
pub struct LongTermMemory {
    entries: Vec<Memory>,
    journal: Option<Journal>,
}

/// The memory journal in a state directory.
pub fn memory_path(state_dir: &Path) -> PathBuf {
    state_dir.join("memory").join("memory.jsonl")
}

impl LongTermMemory {
    /// A memory that lives only in this process (evaluation).
    pub fn in_memory(entries: Vec<Memory>) -> LongTermMemory {
        LongTermMemory { entries, journal: None }
    }

    /// Loads the journal at `path` (a torn last entry is cut off).
    pub fn open(path: &Path) -> std::io::Result<(LongTermMemory, journal::ReadReport)> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let (journal, records, report) = Journal::open::<Memory>(path)?;
        Ok((LongTermMemory { entries: records.into_iter().map(|(_, m)| m).collect(), journal: Some(journal) }, report))
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

    /// Remembers a successful run (durably, when backed by a journal).
    pub fn add(&mut self, memory: Memory) -> std::io::Result<()> {
        if let Some(journal) = &mut self.journal {
            journal.append(self.entries.len() as u64 + 1, &memory)?;
        }
        self.entries.push(memory);
        Ok(())
    }

    /// The `k` remembered tasks most similar to `vector`, with their similarity.
    pub fn search(&self, vector: &[f32], k: usize) -> Vec<(f32, &Memory)> {
        let mut scored: Vec<(f32, &Memory)> = self
            .entries
            .iter()
            .filter(|m| m.vector.len() == vector.len())
            .map(|m| (dot(&m.vector, vector), m))
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
        let (mut m, _) = LongTermMemory::open(&path).unwrap();
        m.add(Memory { task: "weather".into(), path: vec!["a".into()], vector: vec![1.0, 0.0] }).unwrap();
        m.add(Memory { task: "rates".into(), path: vec!["b".into(), "c".into()], vector: vec![0.0, 1.0] }).unwrap();
        drop(m);
        let (m, _) = LongTermMemory::open(&path).unwrap();
        assert_eq!(m.len(), 2);
        let found = m.search(&[0.1, 0.99], 1);
        assert_eq!(found[0].1.task, "rates");
    }
}
