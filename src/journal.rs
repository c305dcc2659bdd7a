//! An append-only journal of records, one JSON line each, fsync'd.
//!
//! A line is `{"seq": n, "sum": "<16 hex of SHA-256 of the record>",
//! "record": {...}}`. [`Journal::append`] writes and fsyncs a line before
//! returning, so an acknowledged record survives a crash. Reading
//! ([`read`]) returns the intact records in order and reports what it
//! dropped: a torn last line (a crash mid-write) or a damaged line (a
//! checksum or JSON mismatch). A last line that is a whole, checksummed
//! record lacking only its newline is intact: it is kept, and counted as
//! [`ReadReport::unterminated`]. [`Journal::open`] also cuts a torn last
//! line off, or ends an unterminated one with its newline, so that new
//! lines start on a clean line. The graph's run log and the planner's
//! long-term memory are journals.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What reading a journal found besides its records.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct ReadReport {
    /// Damaged lines skipped, and a torn last line.
    pub(crate) dropped: usize,
    /// Bytes of a torn last line (cut off by [`Journal::open`]).
    pub(crate) torn_bytes: u64,
    /// Intact records kept although their line lacked its final newline
    /// (0 or 1: only the last line can; [`Journal::open`] adds the newline).
    pub(crate) unterminated: usize,
    pub(crate) problems: Vec<String>,
}

/// Records with their sequence numbers, in journal order.
pub(crate) type Records<T> = Vec<(u64, T)>;

/// An open journal, for appending.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    file: File,
}

#[derive(Serialize)]
struct LineOut<'a, T> {
    seq: u64,
    sum: String,
    record: &'a T,
}

#[derive(Deserialize)]
struct LineIn<T> {
    seq: u64,
    sum: String,
    record: T,
}

impl Journal {
    /// Opens (or creates) the journal at `path`, reading its intact records,
    /// cutting off a torn last line and ending an intact last record that
    /// lacks its newline with one (fsync'd before any append).
    pub(crate) fn open<T: Serialize + DeserializeOwned>(
        path: &Path,
    ) -> std::io::Result<(Journal, Records<T>, ReadReport)> {
        let (records, mut report, valid_len) = read_with_len(path)?;
        let mut file = OpenOptions::new().create(true).append(true).open(path)?;
        let len = file.metadata()?.len();
        if valid_len < len {
            file.set_len(valid_len)?;
            file.sync_all()?;
            report.torn_bytes = len - valid_len;
        }
        if report.unterminated > 0 {
            file.write_all(b"\n")?;
            file.sync_data()?;
        }
        Ok((Journal { path: path.to_path_buf(), file }, records, report))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends a record and fsyncs it; when this returns `Ok`, the record is durable.
    pub(crate) fn append<T: Serialize>(&mut self, seq: u64, record: &T) -> std::io::Result<()> {
        let line = LineOut { seq, sum: sum(record), record };
        let mut bytes = serde_json::to_vec(&line).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        self.file.write_all(&bytes)?;
        self.file.sync_data()
    }

    /// Appends records numbered from `first_seq` and fsyncs once at the end.
    pub(crate) fn append_all<T: Serialize>(&mut self, first_seq: u64, records: &[T]) -> std::io::Result<()> {
        let mut bytes = Vec::new();
        for (i, record) in records.iter().enumerate() {
            let line = LineOut { seq: first_seq + i as u64, sum: sum(record), record };
            serde_json::to_writer(&mut bytes, &line).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
        }
        self.file.write_all(&bytes)?;
        self.file.sync_data()
    }

    /// Renames the journal's file to `path` (replacing what is there) and
    /// fsyncs the directory; appends go on to the same file.
    pub(crate) fn move_to(&mut self, path: &Path) -> std::io::Result<()> {
        std::fs::rename(&self.path, path)?;
        File::open(path.parent().unwrap_or(Path::new(".")))?.sync_all()?;
        self.path = path.to_path_buf();
        Ok(())
    }

    /// Empties the journal (its records are safe elsewhere, e.g. in a snapshot).
    pub(crate) fn clear(&mut self) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.file.sync_all()
    }
}

/// Replaces the journal at `path` by `records` (numbered from 1): written
/// beside it, fsync'd, renamed into place, the directory fsync'd.
pub(crate) fn replace<T: Serialize + DeserializeOwned>(path: &Path, records: &[T]) -> std::io::Result<()> {
    let mut journal = write_beside(path, records)?;
    journal.move_to(path)
}

/// A new journal beside the one at `path` (`*.jsonl.new`) holding `records`
/// (numbered from 1), fsync'd; [`Journal::move_to`] puts it in place.
pub(crate) fn write_beside<T: Serialize>(path: &Path, records: &[T]) -> std::io::Result<Journal> {
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
    let aside = path.with_extension("jsonl.new");
    // A leftover of an interrupted rewrite: appending to it would duplicate records.
    match std::fs::remove_file(&aside) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let file = OpenOptions::new().create(true).append(true).open(&aside)?;
    let mut journal = Journal { path: aside, file };
    journal.append_all(1, records)?;
    Ok(journal)
}

/// Reads the intact records of the journal at `path` without changing it.
pub(crate) fn read<T: DeserializeOwned + Serialize>(path: &Path) -> std::io::Result<(Records<T>, ReadReport)> {
    let (records, report, _) = read_with_len(path)?;
    Ok((records, report))
}

/// The records, the report, and the length of the intact part of the file
/// (an unterminated intact last record included).
fn read_with_len<T: DeserializeOwned + Serialize>(path: &Path) -> std::io::Result<(Records<T>, ReadReport, u64)> {
    let mut text = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut text)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut report = ReadReport::default();
    let mut records = Vec::new();
    let mut offset = 0usize;
    let mut valid_len = 0u64;
    while offset < text.len() {
        let Some(end) = text[offset..].iter().position(|&b| b == b'\n').map(|i| offset + i) else {
            match parse::<T>(&text[offset..]) {
                Ok(line) => {
                    records.push((line.seq, line.record));
                    report.unterminated += 1;
                    report.problems.push(format!(
                        "the last record of {} lacks its final newline; it is intact and kept",
                        path.display()
                    ));
                    valid_len = text.len() as u64;
                }
                Err(_) => {
                    report.dropped += 1;
                    report
                        .problems
                        .push(format!("the last line of {} is torn (a crash mid-write); dropped", path.display()));
                }
            }
            break;
        };
        match parse::<T>(&text[offset..end]) {
            Ok(line) => records.push((line.seq, line.record)),
            Err(why) => {
                report.dropped += 1;
                report.problems.push(format!("a line of {} {why}; skipped", path.display()));
            }
        }
        offset = end + 1;
        valid_len = offset as u64;
    }
    for problem in &report.problems {
        tracing::warn!("{problem}");
    }
    Ok((records, report, valid_len))
}

/// One line (without its newline) as an intact record, or what is wrong with it.
fn parse<T: DeserializeOwned + Serialize>(line: &[u8]) -> Result<LineIn<T>, String> {
    match serde_json::from_slice::<LineIn<T>>(line) {
        Ok(line) if line.sum == sum(&line.record) => Ok(line),
        Ok(_) => Err("does not match its checksum".into()),
        Err(e) => Err(format!("is not a record ({e})")),
    }
}

/// The first 8 bytes of the SHA-256 of a record's JSON, in hex.
fn sum<T: Serialize>(record: &T) -> String {
    let bytes = serde_json::to_vec(record).unwrap_or_default();
    Sha256::digest(&bytes)[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let (mut j, records, _) = Journal::open::<String>(&path).unwrap();
        assert!(records.is_empty());
        for (i, r) in ["a", "b", "c"].iter().enumerate() {
            j.append(i as u64 + 1, r).unwrap();
        }
        drop(j);
        let text = std::fs::read_to_string(&path).unwrap();
        let damaged = text.replacen("\"b\"", "\"B\"", 1);
        std::fs::write(&path, format!("{damaged}{{\"seq\":4,\"su")).unwrap();
        let (records, report) = read::<String>(&path).unwrap();
        assert_eq!(records, [(1, "a".to_string()), (3, "c".to_string())]);
        assert_eq!(report.dropped, 2);
        let (mut j, _, report) = Journal::open::<String>(&path).unwrap();
        assert!(report.torn_bytes > 0);
        j.append(4, &"d".to_string()).unwrap();
        let (records, _) = read::<String>(&path).unwrap();
        assert_eq!(records.last(), Some(&(4, "d".to_string())));
        j.clear().unwrap();
        assert!(read::<String>(&path).unwrap().0.is_empty());
    }

    #[test]
    fn an_intact_last_record_without_its_newline_is_kept_and_ended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        let (mut j, _, _) = Journal::open::<String>(&path).unwrap();
        for (i, r) in ["a", "b", "c"].iter().enumerate() {
            j.append(i as u64 + 1, r).unwrap();
        }
        drop(j);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.strip_suffix('\n').unwrap()).unwrap();
        let (records, report) = read::<String>(&path).unwrap();
        assert_eq!(records.len(), 3, "{report:?}");
        assert_eq!((report.dropped, report.unterminated, report.torn_bytes), (0, 1, 0));
        let (mut j, records, report) = Journal::open::<String>(&path).unwrap();
        assert_eq!(records.last(), Some(&(3, "c".to_string())));
        assert_eq!((records.len(), report.dropped, report.unterminated, report.torn_bytes), (3, 0, 1, 0));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "open ended the last line");
        j.append(4, &"d".to_string()).unwrap();
        let (records, report) = read::<String>(&path).unwrap();
        let letters: Vec<&str> = records.iter().map(|(_, r)| r.as_str()).collect();
        assert_eq!(letters, ["a", "b", "c", "d"]);
        assert_eq!((report.dropped, report.unterminated), (0, 0));
    }
}
