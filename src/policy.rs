//! Who may use which tools: the policies of `[[access.policies]]`, each
//! governing the API keys it names. A tool a caller's policy does not
//! allow is never shown to them (searches, plans, route mode's kept
//! tools, MCP `tools/list`) and never called for them; a caller no
//! policy governs may use every tool.
//!
//! A rule matches a tool by what the catalog knows of it ([`Facts`]):
//!
//! * `source:GLOB`: `toolbench`, `openapi`, `mcp`, or `client` (the tools
//!   a request carries, which route mode narrows);
//! * `server:GLOB`: the MCP server, else the tool (an OpenAPI spec's
//!   title, a ToolBench tool), by its name or standardized name;
//! * `category:GLOB`, `name:GLOB` (the function name);
//! * `read-only`, `destructive`: what a call does ([`Effect`]).
//!
//! A tool is allowed when it matches one of `allow` (or `allow` is empty)
//! and none of `deny`. Globs take `*` and `?` and ignore case.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use crate::catalog::{Api, Catalog, Effect, Origin};
use crate::config::AccessConfig;

/// A pattern with `*` (any run of characters) and `?` (any one), any case.
/// Compiled to a `regex` (already a dependency) rather than a glob crate:
/// two wildcards need no more.
#[derive(Debug, Clone)]
pub(crate) struct Glob(regex::Regex);

impl Glob {
    fn new(pattern: &str) -> Result<Glob, String> {
        if pattern.trim().is_empty() {
            return Err("the pattern is empty".into());
        }
        let mut re = String::from("(?i)^");
        for c in pattern.chars() {
            match c {
                '*' => re.push_str(".*"),
                '?' => re.push('.'),
                c => re.push_str(&regex::escape(&c.to_string())),
            }
        }
        re.push('$');
        regex::Regex::new(&re).map(Glob).map_err(|e| format!("{pattern:?} is not a pattern: {e}"))
    }

    fn matches(&self, text: &str) -> bool {
        self.0.is_match(text)
    }
}

/// One rule of a policy's `allow` or `deny`.
#[derive(Debug, Clone)]
pub(crate) enum Rule {
    Source(Glob),
    Server(Glob),
    Category(Glob),
    Name(Glob),
    ReadOnly,
    Destructive,
}

/// What the rules say, for error messages.
const RULES: &str = "source:GLOB, server:GLOB, category:GLOB, name:GLOB, read-only, destructive";

impl Rule {
    /// Reads a rule (`category:Weather`, `destructive`), or says what the
    /// rules are.
    pub(crate) fn parse(text: &str) -> Result<Rule, String> {
        let text = text.trim();
        match text.split_once(':') {
            Some((kind, pattern)) => {
                let glob = Glob::new(pattern.trim()).map_err(|e| format!("rule {text:?}: {e}"))?;
                match kind.trim().to_ascii_lowercase().as_str() {
                    "source" => Ok(Rule::Source(glob)),
                    "server" => Ok(Rule::Server(glob)),
                    "category" => Ok(Rule::Category(glob)),
                    "name" => Ok(Rule::Name(glob)),
                    other => Err(format!("unknown rule kind `{other}` in {text:?}; the rules are {RULES}")),
                }
            }
            None => match text.to_ascii_lowercase().replace('_', "-").as_str() {
                "read-only" => Ok(Rule::ReadOnly),
                "destructive" => Ok(Rule::Destructive),
                _ => Err(format!("unknown rule {text:?}; the rules are {RULES}")),
            },
        }
    }

    pub(crate) fn matches(&self, facts: &Facts) -> bool {
        match self {
            Rule::Source(g) => g.matches(facts.source),
            Rule::Server(g) => facts.servers.iter().any(|s| g.matches(s)),
            Rule::Category(g) => g.matches(facts.category),
            Rule::Name(g) => g.matches(facts.name),
            Rule::ReadOnly => facts.effect == Some(Effect::ReadOnly),
            Rule::Destructive => facts.effect == Some(Effect::Destructive),
        }
    }
}

/// What rules match a tool by.
#[derive(Debug, Clone)]
pub(crate) struct Facts<'a> {
    pub(crate) source: &'static str,
    /// Its server's names (an MCP server's; a tool's name and standardized name).
    pub(crate) servers: Vec<&'a str>,
    pub(crate) category: &'a str,
    pub(crate) name: &'a str,
    /// `None`: not known (a client's own tool).
    pub(crate) effect: Option<Effect>,
}

impl<'a> Facts<'a> {
    /// A catalog API's facts.
    pub(crate) fn of(catalog: &'a Catalog, api: &'a Api) -> Facts<'a> {
        let tool = catalog.tool(api.tool);
        let source = match tool.origin {
            Origin::ToolBench | Origin::ToolBenchCompact | Origin::QueryApiList => "toolbench",
            Origin::OpenApi | Origin::Embedded => "openapi",
            Origin::Mcp => "mcp",
        };
        let servers = match &api.mcp {
            Some(target) => vec![target.server.as_str()],
            None => vec![tool.name.as_str(), tool.std_name.as_str()],
        };
        Facts { source, servers, category: &tool.category, name: &api.function_name, effect: Some(api.effect()) }
    }

    /// A tool a request carries (route mode's, a client's deferred tool):
    /// known by its name alone.
    pub(crate) fn client(name: &'a str) -> Facts<'a> {
        Facts { source: "client", servers: Vec::new(), category: "", name, effect: None }
    }
}

/// The catalog APIs a policy allows, by id, and the catalog they are of.
type Mask = (Weak<Catalog>, Arc<Vec<bool>>);

/// One policy.
#[derive(Debug)]
pub(crate) struct Policy {
    pub(crate) name: String,
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    /// The catalog APIs allowed, for the catalog it was computed on.
    mask: Mutex<Option<Mask>>,
}

impl Policy {
    /// A policy of rules (checked by the config's validation; an error here
    /// names the rule all the same).
    pub(crate) fn new(name: &str, allow: &[String], deny: &[String]) -> Result<Policy, String> {
        let read = |rules: &[String]| rules.iter().map(|r| Rule::parse(r)).collect::<Result<Vec<_>, _>>();
        Ok(Policy { name: name.to_string(), allow: read(allow)?, deny: read(deny)?, mask: Mutex::new(None) })
    }

    /// Whether a tool with `facts` is allowed.
    pub(crate) fn allows(&self, facts: &Facts) -> bool {
        (self.allow.is_empty() || self.allow.iter().any(|r| r.matches(facts)))
            && !self.deny.iter().any(|r| r.matches(facts))
    }

    /// Whether a catalog API is allowed.
    pub(crate) fn allows_api(&self, catalog: &Catalog, api: &Api) -> bool {
        self.allows(&Facts::of(catalog, api))
    }

    /// Which of `catalog`'s APIs are allowed, by id: computed once per
    /// catalog (a reload or a downstream server's change makes a new one).
    pub(crate) fn mask(&self, catalog: &Arc<Catalog>) -> Arc<Vec<bool>> {
        let mut cached = self.mask.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((of, mask)) = cached.as_ref()
            && of.upgrade().is_some_and(|c| Arc::ptr_eq(&c, catalog))
        {
            return mask.clone();
        }
        let mask: Arc<Vec<bool>> = Arc::new(catalog.apis().iter().map(|api| self.allows_api(catalog, api)).collect());
        *cached = Some((Arc::downgrade(catalog), mask.clone()));
        mask
    }
}

/// The policies in force, by the client id each key hash gives
/// ([`Policies::client_id`]).
#[derive(Debug, Default)]
pub(crate) struct Policies {
    by_client: HashMap<String, Arc<Policy>>,
}

impl Policies {
    /// The policies of `[access]`.
    pub(crate) fn of(config: &AccessConfig) -> Result<Policies, String> {
        let mut by_client = HashMap::new();
        for p in &config.policies {
            let policy = Arc::new(Policy::new(&p.name, &p.allow, &p.deny)?);
            for hash in &p.key_hashes {
                by_client.insert(Policies::client_id(hash), policy.clone());
            }
        }
        Ok(Policies { by_client })
    }

    /// The client id a key's hash stands for in requests: its first 12
    /// hex digits, as the server's key check names clients.
    pub(crate) fn client_id(hash: &str) -> String {
        hash.to_ascii_lowercase().chars().take(12).collect()
    }

    /// The policy governing `client` (`None`: every tool is allowed).
    pub(crate) fn governing(&self, client: Option<&str>) -> Option<Arc<Policy>> {
        self.by_client.get(client?).cloned()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_client.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str]) -> Policy {
        let s = |v: &[&str]| v.iter().map(|r| r.to_string()).collect::<Vec<_>>();
        Policy::new("test", &s(allow), &s(deny)).unwrap()
    }

    #[test]
    fn rules_read_and_unknown_ones_name_the_rules() {
        for ok in
            ["source:mcp", "server:time", "category:Weather*", "name:git__*", "read-only", "Destructive", "read_only"]
        {
            assert!(Rule::parse(ok).is_ok(), "{ok}");
        }
        for (bad, says) in
            [("owner:me", "unknown rule kind `owner`"), ("writes", "unknown rule \"writes\""), ("name:", "empty")]
        {
            let e = Rule::parse(bad).unwrap_err();
            assert!(e.contains(says) && (says == "empty" || e.contains("source:GLOB")), "{bad}: {e}");
        }
    }

    #[test]
    fn globs_match_whole_names_in_any_case_and_nothing_else() {
        let g = Glob::new("git__*").unwrap();
        assert!(g.matches("git__git_log") && g.matches("GIT__status"));
        assert!(!g.matches("github__search") && !g.matches("my_git__log"));
        let g = Glob::new("a.b?").unwrap();
        assert!(g.matches("a.bc") && !g.matches("axbc"), "a dot is a dot");
    }

    #[test]
    fn allow_then_deny_decide_over_the_embedded_catalog() {
        let catalog = Arc::new(Catalog::load(&crate::catalog::Sources::default()).unwrap());
        let weather = policy(&["category:weather"], &[]);
        let mask = weather.mask(&catalog);
        assert_eq!(mask.len(), catalog.apis().len());
        let allowed: Vec<&str> =
            catalog.apis().iter().filter(|a| mask[a.id.0 as usize]).map(|a| a.function_name.as_str()).collect();
        assert!(!allowed.is_empty() && allowed.len() < catalog.apis().len(), "{allowed:?}");
        for api in catalog.apis() {
            let category = &catalog.tool(api.tool).category;
            assert_eq!(mask[api.id.0 as usize], category.eq_ignore_ascii_case("weather"), "{}", api.function_name);
        }
        assert!(Arc::ptr_eq(&mask, &weather.mask(&catalog)), "computed once per catalog");

        let no_writes = policy(&[], &["destructive"]);
        for api in catalog.apis() {
            assert_eq!(
                no_writes.allows_api(&catalog, api),
                api.effect() != Effect::Destructive,
                "{}",
                api.function_name
            );
        }
        let client_only = policy(&["source:client"], &["name:*delete*"]);
        assert!(client_only.allows(&Facts::client("get_weather")));
        assert!(!client_only.allows(&Facts::client("delete_repo")));
        assert!(catalog.apis().iter().all(|a| !client_only.allows_api(&catalog, a)));
    }
}
