//! `[server.oauth]`: toolrouter as an OAuth 2.1 resource server (the MCP
//! authorization specification): which authorization server's tokens it
//! accepts, for which resource, with which scopes, and how it reads the
//! issuer's keys. Off while `issuer` is empty.

use serde::{Deserialize, Serialize};

/// `server.oauth.leeway_s`: the clock skew allowed on `exp` and `nbf`.
pub const DEFAULT_OAUTH_LEEWAY_S: u64 = 60;
/// `server.oauth.jwks_timeout_ms`: the longest the issuer's metadata and keys may take to arrive.
pub const DEFAULT_JWKS_TIMEOUT_MS: u64 = 3_000;
/// `server.oauth.jwks_refresh_s`: how long fetched keys are used before they are fetched again.
pub const DEFAULT_JWKS_REFRESH_S: u64 = 600;
/// Most clock skew `leeway_s` may allow.
const MAX_LEEWAY_S: u64 = 600;

/// `[server.oauth]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OAuthConfig {
    /// The authorization server: tokens' `iss` must be exactly this, and
    /// its keys are found from its metadata (RFC 8414, else OpenID
    /// discovery). Empty: no OAuth, API keys only.
    pub issuer: String,
    /// This server's URL as MCP clients reach it (`https://host/mcp`):
    /// the `resource` of its metadata, and what tokens' `aud` must hold.
    pub resource: String,
    /// What tokens' `aud` must hold when the issuer does not name the
    /// resource by its URL (an API identifier such as `api://toolrouter`,
    /// an application id). Empty: `resource`.
    pub audience: String,
    /// The issuer's JWKS, when its metadata does not say (or is not served).
    pub jwks_uri: String,
    /// The scopes advertised to clients. Non-empty: a token must carry one
    /// of them (else 403 `insufficient_scope`).
    pub scopes: Vec<String>,
    pub leeway_s: u64,
    pub jwks_timeout_ms: u64,
    pub jwks_refresh_s: u64,
}

impl Default for OAuthConfig {
    fn default() -> Self {
        OAuthConfig {
            issuer: String::new(),
            resource: String::new(),
            audience: String::new(),
            jwks_uri: String::new(),
            scopes: Vec::new(),
            leeway_s: DEFAULT_OAUTH_LEEWAY_S,
            jwks_timeout_ms: DEFAULT_JWKS_TIMEOUT_MS,
            jwks_refresh_s: DEFAULT_JWKS_REFRESH_S,
        }
    }
}

impl OAuthConfig {
    /// Whether tokens are accepted.
    pub fn enabled(&self) -> bool {
        !self.issuer.is_empty()
    }

    /// What tokens' `aud` must hold: `audience`, else `resource`.
    pub fn audience(&self) -> &str {
        if self.audience.is_empty() { &self.resource } else { &self.audience }
    }

    /// URLs are http(s) URLs, the resource is set with the issuer, the
    /// limits are limits, as (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        if !self.enabled() {
            let set = !self.resource.is_empty()
                || !self.audience.is_empty()
                || !self.jwks_uri.is_empty()
                || !self.scopes.is_empty();
            return match set {
                true => Err(("server.oauth.issuer".into(), "is needed for the other server.oauth keys".into())),
                false => Ok(()),
            };
        }
        let urls = [("issuer", &self.issuer), ("resource", &self.resource), ("jwks_uri", &self.jwks_uri)];
        for (key, value) in urls {
            if key == "jwks_uri" && value.is_empty() {
                continue;
            }
            let parsed = url::Url::parse(value).ok().filter(|u| matches!(u.scheme(), "http" | "https"));
            let Some(url) = parsed.filter(|u| u.host().is_some() && u.fragment().is_none()) else {
                let hint = match key {
                    "resource" => " (this server's URL as clients reach it, e.g. https://toolrouter.example.com/mcp)",
                    _ => "",
                };
                return Err((format!("server.oauth.{key}"), format!("{value:?} is not an http(s) URL{hint}")));
            };
            // Keys fetched over plain HTTP could be swapped on the way: only this machine may serve them so.
            if key != "resource" && url.scheme() != "https" && !is_loopback_url(&url) {
                return Err((format!("server.oauth.{key}"), format!("{value:?} must be https (or on loopback)")));
            }
        }
        if let Some(scope) = self.scopes.iter().find(|s| !is_scope_token(s)) {
            let problem = format!("{scope:?} is not a scope (RFC 6749: no spaces, quotes or backslashes)");
            return Err(("server.oauth.scopes".into(), problem));
        }
        if self.leeway_s > MAX_LEEWAY_S {
            return Err(("server.oauth.leeway_s".into(), format!("must be at most {MAX_LEEWAY_S}")));
        }
        for (key, n) in [("jwks_timeout_ms", self.jwks_timeout_ms), ("jwks_refresh_s", self.jwks_refresh_s)] {
            if n == 0 {
                return Err((format!("server.oauth.{key}"), "must be at least 1".into()));
            }
        }
        Ok(())
    }
}

/// Whether `url`'s host is this machine (`localhost`, 127.0.0.0/8, `::1`).
pub fn is_loopback_url(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Whether `scope` is an RFC 6749 scope token: printable ASCII but for
/// space, `"` and `\` (so that it fits in a `WWW-Authenticate` challenge).
pub(super) fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty() && scope.bytes().all(|b| matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E))
}
