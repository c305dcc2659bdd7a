//! Name standardization, exactly as ToolBench does it.
//!
//! ToolBench refers to one API in three spellings (see the dataset README):
//! the original names of the tool JSON, *standardized* names, and the
//! function names a model sees, `<std api>_for_<std tool>` cut to the last
//! 64 characters. Trajectories, query files and the replay cache all use
//! those spellings, so they have to be reproduced character for character.
//!
//! ToolBench's standardization keeps `^` and CJK ideographs, which OpenAI's
//! function-name rule (`^[a-zA-Z0-9_-]{1,64}$`) forbids; [`openai_safe`]
//! turns such a name into one that passes, and the resolver keeps the
//! original spelling as a variant.

/// OpenAI's limit on a function name's length (and ToolBench's cut).
pub(crate) const MAX_FUNCTION_NAME: usize = 64;

/// Names ToolBench prefixes with `is_` (API and parameter names) because
/// they are Python keywords or otherwise awkward as argument names.
const RESERVED: [&str; 7] = ["from", "class", "return", "false", "true", "id", "and"];

/// ToolBench's `standardize`: every character other than ASCII letters,
/// digits, `_`, `^` and CJK ideographs (U+4E00..=U+9FA5) becomes `_`, runs
/// of `_` collapse, the result is lower-cased and trimmed of `_`, and a
/// leading digit gets a `get_` prefix.
pub(crate) fn standardize(name: &str) -> String {
    let raw = standardize_without_prefix(name);
    if raw.starts_with(|c: char| c.is_ascii_digit()) { format!("get_{raw}") } else { raw }
}

/// [`standardize`] without the `get_` prefix rule.
fn standardize_without_prefix(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let keep = c.is_ascii_alphanumeric() || c == '^' || ('\u{4e00}'..='\u{9fa5}').contains(&c);
        let c = if keep { c.to_ascii_lowercase() } else { '_' };
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    out.trim_matches('_').to_string()
}

/// ToolBench's `change_name`: reserved words get an `is_` prefix.
pub(crate) fn change_name(name: String) -> String {
    if RESERVED.contains(&name.as_str()) { format!("is_{name}") } else { name }
}

/// The standardized name of an API or a parameter (standardize + `is_` rule).
pub(crate) fn standardize_member(name: &str) -> String {
    change_name(standardize(name))
}

/// The last `max` characters of `s` (ToolBench cuts function names from the left).
pub(crate) fn last_chars(s: &str, max: usize) -> &str {
    let n = s.chars().count();
    if n <= max {
        return s;
    }
    let (start, _) = s.char_indices().nth(n - max).expect("n > max");
    &s[start..]
}

/// ToolBench's function name for an API: `<std api>_for_<std tool>`, cut to
/// the last 64 characters. `std_api` and `std_tool` are already standardized.
pub(crate) fn toolbench_function_name(std_api: &str, std_tool: &str) -> String {
    last_chars(&format!("{std_api}_for_{std_tool}"), MAX_FUNCTION_NAME).to_string()
}

/// The spelling of the 2023 trajectories, which did not add `get_` to
/// digit-leading API names: `Some(name)` when it differs from the current one.
pub(crate) fn legacy_function_name(api_name: &str, std_tool: &str) -> Option<String> {
    let raw = standardize_without_prefix(api_name);
    raw.starts_with(|c: char| c.is_ascii_digit()).then(|| toolbench_function_name(&raw, std_tool))
}

/// The standardized tool name as 54 ToolBench file names spell it: `/` and
/// `,` deleted rather than replaced. `Some` only when that differs.
pub(crate) fn deleted_punctuation_variant(tool_name: &str) -> Option<String> {
    let deleted: String = tool_name.chars().filter(|c| !matches!(c, '/' | ',')).collect();
    (deleted != tool_name).then(|| standardize(&deleted))
}

/// Whether `name` satisfies OpenAI's function-name rule `^[a-zA-Z0-9_-]{1,64}$`.
pub fn is_openai_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_FUNCTION_NAME
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Rewrites a name so it satisfies OpenAI's rule: ASCII characters outside
/// the rule become `_`, other characters `u<hex code point>` (so distinct
/// CJK names stay distinct), then the last 64 characters are kept.
pub(crate) fn openai_safe(name: &str) -> String {
    if is_openai_name(name) {
        return name.to_string();
    }
    let mut out = String::with_capacity(name.len() * 2);
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else if c.is_ascii() {
            out.push('_');
        } else {
            out.push_str(&format!("u{:x}", c as u32));
        }
    }
    if out.is_empty() {
        out.push('_');
    }
    last_chars(&out, MAX_FUNCTION_NAME).to_string()
}

/// A ToolBench category as a directory name: spaces, `,` and `/` become `_`,
/// runs of `_` collapse (`News, Media` -> `News_Media`).
pub(crate) fn category_dir_name(category: &str) -> String {
    let mut out = String::with_capacity(category.len());
    for c in category.trim().chars() {
        let c = if matches!(c, ' ' | ',' | '/') { '_' } else { c };
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    out
}

/// The key under which a user-supplied function name is looked up: no
/// surrounding whitespace, lower case.
pub(crate) fn lookup_key(name: &str) -> String {
    name.trim().to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standardize_follows_toolbench() {
        assert_eq!(standardize("Songkick concert"), "songkick_concert");
        assert_eq!(standardize("TheClique"), "theclique");
        assert_eq!(standardize("  --Hello, World!!--  "), "hello_world");
        assert_eq!(standardize("120 Hour Forecast"), "get_120_hour_forecast");
        assert_eq!(standardize("a^b"), "a^b");
        assert_eq!(standardize("日本 電話帳"), "日本_電話帳");
        assert_eq!(standardize("테스트위드"), "");
        assert_eq!(standardize("Random Yes/No"), "random_yes_no");
    }

    #[test]
    fn reserved_words_get_is_prefix() {
        assert_eq!(standardize_member("id"), "is_id");
        assert_eq!(standardize_member("From"), "is_from");
        assert_eq!(standardize_member("identity"), "identity");
    }

    #[test]
    fn function_names_are_cut_from_the_left() {
        let api = "a".repeat(40);
        let tool = "b".repeat(40);
        let name = toolbench_function_name(&api, &tool);
        assert_eq!(name.len(), 64);
        assert!(name.ends_with(&format!("_for_{tool}")));
    }

    #[test]
    fn legacy_names_drop_get_on_digit_leading_apis() {
        assert_eq!(
            legacy_function_name("120 Hour Forecast", "weather").as_deref(),
            Some("120_hour_forecast_for_weather")
        );
        assert_eq!(legacy_function_name("Get forecast", "weather"), None);
        assert_eq!(legacy_function_name("get 5 items", "weather"), None);
    }

    #[test]
    fn openai_safe_names_pass_the_rule() {
        assert_eq!(openai_safe("search_for_theclique"), "search_for_theclique");
        let cjk = openai_safe("search_for_日本_電話帳");
        assert!(is_openai_name(&cjk), "{cjk}");
        assert_ne!(cjk, openai_safe("search_for_日本_電話"));
        assert_eq!(openai_safe("a^b"), "a_b");
        assert!(is_openai_name(&openai_safe(&"日".repeat(40))));
    }

    #[test]
    fn category_dirs() {
        assert_eq!(category_dir_name("News, Media"), "News_Media");
        assert_eq!(
            category_dir_name("Artificial Intelligence/Machine Learning"),
            "Artificial_Intelligence_Machine_Learning"
        );
    }
}
