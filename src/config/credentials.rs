//! `[[upstream.credentials]]`: how toolrouter authenticates to the user's
//! own HTTP services (OpenAPI specs), one entry per host, and the checks
//! on them. The secret itself comes from an environment variable or a
//! file ([`SecretRef`]), never the config file; it is sent only to its
//! host (the request's actual host and port, so never through
//! `upstream.base_url` and never after a redirect to another host).

use serde::{Deserialize, Serialize};

use super::SecretRef;

/// How a credential goes into the request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialScheme {
    /// `Authorization: Bearer <secret>`.
    #[default]
    Bearer,
    /// A header named `name` holding the secret (an API key).
    Header,
    /// A query parameter named `name` holding the secret (an API key).
    Query,
    /// `Authorization: Basic`, `username` and the secret as password.
    Basic,
}

/// The credential of one host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CredentialConfig {
    /// The host it is sent to: `api.example.com`, or `host:port` for a port
    /// other than the scheme's default.
    pub host: String,
    pub scheme: CredentialScheme,
    /// The header or query parameter (`header`, `query` schemes).
    pub name: String,
    /// The user (`basic` scheme).
    pub username: String,
    /// The token, key or password: `{ env = "VAR" }` or `{ file = "path" }`.
    pub secret: SecretRef,
    /// The host may be (or resolve to) a private, loopback or link-local
    /// address (an internal service), without `upstream.allow_private`
    /// opening every host.
    pub allow_private: bool,
}

/// The hosts (without their ports) whose credentials allow private addresses.
pub fn private_hosts(credentials: &[CredentialConfig]) -> Vec<String> {
    let host = |c: &CredentialConfig| {
        let url = url::Url::parse(&format!("http://{}/", c.host)).ok()?;
        Some(url.host_str()?.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase())
    };
    credentials.iter().filter(|c| c.allow_private).filter_map(host).collect()
}

/// Checks every credential and that no host has two, as (key, problem).
pub(super) fn validate(credentials: &[CredentialConfig]) -> Result<(), (String, String)> {
    for (i, c) in credentials.iter().enumerate() {
        let key = |k: &str| format!("upstream.credentials[{i}].{k}");
        let parsed = url::Url::parse(&format!("http://{}/", c.host)).ok();
        if c.host.is_empty() || c.host.contains('/') || parsed.as_ref().and_then(|u| u.host_str()).is_none() {
            return Err((key("host"), format!("{:?} is not a host or host:port", c.host)));
        }
        if matches!(c.scheme, CredentialScheme::Header | CredentialScheme::Query) && c.name.trim().is_empty() {
            return Err((key("name"), "the header or query parameter to put the secret in is required".into()));
        }
        if c.scheme == CredentialScheme::Header && http::HeaderName::from_bytes(c.name.as_bytes()).is_err() {
            return Err((key("name"), format!("{:?} is not a valid header name", c.name)));
        }
        if c.scheme == CredentialScheme::Basic && c.username.is_empty() {
            return Err((key("username"), "the basic scheme needs a username".into()));
        }
        if c.secret.env.is_empty() == c.secret.file.as_os_str().is_empty() {
            return Err((key("secret"), "set exactly one of `env` or `file`".into()));
        }
        if let Some(j) = credentials[..i].iter().position(|o| o.host.eq_ignore_ascii_case(&c.host)) {
            return Err((key("host"), format!("{:?} already has a credential (upstream.credentials[{j}])", c.host)));
        }
    }
    Ok(())
}
