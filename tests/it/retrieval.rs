//! Retrieval on a small real index: a few hundred APIs of the ToolBench
//! catalog (the tools of real queries plus a whole category as
//! distractors), the real embedding model, a temporary state directory.

use crate::common;

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use toolrouter::catalog::{ApiId, Catalog, Sources};
use toolrouter::config::{Config, SearchMode};
use toolrouter::eval::queries;
use toolrouter::retrieval::{Filters, RetrievalError, Retriever, SearchOptions, index_files};

/// Queries of G1_instruction with the tool files of their relevant APIs.
fn sample() -> Option<(Vec<queries::QueryRecord>, Vec<PathBuf>)> {
    let dir = common::toolbench_dir()?;
    if !common::model_available() {
        return None;
    }
    let full = common::toolbench_catalog()?;
    let records = queries::load(&dir.join("queries/stabletoolbench_solvable/G1_instruction.json")).unwrap();
    let mut picked = Vec::new();
    let mut files: Vec<PathBuf> = vec![dir.join("tools/Weather")];
    for q in records {
        let ids: Vec<ApiId> = q.relevant.iter().filter_map(|(t, a)| full.resolve_pair(t, a)).collect();
        if ids.len() != q.relevant.len() || ids.is_empty() {
            continue;
        }
        for id in ids {
            let source = full.tool_of(full.api(id)).source.clone();
            if !files.contains(&source) {
                files.push(source);
            }
        }
        picked.push(q);
        if picked.len() == 12 {
            break;
        }
    }
    Some((picked, files))
}

fn config(state: &std::path::Path) -> Config {
    let mut config = Config::default();
    config.state.dir = state.to_path_buf();
    config
}

#[test]
fn real_queries_find_their_apis() {
    let Some((queries, files)) = sample() else { return };
    let catalog = Arc::new(Catalog::load(&Sources { paths: files, ..Sources::default() }).unwrap());
    assert!((400..2000).contains(&catalog.apis().len()), "{} APIs", catalog.apis().len());
    let state = tempfile::tempdir().unwrap();
    let retriever = Retriever::open(catalog.clone(), &config(state.path())).unwrap();
    assert!(retriever.built.is_some(), "a fresh state directory gets a new index");

    let mut recall_sum = 0.0;
    for q in &queries {
        let relevant: HashSet<ApiId> = q.relevant.iter().filter_map(|(t, a)| catalog.resolve_pair(t, a)).collect();
        let hits = retriever.search(&q.query, 5, &Filters::default()).unwrap().hits;
        let found = hits.iter().filter(|h| relevant.contains(&h.api)).count();
        assert!(found > 0, "query {} found none of {:?} in the top 5", q.id, q.relevant);
        recall_sum += found as f64 / relevant.len() as f64;
    }
    let recall = recall_sum / queries.len() as f64;
    assert!(recall >= 0.7, "mean recall@5 {recall:.2}");

    // Reopening loads the stored index instead of building it.
    let again = Retriever::open(catalog.clone(), &config(state.path())).unwrap();
    assert!(again.built.is_none());
    let q = &queries[0].query;
    assert_eq!(
        again.search(q, 5, &Filters::default()).unwrap().hits,
        retriever.search(q, 5, &Filters::default()).unwrap().hits
    );

    // Filters keep to one category or tool.
    let weather = retriever
        .search(
            "sunrise and sunset times",
            10,
            &Filters { category: Some("weather".into()), tool: None, allowed: None },
        )
        .unwrap();
    assert!(!weather.hits.is_empty());
    assert!(weather.hits.iter().all(|h| catalog.tool_of(catalog.api(h.api)).category == "Weather"));
    let tool = catalog.tool_of(catalog.api(weather.hits[0].api)).name.clone();
    let one =
        retriever.search("forecast", 10, &Filters { category: None, tool: Some(tool.clone()), allowed: None }).unwrap();
    assert!(one.hits.iter().all(|h| catalog.tool_of(catalog.api(h.api)).name == tool));

    // Every mode answers; lexical needs no model.
    let mut lexical = config(state.path());
    lexical.retrieval.mode = SearchMode::Lexical;
    let lex = Retriever::open(catalog.clone(), &lexical).unwrap();
    assert!(lex.embedder().is_none());
    assert!(!lex.search(q, 5, &Filters::default()).unwrap().hits.is_empty());
    assert!(matches!(retriever.search("   ", 5, &Filters::default()), Err(RetrievalError::EmptyQuery)));
    let long = "weather ".repeat(1000);
    assert_eq!(retriever.search(&long, 3, &Filters::default()).unwrap().cut_chars, 8000 - 2000 - 1);

    // The exact-name path: a request naming any API's function (any case,
    // with or without `get_`) gets that API first, for every API of the catalog.
    for api in catalog.apis() {
        let upper = api.function_name.to_uppercase();
        let unprefixed = api.function_name.strip_prefix("get_").unwrap_or(&api.function_name);
        for query in [format!("please call {} for me", api.function_name), format!("use {upper}, {unprefixed}.")] {
            let hits = lex.search(&query, 3, &Filters::default()).unwrap().hits;
            assert_eq!(hits.first().map(|h| h.api), Some(api.id), "{query:?}");
        }
    }

    // A tool the request calls by name ("the X API"), beside another need,
    // is in the top 3, for every tool whose name few tools share.
    let named_tools = tools_named_in_requests(&lex, &catalog, lex.options());
    let mut off = lex.options();
    off.weights.named_tool = 0.0;
    let unnamed = tools_named_in_requests(&lex, &catalog, off);
    assert!(named_tools.missed.is_empty(), "not in the top 3 when named: {:?}", named_tools.missed);
    assert!(named_tools.checked * 2 >= catalog.tools().len(), "{} tools checked", named_tools.checked);
    assert!(!unnamed.missed.is_empty(), "the other need outranks some tools when names count for nothing");
    // A filter still holds: a named tool outside it is not put first.
    let outside = catalog.tools().iter().find(|t| t.category != "Weather").unwrap();
    let query = format!("weather in Paris with the {} API", outside.name);
    let only_weather = Filters { category: Some("Weather".into()), tool: None, allowed: None };
    let hits = lex.search(&query, 5, &only_weather).unwrap().hits;
    assert!(!hits.is_empty() && hits.iter().all(|h| catalog.tool_of(catalog.api(h.api)).category == "Weather"));

    // APIs remembered from similar requests join the ranking.
    let options = lex.options();
    let mut prepared = lex.prepare("something about sunsets", options).unwrap();
    let far = catalog.apis().last().unwrap().id;
    assert!(!lex.rank(&prepared, 10, &Filters::default(), options).hits.iter().any(|h| h.api == far));
    prepared.remembered = vec![(far, 0.9)];
    assert!(lex.rank(&prepared, 10, &Filters::default(), options).hits.iter().any(|h| h.api == far));
}

/// Tools checked by [`tools_named_in_requests`] and those whose APIs missed the top 3.
struct NamedTools {
    checked: usize,
    missed: Vec<String>,
}

/// Asks for every tool by name ("… using X API") beside a weather
/// request, in a catalog with the whole Weather category; names that more
/// than three tools share are skipped (such a name is no evidence).
fn tools_named_in_requests(retriever: &Retriever, catalog: &Catalog, options: SearchOptions) -> NamedTools {
    let key = |name: &str| toolrouter::retrieval::names::words(name).join(" ");
    let mut shared: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for tool in catalog.tools() {
        *shared.entry(key(&tool.name)).or_default() += 1;
    }
    let mut out = NamedTools { checked: 0, missed: Vec::new() };
    for tool in catalog.tools().iter().filter(|t| shared[&key(&t.name)] <= 3) {
        let name = tool.name.trim();
        let last = toolrouter::retrieval::names::words(name).pop().unwrap_or_default();
        let api = if toolrouter::retrieval::names::TOOL_WORDS.contains(&last.as_str()) { "" } else { " API" };
        let query = format!("Get the hourly weather forecast for Berlin tomorrow, then look it up using {name}{api}.");
        let prepared = retriever.prepare(&query, options).unwrap();
        let hits = retriever.rank(&prepared, 3, &Filters::default(), options).hits;
        out.checked += 1;
        if !hits.iter().any(|h| key(&catalog.tool_of(catalog.api(h.api)).name) == key(&tool.name)) {
            out.missed.push(tool.name.clone());
        }
    }
    out
}

#[test]
fn stale_and_damaged_indexes_are_never_used() {
    let Some((_, files)) = sample() else { return };
    let catalog = Arc::new(Catalog::load(&Sources { paths: files[..1].to_vec(), ..Sources::default() }).unwrap());
    let state = tempfile::tempdir().unwrap();
    let mut cfg = config(state.path());
    let built = Retriever::open(catalog.clone(), &cfg).unwrap();
    let dir = built.index_dir.clone();

    // Damaged: a flipped byte in the vectors.
    let vectors = dir.join("vectors.f32");
    let mut bytes = std::fs::read(&vectors).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&vectors, &bytes).unwrap();
    cfg.retrieval.auto_index = false;
    let err = Retriever::open(catalog.clone(), &cfg).unwrap_err();
    assert!(matches!(err, RetrievalError::NoIndex { problem: index_files::Unusable::Damaged { .. } }), "{err}");
    assert!(err.to_string().contains("run `toolrouter index`"), "{err}");
    // With auto_index the index is rebuilt (from the embedding cache) and works.
    cfg.retrieval.auto_index = true;
    let rebuilt = Retriever::open(catalog.clone(), &cfg).unwrap();
    assert!(rebuilt.built.as_ref().is_some_and(|b| b.embedded == 0), "cached embeddings are reused");

    // Stale: the manifest names another catalog.
    let manifest = dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    value["catalog_hash"] = "0".repeat(64).into();
    std::fs::write(&manifest, value.to_string()).unwrap();
    cfg.retrieval.auto_index = false;
    let err = Retriever::open(catalog, &cfg).unwrap_err().to_string();
    assert!(err.contains("stale") && err.contains("built for catalog"), "{err}");
}

#[test]
fn a_bad_model_or_runtime_is_a_clear_error() {
    if !common::model_available() {
        return;
    }
    let catalog = Arc::new(Catalog::load(&Sources::default()).unwrap());
    let state = tempfile::tempdir().unwrap();
    let models = tempfile::tempdir().unwrap();
    let mut cfg = config(state.path());
    cfg.embedding.model_dir = models.path().to_path_buf();
    let err = Retriever::open(catalog.clone(), &cfg).unwrap_err().to_string();
    assert!(err.contains("model.onnx is missing") && err.contains("scripts/fetch-models.sh"), "{err}");

    let real = toolrouter::config::EmbeddingConfig::default().model_dir();
    for f in toolrouter::retrieval::embedder::MODEL_FILES {
        std::fs::copy(real.join(f), models.path().join(f)).unwrap();
    }
    // Not a model, and a model cut short (a partial download): the file and the fix named.
    let whole = std::fs::read(real.join("model.onnx")).unwrap();
    for damaged in [&b"not an onnx model"[..], &whole[..whole.len() / 2]] {
        std::fs::write(models.path().join("model.onnx"), damaged).unwrap();
        let err = Retriever::open(catalog.clone(), &cfg).unwrap_err().to_string();
        assert!(err.starts_with("embedding model file") && err.contains("model.onnx"), "{err}");
        assert!(err.contains("scripts/fetch-models.sh") && err.contains("embedding.model_dir"), "{err}");
    }

    let mut cfg = config(state.path());
    cfg.embedding.onnxruntime = state.path().join("libonnxruntime.so");
    let err = Retriever::open(catalog, &cfg).unwrap_err().to_string();
    assert!(err.contains("ONNX Runtime") && err.contains("no such file"), "{err}");
}

#[test]
fn search_and_index_on_the_command_line() {
    if !common::model_available() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(common::binary()).args(args).env("TOOLROUTER_STATE_DIR", state.path()).output().unwrap()
    };
    let out = run(&["index"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("indexed 11 APIs"));
    let out = run(&["index"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("up to date"));

    let out = run(&["search", "exchange rate from US dollars to euros", "-k", "3", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hits"].as_array().unwrap().len(), 3);
    assert!(v["hits"][0]["function"].as_str().unwrap().ends_with("_for_frankfurter"), "{v}");

    let out = run(&["search", "public holidays in France", "--mode", "lexical", "--category", "events"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().next().unwrap().contains("holidays_for_nager_date"), "{text}");

    let out = run(&["search", "  "]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the query is empty"));
    let out = Command::new(common::binary())
        .args(["search", "weather"])
        .env("TOOLROUTER_STATE_DIR", state.path())
        .env("TOOLROUTER_EMBEDDING_MODEL_DIR", state.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("model.onnx is missing"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A file that is not an ONNX Runtime library (its own process: one runtime per process).
    let fake = state.path().join("libonnxruntime.so");
    std::fs::write(&fake, b"\x7fELF but not really").unwrap();
    let out = Command::new(common::binary())
        .args(["search", "weather"])
        .env("TOOLROUTER_STATE_DIR", state.path())
        .env("TOOLROUTER_EMBEDDING_ONNXRUNTIME", &fake)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("ONNX Runtime") && err.contains("1.24 or newer"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A downstream server's tools as listed.
fn mcp_tools(tools: &[(&str, &str)]) -> Vec<toolrouter::catalog::McpServerTools> {
    let tools = tools
        .iter()
        .map(|(name, description)| toolrouter::catalog::McpTool {
            name: name.to_string(),
            title: None,
            description: description.to_string(),
            input_schema: serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}}}),
            annotations: None,
        })
        .collect();
    vec![toolrouter::catalog::McpServerTools { server: "mine".into(), description: "My tools".into(), tools }]
}

/// A changed catalog's index carried over from the one in use finds what
/// was added, never what was removed, and ranks the rest as a full rebuild
/// does, on every sample query, in hybrid and lexical modes alike.
#[test]
fn a_changed_catalog_is_searched_without_a_rebuild() {
    let Some((queries, files)) = sample() else { return };
    let base = Catalog::load(&Sources { paths: files, ..Sources::default() }).unwrap();
    let klingon = ("klingon_verse", "Translates Klingon poetry into Elvish verse, stanza by stanza");
    let tide = ("tide_tables", "Tide tables: high and low water times for a harbour");
    let with_both = Arc::new(base.with_mcp_tools(&mcp_tools(&[klingon, tide])));
    let without_klingon = Arc::new(base.with_mcp_tools(&mcp_tools(&[tide])));
    let base = Arc::new(base);
    let state = tempfile::tempdir().unwrap();
    for mode in [SearchMode::Hybrid, SearchMode::Lexical] {
        let mut config = config(state.path());
        config.retrieval.mode = mode;
        let before = Retriever::open(base.clone(), &config).unwrap();
        assert!(!before.provisional());

        let added = before.carry_over(with_both.clone(), &config).unwrap();
        // Carried BM25 postings are what a rebuild makes: only a carried
        // HNSW graph calls for the full index to be built.
        assert_eq!(added.provisional(), mode == SearchMode::Hybrid, "{mode:?}: carried over, not rebuilt");
        let hits = added.search("translate klingon poetry to elvish", 3, &Filters::default()).unwrap().hits;
        let first = with_both.api(hits[0].api);
        assert_eq!(first.function_name, "mine__klingon_verse", "{mode:?}: {hits:?}");
        let rebuilt = Retriever::open(with_both.clone(), &config).unwrap();
        for q in &queries {
            let ids = |r: &Retriever| {
                r.search(&q.query, 10, &Filters::default()).unwrap().hits.iter().map(|h| h.api).collect::<Vec<_>>()
            };
            let (carried, full) = (ids(&added), ids(&rebuilt));
            let shared = carried.iter().filter(|a| full.contains(a)).count();
            assert!(shared >= 9, "{mode:?}, query {}: carried {carried:?}, rebuilt {full:?}", q.id);
        }

        let removed = added.carry_over(without_klingon.clone(), &config).unwrap();
        for query in ["translate klingon poetry to elvish", "Klingon Elvish stanza verse poetry", "mine klingon_verse"]
        {
            let hits = removed.search(query, 50, &Filters::default()).unwrap().hits;
            assert!(
                hits.iter().all(|h| !without_klingon.api(h.api).function_name.contains("klingon")),
                "{mode:?}: a removed tool never appears: {hits:?}"
            );
        }
        let hits = removed.search("high and low tide times for the harbour", 3, &Filters::default()).unwrap().hits;
        assert_eq!(without_klingon.api(hits[0].api).function_name, "mine__tide_tables", "{mode:?}");
    }
}
