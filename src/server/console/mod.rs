//! The console in the browser (`/ui`, docs/console.md): what toolrouter
//! chose and why, the tool graph, traces, APIs and traffic. The page and
//! its scripts are built into the binary ([`ASSETS`]; cytoscape.js and
//! uPlot vendored under `ui/vendor/` with their licenses), so it works with
//! no network. The page itself holds no data and needs no key; everything
//! it shows comes from the JSON endpoints of [`api`] (and `/v1/graph`,
//! `/v1/tools/search`, `/v1/traces/{id}`), behind the API keys, with the
//! key the user types in (kept in the tab's `sessionStorage`). The page
//! puts every text it shows through `textContent`, never HTML, and its
//! Content-Security-Policy allows no inline script.

pub(crate) mod api;
pub(crate) mod history;

use std::sync::Arc;

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::server::error::ApiError;
use crate::server::state::App;

/// The console's files: path under `/ui/`, content type, bytes.
const ASSETS: &[(&str, &str, &[u8])] = &[
    ("index.html", "text/html; charset=utf-8", include_bytes!("../../../ui/index.html")),
    ("console.js", "text/javascript; charset=utf-8", include_bytes!("../../../ui/console.js")),
    ("console.css", "text/css; charset=utf-8", include_bytes!("../../../ui/console.css")),
    (
        "vendor/cytoscape.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../ui/vendor/cytoscape-3.34.4/cytoscape.min.js"),
    ),
    (
        "vendor/uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../ui/vendor/uplot-1.6.32/uPlot.iife.min.js"),
    ),
    (
        "vendor/uPlot.min.css",
        "text/css; charset=utf-8",
        include_bytes!("../../../ui/vendor/uplot-1.6.32/uPlot.min.css"),
    ),
];

/// No inline script, nothing from elsewhere.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The console's page and assets (no key: the page asks for one) and its
/// API (keys and limits are the floor's, around them), with the face's own
/// state: the last minutes of counters, sampled while the routes live.
pub(crate) fn routes() -> (axum::Router<Arc<App>>, axum::Router<Arc<App>>) {
    use axum::routing::{get, post};
    let history = Arc::new(history::History::default());
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(sample(Arc::downgrade(&history)));
    }
    let open = axum::Router::new().route("/ui", get(page)).route("/ui/", get(page)).route("/ui/{*path}", get(asset));
    let api = axum::Router::new()
        .route("/v1/traces", get(api::traces))
        .route("/v1/plan", post(api::plan))
        .route("/v1/apis/{function}", get(api::api))
        .route("/v1/console/overview", get(api::overview))
        .layer(axum::Extension(history));
    (open, api)
}

pub(crate) async fn page() -> Response {
    asset_response("index.html")
}

/// `GET /ui/{*path}`: one of the page's files.
pub(crate) async fn asset(Path(path): Path<String>) -> Response {
    asset_response(if path.is_empty() { "index.html" } else { &path })
}

fn asset_response(path: &str) -> Response {
    let Some((_, content_type, bytes)) = ASSETS.iter().find(|(p, _, _)| *p == path) else {
        return ApiError::status(StatusCode::NOT_FOUND, format!("no console file `{path}`")).into_response();
    };
    let mut response = bytes.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Samples the counters for the overview every [`history::INTERVAL`],
/// while the console's routes hold `history`.
async fn sample(history: std::sync::Weak<history::History>) {
    let mut tick = tokio::time::interval(history::INTERVAL);
    loop {
        tick.tick().await;
        let Some(history) = history.upgrade() else { return };
        history.sample(crate::metrics::global().totals());
    }
}
