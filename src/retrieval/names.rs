//! Names spelled out in a request: the exact-name path of every ranking.
//!
//! A request that names a function, tool or API ("call get_current_weather",
//! "use the Current Weather API") wants that one, whatever the other
//! signals say. A name is matched as its words (case, `_`, `-`, spaces and
//! camelCase do not matter), with or without a leading `get`.

use std::collections::{HashMap, HashSet};

/// Longest name, in words, looked for in a text.
const NAME_WORDS: usize = 8;
/// Shortest key (in bytes of UTF-8) a name may be found by.
const MIN_KEY_CHARS: usize = 3;
/// Words that say the words before them name a tool: "the Movies Details API".
pub const TOOL_WORDS: [&str; 5] = ["api", "apis", "tool", "tools", "service"];

/// The words of a name or text, lowercased: split at non-alphanumerics,
/// lower-to-upper case changes and letter-digit edges (no stemming).
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev: Option<char> = None;
    for c in text.chars() {
        let edge =
            prev.is_some_and(|p| (p.is_lowercase() && c.is_uppercase()) || p.is_ascii_digit() != c.is_ascii_digit());
        if (!c.is_alphanumeric() || edge) && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
        prev = Some(c).filter(|c| c.is_alphanumeric());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Names (of tools, APIs, functions) by the words they are spelled with,
/// or by their exact form.
#[derive(Debug, Default)]
pub(crate) struct NameIndex {
    keys: HashMap<String, Vec<u32>>,
    /// Lowercased identifiers (`get_weather_for_x`, `getuserprofile`).
    verbatim: HashMap<String, Vec<u32>>,
}

/// Makes `key` find `id` (once).
fn add(index: &mut HashMap<String, Vec<u32>>, key: String, id: u32) {
    let ids = index.entry(key).or_default();
    if !ids.contains(&id) {
        ids.push(id);
    }
}

/// The identifier-like tokens of a text (letters, digits, `_`, `-`), lowercased.
fn identifiers(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
}

impl NameIndex {
    /// Makes `name` find `id`; `min_words`: spellings with fewer words
    /// are left out (a one-word API name such as "search" is no evidence).
    pub(crate) fn insert(&mut self, name: &str, id: u32, min_words: usize) {
        let w = words(name);
        let mut keys = Vec::new();
        if w.len() >= min_words.max(1) {
            keys.push(w.join(" "));
        }
        if w.len() > min_words.max(1) && w[0] == "get" {
            keys.push(w[1..].join(" "));
        }
        for key in keys.into_iter().filter(|k| k.len() >= MIN_KEY_CHARS) {
            add(&mut self.keys, key, id);
        }
    }

    /// Makes `name` find `id` only when a text writes it as it is (any
    /// case), with or without a leading `get_`: for names whose words are
    /// everyday phrases (`productDetails`, `random_joke_for_jokes`).
    pub(crate) fn insert_verbatim(&mut self, name: &str, id: u32) {
        let lower = name.to_lowercase();
        let mut keys = vec![lower.clone()];
        // Without `get_` it must still read as an identifier, not a word ("get_news": no).
        if let Some(rest) = lower.strip_prefix("get_").filter(|r| r.contains('_')) {
            keys.push(rest.to_string());
        }
        for key in keys {
            add(&mut self.verbatim, key, id);
        }
    }

    /// Drops the keys more than `max` names share (not specific enough).
    pub(crate) fn keep_specific(&mut self, max: usize) {
        self.keys.retain(|_, ids| ids.len() <= max);
        self.verbatim.retain(|_, ids| ids.len() <= max);
    }

    /// The ids whose name `text` spells out: written as they are first,
    /// then by their words, longest names first.
    pub(crate) fn found_in(&self, text: &str) -> Vec<u32> {
        let mut found: Vec<u32> = Vec::new();
        let mut seen = HashSet::new();
        for token in identifiers(text) {
            for &id in self.verbatim.get(&token).into_iter().flatten() {
                if seen.insert(id) {
                    found.push(id);
                }
            }
        }
        let w = words(text);
        for len in (1..=NAME_WORDS.min(w.len())).rev() {
            let mut this_len: Vec<u32> = Vec::new();
            for window in w.windows(len) {
                for &id in self.keys.get(&window.join(" ")).into_iter().flatten() {
                    if seen.insert(id) {
                        this_len.push(id);
                    }
                }
            }
            this_len.sort_unstable();
            found.extend(this_len);
        }
        found
    }

    /// Makes the tool name `name` find `id` by its words (no `get`-less
    /// alias: "getDetails" is a tool's name, "details" is not). Names made
    /// of [`TOOL_WORDS`] alone ("API", "Tools") or of function words alone
    /// ("Other": "ask the other tools" names no tool) are left out.
    pub(crate) fn insert_tool(&mut self, name: &str, id: u32) {
        let w = words(name);
        if w.iter().all(|x| TOOL_WORDS.contains(&x.as_str())) || super::bm25::tokens(name).is_empty() {
            return;
        }
        let key = w.join(" ");
        if key.len() >= MIN_KEY_CHARS {
            add(&mut self.keys, key, id);
        }
    }

    /// The ids of the tool names `text` calls a tool, in the text's order:
    /// for each of [`TOOL_WORDS`], the longest names that end just before
    /// it ("the News Sentiment API") or at it ("the Google News API tool").
    /// Read from the end, so that a name with such a word inside ("Steam
    /// API client access API") is taken whole, not the shorter name in it.
    pub(crate) fn named_as_tools(&self, text: &str) -> Vec<u32> {
        let w = words(text);
        let is_tool_word = |x: &String| TOOL_WORDS.contains(&x.as_str());
        let mut matches: Vec<Vec<u32>> = Vec::new();
        // Words from here on belong to a name already found.
        let mut taken_from = w.len();
        for j in (0..w.len()).rev() {
            if j >= taken_from || !is_tool_word(&w[j]) {
                continue;
            }
            for len in (1..=NAME_WORDS.min(j)).rev() {
                let before = &w[j - len..j];
                if before.iter().all(is_tool_word) {
                    continue;
                }
                let key = before.join(" ");
                let with_word = format!("{key} {}", w[j]);
                let ids: Vec<u32> =
                    [&key, &with_word].into_iter().filter_map(|k| self.keys.get(k)).flatten().copied().collect();
                if !ids.is_empty() {
                    matches.push(ids);
                    taken_from = j - len;
                    break;
                }
            }
        }
        let mut seen = HashSet::new();
        matches.into_iter().rev().flatten().filter(|id| seen.insert(*id)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_found_in_any_spelling() {
        let mut index = NameIndex::default();
        for (i, name) in ["get_current_weather", "sendEmail", "lookup-user", "search"].iter().enumerate() {
            index.insert(name, i as u32, 1);
        }
        assert_eq!(index.found_in("please call get_current_weather for Paris"), [0]);
        assert_eq!(index.found_in("What's the Current Weather in Rome?"), [0]);
        assert_eq!(index.found_in("use SendEmail, then lookup user 7"), [1, 2]);
        assert_eq!(index.found_in("search for hotels"), [3]);
        assert!(index.found_in("nothing here").is_empty());
        assert_eq!(words("HTTPServer v2_API"), ["httpserver", "v", "2", "api"]);
    }

    #[test]
    fn verbatim_names_are_found_only_as_written() {
        let mut index = NameIndex::default();
        index.insert_verbatim("productDetails", 0);
        index.insert_verbatim("get_random_joke_for_jokes", 1);
        assert!(index.found_in("show me the product details").is_empty());
        assert_eq!(index.found_in("call ProductDetails, then random_joke_for_jokes."), [0, 1]);
        assert_eq!(index.found_in("get_random_joke_for_jokes please"), [1]);
    }

    #[test]
    fn tools_are_named_before_api_or_tool() {
        let mut index = NameIndex::default();
        let names =
            ["News Sentiment", "Google News API", "climate", "Climate API", "Sentiment", "API", "getDetails", "Other"];
        for (i, name) in names.iter().enumerate() {
            index.insert_tool(name, i as u32);
        }
        assert_eq!(index.named_as_tools("Rate it with the News Sentiment API, please."), [0], "the longest name");
        assert_eq!(index.named_as_tools("one article from the Google News API tool"), [1]);
        assert_eq!(index.named_as_tools("ask the climate API"), [2, 3], "with and without the word, one length");
        assert!(index.named_as_tools("news sentiment of today, and the API docs").is_empty(), "not before the word");
        assert!(index.named_as_tools("API api API tool").is_empty(), "a name of tool words only is no name");
        assert!(index.named_as_tools("the details API").is_empty(), "no get-less alias for tools");
        assert!(index.named_as_tools("then ask the other tools").is_empty(), "function words name nothing");
        assert_eq!(index.named_as_tools("getDetails API, then Sentiment API"), [6, 4], "in the text's order");
        assert!(index.named_as_tools("").is_empty() && index.named_as_tools("API first").is_empty());
    }

    #[test]
    fn a_tool_word_inside_a_name_does_not_cut_it() {
        let mut index = NameIndex::default();
        for (i, name) in ["Steam", "Steam API", "Steam API client access", "API WhatsApp"].iter().enumerate() {
            index.insert_tool(name, i as u32);
        }
        assert_eq!(index.named_as_tools("use the Steam API client access API"), [2]);
        assert_eq!(index.named_as_tools("with the API WhatsApp API"), [3], "a name may start with a tool word");
        assert_eq!(index.named_as_tools("the Steam API, then the Steam tool"), [0, 1], "\"Steam\" both times");
    }

    #[test]
    fn short_and_shared_names_are_left_out() {
        let mut index = NameIndex::default();
        index.insert("search", 0, 2);
        index.insert("Search Hotels", 1, 2);
        index.insert("search hotels", 2, 2);
        index.insert("hotel details", 3, 2);
        index.keep_specific(1);
        assert!(index.found_in("search hotels").is_empty(), "shared by two names");
        assert_eq!(index.found_in("the hotel details please"), [3]);
    }
}
