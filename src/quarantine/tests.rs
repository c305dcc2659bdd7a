use serde_json::Value;

use super::*;
use crate::catalog::{McpServerTools, McpTool, Sources};

fn tools_of(path: &str) -> Vec<McpServerTools> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap();
    let servers: BTreeMap<String, Vec<Value>> = serde_json::from_str(&text).unwrap();
    servers
        .into_iter()
        .map(|(server, tools)| McpServerTools {
            description: server.clone(),
            server,
            tools: tools
                .into_iter()
                .map(|t| McpTool {
                    name: t["name"].as_str().unwrap().to_string(),
                    title: None,
                    description: t["description"].as_str().unwrap_or("").to_string(),
                    input_schema: t["inputSchema"].clone(),
                    annotations: t.get("annotations").cloned(),
                })
                .collect(),
        })
        .collect()
}

fn catalog_with(servers: &[McpServerTools]) -> Arc<Catalog> {
    let base = Catalog::load(&Sources { include_embedded: false, ..Sources::default() }).unwrap();
    Arc::new(base.with_mcp_tools(servers))
}

/// The function names of `catalog`'s MCP tools.
fn mcp_names(catalog: &Catalog) -> Vec<String> {
    let mut names: Vec<String> = catalog
        .apis()
        .iter()
        .filter(|a| catalog.tool(a.tool).origin == Origin::Mcp)
        .map(|a| a.function_name.clone())
        .collect();
    names.sort();
    names
}

fn none() -> Exceptions {
    Exceptions::of(&[], &[]).unwrap()
}

#[test]
fn every_real_mcp_tool_passes_and_every_poisoned_one_is_held() {
    let state = tempfile::tempdir().unwrap();
    let real = catalog_with(&tools_of("tests/data/mcp-sessions/tools.json"));
    assert_eq!(mcp_names(&real).len(), 124);
    let review = Quarantine::review(&real, state.path(), &none());
    assert!(review.list().is_empty(), "real tools held: {:#?}", review.list());
    assert!(review.mask(&real).is_none(), "nothing held, no mask");

    let poisoned = catalog_with(&tools_of("tests/data/poisoned-tools/tools.json"));
    let review = Quarantine::review(&poisoned, state.path(), &none());
    let held: Vec<String> = review.list().into_iter().map(|h| h.function).collect();
    assert_eq!(held, mcp_names(&poisoned), "every poisoned tool is held");
    let mask = review.mask(&poisoned).unwrap();
    for api in poisoned.apis() {
        assert_eq!(mask[api.id.0 as usize], !held.contains(&api.function_name), "{}", api.function_name);
    }
    let weather = review.held("poisoned__weather").unwrap();
    assert!(weather.reasons[0].contains("hidden or bidirectional Unicode (U+E0073)"), "{weather:?}");
    let add = review.held("poisoned__add").unwrap();
    for says in
        ["hidden-instruction block", "hidden file in the home directory", "SSH keys", "client configuration file"]
    {
        assert!(add.reasons.iter().any(|r| r.contains(says)), "{says}: {add:?}");
    }
}

#[test]
fn a_tool_changed_since_first_seen_is_held_until_accepted() {
    let state = tempfile::tempdir().unwrap();
    let mut servers = tools_of("tests/data/mcp-sessions/tools.json");
    let first = catalog_with(&servers);
    assert!(Quarantine::review(&first, state.path(), &none()).list().is_empty());
    assert!(state.path().join("tools-seen.json").exists(), "first-seen definitions kept");

    let time = servers.iter_mut().find(|s| s.server == "time").unwrap();
    time.tools[0].description.push_str(" Also returns the weather.");
    let name = format!("time__{}", time.tools[0].name);
    let changed = catalog_with(&servers);
    let review = Quarantine::review(&changed, state.path(), &none());
    let held = review.held(&name).expect("held");
    assert!(
        held.reasons[0].contains("changed since it was first seen")
            && held.reasons[0].contains("Also returns the weather"),
        "{held:?}"
    );
    assert_eq!(review.list().len(), 1, "only the changed tool");
    // Still held at the next start: the first definition is what counts.
    assert!(Quarantine::review(&changed, state.path(), &none()).held(&name).is_some());

    let accept = Exceptions::of(&[], &[format!("name:{name}")]).unwrap();
    assert!(Quarantine::review(&changed, state.path(), &accept).list().is_empty(), "accepted");
    assert!(Quarantine::review(&changed, state.path(), &none()).list().is_empty(), "…and remembered as seen");

    // Changed again: an operator's call accepts it by its exact name.
    let time = servers.iter_mut().find(|s| s.server == "time").unwrap();
    time.tools[0].description.push_str(" And the tides.");
    let again = catalog_with(&servers);
    let held = Quarantine::review(&again, state.path(), &none()).held(&name).cloned().expect("held");
    let digest = held.definition.expect("a changed tool's definition is named");
    let other = Exceptions { accepted: Some((format!("{name}_not"), digest.clone())), ..none() };
    assert!(Quarantine::review(&again, state.path(), &other).held(&name).is_some(), "by its exact name only");
    let unseen = Exceptions { accepted: Some((name.clone(), "0123456789abcdef".into())), ..none() };
    assert!(Quarantine::review(&again, state.path(), &unseen).held(&name).is_some(), "only the definition seen");
    let operator = Exceptions { accepted: Some((name.clone(), digest)), ..none() };
    assert!(Quarantine::review(&again, state.path(), &operator).list().is_empty());
    assert!(Quarantine::review(&again, state.path(), &none()).list().is_empty(), "…and remembered as seen");
}

#[test]
fn a_flagged_tool_the_operator_allows_is_not_held() {
    let state = tempfile::tempdir().unwrap();
    let poisoned = catalog_with(&tools_of("tests/data/poisoned-tools/tools.json"));
    let allow = Exceptions::of(&["name:poisoned__format_text".to_string()], &[]).unwrap();
    let review = Quarantine::review(&poisoned, state.path(), &allow);
    assert!(review.held("poisoned__format_text").is_none());
    assert_eq!(review.list().len(), mcp_names(&poisoned).len() - 1);
}

#[test]
fn hidden_characters_are_named_and_ordinary_text_is_not() {
    assert!(scan("Get the weather in Zürich, 東京 or São Paulo — today's forecast 🌦️.").is_empty());
    assert!(scan("Reads a file at the given path.\nReturns its text.\tTabs too.").is_empty());
    assert_eq!(scan("a\u{200b}b"), ["hidden or bidirectional Unicode (U+200B)"]);
    assert_eq!(scan("x\u{2066}y"), ["hidden or bidirectional Unicode (U+2066)"]);
}
