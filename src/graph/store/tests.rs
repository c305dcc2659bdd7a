//! The graph store's recovery cases, with exact counts.
use super::super::{NodeKey, RunCall};
use super::*;

fn run(id: &str, function: &str, ok: bool) -> RunRecord {
    RunRecord {
        id: id.into(),
        task: "t".into(),
        calls: vec![RunCall { function: function.into(), ok }],
        success: ok,
        standalone: false,
        at_unix_ms: 0,
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

/// A store that logged `n` successful runs of `a` (no snapshot yet), closed.
fn logged_runs(n: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut g, _) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
    for i in 0..n {
        store.record(&mut g, &run(&i.to_string(), "a", true), None).unwrap();
    }
    dir
}

#[test]
fn a_torn_tail_is_cut_and_damaged_lines_are_skipped() {
    let dir = logged_runs(3);
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
    assert_eq!((rec.damaged_snapshots, rec.lost_runs, rec.lost_runs_lower_bound), (1, 1, false), "{rec:?}");
    // The previous snapshot holds run 1 only; run 2's log record was emptied by the second snapshot.
    assert_eq!((calls(&g, "a"), calls(&g, "b")), (1, 0));
    std::fs::write(dir.path().join(PREVIOUS), b"junk").unwrap();
    let (g, rec) = read(dir.path(), Params::default(), None).unwrap();
    assert_eq!(rec.snapshot, "current", "the recovered graph was written back");
    assert_eq!(calls(&g, "a"), 1);
}

/// Flips the last byte of a file (in a snapshot: its body).
fn damage(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(path, bytes).unwrap();
}

/// Records runs `from..to` (calling `function`) and takes a snapshot.
fn fold(store: &mut GraphStore, g: &mut ToolGraph, runs: std::ops::Range<u64>, function: &str) {
    for i in runs {
        store.record(g, &run(&i.to_string(), function, true), None).unwrap();
    }
    store.snapshot(g).unwrap();
}

#[test]
fn runs_folded_into_a_damaged_snapshot_are_counted_as_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut g, _) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
    fold(&mut store, &mut g, 0..10, "a");
    drop(store);
    damage(&dir.path().join(SNAPSHOT));
    let (_, g, rec) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
    assert_eq!((rec.snapshot.as_str(), rec.damaged_snapshots, rec.replayed), ("none", 1, 0), "{rec:?}");
    assert_eq!((rec.lost_runs, rec.lost_runs_lower_bound, calls(&g, "a")), (10, false, 0), "{rec:?}");
    assert!(rec.problems.iter().any(|p| p.starts_with("10 runs folded into the damaged snapshot are lost")));
    // The writer kept its report; a clean opening later leaves it there.
    let kept = last_recovery(dir.path()).unwrap().expect("recovery.json");
    assert_eq!(kept.recovery, rec);
    assert!(kept.at_unix > 0);
    let (_, _, rec) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
    assert_eq!((rec.snapshot.as_str(), rec.found_damage()), ("current", false), "{rec:?}");
    assert_eq!(last_recovery(dir.path()).unwrap().unwrap().recovery.lost_runs, 10);
}

#[test]
fn falling_back_to_the_previous_snapshot_loses_exactly_the_newer_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut g, _) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
    fold(&mut store, &mut g, 0..3, "a");
    fold(&mut store, &mut g, 3..13, "b");
    store.record(&mut g, &run("13", "c", true), None).unwrap();
    drop(store);
    damage(&dir.path().join(SNAPSHOT));
    let (g, rec) = read(dir.path(), Params::default(), None).unwrap();
    assert_eq!((rec.snapshot.as_str(), rec.lost_runs, rec.replayed), ("previous", 10, 1), "{rec:?}");
    assert_eq!((calls(&g, "a"), calls(&g, "b"), calls(&g, "c")), (3, 0, 1));
    // A snapshot whose header is unreadable too: the log's first record (14) tells at least 13 were folded.
    std::fs::write(dir.path().join(SNAPSHOT), b"junk").unwrap();
    std::fs::write(dir.path().join(PREVIOUS), b"junk").unwrap();
    let (_, rec) = read(dir.path(), Params::default(), None).unwrap();
    assert_eq!((rec.snapshot.as_str(), rec.damaged_snapshots), ("none", 2), "{rec:?}");
    assert_eq!((rec.lost_runs, rec.lost_runs_lower_bound, rec.replayed), (13, true, 1), "{rec:?}");
}

#[test]
fn runs_the_log_still_holds_are_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut g, _) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
    fold(&mut store, &mut g, 0..2, "a");
    for i in 2..5 {
        store.record(&mut g, &run(&i.to_string(), "b", true), None).unwrap();
    }
    let log = std::fs::read(dir.path().join(LOG)).unwrap();
    store.snapshot(&g).unwrap();
    drop(store);
    // A crash before the log was emptied, then damage to the newest snapshot.
    std::fs::write(dir.path().join(LOG), log).unwrap();
    damage(&dir.path().join(SNAPSHOT));
    let (g, rec) = read(dir.path(), Params::default(), None).unwrap();
    assert_eq!((rec.snapshot.as_str(), rec.replayed, rec.lost_runs), ("previous", 3, 0), "{rec:?}");
    assert_eq!((calls(&g, "a"), calls(&g, "b")), (2, 3));
}

#[test]
fn a_last_record_without_its_newline_is_replayed_not_dropped() {
    let dir = logged_runs(3);
    let log = dir.path().join(LOG);
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::write(&log, text.strip_suffix('\n').unwrap()).unwrap();
    let (g, rec) = read(dir.path(), Params::default(), None).unwrap();
    assert_eq!((rec.replayed, rec.dropped, rec.unterminated, calls(&g, "a")), (3, 0, 1, 3), "{rec:?}");
    let (mut store, mut g, rec) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
    assert_eq!((rec.replayed, rec.dropped, rec.unterminated, rec.truncated_bytes), (3, 0, 1, 0), "{rec:?}");
    assert_eq!(last_recovery(dir.path()).unwrap().unwrap().recovery.unterminated, 1);
    store.record(&mut g, &run("3", "a", true), None).unwrap();
    drop(store);
    // Opening wrote a snapshot of the 3 recovered runs; run 4 starts a clean line of the log.
    let (g, rec) = read(dir.path(), Params::default(), None).unwrap();
    assert_eq!((rec.snapshot.as_str(), rec.replayed, rec.dropped, rec.unterminated), ("current", 1, 0, 0), "{rec:?}");
    assert_eq!((calls(&g, "a"), g.meta.seq), (4, 4));
}

#[test]
fn format_1_snapshots_are_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = ToolGraph::new(Params::default());
    g.apply(&run("1", "a", true), None);
    g.meta.seq = 1;
    let body = postcard::to_stdvec(&to_body(&g)).unwrap();
    let mut bytes = MAGIC.to_vec();
    bytes.extend(1u32.to_le_bytes());
    bytes.extend_from_slice(&Sha256::digest(&body));
    bytes.extend_from_slice(&body);
    std::fs::write(dir.path().join(SNAPSHOT), bytes).unwrap();
    let (g, rec) = read(dir.path(), Params::default(), None).unwrap();
    assert_eq!((rec.snapshot.as_str(), g.meta.seq, calls(&g, "a")), ("current", 1, 1), "{rec:?}");
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

/// The run stream's position survives reopening: from the log's stream
/// ids, then from `stream.json` once a snapshot has emptied the log; runs
/// recorded here (no stream id) leave it as it was.
#[test]
fn the_stream_position_survives_reopening_and_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut g, _) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
    assert_eq!(store.position(), None);
    let shared = vec![("1-0".to_string(), run("x", "a", true)), ("2-0".to_string(), run("y", "b", true))];
    assert_eq!(store.record_shared(&mut g, shared, None).unwrap(), 2);
    store.record(&mut g, &run("z", "a", false), None).unwrap();
    drop(store);
    let (mut store, g, rec) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
    assert_eq!((store.position(), rec.replayed, calls(&g, "a")), (Some("2-0"), 3, 2));
    store.snapshot(&g).unwrap();
    drop(store);
    let (mut store, mut g, _) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
    assert_eq!(store.position(), Some("2-0"), "from stream.json");
    store.record_shared(&mut g, vec![("3-0".to_string(), run("w", "c", true))], None).unwrap();
    drop(store);
    let (store, g, _) = GraphStore::open(dir.path(), Params::default(), None).unwrap();
    assert_eq!((store.position(), g.meta.seq, calls(&g, "c")), (Some("3-0"), 4, 1));
}
