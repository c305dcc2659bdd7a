//! Response compression (docs/architecture.md §8): an API response shortened to a
//! character budget so that it fits in a model's context, always as valid
//! JSON.
//!
//! Under the budget a response passes unchanged. Over it:
//!
//! 1. a per-API field choice, if the operator wrote one
//!    (`<state>/compress/fields.json`, [`FieldChoices`]), keeps only the
//!    chosen fields;
//! 2. noise goes: nulls, empty values, long opaque tokens (hashes, base64),
//!    and fields named like links, tracking, versions or metadata;
//! 3. object fields are ordered by their relation to the API description
//!    and the request (shared words in the field's name and text value);
//! 4. then, about 25% tighter a step until it fits (so what fits keeps as
//!    much as it can): arrays keep their first items
//!    plus `"… N more items"`, objects their most related fields plus
//!    `"…": "N more fields"`, long strings their start plus `"… (N more
//!    characters)"`.
//!
//! If even the tightest form is over the budget, the result is a JSON
//! object holding the start of the text and how long it was. JSON that
//! arrives as text (a text body, a string field holding JSON or a Python
//! literal, even cut short: [`crate::json_text`]) is compressed as the
//! value it stands for, so its fields are ranked and kept like any others.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

/// Strings longer than this with no space and only token characters are
/// opaque blobs (base64 images, signed tokens). Shorter ones may be IDs a
/// next call needs, so they stay.
const OPAQUE_MIN: usize = 160;
/// The loosest shape tried: items per array, fields per object, characters per string.
const START: Shape = Shape { items: 64, fields: 64, chars: 4096 };
/// The tightest shape tried.
const FLOOR: Shape = Shape { items: 1, fields: 3, chars: 24 };

/// How much a rendering keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Shape {
    items: usize,
    fields: usize,
    chars: usize,
}

/// What compression did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Compressed {
    /// Valid JSON, at most `budget` characters.
    pub(crate) text: String,
    pub(crate) chars_before: usize,
    pub(crate) chars_after: usize,
    /// Noise fields and values removed.
    pub(crate) noise_removed: usize,
    /// Array items, object fields and string characters cut by shortening.
    pub(crate) items_cut: usize,
    pub(crate) fields_cut: usize,
    pub(crate) chars_cut: usize,
}

/// Fields to keep for one API, chosen once (by an LLM from a sample
/// response, or by hand) and applied by code: an object keeps a field when
/// its name is chosen or something chosen is inside it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub(crate) struct FieldChoice {
    pub(crate) keep: Vec<String>,
}

/// Field choices by function name, from one JSON file the operator writes
/// (`<state>/compress/fields.json`: `{"function": {"keep": ["field", …]}}`).
#[derive(Debug, Default)]
pub(crate) struct FieldChoices {
    choices: HashMap<String, FieldChoice>,
}

impl FieldChoices {
    /// The cache file in a state directory.
    pub(crate) fn path_in(state_dir: &Path) -> PathBuf {
        state_dir.join("compress").join("fields.json")
    }

    /// Loads the cache at `path` (empty if there is none yet).
    pub(crate) fn load(path: &Path) -> std::io::Result<FieldChoices> {
        let choices = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(std::io::Error::other)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
            Err(e) => return Err(e),
        };
        Ok(FieldChoices { choices })
    }

    pub(crate) fn get(&self, function: &str) -> Option<&FieldChoice> {
        self.choices.get(function)
    }
}

/// `value` with every string that stands for an object or array replaced
/// by that value (recursively: each replacement is shorter than its text).
fn expand_json_text(value: Value) -> Value {
    match value {
        Value::String(text) => match crate::json_text::parse(&text) {
            Some((inner, _)) => expand_json_text(inner),
            None => Value::String(text),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(expand_json_text).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, expand_json_text(v))).collect()),
        other => other,
    }
}

/// Compresses `value` to `budget` characters. `context` is the API
/// description and the request, for relevance.
pub(crate) fn compress(value: &Value, context: &str, budget: usize, choice: Option<&FieldChoice>) -> Compressed {
    let text = value.to_string();
    let before = text.chars().count();
    if before <= budget {
        return Compressed {
            text,
            chars_before: before,
            chars_after: before,
            noise_removed: 0,
            items_cut: 0,
            fields_cut: 0,
            chars_cut: 0,
        };
    }
    let mut value = expand_json_text(value.clone());
    if let Some(choice) = choice.filter(|c| !c.keep.is_empty()) {
        let keep: HashSet<&str> = choice.keep.iter().map(String::as_str).collect();
        if let Some(kept) = apply_choice(&value, &keep) {
            value = kept;
        }
    }
    let mut noise = 0;
    let value = denoise(value, &mut noise).unwrap_or(Value::Null);
    let words = words(context);
    let mut shape = START;
    loop {
        let mut cuts = Cuts::default();
        let rendered = shorten(&value, shape, &words, &mut cuts);
        let text = rendered.to_string();
        let after = text.chars().count();
        if after <= budget {
            return Compressed {
                text,
                chars_before: before,
                chars_after: after,
                noise_removed: noise,
                items_cut: cuts.items,
                fields_cut: cuts.fields,
                chars_cut: cuts.chars,
            };
        }
        if shape == FLOOR {
            return last_resort(&text, before, budget, noise);
        }
        // Tighten about 25% a step: the first shape that fits keeps the most.
        shape = Shape {
            items: (shape.items * 3 / 4).max(FLOOR.items),
            fields: (shape.fields * 4 / 5).max(FLOOR.fields),
            chars: (shape.chars * 3 / 4).max(FLOOR.chars),
        };
    }
}

#[derive(Default)]
struct Cuts {
    items: usize,
    fields: usize,
    chars: usize,
}

/// Keeps the chosen fields (and what leads to them); `None` if nothing chosen is present.
fn apply_choice(value: &Value, keep: &HashSet<&str>) -> Option<Value> {
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                if keep.contains(k.as_str()) {
                    out.insert(k.clone(), v.clone());
                } else if let Some(inner) = apply_choice(v, keep) {
                    out.insert(k.clone(), inner);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Value::Array(items) => {
            let kept: Vec<Value> = items.iter().filter_map(|i| apply_choice(i, keep)).collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        _ => None,
    }
}

/// Field names that are noise to a model.
fn noisy_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(
        n.as_str(),
        "_links"
            | "links"
            | "_meta"
            | "meta"
            | "metadata"
            | "version"
            | "api_version"
            | "apiversion"
            | "etag"
            | "request_id"
            | "requestid"
            | "trace_id"
            | "traceid"
            | "tracking"
            | "cursor"
            | "next_cursor"
            | "self"
            | "href"
            | "_id"
            | "__v"
            | "kind"
            | "copyright"
            | "disclaimer"
            | "license"
            | "terms"
    ) || n.starts_with("tracking")
        || n.starts_with("utm_")
        || n.ends_with("_tracking")
}

/// A long string of token characters with no space: a hash, key or blob.
fn opaque(s: &str) -> bool {
    s.len() >= OPAQUE_MIN
        && !s.starts_with("http")
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-' | b'.'))
}

/// Removes noise; `None` when nothing is left of `value`.
fn denoise(value: Value, removed: &mut usize) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::String(s) if s.trim().is_empty() || opaque(&s) => None,
        Value::Array(items) => {
            let n = items.len();
            let kept: Vec<Value> = items.into_iter().filter_map(|v| denoise(v, removed)).collect();
            *removed += n - kept.len();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                if noisy_name(&k) {
                    *removed += 1;
                    continue;
                }
                match denoise(v, removed) {
                    Some(v) => {
                        out.insert(k, v);
                    }
                    None => *removed += 1,
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        other => Some(other),
    }
}

/// Lower-case words of at least 3 letters, split at non-letters and camelCase.
fn words(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in text.chars().chain(std::iter::once(' ')) {
        let boundary = !c.is_alphanumeric() || (c.is_uppercase() && previous_lower);
        if boundary && !word.is_empty() {
            if word.chars().count() >= 3 {
                out.insert(std::mem::take(&mut word));
            }
            word.clear();
        }
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
        previous_lower = c.is_lowercase();
    }
    out
}

/// How related a field is to the context: shared words in its name (2
/// each) and in a short text value (1 each).
fn relevance(name: &str, value: &Value, context: &HashSet<String>) -> usize {
    let in_name = words(name).iter().filter(|w| context.contains(*w)).count();
    let in_value = match value {
        Value::String(s) if s.len() < 200 => words(s).iter().filter(|w| context.contains(*w)).count(),
        _ => 0,
    };
    2 * in_name + in_value
}

fn shorten(value: &Value, shape: Shape, context: &HashSet<String>, cuts: &mut Cuts) -> Value {
    match value {
        Value::String(s) => {
            let n = s.chars().count();
            if n <= shape.chars {
                return value.clone();
            }
            cuts.chars += n - shape.chars;
            let start: String = s.chars().take(shape.chars).collect();
            Value::String(format!("{start}… ({} more characters)", n - shape.chars))
        }
        Value::Array(items) => {
            let mut out: Vec<Value> =
                items.iter().take(shape.items).map(|v| shorten(v, shape, context, cuts)).collect();
            if items.len() > shape.items {
                let more = items.len() - shape.items;
                cuts.items += more;
                out.push(Value::String(format!("… {more} more items")));
            }
            Value::Array(out)
        }
        Value::Object(map) => {
            let mut fields: Vec<(usize, usize, &String, &Value)> =
                map.iter().enumerate().map(|(i, (k, v))| (relevance(k, v, context), i, k, v)).collect();
            // Most related first; the API's own order among equals.
            fields.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let mut out = Map::new();
            for (_, _, k, v) in fields.iter().take(shape.fields) {
                out.insert((*k).clone(), shorten(v, shape, context, cuts));
            }
            if map.len() > shape.fields {
                let more = map.len() - shape.fields;
                cuts.fields += more;
                out.insert("…".into(), Value::String(format!("{more} more fields")));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// The start of `text` in a JSON object, within `budget`.
fn last_resort(text: &str, before: usize, budget: usize, noise: usize) -> Compressed {
    let total = text.chars().count();
    let mut keep = budget.saturating_sub(60).min(total);
    loop {
        let start: String = text.chars().take(keep).collect();
        let out = serde_json::json!({"start": start, "total_characters": total}).to_string();
        let n = out.chars().count();
        if n <= budget || keep == 0 {
            return Compressed {
                text: out,
                chars_before: before,
                chars_after: n,
                noise_removed: noise,
                items_cut: 0,
                fields_cut: 0,
                chars_cut: total - keep,
            };
        }
        // Escapes made it longer than the characters kept: keep fewer.
        keep = keep.saturating_sub((n - budget).max(8));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn valid_within(c: &Compressed, budget: usize) -> Value {
        assert!(c.chars_after <= budget, "{} > {budget}: {}", c.chars_after, c.text);
        assert_eq!(c.chars_after, c.text.chars().count());
        serde_json::from_str(&c.text).expect("valid JSON")
    }

    #[test]
    fn small_responses_pass_unchanged() {
        let v = json!({"temp": 21.5, "city": "Berlin", "empty": null});
        let c = compress(&v, "", 1024, None);
        assert_eq!(serde_json::from_str::<Value>(&c.text).unwrap(), v);
        assert_eq!(c.chars_before, c.chars_after);
    }

    #[test]
    fn noise_goes_and_long_arrays_are_cut_with_a_count() {
        let items: Vec<Value> = (0..200)
            .map(|i| json!({"title": format!("Goal by player {i}"), "score": i, "_links": {"self": "x"}, "thumbnail": null}))
            .collect();
        let v = json!({"matches": items, "request_id": "abc", "blob": "A".repeat(400), "id": "c3RmYXJ0c3NkZlFrcEp6eVhnY3NiY3JrcWlPZjUyNTZSb3dxV2doZWt6Yz0="});
        let c = compress(&v, "football match scores", 1024, None);
        let out = valid_within(&c, 1024);
        let matches = out["matches"].as_array().unwrap();
        assert!(matches.last().unwrap().as_str().unwrap().ends_with("more items"), "{out}");
        assert!(out.get("request_id").is_none() && out.get("blob").is_none());
        assert!(out.get("id").is_some(), "IDs a next call may need stay: {out}");
        assert!(matches[0].get("_links").is_none() && matches[0].get("thumbnail").is_none());
        assert!(c.items_cut > 150 && c.noise_removed >= 400, "{c:?}");
    }

    #[test]
    fn related_fields_come_first_when_fields_are_cut() {
        let mut map = Map::new();
        for i in 0..60 {
            map.insert(format!("field_{i:02}"), json!("x".repeat(40)));
        }
        map.insert("humidity".into(), json!(81));
        let c = compress(&Value::Object(map), "current humidity in Berlin", 400, None);
        let out = valid_within(&c, 400);
        assert_eq!(out.as_object().unwrap().keys().next().map(String::as_str), Some("humidity"), "{out}");
        assert!(c.fields_cut > 0);
    }

    #[test]
    fn strings_holding_json_and_plain_long_text() {
        let inner = json!({"articles": (0..50).map(|i| json!({"headline": format!("News {i}"), "body": "word ".repeat(100)})).collect::<Vec<_>>()});
        let c = compress(&Value::String(inner.to_string()), "news", 1024, None);
        assert!(valid_within(&c, 1024)["articles"].is_array());
        let text = Value::String("Lorem ipsum \"quoted\" \\ ".repeat(400));
        let c = compress(&text, "", 300, None);
        assert!(valid_within(&c, 300).is_string());
    }

    #[test]
    fn json_text_in_fields_and_cut_short_is_compressed_as_its_fields() {
        // A ToolBench observation: the body as Python-literal text in a
        // string field, cut off at about 1,000 characters.
        let listing = |i: usize| {
            format!(
                "{{'@type': 'Listing', 'Name': 'House {i}', 'Price': {}, 'Description': '{}'}}",
                1000 * i,
                "nice ".repeat(20)
            )
        };
        let items: Vec<String> = (0..20).map(listing).collect();
        let body = format!("{{'Result': [{}]}}", items.join(", "));
        let cut: String = body.chars().take(1000).collect();
        let observation = json!({"error": "", "response": cut});
        let c = compress(&observation, "house price", 400, None);
        let out = valid_within(&c, 400);
        let first = &out["response"]["Result"][0];
        assert_eq!(first["Name"], "House 0", "{out}");
        assert_eq!(first["Price"], 0, "{out}");
    }

    #[test]
    fn a_field_choice_keeps_only_what_was_chosen() {
        let v = json!({"data": {"items": (0..100).map(|i| json!({"name": format!("n{i}"), "blob": "z y ".repeat(30)})).collect::<Vec<_>>()}, "extra": "q ".repeat(300)});
        let choice = FieldChoice { keep: vec!["name".into()] };
        let out = valid_within(&compress(&v, "", 1024, Some(&choice)), 1024);
        assert!(out.get("extra").is_none());
        assert!(out["data"]["items"][0].get("blob").is_none() && out["data"]["items"][0]["name"] == "n0", "{out}");
    }

    #[test]
    fn always_valid_json_within_the_budget() {
        // Deep nesting defeats shortening: the last resort still fits.
        let mut v = json!("leaf");
        for i in 0..300 {
            v = json!({ format!("k{i}"): v, "pad": "é\"\\".repeat(3) });
        }
        for budget in [64, 100, 1024] {
            valid_within(&compress(&v, "", budget, None), budget);
        }
    }
}
