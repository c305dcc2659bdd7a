//! `toolrouter eval route` on the ToolBench development query sets: route
//! mode's narrowing keeps a query's relevant APIs among 300 tools (its own
//! and distractors) at least as well as plain BM25 top-20 in the same run,
//! and far better than random picks.

mod common;

use std::process::Command;

use serde_json::Value;

#[test]
fn route_mode_keeps_the_relevant_tools_at_least_as_well_as_bm25() {
    let Some(data) = common::toolbench_dir() else { return };
    let sets = data.join("queries/stabletoolbench_solvable");
    let out = Command::new(common::binary())
        .args(["eval", "route", "--tools", "300", "--k", "20", "--json", "--queries"])
        .args(["G1_instruction", "G1_category", "G2_instruction"].map(|s| sets.join(format!("{s}.json"))))
        .arg("--catalog")
        .arg(data.join("tools"))
        .env_remove("TOOLROUTER_CONFIG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    for set in report["sets"].as_array().unwrap().iter().chain([&report["overall"]]) {
        let (route, bm25, random) = (&set["route"], &set["bm25"], &set["random"]);
        let f = |v: &Value| v.as_f64().unwrap();
        assert!(set["queries"].as_u64().unwrap() > 100, "{set}");
        assert!(f(&route["recall"]) >= 0.90 && f(&route["all_kept"]) >= 0.80, "{set}");
        assert!(f(&route["recall"]) >= f(&bm25["recall"]) - 0.01, "route mode below BM25: {set}");
        assert!(f(&random["recall"]) < 0.2, "{set}");
    }
}
