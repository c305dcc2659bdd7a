//! The runs a replica recorded and has not yet published to the run stream
//! ([`super::runs`]), kept on disk so that none is lost when Redis is away
//! or the replica dies: `<state>/cluster/outbox.jsonl` (a [`journal`],
//! each run appended and fsync'd before it is acknowledged) and
//! `<state>/cluster/published` (the sequence number of the last run Redis
//! took, written atomically after each publish). Once every run is
//! published the journal is emptied; numbering goes on from the marker.
//!
//! A crash between Redis taking a batch and the marker's write publishes
//! that batch again on the next start: followers skip a run id they have
//! just applied ([`crate::engine`]'s follower keeps the recent ones).
//!
//! The same directory holds `replica`, this replica's id in the stream
//! (made once, so a restarted replica still knows its own runs).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::runs::SharedRun;
use crate::journal::{self, Journal, Records};

const OUTBOX: &str = "outbox.jsonl";
const PUBLISHED: &str = "published";
const REPLICA: &str = "replica";

/// The cluster's files in a state directory.
pub(crate) fn cluster_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("cluster")
}

/// The runs waiting to be published (one writer: the engine holds it).
#[derive(Debug)]
pub(crate) struct Outbox {
    dir: PathBuf,
    journal: Journal,
    /// The sequence number the next run gets.
    next_seq: u64,
    /// The last sequence number Redis took.
    published: u64,
}

impl Outbox {
    /// Opens (or creates) the outbox in `dir` of runs carrying an `M`; a
    /// torn last line (a crash mid-append: never acknowledged) is cut off.
    pub(crate) fn open<M: Serialize + DeserializeOwned>(dir: &Path) -> std::io::Result<Outbox> {
        std::fs::create_dir_all(dir)?;
        let published = match std::fs::read_to_string(dir.join(PUBLISHED)) {
            Ok(text) => text.trim().parse().map_err(|e| {
                std::io::Error::other(format!("{} is not a number ({e})", dir.join(PUBLISHED).display()))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        let (journal, records, _) = Journal::open::<SharedRun<M>>(&dir.join(OUTBOX))?;
        let last = records.last().map_or(0, |(seq, _)| *seq);
        Ok(Outbox { dir: dir.to_path_buf(), journal, next_seq: last.max(published) + 1, published })
    }

    /// Keeps `run` durably (fsync'd) until it is published.
    pub(crate) fn append<M: Serialize>(&mut self, run: &SharedRun<M>) -> std::io::Result<()> {
        self.journal.append(self.next_seq, run)?;
        self.next_seq += 1;
        Ok(())
    }

    /// Runs not yet published.
    pub(crate) fn backlog(&self) -> u64 {
        self.next_seq - 1 - self.published
    }

    /// The runs not yet published, oldest first, with their sequence numbers.
    pub(crate) fn pending<M: Serialize + DeserializeOwned>(&self) -> std::io::Result<Records<SharedRun<M>>> {
        let (records, _) = journal::read::<SharedRun<M>>(self.journal.path())?;
        Ok(records.into_iter().filter(|(seq, _)| *seq > self.published).collect())
    }

    /// Notes that Redis took every run up to `seq`; empties the journal
    /// when nothing is left to publish.
    pub(crate) fn mark_published(&mut self, seq: u64) -> std::io::Result<()> {
        let tmp = self.dir.join(format!("{PUBLISHED}.tmp"));
        let mut f = File::create(&tmp)?;
        f.write_all(seq.to_string().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, self.dir.join(PUBLISHED))?;
        File::open(&self.dir)?.sync_all()?;
        self.published = seq;
        if self.backlog() == 0 {
            self.journal.clear()?;
        }
        Ok(())
    }
}

/// This replica's id in the run stream, made (randomly) at its first start
/// and kept in `dir`.
pub(crate) fn replica_id(dir: &Path) -> std::io::Result<String> {
    let path = dir.join(REPLICA);
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => return Ok(id.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir_all(dir)?;
    let id = format!("{:016x}", fastrand::u64(..));
    let tmp = dir.join(format!("{REPLICA}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(id.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    File::open(dir)?.sync_all()?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{RunCall, RunRecord};

    fn run(id: &str) -> SharedRun<String> {
        let calls = vec![RunCall { function: "a".into(), ok: true }];
        SharedRun {
            origin: "r1".into(),
            run: RunRecord { id: id.into(), task: "t".into(), calls, success: true, standalone: false, at_unix_ms: 0 },
            memory: None,
        }
    }

    /// What is appended stays pending across reopening until it is marked
    /// published; then the journal is emptied and numbering goes on.
    #[test]
    fn pending_runs_survive_reopening_until_published() {
        let dir = tempfile::tempdir().unwrap();
        let mut outbox = Outbox::open::<String>(dir.path()).unwrap();
        for id in ["x", "y", "z"] {
            outbox.append(&run(id)).unwrap();
        }
        outbox.mark_published(1).unwrap();
        drop(outbox);
        let mut outbox = Outbox::open::<String>(dir.path()).unwrap();
        let pending = outbox.pending::<String>().unwrap();
        let ids: Vec<(u64, &str)> = pending.iter().map(|(seq, r)| (*seq, r.run.id.as_str())).collect();
        assert_eq!(ids, [(2, "y"), (3, "z")]);
        assert_eq!(outbox.backlog(), 2);
        outbox.mark_published(3).unwrap();
        assert_eq!(std::fs::metadata(dir.path().join(OUTBOX)).unwrap().len(), 0, "emptied once all are published");
        drop(outbox);
        let mut outbox = Outbox::open::<String>(dir.path()).unwrap();
        assert_eq!((outbox.backlog(), outbox.pending::<String>().unwrap().len()), (0, 0));
        outbox.append(&run("w")).unwrap();
        assert_eq!(outbox.pending::<String>().unwrap()[0].0, 4, "numbering goes on from the marker");
    }

    #[test]
    fn the_replica_id_is_made_once() {
        let dir = tempfile::tempdir().unwrap();
        let first = replica_id(dir.path()).unwrap();
        assert_eq!(first.len(), 16);
        assert_eq!(replica_id(dir.path()).unwrap(), first);
    }
}
