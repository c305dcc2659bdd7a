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
//! * 503 `{"message"}` for the APIs of an [`Outage`] (`--down SHARE`);
//! * 404 `{"message"}` when no API has this host and path, or nothing is
//!   recorded for it.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::catalog::{Api, ApiId, Catalog, ParamLocation};
use crate::upstream::request::{self, Captured, UrlTemplate};
use crate::upstream::{Match, Outage, ReplayTable, replay_body};

/// Largest request body read.
const MAX_BODY_BYTES: usize = 1 << 20;

/// One API's route: its method, URL template and query parameters.
struct Route {
    api: ApiId,
    method: &'static str,
    template: UrlTemplate,
    /// Wire names of the query parameters, and of the required ones.
    query: Vec<String>,
    required: Vec<String>,
}

/// Every API of a catalog by host, method and path template.
pub struct Routes(HashMap<String, Vec<Route>>);

impl Routes {
    pub fn new(catalog: &Catalog) -> Routes {
        let mut routes: HashMap<String, Vec<Route>> = HashMap::new();
        for api in catalog.apis() {
            let Some(template) = UrlTemplate::of(api) else { continue };
            let query = api.params.iter().filter(|p| p.location == ParamLocation::Query);
            let required = query.clone().filter(|p| p.required).map(|p| p.name.clone()).collect();
            let query = query.map(|p| p.name.clone()).collect();
            let route = Route { api: api.id, method: api.method.as_str(), template, query, required };
            routes.entry(route.template.host().to_string()).or_default().push(route);
        }
        Routes(routes)
    }

    /// The APIs whose templates match a request, best first, with their
    /// path parameters. Several APIs of the catalog may share one URL (the
    /// same endpoint documented twice, with other parameters); the best
    /// has the most of its query pairs carried, then the fewest query keys
    /// it does not declare, the fewest required ones missing, the fewest
    /// declared ones absent, the most literal characters in the path; the
    /// first loaded on a tie.
    pub fn ranked(
        &self,
        host: &str,
        method: &str,
        path: &str,
        query: &[(String, String)],
    ) -> Vec<(ApiId, Vec<(String, String)>)> {
        let Some(routes) = self.0.get(&host.to_ascii_lowercase()) else { return Vec::new() };
        let fit = |r: &Route, c: &Captured| {
            let unknown = query.iter().filter(|(k, _)| !r.query.contains(k)).count();
            let absent = |names: &[String]| names.iter().filter(|k| !query.iter().any(|(q, _)| q == *k)).count();
            let literal = r.template.literal_chars();
            (Reverse(c.query_pairs), unknown, absent(&r.required), absent(&r.query), Reverse(literal))
        };
        let mut matches: Vec<(&Route, Captured)> = routes
            .iter()
            .filter(|r| r.method == method)
            .filter_map(|r| Some((r, r.template.capture(path, query)?)))
            .collect();
        matches.sort_by_cached_key(|(r, c)| fit(r, c));
        matches.into_iter().map(|(r, c)| (r.api, c.params)).collect()
    }
}

struct Replay {
    catalog: Arc<Catalog>,
    table: ReplayTable,
    routes: Routes,
    outage: Outage,
}

/// The router of a replay server over `table`; the APIs of `outage` answer 503.
pub(crate) fn router(catalog: Arc<Catalog>, table: ReplayTable, outage: Outage) -> axum::Router {
    let routes = Routes::new(&catalog);
    let state = Arc::new(Replay { catalog, table, routes, outage });
    axum::Router::new().fallback(answer).layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES)).with_state(state)
}

/// Serves `router` on `addr` until Ctrl-C; prints the bound address first.
pub(crate) async fn serve(router: axum::Router, addr: SocketAddr) -> std::io::Result<()> {
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
    let query: Vec<(String, String)> = url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let fields = match body.is_empty() {
        true => None,
        false => match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(fields)) => Some(fields),
            _ => return message(StatusCode::BAD_REQUEST, "the request body is not a JSON object".into()),
        },
    };
    // Of the APIs this request may be for, the one that recorded these very
    // arguments, else the best-fitting one with recordings, else the best.
    let candidates: Vec<(&Api, Map<String, Value>)> = state
        .routes
        .ranked(&host, method.as_str(), uri.path(), &query)
        .into_iter()
        .map(|(id, path)| {
            let api = state.catalog.api(id);
            (api, request::arguments(api, &path, &query, fields.as_ref()))
        })
        .collect();
    let exact =
        |(api, args): &&(&Api, Map<String, Value>)| matches!(state.table.lookup(api.id, args), Some((_, Match::Exact)));
    let recorded = |(api, _): &&(&Api, Map<String, Value>)| !state.table.recordings(api.id).is_empty();
    let chosen = candidates.iter().find(exact).or_else(|| candidates.iter().find(recorded)).or(candidates.first());
    let Some((api, arguments)) = chosen else {
        return message(StatusCode::NOT_FOUND, format!("no API of `{host}` answers {method} {}", uri.path()));
    };
    if state.outage.is_down(&api.function_name) {
        let text = format!("`{}` is down (replay --down {})", api.function_name, state.outage.share);
        return message(StatusCode::SERVICE_UNAVAILABLE, text);
    }
    let Some((recording, matched)) = state.table.lookup(api.id, arguments) else {
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
