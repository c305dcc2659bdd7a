//! Python-literal parser: accepted syntax, refusals with positions, hostile input.

use serde_json::json;

use crate::trajectory::pyliteral::{MAX_DEPTH, parse, parse_dict_prefix, parse_leading};

#[test]
fn scalars() {
    assert_eq!(parse("0").unwrap(), json!(0));
    assert_eq!(parse("-17").unwrap(), json!(-17));
    assert_eq!(parse("+3").unwrap(), json!(3));
    assert_eq!(parse("00").unwrap(), json!(0));
    assert_eq!(parse("18446744073709551615").unwrap(), json!(18446744073709551615u64));
    assert_eq!(parse("123456789012345678901234567890").unwrap(), json!(1.2345678901234568e29));
    assert_eq!(parse("1.5").unwrap(), json!(1.5));
    assert_eq!(parse("-2e3").unwrap(), json!(-2000.0));
    assert_eq!(parse("1E-2").unwrap(), json!(0.01));
    assert_eq!(parse(".5").unwrap(), json!(0.5));
    assert_eq!(parse("5.").unwrap(), json!(5.0));
    assert_eq!(parse("True").unwrap(), json!(true));
    assert_eq!(parse("False").unwrap(), json!(false));
    assert_eq!(parse(" None \n").unwrap(), json!(null));
}

#[test]
fn strings_and_escapes() {
    assert_eq!(parse(r#"'it\'s'"#).unwrap(), json!("it's"));
    assert_eq!(parse(r#""say \"hi\"""#).unwrap(), json!("say \"hi\""));
    assert_eq!(parse(r#"'"double" inside single'"#).unwrap(), json!("\"double\" inside single"));
    assert_eq!(parse(r"'a\nb\tc\rd\\e'").unwrap(), json!("a\nb\tc\rd\\e"));
    assert_eq!(parse(r"'\a\b\f\v'").unwrap(), json!("\u{7}\u{8}\u{c}\u{b}"));
    assert_eq!(parse(r"'\x41\x7f\xe9'").unwrap(), json!("A\u{7f}é"));
    assert_eq!(parse(r"'\u00e9\u4e2d'").unwrap(), json!("é中"));
    assert_eq!(parse(r"'\U0001F600'").unwrap(), json!("😀"));
    assert_eq!(parse(r"'\0\101\7'").unwrap(), json!("\u{0}A\u{7}"));
    // Unknown escapes stay as written, as in Python.
    assert_eq!(parse(r"'\d+\.\w'").unwrap(), json!("\\d+\\.\\w"));
    // Surrogate pairs join; a lone surrogate becomes U+FFFD.
    assert_eq!(parse(r"'\ud83d\ude00'").unwrap(), json!("😀"));
    assert_eq!(parse(r"'\ud83d!'").unwrap(), json!("\u{FFFD}!"));
    // Backslash-newline is a line continuation.
    assert_eq!(parse("'a\\\nb'").unwrap(), json!("ab"));
    // Non-ASCII text passes through untouched.
    assert_eq!(parse("'Agence Calédonienne 🥞 日本'").unwrap(), json!("Agence Calédonienne 🥞 日本"));
    assert_eq!(parse("''").unwrap(), json!(""));
}

#[test]
fn containers() {
    assert_eq!(parse("{}").unwrap(), json!({}));
    assert_eq!(parse("[]").unwrap(), json!([]));
    assert_eq!(parse("()").unwrap(), json!([]));
    assert_eq!(parse("(1)").unwrap(), json!(1));
    assert_eq!(parse("(1,)").unwrap(), json!([1]));
    assert_eq!(parse("(1, 'a', None)").unwrap(), json!([1, "a", null]));
    assert_eq!(parse("[1, [2, (3, 4)], {'k': [True]},]").unwrap(), json!([1, [2, [3, 4]], {"k": [true]}]));
    assert_eq!(parse("{'a': 1, 'b': {'c': []},}").unwrap(), json!({"a": 1, "b": {"c": []}}));
    assert_eq!(
        parse("{1: 'x', True: 'y', None: 'z', 2.5: 'w'}").unwrap(),
        json!({"1": "x", "True": "y", "None": "z", "2.5": "w"})
    );
    assert_eq!(parse("{\n  'a' :\t1 ,\n 'b':2\n}").unwrap(), json!({"a": 1, "b": 2}));
    // Key order is kept (serde_json preserve_order).
    let v = parse("{'z': 1, 'a': 2}").unwrap();
    assert_eq!(v.as_object().unwrap().keys().collect::<Vec<_>>(), ["z", "a"]);
}

#[test]
fn a_real_steptool_step() {
    let step = r#"{'name': 'chat_for_ai_chatbot', 'arguments': '{\n  "uid": "user1",\n  "message": "Can you recommend any good puzzle games?"\n}', 'response': '{"error": "", "response": "{\'chatbot\': {\'message\': \'Can you recommend any good puzzle games?\', \'response\': \'You can be direct with me.\'}}"}'}"#;
    let v = parse(step).unwrap();
    assert_eq!(v["name"], "chat_for_ai_chatbot");
    assert_eq!(
        v["arguments"],
        "{\n  \"uid\": \"user1\",\n  \"message\": \"Can you recommend any good puzzle games?\"\n}"
    );
    let response: serde_json::Value = serde_json::from_str(v["response"].as_str().unwrap()).unwrap();
    assert_eq!(response["error"], "");
    assert!(response["response"].as_str().unwrap().starts_with("{'chatbot': {'message'"));
}

#[test]
fn refusals_carry_positions() {
    let cases: &[(&str, usize, &str)] = &[
        ("[1 2]", 3, "expected ','"),
        ("{1, 2}", 2, "sets are not supported"),
        ("foo", 0, "not a literal"),
        ("{'a': nan}", 6, "not a literal"),
        ("inf", 0, "not a literal"),
        ("b'x'", 0, "string prefix"),
        ("'a\nb'", 2, "newline inside a string"),
        ("1 2", 2, "trailing"),
        ("01", 0, "invalid number"),
        ("1_000", 1, "unsupported number"),
        ("0x1f", 1, "unsupported number"),
        ("1e999", 0, "invalid number"),
        (r"'\x4g'", 1, "hex escape"),
        ("@", 0, "unexpected character"),
        ("{'a' 1}", 5, "expected ':'"),
        ("{[1]: 2}", 1, "dict keys"),
        ("-", 1, "end of input"),
    ];
    for (input, pos, msg) in cases {
        let e = parse(input).expect_err(input);
        assert_eq!(e.pos, *pos, "{input:?}: {e}");
        assert!(e.to_string().contains(msg), "{input:?}: {e}");
    }
}

#[test]
fn end_of_input_is_flagged() {
    for input in ["{'a': 1", "[1, 2", "'abc", r"'ab\", r"'\u12", "(1,", "Tru", "{'a'", ""] {
        let e = parse(input).expect_err(input);
        assert!(e.eof, "{input:?}: {e}");
        assert_eq!(e.pos, input.len());
    }
    assert!(!parse("[1 2]").unwrap_err().eof);
}

#[test]
fn hostile_nesting_is_refused_without_overflow() {
    for open in ["[", "(", "{'a': "] {
        let deep = open.repeat(100_000);
        let e = parse(&deep).unwrap_err();
        assert!(e.msg.contains("nesting too deep"), "{e}");
    }
    let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert!(parse(&ok).is_ok());
    let too_deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
    assert!(parse(&too_deep).is_err());
    // Long flat input is fine.
    let long = format!("[{}]", "'x', ".repeat(200_000));
    assert_eq!(parse(&long).unwrap().as_array().unwrap().len(), 200_000);
}

#[test]
fn random_input_never_panics() {
    let alphabet: Vec<char> = "{}[](),:'\"\\ \n-+.0123456789eExuUTrueFalsNoné😀abc".chars().collect();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..20_000 {
        let len = (state % 40) as usize;
        let mut s = String::new();
        for _ in 0..len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            s.push(alphabet[(state % alphabet.len() as u64) as usize]);
        }
        let _ = parse(&s);
        let _ = parse_dict_prefix(&s);
        let _ = parse_leading(&s);
    }
}

#[test]
fn leading_value() {
    let (v, end) = parse_leading("  [{'name': 'f'}] and then prose").unwrap();
    assert_eq!(v, json!([{"name": "f"}]));
    assert_eq!(end, 17);
}

#[test]
fn dict_prefixes() {
    // A gpt-3.5 CoT tool message, cut to 100 characters by ToolBench.
    let cut = r#"{'name': 'get_detailed_response_for_advanced_movie_search', 'arguments': '{\n  "movie_id": 862\n}', "#;
    let p = parse_dict_prefix(cut).unwrap();
    assert!(!p.complete);
    assert_eq!(p.entries["name"], "get_detailed_response_for_advanced_movie_search");
    assert_eq!(p.entries["arguments"], "{\n  \"movie_id\": 862\n}");
    assert_eq!(p.cut, None);

    let cut = r#"{'name': 'genre_list_for_advanced_movie_search', 'arguments': '{}', 'response': '{"error": "", "resp"#;
    let p = parse_dict_prefix(cut).unwrap();
    assert_eq!(p.cut, Some(("response".to_string(), r#"{"error": "", "resp"#.to_string())));

    let p = parse_dict_prefix("{'a': 1, 'b': [1, 2").unwrap();
    assert_eq!(p.entries.len(), 1);
    let p = parse_dict_prefix("{'a': 1}").unwrap();
    assert!(p.complete);
    assert!(parse_dict_prefix("{'a' 1").is_err());
    assert!(parse_dict_prefix("[1]").is_err());

    // Every prefix of a full message is a dict prefix whose entries only grow.
    let full = r#"{'name': 'Finish', 'arguments': '{\n  "return_type": "give_answer"\n}', 'response': '\'ok\''}"#;
    let mut seen = 0;
    for (i, _) in full.char_indices().chain([(full.len(), ' ')]) {
        let p = parse_dict_prefix(&full[..i]).unwrap_or_else(|e| panic!("prefix {i}: {e}"));
        assert!(p.entries.len() >= seen, "prefix {i}");
        seen = p.entries.len();
        if i > 17 {
            assert_eq!(p.entries["name"], "Finish", "prefix {i}");
        }
    }
    assert_eq!(seen, 3);
}
