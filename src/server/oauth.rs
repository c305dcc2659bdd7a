//! toolrouter as an OAuth 2.1 resource server (`[server.oauth]`, the MCP
//! authorization specification): the protected resource metadata clients
//! discover (RFC 9728), the `WWW-Authenticate` challenge that points to
//! it, and the check of a bearer JWT: signed by a key of the issuer's
//! JWKS, for this resource (`aud`: its URL, or `audience`), from the issuer (`iss`), within its
//! `exp` and `nbf` give or take `leeway_s`.
//!
//! The issuer's keys ([`Jwks`]) are fetched on first need, used for
//! `jwks_refresh_s` and then fetched again in the background, and fetched
//! at once for a key id they do not hold (at most once per
//! [`REFETCH_AFTER`], so that tokens with made-up key ids cannot make
//! toolrouter hammer the issuer). A fetch takes at most `jwks_timeout_ms`;
//! while the issuer cannot be reached the keys already fetched stay in use.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use axum::http::HeaderValue;
use jsonwebtoken::jwk::{Jwk, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use crate::config::OAuthConfig;

/// Tokens checked and remembered (so that a client's next requests with
/// the same token skip the signature: RS256 costs about 100 µs of CPU
/// per check, docs/benchmarks.md).
const REMEMBERED_TOKENS: usize = 4096;
/// Tokens longer than this are refused before they are decoded.
pub(crate) const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// The largest JWKS or metadata document read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// A token naming a key the JWKS does not hold fetches it again at most this often.
pub(crate) const REFETCH_AFTER: Duration = Duration::from_secs(10);
/// The signature algorithms accepted: asymmetric ones only, so that a
/// public key can never serve as an HMAC secret.
const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Who a valid token speaks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bearer {
    pub(crate) subject: String,
    pub(crate) scopes: Vec<String>,
}

/// Why a token was not accepted.
#[derive(Debug, PartialEq)]
pub(crate) enum Refusal {
    /// 401 `invalid_token`: malformed, badly signed, expired, for another
    /// audience or issuer, or signed by a key the issuer does not publish.
    Invalid(String),
    /// 403 `insufficient_scope`: none of `server.oauth.scopes`.
    Scope,
    /// 503: the issuer's keys could not be fetched and none are held (the
    /// log says why).
    Unavailable,
}

/// The claims read from a token (the rest are checked by `jsonwebtoken`).
#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<String>,
    /// RFC 9068's space-separated scopes.
    #[serde(default)]
    scope: Option<String>,
    /// The scopes as some issuers (Okta, Entra ID) name them.
    #[serde(default)]
    scp: Option<Scp>,
    /// Checked by `jsonwebtoken` (required, numbers; read loosely here so
    /// that its errors say which is wrong); kept to forget the token when
    /// it expires.
    #[serde(default)]
    exp: serde_json::Value,
    #[serde(default)]
    nbf: serde_json::Value,
}

/// A token checked: whom it speaks for, and when it is valid (Unix
/// seconds, the leeway included).
struct Checked {
    bearer: Bearer,
    from: f64,
    until: f64,
    /// The key set's generation it was checked under.
    generation: u64,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Scp {
    Words(String),
    List(Vec<String>),
}

/// The resource server: what it advertises and how it checks tokens.
pub(crate) struct Verifier {
    config: OAuthConfig,
    jwks: Arc<Jwks>,
    /// The protected resource metadata document (JSON).
    metadata: String,
    /// Its URL, named in every challenge.
    metadata_url: String,
    /// Valid tokens checked lately, by the token itself.
    checked: std::sync::Mutex<lru::LruCache<String, Checked>>,
}

impl Verifier {
    /// The resource server of `config` (OAuth on). Fetches nothing yet.
    pub(crate) fn new(config: &OAuthConfig) -> Verifier {
        let metadata = serde_json::json!({
            "resource": config.resource,
            "authorization_servers": [config.issuer],
            "scopes_supported": config.scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "toolrouter",
        });
        Verifier {
            jwks: Arc::new(Jwks::new(config)),
            metadata: metadata.to_string(),
            metadata_url: metadata_url(&config.resource),
            checked: std::sync::Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(REMEMBERED_TOKENS).expect("not zero"),
            )),
            config: config.clone(),
        }
    }

    /// The protected resource metadata (RFC 9728), as JSON.
    pub(crate) fn metadata(&self) -> &str {
        &self.metadata
    }

    /// The `WWW-Authenticate` value of a refusal (`None`: no token was
    /// sent, or a token that is not a JWT): where the metadata is, the
    /// scopes to ask for, and the error if there is one.
    pub(crate) fn challenge(&self, refusal: Option<&Refusal>) -> HeaderValue {
        let mut value = format!("Bearer resource_metadata=\"{}\"", self.metadata_url);
        if !self.config.scopes.is_empty() {
            value.push_str(&format!(", scope=\"{}\"", self.config.scopes.join(" ")));
        }
        match refusal {
            Some(Refusal::Invalid(why)) => {
                // Quotes and backslashes cannot be in a quoted-string unescaped; non-ASCII not at all.
                let why: String =
                    why.chars().filter(|c| c.is_ascii() && !c.is_ascii_control() && !matches!(c, '"' | '\\')).collect();
                value.push_str(&format!(", error=\"invalid_token\", error_description=\"{why}\""));
            }
            Some(Refusal::Scope) => value.push_str(", error=\"insufficient_scope\""),
            Some(Refusal::Unavailable) | None => {}
        }
        HeaderValue::try_from(value).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
    }

    /// Whether `token` is shaped as a JWT (three base64url parts), so
    /// worth checking as one rather than as an API key.
    pub(crate) fn looks_like_jwt(token: &str) -> bool {
        let parts: Vec<&str> = token.split('.').collect();
        parts.len() == 3
            && parts[..2].iter().all(|p| !p.is_empty())
            && token.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'='))
    }

    /// The holder of `token`, if it is a valid token for this resource
    /// carrying a scope it needs.
    pub(crate) async fn verify(&self, token: &str) -> Result<Bearer, Refusal> {
        if let Some(bearer) = self.remembered(token) {
            return Ok(bearer);
        }
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Refusal::Invalid(format!("the token is over {MAX_TOKEN_BYTES} bytes")));
        }
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| Refusal::Invalid(format!("not a readable JWT: {e}")))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(Refusal::Invalid(format!("tokens signed with {:?} are not accepted", header.alg)));
        }
        // Read before the key: a key set changed during the check makes the
        // remembered token checked again.
        let generation = self.jwks.generation();
        let key = self.jwks.key(header.kid.as_deref()).await?;
        if key.algorithm.is_some_and(|alg| alg != header.alg) {
            return Err(Refusal::Invalid("the token's algorithm is not its key's".into()));
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[self.config.audience()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = self.config.leeway_s;
        let claims = jsonwebtoken::decode::<Claims>(token, &key.key, &validation)
            .map_err(|e| Refusal::Invalid(why_invalid(&e)))?
            .claims;
        let mut scopes: Vec<String> =
            claims.scope.as_deref().unwrap_or("").split_whitespace().map(String::from).collect();
        match claims.scp {
            Some(Scp::Words(words)) => scopes.extend(words.split_whitespace().map(String::from)),
            Some(Scp::List(list)) => scopes.extend(list),
            None => {}
        }
        if !self.config.scopes.is_empty() && !scopes.iter().any(|s| self.config.scopes.contains(s)) {
            return Err(Refusal::Scope);
        }
        let subject = claims
            .sub
            .filter(|s| !s.is_empty())
            .ok_or_else(|| Refusal::Invalid("the token has no sub claim".into()))?;
        let bearer = Bearer { subject, scopes };
        let leeway = self.config.leeway_s as f64;
        let checked = Checked {
            generation,
            bearer: bearer.clone(),
            from: claims.nbf.as_f64().map_or(f64::MIN, |nbf| nbf - leeway),
            until: claims.exp.as_f64().unwrap_or(f64::MIN) + leeway,
        };
        self.checked.lock().unwrap_or_else(|e| e.into_inner()).put(token.to_string(), checked);
        Ok(bearer)
    }

    /// The holder of `token` if it was checked lately and is still within
    /// its time.
    fn remembered(&self, token: &str) -> Option<Bearer> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64();
        let mut checked = self.checked.lock().unwrap_or_else(|e| e.into_inner());
        let hit = checked.get(token)?;
        if (hit.from..hit.until).contains(&now) && hit.generation == self.jwks.generation() {
            return Some(hit.bearer.clone());
        }
        checked.pop(token);
        None
    }

    /// The issuer (`iss`) tokens come from.
    pub(crate) fn issuer(&self) -> &str {
        &self.config.issuer
    }

    /// The `[server.oauth]` it was made of.
    pub(crate) fn config(&self) -> &OAuthConfig {
        &self.config
    }
}

/// What a client is told of an invalid token (never the token).
fn why_invalid(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match e.kind() {
        ErrorKind::ExpiredSignature => "the token has expired".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidAudience => "the token is for another resource (aud)".into(),
        ErrorKind::InvalidIssuer => "the token is from another issuer (iss)".into(),
        ErrorKind::InvalidSignature => "the token's signature does not verify".into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no {claim} claim"),
        ErrorKind::InvalidClaimFormat(claim) => format!("the token's {claim} claim is malformed"),
        ErrorKind::InvalidAlgorithm => "the token's algorithm does not fit its key".into(),
        _ => "the token could not be read".into(),
    }
}

/// The URL of the protected resource metadata of `resource` (RFC 9728
/// §3.1: the well-known path goes between the host and the resource's path).
fn metadata_url(resource: &str) -> String {
    let Ok(url) = url::Url::parse(resource) else { return String::new() };
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    format!("{origin}/.well-known/oauth-protected-resource{path}")
}

/// A key of the issuer's JWKS.
#[derive(Clone)]
struct Key {
    key: Arc<DecodingKey>,
    /// The algorithm the JWKS names for it, if it does.
    algorithm: Option<Algorithm>,
}

/// The issuer's keys, as last fetched.
#[derive(Default)]
struct Keys {
    by_id: HashMap<String, Key>,
    fetched: Option<Instant>,
    /// The last fetch started, and its error if it failed.
    tried: Option<Instant>,
    error: Option<String>,
}

/// The issuer's signing keys, fetched and cached.
pub(crate) struct Jwks {
    issuer: String,
    /// `server.oauth.jwks_uri`, else found in the issuer's metadata (then kept).
    uri: RwLock<Option<String>>,
    keys: RwLock<Keys>,
    /// Bumped when a fetch finds a key held before gone (rotated out,
    /// perhaps compromised): tokens remembered before are checked again.
    generation: AtomicU64,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
    /// A background refresh is under way.
    refreshing: AtomicBool,
    http: reqwest::Client,
    timeout: Duration,
    refresh: Duration,
    /// [`REFETCH_AFTER`] (shorter in tests).
    refetch_after: Duration,
}

impl Jwks {
    fn new(config: &OAuthConfig) -> Jwks {
        crate::outbound::install_crypto();
        let timeout = Duration::from_millis(config.jwks_timeout_ms);
        let http = reqwest::Client::builder()
            .user_agent(crate::outbound::USER_AGENT)
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                if attempt.previous().len() >= 3 {
                    attempt.error("more than 3 redirects")
                } else if attempt.url().scheme() != "https" && !crate::config::is_loopback_url(attempt.url()) {
                    attempt.error("a redirect away from https")
                } else {
                    attempt.follow()
                }
            }))
            .build()
            .expect("a client without custom TLS builds");
        Jwks {
            issuer: config.issuer.trim_end_matches('/').to_string(),
            uri: RwLock::new((!config.jwks_uri.is_empty()).then(|| config.jwks_uri.clone())),
            keys: RwLock::new(Keys::default()),
            generation: AtomicU64::new(0),
            fetching: tokio::sync::Mutex::new(()),
            refreshing: AtomicBool::new(false),
            http,
            timeout,
            refresh: Duration::from_secs(config.jwks_refresh_s),
            refetch_after: REFETCH_AFTER,
        }
    }

    /// The key `kid` names (no `kid`: the JWKS's only key), fetching the
    /// keys first if they are not held or do not hold it.
    async fn key(self: &Arc<Self>, kid: Option<&str>) -> Result<Key, Refusal> {
        if let Some(key) = self.held(kid) {
            let stale = {
                let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
                keys.fetched.is_none_or(|t| t.elapsed() > self.refresh) && !self.recently(keys.tried)
            };
            // One refresh in the background at a time, whatever the request rate.
            if stale && !self.refreshing.swap(true, Ordering::AcqRel) {
                let jwks = self.clone();
                tokio::spawn(async move {
                    jwks.fetch().await;
                    jwks.refreshing.store(false, Ordering::Release);
                });
            }
            return Ok(key);
        }
        self.fetch().await;
        if let Some(key) = self.held(kid) {
            return Ok(key);
        }
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        match (&keys.error, keys.by_id.is_empty()) {
            (Some(_), true) => Err(Refusal::Unavailable),
            _ => Err(Refusal::Invalid(match kid {
                Some(_) => "the token is signed by a key the issuer does not publish".into(),
                None => "the token names no key (kid) and the issuer publishes several".into(),
            })),
        }
    }

    /// Whether a fetch was started within `refetch_after`.
    fn recently(&self, tried: Option<Instant>) -> bool {
        tried.is_some_and(|t| t.elapsed() < self.refetch_after)
    }

    fn held(&self, kid: Option<&str>) -> Option<Key> {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        match kid {
            Some(kid) => keys.by_id.get(kid).cloned(),
            None if keys.by_id.len() == 1 => keys.by_id.values().next().cloned(),
            None => None,
        }
    }

    /// The key set's generation (see `generation`).
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Fetches the keys, unless a fetch started within `refetch_after` (a
    /// fetch under way: this waits for it, at most one fetch's time). The
    /// start is noted before the fetch, so that a request given up midway
    /// cannot make the next one fetch again at once.
    async fn fetch(&self) {
        let _one = self.fetching.lock().await;
        {
            let mut keys = self.keys.write().unwrap_or_else(|e| e.into_inner());
            if self.recently(keys.tried) {
                return;
            }
            keys.tried = Some(Instant::now());
        }
        let fetched = tokio::time::timeout(self.timeout, self.fetch_keys()).await.unwrap_or_else(|_| {
            Err(format!("no answer within {} ms (server.oauth.jwks_timeout_ms)", self.timeout.as_millis()))
        });
        let mut keys = self.keys.write().unwrap_or_else(|e| e.into_inner());
        match fetched {
            Ok(by_id) => {
                tracing::info!(keys = by_id.len(), issuer = %self.issuer, "OAuth: the issuer's keys fetched");
                if keys.by_id.keys().any(|kid| !by_id.contains_key(kid)) {
                    self.generation.fetch_add(1, Ordering::AcqRel);
                }
                *keys = Keys { by_id, fetched: Some(Instant::now()), tried: keys.tried, error: None };
            }
            Err(error) => {
                tracing::warn!(issuer = %self.issuer, held = keys.by_id.len(),
                    "OAuth: the issuer's keys could not be fetched, the ones held stay in use: {error}");
                keys.error = Some(error);
            }
        }
    }

    /// The JWKS, its URL found first if need be.
    async fn fetch_keys(&self) -> Result<HashMap<String, Key>, String> {
        let known = self.uri.read().unwrap_or_else(|e| e.into_inner()).clone();
        let uri = match known {
            Some(uri) => uri,
            None => {
                let uri = self.discover().await?;
                *self.uri.write().unwrap_or_else(|e| e.into_inner()) = Some(uri.clone());
                uri
            }
        };
        let set: JwkSet = self.get_json(&uri).await?;
        let keys: HashMap<String, Key> = set.keys.iter().enumerate().filter_map(usable).collect();
        if keys.is_empty() {
            return Err(format!("{uri} holds no signing key toolrouter can use"));
        }
        Ok(keys)
    }

    /// The `jwks_uri` of the issuer's metadata: RFC 8414's, else OpenID's.
    async fn discover(&self) -> Result<String, String> {
        #[derive(Deserialize)]
        struct Metadata {
            jwks_uri: String,
        }
        let url = url::Url::parse(&self.issuer).map_err(|e| e.to_string())?;
        let (origin, path) = (url.origin().ascii_serialization(), url.path().trim_end_matches('/'));
        let candidates = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{}/.well-known/openid-configuration", self.issuer),
        ];
        let mut errors = Vec::new();
        for candidate in candidates {
            match self.get_json::<Metadata>(&candidate).await {
                Ok(metadata) => return Ok(metadata.jwks_uri),
                Err(e) => errors.push(e),
            }
        }
        Err(format!("the issuer's metadata names no jwks_uri ({}); set server.oauth.jwks_uri", errors.join("; ")))
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, String> {
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| format!("{url}: {}", crate::outbound::cause(&e.without_url())))?;
        if !response.status().is_success() {
            return Err(format!("{url} answered {}", response.status()));
        }
        let body = crate::outbound::read_capped(http::Response::from(response), MAX_DOCUMENT_BYTES)
            .await
            .map_err(|_| format!("{url}: the document is over {MAX_DOCUMENT_BYTES} bytes or was cut off"))?;
        serde_json::from_slice(&body).map_err(|e| format!("{url}: {e}"))
    }
}

/// A JWK that can check signatures (a public key, not a shared secret,
/// not marked for encryption), by its id; `i`: its place in the set, the
/// id of a key without one (never a token's `kid`: such a key serves
/// tokens without a `kid`, when it is the set's only key).
fn usable((i, jwk): (usize, &Jwk)) -> Option<(String, Key)> {
    use jsonwebtoken::jwk::AlgorithmParameters;
    if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_))
        || matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption))
    {
        return None;
    }
    let algorithm = match jwk.common.key_algorithm {
        Some(alg) => Some(signing(alg)?),
        None => None,
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    let id = jwk.common.key_id.clone().unwrap_or_else(|| format!("#{i} (no kid)"));
    Some((id, Key { key: Arc::new(key), algorithm }))
}

/// The signature algorithm a JWK names (`None`: an encryption algorithm
/// or one not accepted).
fn signing(alg: KeyAlgorithm) -> Option<Algorithm> {
    let alg: Algorithm = alg.to_string().parse().ok()?;
    ALGORITHMS.contains(&alg).then_some(alg)
}

#[cfg(test)]
mod tests;
