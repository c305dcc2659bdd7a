//! `toolrouter eval route` on the ToolBench development query sets: route
//! mode's narrowing keeps a query's relevant APIs among 300 tools (its own
//! and distractors) better than plain BM25 top-20 in the same run (higher
//! recall, all-kept share at least as high), on a
//! list seen for the first time (lexical) and on an embedded one, and far
//! better than random picks.

use crate::common;

use std::process::Command;

use serde_json::Value;

#[test]
fn route_mode_keeps_the_relevant_tools_better_than_bm25() {
    let Some(data) = common::toolbench_dir() else { return };
    let embedded = common::model_available();
    let sets = data.join("queries/stabletoolbench_solvable");
    let out = Command::new(common::binary())
        .args(["eval", "route", "--tools", "300", "--k", "20", "--json", "--queries"])
        .args(["G1_instruction", "G1_category", "G2_instruction"].map(|s| sets.join(format!("{s}.json"))))
        .arg("--catalog")
        .arg(data.join("tools"))
        .args((!embedded).then_some("--lexical"))
        .env_remove("TOOLROUTER_CONFIG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    for set in report["sets"].as_array().unwrap().iter().chain([&report["overall"]]) {
        let (bm25, random) = (&set["bm25"], &set["random"]);
        let f = |v: &Value| v.as_f64().unwrap();
        assert!(set["queries"].as_u64().unwrap() > 100, "{set}");
        let mut routes = vec![&set["route_first_seen"]];
        if embedded {
            routes.push(&set["route"]);
        }
        for route in routes {
            assert!(f(&route["recall"]) >= 0.90 && f(&route["all_kept"]) >= 0.80, "{set}");
            assert!(f(&route["recall"]) > f(&bm25["recall"]), "route mode not above BM25: {set}");
            assert!(f(&route["all_kept"]) >= f(&bm25["all_kept"]), "route mode below BM25: {set}");
        }
        assert!(f(&random["recall"]) < 0.2, "{set}");
    }
}
