//! A rule naming tools, the language of `[[access.policies]]` and of
//! the quarantine's exceptions: `source:GLOB`, `server:GLOB`,
//! `category:GLOB`, `name:GLOB`, `read-only`, `destructive`, matched
//! against what the catalog knows of a tool ([`Facts`]). Read by the
//! configuration's checks, the policies ([`crate::policy`]) and the
//! quarantine ([`crate::quarantine`]).

use crate::catalog::{Api, Catalog, Effect, Origin};

/// A pattern with `*` (any run of characters) and `?` (any one), any case.
/// Compiled to a `regex` (already a dependency) rather than a glob crate:
/// two wildcards need no more.
#[derive(Debug, Clone)]
pub(crate) struct Glob(regex::Regex);

impl Glob {
    pub(crate) fn new(pattern: &str) -> Result<Glob, String> {
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

    pub(crate) fn matches(&self, text: &str) -> bool {
        self.0.is_match(text)
    }
}

/// One rule (of a policy's `allow` or `deny`, of `access.allow_flagged`…).
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

/// What the configuration says calls do, over what the catalog says
/// (`access.read_only`, `access.destructive`; the latter wins).
#[derive(Debug, Default)]
pub(crate) struct Effects {
    read_only: Vec<Rule>,
    destructive: Vec<Rule>,
}

impl Effects {
    pub(crate) fn of(read_only: &[String], destructive: &[String]) -> Result<Effects, String> {
        let read = |rules: &[String]| rules.iter().map(|r| Rule::parse(r)).collect::<Result<Vec<_>, _>>();
        Ok(Effects { read_only: read(read_only)?, destructive: read(destructive)? })
    }

    /// `facts` with their effect as the configuration has it.
    pub(crate) fn apply<'a>(&self, mut facts: Facts<'a>) -> Facts<'a> {
        // Matched on what the catalog knows but the effect itself.
        let plain = Facts { effect: None, ..facts.clone() };
        if self.destructive.iter().any(|r| r.matches(&plain)) {
            facts.effect = Some(Effect::Destructive);
        } else if self.read_only.iter().any(|r| r.matches(&plain)) {
            facts.effect = Some(Effect::ReadOnly);
        }
        facts
    }

    /// What calling `api` does.
    pub(crate) fn effect(&self, catalog: &Catalog, api: &Api) -> Effect {
        self.apply(Facts::of(catalog, api)).effect.unwrap_or(Effect::Destructive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
