//! Converted answers and SFT conversations, on samples copied from the real files.

use crate::trajectory::{Finish, Format, parse_document};

/// `toolbench_eval_gpt35_cot/G1_category.json#1187` (tool schemas reduced to names).
const GPT35_COT: &str = r##"{"1187": {"query": "I want to organize a movie night for my family and I need your assistance.", "available_tools": [{"name": "genre_list_for_advanced_movie_search"}, {"name": "search_by_genre_for_advanced_movie_search"}, {"name": "search_by_name_for_advanced_movie_search"}, {"name": "get_detailed_response_for_advanced_movie_search"}, {"name": "Finish"}], "answer": {"method": "chatgpt_CoT", "total_steps": 6, "final_answer": "{\n  \"return_type\": \"give_answer\",\n  \"final_answer\": \"For you", "answer_details": [{"role": "system", "message": "", "next": [{"role": "user", "message": "I want to organize a movie night for my family and I need your assistance. Can you suggest a genre s", "next": [{"role": "tool", "message": "{'name': 'genre_list_for_advanced_movie_search', 'arguments': '{}', 'response': '{\"error\": \"\", \"resp", "next": [{"role": "tool", "message": "{'name': 'search_by_genre_for_advanced_movie_search', 'arguments': '{}', 'response': '{\"error\": \"\", ", "next": [{"role": "tool", "message": "{'name': 'get_detailed_response_for_advanced_movie_search', 'arguments': '{\\n  \"movie_id\": 862\\n}', ", "next": [{"role": "tool", "message": "{'name': 'Finish', 'arguments': '{\\n  \"return_type\": \"give_answer\",\\n  \"final_answer\": \"For your fam", "next": []}]}]}]}]}]}]}},
"80299": {"query": "q", "available_tools": [{"name": "spam_database_lookup_for_viewdns"}, {"name": "Finish"}], "answer": {"method": "chatgpt_CoT", "total_steps": 3, "final_answer": "", "answer_details": [{"role": "system", "message": "", "next": [{"role": "user", "message": "q", "next": [{"role": "tool", "message": "{'name': 'spam_database_lookup_for_viewdns', 'arguments': '{\\n  \"ip\": \"192.168.1.1\",\\n  \"output\": \"json\"\\n}', 'response': '{\"error\"", "next": [{"role": "tool", "message": "{'name': 'spam_database_lookup_for_viewdns', 'arguments': '{\\n  \"ip\": \"192.168.1.1\",\\n  \"output\": \"jso", "next": [{"role": "tool", "message": "{'name': 'Finish', 'arguments': '{\\n  \"return_type\": \"give_up_and_restart\"\\n}', 'response': '{\"response\":\"chose to give up and restart\"}'}", "next": []}]}]}]}]}]}}
}"##;

#[test]
fn gpt35_cot_messages_cut_to_100_characters() {
    let p = parse_document("mem/G1_category.json", "G1_category", GPT35_COT).unwrap();
    assert_eq!(p.format, Format::Converted);
    assert!(p.skipped.is_empty(), "{:?}", p.skipped);
    let t = &p.trajectories[0];
    assert_eq!(t.source, "mem/G1_category.json#1187");
    assert_eq!(t.offered.len(), 4);
    assert_eq!(t.solved, None);
    let got: Vec<(&str, &str, Option<bool>)> =
        t.calls.iter().map(|c| (c.name.as_str(), c.arguments.as_str(), c.failed)).collect();
    assert_eq!(
        got,
        [
            ("genre_list_for_advanced_movie_search", "{}", Some(false)),
            ("search_by_genre_for_advanced_movie_search", "{}", Some(false)),
            ("get_detailed_response_for_advanced_movie_search", "{\n  \"movie_id\": 862\n}", None),
        ]
    );
    // What survived of a cut response is kept as raw text.
    assert_eq!(t.calls[0].response.as_deref(), Some(r#"{"error": "", "resp"#));
    assert_eq!(t.calls[2].response, None);
    // The cut Finish keeps its argument prefix, enough for the return type.
    assert_eq!(t.finish, Some(Finish::GiveAnswer));

    let t = &p.trajectories[1];
    // Arguments cut: recorded as "", failure unknown.
    assert_eq!(t.calls[1].arguments, "");
    assert_eq!(t.calls[1].failed, None);
    // `{"error"` alone does not tell.
    assert_eq!(t.calls[0].failed, None);
    assert_eq!(t.finish, Some(Finish::GiveUp));
}

/// `stabletoolbench_examples/model_predictions_converted/virtual_chatgpt_cot/G1_instruction.json#1073`,
/// messages as dicts, cut; plus a made-up branching chain.
const CONVERTED_DICTS: &str = r##"{"1073": {"query": "I want to plan a surprise birthday party for my friend.", "available_tools": [{"name": "popularsitesforquery_for_keyword_analysis", "description": "...", "parameters": {}}, {"name": "querykeywords_for_keyword_analysis"}, {"name": "Finish"}], "answer": {"method": "CoT@1", "total_steps": 6, "final_answer": "", "answer_details": [{"role": "system", "message": "", "next": [{"role": "user", "message": "", "next": [{"role": "tool", "message": {"name": "popularsitesforquery_for_keyword_analysis", "arguments": "{\n  \"q\": \"birthday party ideas\"\n}", "response": "{\"error\": \"\", \"response\": \"[{\\\"name\\\":\\\"pinterest.com\\\",\\\"score\\\":0.087}]\"}"}, "next": [{"role": "tool", "message": {"name": "querykeywords_for_keyword_analysis", "arguments": "{\n  \"q\": \"birthday party ideas\"\n}", "response": "{\"error\": \"\", \"response\": \"<b><i>party</i></b>\"}"}, "next": [{"role": "assistant", "message": "For the search query 'birthday party ideas', some popular sites ...", "next": [{"role": "tool", "message": {"name": "Finish", "arguments": "{\n  \"return_type\": \"give_answer\",\n  \"final_answer\": \"Pinterest.com\"\n}", "response": ""}, "next": []}]}]}]}]}]}]}},
"2": {"query": "branching", "available_tools": [], "answer": {"answer_details": [{"role": "user", "message": "", "next": [
   {"role": "tool", "message": {"name": "a", "arguments": "{}", "response": "{\"error\": \"429 Too Many Requests\", \"response\": \"\"}"}, "next": []},
   {"role": "tool", "message": {"name": "b", "arguments": "{}", "response": "{\"error\": \"\", \"response\": \"\"}"}, "next": [{"role": "tool", "message": {"name": "c", "arguments": "{}", "response": "{\"error\": \"\", \"response\": 1}"}, "next": []}]}]}]}},
"3": {"query": "broken", "available_tools": [], "answer": {"answer_details": [{"role": "tool", "message": "not a dict", "next": []}]}}
}"##;

#[test]
fn converted_dict_messages_and_branches() {
    let p = parse_document("mem/x.json", "x", CONVERTED_DICTS).unwrap();
    assert_eq!(p.trajectories.len(), 2);
    let t = &p.trajectories[0];
    assert_eq!(t.offered, ["popularsitesforquery_for_keyword_analysis", "querykeywords_for_keyword_analysis"]);
    assert_eq!(t.calls.len(), 2);
    assert!(t.calls.iter().all(|c| c.failed == Some(false)));
    assert_eq!(t.finish, Some(Finish::GiveAnswer));
    assert!(t.finish_call.as_ref().unwrap().arguments.contains("Pinterest.com"));

    // No branch answers: the last branch is final, the other abandoned.
    let t = &p.trajectories[1];
    assert_eq!(t.calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["b", "c"]);
    assert_eq!(t.abandoned.len(), 1);
    assert_eq!(t.abandoned[0].failed, Some(true));
    assert_eq!(t.finish, None);

    assert_eq!(p.skipped.len(), 1);
    assert_eq!(p.skipped[0].location, "mem/x.json#3");
    assert!(p.skipped[0].reason.starts_with("tool message 1: "), "{:?}", p.skipped);
}

/// `steptool_sft_examples/gpt4_dfs_G123_for_sft_example.json#10012`, texts cut.
const SFT: &str = r##"{"10012": {"cnt": 2, "instances": [
 {"id": "Step 2: I'm looking for some great deals", "conversations": [
  {"from": "system", "value": "You are AutoGPT, you can use many tools(functions) to do the following task.\nSpecifically, you have access to the following APIs: [{'name': 'getallcoupon_for_coupons', 'description': 'This is the subfunction for tool \"coupons\", you can use this tool.', 'parameters': {'type': 'object', 'properties': {}, 'required': [], 'optional': []}}, {'name': 'all_for_coupons', 'description': 'get all_for_coupons coupons', 'parameters': {'type': 'object', 'properties': {'x_rapidapi_key': {'type': 'string', 'description': 'key to nakho', 'example_value': '7dd4bec3'}}, 'required': ['x_rapidapi_key'], 'optional': []}}, {'name': 'Finish', 'description': 'If you believe ...', 'parameters': {'type': 'object', 'properties': {'return_type': {'type': 'string', 'enum': ['give_answer', 'give_up_and_restart']}}, 'required': ['return_type']}}]"},
  {"from": "user", "value": "\nI'm looking for some great deals and discounts on various products.\nBegin!\n"},
  {"from": "assistant", "value": "\nThought: The first step to find great deals and discounts a ...\nAction: getallcoupon_for_coupons\nAction Input: {}"}]},
 {"id": "Step 4: I'm looking for some great deals", "conversations": [
  {"from": "system", "value": "You are AutoGPT, you can use many tools(functions) to do the following task.\nSpecifically, you have access to the following APIs: [{'name': 'getallcoupon_for_coupons', 'description': 'This is the subfunction for tool \"coupons\", you can use this tool.', 'parameters': {'type': 'object', 'properties': {}, 'required': [], 'optional': []}}, {'name': 'all_for_coupons', 'description': 'get all_for_coupons coupons', 'parameters': {'type': 'object', 'properties': {'x_rapidapi_key': {'type': 'string', 'description': 'key to nakho', 'example_value': '7dd4bec3'}}, 'required': ['x_rapidapi_key'], 'optional': []}}, {'name': 'Finish', 'description': 'If you believe ...', 'parameters': {'type': 'object', 'properties': {'return_type': {'type': 'string', 'enum': ['give_answer', 'give_up_and_restart']}}, 'required': ['return_type']}}]"},
  {"from": "user", "value": "\nI'm looking for some great deals and discounts on various products.\nBegin!\n"},
  {"from": "assistant", "value": "\nThought: The first step to find great deals and discounts a ...\nAction: getallcoupon_for_coupons\nAction Input: {}"},
  {"from": "function", "value": "{\"error\": \"\", \"response\": \"The 'getallcoupon' API within the 'coupons' tool is designed to retrieve a comprehensive list\"}"},
  {"from": "user", "value": "...\n\nRemember you are now in the intermediate state of a trail, you will first analyze the now state and previous action candidates, then make actions that is different from all the previous."},
  {"from": "assistant", "value": "\nThought: The \"getallcoupon_for_coupons\" function responded  ...\nAction: Finish\nAction Input: {\"return_type\":\"give_answer\",\"final_answer\":\"To discover great deals, consider coupon aggregation services.\"}"}]}]}}"##;

#[test]
fn sft_conversations() {
    let p = parse_document("mem/sft.json", "sft", SFT).unwrap();
    assert_eq!(p.format, Format::SftConversations);
    let t = &p.trajectories[0];
    assert_eq!(t.source, "mem/sft.json#10012");
    assert_eq!(t.query, "I'm looking for some great deals and discounts on various products.");
    assert_eq!(t.offered, ["getallcoupon_for_coupons", "all_for_coupons"]);
    assert_eq!(t.calls.len(), 1);
    assert_eq!(t.calls[0].name, "getallcoupon_for_coupons");
    assert_eq!(t.calls[0].arguments, "{}");
    assert_eq!(t.calls[0].failed, Some(false));
    assert_eq!(t.finish, Some(Finish::GiveAnswer));
    assert_eq!(t.solved, None);
}

#[test]
fn react_turns() {
    use crate::trajectory::sft::parse_action;
    assert_eq!(parse_action("Action: f\nAction Input: {}"), Some(("f".into(), "{}".into())));
    assert_eq!(
        parse_action("\nThought: call \"Action: x\"\nAction:  f_for_t \nAction Input: {\"a\": 1}\n"),
        Some((" f_for_t ".into(), "{\"a\": 1}\n".into()))
    );
    assert_eq!(parse_action("\nThought: I am done."), None);
    assert_eq!(parse_action("\nAction: f"), None);
}
