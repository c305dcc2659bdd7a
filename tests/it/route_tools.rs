//! Route mode over the tools clients send, through the server in-process
//! with a scripted model and the real embedding model: tools, not lists
//! (any order, any subset, across restarts), vectors and what was learned
//! shared by replicas through a real `redis-server`, and learning from
//! the model's calls.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};
use toolrouter::config::Config;
use toolrouter::llm::ChatModel;
use toolrouter::server::{App, router};

use crate::openai_inprocess::{ScriptedModel, completion, metrics, offered, post, tool_call};

/// A server with `model`, keeping 6 tools, its state in `state`, the
/// real embedding model for route mode, then `tweak` applied.
fn serve(model: Arc<ScriptedModel>, state: &std::path::Path, tweak: impl FnOnce(&mut Config)) -> axum::Router {
    let mut config = Config::default();
    config.log.level = "warn".into();
    config.openai.max_tools = 6;
    config.openai.embed_budget_ms = 60_000;
    config.state.dir = state.to_path_buf();
    tweak(&mut config);
    let app = App::with_model(&config, Some(model as Arc<dyn ChatModel>));
    app.chat().set_route_embedder(Arc::new(toolrouter::retrieval::Embedder::load(&config.embedding).unwrap()));
    router(app)
}

fn ok() -> Result<Value, toolrouter::llm::LlmError> {
    completion(json!({"role": "assistant", "content": "ok"}))
}

/// A request with `text` and [`topical_tools`].
fn ask(text: &str) -> Value {
    json!({"model": "m", "tools": topical_tools(), "messages": [{"role": "user", "content": text}]})
}

/// Tools with words that do not give the answer away: the embedding decides.
fn topical_tools() -> Vec<Value> {
    let topics = [
        ("forecast_lookup", "Tells whether it will rain or shine in a town over the next days"),
        ("fx_convert", "Changes an amount of money from one currency into another"),
        ("flight_tracker", "Shows where an airplane is and when it lands"),
        ("recipe_finder", "Suggests dishes to cook from the ingredients in your fridge"),
        ("stock_quote", "Gives the latest share price of a listed company"),
        ("movie_times", "Lists when films are showing at cinemas nearby"),
        ("translate_text", "Renders a sentence in another language"),
        ("hotel_rooms", "Finds places to stay for a night in a city"),
    ];
    let mut tools = Vec::new();
    for round in 0..15 {
        for (name, description) in topics {
            tools.push(json!({"type": "function", "function": {"name": format!("{name}_{round}"),
                "description": format!("{description} (provider {round})"),
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}));
        }
    }
    tools
}

/// [`ask`] with `tools` instead.
fn ask_with(tools: &[Value]) -> Value {
    json!({"model": "m", "tools": tools,
        "messages": [{"role": "user", "content": "Is it going to be sunny in Lyon this weekend?"}]})
}

fn report(text: &str) -> Value {
    serde_json::from_str::<Value>(text).unwrap()["toolrouter"].clone()
}

#[tokio::test]
async fn tools_not_lists_any_order_any_subset_the_same_tools_kept() {
    if !crate::common::model_available() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let model = ScriptedModel::new((0..5).map(|_| ok()));
    let app = serve(model.clone(), state.path(), |_| {});
    let tools = topical_tools();
    // The first request embeds its 120 new tools within the (generous) budget.
    let (status, _, text) = post(&app, ask_with(&tools)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(report(&text).get("ranked_by_words").is_none(), "{text}");
    let kept = offered(&model, 0);
    assert!(kept.iter().filter(|n| n.starts_with("forecast_lookup")).count() >= 4, "{kept:?}");
    // The same tools in other orders keep the same tools.
    let mut rng = fastrand::Rng::with_seed(3);
    let mut permuted = tools.clone();
    rng.shuffle(&mut permuted);
    assert_eq!(post(&app, ask_with(&permuted)).await.0, StatusCode::OK);
    permuted.reverse();
    assert_eq!(post(&app, ask_with(&permuted)).await.0, StatusCode::OK);
    assert_eq!(offered(&model, 1), kept);
    assert_eq!(offered(&model, 2), kept);
    // A subset holding the kept tools keeps them too.
    let subset: Vec<Value> = tools
        .iter()
        .enumerate()
        .filter(|(i, t)| i % 3 != 0 || kept.contains(&t["function"]["name"].as_str().unwrap().to_string()))
        .map(|(_, t)| t.clone())
        .collect();
    assert!(subset.len() < tools.len());
    let (status, _, text) = post(&app, ask_with(&subset)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(offered(&model, 3), kept);
    assert!(report(&text).get("ranked_by_words").is_none());

    // After a restart, with no time to embed anything, the tools are still
    // known: the vectors were kept in the state directory.
    let model = ScriptedModel::new((0..2).map(|_| ok()));
    let restarted = serve(model.clone(), state.path(), |c| c.openai.embed_budget_ms = 0);
    rng.shuffle(&mut permuted);
    let (_, _, text) = post(&restarted, ask_with(&permuted)).await;
    assert!(report(&text).get("ranked_by_words").is_none(), "{text}");
    assert_eq!(offered(&model, 0), kept);
    // A tool never seen, with no budget to embed it: the list ranks by words, and says so.
    let mut one_more = permuted.clone();
    one_more.push(json!({"type": "function", "function": {"name": "brand_new", "description": "Something new"}}));
    let (_, _, text) = post(&restarted, ask_with(&one_more)).await;
    assert_eq!(report(&text)["ranked_by_words"]["count"], 121, "{text}");
}

/// Replicas share the tool vectors through a real `redis-server`: a list
/// one replica embedded is ranked with the embedding on another that has
/// its own state directory and no time to embed anything.
#[tokio::test]
async fn a_tool_one_replica_embedded_is_known_to_the_others() {
    if !crate::common::model_available() {
        return;
    }
    let Some((_redis, port)) = crate::cluster::redis_server() else { return };
    let redis_url = format!("redis://127.0.0.1:{port}");
    let (first_state, second_state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (first_model, second_model) = (ScriptedModel::new([ok()]), ScriptedModel::new([ok()]));
    let first = serve(first_model.clone(), first_state.path(), |c| c.cluster.redis_url = redis_url.clone());
    let second = serve(second_model.clone(), second_state.path(), |c| {
        c.cluster.redis_url = redis_url.clone();
        c.openai.embed_budget_ms = 0;
    });
    let tools = topical_tools();
    // The first embeds them inline and shares them (written in the background).
    let (status, _, text) = post(&first, ask_with(&tools)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(report(&text).get("ranked_by_words").is_none(), "{text}");
    let mut redis = redis::Client::open(redis_url.as_str()).unwrap().get_connection().unwrap();
    let started = Instant::now();
    loop {
        let keys: Vec<String> = redis::cmd("KEYS").arg("toolrouter:toolvec:*").query(&mut redis).unwrap();
        if keys.len() >= 120 {
            let ttl: i64 = redis::cmd("TTL").arg(&keys[0]).query(&mut redis).unwrap();
            assert!(ttl > 3600, "the vectors expire after cluster.tool_vectors_ttl_s: {ttl}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{} of 120 tool vectors shared", keys.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The second, which never saw them and may not embed inline, ranks them
    // with the embedding at once, in another order, as the first did.
    let mut permuted = tools.clone();
    fastrand::Rng::with_seed(5).shuffle(&mut permuted);
    let (_, _, text) = post(&second, ask_with(&permuted)).await;
    assert!(report(&text).get("ranked_by_words").is_none(), "{text}");
    assert_eq!(offered(&second_model, 0), offered(&first_model, 0));
}

/// The request both learning tests ask first, the one they ask later, and
/// a translation tool that a server without a memory does not keep for
/// the later one.
async fn unkept_translation_tool() -> (&'static str, &'static str, String) {
    let (first, later) = ("Translate 'good morning' into French", "How would you say good evening in Italian?");
    let control = ScriptedModel::new([ok()]);
    let state = tempfile::tempdir().unwrap();
    let app = serve(control.clone(), state.path(), |c| c.openai.tool_memory_requests = 0);
    assert_eq!(post(&app, ask(later)).await.0, StatusCode::OK);
    let kept = offered(&control, 0);
    let unkept = (0..15).map(|i| format!("translate_text_{i}")).find(|t| !kept.contains(t)).expect("one not kept");
    (first, later, unkept)
}

/// Waits until `app`'s `/metrics` counts `n` remembered requests (learning
/// happens on a blocking thread, or through Redis).
async fn wait_remembered(app: &axum::Router, n: usize) {
    let started = Instant::now();
    let line = format!("toolrouter_route_remembered_requests {n}");
    while !metrics(app).await.contains(&line) {
        assert!(started.elapsed() < Duration::from_secs(10), "{}", metrics(app).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Route mode learns from use: a tool the model called for a request is
/// kept for a later similar one that would not have kept it, and still
/// after a restart (the memory is in the state directory).
#[tokio::test]
async fn a_tool_the_model_called_is_kept_for_a_later_similar_request() {
    if !crate::common::model_available() {
        return;
    }
    let (first, later, unkept) = unkept_translation_tool().await;
    // The model calls that tool for the first request; the later one keeps it.
    let state = tempfile::tempdir().unwrap();
    let model = ScriptedModel::new([completion(tool_call(&unkept, json!({"q": "good morning"}))), ok()]);
    let app = serve(model.clone(), state.path(), |_| {});
    let (status, _, text) = post(&app, ask(first)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    wait_remembered(&app, 1).await;
    assert_eq!(post(&app, ask(later)).await.0, StatusCode::OK);
    assert!(offered(&model, 1).contains(&unkept), "{unkept} not in {:?}", offered(&model, 1));
    // An unrelated request is not pulled toward it.
    let restarted = ScriptedModel::new([ok(), ok()]);
    let app = serve(restarted.clone(), state.path(), |_| {});
    assert_eq!(post(&app, ask("Is it going to be sunny in Lyon this weekend?")).await.0, StatusCode::OK);
    assert!(!offered(&restarted, 0).contains(&unkept), "{:?}", offered(&restarted, 0));
    // After a restart the memory is still there.
    assert_eq!(post(&app, ask(later)).await.0, StatusCode::OK);
    assert!(offered(&restarted, 1).contains(&unkept), "{unkept} not in {:?}", offered(&restarted, 1));
}

/// What one replica's route mode learned counts on another (through a
/// real `redis-server`), which never saw the request.
#[tokio::test]
async fn what_one_replica_learned_counts_on_another() {
    if !crate::common::model_available() {
        return;
    }
    let Some((_redis, port)) = crate::cluster::redis_server() else { return };
    let redis_url = format!("redis://127.0.0.1:{port}");
    let (first, later, unkept) = unkept_translation_tool().await;
    let (first_state, second_state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let second_model = ScriptedModel::new([ok()]);
    let second = serve(second_model.clone(), second_state.path(), |c| c.cluster.redis_url = redis_url.clone());
    // The first replica's model calls it; the second learns it through Redis.
    let first_model = ScriptedModel::new([completion(tool_call(&unkept, json!({"q": "good morning"})))]);
    let first_app = serve(first_model, first_state.path(), |c| c.cluster.redis_url = redis_url.clone());
    assert_eq!(post(&first_app, ask(first)).await.0, StatusCode::OK);
    wait_remembered(&second, 1).await;
    assert_eq!(post(&second, ask(later)).await.0, StatusCode::OK);
    assert!(offered(&second_model, 0).contains(&unkept), "{unkept} not in {:?}", offered(&second_model, 0));
    // The first replica read its own entry back and kept it once.
    assert!(metrics(&first_app).await.contains("toolrouter_route_remembered_requests 1"));
}

/// Route mode learns which of the client's tools follows which: after the
/// model called one tool and then another, a later conversation that
/// called the first keeps the second, which its words alone do not.
#[tokio::test]
async fn the_tool_called_after_another_is_kept_after_it() {
    if !crate::common::model_available() {
        return;
    }
    let (first, then) = ("hotel_rooms_3", "fx_convert_7");
    let after_booking = |asked: &str, latest: &str| {
        json!({"model": "m", "tools": topical_tools(), "messages": [
            {"role": "user", "content": asked},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": first, "arguments": "{\"q\": \"a room\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "Hotel Central, 140 EUR a night"},
            {"role": "user", "content": latest}]})
    };
    let later = after_booking("Somewhere to sleep in Oslo, please", "Great, that one looks nice.");
    let control = ScriptedModel::new([ok()]);
    let control_state = tempfile::tempdir().unwrap();
    let app = serve(control.clone(), control_state.path(), |c| c.openai.tool_memory_requests = 0);
    assert_eq!(post(&app, later.clone()).await.0, StatusCode::OK);
    assert!(!offered(&control, 0).contains(&then.to_string()), "{:?}", offered(&control, 0));
    // One conversation where the model called `then` after `first`.
    let state = tempfile::tempdir().unwrap();
    let model = ScriptedModel::new([completion(tool_call(then, json!({"q": "140 EUR"}))), ok()]);
    let app = serve(model.clone(), state.path(), |_| {});
    let (status, _, text) = post(&app, after_booking("Book a hotel in Rome for Friday", "How much is that?")).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    wait_remembered(&app, 1).await;
    assert_eq!(post(&app, later).await.0, StatusCode::OK);
    assert!(offered(&model, 1).contains(&then.to_string()), "{then} not in {:?}", offered(&model, 1));
    assert!(offered(&model, 1).contains(&first.to_string()), "the called tool stays");
}
