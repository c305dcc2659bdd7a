//! Lexical retrieval: Okapi BM25 over the API documents.
//!
//! Tokens are the alphanumeric runs of the text, split again at camelCase
//! and letter/digit boundaries (`getCompanyDetails` → get, company,
//! details), lower-cased, without English function words and request
//! filler ("can you please…"), and stemmed with Snowball English. Chinese,
//! Japanese and Korean text, written without spaces between words, is
//! indexed by overlapping character pairs (`天气预报` → 天气, 气预, 预报;
//! a lone character as itself), as Lucene's CJK analyzer does. Scores
//! are BM25 with k1 = 1.2, b = 0.75; each distinct query term counts once.
//!
//! Hand-written rather than a search-engine crate: the index is a few
//! postings lists that must serialize with the rest of toolrouter's index,
//! and the tokenizer is where the tuning is.

use std::collections::HashMap;
use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};
use serde::{Deserialize, Serialize};

/// Bump when [`tokens`] changes: stored postings are then rebuilt.
pub(crate) const TOKENIZER_VERSION: u32 = 2;
/// BM25 term-frequency saturation.
pub(crate) const K1: f32 = 1.2;
/// BM25 length normalization.
pub(crate) const B: f32 = 0.75;

/// Function words and request filler; never indexed or searched.
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "been",
    "being",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "him",
    "his",
    "how",
    "i",
    "if",
    "im",
    "in",
    "into",
    "is",
    "it",
    "its",
    "just",
    "me",
    "might",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "out",
    "over",
    "own",
    "please",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "us",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "ll",
    "ve",
    "re",
    "s",
    "t",
    "d",
    "m",
    "additionally",
    "want",
    "need",
    "know",
    "help",
    "like",
    "provide",
    "tell",
    "let",
    "also",
    "e",
    "g",
    "etc",
];

fn stemmer() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

fn is_stopword(word: &str) -> bool {
    static SET: OnceLock<std::collections::HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| STOPWORDS.iter().copied().collect()).contains(word)
}

/// Whether `c` is written in a script without spaces between words (CJK).
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F) // CJK Extensions B–F, Compatibility Supplement
}

/// The index terms of a text, in order (repeats kept).
pub(crate) fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut cjk: Vec<char> = Vec::new();
    let mut prev: Option<char> = None;
    let flush = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() {
            let lower = word.to_lowercase();
            if !is_stopword(&lower) {
                out.push(stemmer().stem(&lower).into_owned());
            }
            word.clear();
        }
    };
    let flush_cjk = |run: &mut Vec<char>, out: &mut Vec<String>| {
        match run.len() {
            0 => {}
            1 => out.push(run[0].to_string()),
            _ => out.extend(run.windows(2).map(|pair| pair.iter().collect::<String>())),
        }
        run.clear();
    };
    for c in text.chars() {
        if is_cjk(c) {
            flush(&mut word, &mut out);
            cjk.push(c);
            prev = None;
            continue;
        }
        flush_cjk(&mut cjk, &mut out);
        if !c.is_alphanumeric() {
            flush(&mut word, &mut out);
            prev = None;
            continue;
        }
        if let Some(p) = prev {
            let camel = p.is_lowercase() && c.is_uppercase();
            let digit_edge = p.is_ascii_digit() != c.is_ascii_digit();
            if camel || digit_edge {
                flush(&mut word, &mut out);
            }
        }
        word.push(c);
        prev = Some(c);
    }
    flush(&mut word, &mut out);
    flush_cjk(&mut cjk, &mut out);
    out
}

/// A BM25 index over documents numbered 0..n.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Bm25 {
    terms: HashMap<String, u32>,
    /// Per term: (document, term frequency), documents ascending.
    postings: Vec<Vec<(u32, u32)>>,
    doc_len: Vec<u32>,
    avg_len: f32,
}

/// A document of an index made from another ([`Bm25::carry_over`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Carried<'a> {
    /// The other index's document, unchanged.
    Kept(u32),
    /// A document to index.
    New(&'a str),
}

impl Bm25 {
    /// Indexes `documents`; document `i` is `documents[i]`.
    pub(crate) fn build(documents: &[String]) -> Bm25 {
        let mut index = Bm25 { doc_len: Vec::with_capacity(documents.len()), ..Bm25::default() };
        let mut total = 0u64;
        for (doc, text) in documents.iter().enumerate() {
            let toks = tokens(text);
            index.doc_len.push(toks.len() as u32);
            total += toks.len() as u64;
            let mut counts: HashMap<&str, u32> = HashMap::new();
            for t in &toks {
                *counts.entry(t.as_str()).or_default() += 1;
            }
            for (term, tf) in &counts {
                let next = index.terms.len() as u32;
                let id = *index.terms.entry((*term).to_string()).or_insert(next);
                if id as usize == index.postings.len() {
                    index.postings.push(Vec::new());
                }
                index.postings[id as usize].push((doc as u32, *tf));
            }
        }
        index.avg_len = if documents.is_empty() { 0.0 } else { total as f32 / documents.len() as f32 };
        index
    }

    /// The index of `documents` made from this one: `Kept(d)` is this
    /// index's document `d` unchanged (its postings are moved over, not
    /// tokenized again), `New(text)` is indexed here. Rebuilding the
    /// catalog's 47,000 API documents takes about a second, nearly all of it
    /// tokenizing; carrying them over takes a few hundredths
    /// (docs/benchmarks.md, "A catalog that changes").
    pub(crate) fn carry_over(&self, documents: &[Carried<'_>]) -> Bm25 {
        let mut new_of_old: Vec<Option<u32>> = vec![None; self.len()];
        let mut index =
            Bm25 { terms: self.terms.clone(), doc_len: Vec::with_capacity(documents.len()), ..Bm25::default() };
        index.postings = vec![Vec::new(); self.postings.len()];
        let mut added: Vec<(u32, Vec<String>)> = Vec::new();
        for (doc, carried) in documents.iter().enumerate() {
            match carried {
                Carried::Kept(old) => {
                    new_of_old[*old as usize] = Some(doc as u32);
                    index.doc_len.push(self.doc_len[*old as usize]);
                }
                Carried::New(text) => {
                    let toks = tokens(text);
                    index.doc_len.push(toks.len() as u32);
                    added.push((doc as u32, toks));
                }
            }
        }
        for (term, postings) in self.postings.iter().enumerate() {
            let kept = &mut index.postings[term];
            kept.extend(postings.iter().filter_map(|&(old, tf)| new_of_old[old as usize].map(|new| (new, tf))));
        }
        for (doc, toks) in &added {
            let mut counts: HashMap<&str, u32> = HashMap::new();
            for t in toks {
                *counts.entry(t.as_str()).or_default() += 1;
            }
            for (term, tf) in counts {
                let next = index.terms.len() as u32;
                let id = *index.terms.entry(term.to_string()).or_insert(next);
                if id as usize == index.postings.len() {
                    index.postings.push(Vec::new());
                }
                index.postings[id as usize].push((*doc, tf));
            }
        }
        // Search needs no order, but equal indexes should look equal.
        for postings in &mut index.postings {
            postings.sort_unstable_by_key(|&(doc, _)| doc);
        }
        let total: u64 = index.doc_len.iter().map(|&l| u64::from(l)).sum();
        index.avg_len = if documents.is_empty() { 0.0 } else { total as f32 / documents.len() as f32 };
        index
    }

    /// Number of documents.
    pub(crate) fn len(&self) -> usize {
        self.doc_len.len()
    }

    /// The `k` best documents for `query`, best first; `mask[d]` says whether
    /// document `d` may be returned (`None`: all may).
    pub(crate) fn search(&self, query: &str, k: usize, mask: Option<&[bool]>) -> Vec<(u32, f32)> {
        let n = self.len() as f32;
        let mut terms = tokens(query);
        terms.sort();
        terms.dedup();
        // A flat score array beats a map: common terms touch thousands of documents.
        let mut scores = vec![0f32; self.len()];
        let mut touched: Vec<u32> = Vec::new();
        for term in &terms {
            let Some(&id) = self.terms.get(term) else { continue };
            let postings = &self.postings[id as usize];
            let df = postings.len() as f32;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(doc, tf) in postings {
                let tf = tf as f32;
                let len = self.doc_len[doc as usize] as f32;
                let norm = tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / self.avg_len.max(1.0)));
                let slot = &mut scores[doc as usize];
                if *slot == 0.0 {
                    touched.push(doc);
                }
                *slot += idf * norm;
            }
        }
        let mut hits: Vec<(u32, f32)> = touched
            .into_iter()
            .filter(|&d| mask.is_none_or(|m| m[d as usize]))
            .map(|d| (d, scores[d as usize]))
            .collect();
        top_k(&mut hits, k);
        hits
    }
}

/// Keeps the `k` highest-scoring entries, sorted best first (ties by id).
pub(crate) fn top_k(hits: &mut Vec<(u32, f32)>, k: usize) {
    let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if hits.len() > k && k > 0 {
        hits.select_nth_unstable_by(k - 1, order);
        hits.truncate(k);
    }
    hits.sort_by(order);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_split_case_and_digits_and_stem() {
        assert_eq!(tokens("getCompanyDetails"), ["get", "compani", "detail"]);
        assert_eq!(tokens("Can you please tell me the 120HourForecast?"), ["120", "hour", "forecast"]);
        assert_eq!(tokens("holidays_by_country-code"), ["holiday", "countri", "code"]);
        assert!(tokens("").is_empty());
    }

    #[test]
    fn cjk_text_is_indexed_by_character_pairs() {
        assert_eq!(tokens("明天柏林的天气"), ["明天", "天柏", "柏林", "林的", "的天", "天气"]);
        assert_eq!(tokens("查询天气API forecast"), ["查询", "询天", "天气", "api", "forecast"]);
        assert_eq!(tokens("東京の天気"), ["東京", "京の", "の天", "天気"]);
        assert_eq!(tokens("날씨 예보"), ["날씨", "예보"]);
        assert_eq!(tokens("a 天 b"), ["天", "b"], "a lone character is a term; `a` is a stop word");
        let docs: Vec<String> =
            ["获取城市的天气预报", "查询股票价格", "Get the weather forecast"].map(String::from).to_vec();
        let hits = Bm25::build(&docs).search("明天北京天气怎么样？", 3, None);
        assert_eq!(hits[0].0, 0, "{hits:?}");
    }

    #[test]
    fn an_index_carried_over_equals_one_built_anew() {
        let old: Vec<String> =
            ["weather forecast daily", "exchange rates of currencies", "holiday calendar"].map(String::from).to_vec();
        let new: Vec<String> = ["holiday calendar", "stock quotes live", "weather forecast daily", "weather radar"]
            .map(String::from)
            .to_vec();
        let carried = Bm25::build(&old).carry_over(&[
            Carried::Kept(2),
            Carried::New(&new[1]),
            Carried::Kept(0),
            Carried::New(&new[3]),
        ]);
        let built = Bm25::build(&new);
        for query in ["weather", "exchange rates", "holiday", "stock radar weather", "forecast"] {
            let (a, b) = (carried.search(query, 4, None), built.search(query, 4, None));
            assert_eq!(a.len(), b.len(), "{query}");
            for ((da, sa), (db, sb)) in a.iter().zip(&b) {
                assert_eq!(da, db, "{query}");
                assert!((sa - sb).abs() < 1e-5, "{query}: {sa} vs {sb}");
            }
        }
        assert!(carried.search("exchange", 4, None).is_empty(), "a dropped document is gone");
    }

    #[test]
    fn ranks_the_matching_document_first() {
        let docs: Vec<String> = [
            "Public holidays of a country in a year",
            "Latest exchange rates of currencies",
            "Weather forecast for coordinates, hourly and daily",
            "Search locations by name",
        ]
        .map(String::from)
        .to_vec();
        let index = Bm25::build(&docs);
        let hits = index.search("What's the weather forecast for tomorrow?", 3, None);
        assert_eq!(hits[0].0, 2);
        assert_eq!(hits.len(), 1, "only documents sharing a term score");
        let hits = index.search("exchange rate of the euro", 3, Some(&[true, false, true, true]));
        assert!(hits.is_empty(), "the filter removes the only match");
        assert!(index.search("the of and", 3, None).is_empty());
        let round: Bm25 = postcard::from_bytes(&postcard::to_stdvec(&index).unwrap()).unwrap();
        assert_eq!(round.search("holiday", 1, None), index.search("holiday", 1, None));
    }
}
