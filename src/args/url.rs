//! The host/URL check of a call that carries a URL (docs/architecture.md §6): the URL must
//! be the API's own — same scheme, host and port as its catalog template,
//! a path the template matches — or point at an explicitly allowed host
//! (`upstream.allowed_hosts`, e.g. a replay server on loopback).

use url::Url;

use super::{Problem, ProblemKind};
use crate::catalog::Api;

/// Checks `url` against `api`'s URL template and the allowlist. Allowlist
/// entries are `host`, `host:port` or `*.domain`.
pub(crate) fn check_url(api: &Api, url: &str, allowed_hosts: &[String]) -> Result<(), Problem> {
    let refuse = |message: String| Problem { pointer: String::new(), kind: ProblemKind::Url, message };
    let Some(template) = api.url_template.as_deref() else {
        return Err(refuse(format!("`{}` has no known URL in the catalog, so it cannot be called", api.function_name)));
    };
    let given = Url::parse(url).map_err(|e| refuse(format!("{url:?} is not an absolute URL: {e}")))?;
    if !matches!(given.scheme(), "http" | "https") {
        return Err(refuse(format!("scheme `{}` is not allowed (http or https only)", given.scheme())));
    }
    if !given.username().is_empty() || given.password().is_some() {
        return Err(refuse("URLs carrying credentials are refused".to_string()));
    }
    // Placeholders may sit in the host (`{region}.api.example`); any label does for parsing.
    let expected = Url::parse(&template.replace(['{', '}'], ""))
        .map_err(|e| refuse(format!("the catalog URL of this API is invalid: {e}")))?;
    let host = normalize_host(given.host_str().unwrap_or(""));
    let port = given.port_or_known_default();
    if !allowed(allowed_hosts, &host, port) {
        if host != normalize_host(expected.host_str().unwrap_or("")) {
            return Err(refuse(format!(
                "host `{host}` is not this API's host `{}`",
                expected.host_str().unwrap_or("")
            )));
        }
        if given.scheme() != expected.scheme() || port != expected.port_or_known_default() {
            return Err(refuse(format!("`{url}` does not use the scheme and port of `{template}`")));
        }
    }
    if !path_matches(template, given.path()) {
        return Err(refuse(format!(
            "path `{}` does not match this API's path template `{}`",
            given.path(),
            template_path(template)
        )));
    }
    Ok(())
}

fn normalize_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

fn allowed(allowlist: &[String], host: &str, port: Option<u16>) -> bool {
    allowlist.iter().any(|entry| {
        let entry = entry.trim().to_ascii_lowercase();
        if let Some(domain) = entry.strip_prefix("*.") {
            return host.ends_with(&format!(".{domain}"));
        }
        match entry.rsplit_once(':') {
            Some((h, p)) if p.parse::<u16>().is_ok() => h == host && p.parse::<u16>().ok() == port,
            _ => entry == host,
        }
    })
}

/// The path part of a URL template (everything after the authority, before `?`).
fn template_path(template: &str) -> &str {
    let after_scheme = template.split_once("://").map_or(template, |(_, rest)| rest);
    let path = after_scheme.find('/').map_or("/", |i| &after_scheme[i..]);
    path.split('?').next().unwrap_or(path)
}

/// Whether a URL path fits the template path: literal parts equal,
/// `{placeholders}` one or more characters other than `/`, a trailing `/`
/// optional. Literal parts are compared percent-encoded, as `url` gives paths.
fn path_matches(template: &str, path: &str) -> bool {
    let mut pattern = String::from("^");
    let mut rest = template_path(template);
    while let Some(open) = rest.find('{') {
        pattern.push_str(&regex::escape(&encode_path(&rest[..open])));
        match rest[open..].find('}') {
            Some(len) => {
                pattern.push_str("[^/]+");
                rest = &rest[open + len + 1..];
            }
            None => break,
        }
    }
    pattern.push_str(&regex::escape(&encode_path(rest.trim_end_matches('/'))));
    pattern.push_str("/?$");
    let trimmed = if path.len() > 1 { path.trim_end_matches('/') } else { path };
    regex::Regex::new(&pattern).is_ok_and(|re| re.is_match(trimmed) || re.is_match(path))
}

/// Percent-encodes a literal path piece the way `url` normalizes paths.
fn encode_path(piece: &str) -> String {
    Url::parse(&format!("http://h{}", if piece.starts_with('/') { piece.to_string() } else { format!("/{piece}") }))
        .map(|u| {
            let p = u.path().to_string();
            if piece.starts_with('/') { p } else { p[1..].to_string() }
        })
        .unwrap_or_else(|_| piece.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{ApiId, Method, ToolId};

    fn api(template: Option<&str>) -> Api {
        Api {
            id: ApiId(0),
            tool: ToolId(0),
            name: "t".into(),
            function_name: "t_for_x".into(),
            description: String::new(),
            method: Method::Get,
            url_template: template.map(str::to_string),
            params: Vec::new(),
            declared_schema: None,
            unchecked: None,
            mcp: None,
        }
    }

    #[test]
    fn the_apis_own_url_passes() {
        let a = api(Some("https://api.frankfurter.dev/v1/{start_date}..{end_date}"));
        assert!(check_url(&a, "https://api.frankfurter.dev/v1/2024-01-01..2024-02-01?base=USD", &[]).is_ok());
        assert!(check_url(&a, "https://API.frankfurter.dev./v1/2024-01-01..2024-02-01/", &[]).is_ok());
        let b = api(Some("https://x.p.rapidapi.com/company/{company_id}"));
        assert!(check_url(&b, "https://x.p.rapidapi.com/company/wme", &[]).is_ok());
    }

    #[test]
    fn other_urls_are_refused_with_the_reason() {
        let a = api(Some("https://x.p.rapidapi.com/company/{company_id}"));
        let err = |u: &str| check_url(&a, u, &[]).unwrap_err().message;
        assert!(err("https://evil.example/company/wme").contains("is not this API's host"));
        assert!(err("http://x.p.rapidapi.com/company/wme").contains("scheme and port"));
        assert!(err("https://x.p.rapidapi.com:8443/company/wme").contains("scheme and port"));
        assert!(err("https://x.p.rapidapi.com/admin/wme").contains("does not match"));
        assert!(err("https://x.p.rapidapi.com/company/").contains("does not match"));
        assert!(err("https://x.p.rapidapi.com/company/a/b").contains("does not match"));
        assert!(err("https://user:pw@x.p.rapidapi.com/company/wme").contains("credentials"));
        assert!(err("file:///etc/passwd").contains("scheme"));
        assert!(err("not a url").contains("not an absolute URL"));
        assert!(check_url(&api(None), "https://x/", &[]).unwrap_err().message.contains("no known URL"));
    }

    #[test]
    fn allowlisted_hosts_may_differ_in_host_scheme_and_port() {
        let a = api(Some("https://x.p.rapidapi.com/company/{company_id}"));
        let allow = vec!["127.0.0.1:8089".to_string(), "*.internal.example".to_string()];
        assert!(check_url(&a, "http://127.0.0.1:8089/company/wme", &allow).is_ok());
        assert!(check_url(&a, "http://127.0.0.1:9999/company/wme", &allow).is_err());
        assert!(check_url(&a, "http://replay.internal.example/company/wme", &allow).is_ok());
        assert!(check_url(&a, "http://127.0.0.1:8089/other/wme", &allow).is_err(), "the path still has to match");
    }
}
