//! Where upstream calls may go (SSRF guard).
//!
//! A call's URL must be `http` or `https`, carry no credentials, and name a
//! host the catalog knows (the host of some API's URL) or one on the
//! allowlist (`upstream.allowed_hosts`: `host`, `host:port`, `*.domain`).
//! Its addresses must not be private, loopback, link-local or otherwise
//! internal unless `upstream.allow_private` says so (a replay server on
//! loopback is such a case), or the host's credential does
//! (`allow_private` in `[[upstream.credentials]]`: that host alone). The address check runs in the DNS resolver
//! ([`GuardedResolver`]), so it holds for every connection: redirects and
//! names that resolve to internal addresses included; IP-literal URLs are
//! checked by [`Guard::check_url`]. Redirect targets are checked again.
//! The hosts credentials open are swapped in place on a reload
//! ([`Guard::set_private_hosts`]), for the guard and its resolvers at once.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use arc_swap::ArcSwap;
use url::Url;

use crate::catalog::Catalog;

/// Why a target was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Refused(pub(crate) String);

/// The hosts and addresses calls may reach.
#[derive(Debug, Clone)]
pub struct Guard {
    /// The hosts the catalog's APIs name (replaced when the catalog is
    /// reloaded; shared by the guard's clones).
    catalog_hosts: Arc<ArcSwap<HashSet<String>>>,
    allowlist: Vec<String>,
    pub(crate) allow_private: bool,
    /// Hosts allowed private addresses (their credentials say so),
    /// shared with the resolvers.
    private_hosts: Arc<ArcSwap<HashSet<String>>>,
}

/// The hosts of `catalog`'s APIs' URLs.
fn hosts_of(catalog: &Catalog) -> HashSet<String> {
    catalog
        .apis()
        .iter()
        .filter_map(|a| a.url_template.as_deref())
        .filter_map(|t| Url::parse(&t.replace(['{', '}'], "")).ok())
        .filter_map(|u| u.host_str().map(normalize))
        .collect()
}

impl Guard {
    pub(crate) fn new(catalog: &Catalog, allowlist: &[String], allow_private: bool) -> Guard {
        Guard {
            catalog_hosts: Arc::new(ArcSwap::from_pointee(hosts_of(catalog))),
            allowlist: allowlist.iter().map(|h| h.trim().to_ascii_lowercase()).collect(),
            allow_private,
            private_hosts: Arc::default(),
        }
    }

    /// Allows the hosts `catalog` names instead of those of the catalog so
    /// far (a reload that changed the catalog's sources).
    pub(crate) fn set_catalog(&self, catalog: &Catalog) {
        self.catalog_hosts.store(Arc::new(hosts_of(catalog)));
    }

    /// The guard with `hosts` (names or addresses, no port) allowed
    /// private addresses.
    pub(crate) fn with_private_hosts(self, hosts: &[String]) -> Guard {
        self.set_private_hosts(hosts);
        self
    }

    /// Allows private addresses to `hosts` instead of those allowed so far
    /// (a reload), in this guard and the resolvers it made.
    pub(crate) fn set_private_hosts(&self, hosts: &[String]) {
        self.private_hosts.store(Arc::new(hosts.iter().map(|h| normalize(h)).collect()));
    }

    /// The DNS resolver that holds this guard's address rule.
    pub(crate) fn resolver(&self) -> GuardedResolver {
        GuardedResolver { allow_private: self.allow_private, private_hosts: self.private_hosts.clone() }
    }

    /// Checks a URL before it is requested (and each redirect target).
    pub(crate) fn check_url(&self, url: &Url) -> Result<(), Refused> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refused(format!("scheme `{}` is not allowed (http or https only)", url.scheme())));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refused("URLs carrying credentials are refused".into()));
        }
        let host = url.host_str().map(normalize).unwrap_or_default();
        if host.is_empty() {
            return Err(Refused(format!("`{url}` has no host")));
        }
        let port = url.port_or_known_default();
        if !self.catalog_hosts.load().contains(&host) && !self.allowlisted(&host, port) {
            return Err(Refused(format!(
                "host `{host}` is neither an API host of the catalog nor in upstream.allowed_hosts"
            )));
        }
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = literal.parse::<IpAddr>()
            && !self.private_hosts.load().contains(literal)
        {
            self.check_ip(ip)?;
        }
        Ok(())
    }

    /// Refuses internal addresses unless `allow_private`.
    pub(crate) fn check_ip(&self, ip: IpAddr) -> Result<(), Refused> {
        if !self.allow_private && is_internal(ip) {
            return Err(Refused(format!(
                "address {ip} is private, loopback or link-local (set upstream.allow_private to allow it)"
            )));
        }
        Ok(())
    }

    fn allowlisted(&self, host: &str, port: Option<u16>) -> bool {
        self.allowlist.iter().any(|entry| {
            if let Some(domain) = entry.strip_prefix("*.") {
                return host.ends_with(&format!(".{domain}"));
            }
            match entry.rsplit_once(':') {
                Some((h, p)) if p.parse::<u16>().is_ok() && !h.contains(':') => h == host && port == p.parse().ok(),
                _ => entry == host,
            }
        })
    }
}

fn normalize(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Loopback, private, link-local, unique-local, shared (CGNAT),
/// unspecified, broadcast, multicast and documentation addresses, and
/// IPv4 addresses mapped into IPv6.
pub(crate) fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                || o[0] == 0
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || first == 0x2001 && v6.segments()[1] == 0x0db8
        }
    }
}

/// A DNS resolver that drops internal addresses (unless allowed) and fails
/// when none is left, so no connection can reach them.
#[derive(Debug, Clone)]
pub(crate) struct GuardedResolver {
    pub(crate) allow_private: bool,
    /// Names allowed private addresses all the same.
    pub(crate) private_hosts: Arc<ArcSwap<HashSet<String>>>,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        let allow_private = self.allow_private || self.private_hosts.load().contains(&normalize(&host));
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let kept: Vec<SocketAddr> =
                addrs.iter().copied().filter(|a| allow_private || !is_internal(a.ip())).collect();
            if kept.is_empty() {
                let e: Box<dyn std::error::Error + Send + Sync> = if addrs.is_empty() {
                    format!("`{host}` has no address").into()
                } else {
                    format!("`{host}` resolves only to private, loopback or link-local addresses").into()
                };
                return Err(e);
            }
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Sources;

    fn guard(allow: &[&str], private: bool) -> Guard {
        let catalog = Catalog::load(&Sources::default()).unwrap();
        Guard::new(&catalog, &allow.iter().map(|s| s.to_string()).collect::<Vec<_>>(), private)
    }

    fn check(g: &Guard, url: &str) -> Result<(), Refused> {
        g.check_url(&Url::parse(url).unwrap())
    }

    #[test]
    fn only_catalog_and_allowed_hosts() {
        let g = guard(&["127.0.0.1:8765", "*.example.org"], false);
        assert!(check(&g, "https://api.frankfurter.dev/v1/latest").is_ok());
        assert!(check(&g, "https://evil.test/").unwrap_err().0.contains("neither"));
        assert!(check(&g, "https://a.example.org/x").is_ok());
        assert!(check(&g, "ftp://api.frankfurter.dev/").is_err());
        assert!(check(&g, "https://u:p@api.frankfurter.dev/").is_err());
        // Allowed by name, refused by address until private targets are allowed.
        assert!(check(&g, "http://127.0.0.1:8765/x").unwrap_err().0.contains("loopback"));
        assert!(check(&guard(&["127.0.0.1:8765"], true), "http://127.0.0.1:8765/x").is_ok());
        assert!(check(&guard(&["127.0.0.1:8765"], true), "http://127.0.0.1:9999/x").is_err());
    }

    /// A credential's `allow_private` opens its own host's private
    /// addresses, no other's: by URL literal and through the resolver.
    #[tokio::test]
    async fn a_credential_host_alone_may_be_private() {
        use reqwest::dns::Resolve;
        let credential = |host: &str, allow_private| crate::config::CredentialConfig {
            host: host.into(),
            allow_private,
            ..Default::default()
        };
        let hosts = crate::config::private_hosts(&[
            credential("127.0.0.1:8765", true),
            credential("LocalHost", true),
            credential("10.0.0.9", false),
        ]);
        assert_eq!(hosts, ["127.0.0.1", "localhost"]);
        let g = guard(&["127.0.0.1:8765", "10.0.0.9", "localhost:8765"], false).with_private_hosts(&hosts);
        assert!(check(&g, "http://127.0.0.1:8765/x").is_ok());
        assert!(check(&g, "http://10.0.0.9/x").unwrap_err().0.contains("private"), "its credential does not allow it");
        let resolved = g.resolver().resolve("localhost".parse().unwrap()).await;
        assert!(resolved.is_ok_and(|mut a| a.next().is_some()), "localhost resolves to loopback, allowed");
        let strict = guard(&["localhost:8765"], false).resolver();
        assert!(strict.resolve("localhost".parse().unwrap()).await.is_err(), "without it, refused");
    }

    #[test]
    fn internal_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700::1111"] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
    }
}
