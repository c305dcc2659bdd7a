//! `toolrouter replay`: the replay table as an HTTP server that speaks the
//! RapidAPI request shape, so that the real client path (guard, limits,
//! retries, caps) runs end to end against recorded responses.
//!
//! A request names its API by host (`X-RapidAPI-Host`, else `Host`),
//! method and path (matched against the catalog's URL templates, `{param}`
//! segments being path parameters); its arguments are the query string,
//! the path parameters and a JSON body's fields, mapped to the API's
//! parameter keys. Answers:
//!
//! * 200 with the recorded response (JSON, or text), `x-replay-match:
//!   exact` or `closest; score=0.50`;
//! * 502 `{"message"}` when the recorded call failed;
//! * 404 `{"message"}` when no API has this host and path, or nothing is
//!   recorded for it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use url::Url;

use crate::catalog::{ApiId, Catalog, ParamLocation};
use crate::upstream::{Match, ReplayTable, replay_body};

/// Largest request body read.
const MAX_BODY_BYTES: usize = 1 << 20;

/// One API's route: its method and path segments (`None`: a parameter).
struct Route {
    api: ApiId,
    method: String,
    segments: Vec<Option<String>>,
}

struct Replay {
    catalog: Arc<Catalog>,
    table: ReplayTable,
    routes: HashMap<String, Vec<Route>>,
}

/// The router of a replay server over `table`.
pub fn router(catalog: Arc<Catalog>, table: ReplayTable) -> axum::Router {
    let mut routes: HashMap<String, Vec<Route>> = HashMap::new();
    for api in catalog.apis() {
        let Some(template) = api.url_template.as_deref() else { continue };
        let Some((host, path)) = split_template(template) else { continue };
        let segments = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| (!(s.starts_with('{') && s.ends_with('}'))).then(|| s.to_string()))
            .collect();
        let method = format!("{:?}", api.method).to_ascii_uppercase();
        routes.entry(host).or_default().push(Route { api: api.id, method, segments });
    }
    let state = Arc::new(Replay { catalog, table, routes });
    axum::Router::new().fallback(answer).layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES)).with_state(state)
}

/// Serves `router` on `addr` until Ctrl-C; prints the bound address first.
pub async fn serve(router: axum::Router, addr: SocketAddr) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("replay server listening on http://{}", listener.local_addr()?);
    use std::io::Write;
    std::io::stdout().flush()?;
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
}

/// `https://host/path` (placeholders allowed) → (host, path).
fn split_template(template: &str) -> Option<(String, String)> {
    let url = Url::parse(&template.replace(['{', '}'], "")).ok()?;
    let host = url.host_str()?.to_ascii_lowercase();
    let rest = template.split_once("://")?.1;
    let path = rest.find('/').map_or("/", |i| &rest[i..]);
    let path = path.split(['?', '#']).next().unwrap_or("/");
    Some((host, path.to_string()))
}

fn message(status: StatusCode, text: String) -> Response {
    (status, axum::Json(json!({ "message": text }))).into_response()
}

async fn answer(
    State(state): State<Arc<Replay>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let Some(host) = header("x-rapidapi-host").or_else(|| header("host")) else {
        return message(StatusCode::BAD_REQUEST, "no X-RapidAPI-Host or Host header".into());
    };
    let host = host.split(':').next().unwrap_or("").to_ascii_lowercase();
    let path: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    let found = state.routes.get(&host).and_then(|routes| {
        routes
            .iter()
            .filter(|r| r.method == method.as_str() && r.segments.len() == path.len())
            .filter(|r| r.segments.iter().zip(&path).all(|(s, p)| s.as_deref().is_none_or(|s| s == *p)))
            .min_by_key(|r| r.segments.iter().filter(|s| s.is_none()).count())
    });
    let Some(route) = found else {
        return message(StatusCode::NOT_FOUND, format!("no API of `{host}` answers {method} {}", uri.path()));
    };
    let api = state.catalog.api(route.api);
    let mut arguments = Map::new();
    let key_of = |name: &str, location: ParamLocation| {
        api.params.iter().find(|p| p.name == name && p.location == location).map(|p| p.key.clone())
    };
    for (name, value) in url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()) {
        let key = key_of(&name, ParamLocation::Query).unwrap_or_else(|| name.to_string());
        match arguments.get_mut(&key) {
            Some(Value::Array(items)) => items.push(Value::String(value.into_owned())),
            Some(first) => *first = Value::Array(vec![first.take(), Value::String(value.into_owned())]),
            None => {
                arguments.insert(key, Value::String(value.into_owned()));
            }
        }
    }
    let template = api.url_template.as_deref().and_then(split_template).map(|(_, p)| p).unwrap_or_default();
    let names = template.split('/').filter(|s| !s.is_empty());
    for (segment, given) in names.zip(&path) {
        if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            let value = percent_decode(given);
            arguments
                .insert(key_of(name, ParamLocation::Path).unwrap_or_else(|| name.to_string()), Value::String(value));
        }
    }
    if !body.is_empty() {
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(fields)) => {
                for (name, value) in fields {
                    arguments.insert(key_of(&name, ParamLocation::Body).unwrap_or(name), value);
                }
            }
            _ => return message(StatusCode::BAD_REQUEST, "the request body is not a JSON object".into()),
        }
    }
    let Some((recording, matched)) = state.table.lookup(api.id, &arguments) else {
        return message(StatusCode::NOT_FOUND, format!("no recorded response for `{}`", api.function_name));
    };
    let matched = match matched {
        Match::Exact => "exact".to_string(),
        Match::Closest { score } => format!("closest; score={score:.2}"),
    };
    if !recording.error.is_empty() {
        let mut r = message(StatusCode::BAD_GATEWAY, format!("the recorded call failed: {}", recording.error));
        r.headers_mut().insert("x-replay-match", matched.parse().expect("ASCII"));
        return r;
    }
    let mut response = match replay_body(&recording.response) {
        Value::String(text) => (StatusCode::OK, [("content-type", "text/plain; charset=utf-8")], text).into_response(),
        value => (StatusCode::OK, axum::Json(value)).into_response(),
    };
    response.headers_mut().insert("x-replay-match", matched.parse().expect("ASCII"));
    response
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| s.to_string())
}
