//! Loads the real dataset when `TOOLBENCH_DIR` points at it (e.g.
//! `/work/shared/datasets/toolbench`); skipped, with a message, when unset.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::trajectory::{Finish, Format, Trajectory, load_path};

fn toolbench_dir() -> Option<PathBuf> {
    match std::env::var_os("TOOLBENCH_DIR") {
        Some(d) if !d.is_empty() => {
            let dir = PathBuf::from(d);
            // A TOOLBENCH_DIR that is set but wrong is a failure, not a skip.
            assert!(dir.join("trajectories").is_dir(), "TOOLBENCH_DIR={} has no trajectories/", dir.display());
            Some(dir)
        }
        _ => {
            eprintln!("TOOLBENCH_DIR not set; skipping");
            None
        }
    }
}

fn under<'a>(all: &'a [Trajectory], dir: &str) -> Vec<&'a Trajectory> {
    all.iter().filter(|t| t.source.contains(dir)).collect()
}

fn file_of(t: &Trajectory) -> &str {
    t.source.rsplit_once('#').map_or(t.source.as_str(), |(f, _)| f)
}

/// One line of statistics per group, printed for the record (`--nocapture`).
fn print_stats(label: &str, ts: &[&Trajectory]) {
    let files: std::collections::BTreeSet<&str> = ts.iter().map(|t| file_of(t)).collect();
    let calls: usize = ts.iter().map(|t| t.calls.len()).sum();
    let abandoned: usize = ts.iter().map(|t| t.abandoned.len()).sum();
    let failed: usize = ts.iter().flat_map(|t| &t.calls).filter(|c| c.failed == Some(true)).count();
    let unknown: usize = ts.iter().flat_map(|t| &t.calls).filter(|c| c.failed.is_none()).count();
    let solved = ts.iter().filter(|t| t.solved == Some(true)).count();
    let labelled = ts.iter().filter(|t| t.solved.is_some()).count();
    let answer = ts.iter().filter(|t| t.finish == Some(Finish::GiveAnswer)).count();
    let give_up = ts.iter().filter(|t| t.finish == Some(Finish::GiveUp)).count();
    eprintln!(
        "{label}: files {}, trajectories {}, calls {calls} (failed {failed}, unknown {unknown}), abandoned {abandoned}, \
         solved {solved}/{labelled}, give_answer {answer}, give_up {give_up}, no finish {}",
        files.len(),
        ts.len(),
        ts.len() - answer - give_up
    );
}

#[test]
fn loads_the_real_trajectories() {
    let Some(root) = toolbench_dir() else { return };
    let (all, report) = load_path(&root.join("trajectories"));
    assert_eq!(report.trajectories, all.len());

    // StepTool runs: README says 2,531 trajectories, 1,394 majority "Solved".
    // (The StableToolBench pass_rate_results/*.json hold the same record
    // format, so they load too; they are outside steptool_eval/ and not counted.)
    let steptool = under(&all, "/steptool_eval/");
    assert!(steptool.iter().all(|t| t.format == Format::StepToolEval));
    assert_eq!(steptool.len(), 2531);
    assert_eq!(steptool.iter().filter(|t| t.solved == Some(true)).count(), 1394);

    let dfs = under(&all, "/toolbench_dfs_examples/");
    assert_eq!(dfs.len(), 15);
    assert!(dfs.iter().all(|t| t.format == Format::ToolBenchAnswer));
    assert_eq!(dfs.iter().filter(|t| t.solved == Some(true)).count(), 9);
    // Every won tree has its final path ending in give_answer.
    assert!(dfs.iter().filter(|t| t.solved == Some(true)).all(|t| t.finish == Some(Finish::GiveAnswer)));

    let cot = under(&all, "/toolbench_eval_gpt35_cot/");
    assert_eq!(cot.len(), 300);
    assert!(cot.iter().all(|t| t.format == Format::Converted));
    assert!(cot.iter().all(|t| !t.calls.is_empty() || t.finish_call.is_some()));

    let sft = under(&all, "/steptool_sft_examples/");
    assert_eq!(sft.len(), 10);
    assert!(sft.iter().all(|t| t.format == Format::SftConversations && !t.offered.is_empty()));

    // Names are kept as recorded. The data has exactly 13 calls recorded with
    // an empty name, all in the baseline-rft_dfs StepTool run: the model wrote
    // `Action Input:` text where the name belongs, the environment logged
    // `'name': ''` and answered "Tool input parse error". Every other call has a name.
    let mut empty = Vec::new();
    for t in &all {
        for c in t.calls.iter().chain(&t.abandoned) {
            if c.name.is_empty() {
                empty.push((t.source.clone(), c.clone()));
            }
        }
        assert!(!t.query.is_empty(), "empty query in {}", t.source);
    }
    assert_eq!(empty.len(), 13, "{empty:?}");
    for (source, c) in &empty {
        assert!(source.contains("/steptool_eval/baseline-rft_dfs/"), "{source}");
        assert!(c.response.as_deref().is_some_and(|r| r.contains("Tool input parse error")), "{source}");
    }

    // Only evaluator outputs that are not trajectories are skipped: CSV files
    // and preference results; no record is malformed.
    for s in &report.skipped {
        assert!(s.location.ends_with(".csv") || s.location.contains("preference_results"), "unexpected skip: {s:?}");
    }

    let mut groups: BTreeMap<String, Vec<&Trajectory>> = BTreeMap::new();
    for t in &all {
        let rel = file_of(t).split("/trajectories/").nth(1).unwrap_or("");
        let group = rel.split('/').take(if rel.starts_with("stabletoolbench") { 2 } else { 1 }).collect::<Vec<_>>();
        groups.entry(format!("{} [{}]", group.join("/"), t.format)).or_default().push(t);
    }
    for (label, ts) in &groups {
        print_stats(label, ts);
    }
    eprintln!("files {}, by format {:?}", report.files, report.files_by_format);
    for s in &report.skipped {
        eprintln!("skipped {}: {}", s.location, s.reason);
    }
}

#[test]
fn the_rest_of_the_dataset_holds_no_trajectories() {
    let Some(root) = toolbench_dir() else { return };
    let mut files = 0;
    for sub in ["queries", "retrieval", "cache", "tools", "tools_dropped_compact.jsonl"] {
        let (all, report) = load_path(&root.join(sub));
        assert!(all.is_empty(), "{sub}: unexpected trajectories {:?}", all.first().map(|t| &t.source));
        assert_eq!(report.skipped.len(), report.files, "{sub}: every file skipped with a reason");
        files += report.files;
    }
    eprintln!("{files} non-trajectory files skipped");
}
