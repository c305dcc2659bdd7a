//! An API call as an HTTP request, in RapidAPI's conventions, and back.
//!
//! [`build`]: path parameters substituted into the URL template's
//! `{placeholder}`s (percent-encoded), query parameters in the query string
//! (arrays repeated or comma-joined as the parameter says), header
//! parameters as headers, body parameters as a JSON object;
//! `X-RapidAPI-Host` names the API's host. Arguments are keyed by the
//! schema's keys and sent under their wire names ([`crate::catalog::Param`]
//! holds the one mapping between the two).
//!
//! [`arguments`] is the inverse, for the replay server: the arguments a
//! request for an API carries, keyed by the schema's keys again, with the
//! path parameters read through a [`UrlTemplate`].

use regex::Regex;
use serde_json::{Map, Value};
use url::Url;

use crate::catalog::{Api, Method, ParamLocation};

/// A request ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpCall {
    pub method: reqwest::Method,
    /// Where the request goes (through `upstream.base_url` when set).
    pub url: Url,
    /// The API's own URL, as a client may see it (never the base URL).
    pub api_url: Url,
    /// The API's own host (the `X-RapidAPI-Host` header).
    pub api_host: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Value>,
}

/// A value as it goes into a URL or header.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A value percent-encoded for one path segment (`/` included).
fn path_segment(v: &Value) -> String {
    let encoded: String = url::form_urlencoded::byte_serialize(text(v).as_bytes()).collect();
    encoded.replace('+', "%20")
}

/// Builds the request for `api` with validated `arguments` (keyed by the
/// schema's parameter keys). A path parameter left out takes its default.
/// Arguments the API does not declare (passed by non-strict validation)
/// go in the query string, or the JSON body of a method that has one.
/// `base_url` replaces the scheme, host and port (and prefixes the path)
/// when calls go through a proxy or replay server. Long: it walks the
/// parameters once, each location (path, query, header, body, form) a
/// few lines, and keeps the URL template's fixed pairs in order.
pub fn build(api: &Api, arguments: &Map<String, Value>, base_url: Option<&Url>) -> Result<HttpCall, String> {
    let template = api
        .url_template
        .as_deref()
        .ok_or_else(|| format!("`{}` has no URL in the catalog, so it cannot be called", api.function_name))?;
    if template.contains(char::is_whitespace) {
        return Err(format!(
            "the catalog's URL for `{}` is malformed ({template}); it cannot be called",
            api.function_name
        ));
    }
    let authority = template.split_once("://").map_or("", |(_, rest)| rest.split(['/', '?']).next().unwrap_or(""));
    if authority.contains('{') {
        return Err(format!(
            "the catalog's URL for `{}` has a parameter in its host ({template}); it is not called, so that no argument can choose the host",
            api.function_name
        ));
    }
    let mut path_filled = template.to_string();
    let mut query: Vec<(String, String)> = Vec::new();
    let mut headers = Vec::new();
    let mut body = Map::new();
    for p in &api.params {
        let given = arguments.get(&p.key).filter(|v| !v.is_null());
        let value = match (given, p.location) {
            (Some(v), _) => v,
            (None, ParamLocation::Path) => match p.default_value() {
                Some(default) => default,
                None => continue,
            },
            (None, _) => continue,
        };
        match p.location {
            ParamLocation::Path if matches!(text(value).as_str(), "." | "..") => {
                return Err(format!("path parameter `{}` cannot be `{}`", p.key, text(value)));
            }
            ParamLocation::Path => path_filled = path_filled.replace(&p.placeholder(), &path_segment(value)),
            ParamLocation::Query => match value {
                Value::Array(items) if p.explode => query.extend(items.iter().map(|i| (p.name.clone(), text(i)))),
                Value::Array(items) => {
                    query.push((p.name.clone(), items.iter().map(text).collect::<Vec<_>>().join(",")))
                }
                v => query.push((p.name.clone(), text(v))),
            },
            ParamLocation::Header => headers.push((p.name.clone(), text(value))),
            ParamLocation::Body => {
                body.insert(p.name.clone(), value.clone());
            }
        }
    }
    let has_body = matches!(api.method, Method::Post | Method::Put | Method::Patch);
    // Undeclared arguments (non-strict mode) pass through, but never over
    // the template's own pairs (`api.php?function=findBroker` stays that).
    let undeclared: Vec<_> = arguments.iter().filter(|(k, v)| api.param(k).is_none() && !v.is_null()).collect();
    let fixed_keys = if undeclared.is_empty() { Vec::new() } else { fixed_query_keys(api) };
    for (key, value) in undeclared.into_iter().filter(|(k, _)| !fixed_keys.contains(k)) {
        if has_body {
            body.insert(key.clone(), value.clone());
        } else {
            query.push((key.clone(), text(value)));
        }
    }
    if let Some(p) =
        api.params.iter().find(|p| p.location == ParamLocation::Path && path_filled.contains(&p.placeholder()))
    {
        return Err(format!("path parameter `{}` has no value", p.key));
    }
    let mut api_url = Url::parse(&path_filled).map_err(|e| format!("the URL {path_filled:?} is invalid: {e}"))?;
    let api_host = api_url.host_str().unwrap_or_default().to_string();
    // The template's own pairs (fixed values, filled placeholders), but for
    // those a parameter sends: its value replaces the sample.
    let template_pairs: Vec<(String, String)> = api_url
        .query_pairs()
        .filter(|(k, _)| !query.iter().any(|(name, _)| name == k))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    api_url.query_pairs_mut().clear().extend_pairs(template_pairs.iter().chain(&query));
    if api_url.query() == Some("") {
        api_url.set_query(None);
    }
    let url = match base_url {
        Some(base) => {
            let mut u = base.clone();
            let prefix = base.path().trim_end_matches('/');
            u.set_path(&format!("{prefix}{}", api_url.path()));
            u.set_query(api_url.query());
            u
        }
        None => api_url.clone(),
    };
    let method = match api.method {
        Method::Get => reqwest::Method::GET,
        Method::Post => reqwest::Method::POST,
        Method::Put => reqwest::Method::PUT,
        Method::Patch => reqwest::Method::PATCH,
        Method::Delete => reqwest::Method::DELETE,
        Method::Head => reqwest::Method::HEAD,
        Method::Options => reqwest::Method::OPTIONS,
    };
    let body = (!body.is_empty()).then_some(Value::Object(body));
    Ok(HttpCall { method, url, api_url, api_host, headers, body })
}

/// A piece of a template: literal text, or text with placeholders.
#[derive(Debug)]
enum Piece {
    Literal(String),
    /// Placeholders (wire names), the pattern that captures their values,
    /// and the number of literal characters around them.
    Params(Vec<String>, Regex, usize),
}

/// An API's URL template, matched against requests to read the path
/// parameters back: path segments (`/v1/{start}..{end}` captures both),
/// and query pairs, whose placeholders capture (`?id={user}`) and whose
/// fixed values tell endpoints apart (`api.php?function=findBroker`).
#[derive(Debug)]
pub struct UrlTemplate {
    host: String,
    segments: Vec<Piece>,
    query: Vec<(String, Piece)>,
}

/// What a request matched: the path parameters (wire name, decoded value)
/// and how specific the match was.
#[derive(Debug, PartialEq)]
pub(crate) struct Captured {
    pub(crate) params: Vec<(String, String)>,
    /// The template's query pairs the request carried (fixed ones with their value).
    pub(crate) query_pairs: usize,
}

impl UrlTemplate {
    /// The template of `api`; `None` without one, or for one no request
    /// can be read back from (catalog data defects: a placeholder in the
    /// host or in a query key, two placeholders with nothing between,
    /// spaces, a host that is not one).
    pub fn of(api: &Api) -> Option<UrlTemplate> {
        let template = api.url_template.as_deref()?;
        if template.contains("}{") || template.contains(char::is_whitespace) {
            return None;
        }
        let rest = template.split_once("://")?.1;
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, rest) = rest.split_at(authority_end);
        if authority.contains(['{', '}']) {
            return None;
        }
        let host = Url::parse(&format!("http://{authority}")).ok()?.host_str()?.to_ascii_lowercase();
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let segments = split_outside_braces(trim_slashes(path), '/').into_iter().map(Piece::parse);
        let segments = segments.collect::<Option<Vec<_>>>()?;
        let mut pairs = Vec::new();
        for pair in split_outside_braces(query.split('#').next().unwrap_or(""), '&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if key.contains('{') {
                return None;
            }
            let key = percent_decode(key);
            let value = Piece::parse(value)?;
            // A fixed value under a declared parameter is a sample the
            // call replaces, not part of the endpoint.
            let declared = api.param_on_wire(ParamLocation::Query, &key).is_some();
            if key.is_empty() || (declared && matches!(value, Piece::Literal(_))) {
                continue;
            }
            pairs.push((key, value));
        }
        Some(UrlTemplate { host, segments, query: pairs })
    }

    /// The host (lower case).
    pub(crate) fn host(&self) -> &str {
        &self.host
    }

    /// Literal characters of the path: the more, the more specific a match
    /// (`/users/me` over `/users/{id}`, `/{lat},{lon},{time}` over `/{lat},{lon}`).
    pub(crate) fn literal_chars(&self) -> usize {
        let chars = |p: &Piece| match p {
            Piece::Literal(text) => text.chars().count(),
            Piece::Params(_, _, literal) => *literal,
        };
        self.segments.iter().map(chars).sum()
    }

    /// The path parameters of a request (its path percent-encoded, as it
    /// arrives; its query pairs decoded), if the request matches.
    pub(crate) fn capture(&self, path: &str, query: &[(String, String)]) -> Option<Captured> {
        // A trailing `/` is the template's, or ends a last parameter sent empty.
        let path = path.strip_prefix('/').unwrap_or(path);
        let given: Vec<String> = path.split('/').map(percent_decode).collect();
        let given = match path.strip_suffix('/') {
            Some(trimmed) if given.len() != self.segments.len() => trimmed.split('/').map(percent_decode).collect(),
            _ => given,
        };
        if given.len() != self.segments.len() {
            return None;
        }
        let mut out = Captured { params: Vec::new(), query_pairs: 0 };
        for (piece, given) in self.segments.iter().zip(&given) {
            piece.capture(given, &mut out.params)?;
        }
        for (key, piece) in &self.query {
            let given = query.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())?;
            piece.capture(given, &mut out.params)?;
            out.query_pairs += 1;
        }
        Some(out)
    }
}

impl Piece {
    fn parse(text: &str) -> Option<Piece> {
        if !text.contains('{') {
            return Some(Piece::Literal(percent_decode(text)));
        }
        let (mut names, mut pattern, mut rest, mut literal) = (Vec::new(), String::from("^"), text, 0);
        let mut push_literal = |pattern: &mut String, text: &str| {
            let text = percent_decode(text);
            literal += text.chars().count();
            pattern.push_str(&regex::escape(&text));
        };
        while let Some(open) = rest.find('{') {
            let close = open + rest[open..].find('}')?;
            push_literal(&mut pattern, &rest[..open]);
            pattern.push_str("(.*?)");
            names.push(rest[open + 1..close].to_string());
            rest = &rest[close + 1..];
        }
        push_literal(&mut pattern, rest);
        pattern.push('$');
        Some(Piece::Params(names, Regex::new(&pattern).ok()?, literal))
    }

    /// Matches `given` (decoded), adding the captured values to `out`.
    fn capture(&self, given: &str, out: &mut Vec<(String, String)>) -> Option<()> {
        match self {
            Piece::Literal(text) => (text == given).then_some(()),
            Piece::Params(names, pattern, _) => {
                let found = pattern.captures(given)?;
                for (i, name) in names.iter().enumerate() {
                    out.push((name.clone(), found.get(i + 1)?.as_str().to_string()));
                }
                Some(())
            }
        }
    }
}

/// A template's path without its leading and trailing `/` (`/a//b/` →
/// `a//b`: empty segments inside stay, for parameters sent empty).
fn trim_slashes(path: &str) -> &str {
    let path = path.strip_prefix('/').unwrap_or(path);
    path.strip_suffix('/').unwrap_or(path)
}

/// `text` split at `separator`, except inside `{…}` (placeholder names
/// such as `{tileSize/}` occur).
fn split_outside_braces(text: &str, separator: char) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            c if c == separator && depth == 0 => {
                out.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

/// Percent-decodes a path segment (`+` stays a plus).
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// The keys of the fixed pairs in `api`'s URL template (`function` of
/// `api.php?function=findBroker`): part of the endpoint, not arguments.
fn fixed_query_keys(api: &Api) -> Vec<String> {
    let query = api.url_template.as_deref().and_then(|t| t.split_once('?')).map_or("", |(_, q)| q);
    split_outside_braces(query, '&')
        .into_iter()
        .filter(|pair| !pair.contains('{'))
        .map(|pair| percent_decode(pair.split_once('=').map_or(pair, |(k, _)| k)))
        .filter(|key| !key.is_empty() && api.param_on_wire(ParamLocation::Query, key).is_none())
        .collect()
}

/// The arguments a request for `api` carries, keyed by schema keys:
/// `path` parameters (wire names, as [`UrlTemplate::capture`] reads them),
/// the query pairs (a repeated key becomes an array) but for the
/// template's fixed ones, and a JSON body's fields. Names the API does not
/// declare keep their own name. Values are text except a body's, which
/// keep their JSON type.
pub fn arguments(
    api: &Api,
    path: &[(String, String)],
    query: &[(String, String)],
    body: Option<&Map<String, Value>>,
) -> Map<String, Value> {
    let key = |location, name: &str| api.param_on_wire(location, name).map_or(name.to_string(), |p| p.key.clone());
    let fixed = fixed_query_keys(api);
    let mut out = Map::new();
    for (name, value) in query.iter().filter(|(name, _)| !fixed.contains(name)) {
        let key = key(ParamLocation::Query, name);
        let value = Value::String(value.clone());
        match out.get_mut(&key) {
            Some(Value::Array(items)) => items.push(value),
            Some(first) => *first = Value::Array(vec![first.take(), value]),
            None => {
                out.insert(key, value);
            }
        }
    }
    for (name, value) in path {
        out.insert(key(ParamLocation::Path, name), Value::String(value.clone()));
    }
    for (name, value) in body.into_iter().flatten() {
        out.insert(key(ParamLocation::Body, name), value.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{ApiId, Param, ToolId};
    use serde_json::json;

    fn api(url: &str, params: Vec<Param>) -> Api {
        Api {
            id: ApiId(0),
            tool: ToolId(0),
            name: "x".into(),
            function_name: "x_for_y".into(),
            description: String::new(),
            method: Method::Get,
            url_template: Some(url.into()),
            params,
            declared_schema: None,
            unchecked: None,
            mcp: None,
        }
    }

    fn param(name: &str, location: ParamLocation, explode: bool) -> Param {
        Param {
            name: name.into(),
            key: name.into(),
            location,
            required: false,
            description: String::new(),
            schema: json!({}),
            explode,
        }
    }

    #[test]
    fn path_query_and_base_url() {
        let a = api(
            "https://edrv.p.rapidapi.com/v1/stations/{id}",
            vec![param("id", ParamLocation::Path, false), param("tags", ParamLocation::Query, false)],
        );
        let args = json!({"id": "a b/c", "tags": ["x", "y"]});
        let call = build(&a, args.as_object().unwrap(), None).unwrap();
        assert_eq!(call.url.as_str(), "https://edrv.p.rapidapi.com/v1/stations/a%20b%2Fc?tags=x%2Cy");
        assert_eq!(call.api_host, "edrv.p.rapidapi.com");
        let base = Url::parse("http://127.0.0.1:8765").unwrap();
        let call = build(&a, args.as_object().unwrap(), Some(&base)).unwrap();
        assert_eq!(call.url.as_str(), "http://127.0.0.1:8765/v1/stations/a%20b%2Fc?tags=x%2Cy");
        assert_eq!(call.api_host, "edrv.p.rapidapi.com");
        assert!(build(&a, &Map::new(), None).unwrap_err().contains("`id` has no value"));
    }

    #[test]
    fn renamed_path_parameters_fill_their_placeholder_and_read_back() {
        // ToolBench standardizes `orderId` to the key `orderid`; the wire name stays.
        let mut order = param("orderId", ParamLocation::Path, false);
        order.key = "orderid".into();
        let mut id = param("id", ParamLocation::Query, false);
        id.key = "is_id".into();
        let a = api("https://p.example/store/order/{orderId}", vec![order, id]);
        let args = json!({"orderid": 3, "is_id": "7"});
        let call = build(&a, args.as_object().unwrap(), None).unwrap();
        assert_eq!(call.url.as_str(), "https://p.example/store/order/3?id=7");
        let query: Vec<(String, String)> = call.url.query_pairs().map(|(k, v)| (k.into(), v.into())).collect();
        let path = UrlTemplate::of(&a).unwrap().capture(call.url.path(), &query).unwrap().params;
        assert_eq!(path, [("orderId".to_string(), "3".to_string())]);
        assert_eq!(Value::Object(arguments(&a, &path, &query, None)), json!({"orderid": "3", "is_id": "7"}));
    }

    fn template(url: &str, params: Vec<Param>) -> UrlTemplate {
        UrlTemplate::of(&api(url, params)).unwrap()
    }

    #[test]
    fn templates_capture_several_placeholders_in_one_segment() {
        let t = template("https://api.frankfurter.dev/v1/{start_date}..{end_date}", vec![]);
        assert_eq!(t.host(), "api.frankfurter.dev");
        assert_eq!(t.literal_chars(), "v1..".len());
        let got = t.capture("/v1/2024-01-01..2024-02-01", &[]).unwrap().params;
        assert_eq!(got[0], ("start_date".to_string(), "2024-01-01".to_string()));
        assert_eq!(got[1], ("end_date".to_string(), "2024-02-01".to_string()));
        assert!(t.capture("/v2/2024-01-01..2024-02-01", &[]).is_none());
        assert!(t.capture("/v1/2024-01-01", &[]).is_none());
        // An encoded slash stays inside its parameter; so does a slash in a placeholder's name.
        let t = template("https://h.example/a/{x}/b", vec![]);
        assert_eq!(t.capture("/a/c%2Fd%20e/b", &[]).unwrap().params[0].1, "c/d e");
        let t = template("https://h.example/maps/{tileSize/}/tiles.json", vec![]);
        assert_eq!(t.capture("/maps/512/tiles.json", &[]).unwrap().params[0], ("tileSize/".into(), "512".into()));
    }

    #[test]
    fn query_pairs_capture_placeholders_and_tell_endpoints_apart() {
        let q = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
        let t = template("https://h.example/api.php?function=findBroker&name={name}", vec![]);
        let got = t.capture("/api.php", &q(&[("function", "findBroker"), ("name", "Acme")])).unwrap();
        assert_eq!(got, Captured { params: vec![("name".into(), "Acme".into())], query_pairs: 2 });
        assert!(t.capture("/api.php", &q(&[("function", "getFunds"), ("name", "Acme")])).is_none());
        // A sample value under a declared query parameter is not part of the endpoint.
        let t = template("https://h.example/q?index=&limit=5", vec![param("index", ParamLocation::Query, false)]);
        assert_eq!(t.capture("/q", &q(&[("index", "1"), ("limit", "5")])).unwrap().query_pairs, 1);
        // Placeholders in the host or a query key cannot be read back.
        assert!(UrlTemplate::of(&api("https://demo.example{api}", vec![])).is_none());
        assert!(UrlTemplate::of(&api("https://h.example/c.php?{ctype}=$ctype", vec![])).is_none());
        assert!(UrlTemplate::of(&api("https://h.example/c/{type}{id}/links", vec![])).is_none());
    }

    #[test]
    fn a_parameter_replaces_the_templates_sample_value_but_not_its_fixed_pairs() {
        let a = api("https://h.example/q?index=&fixed=1", vec![param("index", ParamLocation::Query, false)]);
        let call = build(&a, json!({"index": 7}).as_object().unwrap(), None).unwrap();
        assert_eq!(call.url.query(), Some("fixed=1&index=7"));
        // An undeclared argument (non-strict mode) cannot change the endpoint.
        let call = build(&a, json!({"index": 7, "fixed": 2}).as_object().unwrap(), None).unwrap();
        assert_eq!(call.url.query(), Some("fixed=1&index=7"));
        // Reading back, the fixed pair is the endpoint's, not an argument.
        let query = [("fixed".to_string(), "1".to_string()), ("index".to_string(), "7".to_string())];
        assert_eq!(Value::Object(arguments(&a, &[], &query, None)), json!({"index": "7"}));
        // `..` cannot climb the path.
        let a = api("https://h.example/files/{name}", vec![param("name", ParamLocation::Path, false)]);
        assert!(build(&a, json!({"name": ".."}).as_object().unwrap(), None).unwrap_err().contains("cannot be `..`"));
    }

    #[test]
    fn a_missing_path_parameter_takes_its_default_or_is_named() {
        let mut p = param("slug", ParamLocation::Path, false);
        p.key = "the_slug".into();
        let a = api("https://h.example/x/{slug}", vec![p.clone()]);
        assert!(build(&a, &Map::new(), None).unwrap_err().contains("`the_slug` has no value"));
        p.schema = json!({"type": "string", "default": "wme"});
        let a = api("https://h.example/x/{slug}", vec![p]);
        assert_eq!(build(&a, &Map::new(), None).unwrap().url.path(), "/x/wme");
    }

    #[test]
    fn undeclared_arguments_pass_through_in_the_query() {
        let a = api("https://h.example/q", vec![]);
        let call = build(&a, json!({"extra": 1}).as_object().unwrap(), None).unwrap();
        assert_eq!(call.url.query(), Some("extra=1"));
    }

    #[test]
    fn exploded_arrays_repeat_the_key() {
        let a = api("https://h.example/q", vec![param("v", ParamLocation::Query, true)]);
        let call = build(&a, json!({"v": [1, 2]}).as_object().unwrap(), None).unwrap();
        assert_eq!(call.url.query(), Some("v=1&v=2"));
    }
}
