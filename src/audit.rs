//! The audit log: every tool call toolrouter makes or refuses, by every
//! face (who, which tool, allowed or refused and why, the outcome, how
//! long it took), append-only in the state directory (`audit/`).
//!
//! Each process appends to a file of its own, named by when it started
//! and its pid (`audit/20261128T165000Z-4242-0000.jsonl`): `serve`, `mcp` and a
//! `toolrouter call` beside them never write one file together, and a
//! restart starts a new file (the operator archives or deletes old ones).
//! Each file is a [`crate::journal`]; one thread writes it with group
//! commit (the entries that arrive during a write go with the next
//! fsync), and [`AuditLog::record`] returns once its entry is durable, so
//! a call is answered only after its audit line is on disk. Arguments and
//! answers are kept only with `access.audit_content`.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::journal::Journal;

/// Most entries written with one fsync.
const MAX_BATCH: usize = 512;

/// Whether a call was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Decision {
    /// toolrouter called the tool (whatever the tool answered).
    Allowed,
    /// toolrouter did not call it (`reason` says why).
    Refused,
}

/// One call, as the audit log keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AuditEntry {
    pub(crate) at_unix_ms: u64,
    /// The key's client id (the first 12 hex digits of its hash); `None`
    /// without keys or from the command line.
    pub(crate) client: Option<String>,
    /// The face or mode the call came through: `tools_call`, `mcp`,
    /// `execute`, `cli`.
    pub(crate) via: String,
    /// The function name, as the catalog spells it (as asked when unknown).
    pub(crate) tool: String,
    pub(crate) decision: Decision,
    /// Why it was refused: `not allowed (policy …)`, `unknown tool`,
    /// `invalid arguments`, toolrouter's own limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// For a call made: `ok`, or the failure's class (`server_error`, `timeout`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) outcome: Option<String>,
    /// The upstream's HTTP status, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<u16>,
    pub(crate) duration_ms: f64,
    /// Only with `access.audit_content`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) arguments: Option<Value>,
    /// The answer handed back (compressed), only with `access.audit_content`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) answer: Option<String>,
}

struct Job {
    entry: AuditEntry,
    done: oneshot::Sender<bool>,
}

/// This process's audit file and the thread writing it.
pub(crate) struct AuditLog {
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl AuditLog {
    /// The audit file of this process in `state/audit/`, and its writer;
    /// the file is made (and its directory fsync'd, so that it survives a
    /// crash) with the first entry: a command that calls nothing leaves none.
    pub(crate) fn open(state: &Path) -> std::io::Result<AuditLog> {
        let dir = state.join("audit");
        // A process may open several (an engine per state directory, in tests): numbered in order.
        static OPENED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let started = chrono_like_stamp(crate::metrics::unix_ms());
        let path = dir.join(format!("{started}-{}-{n:04}.jsonl", std::process::id()));
        let (jobs, received) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new().name("audit-log".into()).spawn(move || write(&path, &received))?;
        Ok(AuditLog { jobs: Some(jobs), thread: Some(thread) })
    }

    /// Appends `entry`: `true` once it is durable, `false` if it could not
    /// be written (the log says why).
    pub(crate) async fn record(&self, entry: AuditEntry) -> bool {
        let (done, wait) = oneshot::channel();
        let Some(jobs) = &self.jobs else { return false };
        if jobs.send(Job { entry, done }).is_err() {
            return false;
        }
        wait.await.unwrap_or(false)
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Makes the audit file at `path` and its directory, durably.
fn create(path: &Path) -> std::io::Result<Journal> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let (journal, _, _) = Journal::open::<AuditEntry>(path)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(journal)
}

/// The writer: whatever arrived while the last fsync ran goes in one batch.
fn write(path: &Path, jobs: &Receiver<Job>) {
    let mut journal: Option<Journal> = None;
    let mut seq = 1;
    while let Ok(first) = jobs.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let entries: Vec<&AuditEntry> = batch.iter().map(|j| &j.entry).collect();
        if journal.is_none() {
            journal = create(path)
                .map_err(|e| tracing::error!(path = %path.display(), "the audit log could not be made: {e}"))
                .ok();
        }
        let written = match journal.as_mut() {
            Some(journal) => journal.append_all(seq, &entries),
            None => Err(std::io::Error::other("no audit file")),
        };
        if let Err(e) = &written {
            tracing::error!(path = %path.display(), "the audit log could not be written: {e}");
        }
        seq += batch.len() as u64;
        for job in batch {
            let _ = job.done.send(written.is_ok());
        }
    }
}

/// Every entry of every audit file in `state/audit/`, oldest file first.
pub(crate) fn read_all(state: &Path) -> std::io::Result<Vec<AuditEntry>> {
    let dir = state.join("audit");
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    files.sort();
    let mut all = Vec::new();
    for file in files {
        let (records, _) = crate::journal::read::<AuditEntry>(&file)?;
        all.extend(records.into_iter().map(|(_, entry)| entry));
    }
    Ok(all)
}

/// `20261128T165000Z` from Unix milliseconds: sortable, no `:` (a file
/// name on every system). Written here rather than with a date crate: it
/// is the one date toolrouter formats.
fn chrono_like_stamp(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil from days (Howard Hinnant's algorithm), 1970-01-01 = day 0.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(tool: &str, decision: Decision) -> AuditEntry {
        AuditEntry {
            at_unix_ms: 1,
            client: Some("abc".into()),
            via: "mcp".into(),
            tool: tool.into(),
            decision,
            reason: None,
            outcome: None,
            status: None,
            duration_ms: 0.5,
            arguments: None,
            answer: None,
        }
    }

    #[test]
    fn stamps_are_utc_and_sortable() {
        assert_eq!(chrono_like_stamp(0), "19700101T000000Z");
        assert_eq!(chrono_like_stamp(1_795_971_000_000), "20261129T165000Z", "as GNU date -u says");
        assert_eq!(chrono_like_stamp(951_782_400_000), "20000229T000000Z", "a leap day");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn every_entry_acknowledged_is_read_back_after_a_restart() {
        let state = tempfile::tempdir().unwrap();
        let log = AuditLog::open(state.path()).unwrap();
        let writes = (0..200).map(|i| log.record(entry(&format!("t{i}"), Decision::Allowed)));
        assert!(futures_util::future::join_all(writes).await.into_iter().all(|ok| ok));
        drop(log);
        let again = AuditLog::open(state.path()).unwrap();
        assert!(again.record(entry("after", Decision::Refused)).await);
        let all = read_all(state.path()).unwrap();
        assert_eq!(all.len(), 201);
        assert_eq!(all.last().unwrap().tool, "after", "the new process's file sorts after the old one's");
        let tools: std::collections::HashSet<_> = all.iter().map(|e| e.tool.clone()).collect();
        assert!((0..200).all(|i| tools.contains(&format!("t{i}"))));
        assert!(std::fs::read_dir(state.path().join("audit")).unwrap().count() == 2, "one file per process start");
        let idle = AuditLog::open(state.path()).unwrap();
        drop(idle);
        assert_eq!(std::fs::read_dir(state.path().join("audit")).unwrap().count(), 2, "no file without an entry");
    }
}
