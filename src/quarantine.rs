//! Tools checked before they reach a model: the tools of the user's MCP
//! servers and OpenAPI specs are read for what a poisoned tool carries,
//! and an MCP tool whose definition changed since it was first seen (a
//! "rug pull") is held until the operator accepts it.
//!
//! [`scan`] flags, in a tool's name, title, description and parameter
//! descriptions:
//!
//! * hidden and bidirectional Unicode (zero-width characters, bidi
//!   controls, tag characters, control characters): text a person
//!   reviewing the tool does not see but a model reads;
//! * instructions aimed at the model ("ignore previous instructions",
//!   "do not tell the user", `<IMPORTANT>` blocks, "before using this
//!   tool, read …");
//! * references to secrets and local files (`~/.ssh`, `id_rsa`,
//!   `/etc/passwd`, `.aws/credentials`, `mcp.json`, private keys).
//!
//! A held tool ([`Quarantine`]) is not offered and not called, whoever
//! asks, unless `access.allow_flagged` (a flagged tool) or
//! `access.accept_changes` (a changed one, its new definition then
//! remembered) names it; the reasons are in `/readyz` and the log. The
//! first-seen definitions are kept in `tools-seen.json` of the state
//! directory (written whole and renamed into place), so a change made
//! while toolrouter was down is caught at its next start.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};

use regex::RegexSet;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalog::{Api, Catalog, Origin};
use crate::rule::{Facts, Rule};

/// Why a tool is held.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct HeldTool {
    pub(crate) function: String,
    pub(crate) reasons: Vec<String>,
    /// For a tool held for its changed definition: a digest of the
    /// definition it has now, which an operator's acceptance must name (so
    /// that a server changing it again meanwhile is not accepted unseen).
    pub(crate) definition: Option<String>,
}

/// The patterns of instructions aimed at a model, and of secrets and local
/// files, each with what it means.
const PATTERNS: [(&str, &str); 12] = [
    (
        r"\b(ignore|disregard|forget|override)\s+(all\s+|any\s+)?(of\s+)?(the\s+|your\s+)?(previous|prior|above|earlier|preceding|other|system)\s+(instructions|prompts?|messages|rules|directions)",
        "tells the model to ignore its instructions",
    ),
    (
        r"\b(do\s+not|don'?t|never)\s+(tell|inform|mention|reveal|show|alert|notify)\b.{0,60}\b(user|human|operator)",
        "tells the model to hide something from the user",
    ),
    (r"<\s*/?\s*(important|system|instructions?|secret|hidden)\s*>", "carries a hidden-instruction block"),
    (r"\bsystem\s+prompt\b", "speaks of the model's system prompt"),
    (
        r"\bbefore\s+(using|calling|running|invoking)\s+(this|any|the)\s+tool\b.{0,120}\b(read|call|run|send|pass|include|fetch|open|cat)\b",
        "tells the model to do something else before using the tool",
    ),
    // "You must include …" is how API documentation speaks to a developer
    // (47 of ToolBench's 42,864 APIs): only the model named as the subject counts.
    (
        r"\bthe\s+(assistant|model|ai|agent|llm)\s+(must|should|needs?\s+to|has\s+to)\s+(always\s+|also\s+|first\s+)*(read|send|pass|include|forward|upload|exfiltrate|copy|email)\b",
        "tells the model to read or send data",
    ),
    (r"(~|\$HOME|%USERPROFILE%)[/\\]\.\w", "points at a hidden file in the home directory"),
    (r"\.ssh\b|\bid_(rsa|dsa|ecdsa|ed25519)\b|\bauthorized_keys\b", "points at SSH keys"),
    (r"/etc/(passwd|shadow|sudoers)\b", "points at system credentials"),
    (
        r"\.aws/credentials|\.netrc\b|\.npmrc\b|\.pypirc\b|\.git-credentials\b|\.docker/config\.json|\bmcp\.json\b|claude_desktop_config",
        "points at a credentials or client configuration file",
    ),
    (r"\bprivate[\s_-]?key\b.{0,60}\b(read|send|pass|include|content|file)", "asks for a private key"),
    // "Pass your API key in the `key` parameter" is API documentation (15 of
    // ToolBench's APIs), and "validates the user's credentials" a login tool
    // (2 of BFCL's 2,280 functions): only moving the user's secrets counts.
    (
        r"\b(read|send|pass|include|forward|upload|attach|copy|collect|extract|email)\b.{0,40}\b(the\s+)?user'?s\s+(api[\s_-]?keys?|access\s+tokens?|tokens?|passwords?|secrets?|credentials|private\s+keys?|ssh\s+keys?)\b",
        "asks for the user's secrets",
    ),
];

fn patterns() -> &'static RegexSet {
    static SET: OnceLock<RegexSet> = OnceLock::new();
    SET.get_or_init(|| {
        let case_insensitive: Vec<String> = PATTERNS.iter().map(|(p, _)| format!("(?is){p}")).collect();
        RegexSet::new(case_insensitive).expect("the patterns compile")
    })
}

/// Whether `c` is invisible to a person reading the text, or reorders it.
fn hidden(c: char) -> bool {
    matches!(c as u32,
        0x00..=0x08 | 0x0B | 0x0C | 0x0E..=0x1F | 0x7F..=0x9F // control characters (not \t \n \r)
        | 0x200B..=0x200F   // zero-width space, joiners, left-to-right and right-to-left marks
        | 0x202A..=0x202E   // bidirectional embeddings and overrides
        | 0x2060..=0x2064   // word joiner, invisible operators
        | 0x2066..=0x2069   // bidirectional isolates
        | 0xFEFF            // zero-width no-break space
        | 0xE0000..=0xE007F // tag characters (invisible ASCII)
    )
}

/// What is wrong with a tool's text: one line per finding, empty when
/// nothing is.
pub fn scan(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(c) = text.chars().find(|c| hidden(*c)) {
        found.push(format!("hidden or bidirectional Unicode (U+{:04X})", c as u32));
    }
    found.extend(patterns().matches(text).into_iter().map(|i| PATTERNS[i].1.to_string()));
    found
}

/// The text of an API that a model reads: name, description, parameter
/// descriptions, and an MCP tool's title and whole input schema.
fn model_text(api: &Api) -> String {
    let mut text = format!("{}\n{}\n", api.name, api.description);
    for p in &api.params {
        text.push_str(&format!("{}: {}\n", p.key, p.description));
    }
    if let Some(target) = &api.mcp {
        text.push_str(target.title.as_deref().unwrap_or(""));
        text.push('\n');
    }
    if let Some(schema) = &api.declared_schema {
        text.push_str(&schema.to_string());
    }
    text
}

/// An MCP tool's definition as first seen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Seen {
    description: String,
    schema: Value,
    annotations: Option<Value>,
}

impl Seen {
    /// 16 hex digits of a SHA-256 of the definition.
    fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let text = serde_json::to_vec(self).unwrap_or_default();
        Sha256::digest(&text).iter().take(8).map(|b| format!("{b:02x}")).collect()
    }

    fn of(api: &Api) -> Seen {
        Seen {
            description: api.description.clone(),
            schema: api.declared_schema.clone().unwrap_or(Value::Null),
            annotations: api.mcp.as_ref().and_then(|t| t.annotations.clone()),
        }
    }

    /// What changed, in words for the log.
    fn difference(&self, now: &Seen) -> String {
        let mut parts = Vec::new();
        if self.description != now.description {
            parts.push(format!(
                "description {:?} → {:?}",
                crate::text::clip(&self.description, 200),
                crate::text::clip(&now.description, 200)
            ));
        }
        if self.schema != now.schema {
            parts.push(format!(
                "input schema {} → {}",
                crate::text::clip(&self.schema.to_string(), 200),
                crate::text::clip(&now.schema.to_string(), 200)
            ));
        }
        if self.annotations != now.annotations {
            parts.push(format!("annotations {:?} → {:?}", self.annotations, now.annotations));
        }
        parts.join("; ")
    }
}

/// The MCP tools' first-seen definitions, by function name.
#[derive(Debug, Default, Serialize, Deserialize)]
struct SeenFile {
    tools: BTreeMap<String, Seen>,
}

/// How the reason of a tool held for its changed definition begins.
pub(crate) const CHANGED: &str = "its definition changed since it was first seen";

/// The rules that let a held tool through (`access.allow_flagged`,
/// `access.accept_changes`), and the tool an operator accepts now.
#[derive(Clone)]
pub(crate) struct Exceptions {
    pub(crate) allow_flagged: Vec<Rule>,
    pub(crate) accept_changes: Vec<Rule>,
    /// A tool whose changed definition an operator accepts by an admin
    /// call: its exact name and the digest of the definition accepted (for
    /// one review, which records it as seen if it is still that one).
    pub(crate) accepted: Option<(String, String)>,
}

impl Exceptions {
    pub(crate) fn of(allow_flagged: &[String], accept_changes: &[String]) -> Result<Exceptions, String> {
        let read = |rules: &[String]| rules.iter().map(|r| Rule::parse(r)).collect::<Result<Vec<_>, _>>();
        Ok(Exceptions { allow_flagged: read(allow_flagged)?, accept_changes: read(accept_changes)?, accepted: None })
    }
}

/// The tools held in one catalog.
#[derive(Debug, Default)]
pub(crate) struct Quarantine {
    held: HashMap<String, HeldTool>,
    /// Which of the catalog's APIs are not held, by id (`None`: none is held).
    mask: Option<Arc<Vec<bool>>>,
    catalog: Weak<Catalog>,
}

impl Quarantine {
    /// Reviews `catalog`'s MCP and OpenAPI tools against their first-seen
    /// definitions in `state` (recording the new ones) and the scan.
    pub(crate) fn review(catalog: &Arc<Catalog>, state: &Path, exceptions: &Exceptions) -> Quarantine {
        let path = seen_path(state);
        let mut seen = read_seen(&path);
        let mut seen_changed = false;
        let mut held: HashMap<String, HeldTool> = HashMap::new();
        for api in catalog.apis() {
            let origin = catalog.tool(api.tool).origin;
            if !matches!(origin, Origin::Mcp | Origin::OpenApi) {
                continue;
            }
            let facts = Facts::of(catalog, api);
            let matches = |rules: &[Rule]| rules.iter().any(|r| r.matches(&facts));
            let mut reasons = scan(&model_text(api));
            if !reasons.is_empty() && matches(&exceptions.allow_flagged) {
                tracing::info!(tool = %api.function_name, "a flagged tool is allowed by access.allow_flagged: {}", reasons.join("; "));
                reasons.clear();
            }
            let mut definition = None;
            if origin == Origin::Mcp {
                let now = Seen::of(api);
                match seen.tools.get(&api.function_name) {
                    None => {
                        seen.tools.insert(api.function_name.clone(), now);
                        seen_changed = true;
                    }
                    Some(first) if *first != now => {
                        let difference = first.difference(&now);
                        let accepted = exceptions.accepted.as_ref();
                        if accepted.is_some_and(|(name, digest)| *name == api.function_name && *digest == now.digest())
                        {
                            tracing::info!(tool = %api.function_name, "a changed tool is accepted by an operator: {difference}");
                            seen.tools.insert(api.function_name.clone(), now);
                            seen_changed = true;
                        } else if matches(&exceptions.accept_changes) {
                            tracing::info!(tool = %api.function_name, "a changed tool is accepted by access.accept_changes: {difference}");
                            seen.tools.insert(api.function_name.clone(), now);
                            seen_changed = true;
                        } else {
                            tracing::warn!(tool = %api.function_name, "a tool changed since it was first seen and is held until accepted (access.accept_changes): {difference}");
                            reasons.push(format!("{CHANGED}: {difference}"));
                            definition = Some(now.digest());
                        }
                    }
                    Some(_) => {}
                }
            }
            if !reasons.is_empty() {
                let function = api.function_name.clone();
                held.insert(function.clone(), HeldTool { function, reasons, definition });
            }
        }
        if seen_changed && let Err(e) = write_seen(&path, &seen) {
            tracing::error!(path = %path.display(), "the tools' first-seen definitions could not be written: {e}");
        }
        let mut list: Vec<&HeldTool> = held.values().collect();
        list.sort_by(|a, b| a.function.cmp(&b.function));
        for h in &list {
            tracing::warn!(tool = %h.function, "held: not offered or called: {}", h.reasons.join("; "));
        }
        let mask = (!held.is_empty())
            .then(|| Arc::new(catalog.apis().iter().map(|a| !held.contains_key(&a.function_name)).collect()));
        Quarantine { held, mask, catalog: Arc::downgrade(catalog) }
    }

    /// Why `function` is held, if it is.
    pub(crate) fn held(&self, function: &str) -> Option<&HeldTool> {
        self.held.get(function)
    }

    /// Every held tool, by name.
    pub(crate) fn list(&self) -> Vec<HeldTool> {
        let mut list: Vec<HeldTool> = self.held.values().cloned().collect();
        list.sort_by(|a, b| a.function.cmp(&b.function));
        list
    }

    /// The APIs of `catalog` that are not held (`None`: all of them, or
    /// another catalog than the one reviewed).
    pub(crate) fn mask(&self, catalog: &Arc<Catalog>) -> Option<Arc<Vec<bool>>> {
        let same = self.catalog.upgrade().is_some_and(|c| Arc::ptr_eq(&c, catalog));
        self.mask.clone().filter(|_| same)
    }
}

fn seen_path(state: &Path) -> PathBuf {
    state.join("tools-seen.json")
}

fn read_seen(path: &Path) -> SeenFile {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::error!(path = %path.display(), "the tools' first-seen definitions are unreadable ({e}); every tool is seen anew");
            SeenFile::default()
        }),
        Err(_) => SeenFile::default(),
    }
}

/// Written beside (under a name of this process and write), fsync'd,
/// renamed into place, the directory fsync'd.
fn write_seen(path: &Path, seen: &SeenFile) -> std::io::Result<()> {
    use std::io::Write;
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temp = path.with_extension(format!("json.{}-{n}.new", std::process::id()));
    let mut file = std::fs::File::create(&temp)?;
    file.write_all(&serde_json::to_vec_pretty(seen).map_err(std::io::Error::other)?)?;
    file.sync_all()?;
    std::fs::rename(&temp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests;
