//! Multi-turn sessions over MCP servers' tools, as route cases: each step
//! of a session (a new user message, or the agent's next call on the same
//! one) is a [`Case`] whose conversation holds every earlier turn, its
//! user messages and the tools called (`tests/data/mcp-sessions/`).
//!
//! A session file holds JSON lines `{"id", "servers": [names], "turns":
//! [{"user"?: text, "calls": [tool names]}]}`; the tools are read from
//! `tools.json` beside it (`{server: [{"name", "description",
//! "inputSchema"}]}`, as the servers list them). A tool name two servers
//! share is prefixed with its server (`github_create_issue`), as clients
//! that connect several servers do; a session names the tools unprefixed.
//! With `server_names`, every tool is named `server__tool`, as toolrouter's
//! federation and most MCP gateways name them.
//!
//! [`load_tasks`] composes whole tasks across servers from the same
//! sessions: the opening requests of two or three sessions whose first
//! tool is on different servers, as one message, needing every tool each
//! opening's calls used (the whole-task measure of multi-server
//! collections: needed tools kept, all kept).

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use super::Case;
use crate::llm::Message;
use crate::llm::wire::{FunctionCall, ToolCall};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Session {
    id: String,
    servers: Vec<String>,
    turns: Vec<Turn>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    #[serde(default)]
    user: Option<String>,
    calls: Vec<String>,
}

#[derive(Deserialize)]
struct McpTool {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(rename = "inputSchema")]
    input_schema: Value,
}

/// Every step of the sessions in `path` (in order), as route cases.
pub(crate) fn load_sessions(path: &Path, server_names: bool) -> Result<Vec<Case>, String> {
    Ok(read_sessions(path, server_names)?.into_iter().flat_map(|(_, steps)| steps).collect())
}

/// Tasks of `size` sessions' opening requests each (see the module's
/// doc): session `i` with sessions `i + j·n/size` (`n` sessions), the
/// next on when one's first tool is on a server already in the task.
pub(crate) fn load_tasks(path: &Path, server_names: bool, size: usize) -> Result<Vec<Case>, String> {
    let openings: Vec<(String, Case)> = read_sessions(path, server_names)?
        .into_iter()
        .filter_map(|(server, steps)| Some((server, opening(steps)?)))
        .collect();
    let n = openings.len();
    let mut tasks = Vec::new();
    for i in 0..n {
        let mut parts: Vec<&(String, Case)> = vec![&openings[i]];
        for j in 1..size {
            let start = i + j * n / size;
            let other = (0..n)
                .map(|d| &openings[(start + d) % n])
                .find(|(server, _)| parts.iter().all(|(taken, _)| taken != server));
            parts.extend(other);
        }
        let parts: Vec<&Case> = parts.into_iter().map(|(_, case)| case).collect();
        if parts.len() < size {
            continue;
        }
        let query = parts.iter().map(|c| sentence(&c.query)).collect::<Vec<_>>().join(" ");
        let mut tools: Vec<Value> = Vec::new();
        let mut relevant: Vec<String> = Vec::new();
        for part in &parts {
            for tool in &part.tools {
                if !tools.iter().any(|t| t["function"]["name"] == tool["function"]["name"]) {
                    tools.push(tool.clone());
                }
            }
            relevant.extend(part.relevant.iter().filter(|r| !relevant.contains(r)).cloned().collect::<Vec<_>>());
        }
        tasks.push(Case { query, tools, relevant, conversation: Vec::new() });
    }
    if tasks.is_empty() {
        return Err(format!("{}: no {size} sessions open on different servers", path.display()));
    }
    Ok(tasks)
}

/// A session's opening request: its first user message, needing every
/// tool called before the next one.
fn opening(steps: Vec<Case>) -> Option<Case> {
    let mut steps = steps.into_iter();
    let mut first = steps.next()?;
    for step in steps.take_while(|s| s.query == first.query) {
        first.relevant.extend(step.relevant.into_iter().filter(|r| !first.relevant.contains(r)).collect::<Vec<_>>());
    }
    Some(first)
}

/// `text` ending as a sentence does, so that requests joined stay apart.
fn sentence(text: &str) -> String {
    let text = text.trim();
    match text.ends_with(['.', '?', '!']) {
        true => text.to_string(),
        false => format!("{text}."),
    }
}

/// Each session of `path`: the server of its first call, its steps.
fn read_sessions(path: &Path, server_names: bool) -> Result<Vec<(String, Vec<Case>)>, String> {
    let tools_path = path.with_file_name("tools.json");
    let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("reading {}: {e}", p.display()));
    let servers: HashMap<String, Vec<McpTool>> = serde_json::from_str(&read(&tools_path)?)
        .map_err(|e| format!("{}: {e} (expected {{server: [tools as listed]}})", tools_path.display()))?;
    let definitions = definitions(&servers, server_names);
    let mut sessions = Vec::new();
    for (n, line) in read(path)?.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = format!("{}:{}", path.display(), n + 1);
        let session: Session = serde_json::from_str(line).map_err(|e| format!("{at}: {e}"))?;
        let steps = steps(&session, &definitions).map_err(|e| format!("{at} (session {}): {e}", session.id))?;
        let first = &session.turns[0].calls[0];
        let server = session.servers.iter().find(|s| definitions[*s].contains_key(first)).cloned().unwrap_or_default();
        sessions.push((server, steps));
    }
    Ok(sessions)
}

/// Every tool of `tools.json` beside the sessions of `path` (all its
/// servers', named as [`load_sessions`] names them), in server then name order.
pub(crate) fn all_tools(path: &Path, server_names: bool) -> Result<Vec<Value>, String> {
    let tools_path = path.with_file_name("tools.json");
    let text = std::fs::read_to_string(&tools_path).map_err(|e| format!("reading {}: {e}", tools_path.display()))?;
    let servers: HashMap<String, Vec<McpTool>> =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", tools_path.display()))?;
    let mut all: Vec<(String, Value)> = definitions(&servers, server_names)
        .into_iter()
        .flat_map(|(server, tools)| tools.into_values().map(move |d| (server.clone(), d)))
        .collect();
    all.sort_by(|(a, x), (b, y)| (a, x["function"]["name"].as_str()).cmp(&(b, y["function"]["name"].as_str())));
    Ok(all.into_iter().map(|(_, d)| d).collect())
}

/// Per server, its tools' OpenAI definitions by their name on the server.
type Definitions = HashMap<String, HashMap<String, Value>>;

fn definitions(servers: &HashMap<String, Vec<McpTool>>, server_names: bool) -> Definitions {
    let mut owners: HashMap<&str, usize> = HashMap::new();
    for tool in servers.values().flatten() {
        *owners.entry(&tool.name).or_default() += 1;
    }
    let mut out = Definitions::new();
    for (server, tools) in servers {
        for tool in tools {
            let name = match owners[tool.name.as_str()] {
                _ if server_names => format!("{server}__{}", tool.name)
                    .replace(|c: char| !c.is_ascii_alphanumeric() && c != '_' && c != '-', "_"),
                1 => tool.name.clone(),
                _ => format!("{server}_{}", tool.name),
            };
            let function = json!({
                "name": name,
                "description": tool.description.clone().unwrap_or_default(),
                "parameters": tool.input_schema,
            });
            let definition = json!({"type": "function", "function": function});
            out.entry(server.clone()).or_default().insert(tool.name.clone(), definition);
        }
    }
    out
}

/// One case per turn: the tools of the session's servers, the turn's
/// calls as the relevant ones, the conversation up to the turn.
fn steps(session: &Session, definitions: &Definitions) -> Result<Vec<Case>, String> {
    let mut tools: Vec<Value> = Vec::new();
    for server in &session.servers {
        let Some(own) = definitions.get(server) else { return Err(format!("no server {server:?} in tools.json")) };
        let mut own: Vec<&Value> = own.values().collect();
        own.sort_by_key(|d| d["function"]["name"].as_str().map(str::to_string));
        tools.extend(own.into_iter().cloned());
    }
    let name_of = |call: &str| -> Result<String, String> {
        let found = session.servers.iter().find_map(|s| definitions.get(s)?.get(call));
        let found = found.ok_or_else(|| format!("no tool {call:?} on the session's servers"))?;
        Ok(found["function"]["name"].as_str().unwrap_or_default().to_string())
    };
    let mut conversation: Vec<Message> = Vec::new();
    let mut cases = Vec::new();
    for (t, turn) in session.turns.iter().enumerate() {
        match &turn.user {
            Some(text) => conversation.push(Message::new("user", text.clone())),
            None if t == 0 => return Err("the first turn needs a user message".into()),
            None => {}
        }
        if turn.calls.is_empty() {
            return Err(format!("turn {} calls no tool", t + 1));
        }
        let relevant: Vec<String> = turn.calls.iter().map(|c| name_of(c)).collect::<Result<_, _>>()?;
        let query = conversation.iter().rev().find(|m| m.is("user")).map(Message::text).unwrap_or_default();
        cases.push(Case {
            query,
            tools: tools.clone(),
            relevant: relevant.clone(),
            conversation: conversation.clone(),
        });
        let calls: Vec<ToolCall> =
            relevant.iter().enumerate().map(|(i, name)| call(&format!("call_{t}_{i}"), name)).collect();
        let ids: Vec<String> = calls.iter().filter_map(|c| c.id.clone()).collect();
        conversation.push(Message { role: Some("assistant".into()), tool_calls: Some(calls), ..Message::default() });
        for id in ids {
            conversation.push(Message { tool_call_id: Some(id), ..Message::new("tool", "done") });
        }
    }
    Ok(cases)
}

fn call(id: &str, name: &str) -> ToolCall {
    let function =
        FunctionCall { name: Some(name.into()), arguments: Some(Value::String("{}".into())), ..Default::default() };
    ToolCall { id: Some(id.into()), kind: Some("function".into()), function: Some(function), ..Default::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::narrowing::Asked;

    /// Each turn is a case whose conversation holds the turns before it;
    /// a name two servers share is prefixed; a bad session says where.
    #[test]
    fn a_session_becomes_one_case_per_turn() {
        let dir = tempfile::tempdir().unwrap();
        let tool = |name: &str| json!({"name": name, "description": format!("{name} things"), "inputSchema": {"type": "object"}});
        let tools = json!({"git": [tool("git_status"), tool("git_commit"), tool("search")], "web": [tool("search")]});
        std::fs::write(dir.path().join("tools.json"), tools.to_string()).unwrap();
        let path = dir.path().join("sessions.jsonl");
        let session = json!({"id": "s", "servers": ["git", "web"], "turns": [
            {"user": "what changed?", "calls": ["git_status"]},
            {"calls": ["search"]},
            {"user": "commit it", "calls": ["git_commit"]}]});
        std::fs::write(&path, session.to_string()).unwrap();
        let cases = load_sessions(&path, false).unwrap();
        assert_eq!(cases.len(), 3);
        assert_eq!(cases[0].tools.len(), 4);
        assert_eq!(cases[1].relevant, vec!["git_search"], "the first server's, prefixed");
        assert_eq!(cases[1].query, "what changed?", "the agent's next call on the same message");
        let asked = Asked::of(&cases[2].conversation);
        assert_eq!((asked.latest.as_str(), asked.earlier.as_str()), ("commit it", "what changed?"));
        assert_eq!(asked.called, vec!["git_status", "git_search"]);
        for (bad, says) in [
            (json!({"id": "b", "servers": ["ftp"], "turns": [{"user": "x", "calls": ["get"]}]}), "no server \"ftp\""),
            (json!({"id": "b", "servers": ["git"], "turns": [{"user": "x", "calls": ["push"]}]}), "no tool \"push\""),
            (json!({"id": "b", "servers": ["git"], "turns": [{"calls": ["git_status"]}]}), "first turn"),
        ] {
            std::fs::write(&path, format!("{session}\n{bad}")).unwrap();
            let error = load_sessions(&path, false).err().unwrap();
            assert!(error.contains("sessions.jsonl:2") && error.contains(says), "{error}");
        }
    }

    /// A task joins openings whose first tool is on different servers and
    /// needs every tool each opening called before its next message.
    #[test]
    fn tasks_join_openings_on_different_servers() {
        let dir = tempfile::tempdir().unwrap();
        let tool = |name: &str| json!({"name": name, "description": name, "inputSchema": {"type": "object"}});
        let tools = json!({"git": [tool("status"), tool("diff"), tool("commit")], "web": [tool("fetch")]});
        std::fs::write(dir.path().join("tools.json"), tools.to_string()).unwrap();
        let path = dir.path().join("sessions.jsonl");
        let sessions = [
            json!({"id": "a", "servers": ["git"], "turns": [
                {"user": "what changed", "calls": ["status"]}, {"calls": ["diff"]},
                {"user": "commit it", "calls": ["commit"]}]}),
            json!({"id": "b", "servers": ["web"], "turns": [{"user": "read example.com!", "calls": ["fetch"]}]}),
            json!({"id": "c", "servers": ["git", "web"], "turns": [{"user": "commit now.", "calls": ["commit"]}]}),
        ];
        std::fs::write(&path, sessions.map(|s| s.to_string()).join("\n")).unwrap();
        let tasks = load_tasks(&path, true, 2).unwrap();
        assert_eq!(tasks.len(), 3, "c pairs with b, the next on another server");
        assert_eq!(tasks[0].query, "what changed. read example.com!");
        assert_eq!(tasks[0].relevant, ["git__status", "git__diff", "web__fetch"]);
        assert_eq!(tasks[2].query, "commit now. read example.com!");
        assert_eq!(tasks[2].tools.len(), 4, "every tool of the sessions' servers, once");
        let error = load_tasks(&path, true, 3).err().unwrap();
        assert!(error.contains("no 3 sessions"), "{error}");
    }
}
