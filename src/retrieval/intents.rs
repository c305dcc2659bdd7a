//! Splitting a request into the things it asks for.
//!
//! Requests often ask for several things ("Find X. Also, I need Y and the
//! Z of it."); retrieved as one text, the strongest intent drowns the
//! others (docs/architecture.md §3). A request is split into its sentences (and
//! `;`-separated clauses); pieces with fewer than [`MIN_INTENT_TERMS`]
//! content words are dropped; at most [`MAX_INTENTS`] are kept.

use super::bm25::tokens;

/// Fewest content words (after stop words) an intent needs.
pub(crate) const MIN_INTENT_TERMS: usize = 2;
/// Most intents one request is split into.
pub(crate) const MAX_INTENTS: usize = 6;

/// The sentences of `query` that carry a request, in order. Empty when the
/// query has at most one such sentence (then the whole query is the intent).
pub(crate) fn split(query: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = query.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        current.push(c);
        let end_of_sentence = matches!(c, '.' | '?' | '!') && chars.get(i + 1).is_none_or(|n| n.is_whitespace());
        // "e.g." and decimals are not sentence ends: require a following space and a previous letter run > 1.
        let abbreviation = c == '.'
            && current
                .trim_end_matches('.')
                .rsplit(|ch: char| !ch.is_alphanumeric())
                .next()
                .is_some_and(|w| w.len() <= 1);
        if (end_of_sentence && !abbreviation) || c == ';' || c == '\n' {
            pieces.push(std::mem::take(&mut current));
        }
    }
    pieces.push(current);
    let intents: Vec<String> = pieces
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| tokens(p).len() >= MIN_INTENT_TERMS)
        .take(MAX_INTENTS)
        .collect();
    if intents.len() <= 1 { Vec::new() } else { intents }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_sentences_that_ask_for_something() {
        let q = "I'm planning a trip to Paris. Can you get the weather forecast for next week? Also, convert 100 USD to EUR; thanks!";
        assert_eq!(
            split(q),
            [
                "I'm planning a trip to Paris.",
                "Can you get the weather forecast for next week?",
                "Also, convert 100 USD to EUR;"
            ]
        );
        assert!(split("Weather forecast for Berlin").is_empty());
        assert!(split("Rates for 2.5 units, e.g. USD").is_empty(), "decimals and abbreviations are not sentence ends");
    }
}
