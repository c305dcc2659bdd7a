//! JSON that arrives as text: a body served as `text/plain`, JSON text in
//! a string field, a Python `repr()` of a dict (how ToolBench trajectories
//! record observations), or any of these cut off by a length limit.
//!
//! [`parse`] reads such text as the value it stands for. A text cut short
//! is completed first: the partial scalar at the end is dropped, a string
//! value cut mid-way is closed (keeping what arrived), a key left without
//! its value is dropped, and the open containers are closed. Crates that
//! repair JSON target JSON only; ToolBench's observations are also Python
//! literals, so the completion is written here over both syntaxes, and the
//! result is read by `serde_json`, else by [`crate::trajectory::pyliteral`].

use serde_json::Value;

use crate::trajectory::pyliteral;

/// How [`parse`] read a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    Json,
    PythonLiteral,
    /// The text was cut short and had to be completed.
    Completed,
}

/// The object or array a text stands for; `None` for text that is not one
/// (prose, a bare number, markup).
pub(crate) fn parse(text: &str) -> Option<(Value, Read)> {
    let trimmed = text.trim();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
        return None;
    }
    if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
        return Some((v, Read::Json));
    }
    if let Ok(v) = pyliteral::parse(trimmed) {
        return Some((v, Read::PythonLiteral));
    }
    // A cut text often says so at its end.
    let cut = trimmed.trim_end_matches("...").trim_end_matches('…').trim_end();
    let completed = complete(cut)?;
    let value = serde_json::from_str::<Value>(&completed).ok().or_else(|| pyliteral::parse(&completed).ok())?;
    Some((value, Read::Completed))
}

/// Where the scanner is, inside the innermost container.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// An object's key (or its end).
    Key,
    /// The `:` after a key.
    Colon,
    /// A value (an array element or an object's value).
    Value,
    /// A `,` or the container's end.
    Next,
}

/// `text` cut short, completed so that it parses; `None` when it is not a
/// prefix of a document at all. One loop over the bytes with its state
/// (the expected token, the open containers) in locals: a scanner, long
/// because JSON has that many cases, each a few lines.
fn complete(text: &str) -> Option<String> {
    // Closers of the open containers, innermost last.
    let mut closers: Vec<char> = Vec::new();
    let mut expect = Expect::Value;
    // The longest prefix known to complete, and how many containers it
    // leaves open. Only a pop can change the stack below a depth, and a pop
    // records a new prefix: the first `depth` closers at the end are the
    // ones that prefix needs (kept as a depth, so the scan stays linear).
    let mut good: Option<(usize, usize)> = None;
    let mut chars = text.char_indices().peekable();
    let close_all = |closers: &[char]| closers.iter().rev().collect::<String>();
    while let Some((i, c)) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '{' | '[' | '(' if expect == Expect::Value => {
                closers.push(match c {
                    '{' => '}',
                    '[' => ']',
                    _ => ')',
                });
                expect = if c == '{' { Expect::Key } else { Expect::Value };
                good = Some((i + 1, closers.len()));
            }
            '}' | ']' | ')'
                if closers.last() == Some(&c) && matches!(expect, Expect::Key | Expect::Value | Expect::Next) =>
            {
                closers.pop();
                expect = Expect::Next;
                if closers.is_empty() {
                    return None; // A complete document: nothing to complete.
                }
                good = Some((i + 1, closers.len()));
            }
            '"' | '\'' if matches!(expect, Expect::Key | Expect::Value) => {
                let is_key = expect == Expect::Key;
                let mut end = None;
                while let Some((j, d)) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        d if d == c => {
                            end = Some(j);
                            break;
                        }
                        _ => {}
                    }
                }
                match end {
                    Some(_) if is_key => expect = Expect::Colon,
                    Some(j) => {
                        expect = Expect::Next;
                        good = Some((j + 1, closers.len()));
                    }
                    // Cut inside a value string: close it with what arrived
                    // (an escape cut in two dropped).
                    None if !is_key && !closers.is_empty() => {
                        let kept = without_cut_escape(&text[i..]);
                        return Some(format!("{}{kept}{c}{}", &text[..i], close_all(&closers)));
                    }
                    None => break,
                }
            }
            ':' if expect == Expect::Colon => expect = Expect::Value,
            ',' if expect == Expect::Next => {
                expect = if closers.last() == Some(&'}') { Expect::Key } else { Expect::Value };
            }
            _ if expect == Expect::Value && !closers.is_empty() => {
                // A scalar: up to the next delimiter; complete only if one follows.
                let mut end = None;
                while let Some(&(j, d)) = chars.peek() {
                    if d.is_whitespace() || matches!(d, ',' | '}' | ']' | ')') {
                        end = Some(j);
                        break;
                    }
                    chars.next();
                }
                let Some(j) = end else { break };
                expect = Expect::Next;
                good = Some((j, closers.len()));
            }
            _ => return None,
        }
    }
    let (at, depth) = good?;
    Some(format!("{}{}", &text[..at], close_all(&closers[..depth])))
}

/// `text` without an escape sequence cut off at its end (`\`, `\u00`,
/// `\x4`), or the first half of a surrogate pair whose second half was cut.
fn without_cut_escape(text: &str) -> &str {
    let text = without_cut_sequence(text);
    let at = text.len().saturating_sub(6);
    if text.is_char_boundary(at) && is_high_surrogate(&text[at..]) {
        return &text[..at];
    }
    text
}

/// `\uD800`–`\uDBFF`: the first half of a surrogate pair (unless its
/// backslash is itself escaped).
fn is_high_surrogate(escape: &str) -> bool {
    let hex = escape.strip_prefix("\\u").and_then(|h| u16::from_str_radix(h, 16).ok());
    hex.is_some_and(|h| (0xD800..0xDC00).contains(&h))
}

fn without_cut_sequence(text: &str) -> &str {
    let Some(at) = text.rfind('\\') else { return text };
    let backslashes = text[..=at].chars().rev().take_while(|&c| c == '\\').count();
    if backslashes % 2 == 0 {
        return text; // `\\`: an escaped backslash, complete.
    }
    let rest = &text[at + 1..];
    let needed = match rest.chars().next() {
        None => return &text[..at],
        Some('u') => 5,
        Some('x') => 3,
        Some('U') => 9,
        Some(_) => return text,
    };
    if rest.len() < needed { &text[..at] } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str) -> Option<Value> {
        parse(text).map(|(v, _)| v)
    }

    #[test]
    fn whole_documents_parse_as_json_or_python() {
        assert_eq!(parse(r#"{"a": [1, 2]}"#), Some((json!({"a": [1, 2]}), Read::Json)));
        assert_eq!(parse("{'a': True, 'b': None}"), Some((json!({"a": true, "b": null}), Read::PythonLiteral)));
        assert_eq!(parse("The postal code 88888 does not…"), None);
        assert_eq!(parse("42"), None);
        assert_eq!(parse("<html>{</html>"), None);
    }

    #[test]
    fn cut_documents_keep_what_arrived() {
        // A string value cut mid-way keeps its start.
        assert_eq!(read(r#"{"name": "Berl"#), Some(json!({"name": "Berl"})));
        // A key without its value is dropped; so is a cut number.
        assert_eq!(read(r#"{"a": 1, "b": "#), Some(json!({"a": 1})));
        assert_eq!(read(r#"{"a": 1, "b": 12"#), Some(json!({"a": 1})));
        assert_eq!(read(r#"{"a": 1, "bc"#), Some(json!({"a": 1})));
        assert_eq!(read(r#"[{"x": [1, 2, {"y": "z"}, "#), Some(json!([{"x": [1, 2, {"y": "z"}]}])));
        assert_eq!(read(r#"{"a": tr"#), Some(json!({})));
        // Python literals cut short, escapes included; a last number that
        // may be cut (`2` of `23`) is dropped.
        assert_eq!(read(r"{'a': 'it\'s', 'b': [1, 2"), Some(json!({"a": "it's", "b": [1]})));
        assert_eq!(read(r#"{"s": "tab\"#), Some(json!({"s": "tab"})));
        assert_eq!(read(r#"{"s": "caf\u00"#), Some(json!({"s": "caf"})));
        assert_eq!(read(r#"{"s": "smile \ud83d\ude0"#), Some(json!({"s": "smile "})));
        assert_eq!(read(r#"{"s": "smile \ud83d"#), Some(json!({"s": "smile "})));
        assert_eq!(read(r#"{"s": "a\\"#), Some(json!({"s": "a\\"})));
        // ToolBench marks a cut with an ellipsis.
        assert_eq!(read(r#"[{"id": "930"}, {"id": "931",..."#), Some(json!([{"id": "930"}, {"id": "931"}])));
        assert_eq!(read(r#"{"utc": "+05:00"..."#), Some(json!({"utc": "+05:00"})));
        let (_, how) = parse(r#"{"a": [1"#).unwrap();
        assert_eq!(how, Read::Completed);
        // Deep nesting cut short stays linear and completes.
        let deep = "[".repeat(100_000);
        assert_eq!(complete(&deep).map(|c| c.len()), Some(200_000));
        // Not a prefix of a document at all.
        assert_eq!(read(r#"{"a" 1"#), None);
        assert_eq!(read(r#"{"a": 1}} trailing"#), None);
    }
}
