//! A small parser for Python literals (`repr()` output), producing [`serde_json::Value`].
//!
//! StepTool and StableToolBench write trajectory steps with Python's `str(dict)`:
//! `{'name': 'f', 'arguments': '{"q": 1}', 'response': '...'}` — single-quoted
//! strings with backslash escapes, `True`/`False`/`None`, tuples. That is not JSON,
//! and no Rust crate parses Python literals without embedding a whole Python
//! parser (RustPython's) or an interpreter, so this module is hand-written: a
//! recursive-descent parser for exactly the subset `ast.literal_eval` accepts for
//! `repr()` of dicts, lists, tuples, strings, numbers, booleans and `None`.
//!
//! Accepted: `'..'` and `".."` strings (escapes `\n \t \r \' \" \\ \a \b \f \v`,
//! octal `\0`..`\777`, `\xNN`, `\uNNNN`, `\UNNNNNNNN`, backslash-newline; unknown
//! escapes are kept verbatim, as Python does), ints (big ones become floats),
//! floats, `True`/`False`/`None`, dicts, lists, tuples (as arrays), trailing commas.
//! Everything else (sets, names, calls, string prefixes, raw newlines inside
//! strings, `inf`/`nan`) is refused with an error carrying the byte offset.
//! Nesting is limited to [`MAX_DEPTH`] so hostile input cannot blow the stack.
//!
//! [`parse_dict_prefix`] reads a dict literal that was cut short (the
//! ToolBench gpt-3.5 CoT answers truncate tool messages to 100 characters) and
//! returns the entries that were complete plus the prefix of a cut string value.

use serde_json::{Map, Number, Value};

/// Maximum nesting of containers (dicts, lists, tuples).
pub(crate) const MAX_DEPTH: usize = 128;

/// Why a literal could not be parsed, with the byte offset where it failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("python literal: {msg} at byte {pos}")]
pub(crate) struct PyLiteralError {
    /// Byte offset in the input.
    pub(crate) pos: usize,
    pub(crate) msg: String,
    /// The input ended before the literal did (it may have been truncated).
    pub(crate) eof: bool,
}

/// Parses one complete Python literal; surrounding whitespace is allowed.
pub(crate) fn parse(text: &str) -> Result<Value, PyLiteralError> {
    let mut p = Parser::new(text);
    let v = p.value(0)?;
    p.skip_ws();
    if p.pos < p.src.len() {
        return Err(p.err("unexpected trailing characters"));
    }
    Ok(v)
}

/// Parses the literal at the start of `text` (after whitespace) and returns
/// it with the byte offset where it ends; what follows is not examined.
pub(crate) fn parse_leading(text: &str) -> Result<(Value, usize), PyLiteralError> {
    let mut p = Parser::new(text);
    let v = p.value(0)?;
    Ok((v, p.pos))
}

/// A dict literal read up to where its text ends.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PartialDict {
    /// Entries whose key and value were complete, in order.
    pub(crate) entries: Map<String, Value>,
    /// The closing `}` was reached.
    pub(crate) complete: bool,
    /// Key and decoded prefix of a string value cut by the end of the text.
    pub(crate) cut: Option<(String, String)>,
}

/// Parses a dict literal that may be cut short. Errors only when the text is
/// not a dict prefix at all (a syntax error before the end of the input).
pub(crate) fn parse_dict_prefix(text: &str) -> Result<PartialDict, PyLiteralError> {
    let mut p = Parser::new(text);
    let mut out = PartialDict::default();
    p.skip_ws();
    if p.peek().is_none() {
        return Ok(out);
    }
    p.expect(b'{')?;
    loop {
        p.skip_ws();
        match p.peek() {
            None => return Ok(out),
            Some(b'}') => {
                p.pos += 1;
                p.skip_ws();
                if p.pos < p.src.len() {
                    return Err(p.err("unexpected trailing characters"));
                }
                out.complete = true;
                return Ok(out);
            }
            _ => {}
        }
        let key = match p.value(1) {
            Ok(k) => key_string(k).map_err(|m| p.err(m))?,
            Err(e) if e.eof => return Ok(out),
            Err(e) => return Err(e),
        };
        p.skip_ws();
        if p.peek().is_none() {
            return Ok(out);
        }
        p.expect(b':')?;
        p.skip_ws();
        if matches!(p.peek(), Some(b'\'' | b'"')) {
            let mut partial = String::new();
            match p.string_into(&mut partial) {
                Ok(()) => {
                    out.entries.insert(key, Value::String(partial));
                }
                Err(e) if e.eof => {
                    out.cut = Some((key, partial));
                    return Ok(out);
                }
                Err(e) => return Err(e),
            }
        } else {
            match p.value(1) {
                Ok(v) => {
                    out.entries.insert(key, v);
                }
                Err(e) if e.eof => return Ok(out),
                Err(e) => return Err(e),
            }
        }
        p.skip_ws();
        match p.peek() {
            None => return Ok(out),
            Some(b',') => p.pos += 1,
            Some(b'}') => {}
            Some(_) => return Err(p.err("expected ',' or '}'")),
        }
    }
}

struct Parser<'a> {
    src: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Parser { src: text.as_bytes(), text, pos: 0 }
    }

    fn err(&self, msg: impl Into<String>) -> PyLiteralError {
        PyLiteralError { pos: self.pos, msg: msg.into(), eof: false }
    }

    fn eof_err(&self, msg: impl Into<String>) -> PyLiteralError {
        PyLiteralError { pos: self.src.len(), msg: msg.into(), eof: true }
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect(&mut self, b: u8) -> Result<(), PyLiteralError> {
        match self.peek() {
            Some(c) if c == b => {
                self.pos += 1;
                Ok(())
            }
            Some(_) => Err(self.err(format!("expected '{}'", b as char))),
            None => Err(self.eof_err(format!("expected '{}', found end of input", b as char))),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, PyLiteralError> {
        self.skip_ws();
        let Some(c) = self.peek() else {
            return Err(self.eof_err("expected a value, found end of input"));
        };
        match c {
            b'{' | b'[' | b'(' if depth >= MAX_DEPTH => Err(self.err("nesting too deep")),
            b'{' => self.dict(depth + 1),
            b'[' => self.sequence(b']', depth + 1).map(Value::Array),
            b'(' => self.tuple(depth + 1),
            b'\'' | b'"' => {
                let mut s = String::new();
                self.string_into(&mut s)?;
                Ok(Value::String(s))
            }
            b'-' | b'+' | b'.' | b'0'..=b'9' => self.number(),
            c if c.is_ascii_alphabetic() || c == b'_' => self.name(),
            _ => Err(self.err(format!("unexpected character {:?}", self.char_at(self.pos)))),
        }
    }

    fn char_at(&self, pos: usize) -> char {
        self.text.get(pos..).and_then(|s| s.chars().next()).unwrap_or('\u{FFFD}')
    }

    fn name(&mut self) -> Result<Value, PyLiteralError> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == b'_' {
                self.pos += 1;
            } else {
                break;
            }
        }
        let word = &self.text[start..self.pos];
        match word {
            "True" => Ok(Value::Bool(true)),
            "False" => Ok(Value::Bool(false)),
            "None" => Ok(Value::Null),
            _ if matches!(self.peek(), Some(b'\'' | b'"')) => {
                self.pos = start;
                Err(self.err(format!("string prefix {word:?} is not supported")))
            }
            _ => {
                self.pos = start;
                if start + word.len() == self.src.len() && ["True", "False", "None"].iter().any(|k| k.starts_with(word))
                {
                    return Err(self.eof_err(format!("name {word:?} cut by end of input")));
                }
                Err(self.err(format!("name {word:?} is not a literal")))
            }
        }
    }

    fn number(&mut self) -> Result<Value, PyLiteralError> {
        let start = self.pos;
        if let Some(b'-' | b'+') = self.peek() {
            self.pos += 1;
            self.skip_ws();
        }
        let digits_start = self.pos;
        let mut is_float = false;
        let mut seen_digit = false;
        while let Some(c) = self.peek() {
            match c {
                b'0'..=b'9' => seen_digit = true,
                b'.' => is_float = true,
                b'e' | b'E' => {
                    is_float = true;
                    if let Some(b'-' | b'+') = self.src.get(self.pos + 1) {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
            self.pos += 1;
        }
        if let Some(c) = self.peek()
            && (c.is_ascii_alphabetic() || c == b'_')
        {
            return Err(self.err("unsupported number syntax"));
        }
        if !seen_digit {
            if self.pos == self.src.len() {
                return Err(self.eof_err("number cut by end of input"));
            }
            return Err(self.err("expected a number"));
        }
        let negative = self.src[start] == b'-';
        let text = self.text;
        let body = &text[digits_start..self.pos];
        let bad = || PyLiteralError { pos: start, msg: format!("invalid number {body:?}"), eof: false };
        if !is_float {
            if body.len() > 1 && body.starts_with('0') && body.bytes().any(|b| b != b'0') {
                return Err(bad());
            }
            let signed = if negative { format!("-{body}") } else { body.to_string() };
            if let Ok(i) = signed.parse::<i64>() {
                return Ok(Value::Number(i.into()));
            }
            if let Ok(u) = signed.parse::<u64>() {
                return Ok(Value::Number(u.into()));
            }
        }
        let f: f64 = body.parse().map_err(|_| bad())?;
        let f = if negative { -f } else { f };
        Number::from_f64(f).map(Value::Number).ok_or_else(bad)
    }

    fn string_into(&mut self, out: &mut String) -> Result<(), PyLiteralError> {
        let quote = self.src[self.pos];
        self.pos += 1;
        loop {
            // Copy a run of ordinary characters in one go.
            let run_start = self.pos;
            while let Some(c) = self.peek() {
                if c == quote || c == b'\\' || c == b'\n' || c == b'\r' {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[run_start..self.pos]);
            match self.peek() {
                None => return Err(self.eof_err("unterminated string")),
                Some(b'\n' | b'\r') => return Err(self.err("newline inside a string literal")),
                Some(c) if c == quote => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => self.escape(out)?,
            }
        }
    }

    /// One escape sequence of a string literal into `out`: one `match` over
    /// Python's escapes (`\x`, `\u`, `\U`, octal, line continuations, the
    /// one-letter ones), long because Python has that many.
    fn escape(&mut self, out: &mut String) -> Result<(), PyLiteralError> {
        let start = self.pos;
        self.pos += 1; // the backslash
        let Some(c) = self.peek() else {
            return Err(self.eof_err("unterminated escape"));
        };
        self.pos += 1;
        let simple = match c {
            b'n' => Some('\n'),
            b't' => Some('\t'),
            b'r' => Some('\r'),
            b'\\' => Some('\\'),
            b'\'' => Some('\''),
            b'"' => Some('"'),
            b'a' => Some('\u{07}'),
            b'b' => Some('\u{08}'),
            b'f' => Some('\u{0C}'),
            b'v' => Some('\u{0B}'),
            _ => None,
        };
        if let Some(ch) = simple {
            out.push(ch);
            return Ok(());
        }
        match c {
            b'\n' => Ok(()),
            b'\r' => {
                if self.peek() == Some(b'\n') {
                    self.pos += 1;
                }
                Ok(())
            }
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                for _ in 0..2 {
                    match self.peek() {
                        Some(d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            self.pos += 1;
                        }
                        _ => break,
                    }
                }
                out.push(char::from_u32(v).unwrap_or('\u{FFFD}'));
                Ok(())
            }
            b'x' => {
                let v = self.hex(2, start)?;
                out.push(char::from_u32(v).unwrap_or('\u{FFFD}'));
                Ok(())
            }
            b'u' | b'U' => {
                let v = self.hex(if c == b'u' { 4 } else { 8 }, start)?;
                if (0xD800..0xDC00).contains(&v) {
                    // A high surrogate: Python keeps it alone; join it with a following low one.
                    let save = self.pos;
                    if self.src.get(self.pos..self.pos + 2) == Some(b"\\u") {
                        self.pos += 2;
                        if let Ok(lo) = self.hex(4, save)
                            && (0xDC00..0xE000).contains(&lo)
                        {
                            let cp = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
                            out.push(char::from_u32(cp).unwrap_or('\u{FFFD}'));
                            return Ok(());
                        }
                        self.pos = save;
                    }
                }
                match char::from_u32(v) {
                    Some(ch) => out.push(ch),
                    None if v <= 0x10FFFF => out.push('\u{FFFD}'), // lone surrogate
                    None => return Err(PyLiteralError { pos: start, msg: "escape out of range".into(), eof: false }),
                }
                Ok(())
            }
            _ => {
                // Unknown escape: Python keeps the backslash and the character.
                out.push('\\');
                self.pos -= 1;
                let ch = self.char_at(self.pos);
                out.push(ch);
                self.pos += ch.len_utf8();
                Ok(())
            }
        }
    }

    fn hex(&mut self, n: usize, start: usize) -> Result<u32, PyLiteralError> {
        let mut v: u32 = 0;
        for _ in 0..n {
            match self.peek() {
                Some(d) if d.is_ascii_hexdigit() => {
                    v = v.saturating_mul(16).saturating_add((d as char).to_digit(16).unwrap_or(0));
                    self.pos += 1;
                }
                None => return Err(self.eof_err("truncated escape")),
                Some(_) => {
                    return Err(PyLiteralError { pos: start, msg: "truncated hex escape".into(), eof: false });
                }
            }
        }
        Ok(v)
    }

    fn dict(&mut self, depth: usize) -> Result<Value, PyLiteralError> {
        self.pos += 1; // '{'
        let mut map = Map::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => return Err(self.eof_err("unterminated dict")),
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                _ => {}
            }
            let key_pos = self.pos;
            let key = self.value(depth)?;
            let key = key_string(key).map_err(|m| PyLiteralError { pos: key_pos, msg: m, eof: false })?;
            self.skip_ws();
            match self.peek() {
                Some(b':') => self.pos += 1,
                Some(b',' | b'}') => return Err(self.err("sets are not supported")),
                Some(_) => return Err(self.err("expected ':'")),
                None => return Err(self.eof_err("unterminated dict")),
            }
            let v = self.value(depth)?;
            map.insert(key, v);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {}
                Some(_) => return Err(self.err("expected ',' or '}'")),
                None => return Err(self.eof_err("unterminated dict")),
            }
        }
    }

    /// Items up to `close`, with optional trailing comma; the opener is at `pos`.
    fn sequence(&mut self, close: u8, depth: usize) -> Result<Vec<Value>, PyLiteralError> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => return Err(self.eof_err("unterminated sequence")),
                Some(c) if c == close => {
                    self.pos += 1;
                    return Ok(items);
                }
                _ => {}
            }
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(c) if c == close => {}
                Some(_) => return Err(self.err(format!("expected ',' or '{}'", close as char))),
                None => return Err(self.eof_err("unterminated sequence")),
            }
        }
    }

    /// `()` and `(a,)` are tuples; `(a)` is just `a`, as in Python.
    fn tuple(&mut self, depth: usize) -> Result<Value, PyLiteralError> {
        let open = self.pos;
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(b')') {
            self.pos += 1;
            return Ok(Value::Array(Vec::new()));
        }
        let first = self.value(depth)?;
        self.skip_ws();
        match self.peek() {
            Some(b')') => {
                self.pos += 1;
                Ok(first)
            }
            Some(b',') => {
                self.pos = open;
                self.sequence(b')', depth).map(Value::Array)
            }
            Some(_) => Err(self.err("expected ',' or ')'")),
            None => Err(self.eof_err("unterminated tuple")),
        }
    }
}

/// JSON object keys must be strings: Python scalars are spelled as Python would.
fn key_string(key: Value) -> Result<String, String> {
    match key {
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(true) => Ok("True".into()),
        Value::Bool(false) => Ok("False".into()),
        Value::Null => Ok("None".into()),
        _ => Err("dict keys must be strings, numbers, booleans or None".into()),
    }
}
