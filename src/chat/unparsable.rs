//! What a client's JSON that could not be read is told, in words.

/// Nesting levels serde_json parses (its recursion limit, not configurable
/// without risking the stack).
pub(super) const MAX_JSON_DEPTH: usize = 128;

/// Why `what` could not be parsed, in words: JSON nested past
/// [`MAX_JSON_DEPTH`] is valid JSON, and saying otherwise misleads.
/// (serde_json reports depth as a syntax error: only its message tells.)
pub(super) fn unparsable(what: &str, e: &serde_json::Error) -> String {
    if e.to_string().starts_with("recursion limit exceeded") {
        format!("{what} is nested more than {MAX_JSON_DEPTH} levels deep, the most toolrouter reads; flatten it")
    } else {
        format!("{what} is not valid JSON: {e}")
    }
}
