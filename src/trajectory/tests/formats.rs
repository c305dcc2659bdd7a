//! Each format on small samples copied from the real files (long texts cut).

use crate::trajectory::{Finish, Format, Parsed, Trajectory, parse_document};

fn parse_ok(stem: &str, text: &str) -> Parsed {
    parse_document("mem/file.json", stem, text).unwrap_or_else(|e| panic!("{e}"))
}

fn names(t: &Trajectory) -> Vec<&str> {
    t.calls.iter().map(|c| c.name.as_str()).collect()
}

/// `steptool_eval/toolllama_sft_dfs/G2_instruction.json#15067` and
/// `baseline-ppo_dfs/G1_category.json#9708` (one response shortened) and
/// `baseline-rft_dfs/G1_category.json#86288` (error text shortened).
const STEPTOOL: &str = r##"{
"15067": {"query": "My friend loves puzzles. Can you scramble the word 'PUZZLE' for me? I also want to have a chat with an AI chatbot. Ask the chatbot if it knows any good puzzle games.", "tool_names": ["scramble_word_for_word_scramble", "chat_for_ai_chatbot", "Finish"], "answer_steps": "Step 1: {'name': 'scramble_word_for_word_scramble', 'arguments': '{\\n  \"word\": \"PUZZLE\"\\n}', 'response': '{\"error\": \"\", \"response\": \"ZZEULP\"}'}\nStep 2: {'name': 'chat_for_ai_chatbot', 'arguments': '{\\n  \"uid\": \"user1\",\\n  \"message\": \"Can you recommend any good puzzle games?\"\\n}', 'response': '{\"error\": \"\", \"response\": \"{\\'chatbot\\': {\\'message\\': \\'Can you recommend any good puzzle games?\\', \\'response\\': \\'You can be direct with me.\\'}}\"}'}\nStep 3: {'name': 'Finish', 'arguments': '{\\n  \"return_type\": \"give_answer\",\\n  \"final_answer\": \"The scrambled word for \\'PUZZLE\\' is \\'ZZEULP\\'.\"\\n}', 'response': ''}", "final_step": "Final step: {'name': 'Finish', 'arguments': '{\\n  \"return_type\": \"give_answer\",\\n  \"final_answer\": \"The scrambled word for \\'PUZZLE\\' is \\'ZZEULP\\'.\"\\n}', 'response': ''}", "is_solved": {"0": "AnswerStatus.Unsolved", "1": "AnswerStatus.Unsure", "2": "AnswerStatus.Unsolved"}, "length": 3},
"9708": {"query": "I want to discover new anime profile pictures.", "tool_names": ["anime_gif_for_any_anime", "anime_img_for_any_anime", "anime_for_any_anime", "Finish"], "answer_steps": "Step 1: {'name': 'anime_for_any_anime', 'arguments': '{}', 'response': '{\"error\": \"\", \"response\": \"{\\\\\"message\\\\\":\\\\\"Hi User\\\\\",\\\\\"status\\\\\":\\\\\"success\\\\\",\\\\\"stuff\\\\\":[{\\\\\"name\\\\\":\\\\\"Anime img source\\\\\",\\\\\"image\\\\\":\\\\\"https://cdn.discordapp.com/attachm...'}\nStep 2: {'name': 'Finish', 'arguments': '{\\n  \"return_type\": \"give_answer\",\\n  \"final_answer\": \"I have obtained an anime profile picture for you.\"\\n}', 'response': ''}", "final_step": "Final step: {'name': 'Finish', 'arguments': '{\\n  \"return_type\": \"give_answer\",\\n  \"final_answer\": \"I have obtained an anime profile picture for you.\"\\n}', 'response': ''}", "is_solved": {"1": "AnswerStatus.Solved", "2": "AnswerStatus.Unsure", "0": "AnswerStatus.Solved"}, "length": 2},
"86288": {"query": "Hey, I'm new to Java programming and I'm not sure which version to use.", "tool_names": ["java_versions_for_java_code_compiler", "Finish"], "answer_steps": "Step 1: {'name': 'invalid_hallucination_function_name', 'arguments': '{}', 'response': '{\"error\": \"No such function name: : I think the current API call is made to retrieve the list of Java versions\", \"response\": \"\"}'}\nStep 2: {'name': 'Finish', 'arguments': '{\\n  \"return_type\": \"give_answer\",\\n  \"final_answer\": \"I\\'m sorry, but I couldn\\'t retrieve the list of Java versions.\"\\n}', 'response': ''}", "final_step": "Final step: {'name': 'Finish', 'arguments': '{\\n  \"return_type\": \"give_answer\",\\n  \"final_answer\": \"I\\'m sorry, but I couldn\\'t retrieve the list of Java versions.\"\\n}', 'response': ''}", "is_solved": {"0": "AnswerStatus.Unsolved", "2": "AnswerStatus.Unsolved", "1": "AnswerStatus.Unsolved"}, "length": 2}
}"##;

#[test]
fn steptool_records() {
    let p = parse_ok("G2_instruction", STEPTOOL);
    assert_eq!(p.format, Format::StepToolEval);
    assert!(p.skipped.is_empty(), "{:?}", p.skipped);
    let [puzzle, anime, java] = &p.trajectories[..] else { panic!("3 records expected") };

    assert_eq!(puzzle.source, "mem/file.json#15067");
    assert_eq!(puzzle.query_id.as_deref(), Some("15067"));
    assert_eq!(puzzle.offered, ["scramble_word_for_word_scramble", "chat_for_ai_chatbot"]);
    assert_eq!(names(puzzle), ["scramble_word_for_word_scramble", "chat_for_ai_chatbot"]);
    assert_eq!(puzzle.calls[0].arguments, "{\n  \"word\": \"PUZZLE\"\n}");
    assert_eq!(puzzle.calls[0].response.as_deref(), Some(r#"{"error": "", "response": "ZZEULP"}"#));
    assert_eq!(puzzle.calls[0].failed, Some(false));
    assert_eq!(puzzle.finish, Some(Finish::GiveAnswer));
    assert!(puzzle.finish_call.as_ref().unwrap().arguments.contains("'ZZEULP'"));
    assert!(puzzle.abandoned.is_empty());
    // Unsolved, Unsure, Unsolved.
    assert_eq!(puzzle.solved, Some(false));

    // Response cut at about 1,000 characters: no longer JSON, still judged.
    assert!(serde_json::from_str::<serde_json::Value>(anime.calls[0].response.as_deref().unwrap()).is_err());
    assert_eq!(anime.calls[0].failed, Some(false));
    // Solved, Unsure, Solved.
    assert_eq!(anime.solved, Some(true));

    assert_eq!(names(java), ["invalid_hallucination_function_name"]);
    assert_eq!(java.calls[0].failed, Some(true));
    assert_eq!(java.finish, Some(Finish::GiveAnswer));
    assert_eq!(java.solved, Some(false));
}

#[test]
fn steptool_runs_without_finish_and_python_literal_fields() {
    // toolllama_sft_cot runs often stop at the step limit: the last step is an API call.
    let doc = r##"{"7": {"query": "q", "tool_names": "['a_for_t', 'Finish']",
      "answer_steps": "Step 1: {'name': 'a_for_t', 'arguments': '{}', 'response': '{\"error\": \"\", \"response\": \"1\"}'}\nStep 2: {'name': 'Finish', 'arguments': '{\\nAction: Finish\\nAction Input: {', 'response': '{error:\"must have \"return_type\"\"}'}\nStep 3: {'name': ' a_for_t', 'arguments': '{}', 'response': '{\"error\": \"Timeout error...HTTPSConnectionPool(host=\\'a.p.rapidapi.com\\', port=443): Read timed out.'}",
      "final_step": "Final step: {'name': ' a_for_t', 'arguments': '{}', 'response': '{\"error\": \"Timeout error...HTTPSConnectionPool(host=\\'a.p.rapidapi.com\\', port=443): Read timed out.'}",
      "is_solved": "{'0': 'AnswerStatus.Solved', '1': 'AnswerStatus.Unsolved', '2': 'AnswerStatus.Unsure', '3': 'AnswerStatus.Solved'}"}}"##;
    let p = parse_ok("x", doc);
    let t = &p.trajectories[0];
    assert_eq!(t.offered, ["a_for_t"]);
    // The failed Finish in the middle is not a call; the leading space is kept.
    assert_eq!(names(t), ["a_for_t", " a_for_t"]);
    assert_eq!(t.calls[1].failed, Some(true));
    assert_eq!(t.finish, None);
    assert_eq!(t.finish_call, None);
    // 2 of 4 votes is a tie: not solved.
    assert_eq!(t.solved, Some(false));
}

#[test]
fn malformed_steptool_records_are_skipped_with_reasons() {
    let doc = r#"{"1": {"query": "q", "answer_steps": "Step 1: {'name': 'f', 'arguments': '{}', 'response': ''}\nStep 2: {'name': f}", "final_step": ""},
                  "2": {"query": "q", "answer_steps": "Step 1: {'name': 'ok', 'arguments': '{}', 'response': ''}", "final_step": ""},
                  "3": {"query": "q", "answer_steps": "1: {}"},
                  "4": ["not", "a", "record"],
                  "5": {"query": 5, "answer_steps": ""}}"#;
    let p = parse_ok("x", doc);
    assert_eq!(p.trajectories.len(), 1);
    assert_eq!(names(&p.trajectories[0]), ["ok"]);
    let reasons: Vec<(&str, &str)> = p.skipped.iter().map(|s| (s.location.as_str(), s.reason.as_str())).collect();
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    assert_eq!(reasons[0].0, "mem/file.json#1");
    assert!(reasons[0].1.starts_with("step 2: python literal: name \"f\" is not a literal at byte 9"), "{reasons:?}");
    assert!(reasons[1].1.contains("Step 1"), "{reasons:?}");
    assert!(reasons[2].1.contains("expected an object"), "{reasons:?}");
    assert!(reasons[3].1.contains("`query`"), "{reasons:?}");
}

/// `toolbench_dfs_examples/G2_answer/127_ChatGPT_DFS_woFilter_w2.json`,
/// observations cut and node statistics dropped.
const DFS_GIVE_UP: &str = r##"{"win": false, "tree": {"size": 19, "max_length": 9, "tree": {"node_type": "Action Input", "description": "", "pruned": false, "children": [{"node_type": "Action", "description": "api_tracking_for_pack_send", "pruned": false, "children": [{"node_type": "Action Input", "description": "{\n  \"reference\": \"YZA890\"\n}", "observation": "{\"error\": \"\", \"response\": \"{'type': 'https://tools.ietf.org/html/rfc7231#section-6.5.1', 'title': 'B", "pruned": false, "children": [{"node_type": "Action", "description": "get_track_info_for_pridnestrovie_post", "pruned": false, "children": [{"node_type": "Action Input", "description": "{\n  \"track_number\": \"RB413450335SG\"\n}", "observation": "{\"error\": \"Function executing from my_tools.Logistics.pridnestrovie_post.api import get_track_info e", "pruned": false, "children": [{"node_type": "Action", "description": "Finish", "pruned": false, "children": [{"node_type": "Action Input", "description": "{\n  \"return_type\": \"give_up_and_restart\"\n}", "observation": "{\"response\":\"chose to give up and restart\"}", "pruned": true, "children": []}]}]}]}, {"node_type": "Thought", "description": "Based on the previous action, it seems t", "pruned": false, "children": [{"node_type": "Action", "description": "api_tracking_for_pack_send", "pruned": false, "children": [{"node_type": "Action Input", "description": "{\n  \"reference\": \"YZA890\"\n}", "observation": "{\"error\": \"\", \"response\": \"{'type': 'https://tools.ietf.org/html/rfc7231#section-6.5.1', 'title': 'B", "pruned": false, "children": [{"node_type": "Thought", "description": "It appears that there was an error again", "pruned": false, "children": [{"node_type": "Action", "description": "Finish", "pruned": false, "children": [{"node_type": "Action Input", "description": "{\n  \"return_type\": \"give_up_and_restart\"\n}", "observation": "{\"response\":\"chose to give up and restart\"}", "pruned": true, "children": []}]}]}]}]}]}]}]}, {"node_type": "Thought", "description": "Based on the previous action and its fai", "pruned": false, "children": [{"node_type": "Action", "description": "get_track_info_for_pridnestrovie_post", "pruned": false, "children": [{"node_type": "Action Input", "description": "{\n  \"track_number\": \"RB413450335SG\"\n}", "observation": "{\"error\": \"Function executing from my_tools.Logistics.pridnestrovie_post.api import get_track_info e", "pruned": false, "children": [{"node_type": "Thought", "description": "It seems that there is an issue with the", "pruned": false, "children": [{"node_type": "Action", "description": "Finish", "pruned": false, "children": [{"node_type": "Action Input", "description": "{\n  \"return_type\": \"give_up_and_restart\"\n}", "observation": "{\"response\":\"chose to give up and restart\"}", "pruned": true, "children": []}]}]}]}]}]}]}}, "answer_generation": {"valid_data": true, "finish_type": "give_up", "query": "I'm organizing a charity auction and I need to track the delivery of the donated items.", "final_answer": "{\n  \"return_type\": \"give_up_and_restart\"\n}", "function": [{"name": "api_tracking_for_pack_send"}, {"name": "get_track_info_for_pridnestrovie_post"}, {"name": "Finish"}], "chain": []}}"##;

#[test]
fn dfs_tree_without_answer_takes_the_last_branch() {
    let p = parse_ok("127_ChatGPT_DFS_woFilter_w2", DFS_GIVE_UP);
    assert_eq!(p.format, Format::ToolBenchAnswer);
    let t = &p.trajectories[0];
    assert_eq!(t.source, "mem/file.json#127");
    assert_eq!(t.query_id.as_deref(), Some("127"));
    assert_eq!(t.offered, ["api_tracking_for_pack_send", "get_track_info_for_pridnestrovie_post"]);
    assert_eq!(t.solved, Some(false));
    assert_eq!(names(t), ["get_track_info_for_pridnestrovie_post"]);
    assert_eq!(t.calls[0].arguments, "{\n  \"track_number\": \"RB413450335SG\"\n}");
    assert_eq!(t.calls[0].failed, Some(true));
    assert_eq!(t.finish, Some(Finish::GiveUp));
    let abandoned: Vec<&str> = t.abandoned.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        abandoned,
        ["api_tracking_for_pack_send", "get_track_info_for_pridnestrovie_post", "api_tracking_for_pack_send"]
    );
    assert_eq!(t.abandoned[0].failed, Some(false));
}

/// `toolbench_dfs_examples/G1_answer/57_ChatGPT_DFS_woFilter_w2.json`, cut.
const DFS_WIN: &str = r##"{"win": true, "tree": {"tree": {"node_type": "Action Input", "description": "", "children": [{"node_type": "Action", "description": "products_for_seo_api", "children": [{"node_type": "Action Input", "description": "{\n  \"query\": \"latest iPhone 14\"\n}", "observation": "{\"error\": \"\", \"response\": \"{'products': [{'link': 'https://www.amazon.com/LEOMAK", "children": [{"node_type": "Action", "description": "news_for_seo_api", "children": [{"node_type": "Action Input", "description": "{\n  \"query\": \"iPhone 14\"\n}", "observation": "{\"error\": \"Message error...\", \"response\": \"{'feed': {'html': {'lang': 'en'}, 'me", "children": [{"node_type": "Action", "description": "search_for_seo_api", "children": [{"node_type": "Action Input", "description": "{\n  \"query\": \"iPhone 14 news\"\n}", "observation": "{\"error\": \"\", \"response\": \"{'ads': [], 'ads_count': 0, 'answers': [], 'results':", "children": [{"node_type": "Thought", "description": "I apologize, but it seems that", "children": [{"node_type": "Action", "description": "Finish", "children": [{"node_type": "Action Input", "description": "{\n  \"return_type\": \"give_up_and_restart\"\n}", "observation": "{\"response\":\"chose to give up and restart\"}", "children": []}]}]}, {"node_type": "Thought", "description": "Based on the previous action c", "children": [{"node_type": "Action", "description": "search_b_for_seo_api", "children": [{"node_type": "Action Input", "description": "{\n  \"query\": \"iPhone 14 news\"\n}", "observation": "{\"error\": \"\", \"response\": \"{'ads': [], 'adsCount': 0, 'shoppingAds': [], 'result", "children": [{"node_type": "Action", "description": "search_for_seo_api", "children": [{"node_type": "Action Input", "description": "{\n  \"query\": \"latest news iPhone 14\"\n}", "observation": "{\"error\": \"\", \"response\": \"{'ads': [], 'ads_count': 0, 'answers': [], 'results':", "children": [{"node_type": "Action", "description": "search_for_seo_api", "children": [{"node_type": "Action Input", "description": "{\n  \"query\": \"iPhone 14 latest news\"\n}", "observation": "{\"error\": \"\", \"response\": \"{'ads': [], 'ads_count': 0, 'answers': [], 'results':", "children": []}]}]}]}, {"node_type": "Thought", "description": "Based on the current state and", "children": [{"node_type": "Action", "description": "search_for_seo_api", "children": [{"node_type": "Action Input", "description": "{\n  \"query\": \"iPhone 14 reviews\"\n}", "observation": "{\"error\": \"\", \"response\": \"{'ads': [], 'ads_count': 0, 'answers': [], 'results':", "children": []}]}]}]}]}]}]}]}, {"node_type": "Thought", "description": "Based on the current state, th", "children": [{"node_type": "Action", "description": "search_b_for_seo_api", "children": [{"node_type": "Action Input", "description": "{\n  \"query\": \"iPhone 14 news\"\n}", "observation": "{\"error\": \"\", \"response\": \"{'ads': [], 'adsCount': 0, 'shoppingAds': [], 'result", "children": [{"node_type": "Thought", "description": "I apologize, but it seems that", "children": [{"node_type": "Action", "description": "Finish", "children": [{"node_type": "Action Input", "description": "{\n  \"return_type\": \"give_answer\",\n  \"final_answer\": \"I found a phone case for the latest iPhone 14 called 'LEOMAKRON for iPhone 14 Pro Max Phone Case ", "observation": "{\"response\":\"successfully giving the final answer.\"}", "children": []}]}]}]}]}]}]}]}]}]}]}}, "answer_generation": {"query": "I'm interested in learning more about the latest products in the market.", "function": [{"name": "video_for_seo_api"}, {"name": "search_b_for_seo_api"}, {"name": "news_for_seo_api"}, {"name": "products_for_seo_api"}, {"name": "Finish"}]}}"##;

#[test]
fn dfs_tree_with_answer_takes_the_answer_branch() {
    let p = parse_ok("57_ChatGPT_DFS_woFilter_w2", DFS_WIN);
    let t = &p.trajectories[0];
    assert_eq!(t.solved, Some(true));
    assert_eq!(names(t), ["products_for_seo_api", "news_for_seo_api", "search_b_for_seo_api"]);
    assert_eq!(t.calls.iter().map(|c| c.failed).collect::<Vec<_>>(), [Some(false), Some(true), Some(false)]);
    assert_eq!(t.finish, Some(Finish::GiveAnswer));
    // The cut final answer still shows its return type.
    assert!(t.finish_call.as_ref().unwrap().arguments.ends_with("Phone Case "));
    // Five calls on abandoned branches; their give_up Finish is not a call.
    assert_eq!(t.abandoned.len(), 5);
    assert!(t.abandoned.iter().all(|c| c.name.starts_with("search")));
}

/// `stabletoolbench_examples/answer/virtual_chatgpt_cot/G1_instruction/1073_CoT@1.json`, cut.
const COT_ANSWER: &str = r##"{"win": true, "try_count": 1, "trys": [{"chain": [{"node_type": "Action", "description": "popularsitesforquery_for_keyword_analysis"}, {"node_type": "Action Input", "description": "{\n  \"q\": \"birthday party ideas\"\n}", "observation": "{\"error\": \"\", \"response\": \"[{\\\"name\\\":\\\"pinterest.com\\\",\\\"score\\\":0.087}]\"}"}, {"node_type": "Action", "description": "querykeywords_for_keyword_analysis"}, {"node_type": "Action Input", "description": "{\n  \"q\": \"birthday party ideas\"\n}", "observation": "{\"error\": \"\", \"response\": \"<b><i>party</i></b>,<b><i>ideas</i></b>,<i>birthday</i>\"}"}, {"node_type": "Thought", "description": "For the search query 'birthday party ideas', some popular sites"}, {"node_type": "Action", "description": "Finish"}, {"node_type": "Action Input", "description": "{\n  \"return_type\": \"give_answer\",\n  \"final_answer\": \"For the search query 'birthday party ideas', some popular sites that offer inspiration\"\n}", "observation": "{\"response\":\"successfully giving the final answer.\"}"}], "win": false}], "answer_generation": {"query": "I want to plan a surprise birthday party for my friend.", "function": [{"name": "popularsitesforquery_for_keyword_analysis"}, {"name": "querykeywords_for_keyword_analysis"}, {"name": "similarqueries_for_keyword_analysis"}, {"name": "Finish"}]}}"##;

#[test]
fn cot_answer_chains() {
    let p = parse_ok("1073_CoT@1", COT_ANSWER);
    let t = &p.trajectories[0];
    assert_eq!(t.format, Format::ToolBenchAnswer);
    assert_eq!(t.query_id.as_deref(), Some("1073"));
    assert_eq!(names(t), ["popularsitesforquery_for_keyword_analysis", "querykeywords_for_keyword_analysis"]);
    assert_eq!(t.offered.len(), 3);
    assert_eq!(t.finish, Some(Finish::GiveAnswer));
    assert_eq!(t.solved, Some(true));
    assert!(t.abandoned.is_empty());
    // Without a numeric file-name prefix there is no query id.
    let p = parse_ok("answer", COT_ANSWER);
    assert_eq!(p.trajectories[0].query_id, None);
    assert_eq!(p.trajectories[0].source, "mem/file.json#0");
}
