//! The tool graph and the planner on the command line, over the real
//! ToolBench catalog and trajectories (lexical retrieval: no model needed).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

struct Env {
    state: tempfile::TempDir,
    data: PathBuf,
}

impl Env {
    fn new() -> Option<Env> {
        Some(Env { state: tempfile::tempdir().unwrap(), data: common::toolbench_dir()? })
    }

    /// Runs `toolrouter <args> --catalog <tools> --catalog <dropped tools>`.
    fn run(&self, args: &[&str], state: &Path) -> Output {
        let out = Command::new(common::binary())
            .args(args)
            .arg("--catalog")
            .arg(self.data.join("tools"))
            .arg("--catalog")
            .arg(self.data.join("tools_dropped_compact.jsonl"))
            .env_remove("TOOLROUTER_CONFIG")
            .env("TOOLROUTER_STATE_DIR", state)
            .env("TOOLROUTER_RETRIEVAL_MODE", "lexical")
            .output()
            .expect("the binary runs");
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out
    }

    fn json(&self, args: &[&str], state: &Path) -> Value {
        serde_json::from_slice(&self.run(args, state).stdout).expect("JSON output")
    }

    fn build_graph(&self) {
        let trajectories = self.data.join("trajectories");
        self.run(&["graph", "build", "--trajectories", trajectories.to_str().unwrap()], self.state.path());
    }
}

#[test]
fn a_graph_from_every_development_trajectory() {
    let Some(env) = Env::new() else { return };
    env.build_graph();
    let stats = env.json(&["graph", "stats", "--json"], env.state.path());
    let s = &stats["stats"];
    assert!(s["nodes"].as_u64().unwrap() > 900, "{s}");
    assert!(s["edges"].as_u64().unwrap() > 800, "{s}");
    assert_eq!(s["online_only_edges"], 0);
    let build = &s["build"];
    let (resolved, calls) = (build["resolved_calls"].as_f64().unwrap(), build["calls"].as_f64().unwrap());
    // Without the query files' api_lists as a catalog source (docs/catalog.md).
    assert!(resolved / calls > 0.7, "{build}");
    assert_eq!(stats["recovery"]["dropped"], 0);

    // ColorMe runs go random set -> specific set (24 times) more than to Finish.
    let n = env.json(&["graph", "neighbors", "randomcolorset_for_colorme", "--json"], env.state.path());
    let first = &n["successors"][0];
    assert_eq!(first["key"]["Api"], "specificcolorset_for_colorme", "{n}");
    assert!(first["w"].as_f64().unwrap() > 0.5 && first["count"].as_u64().unwrap() >= 20, "{n}");
}

#[test]
fn plans_show_the_graph_weights_they_followed() {
    let Some(env) = Env::new() else { return };
    env.build_graph();
    let task = "Give me a random color set for my website";
    let plan = |state: &Path| env.json(&["plan", task, "--json"], state);
    let guided = plan(env.state.path());
    let steps = guided["steps"].as_array().unwrap();
    assert_eq!(steps[0]["function"], "randomcolorset_for_colorme", "{guided}");
    assert_eq!(steps[1]["function"], "specificcolorset_for_colorme", "{guided}");
    assert!(steps[1]["w"].as_f64().unwrap() > 0.5, "the step follows the learned edge: {guided}");
    assert!(steps.iter().all(|s| !s["reason"].as_str().unwrap().is_empty()));
    assert!(!guided["trace"].as_array().unwrap().is_empty());

    let without = tempfile::tempdir().unwrap();
    let plain = plan(without.path());
    assert!(plain["steps"].as_array().unwrap().iter().all(|s| s["w"] == 0.0), "no graph, no weights: {plain}");
}

#[test]
fn eval_plan_scores_every_variant_leaving_each_set_out() {
    let Some(env) = Env::new() else { return };
    let queries = env.data.join("queries/stabletoolbench_solvable");
    let mut files = Vec::new();
    for set in ["G1_instruction", "G1_category"] {
        let all: Vec<Value> =
            serde_json::from_slice(&std::fs::read(queries.join(format!("{set}.json"))).unwrap()).unwrap();
        let path = env.state.path().join(format!("{set}.json"));
        std::fs::write(&path, serde_json::to_vec(&all[..10]).unwrap()).unwrap();
        files.push(path.to_str().unwrap().to_string());
    }
    let trajectories = env.data.join("trajectories");
    let mut args = vec!["eval", "plan", "--json", "--trajectories", trajectories.to_str().unwrap(), "--queries"];
    args.extend(files.iter().map(String::as_str));
    let report = env.json(&args, env.state.path());
    assert_eq!(report["split"], "sets");
    let reports = report["reports"].as_array().unwrap();
    // DFS + graph + memory, DFS + graph, DFS alone, greedy; retrieval top 1, 2, 3.
    assert_eq!(reports.len(), 7, "{report}");
    for r in reports {
        let sets = r["sets"].as_array().unwrap();
        assert_eq!(sets.len(), 2);
        for s in sets.iter().chain([&r["overall"]]) {
            let m = |k: &str| s[k].as_f64().unwrap();
            for k in ["precision", "recall", "f1", "candidate_recall"] {
                assert!((0.0..=1.0).contains(&m(k)), "{k} of {}: {s}", r["name"]);
            }
            // The plan is drawn from the candidates considered.
            assert!(m("candidate_recall") >= m("recall") - 1e-9, "{}: {s}", r["name"]);
            assert!(m("mean_steps") >= 1.0, "{}: {s}", r["name"]);
        }
        if r["variant"]["kind"] == "retrieval" {
            let n = r["variant"]["n"].as_f64().unwrap();
            assert!((r["overall"]["mean_steps"].as_f64().unwrap() - n).abs() < 1e-9, "{r}");
        }
    }
    assert_eq!(reports[0]["overall"]["queries"], 20);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_command_line_plans_what_the_server_plans() {
    let Some(env) = Env::new() else { return };
    env.build_graph();
    // A request whose plan has arguments to complete, with a non-default
    // `[args]` (the server's engine applies it; so must the command line).
    let task = "Give me a random color set for my website, then the details of color 00ff00";
    let out = Command::new(common::binary())
        .args(["plan", task, "--json", "--catalog"])
        .arg(env.data.join("tools"))
        .arg("--catalog")
        .arg(env.data.join("tools_dropped_compact.jsonl"))
        .env_remove("TOOLROUTER_CONFIG")
        .env("TOOLROUTER_STATE_DIR", env.state.path())
        .env("TOOLROUTER_RETRIEVAL_MODE", "lexical")
        .env("TOOLROUTER_ARGS_COERCE", "false")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();

    let mut config = toolrouter::config::Config::default();
    config.state.dir = env.state.path().to_path_buf();
    config.catalog.paths = vec![env.data.join("tools"), env.data.join("tools_dropped_compact.jsonl")];
    config.retrieval.mode = toolrouter::config::SearchMode::Lexical;
    config.args.coerce = false;
    let engine = toolrouter::engine::Engine::open(&config).unwrap();
    // Through JSON text, as the command line prints it (f32 fields round alike).
    let server: Value =
        serde_json::from_str(&serde_json::to_string(&engine.plan(task, None, None).await.unwrap()).unwrap()).unwrap();
    assert!(!server["steps"].as_array().unwrap().is_empty(), "{server}");
    assert_eq!(cli["steps"], server["steps"], "the same request and config, the same plan");
}
