//! An API call as an HTTP request, in RapidAPI's conventions: path
//! parameters substituted into the URL template (percent-encoded), query
//! parameters in the query string (arrays repeated or comma-joined as the
//! parameter says), header parameters as headers, body parameters as a
//! JSON object; `X-RapidAPI-Host` names the API's host.

use serde_json::{Map, Value};
use url::Url;

use crate::catalog::{Api, Method, ParamLocation};

/// A request ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpCall {
    pub method: reqwest::Method,
    pub url: Url,
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

/// Builds the request for `api` with validated `arguments` (keyed by the
/// schema's parameter keys). `base_url` replaces the scheme, host and
/// port (and prefixes the path) when calls go through a proxy or replay
/// server.
pub fn build(api: &Api, arguments: &Map<String, Value>, base_url: Option<&Url>) -> Result<HttpCall, String> {
    let template = api
        .url_template
        .as_deref()
        .ok_or_else(|| format!("`{}` has no URL in the catalog, so it cannot be called", api.function_name))?;
    let mut path_filled = template.to_string();
    let mut query: Vec<(String, String)> = Vec::new();
    let mut headers = Vec::new();
    let mut body = Map::new();
    for p in &api.params {
        let Some(value) = arguments.get(&p.key).filter(|v| !v.is_null()) else { continue };
        match p.location {
            ParamLocation::Path => {
                let encoded: String = url::form_urlencoded::byte_serialize(text(value).as_bytes()).collect();
                let encoded = encoded.replace('+', "%20");
                path_filled = path_filled.replace(&format!("{{{}}}", p.name), &encoded);
            }
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
    if let Some(start) = path_filled.find('{')
        && path_filled[start..].contains('}')
    {
        let end = start + path_filled[start..].find('}').unwrap_or(0);
        return Err(format!("path parameter `{}` has no value", &path_filled[start + 1..end]));
    }
    let own = Url::parse(&path_filled).map_err(|e| format!("the URL {path_filled:?} is invalid: {e}"))?;
    let api_host = own.host_str().unwrap_or_default().to_string();
    let mut url = match base_url {
        Some(base) => {
            let mut u = base.clone();
            let prefix = base.path().trim_end_matches('/');
            u.set_path(&format!("{prefix}{}", own.path()));
            u
        }
        None => own.clone(),
    };
    {
        let mut pairs = url.query_pairs_mut();
        pairs.clear();
        for (k, v) in own.query_pairs() {
            pairs.append_pair(&k, &v);
        }
        for (k, v) in &query {
            pairs.append_pair(k, v);
        }
    }
    if url.query() == Some("") {
        url.set_query(None);
    }
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
    Ok(HttpCall { method, url, api_host, headers, body })
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
    fn exploded_arrays_repeat_the_key() {
        let a = api("https://h.example/q", vec![param("v", ParamLocation::Query, true)]);
        let call = build(&a, json!({"v": [1, 2]}).as_object().unwrap(), None).unwrap();
        assert_eq!(call.url.query(), Some("v=1&v=2"));
    }
}
