//! The token check against an issuer served on loopback (its metadata and
//! JWKS over real HTTP): every refusal the MCP authorization spec names,
//! an issuer that is down or slow, keys rotated, scopes.

use std::sync::Mutex;

use jsonwebtoken::{EncodingKey, Header};
use serde_json::{Value, json};

use super::*;

const RESOURCE: &str = "http://toolrouter.test/mcp";

/// How the issuer answers.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Up,
    Down,
    Slow,
}

struct Served {
    jwks: Value,
    mode: Mode,
    /// Requests for the JWKS.
    hits: usize,
}

/// An authorization server's metadata and JWKS on loopback.
struct Issuer {
    url: String,
    served: Arc<Mutex<Served>>,
}

impl Issuer {
    async fn start(keys: &[&Signer]) -> Issuer {
        let served = Arc::new(Mutex::new(Served { jwks: jwks(keys), mode: Mode::Up, hits: 0 }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let metadata = json!({"issuer": url, "jwks_uri": format!("{url}/jwks")});
        let state = served.clone();
        let router = axum::Router::new()
            .route(
                "/.well-known/oauth-authorization-server",
                axum::routing::get(move || async move { axum::Json(metadata) }),
            )
            .route(
                "/jwks",
                axum::routing::get(move || async move {
                    let (mode, jwks) = {
                        let mut served = state.lock().unwrap();
                        served.hits += 1;
                        (served.mode, served.jwks.clone())
                    };
                    match mode {
                        Mode::Up => axum::Json(jwks).into_response(),
                        Mode::Down => axum::http::StatusCode::BAD_GATEWAY.into_response(),
                        Mode::Slow => {
                            tokio::time::sleep(Duration::from_secs(30)).await;
                            axum::Json(jwks).into_response()
                        }
                    }
                }),
            );
        tokio::spawn(async move { axum::serve(listener, router).await });
        Issuer { url, served }
    }

    fn set(&self, mode: Mode) {
        self.served.lock().unwrap().mode = mode;
    }

    fn hits(&self) -> usize {
        self.served.lock().unwrap().hits
    }

    fn verifier(&self, scopes: &[&str]) -> Verifier {
        let config = OAuthConfig {
            issuer: self.url.clone(),
            resource: RESOURCE.into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            jwks_timeout_ms: 300,
            ..OAuthConfig::default()
        };
        let mut verifier = Verifier::new(&config);
        Arc::get_mut(&mut verifier.jwks).unwrap().refetch_after = Duration::from_millis(200);
        verifier
    }

    /// Claims that pass, from this issuer.
    fn claims(&self) -> Value {
        json!({"iss": self.url, "aud": RESOURCE, "sub": "alice", "exp": now() + 300, "scope": "tools:weather openid"})
    }
}

use axum::response::IntoResponse;

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// An Ed25519 key (from a seed) and its id.
struct Signer {
    key: EncodingKey,
    kid: String,
}

impl Signer {
    fn new(seed: u8, kid: &str) -> Signer {
        // PKCS#8 of an Ed25519 private key: a fixed 16-byte header, then the 32-byte seed.
        let mut der = hex_bytes("302e020100300506032b657004220420");
        der.extend([seed; 32]);
        Signer { key: EncodingKey::from_ed_der(&der), kid: kid.into() }
    }

    fn jwk(&self) -> Value {
        let mut jwk = serde_json::to_value(Jwk::from_encoding_key(&self.key, Algorithm::EdDSA).unwrap()).unwrap();
        jwk["kid"] = json!(self.kid);
        jwk["use"] = json!("sig");
        jwk
    }

    fn sign(&self, claims: &Value) -> String {
        let header = Header { kid: Some(self.kid.clone()), ..Header::new(Algorithm::EdDSA) };
        jsonwebtoken::encode(&header, claims, &self.key).unwrap()
    }
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

fn jwks(keys: &[&Signer]) -> Value {
    json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()})
}

fn invalid(result: Result<Bearer, Refusal>, expected: &str) {
    match result {
        Err(Refusal::Invalid(why)) => assert!(why.contains(expected), "{why:?} should say {expected:?}"),
        other => panic!("expected an invalid token ({expected}), got {other:?}"),
    }
}

#[tokio::test]
async fn a_token_is_accepted_only_for_this_resource_from_this_issuer_in_its_time() {
    let signer = Signer::new(7, "k1");
    let issuer = Issuer::start(&[&signer]).await;
    let verifier = issuer.verifier(&[]);

    let bearer = verifier.verify(&signer.sign(&issuer.claims())).await.unwrap();
    assert_eq!(bearer, Bearer { subject: "alice".into(), scopes: vec!["tools:weather".into(), "openid".into()] });
    let mut claims = issuer.claims();
    claims["scope"] = Value::Null;
    claims["scp"] = json!(["a", "b"]);
    claims["aud"] = json!(["https://other.example", RESOURCE]);
    assert_eq!(verifier.verify(&signer.sign(&claims)).await.unwrap().scopes, ["a", "b"], "scp, and aud as a list");

    let with = |key: &str, value: Value| {
        let mut claims = issuer.claims();
        claims[key] = value;
        signer.sign(&claims)
    };
    invalid(verifier.verify(&with("exp", json!(now() - 120))).await, "expired");
    assert!(verifier.verify(&with("exp", json!(now() - 20))).await.is_ok(), "within the leeway");
    invalid(verifier.verify(&with("nbf", json!(now() + 300))).await, "not valid yet");
    invalid(verifier.verify(&with("nbf", json!("99999999999"))).await, "nbf");
    invalid(verifier.verify(&with("exp", json!("never"))).await, "exp");
    invalid(verifier.verify(&with("aud", json!("https://other.example/mcp"))).await, "another resource");
    let mut named = issuer.verifier(&[]);
    named.config.audience = "api://toolrouter".into();
    assert!(named.verify(&with("aud", json!("api://toolrouter"))).await.is_ok(), "the issuer's name for it");
    invalid(named.verify(&with("aud", json!(RESOURCE))).await, "another resource");
    invalid(verifier.verify(&with("iss", json!("https://evil.example"))).await, "another issuer");
    let mut no_sub = issuer.claims();
    no_sub.as_object_mut().unwrap().remove("sub");
    invalid(verifier.verify(&signer.sign(&no_sub)).await, "sub");
    let mut no_aud = issuer.claims();
    no_aud.as_object_mut().unwrap().remove("aud");
    invalid(verifier.verify(&signer.sign(&no_aud)).await, "aud");

    // A signature of another key under the same key id.
    let forged = Signer::new(8, "k1").sign(&issuer.claims());
    invalid(verifier.verify(&forged).await, "signature");
    // A token cut and mended.
    let token = signer.sign(&issuer.claims());
    let (head, _) = token.rsplit_once('.').unwrap();
    invalid(verifier.verify(&format!("{head}.AAAA")).await, "");
}

#[tokio::test]
async fn malformed_huge_and_symmetric_tokens_are_refused_before_any_key_is_fetched() {
    let signer = Signer::new(7, "k1");
    let issuer = Issuer::start(&[&signer]).await;
    let verifier = issuer.verifier(&[]);
    for token in ["", "a.b.c", "not a token", "....", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."] {
        invalid(verifier.verify(token).await, "");
    }
    invalid(verifier.verify(&"a".repeat(MAX_TOKEN_BYTES + 1)).await, "over");
    let secret = EncodingKey::from_secret(b"the public key, say").unwrap();
    let hmac = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &issuer.claims(), &secret).unwrap();
    invalid(verifier.verify(&hmac).await, "HS256");
    assert_eq!(issuer.hits(), 0, "nothing worth fetching keys for");
    assert!(Verifier::looks_like_jwt(&signer.sign(&issuer.claims())));
    assert!(!Verifier::looks_like_jwt("sk-0123456789") && !Verifier::looks_like_jwt("a b.c.d"));
}

#[tokio::test]
async fn an_unknown_key_fetches_the_jwks_again_at_most_once_a_while() {
    let (old, new) = (Signer::new(1, "old"), Signer::new(2, "new"));
    let issuer = Issuer::start(&[&old]).await;
    let verifier = issuer.verifier(&[]);
    assert!(verifier.verify(&old.sign(&issuer.claims())).await.is_ok());
    assert_eq!(issuer.hits(), 1);
    invalid(verifier.verify(&new.sign(&issuer.claims())).await, "does not publish");
    invalid(verifier.verify(&Signer::new(3, "made-up").sign(&issuer.claims())).await, "does not publish");
    assert_eq!(issuer.hits(), 1, "fetched just now: unknown keys do not fetch again");

    // The issuer rotates its keys: once the pause is over, the new key is fetched.
    issuer.served.lock().unwrap().jwks = jwks(&[&old, &new]);
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(verifier.verify(&new.sign(&issuer.claims())).await.is_ok());
    assert_eq!(issuer.hits(), 2);
}

#[tokio::test]
async fn an_issuer_down_or_slow_is_waited_for_a_bounded_time_and_held_keys_stay_in_use() {
    let signer = Signer::new(7, "k1");
    let issuer = Issuer::start(&[&signer]).await;
    let token = signer.sign(&issuer.claims());

    for mode in [Mode::Down, Mode::Slow] {
        issuer.set(mode);
        let verifier = issuer.verifier(&[]);
        // Bounded: `jwks_timeout_ms` is 300 ms, the slow issuer takes 30 s.
        let refused = tokio::time::timeout(Duration::from_secs(10), verifier.verify(&token)).await.expect("bounded");
        assert_eq!(refused, Err(Refusal::Unavailable));
    }

    issuer.set(Mode::Up);
    let verifier = issuer.verifier(&[]);
    assert!(verifier.verify(&token).await.is_ok());
    let fetched = issuer.hits();
    for mode in [Mode::Down, Mode::Slow] {
        issuer.set(mode);
        // An unknown key makes it fetch (and fail); the key held still checks tokens.
        tokio::time::sleep(Duration::from_millis(250)).await;
        let unknown = Signer::new(9, "k9").sign(&issuer.claims());
        let refused = tokio::time::timeout(Duration::from_secs(10), verifier.verify(&unknown)).await.expect("bounded");
        invalid(refused, "does not publish");
        assert!(verifier.verify(&token).await.is_ok(), "held keys stay in use ({})", mode == Mode::Down);
    }
    assert!(issuer.hits() > fetched, "it did try again");
}

#[tokio::test]
async fn a_token_without_an_accepted_scope_is_short_of_scope() {
    let signer = Signer::new(7, "k1");
    let issuer = Issuer::start(&[&signer]).await;
    let verifier = issuer.verifier(&["tools:weather", "tools:git"]);
    assert!(verifier.verify(&signer.sign(&issuer.claims())).await.is_ok());
    let mut claims = issuer.claims();
    claims["scope"] = json!("openid profile");
    assert_eq!(verifier.verify(&signer.sign(&claims)).await, Err(Refusal::Scope));
    let challenge = verifier.challenge(Some(&Refusal::Scope));
    assert_eq!(
        challenge.to_str().unwrap(),
        "Bearer resource_metadata=\"http://toolrouter.test/.well-known/oauth-protected-resource/mcp\", \
         scope=\"tools:weather tools:git\", error=\"insufficient_scope\""
    );
}

#[test]
fn the_metadata_is_where_rfc_9728_puts_it_and_challenges_quote_safely() {
    assert_eq!(metadata_url("https://h.example/mcp"), "https://h.example/.well-known/oauth-protected-resource/mcp");
    assert_eq!(metadata_url("https://h.example:8443/"), "https://h.example:8443/.well-known/oauth-protected-resource");
    let verifier = Verifier::new(&OAuthConfig {
        issuer: "https://as.example".into(),
        resource: RESOURCE.into(),
        ..OAuthConfig::default()
    });
    let metadata: Value = serde_json::from_str(verifier.metadata()).unwrap();
    assert_eq!(metadata["resource"], RESOURCE);
    assert_eq!(metadata["authorization_servers"], json!(["https://as.example"]));
    let challenge = verifier.challenge(Some(&Refusal::Invalid("a \"quoted\" \\ é\nreason".into())));
    assert_eq!(
        challenge.to_str().unwrap(),
        "Bearer resource_metadata=\"http://toolrouter.test/.well-known/oauth-protected-resource/mcp\", \
         error=\"invalid_token\", error_description=\"a quoted  reason\""
    );
}

#[tokio::test]
async fn a_remembered_token_is_forgotten_when_it_expires() {
    let signer = Signer::new(7, "k1");
    let issuer = Issuer::start(&[&signer]).await;
    let mut verifier = issuer.verifier(&[]);
    verifier.config.leeway_s = 0;
    let mut claims = issuer.claims();
    claims["exp"] = json!(now() + 1);
    let token = signer.sign(&claims);
    assert!(verifier.verify(&token).await.is_ok());
    assert!(verifier.remembered(&token).is_some(), "checked once, then remembered");
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    assert!(verifier.remembered(&token).is_none());
    invalid(verifier.verify(&token).await, "expired");
}

#[tokio::test]
async fn keys_the_jwks_should_not_be_trusted_with_are_skipped() {
    let (enc, wrong_alg, good) = (Signer::new(5, "enc"), Signer::new(6, "wrong-alg"), Signer::new(7, "k1"));
    let mut enc_jwk = enc.jwk();
    enc_jwk["use"] = json!("enc");
    let mut wrong_alg_jwk = wrong_alg.jwk();
    wrong_alg_jwk["alg"] = json!("ES256");
    let hmac = json!({"kty": "oct", "kid": "hmac", "k": "c2VjcmV0", "alg": "HS256"});
    let issuer = Issuer::start(&[&good]).await;
    issuer.served.lock().unwrap().jwks = json!({"keys": [enc_jwk, wrong_alg_jwk, hmac, good.jwk()]});
    let verifier = issuer.verifier(&[]);
    assert!(verifier.verify(&good.sign(&issuer.claims())).await.is_ok());
    invalid(verifier.verify(&enc.sign(&issuer.claims())).await, "does not publish");
    let refused = verifier.verify(&wrong_alg.sign(&issuer.claims())).await;
    assert!(matches!(refused, Err(Refusal::Invalid(_))), "a key named for another algorithm: {refused:?}");
    let secret = EncodingKey::from_secret(b"secret").unwrap();
    let header = Header { kid: Some("hmac".into()), ..Header::new(Algorithm::HS256) };
    invalid(verifier.verify(&jsonwebtoken::encode(&header, &issuer.claims(), &secret).unwrap()).await, "HS256");
}

#[tokio::test]
async fn a_token_without_a_kid_is_checked_by_the_only_key() {
    let (one, two) = (Signer::new(1, "unused"), Signer::new(2, "unused"));
    let without_kid = |s: &Signer| {
        let mut jwk = s.jwk();
        jwk.as_object_mut().unwrap().remove("kid");
        jwk
    };
    let sign =
        |s: &Signer, claims: &Value| jsonwebtoken::encode(&Header::new(Algorithm::EdDSA), claims, &s.key).unwrap();
    let issuer = Issuer::start(&[]).await;
    issuer.served.lock().unwrap().jwks = json!({"keys": [without_kid(&one)]});
    let verifier = issuer.verifier(&[]);
    assert!(verifier.verify(&sign(&one, &issuer.claims())).await.is_ok());
    invalid(verifier.verify(&sign(&two, &issuer.claims())).await, "signature");

    issuer.served.lock().unwrap().jwks = json!({"keys": [without_kid(&one), without_kid(&two)]});
    let verifier = issuer.verifier(&[]);
    invalid(verifier.verify(&sign(&two, &issuer.claims())).await, "names no key");
}

#[tokio::test]
async fn a_key_gone_from_the_jwks_makes_remembered_tokens_checked_again() {
    let (old, new) = (Signer::new(1, "old"), Signer::new(2, "new"));
    let issuer = Issuer::start(&[&old, &new]).await;
    let verifier = issuer.verifier(&[]);
    let token = old.sign(&issuer.claims());
    assert!(verifier.verify(&token).await.is_ok());
    assert!(verifier.remembered(&token).is_some());

    // The issuer drops the old key; a token naming a key not held makes it fetch.
    issuer.served.lock().unwrap().jwks = jwks(&[&new]);
    tokio::time::sleep(Duration::from_millis(250)).await;
    invalid(verifier.verify(&Signer::new(3, "other").sign(&issuer.claims())).await, "does not publish");
    assert!(verifier.remembered(&token).is_none(), "checked under a key since gone");
    invalid(verifier.verify(&token).await, "does not publish");
    assert!(verifier.verify(&new.sign(&issuer.claims())).await.is_ok());
}
