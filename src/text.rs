//! Text cut short for a person or a model to read.

/// `text` cut to `max` characters (on a character boundary), with an
/// ellipsis if cut.
pub(crate) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clips_on_character_boundaries() {
        assert_eq!(clip("héllo", 2), "hé…");
        assert_eq!(clip("hi", 5), "hi");
        assert_eq!(clip("abc", 3), "abc");
    }
}
