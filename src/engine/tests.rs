//! The engine's own operations, on the embedded catalog.

use serde_json::json;

use super::*;

/// An engine for calls alone resolves, refuses and validates as any
/// engine does (nothing here reaches the upstream), and has no search.
#[tokio::test(flavor = "multi_thread")]
async fn an_engine_for_calls_has_the_call_pipeline_and_no_search() {
    let state = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.state.dir = state.path().to_path_buf();
    let catalog = Arc::new(Catalog::load(&crate::catalog::Sources::default()).unwrap());
    let engine = Engine::open_for_calls(&config, catalog).unwrap();
    let call = |function, arguments| CallRequest {
        function,
        arguments,
        client: None,
        via: "cli",
        purpose: "",
        standalone: true,
    };
    let (wrong, array) = (json!({"year": "soon"}), json!([1]));
    match engine.call(call("holidays", &wrong)).await {
        Called::Unknown(unknown) => assert!(unknown.close.iter().any(|c| c == "public_holidays_for_nager_date")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(engine.call(call("public_holidays_for_nager_date", &array)).await, Called::Refused(_)));
    assert!(matches!(engine.call(call("public_holidays_for_nager_date", &wrong)).await, Called::Invalid(_)));
    assert!(matches!(engine.search("public holidays", 3, None).await, Err(EngineError::Internal(_))));
    assert!(matches!(engine.plan("public holidays in Germany", None, None).await, Err(EngineError::Internal(_))));
    assert!(engine.embedder().is_none());
}
