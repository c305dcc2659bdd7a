//! The tool graph on disk: a snapshot plus an append-only run log.
//!
//! `<state>/graph/` holds:
//!
//! * `snapshot.bin`: `TRGRAPH1`, a format number, the sequence number of
//!   the last run folded in with a checksum of these (so it can be read
//!   when the body is damaged), the SHA-256 of the body, and the body
//!   (postcard: parameters, counters, nodes, edges). Written to a temporary
//!   file, fsync'd, renamed into place; the one it replaces is kept as
//!   `snapshot.prev`;
//! * `log.jsonl`: a [`journal`] of the runs recorded since the snapshot,
//!   each appended and fsync'd before the run is acknowledged;
//! * `stream.json`: with `[cluster]` on, the position in the replicas' run
//!   stream the snapshot has applied (`{"seq": n, "id": "..."}`, valid
//!   for the snapshot holding runs to `n`); runs from other replicas carry
//!   their stream id in the log, so the position survives a crash too;
//! * `recovery.json`: the [`Recovery`] of the last opening for writing that
//!   found damage, written before the damage is repaired (`graph stats`
//!   and `/metrics` show it);
//! * `LOCK`: held by the one process allowed to write.
//!
//! Opening loads the snapshot (the previous one if the current is damaged,
//! an empty graph if both are) and replays the log records newer than it.
//! Runs folded into a damaged snapshot that neither the older snapshot nor
//! the log holds are counted as lost. A torn last line (a crash
//! mid-append) is cut off; a damaged line is skipped; both are reported,
//! never silently used; an intact last record lacking only its newline is
//! kept. Taking a snapshot empties the log: replay skips records the
//! snapshot already holds, so a crash between the two is harmless.

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
/// Version of the snapshot layout written. 2 adds the checksummed sequence
/// number to the header; 1 (without it) is still read.
pub(crate) const SNAPSHOT_FORMAT: u32 = 2;
/// Header of format 1: magic, format, SHA-256 of the body.
const HEADER_V1: usize = 44;
/// Header of format 2: magic, format, seq, 8 bytes of the SHA-256 of
/// these 20, SHA-256 of the body.
const HEADER_V2: usize = 60;
const SNAPSHOT: &str = "snapshot.bin";
const PREVIOUS: &str = "snapshot.prev";
const LOG: &str = "log.jsonl";
const RECOVERY: &str = "recovery.json";
const POSITION: &str = "stream.json";
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Recovery {
    /// `current`, `previous` (the current snapshot was damaged) or `none`.
    pub snapshot: String,
    /// Damaged snapshots passed over.
    pub damaged_snapshots: usize,
    /// Runs folded into a damaged snapshot that neither the snapshot used
    /// nor the log holds: lost.
    pub lost_runs: u64,
    /// `lost_runs` is only a lower bound: a damaged snapshot's header was
    /// unreadable too.
    pub lost_runs_lower_bound: bool,
    /// Log records applied on top of the snapshot.
    pub replayed: usize,
    /// Log records skipped because the snapshot already holds them.
    pub already_in_snapshot: usize,
    /// Damaged log lines skipped (and a torn last line, if any).
    pub dropped: usize,
    /// Intact log records kept although their line lacked its final newline.
    pub unterminated: usize,
    /// Bytes of a torn last line cut off the log.
    pub truncated_bytes: u64,
    /// What went wrong, in words.
    pub problems: Vec<String>,
}

impl Recovery {
    /// Something was damaged, lost, dropped or repaired.
    pub(crate) fn found_damage(&self) -> bool {
        !self.problems.is_empty()
    }
}

/// The report of the last opening for writing that found damage
/// (`recovery.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LastRecovery {
    /// When the store was opened (Unix seconds).
    pub(crate) at_unix: u64,
    pub(crate) recovery: Recovery,
}

/// Why a snapshot cannot be used, and how many runs it held if its header
/// can still tell.
struct Damaged {
    why: String,
    seq: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct Body {
    params: Params,
    meta: Meta,
    nodes: Vec<Node>,
    edges: Vec<(u32, u32, Edge)>,
}

/// A run in the log: with its id in the replicas' run stream when another
/// replica recorded it (the checksum of a run without one is unchanged).
#[derive(Serialize, Deserialize)]
struct Logged {
    #[serde(flatten)]
    run: RunRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stream: Option<String>,
}

/// `stream.json`: the stream position a snapshot has applied.
#[derive(Serialize, Deserialize)]
struct Position {
    seq: u64,
    id: String,
}

/// The directory of the graph in a state directory.
pub fn graph_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("graph")
}

/// Write access to a graph directory (one process at a time).
#[derive(Debug)]
pub(crate) struct GraphStore {
    dir: PathBuf,
    log: Journal,
    /// The id of the last run applied from the replicas' run stream.
    position: Option<String>,
    _lock: File,
}

impl GraphStore {
    /// Takes the write lock, loads the graph and replays the log, cutting
    /// off a torn last line. A damaged snapshot is replaced at once by one
    /// of what was recovered. A report that found damage is first kept in
    /// `recovery.json` ([`last_recovery`]), since the repair erases the
    /// evidence.
    pub(crate) fn open(
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
            Journal::open::<Logged>(&log_path).map_err(io(format!("opening {}", log_path.display())))?;
        let (graph, mut recovery, position) = recover(dir, params, catalog, records, report);
        let mut store = GraphStore { dir: dir.to_path_buf(), log, position, _lock: lock };
        let damaged = recovery.found_damage();
        let rewrite = recovery.snapshot != "current" && (graph.meta.seq > 0 || recovery.damaged_snapshots > 0);
        if rewrite {
            recovery.problems.push("the recovered graph is written as the new snapshot".into());
        }
        if damaged {
            // Kept before the repair below erases the evidence.
            if let Err(e) = save_recovery(dir, &recovery) {
                tracing::warn!("the recovery report could not be kept in {}: {e}", dir.join(RECOVERY).display());
                recovery.problems.push(format!("this report could not be kept in {RECOVERY}: {e}"));
            }
        }
        if rewrite {
            store.snapshot(&graph)?;
        }
        Ok((store, graph, recovery))
    }

    /// Appends `run` to the log and fsyncs it, then applies it: when this
    /// returns `Ok`, the run survives a crash. Returns its sequence number.
    pub(crate) fn record(
        &mut self,
        graph: &mut ToolGraph,
        run: &RunRecord,
        catalog: Option<&Catalog>,
    ) -> Result<u64, StoreError> {
        let seq = graph.meta.seq + 1;
        let logged = Logged { run: run.clone(), stream: None };
        self.log.append(seq, &logged).map_err(|source| StoreError::Io {
            context: format!("appending to {}", self.log.path().display()),
            source,
        })?;
        graph.apply(run, catalog);
        graph.meta.seq = seq;
        Ok(seq)
    }

    /// Records runs other replicas recorded, each with its id in the run
    /// stream, with one fsync; the last id becomes [`GraphStore::position`].
    /// Returns the sequence number of the last.
    pub(crate) fn record_shared(
        &mut self,
        graph: &mut ToolGraph,
        runs: Vec<(String, RunRecord)>,
        catalog: Option<&Catalog>,
    ) -> Result<u64, StoreError> {
        let Some(last) = runs.last().map(|(id, _)| id.clone()) else { return Ok(graph.meta.seq) };
        let logged: Vec<Logged> = runs.into_iter().map(|(id, run)| Logged { run, stream: Some(id) }).collect();
        self.log.append_all(graph.meta.seq + 1, &logged).map_err(|source| StoreError::Io {
            context: format!("appending to {}", self.log.path().display()),
            source,
        })?;
        for entry in &logged {
            graph.apply(&entry.run, catalog);
            graph.meta.seq += 1;
        }
        self.position = Some(last);
        Ok(graph.meta.seq)
    }

    /// The id of the last run applied from the replicas' run stream (where
    /// following it resumes), if any.
    pub(crate) fn position(&self) -> Option<&str> {
        self.position.as_deref()
    }

    /// Writes a snapshot of `graph` atomically, then empties the log.
    pub(crate) fn snapshot(&mut self, graph: &ToolGraph) -> Result<(), StoreError> {
        let io = |context: String| move |source| StoreError::Io { context, source };
        let bytes = encode(graph);
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
        if let Some(id) = &self.position {
            let position = Position { seq: graph.meta.seq, id: id.clone() };
            write_atomically(&self.dir, POSITION, &serde_json::to_vec(&position).expect("positions serialize"))
                .map_err(io(format!("writing {}", self.dir.join(POSITION).display())))?;
        }
        self.log.clear().map_err(io(format!("emptying {}", self.log.path().display())))?;
        Ok(())
    }
}

/// Loads the graph without taking the lock or changing any file (for
/// readers while a writer may be running).
pub fn read(dir: &Path, params: Params, catalog: Option<&Catalog>) -> Result<(ToolGraph, Recovery), StoreError> {
    let log_path = dir.join(LOG);
    let (records, report) = journal::read::<Logged>(&log_path)
        .map_err(|source| StoreError::Io { context: format!("reading {}", log_path.display()), source })?;
    let (graph, recovery, _) = recover(dir, params, catalog, records, report);
    Ok((graph, recovery))
}

/// The last recovery report kept by a writer (`recovery.json`), if any.
pub(crate) fn last_recovery(dir: &Path) -> Result<Option<LastRecovery>, StoreError> {
    let path = dir.join(RECOVERY);
    let io = |source| StoreError::Io { context: format!("reading {}", path.display()), source };
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| io(std::io::Error::other(e))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(e)),
    }
}

/// Writes `recovery` to `recovery.json` atomically (temporary file, fsync, rename).
fn save_recovery(dir: &Path, recovery: &Recovery) -> std::io::Result<()> {
    let at_unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let last = LastRecovery { at_unix, recovery: recovery.clone() };
    let bytes = serde_json::to_vec_pretty(&last).map_err(std::io::Error::other)?;
    write_atomically(dir, RECOVERY, &bytes)
}

/// Writes `dir/name` atomically (temporary file, fsync, rename, fsync of `dir`).
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)
}

/// The snapshot (or the previous one, or an empty graph) with the log's
/// newer records applied, what was lost on the way, and the run stream's
/// position.
fn recover(
    dir: &Path,
    params: Params,
    catalog: Option<&Catalog>,
    records: Vec<(u64, Logged)>,
    log: journal::ReadReport,
) -> (ToolGraph, Recovery, Option<String>) {
    let mut recovery = Recovery {
        dropped: log.dropped,
        truncated_bytes: log.torn_bytes,
        unterminated: log.unterminated,
        ..Recovery::default()
    };
    let (graph, damaged) = load_snapshot(dir, &mut recovery);
    let mut graph = graph.unwrap_or_else(|| {
        recovery.snapshot = "none".into();
        if !damaged.is_empty() {
            recovery.problems.push(
                "no intact snapshot: the graph is rebuilt from the log alone; run `toolrouter graph build` again"
                    .into(),
            );
        }
        ToolGraph::new(params)
    });
    graph.set_params(params);
    count_lost(&mut recovery, &damaged, graph.meta.seq, &records);
    // The side file speaks for the current snapshot only; the log's stream
    // ids (in stream order) come after it.
    let mut position = (recovery.snapshot == "current")
        .then(|| read_position(dir))
        .flatten()
        .filter(|p| p.seq == graph.meta.seq)
        .map(|p| p.id);
    for (seq, Logged { run, stream }) in records {
        if stream.is_some() {
            position = stream;
        }
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
    (graph, recovery, position)
}

/// `stream.json`, if it is there and readable.
fn read_position(dir: &Path) -> Option<Position> {
    let bytes = std::fs::read(dir.join(POSITION)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The current snapshot, else the previous one, with the sequence numbers
/// the damaged ones passed over declare (`None`: unreadable).
fn load_snapshot(dir: &Path, recovery: &mut Recovery) -> (Option<ToolGraph>, Vec<Option<u64>>) {
    let mut damaged = Vec::new();
    for (name, label) in [(SNAPSHOT, "current"), (PREVIOUS, "previous")] {
        let path = dir.join(name);
        if !path.exists() {
            continue;
        }
        match read_snapshot(&path) {
            Ok(g) => {
                recovery.snapshot = label.into();
                return (Some(g), damaged);
            }
            Err(Damaged { why, seq }) => {
                let held = seq.map_or("the runs it held are unknown".to_string(), |n| format!("it held runs to {n}"));
                recovery.problems.push(format!("{} is damaged ({why}; {held}); not used", path.display()));
                recovery.damaged_snapshots += 1;
                damaged.push(seq);
            }
        }
    }
    (None, damaged)
}

/// Counts the runs folded into the damaged snapshots passed over that
/// neither the snapshot used (holding runs to `base`) nor the log holds.
fn count_lost<T>(recovery: &mut Recovery, damaged: &[Option<u64>], base: u64, records: &[(u64, T)]) {
    if damaged.is_empty() {
        return;
    }
    let unreadable = damaged.contains(&None);
    let mut high = damaged.iter().flatten().copied().max().unwrap_or(base);
    if unreadable {
        // The log is emptied at each snapshot: the runs before its first
        // newer record were folded into one.
        if let Some(first) = records.iter().map(|(seq, _)| *seq).find(|&seq| seq > base) {
            high = high.max(first - 1);
        }
    }
    let in_log = records.iter().filter(|(seq, _)| *seq > base && *seq <= high).count() as u64;
    let lost = high.saturating_sub(base).saturating_sub(in_log);
    recovery.lost_runs = lost;
    recovery.lost_runs_lower_bound = unreadable;
    recovery.problems.push(match (unreadable, lost) {
        (false, 0) => "no run is lost: the log still holds the runs folded into the damaged snapshot".into(),
        (false, n) => {
            format!("{n} runs folded into the damaged snapshot are lost (no other snapshot or log holds them)")
        }
        (true, 0) => {
            "an unknown number of runs folded into the damaged snapshot are lost (its header is unreadable)".into()
        }
        (true, n) => format!("at least {n} runs folded into the damaged snapshot are lost (its header is unreadable)"),
    });
}

/// A snapshot file of `graph`, in the current format.
fn encode(graph: &ToolGraph) -> Vec<u8> {
    let body = postcard::to_stdvec(&to_body(graph)).expect("graphs serialize");
    let mut bytes = Vec::with_capacity(HEADER_V2 + body.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend(SNAPSHOT_FORMAT.to_le_bytes());
    bytes.extend(graph.meta.seq.to_le_bytes());
    let header_sum = Sha256::digest(&bytes);
    bytes.extend_from_slice(&header_sum[..8]);
    bytes.extend_from_slice(&Sha256::digest(&body));
    bytes.extend_from_slice(&body);
    bytes
}

fn read_snapshot(path: &Path) -> Result<ToolGraph, Damaged> {
    let damaged = |why: String, seq| Damaged { why, seq };
    let bytes = std::fs::read(path).map_err(|e| damaged(e.to_string(), None))?;
    if bytes.len() < 12 || &bytes[..8] != MAGIC {
        return Err(damaged("not a toolrouter graph snapshot".into(), None));
    }
    let (header, seq) = match u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) {
        1 => (HEADER_V1, None),
        2 => (HEADER_V2, header_seq(&bytes)),
        format => {
            return Err(damaged(
                format!("snapshot format {format}, this toolrouter reads 1 and {SNAPSHOT_FORMAT}"),
                None,
            ));
        }
    };
    if bytes.len() < header {
        return Err(damaged("truncated".into(), seq));
    }
    let body = &bytes[header..];
    if Sha256::digest(body).as_slice() != &bytes[header - 32..header] {
        return Err(damaged("checksum mismatch".into(), seq));
    }
    let body: Body = postcard::from_bytes(body).map_err(|e| damaged(e.to_string(), seq))?;
    from_body(body).map_err(|why| damaged(why, seq))
}

/// The sequence number in a format-2 header, if its checksum holds.
fn header_seq(bytes: &[u8]) -> Option<u64> {
    let (fields, sum) = (bytes.get(..20)?, bytes.get(20..28)?);
    (Sha256::digest(fields)[..8] == *sum).then(|| u64::from_le_bytes(fields[12..20].try_into().expect("8 bytes")))
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
mod tests;
