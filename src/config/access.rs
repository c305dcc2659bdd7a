//! `[access]`: who may use which tools. Each `[[access.policies]]` names
//! the API keys it governs and the tools they may see and call
//! ([`crate::policy`] reads the rules). A key no policy names may use
//! every tool, as before policies existed.

use serde::{Deserialize, Serialize};

/// `access.consent_timeout_s`.
pub const DEFAULT_CONSENT_TIMEOUT_S: u64 = 300;

/// `[access]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AccessConfig {
    /// Whether every tool call, made or refused, is written to the audit
    /// log (`audit/` in the state directory).
    pub audit: bool,
    /// Whether the audit log also keeps each call's arguments and answer.
    pub audit_content: bool,
    /// Rules (as a policy's) naming tools the scan flagged that may be
    /// offered and called all the same.
    pub allow_flagged: Vec<String>,
    /// Rules naming MCP tools whose changed definition is accepted (and
    /// remembered as the one seen).
    pub accept_changes: Vec<String>,
    /// Whether execute mode asks before a destructive call.
    pub consent: ConsentMode,
    /// A pending call not confirmed within this many seconds is refused.
    pub consent_timeout_s: u64,
    /// Rules naming APIs that only read, whatever their HTTP method or annotations.
    pub read_only: Vec<String>,
    /// Rules naming APIs that are destructive, whatever their method or annotations.
    pub destructive: Vec<String>,
    pub policies: Vec<PolicyConfig>,
}

/// `access.consent`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsentMode {
    /// Execute mode stops before a destructive call and asks, unless the
    /// caller's policy is `unattended`.
    #[default]
    Destructive,
    /// Never asks.
    Off,
}

impl Default for AccessConfig {
    fn default() -> Self {
        AccessConfig {
            audit: true,
            audit_content: false,
            allow_flagged: Vec::new(),
            accept_changes: Vec::new(),
            consent: ConsentMode::Destructive,
            consent_timeout_s: DEFAULT_CONSENT_TIMEOUT_S,
            read_only: Vec::new(),
            destructive: Vec::new(),
            policies: Vec::new(),
        }
    }
}

/// One policy: the keys it governs and its rules.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    /// Named in errors and logs ("not allowed by policy `weather-desk`").
    pub name: String,
    /// The SHA-256 hashes of the API keys it governs (each in
    /// `server.api_key_hashes` or `server.admin_key_hashes`; `toolrouter
    /// key hash KEY` prints one).
    pub key_hashes: Vec<String>,
    /// Rules a tool must match one of (empty: every tool).
    pub allow: Vec<String>,
    /// Rules no tool may match (they win over `allow`).
    pub deny: Vec<String>,
    /// OAuth scopes (`server.oauth`) that put a token under this policy:
    /// a token is governed by the first policy, in this file's order, one
    /// of whose scopes it carries.
    pub scopes: Vec<String>,
    /// Execute mode makes the destructive calls of these keys without
    /// asking (`access.consent`).
    pub unattended: bool,
}

impl AccessConfig {
    /// Every policy named once, its rules readable, its keys accepted
    /// keys, no key under two policies, its scopes only with OAuth on
    /// (`oauth`) and no scope under two policies, as (key, problem).
    pub(super) fn validate(&self, accepted: &[String], oauth: bool) -> Result<(), (String, String)> {
        if self.consent_timeout_s == 0 {
            return Err(("access.consent_timeout_s".into(), "must be at least 1".into()));
        }
        let lists = [
            ("access.allow_flagged", &self.allow_flagged),
            ("access.accept_changes", &self.accept_changes),
            ("access.read_only", &self.read_only),
            ("access.destructive", &self.destructive),
        ];
        for (key, rules) in lists {
            for rule in rules {
                crate::rule::Rule::parse(rule).map_err(|problem| (key.to_string(), problem))?;
            }
        }
        let mut seen_keys: Vec<(String, usize)> = Vec::new();
        for (i, p) in self.policies.iter().enumerate() {
            let key = |k: &str| format!("access.policies[{i}].{k}");
            if p.name.trim().is_empty() {
                return Err((key("name"), "every policy needs a name".into()));
            }
            if let Some(j) = self.policies[..i].iter().position(|o| o.name == p.name) {
                return Err((key("name"), format!("{:?} is already the name of access.policies[{j}]", p.name)));
            }
            for (list, rules) in [("allow", &p.allow), ("deny", &p.deny)] {
                for rule in rules {
                    crate::rule::Rule::parse(rule).map_err(|problem| (key(list), problem))?;
                }
            }
            for hash in &p.key_hashes {
                let hash = hash.to_ascii_lowercase();
                if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err((
                        key("key_hashes"),
                        format!("{hash:?} is not a SHA-256 in hex (`toolrouter key hash KEY` prints one)"),
                    ));
                }
                if !accepted.iter().any(|a| a.eq_ignore_ascii_case(&hash)) {
                    return Err((
                        key("key_hashes"),
                        format!("{}… is not an accepted key: add it to server.api_key_hashes", &hash[..12]),
                    ));
                }
                if let Some((_, j)) = seen_keys.iter().find(|(h, _)| *h == hash) {
                    return Err((
                        key("key_hashes"),
                        format!("{}… is already governed by access.policies[{j}]", &hash[..12]),
                    ));
                }
                seen_keys.push((hash, i));
            }
            for scope in &p.scopes {
                if !oauth {
                    return Err((key("scopes"), "scopes name OAuth tokens: set server.oauth.issuer first".into()));
                }
                if !super::oauth::is_scope_token(scope) {
                    return Err((
                        key("scopes"),
                        format!("{scope:?} is not a scope (RFC 6749: no spaces, quotes or backslashes)"),
                    ));
                }
                if let Some(j) = self.policies[..i].iter().position(|o| o.scopes.contains(scope)) {
                    return Err((key("scopes"), format!("{scope:?} already puts tokens under access.policies[{j}]")));
                }
            }
        }
        Ok(())
    }
}
