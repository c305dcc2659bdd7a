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
//! * `read-only`, `destructive`: what a call does ([`crate::catalog::Effect`]).
//!
//! A tool is allowed when it matches one of `allow` (or `allow` is empty)
//! and none of `deny`. Globs take `*` and `?` and ignore case.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use crate::catalog::{Api, Catalog};
use crate::config::AccessConfig;
pub(crate) use crate::rule::{Effects, Facts, Rule};

/// The catalog APIs a policy allows, by id, and the catalog they are of.
type Mask = (Weak<Catalog>, Arc<Vec<bool>>);

/// One policy.
#[derive(Debug)]
pub(crate) struct Policy {
    pub(crate) name: String,
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    /// Execute mode makes this key's destructive calls without asking.
    pub(crate) unattended: bool,
    /// The catalog APIs allowed, for the catalog it was computed on.
    mask: Mutex<Option<Mask>>,
}

impl Policy {
    /// A policy of rules (checked by the config's validation; an error here
    /// names the rule all the same).
    pub(crate) fn new(name: &str, allow: &[String], deny: &[String]) -> Result<Policy, String> {
        let read = |rules: &[String]| rules.iter().map(|r| Rule::parse(r)).collect::<Result<Vec<_>, _>>();
        let (allow, deny) = (read(allow)?, read(deny)?);
        Ok(Policy { name: name.to_string(), allow, deny, unattended: false, mask: Mutex::new(None) })
    }

    /// Whether a tool with `facts` is allowed.
    pub(crate) fn allows(&self, facts: &Facts) -> bool {
        (self.allow.is_empty() || self.allow.iter().any(|r| r.matches(facts)))
            && !self.deny.iter().any(|r| r.matches(facts))
    }

    /// Whether a catalog API is allowed.
    pub(crate) fn allows_api(&self, catalog: &Catalog, api: &Api, effects: &Effects) -> bool {
        self.allows(&effects.apply(Facts::of(catalog, api)))
    }

    /// Which of `catalog`'s APIs are allowed, by id: computed once per
    /// catalog (a reload or a downstream server's change makes a new one).
    /// (`effects` are the configuration's, which a reload replaces along
    /// with the policies: a policy's mask is never of older ones.)
    pub(crate) fn mask(&self, catalog: &Arc<Catalog>, effects: &Effects) -> Arc<Vec<bool>> {
        let mut cached = self.mask.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((of, mask)) = cached.as_ref()
            && of.upgrade().is_some_and(|c| Arc::ptr_eq(&c, catalog))
        {
            return mask.clone();
        }
        let mask: Arc<Vec<bool>> =
            Arc::new(catalog.apis().iter().map(|api| self.allows_api(catalog, api, effects)).collect());
        *cached = Some((Arc::downgrade(catalog), mask.clone()));
        mask
    }
}

/// The policies in force, by the client id each key hash gives
/// ([`Policies::client_id`]) and by name (for OAuth tokens, whose client
/// ids name theirs: [`Policies::token_client`]).
#[derive(Debug)]
pub(crate) struct Policies {
    by_client: HashMap<String, Arc<Policy>>,
    by_name: HashMap<String, Arc<Policy>>,
    /// What governs a client id naming a policy that is not (any more)
    /// configured: nothing allowed, never every tool.
    missing: Arc<Policy>,
}

impl Default for Policies {
    /// No policy: every client may use every tool.
    fn default() -> Self {
        Policies::of(&AccessConfig::default()).expect("no rule to read")
    }
}

/// How the client ids of OAuth tokens' holders begin.
const TOKEN_CLIENT: &str = "oauth:";
/// How the client id of `toolrouter mcp` over stdio under a policy begins.
const STDIO_CLIENT: &str = "stdio:";

impl Policies {
    /// The policies of `[access]`.
    pub(crate) fn of(config: &AccessConfig) -> Result<Policies, String> {
        let (mut by_client, mut by_name) = (HashMap::new(), HashMap::new());
        for p in &config.policies {
            let policy = Arc::new(Policy { unattended: p.unattended, ..Policy::new(&p.name, &p.allow, &p.deny)? });
            for hash in &p.key_hashes {
                by_client.insert(Policies::client_id(hash), policy.clone());
            }
            by_name.insert(p.name.clone(), policy);
        }
        let missing = Policy::new("a policy no longer configured", &[], &["name:*".to_string()])?;
        Ok(Policies { by_client, by_name, missing: Arc::new(missing) })
    }

    /// The name of the policy a token with `scopes` is under: the first in
    /// `config`'s order one of whose scopes it carries.
    pub(crate) fn scoped<'a>(config: &'a AccessConfig, scopes: &[String]) -> Option<&'a str> {
        config.policies.iter().find(|p| p.scopes.iter().any(|s| scopes.contains(s))).map(|p| p.name.as_str())
    }

    /// The client id of an OAuth token's holder: `oauth:`, 12 hex digits
    /// of its issuer and subject, and `:POLICY` when its scopes put it
    /// under one ([`Policies::scoped`]). Never a key's (those are hex alone).
    pub(crate) fn token_client(issuer: &str, subject: &str, policy: Option<&str>) -> String {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(format!("{issuer}\n{subject}").as_bytes());
        let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
        match policy {
            Some(name) => format!("{TOKEN_CLIENT}{hex}:{name}"),
            None => format!("{TOKEN_CLIENT}{hex}"),
        }
    }

    /// The client id a key's hash stands for in requests: its first 12
    /// hex digits, as the server's key check names clients.
    pub(crate) fn client_id(hash: &str) -> String {
        hash.to_ascii_lowercase().chars().take(12).collect()
    }

    /// The client id of `toolrouter mcp` over stdio under the policy
    /// `name` (`mcp.stdio_policy`).
    pub(crate) fn stdio_client(name: &str) -> String {
        format!("{STDIO_CLIENT}{name}")
    }

    /// The policy governing `client` (`None`: every tool is allowed).
    pub(crate) fn governing(&self, client: Option<&str>) -> Option<Arc<Policy>> {
        let client = client?;
        let named = match client.strip_prefix(STDIO_CLIENT) {
            Some(name) => Some(Some(name)),
            None => client.strip_prefix(TOKEN_CLIENT).map(|token| token.split_once(':').map(|(_, name)| name)),
        };
        match named {
            // Named at start or by the gate: if the policy is gone since
            // (a reload), nothing is allowed until the name is good again.
            Some(Some(name)) => Some(self.by_name.get(name).cloned().unwrap_or_else(|| self.missing.clone())),
            Some(None) => None,
            None => self.by_client.get(client).cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Effect;

    fn policy(allow: &[&str], deny: &[&str]) -> Policy {
        let s = |v: &[&str]| v.iter().map(|r| r.to_string()).collect::<Vec<_>>();
        Policy::new("test", &s(allow), &s(deny)).unwrap()
    }

    #[test]
    fn allow_then_deny_decide_over_the_embedded_catalog() {
        let catalog = Arc::new(Catalog::load(&crate::catalog::Sources::default()).unwrap());
        let weather = policy(&["category:weather"], &[]);
        let mask = weather.mask(&catalog, &Effects::default());
        assert_eq!(mask.len(), catalog.apis().len());
        let allowed: Vec<&str> =
            catalog.apis().iter().filter(|a| mask[a.id.0 as usize]).map(|a| a.function_name.as_str()).collect();
        assert!(!allowed.is_empty() && allowed.len() < catalog.apis().len(), "{allowed:?}");
        for api in catalog.apis() {
            let category = &catalog.tool(api.tool).category;
            assert_eq!(mask[api.id.0 as usize], category.eq_ignore_ascii_case("weather"), "{}", api.function_name);
        }
        assert!(Arc::ptr_eq(&mask, &weather.mask(&catalog, &Effects::default())), "computed once per catalog");

        let no_writes = policy(&[], &["destructive"]);
        for api in catalog.apis() {
            assert_eq!(
                no_writes.allows_api(&catalog, api, &Effects::default()),
                api.effect() != Effect::Destructive,
                "{}",
                api.function_name
            );
        }
        let client_only = policy(&["source:client"], &["name:*delete*"]);
        assert!(client_only.allows(&Facts::client("get_weather")));
        assert!(!client_only.allows(&Facts::client("delete_repo")));
        assert!(catalog.apis().iter().all(|a| !client_only.allows_api(&catalog, a, &Effects::default())));
    }

    #[test]
    fn a_token_is_under_the_first_policy_its_scopes_name() {
        use crate::config::PolicyConfig;
        let key = "ab".repeat(32);
        let scoped = |name: &str, scopes: &[&str], deny: &[&str]| PolicyConfig {
            name: name.into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
            ..PolicyConfig::default()
        };
        let config = AccessConfig {
            policies: vec![
                PolicyConfig { key_hashes: vec![key.clone()], ..scoped("keyed", &[], &["name:*"]) },
                scoped("weather", &["tools:weather"], &["name:delete*"]),
                scoped("all", &["tools:all", "tools:weather"], &[]),
            ],
            ..AccessConfig::default()
        };
        let scopes = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(Policies::scoped(&config, &scopes(&["openid", "tools:weather", "tools:all"])), Some("weather"));
        assert_eq!(Policies::scoped(&config, &scopes(&["tools:all"])), Some("all"));
        assert_eq!(Policies::scoped(&config, &scopes(&["openid"])), None);

        let policies = Policies::of(&config).unwrap();
        let alice = Policies::token_client("https://as", "alice", Some("weather"));
        assert!(alice.starts_with("oauth:") && alice.ends_with(":weather"), "{alice}");
        assert_eq!(policies.governing(Some(&alice)).unwrap().name, "weather");
        let bare = Policies::token_client("https://as", "alice", None);
        assert!(policies.governing(Some(&bare)).is_none(), "a token under no policy may use every tool");
        assert_ne!(Policies::token_client("https://other", "alice", None), bare, "the issuer is part of who it is");
        assert_eq!(policies.governing(Some(&Policies::client_id(&key))).unwrap().name, "keyed");
        assert_eq!(policies.governing(Some(&Policies::stdio_client("weather"))).unwrap().name, "weather");
        let gone = Policies::token_client("https://as", "alice", Some("renamed"));
        let nothing = policies.governing(Some(&gone)).expect("a policy that allows nothing, not every tool");
        assert!(!nothing.allows(&Facts::client("get_weather")));
        let stdio_gone = policies.governing(Some(&Policies::stdio_client("renamed"))).unwrap();
        assert!(!stdio_gone.allows(&Facts::client("get_weather")));
    }
}
