//! Route mode's ranking of tool lists, tested on lists made up for each property.

use super::*;

fn set_of(ranker: &ToolListRanker, names: &[String], texts: &[String]) -> ToolSet {
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    ranker.set(&names, &texts, &[])
}

#[test]
fn a_named_tool_is_kept_even_without_other_evidence() {
    let mut names: Vec<String> = (0..40).map(|i| format!("weather_tool_{i}")).collect();
    names.push("zzqx_frobnicate".into());
    let texts: Vec<String> = names.iter().map(|n| format!("{n} weather forecast")).collect();
    let set = set_of(&ToolListRanker::default(), &names, &texts);
    let conversation = Conversation { latest: "weather forecast, then ZzqxFrobnicate it", ..Default::default() };
    let kept = keep(&set, &conversation, None, 3, &ListWeights::default(), &|_, _| 0.0);
    assert!(kept.tools.contains(&40), "{kept:?}");
    assert_eq!(kept.tools.len(), 3);
    assert_eq!(kept.by_words.len(), 41, "no model: every tool ranked by words");
}

/// A request with two needs keeps a tool for the one its whole-message
/// vector leans away from.
#[test]
fn each_need_of_a_request_has_its_tools_near_the_top() {
    let names: Vec<String> = (0..12).map(|i| format!("tool_{i:02}")).collect();
    let texts: Vec<String> = names.iter().map(|n| format!("{n} does things")).collect();
    let set = set_of(&ToolListRanker::default(), &names, &texts);
    // tool_11 serves the second need only; the others lean to the first.
    let flat: Vec<f32> =
        set.index.names.iter().flat_map(|n| if n == "tool_11" { [0.0, 1.0, 0.0] } else { [0.9, 0.3, 0.1] }).collect();
    let tools = ListVectors { model: "m".into(), dims: 3, flat, keys: Vec::new(), present: vec![true; 12], missing: 0 };
    let conversation =
        Conversation { latest: "Forecast rain Lyon tomorrow. Convert dollars euros.", ..Default::default() };
    assert_eq!(intents::split(conversation.latest).len(), 2);
    let whole = Arc::from([0.95, 0.3, 0.0]);
    let needs = vec![Arc::from([1.0, 0.0, 0.0]), Arc::from([0.0, 1.0, 0.0])];
    let keep_with = |intents: Vec<Arc<[f32]>>| {
        let query = QueryVectors { latest: Arc::clone(&whole), intents };
        let dense = Dense { query: &query, tools: &tools, remembered: &Recalled::default() };
        keep(&set, &conversation, Some(dense), 3, &ListWeights::default(), &|_, _| 0.0).tools
    };
    assert!(!keep_with(Vec::new()).contains(&11), "the whole message alone leans to the first need");
    assert!(keep_with(needs).contains(&11));
}

/// A tool whose own text is far from a request, but that served
/// requests like it, is kept by its vector learned from use.
#[test]
fn a_tool_that_served_requests_like_this_one_is_kept() {
    let names: Vec<String> = (0..10).map(|i| format!("tool_{i:02}")).collect();
    let texts: Vec<String> = names.iter().map(|n| format!("{n} does things")).collect();
    let set = set_of(&ToolListRanker::default(), &names, &texts);
    let own = |i: usize| if i == 9 { [0.0, 0.0, 1.0] } else { [0.866, 0.5, 0.0] };
    let flat: Vec<f32> = (0..10).flat_map(own).collect();
    let tools = ListVectors { model: "m".into(), dims: 3, flat, keys: Vec::new(), present: vec![true; 10], missing: 0 };
    let query = QueryVectors { latest: Arc::from([0.0, 1.0, 0.0]), intents: Vec::new() };
    let mut served = vec![(0, Vec::new()); 10];
    served[9] = (3, vec![0.0, 1.0, 0.0]);
    let remembered = Recalled { served, ..Recalled::default() };
    let conversation = Conversation { latest: "find the right one", ..Default::default() };
    let keep_with = |learned: f32| {
        let dense = Dense { query: &query, tools: &tools, remembered: &remembered };
        let weights = ListWeights { learned, ..ListWeights::default() };
        keep(&set, &conversation, Some(dense), 1, &weights, &|_, _| 0.0).tools
    };
    assert_eq!(keep_with(1.0), vec![9]);
    assert_eq!(keep_with(0.0), vec![0], "without what it learned, its own vector ranks it last");
}

/// The best tool needs an issue's number: the tool that lists issues
/// comes along in place of the last kept, never in place of a called one.
#[test]
fn a_kept_tool_brings_the_tool_that_produces_what_it_needs() {
    let mut tools: Vec<(String, String, Vec<String>)> = (0..20)
        .map(|i| (format!("other__tool_{i:02}"), format!("summarize the bug report text {i}"), Vec::new()))
        .collect();
    let needs = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    tools.push(("github__get_issue".into(), "summarize the bug issue".into(), needs(&["repo", "issue_number"])));
    tools.push(("github__list_issues".into(), "open tickets of a repository".into(), needs(&["repo"])));
    let names: Vec<&str> = tools.iter().map(|t| t.0.as_str()).collect();
    let texts: Vec<&str> = tools.iter().map(|t| t.1.as_str()).collect();
    let need_lists: Vec<&[String]> = tools.iter().map(|t| t.2.as_slice()).collect();
    let set = ToolListRanker::default().set(&names, &texts, &need_lists);
    let conversation = Conversation { latest: "summarize the newest bug issue on acme/api", ..Default::default() };
    let keep_with = |companions: bool| {
        let weights = ListWeights { companions, ..ListWeights::default() };
        keep(&set, &conversation, None, 4, &weights, &|_, _| 0.0).tools
    };
    let (get, list) = (20, 21);
    let without = keep_with(false);
    assert!(without.contains(&get) && !without.contains(&list), "{without:?}");
    let with = keep_with(true);
    assert_eq!(with.len(), 4);
    assert!(with.contains(&get) && with.contains(&list), "{with:?}");
    // Called already, get_issue needs nothing brought: the list is as ranked.
    let called = vec!["github__get_issue".to_string()];
    let after = Conversation { called: &called, ..conversation };
    let weights = ListWeights::default();
    assert!(!keep(&set, &after, None, 4, &weights, &|_, _| 0.0).tools.contains(&list));
}

#[test]
fn a_conversation_without_user_text_keeps_k_tools_and_the_called_ones() {
    let names: Vec<String> = (0..30).map(|i| format!("tool_{i}")).collect();
    let texts: Vec<String> = names.iter().map(|n| format!("{n} 天気予報")).collect();
    let set = set_of(&ToolListRanker::default(), &names, &texts);
    let called = vec!["tool_29".to_string()];
    let conversation = Conversation { latest: "", earlier: "", called: &called, forced: Some("tool_17") };
    let kept = keep(&set, &conversation, None, 5, &ListWeights::default(), &|_, _| 0.0);
    assert_eq!(kept.tools.len(), 5);
    assert!(kept.tools.contains(&29) && kept.tools.contains(&17), "{kept:?}");
}

/// Tools that tie on every signal (the same words) are told apart by
/// name, never by where the request lists them.
#[test]
fn what_is_kept_does_not_depend_on_the_order_of_the_tools() {
    let ranker = ToolListRanker::default();
    let mut tools: Vec<(String, String)> = (0..60)
        .map(|i| {
            (format!("tool_{i:02}"), format!("tool {} {}", ["weather forecast", "stock price", "hotel"][i % 3], i % 7))
        })
        .collect();
    let dims = 4;
    let conversation = Conversation { latest: "weather forecast for Rome, and a hotel near it", ..Default::default() };
    let mut rng = fastrand::Rng::with_seed(7);
    let mut first: Option<Vec<String>> = None;
    for _ in 0..50 {
        rng.shuffle(&mut tools);
        let (names, texts): (Vec<String>, Vec<String>) = tools.iter().cloned().unzip();
        let set = set_of(&ranker, &names, &texts);
        // Vectors as a model would give them, in the set's order.
        let flat: Vec<f32> = set.index.texts.iter().flat_map(|t| [t.len() as f32, 1.0, 0.0, 0.5]).collect();
        let tools_vectors =
            ListVectors { model: "m".into(), dims, flat, keys: Vec::new(), present: vec![true; 60], missing: 0 };
        let query =
            QueryVectors { latest: Arc::from([0.1, 1.0, 0.0, 0.2]), intents: vec![Arc::from([0.5, 0.0, 1.0, 0.0])] };
        let dense = Dense { query: &query, tools: &tools_vectors, remembered: &Recalled::default() };
        let kept = keep(&set, &conversation, Some(dense), 7, &ListWeights::default(), &|_, _| 0.0);
        let mut kept_names: Vec<String> = kept.tools.iter().map(|&i| names[i].clone()).collect();
        kept_names.sort();
        assert!(kept.by_words.is_empty());
        match &first {
            None => first = Some(kept_names),
            Some(f) => assert_eq!(f, &kept_names),
        }
    }
}
