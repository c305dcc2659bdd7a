//! The tool graph on disk: a snapshot plus an append-only run log.
//!
//! `<state>/graph/` holds:
//!
//! * `snapshot.bin`: `TRGRAPH1`, a format number, the SHA-256 of the body,
//!   and the body (postcard: parameters, counters, nodes, edges). Written to
//!   a temporary file, fsync'd, renamed into place; the one it replaces is
//!   kept as `snapshot.prev`;
//! * `log.jsonl`: a [`journal`] of the runs recorded since the snapshot,
//!   each appended and fsync'd before the run is acknowledged;
//! * `LOCK`: held by the one process allowed to write.
//!
//! Opening loads the snapshot (the previous one if the current is damaged,
//! an empty graph if both are) and replays the log records newer than it.
//! A torn last line (a crash mid-append) is cut off; a damaged line is
//! skipped; both are reported, never silently used. Taking a snapshot
//! empties the log: replay skips records the snapshot already holds, so a
//! crash between the two is harmless.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use petgraph::graph::NodeIndex;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Edge, Meta, Node, Params, RunRecord, ToolGraph};
use crate::catalog::Catalog;
use crate::journal::{self, Journal};

const MAGIC: &[u8; 8] = b"TRGRAPH1";
/// Version of the snapshot body.
pub const SNAPSHOT_FORMAT: u32 = 1;
const SNAPSHOT: &str = "snapshot.bin";
const PREVIOUS: &str = "snapshot.prev";
const LOG: &str = "log.jsonl";
const LOCK: &str = "LOCK";

/// Why the graph store cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    #[error("another toolrouter process is writing the graph in {0} (it holds LOCK)")]
    Locked(PathBuf),
}

/// What opening the store found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Recovery {
    /// `current`, `previous` (the current snapshot was damaged) or `none`.
    pub snapshot: String,
    /// Log records applied on top of the snapshot.
    pub replayed: usize,
    /// Log records skipped because the snapshot already holds them.
    pub already_in_snapshot: usize,
    /// Damaged log lines skipped (and a torn last line, if any).
    pub dropped: usize,
    /// Bytes of a torn last line cut off the log.
    pub truncated_bytes: u64,
    /// What went wrong, in words.
    pub problems: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct Body {
    params: Params,
    meta: Meta,
    nodes: Vec<Node>,
    edges: Vec<(u32, u32, Edge)>,
}

/// The directory of the graph in a state directory.
pub fn graph_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("graph")
}

/// Write access to a graph directory (one process at a time).
#[derive(Debug)]
pub struct GraphStore {
    dir: PathBuf,
    log: Journal,
    _lock: File,
}

impl GraphStore {
    /// Takes the write lock, loads the graph and replays the log, cutting
    /// off a torn last line. A damaged snapshot is replaced at once by one
    /// of what was recovered.
    pub fn open(
        dir: &Path,
        params: Params,
        catalog: Option<&Catalog>,
    ) -> Result<(GraphStore, ToolGraph, Recovery), StoreError> {
        let io = |context: String| move |source| StoreError::Io { context, source };
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK))
            .map_err(io(format!("opening {}", dir.join(LOCK).display())))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(StoreError::Locked(dir.to_path_buf())),
            Err(std::fs::TryLockError::Error(e)) => return Err(io(format!("locking {}", dir.display()))(e)),
        }
        let log_path = dir.join(LOG);
        let (log, records, report) =
            Journal::open::<RunRecord>(&log_path).map_err(io(format!("opening {}", log_path.display())))?;
        let (graph, mut recovery) = recover(dir, params, catalog, records, report);
        let mut store = GraphStore { dir: dir.to_path_buf(), log, _lock: lock };
        if recovery.snapshot != "current" && (graph.meta.seq > 0 || recovery.snapshot == "previous") {
            store.snapshot(&graph)?;
            recovery.problems.push("wrote a new snapshot of the recovered graph".into());
        }
        Ok((store, graph, recovery))
    }

    /// Appends `run` to the log and fsyncs it, then applies it: when this
    /// returns `Ok`, the run survives a crash. Returns its sequence number.
    pub fn record(
        &mut self,
        graph: &mut ToolGraph,
        run: &RunRecord,
        catalog: Option<&Catalog>,
    ) -> Result<u64, StoreError> {
        let seq = graph.meta.seq + 1;
        self.log.append(seq, run).map_err(|source| StoreError::Io {
            context: format!("appending to {}", self.log.path().display()),
            source,
        })?;
        graph.apply(run, catalog);
        graph.meta.seq = seq;
        Ok(seq)
    }

    /// Writes a snapshot of `graph` atomically, then empties the log.
    pub fn snapshot(&mut self, graph: &ToolGraph) -> Result<(), StoreError> {
        let io = |context: String| move |source| StoreError::Io { context, source };
        let body = postcard::to_stdvec(&to_body(graph)).expect("graphs serialize");
        let mut bytes = Vec::with_capacity(body.len() + 44);
        bytes.extend_from_slice(MAGIC);
        bytes.extend(SNAPSHOT_FORMAT.to_le_bytes());
        bytes.extend_from_slice(&Sha256::digest(&body));
        bytes.extend_from_slice(&body);
        let tmp = self.dir.join(format!("{SNAPSHOT}.tmp"));
        let mut f = File::create(&tmp).map_err(io(format!("creating {}", tmp.display())))?;
        f.write_all(&bytes).map_err(io(format!("writing {}", tmp.display())))?;
        f.sync_all().map_err(io(format!("syncing {}", tmp.display())))?;
        let current = self.dir.join(SNAPSHOT);
        if current.exists() {
            std::fs::rename(&current, self.dir.join(PREVIOUS)).map_err(io(format!("keeping {}", current.display())))?;
        }
        std::fs::rename(&tmp, &current).map_err(io(format!("renaming {}", tmp.display())))?;
        sync_dir(&self.dir).map_err(io(format!("syncing {}", self.dir.display())))?;
        self.log.clear().map_err(io(format!("emptying {}", self.log.path().display())))?;
        Ok(())
    }
}

/// Loads the graph without taking the lock or changing any file (for
/// readers while a writer may be running).
pub fn read(dir: &Path, params: Params, catalog: Option<&Catalog>) -> Result<(ToolGraph, Recovery), StoreError> {
    let log_path = dir.join(LOG);
    let (records, report) = journal::read::<RunRecord>(&log_path)
        .map_err(|source| StoreError::Io { context: format!("reading {}", log_path.display()), source })?;
    Ok(recover(dir, params, catalog, records, report))
}

/// The snapshot (or the previous one, or an empty graph) with the log's
/// newer records applied.
fn recover(
    dir: &Path,
    params: Params,
    catalog: Option<&Catalog>,
    records: Vec<(u64, RunRecord)>,
    log: journal::ReadReport,
) -> (ToolGraph, Recovery) {
    let mut recovery = Recovery { dropped: log.dropped, truncated_bytes: log.torn_bytes, ..Recovery::default() };
    let mut graph = None;
    for (name, label) in [(SNAPSHOT, "current"), (PREVIOUS, "previous")] {
        let path = dir.join(name);
        if !path.exists() {
            continue;
        }
        match read_snapshot(&path) {
            Ok(g) => {
                recovery.snapshot = label.into();
                graph = Some(g);
                break;
            }
            Err(why) => recovery.problems.push(format!("{} is damaged ({why}); not used", path.display())),
        }
    }
    let mut graph = graph.unwrap_or_else(|| {
        recovery.snapshot = "none".into();
        if !recovery.problems.is_empty() {
            recovery.problems.push(
                "no intact snapshot: the graph is rebuilt from the log alone; run `toolrouter graph build` again"
                    .into(),
            );
        }
        ToolGraph::new(params)
    });
    graph.set_params(params);
    for (seq, run) in records {
        if seq <= graph.meta.seq {
            recovery.already_in_snapshot += 1;
        } else {
            graph.apply(&run, catalog);
            graph.meta.seq = seq;
            recovery.replayed += 1;
        }
    }
    for problem in &recovery.problems {
        tracing::warn!("{problem}");
    }
    recovery.problems.extend(log.problems);
    (graph, recovery)
}

fn read_snapshot(path: &Path) -> Result<ToolGraph, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    if bytes.len() < 44 || &bytes[..8] != MAGIC {
        return Err("not a toolrouter graph snapshot".into());
    }
    let format = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if format != SNAPSHOT_FORMAT {
        return Err(format!("snapshot format {format}, this toolrouter reads {SNAPSHOT_FORMAT}"));
    }
    let body = &bytes[44..];
    if Sha256::digest(body).as_slice() != &bytes[12..44] {
        return Err("checksum mismatch".into());
    }
    let body: Body = postcard::from_bytes(body).map_err(|e| e.to_string())?;
    from_body(body)
}

fn to_body(graph: &ToolGraph) -> Body {
    let nodes = graph.graph.node_weights().cloned().collect();
    let edges = graph
        .graph
        .raw_edges()
        .iter()
        .map(|e| (e.source().index() as u32, e.target().index() as u32, e.weight.clone()))
        .collect();
    Body { params: graph.params, meta: graph.meta.clone(), nodes, edges }
}

fn from_body(body: Body) -> Result<ToolGraph, String> {
    let mut graph =
        ToolGraph { graph: Default::default(), index: Default::default(), params: body.params, meta: body.meta };
    for node in body.nodes {
        let key = node.key.clone();
        let i = graph.graph.add_node(node);
        if graph.index.insert(key, i).is_some() {
            return Err("a node appears twice".into());
        }
    }
    if !graph.index.contains_key(&super::NodeKey::Finish) {
        return Err("no Finish node".into());
    }
    let n = graph.graph.node_count() as u32;
    for (from, to, edge) in body.edges {
        if from >= n || to >= n {
            return Err("an edge points outside the graph".into());
        }
        graph.graph.add_edge(NodeIndex::new(from as usize), NodeIndex::new(to as usize), edge);
    }
    Ok(graph)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::super::{NodeKey, RunCall};
    use super::*;

    fn run(id: &str, function: &str, ok: bool) -> RunRecord {
        RunRecord {
            id: id.into(),
            task: "t".into(),
            calls: vec![RunCall { function: function.into(), ok }],
            success: ok,
            standalone: false,
        }
    }

    fn calls(g: &ToolGraph, function: &str) -> u64 {
        g.node(&NodeKey::Api(function.into())).map_or(0, |n| n.online_calls)
    }

    #[test]
    fn recorded_runs_survive_reopening_and_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, mut g, rec) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
        assert_eq!(rec.snapshot, "none");
        for i in 0..3 {
            assert_eq!(store.record(&mut g, &run(&i.to_string(), "a", true), None).unwrap(), i + 1);
        }
        drop(store);
        let (mut store, mut g, rec) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
        assert_eq!((rec.replayed, calls(&g, "a"), g.meta.seq), (3, 3, 3));
        store.snapshot(&g).unwrap();
        assert_eq!(std::fs::metadata(dir.path().join(LOG)).unwrap().len(), 0);
        store.record(&mut g, &run("4", "b", false), None).unwrap();
        drop(store);
        let (g, rec) = read(dir.path(), Params::default(), None).unwrap();
        assert_eq!((rec.snapshot.as_str(), rec.replayed), ("current", 1));
        assert_eq!((calls(&g, "a"), calls(&g, "b"), g.meta.online_runs), (3, 1, 4));
    }

    #[test]
    fn a_torn_tail_is_cut_and_damaged_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, mut g, _) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
        for i in 0..3 {
            store.record(&mut g, &run(&i.to_string(), "a", true), None).unwrap();
        }
        drop(store);
        let log = dir.path().join(LOG);
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // Damage the second line's run (checksum no longer matches) and tear a fourth line.
        let damaged = lines[1].replace("\"ok\":true", "\"ok\":false");
        std::fs::write(&log, format!("{}\n{}\n{}\n{{\"seq\":4,\"sum\":\"ab", lines[0], damaged, lines[2])).unwrap();
        let (_, rec) = read(dir.path(), Params::default(), None).unwrap();
        assert_eq!((rec.replayed, rec.dropped), (2, 2), "{rec:?}");
        assert!(rec.problems.iter().any(|p| p.contains("checksum")), "{rec:?}");
        assert!(rec.problems.iter().any(|p| p.contains("torn")), "{rec:?}");
        let len_before = std::fs::metadata(&log).unwrap().len();
        let (mut store, mut g, rec) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
        assert!(rec.truncated_bytes > 0);
        assert!(std::fs::metadata(&log).unwrap().len() < len_before);
        // New records append cleanly after the cut.
        store.record(&mut g, &run("5", "c", true), None).unwrap();
        drop(store);
        // Opening wrote a snapshot of what was recovered, which also cleared the damaged line.
        let (g, rec) = read(dir.path(), Params::default(), None).unwrap();
        assert_eq!((rec.snapshot.as_str(), rec.dropped, rec.replayed), ("current", 0, 1));
        assert_eq!((calls(&g, "a"), calls(&g, "c")), (2, 1));
    }

    #[test]
    fn a_damaged_snapshot_falls_back_to_the_previous_one() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, mut g, _) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
        store.record(&mut g, &run("1", "a", true), None).unwrap();
        store.snapshot(&g).unwrap();
        store.record(&mut g, &run("2", "b", true), None).unwrap();
        store.snapshot(&g).unwrap();
        drop(store);
        let current = dir.path().join(SNAPSHOT);
        let mut bytes = std::fs::read(&current).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&current, bytes).unwrap();
        let (_, g, rec) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
        assert_eq!(rec.snapshot, "previous");
        assert!(rec.problems.iter().any(|p| p.contains("damaged")), "{rec:?}");
        // The previous snapshot holds run 1 only; run 2's log record was emptied by the second snapshot.
        assert_eq!((calls(&g, "a"), calls(&g, "b")), (1, 0));
        std::fs::write(dir.path().join(PREVIOUS), b"junk").unwrap();
        let (g, rec) = read(dir.path(), Params::default(), None).unwrap();
        assert_eq!(rec.snapshot, "current", "the recovered graph was written back");
        assert_eq!(calls(&g, "a"), 1);
    }

    #[test]
    fn one_writer_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, _, _) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
        let err = GraphStore::open(dir.path(), Params::default(), None).unwrap_err();
        assert!(matches!(err, StoreError::Locked(_)), "{err}");
        assert!(read(dir.path(), Params::default(), None).is_ok(), "readers need no lock");
    }

    #[test]
    fn records_already_in_the_snapshot_are_not_applied_twice() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, mut g, _) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
        store.record(&mut g, &run("1", "a", true), None).unwrap();
        let log = std::fs::read(dir.path().join(LOG)).unwrap();
        store.snapshot(&g).unwrap();
        drop(store);
        // A crash between the snapshot's rename and the log's truncation leaves the old log.
        std::fs::write(dir.path().join(LOG), log).unwrap();
        let (g, rec) = read(dir.path(), Params::default(), None).unwrap();
        assert_eq!((rec.already_in_snapshot, rec.replayed, calls(&g, "a")), (1, 0, 1));
    }
}
