//! The kept responses' journal, written by one thread.
//!
//! Group commit: the responses that arrive while a write is under way are
//! written together, with one fsync, and each is acknowledged only once
//! that fsync returned; a stored response waits for one fsync shared with
//! its neighbours, never behind each of theirs in turn. The writer also
//! holds each written response (so what is held is what is durable, in
//! the order it was written).
//!
//! When the journal is mostly stale it is rewritten beside the live one
//! (`responses.jsonl.new`) by another thread while appends go on; the
//! responses written meanwhile are appended to the new file too, which
//! then replaces the old (renamed, the directory fsync'd). Nothing waits
//! for the rewrite but that short catch-up.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

use super::held::{Held, Kept, locked};
use crate::journal::Journal;

/// Most responses written with one fsync.
const MAX_BATCH: usize = 256;
/// How often the writer looks at a rewrite under way while idle.
const REWRITE_POLL: Duration = Duration::from_millis(20);

/// One response to write, and who waits for it.
struct Job {
    kept: Arc<Kept>,
    /// Its journal line's length.
    bytes: usize,
    done: oneshot::Sender<bool>,
}

/// The writing thread's handle; dropping it lets the thread write what it
/// was given, finish a rewrite under way, and end.
pub(super) struct Writer {
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts the thread writing to `journal` (at `path`, holding `count`
    /// records) and holding what it wrote in `held`.
    pub(super) fn start(path: PathBuf, journal: Journal, count: usize, held: Arc<Mutex<Held>>) -> Writer {
        let (jobs, received) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("responses-journal".into())
            .spawn(move || run(&path, journal, count, &held, &received))
            .ok();
        if thread.is_none() {
            tracing::error!("the responses' journal writer could not start; responses are not kept");
        }
        Writer { jobs: Some(jobs), thread }
    }

    /// Writes `kept` (a `bytes`-long line) and holds it: `true` once durable.
    pub(super) async fn write(&self, kept: Arc<Kept>, bytes: usize) -> bool {
        let (done, wait) = oneshot::channel();
        let Some(jobs) = &self.jobs else { return false };
        if jobs.send(Job { kept, bytes, done }).is_err() {
            return false;
        }
        wait.await.unwrap_or(false)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The writer's loop: a batch of jobs, one fsync, their answers; a rewrite
/// started when the journal is mostly stale and put in place when done.
fn run(path: &Path, mut journal: Journal, mut count: usize, held: &Mutex<Held>, jobs: &Receiver<Job>) {
    let mut rewrite: Option<Rewrite> = None;
    loop {
        let first = match rewrite {
            Some(_) => match jobs.recv_timeout(REWRITE_POLL) {
                Ok(job) => Some(job),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            },
            None => match jobs.recv() {
                Ok(job) => Some(job),
                Err(_) => break,
            },
        };
        let mut batch: Vec<Job> = first.into_iter().collect();
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            let records: Vec<&Kept> = batch.iter().map(|job| job.kept.as_ref()).collect();
            let written = journal.append_all(0, &records);
            if let Err(e) = &written {
                tracing::error!(error = %e, "responses could not be kept in the state directory");
            }
            if written.is_ok() {
                count += batch.len();
                let mut held = locked(held);
                for job in &batch {
                    held.hold(job.kept.clone(), job.bytes);
                }
                match &mut rewrite {
                    Some(r) => r.since.extend(batch.iter().map(|job| job.kept.clone())),
                    None if count > 2 * held.len() + 64 => rewrite = Some(Rewrite::start(path, held.records())),
                    None => {}
                }
            }
            for job in batch {
                let _ = job.done.send(written.is_ok());
            }
        }
        if rewrite.as_ref().is_some_and(Rewrite::is_finished) {
            finish(rewrite.take(), path, &mut journal, &mut count);
        }
    }
    // Every job was answered; a rewrite under way is put in place.
    finish(rewrite, path, &mut journal, &mut count);
}

/// Puts a finished (or finishing) rewrite in place of `journal`.
fn finish(rewrite: Option<Rewrite>, path: &Path, journal: &mut Journal, count: &mut usize) {
    let Some(rewrite) = rewrite else { return };
    match rewrite.finish(path) {
        Ok((rewritten, n)) => (*journal, *count) = (rewritten, n),
        Err(e) => tracing::warn!(file = %path.display(), error = %e, "the kept responses could not be compacted"),
    }
}

/// A journal being rewritten beside the live one.
struct Rewrite {
    thread: JoinHandle<std::io::Result<Journal>>,
    /// Records in the rewrite.
    live: usize,
    /// Responses written to the live journal since it started.
    since: Vec<Arc<Kept>>,
}

impl Rewrite {
    /// Writes `records` beside the journal ([`crate::journal::write_beside`]) on another thread.
    fn start(path: &Path, records: Vec<Arc<Kept>>) -> Rewrite {
        let path = path.to_path_buf();
        let live = records.len();
        let thread = std::thread::spawn(move || {
            let refs: Vec<&Kept> = records.iter().map(AsRef::as_ref).collect();
            crate::journal::write_beside(&path, &refs)
        });
        Rewrite { thread, live, since: Vec::new() }
    }

    fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Appends what was written meanwhile and puts the rewrite in place:
    /// the new journal and its record count.
    fn finish(self, path: &Path) -> std::io::Result<(Journal, usize)> {
        let mut journal = self.thread.join().map_err(|_| std::io::Error::other("the rewrite's thread panicked"))??;
        if !self.since.is_empty() {
            let refs: Vec<&Kept> = self.since.iter().map(AsRef::as_ref).collect();
            journal.append_all(0, &refs)?;
        }
        journal.move_to(path)?;
        Ok((journal, self.live + self.since.len()))
    }
}
