//! Response judging, `Finish` arguments, format detection and directory loading.

use std::fs;

use crate::trajectory::calls::{finish_kind, return_type};
use crate::trajectory::{Finish, Format, judge_failure, load_path, parse_document};

#[test]
fn judging_responses() {
    let cases: &[(&str, Option<bool>)] = &[
        (r#"{"error": "", "response": "{\"status\":\"401\"}"}"#, Some(false)),
        (r#"{"error": "No such function name: login", "response": ""}"#, Some(true)),
        (r#"{"error": null, "response": 1}"#, Some(false)),
        (r#"{"error": "  ", "response": 1}"#, Some(false)),
        // Cut envelopes (StepTool ~1,000 characters, gpt-3.5 CoT 100).
        (r#"{"error": "", "response": "{\"products\": [{\"link"#, Some(false)),
        (r#"{"error": "", "#, Some(false)),
        (r#"{"error": """#, Some(false)),
        (r#"{"error": "Timeout error...HTTPSConnectionPool(host='a.p.rapidapi.com', port=443): Read tim"#, Some(true)),
        (r#"{"error": ""#, None),
        (r#"{"error""#, None),
        // Malformed envelopes written by the StepTool environment.
        (r#"{error:"must have "return_type""}"#, Some(true)),
        (r#"{error:""return_type" is not a valid choice"}"#, Some(true)),
        // No error field: failure only from HTTP status / timeout / reachability words.
        ("HTTP 503 Service Unavailable", Some(true)),
        (r#"{"message": "Request failed", "status_code": 429}"#, Some(true)),
        ("Connection refused", Some(true)),
        ("the host is unreachable", Some(true)),
        (r#"{"message": "ok"}"#, None),
        (r#"{"response":"chose to give up and restart"}"#, None),
        ("", None),
        ("plain text answer with 404 pages", None),
    ];
    for (text, want) in cases {
        assert_eq!(judge_failure(text), *want, "{text:?}");
    }
}

#[test]
fn finish_arguments() {
    assert_eq!(
        return_type("{\n  \"return_type\": \"give_answer\",\n  \"final_answer\": \"x\"\n}").as_deref(),
        Some("give_answer")
    );
    // Cut or garbled arguments still show the return type.
    assert_eq!(
        return_type("{\n  \"return_type\": \"give_answer\",\n  \"final_answer\": \"For your fam").as_deref(),
        Some("give_answer")
    );
    assert_eq!(return_type("{'return_type': 'give_up_and_restart'}").as_deref(), Some("give_up_and_restart"));
    assert_eq!(return_type("{\nAction: Finish\nAction Input: {"), None);
    assert_eq!(finish_kind(r#"{"return_type": "give_answer"}"#), Some(Finish::GiveAnswer));
    assert_eq!(finish_kind(r#"{"return_type": "give_up_and_restart"}"#), Some(Finish::GiveUp));
    assert_eq!(finish_kind(r#"{"return_type": "success"}"#), None);
    assert_eq!(finish_kind(""), None);
}

#[test]
fn documents_that_are_not_trajectories() {
    let cases: &[(&str, &str)] = &[
        ("query\tavailable_tools\tmodel\n", "not a JSON document"),
        ("", "not a JSON document"),
        ("{\"a\": ", "invalid JSON"),
        ("null", "not a trajectory format: a JSON null"),
        ("[]", "not a trajectory format"),
        ("{}", "not a trajectory format: an object of 0 entries"),
        // preference_results/*.json
        (
            r#"{"588": {"virtual_chatgpt_cot": 0, "virtual_chatgpt_dfs": 3, "round_0": "complete"}}"#,
            "the first holding virtual_chatgpt_cot, virtual_chatgpt_dfs, round_0",
        ),
        // A tool file.
        (r#"{"tool_name": "TheClique", "api_list": [{"name": "Songkick concert"}]}"#, "not a trajectory format"),
        (&"[".repeat(10_000), "invalid JSON"),
    ];
    for (text, reason) in cases {
        let err = parse_document("mem", "mem", text).expect_err(text);
        assert!(err.contains(reason), "{text:?}: {err}");
    }
}

#[test]
fn record_lists_are_keyed_by_index() {
    let doc = r#"[{"query": "q", "answer_steps": "", "final_step": "Final step: {'name': 'f', 'arguments': '{}', 'response': None}"}]"#;
    let p = parse_document("mem/list.json", "list", doc).unwrap();
    assert_eq!(p.format, Format::StepToolEval);
    let t = &p.trajectories[0];
    assert_eq!(t.source, "mem/list.json#0");
    assert_eq!(t.calls[0].name, "f");
    assert_eq!(t.calls[0].response.as_deref(), Some(""));
}

#[test]
fn loading_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("b/nested")).unwrap();
    let step = r#"{"query": "q", "tool_names": ["f", "Finish"], "answer_steps": "Step 1: {'name': 'f', 'arguments': '{}', 'response': '{\"error\": \"\", \"response\": 1}'}", "final_step": "", "is_solved": {"0": "AnswerStatus.Solved"}}"#;
    fs::write(
        root.join("b/nested/run.json"),
        format!(r#"{{"2": {step}, "1": {step}, "3": {{"query": "q", "answer_steps": 3}}}}"#),
    )
    .unwrap();
    fs::write(root.join("a.csv"), "query,model\nq,m\n").unwrap();
    fs::write(root.join("c.bin"), [0xff, 0xfe, 0x00]).unwrap();
    fs::write(root.join("b/pref.json"), r#"{"1": {"x": 0}}"#).unwrap();

    let (ts, report) = load_path(root);
    assert_eq!(report.files, 4);
    assert_eq!(report.trajectories, 2);
    assert_eq!(report.files_by_format.get(&Format::StepToolEval), Some(&1));
    // Records keep file order.
    assert_eq!(ts.iter().map(|t| t.query_id.as_deref().unwrap()).collect::<Vec<_>>(), ["2", "1"]);
    assert!(ts.iter().all(|t| t.solved == Some(true) && t.calls[0].failed == Some(false)));
    // Skips in walk order (sorted by name): a.csv, b/nested/run.json#3, b/pref.json, c.bin.
    let skipped: Vec<String> = report
        .skipped
        .iter()
        .map(|s| s.location.strip_prefix(root.to_str().unwrap()).unwrap_or(&s.location).to_string())
        .collect();
    assert_eq!(skipped, ["/a.csv", "/b/nested/run.json#3", "/b/pref.json", "/c.bin"], "{:?}", report.skipped);
    assert!(report.skipped[1].reason.contains("`answer_steps` is a number"));
    assert_eq!(report.skipped[3].reason, "not UTF-8 text");

    // A single file works too; a missing path is reported, not an error.
    let (ts, report) = load_path(&root.join("b/nested/run.json"));
    assert_eq!((ts.len(), report.files), (2, 1));
    let (ts, report) = load_path(&root.join("missing"));
    assert!(ts.is_empty());
    assert_eq!(report.skipped[0].reason, "not a file or directory");
}
