//! Tools that come with what they need: a kept tool whose required input
//! another tool of its server produces (an issue number from
//! `list_issues`, a channel id from `list_channels`, coordinates from a
//! geocoder) brings that tool along, within the K kept. A model offered
//! `get_issue` alone for "what does the newest bug on acme/api say" has
//! no way to learn the number.
//!
//! Read from names only, as every client's tool list has them: a required
//! parameter whose name ends in a reference word (`channel_id`,
//! `issue_number`, `commit_sha`, `thread_ts`; a bare `id` refers to what
//! its tool's own name is about) needs a tool of the same server whose own
//! name carries that thing's words (`list_channels`, `search_issues`) and
//! which does not itself need it; a latitude or longitude needs a
//! geocoder. Among a tool's producers, the one the request ranks highest
//! comes along.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::super::names::words;
use super::servers::split_name;

/// Last words of a parameter's name that make it a reference to a thing
/// another tool returns.
const REFERENCE_WORDS: [&str; 8] = ["id", "ids", "uuid", "number", "sha", "slug", "ts", "key"];
/// References that name no thing on their own: `id` of a `get_issue` is
/// the issue's.
const BARE_REFERENCES: [&str; 3] = ["id", "ids", "uuid"];
/// Parameters a geocoder fills.
const COORDINATE_WORDS: [&str; 6] = ["latitude", "longitude", "lat", "lng", "lon", "coordinates"];
/// Words of a geocoder's name or text.
const GEOCODER_WORDS: [&str; 3] = ["geocode", "geocoding", "coordinates"];
/// Leading words of a tool's name that say what it does, not what to.
const VERBS: [&str; 16] = [
    "get", "fetch", "retrieve", "read", "show", "view", "describe", "update", "edit", "set", "delete", "remove",
    "close", "merge", "add", "list",
];

/// What a required parameter needs another tool for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Need {
    /// A thing, by its name's words (singular): `["pull", "request"]`.
    Thing(Vec<String>),
    /// A place's coordinates.
    Coordinates,
}

/// A word without its plural ending, so that `issues` and `issue` meet.
fn singular(word: &str) -> String {
    if let Some(stem) = word.strip_suffix("ies").filter(|s| s.len() >= 2) {
        return format!("{stem}y");
    }
    match word.strip_suffix('s') {
        Some(stem) if stem.len() >= 3 && !stem.ends_with('s') => stem.to_string(),
        _ => word.to_string(),
    }
}

/// The words of a tool's own name (its server's left out), singular.
fn own_words(name: &str) -> Vec<String> {
    words(split_name(name).1).iter().map(|w| singular(w)).collect()
}

/// What required parameter `param` of the tool named `tool` needs, if anything.
fn need_of(tool: &str, param: &str) -> Option<Need> {
    let w = words(param);
    let last = w.last()?;
    if w.iter().any(|x| COORDINATE_WORDS.contains(&x.as_str())) {
        return Some(Need::Coordinates);
    }
    if !REFERENCE_WORDS.contains(&last.as_str()) {
        return None;
    }
    let thing: Vec<String> = match w.len() {
        1 if BARE_REFERENCES.contains(&last.as_str()) => {
            own_words(tool).into_iter().find(|x| !VERBS.contains(&x.as_str())).into_iter().collect()
        }
        _ => w[..w.len() - 1].iter().map(|x| singular(x)).collect(),
    };
    (!thing.is_empty()).then_some(Need::Thing(thing))
}

/// What finds a tool set's producers: its tools by the words of their
/// own name (built once per set, from names only); each tool's producers
/// are found when it is kept, so a list pays only for the few it keeps.
pub(super) struct Companions {
    by_word: HashMap<String, Vec<u32>>,
    /// Tools whose name or text says they geocode, found on first need.
    geocoders: OnceLock<Vec<u32>>,
}

/// The needs of a tool's required parameters, each once.
fn needs_of(name: &str, params: &[String]) -> Vec<Need> {
    let mut found: Vec<Need> = Vec::new();
    for need in params.iter().filter_map(|p| need_of(name, p)) {
        if !found.contains(&need) {
            found.push(need);
        }
    }
    found
}

impl Companions {
    /// The index of a set's tools `names`.
    pub(super) fn of(names: &[String]) -> Companions {
        let mut by_word: HashMap<String, Vec<u32>> = HashMap::new();
        for (i, name) in names.iter().enumerate() {
            for w in own_words(name) {
                let tools = by_word.entry(w).or_default();
                if tools.last() != Some(&(i as u32)) {
                    tools.push(i as u32);
                }
            }
        }
        Companions { by_word, geocoders: OnceLock::new() }
    }

    /// The tools of the set (`names`, `texts`, `needs`: each tool's required
    /// parameters) that produce what tool `i` needs: of its server, not
    /// needing it themselves.
    pub(super) fn producers(&self, i: usize, names: &[String], texts: &[String], needs: &[Vec<String>]) -> Vec<u32> {
        let server = |t: usize| split_name(&names[t]).0;
        let own = needs_of(&names[i], &needs[i]);
        let mut found: Vec<u32> = Vec::new();
        for need in &own {
            let candidates = match need {
                Need::Coordinates => self.geocoders(names, texts).to_vec(),
                Need::Thing(thing) => with_all_words(&self.by_word, thing),
            };
            found.extend(candidates.into_iter().filter(|&p| {
                let p = p as usize;
                p != i && server(p) == server(i) && !needs_of(&names[p], &needs[p]).contains(need)
            }));
        }
        found.sort_unstable();
        found.dedup();
        found
    }

    fn geocoders(&self, names: &[String], texts: &[String]) -> &[u32] {
        self.geocoders.get_or_init(|| {
            let says = |w: &String| GEOCODER_WORDS.contains(&w.as_str());
            (0..names.len() as u32)
                .filter(|&i| {
                    let text = &texts[i as usize];
                    let head = text.get(..text.len().min(300)).unwrap_or(text);
                    own_words(&names[i as usize]).iter().any(says) || words(head).iter().any(says)
                })
                .collect()
        })
    }
}

/// Brings along the producer of what each of the best `⌈k / 4⌉` tools not
/// called yet needs (the one the request ranks highest),
/// in place of the last kept tools that were neither pinned nor brought.
pub(super) fn bring_along(
    index: &super::ListIndex,
    kept: &mut [usize],
    rank: &[u32],
    scores: &[f32],
    k: usize,
    called: &dyn Fn(usize) -> bool,
) {
    let companions = index.companions.get_or_init(|| Companions::of(&index.names));
    let consumers: Vec<usize> = kept.iter().copied().filter(|&i| !called(i)).take(k.div_ceil(4)).collect();
    let mut brought: Vec<usize> = Vec::new();
    for &c in &consumers {
        let best = companions
            .producers(c, &index.names, &index.texts, &index.needs)
            .into_iter()
            .map(|p| p as usize)
            .max_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(b.cmp(&a)));
        if let Some(p) = best.filter(|p| !kept.contains(p) && !brought.contains(p)) {
            brought.push(p);
        }
    }
    let free: Vec<usize> =
        (0..kept.len()).rev().filter(|&j| rank[kept[j]] == u32::MAX && !consumers.contains(&kept[j])).collect();
    for (j, p) in free.into_iter().zip(brought) {
        kept[j] = p;
    }
}

/// The tools whose own name has every word of `thing`.
fn with_all_words(by_word: &HashMap<String, Vec<u32>>, thing: &[String]) -> Vec<u32> {
    let mut lists = thing.iter().map(|w| by_word.get(w).map_or(&[][..], Vec::as_slice));
    let Some(first) = lists.next() else { return Vec::new() };
    let rest: Vec<&[u32]> = lists.collect();
    first.iter().copied().filter(|t| rest.iter().all(|l| l.contains(t))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Set {
        names: Vec<String>,
        texts: Vec<String>,
        needs: Vec<Vec<String>>,
        companions: Companions,
    }

    fn companions(tools: &[(&str, &str, &[&str])]) -> Set {
        let names: Vec<String> = tools.iter().map(|t| t.0.to_string()).collect();
        let texts: Vec<String> = tools.iter().map(|t| t.1.to_string()).collect();
        let needs: Vec<Vec<String>> = tools.iter().map(|t| t.2.iter().map(|p| p.to_string()).collect()).collect();
        let companions = Companions::of(&names);
        Set { names, texts, needs, companions }
    }

    fn producers_of<'a>(set: &'a Set, tool: &str) -> Vec<&'a str> {
        let i = set.names.iter().position(|n| n == tool).expect("listed");
        let found = set.companions.producers(i, &set.names, &set.texts, &set.needs);
        found.iter().map(|&p| set.names[p as usize].as_str()).collect()
    }

    #[test]
    fn a_reference_parameter_needs_the_tools_named_for_its_thing() {
        let set = companions(&[
            ("github__get_issue", "Get an issue", &["owner", "repo", "issue_number"]),
            ("github__list_issues", "List issues of a repository", &["owner", "repo"]),
            ("github__update_issue", "Update an issue", &["owner", "repo", "issue_number"]),
            ("gitlab__list_issues", "List issues", &["project_id"]),
            ("slack__post_message", "Post a message", &["channel_id", "text"]),
            ("slack__list_channels", "List channels", &[]),
            ("slack__reply_to_thread", "Reply in a thread", &["channel_id", "thread_ts", "text"]),
            ("maps__search_places", "Find places near a point", &["query", "latitude", "longitude"]),
            ("maps__geocode", "Address to coordinates", &["address"]),
        ]);
        // Of its own server only; not a tool that needs the same number.
        assert_eq!(producers_of(&set, "github__get_issue"), ["github__list_issues"]);
        assert_eq!(producers_of(&set, "slack__post_message"), ["slack__list_channels"]);
        // A thread's timestamp: no tool of slack is named for threads but the reply itself.
        assert_eq!(producers_of(&set, "slack__reply_to_thread"), ["slack__list_channels"]);
        assert_eq!(producers_of(&set, "maps__search_places"), ["maps__geocode"]);
        assert!(producers_of(&set, "github__list_issues").is_empty(), "owner and repo are the user's");
    }

    #[test]
    fn a_bare_id_is_the_id_of_what_its_tool_is_about() {
        assert_eq!(need_of("get_product_details", "id"), Some(Need::Thing(vec!["product".into()])));
        assert_eq!(
            need_of("getPullRequests", "pullRequestNumber"),
            Some(Need::Thing(vec!["pull".into(), "request".into()]))
        );
        assert_eq!(need_of("redis_get", "key"), None, "a bare key is the user's");
        assert_eq!(need_of("search", "query"), None);
    }

    #[test]
    fn plurals_meet_their_singular() {
        assert_eq!(singular("issues"), "issue");
        assert_eq!(singular("entities"), "entity");
        assert_eq!(singular("address"), "address");
    }
}
