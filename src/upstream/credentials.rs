//! The credentials of the user's own HTTP services (`[[upstream.credentials]]`)
//! and the RapidAPI key, read at start and again on each reload
//! ([`Credentials`], swapped whole), put on a request only when it goes to
//! their host.
//!
//! "Their host" is the request's actual host and port (the URL sent, so a
//! call through `upstream.base_url` carries none), and the redirect policy
//! refuses to follow a request that carried one to another host. Header
//! values are marked sensitive and a query secret is added to the URL sent,
//! never to the API URL a trace shows; error messages drop URLs.

use std::collections::HashSet;

use url::Url;

use crate::config::{Config, CredentialConfig, CredentialScheme, Secret};

/// Every secret upstream calls may carry, read together: a reload reads
/// them all before it changes anything, so a secret that cannot be read
/// keeps the old ones in use.
pub struct Credentials {
    /// The user's own services' credentials.
    pub(super) list: Vec<Credential>,
    /// The hosts that have one (for the redirect policy).
    pub(super) hosts: HashSet<String>,
    /// The hosts whose credential allows private addresses (for the guard).
    pub(super) private_hosts: Vec<String>,
    /// The RapidAPI key.
    pub(super) rapidapi_key: Option<Secret>,
}

impl Credentials {
    /// Reads the secrets `config` names (environment variables, files):
    /// the first that cannot be read is an error naming where it was to
    /// come from, never a secret.
    pub(crate) fn read(config: &Config) -> anyhow::Result<Credentials> {
        let list = load(&config.upstream.credentials)?;
        let rapidapi_key = config.rapidapi_key().map_err(anyhow::Error::msg)?;
        Ok(Credentials {
            hosts: hosts(&list),
            private_hosts: crate::config::private_hosts(&config.upstream.credentials),
            list,
            rapidapi_key,
        })
    }

    /// The credential of the host `url` goes to.
    pub(super) fn for_url(&self, url: &Url) -> Option<&Credential> {
        let key = host_key(url);
        self.list.iter().find(|c| c.host == key)
    }
}

/// A credential ready to send.
pub(super) struct Credential {
    /// `host` or `host:port`, lower-case.
    host: String,
    scheme: CredentialScheme,
    name: String,
    username: String,
    secret: Secret,
}

/// Reads every credential's secret; the first unreadable one is an error
/// naming its host and where the secret was to come from (not the secret).
fn load(configs: &[CredentialConfig]) -> anyhow::Result<Vec<Credential>> {
    configs
        .iter()
        .map(|c| {
            let secret = c.secret.read().map_err(|e| anyhow::anyhow!("the credential of {}: {e}", c.host))?;
            Ok(Credential {
                host: c.host.to_ascii_lowercase(),
                scheme: c.scheme,
                name: c.name.clone(),
                username: c.username.clone(),
                secret,
            })
        })
        .collect()
}

/// `host` or `host:port` (the port only when the URL names one other than its scheme's default).
pub(super) fn host_key(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    }
}

/// The hosts that have a credential (for the redirect policy).
fn hosts(credentials: &[Credential]) -> HashSet<String> {
    credentials.iter().map(|c| c.host.clone()).collect()
}

impl Credential {
    /// The URL to send: with the secret as a query parameter for that scheme.
    pub(super) fn url(&self, url: &Url) -> Url {
        let mut url = url.clone();
        if self.scheme == CredentialScheme::Query {
            url.query_pairs_mut().append_pair(&self.name, self.secret.expose());
        }
        url
    }

    /// The request with the credential's header, if its scheme has one.
    pub(super) fn authorize(&self, req: reqwest::RequestBuilder) -> Result<reqwest::RequestBuilder, String> {
        Ok(match self.scheme {
            CredentialScheme::Bearer => req.bearer_auth(self.secret.expose()),
            CredentialScheme::Basic => req.basic_auth(&self.username, Some(self.secret.expose())),
            CredentialScheme::Header => {
                let mut value = reqwest::header::HeaderValue::from_str(self.secret.expose())
                    .map_err(|_| format!("the credential of {} is not a valid header value", self.host))?;
                value.set_sensitive(true);
                req.header(self.name.as_str(), value)
            }
            CredentialScheme::Query => req,
        })
    }
}
