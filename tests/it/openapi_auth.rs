//! The user's own HTTP services, described by OpenAPI specs, called with
//! their credentials (`[[upstream.credentials]]`): real servers on
//! loopback that echo what they received. The credential reaches its own
//! host only: not another service, not the RapidAPI key either, not
//! through a redirect; a query key never shows in a trace.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect};
use serde_json::{Map, Value, json};
use toolrouter::catalog::{Catalog, Sources};
use toolrouter::config::{Config, CredentialConfig, CredentialScheme, SecretRef};
use toolrouter::upstream::{ErrorClass, Upstream};

const TOKEN: &str = "s3cret-token";

/// A service that echoes the request; with `token`, only to that bearer
/// token (401 otherwise). `/leave` redirects to `elsewhere`.
async fn service(token: Option<&'static str>, elsewhere: Option<String>) -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let handler = move |method: Method, uri: Uri, headers: HeaderMap, body: axum::body::Bytes| {
        let (counter, elsewhere) = (counter.clone(), elsewhere.clone());
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
            if uri.path() == "/leave" {
                return Redirect::temporary(&elsewhere.unwrap_or_default()).into_response();
            }
            if let Some(token) = token
                && header("authorization") != Some(format!("Bearer {token}"))
                && !uri.query().unwrap_or_default().contains(token)
            {
                return (StatusCode::UNAUTHORIZED, "no valid credential").into_response();
            }
            axum::Json(json!({
                "method": method.as_str(), "path": uri.path(), "query": uri.query(),
                "authorization": header("authorization"), "x_rapidapi_key": header("x-rapidapi-key"),
                "content_type": header("content-type"),
                "body": serde_json::from_slice::<Value>(&body).ok(),
            }))
            .into_response()
        }
    };
    let app = axum::Router::new().fallback(handler);
    tokio::spawn(async move { axum::serve(listener, app).await });
    (port, hits)
}

/// An OpenAPI spec of a service at `port`: `GET /whoami`, `POST /items`, `GET /leave`.
fn spec(title: &str, port: u16) -> Value {
    json!({
        "openapi": "3.0.3",
        "info": {"title": title, "version": "1"},
        "servers": [{"url": format!("http://127.0.0.1:{port}")}],
        "paths": {
            "/whoami": {"get": {"operationId": "whoami", "summary": "Who the service thinks is calling",
                "parameters": [{"name": "q", "in": "query", "schema": {"type": "string"}}]}},
            "/items": {"post": {"operationId": "create_item", "summary": "Creates an item",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {
                    "type": "object", "required": ["name"],
                    "properties": {"name": {"type": "string"}, "count": {"type": "integer"}}}}}}}},
            "/leave": {"get": {"operationId": "leave", "summary": "Redirects elsewhere"}},
        }
    })
}

fn args(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn credentials_reach_their_own_host_only() {
    let (other_port, other_hits) = service(None, None).await;
    let (secured_port, _) = service(Some(TOKEN), Some(format!("http://127.0.0.1:{other_port}/whoami"))).await;
    let (keyed_port, _) = service(Some(TOKEN), None).await;
    let dir = tempfile::tempdir().unwrap();
    for (name, port) in [("secured", secured_port), ("other", other_port), ("keyed", keyed_port)] {
        std::fs::write(dir.path().join(format!("{name}.json")), spec(name, port).to_string()).unwrap();
    }
    let (token_file, rapidapi_file) = (dir.path().join("token"), dir.path().join("rapidapi-key"));
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    std::fs::write(&rapidapi_file, "rapidapi-key-value").unwrap();

    let catalog = Catalog::load(&Sources { paths: vec![dir.path().to_path_buf()], ..Sources::default() }).unwrap();
    let mut config = Config::default();
    let u = &mut config.upstream;
    u.allow_private = true;
    u.rapidapi_key_file = rapidapi_file;
    let secret = SecretRef { file: token_file, ..SecretRef::default() };
    u.credentials = vec![
        CredentialConfig {
            host: format!("127.0.0.1:{secured_port}"),
            scheme: CredentialScheme::Bearer,
            secret: secret.clone(),
            ..CredentialConfig::default()
        },
        CredentialConfig {
            host: format!("127.0.0.1:{keyed_port}"),
            scheme: CredentialScheme::Query,
            name: "api_key".into(),
            secret,
            ..CredentialConfig::default()
        },
    ];
    let upstream = Upstream::new(&catalog, &config).unwrap();
    let call = |function: &str, arguments: Value| {
        let api = catalog.find(function).unwrap().clone();
        let upstream = &upstream;
        async move { upstream.call(&api, &args(arguments), None).await }
    };

    // Its own host gets the token; a POST carries its JSON body.
    let seen = call("whoami_for_secured", json!({"q": "me"})).await.unwrap();
    assert_eq!(seen.body["authorization"], json!(format!("Bearer {TOKEN}")), "{}", seen.body);
    let seen = call("create_item_for_secured", json!({"name": "pen", "count": 2})).await.unwrap();
    assert_eq!(seen.body["method"], "POST");
    assert_eq!(seen.body["body"], json!({"name": "pen", "count": 2}));
    assert!(seen.body["content_type"].as_str().unwrap().starts_with("application/json"));

    // Another host gets neither the token nor the RapidAPI key.
    let seen = call("whoami_for_other", json!({})).await.unwrap();
    assert_eq!((&seen.body["authorization"], &seen.body["x_rapidapi_key"]), (&Value::Null, &Value::Null));

    // A query key is sent, and shows in no trace.
    let seen = call("whoami_for_keyed", json!({"q": "x"})).await.unwrap();
    assert!(seen.body["query"].as_str().unwrap().contains(&format!("api_key={TOKEN}")), "{}", seen.body);
    assert!(!serde_json::to_string(&seen.trace).unwrap().contains(TOKEN), "{:?}", seen.trace);

    // A redirect from the credential's host to another one is not followed.
    let before = other_hits.load(Ordering::SeqCst);
    let refused = call("leave_for_secured", json!({})).await.unwrap_err();
    assert_eq!(refused.class, ErrorClass::Refused, "{refused:?}");
    assert!(refused.message.contains("redirect refused") && !refused.message.contains(TOKEN), "{}", refused.message);
    assert_eq!(other_hits.load(Ordering::SeqCst), before, "the other host was never reached");

    // An unreadable secret stops the start, naming the host, not the secret.
    let mut broken = config.clone();
    broken.upstream.credentials[0].secret =
        SecretRef { env: "TOOLROUTER_TEST_UNSET_TOKEN".into(), ..SecretRef::default() };
    let err = Upstream::new(&catalog, &broken).err().unwrap().to_string();
    assert!(err.contains(&format!("127.0.0.1:{secured_port}")) && err.contains("TOOLROUTER_TEST_UNSET_TOKEN"), "{err}");
}

/// The federation example's spec loads: its three operations, the POST's
/// JSON body as parameters; the Claude Desktop example is valid JSON
/// pointing at the federation config.
#[test]
fn the_federation_examples_are_usable() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let sources = Sources { paths: vec![examples.join("inventory.openapi.yaml")], ..Sources::default() };
    let catalog = Catalog::load(&sources).unwrap();
    let mut names: Vec<&str> = catalog.apis().iter().map(|a| a.function_name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["createorder_for_inventory", "getitem_for_inventory", "searchitems_for_inventory"]);
    let order = catalog.find("createorder_for_inventory").unwrap();
    assert_eq!(order.input_schema()["required"], json!(["sku", "quantity"]));
    let claude: Value =
        serde_json::from_str(&std::fs::read_to_string(examples.join("claude_desktop_federation.json")).unwrap())
            .unwrap();
    assert!(claude["mcpServers"]["toolrouter"]["args"].to_string().contains("federation.toml"));
}
