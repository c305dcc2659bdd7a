//! The values a request states, by kind (quoted strings, ISO dates, e-mail
//! addresses, URLs, numbers, countries) and its words: what the
//! deterministic decider fills arguments from ([`super::arguments`]) and
//! weighs documented defaults against ([`super::defaults`]).

use celes::Country;
use regex::Regex;

/// Values found in a request, by kind.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Explicit {
    pub(crate) quoted: Vec<String>,
    pub(crate) dates: Vec<String>,
    pub(crate) emails: Vec<String>,
    pub(crate) urls: Vec<String>,
    pub(crate) numbers: Vec<f64>,
    /// The countries the request names ([`countries_in`]).
    pub(crate) countries: Vec<celes::Country>,
    /// The request's words, lower-case, each once.
    words: std::collections::BTreeSet<String>,
}

impl Explicit {
    /// Whether the request names `value` (its words, in any case).
    pub(crate) fn names(&self, value: &str) -> bool {
        let words: Vec<String> = lower_words(value).collect();
        !words.is_empty() && words.iter().all(|w| self.words.contains(w))
    }
}

fn lower_words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// Finds the explicit values of a request.
pub fn explicit_values(task: &str) -> Explicit {
    fn re(p: &str) -> Regex {
        Regex::new(p).expect("valid pattern")
    }
    let quoted = re(r#""([^"]{1,200})"|'([^']{1,200})'"#);
    let date = re(r"\b(\d{4}-\d{2}-\d{2})\b");
    let email = re(r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b");
    let url = re(r#"\bhttps?://[^\s"'<>]+"#);
    let number = re(r"(?:^|[\s(])(-?\d+(?:\.\d+)?)\b");
    let mut out = Explicit::default();
    for c in quoted.captures_iter(task) {
        if let Some(m) = c.get(1).or_else(|| c.get(2)) {
            out.quoted.push(m.as_str().to_string());
        }
    }
    let dates: Vec<_> = date.find_iter(task).map(|m| m.range()).collect();
    out.dates = dates.iter().map(|r| task[r.clone()].to_string()).collect();
    out.emails = email.find_iter(task).map(|m| m.as_str().to_string()).collect();
    out.urls = url.find_iter(task).map(|m| m.as_str().trim_end_matches(['.', ',', ')']).to_string()).collect();
    // Numbers, except the parts of dates.
    out.numbers = number
        .captures_iter(task)
        .filter_map(|c| c.get(1))
        .filter(|m| !dates.iter().any(|d| d.contains(&m.start())))
        .filter_map(|m| m.as_str().parse().ok())
        .collect();
    out.countries = countries_in(task);
    out.words = lower_words(task).collect();
    out
}

/// The country these words name together, if any ("United States", "Germany").
pub(super) fn named_country(words: &[&str]) -> Option<Country> {
    let joined: String = words.iter().flat_map(|w| w.chars()).filter(char::is_ascii_alphabetic).collect();
    let joined = joined.to_ascii_lowercase();
    if joined.len() < 4 {
        return None;
    }
    Country::from_name(&joined).or_else(|_| Country::from_alias(&joined)).ok()
}

/// The countries `task` names: the longest run of up to five words that
/// names one, or an upper-case ISO code standing alone ("US", "DEU").
pub(crate) fn countries_in(task: &str) -> Vec<Country> {
    let words: Vec<&str> = task.split(|c: char| !c.is_alphanumeric() && c != '.').filter(|w| !w.is_empty()).collect();
    let mut found: Vec<Country> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let longest = (1..=5.min(words.len() - i)).rev().find_map(|n| named_country(&words[i..i + n]).map(|c| (n, c)));
        let code = || {
            let w = words[i].trim_end_matches('.').replace('.', "");
            let upper = (2..=3).contains(&w.len()) && w.chars().all(|c| c.is_ascii_uppercase());
            upper.then(|| Country::from_alpha2(&w).or_else(|_| Country::from_alpha3(&w)).ok()).flatten()
        };
        let (step, country) = match longest {
            Some((n, c)) => (n, Some(c)),
            None => (1, code()),
        };
        if let Some(c) = country.filter(|c| !found.iter().any(|f| f.alpha2 == c.alpha2)) {
            found.push(c);
        }
        i += step;
    }
    found
}
