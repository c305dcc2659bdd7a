//! What one MCP session accumulates: the APIs it found (its dynamic tools,
//! bounded, least recently used evicted), the requests it searched for,
//! and the calls it made — recorded as a run in the tool graph when the
//! session ends.

use std::sync::{Arc, Mutex};

use rmcp::model::{Tool, ToolAnnotations};

use crate::catalog::Effect;

use crate::engine::Engine;
use crate::graph::{RunCall, RunRecord};

#[derive(Default)]
struct State {
    /// Function names, least recently used first.
    tools: Vec<String>,
    /// Bumped whenever the tool list changes.
    version: u64,
    tasks: Vec<String>,
    calls: Vec<RunCall>,
    /// The last call that succeeded: the tool graph's cue for the next search.
    last_done: Option<String>,
}

/// One session's state.
pub(crate) struct Session {
    engine: Arc<Engine>,
    state: Mutex<State>,
}

impl Session {
    pub(crate) fn new(engine: Arc<Engine>) -> Session {
        Session { engine, state: Mutex::new(State::default()) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds (or refreshes) tools; returns whether the list changed.
    pub(crate) fn add_tools(&self, functions: impl Iterator<Item = String>) -> bool {
        let max = self.engine.config.mcp.max_session_tools.max(1);
        let mut s = self.state();
        let changed = add_lru(&mut s.tools, functions, max);
        if changed {
            s.version += 1;
        }
        changed
    }

    pub(crate) fn version(&self) -> u64 {
        self.state().version
    }

    pub(crate) fn has_tool(&self, name: &str) -> bool {
        self.state().tools.iter().any(|t| t == name)
    }

    /// The session's tools, with their input schemas, most recent last.
    pub(crate) fn tools(&self) -> Vec<Tool> {
        let names = self.state().tools.clone();
        let catalog = self.engine.catalog();
        names
            .iter()
            .filter_map(|name| catalog.find(name).ok())
            .map(|api| {
                let definition = catalog.function_definition(api);
                let description = definition["function"]["description"].as_str().unwrap_or("").to_string();
                let schema = match api.input_schema() {
                    serde_json::Value::Object(map) => map,
                    _ => serde_json::Map::new(),
                };
                Tool::new(api.function_name.clone(), description, Arc::new(schema))
                    .with_annotations(hints(api.effect()))
            })
            .collect()
    }

    pub(crate) fn note_task(&self, task: &str) {
        let mut s = self.state();
        if !s.tasks.iter().any(|t| t == task) {
            s.tasks.push(task.to_string());
        }
    }

    /// The requests of the session, as one text (context for compression).
    pub(crate) fn tasks(&self) -> String {
        self.state().tasks.join(" ")
    }

    pub(crate) fn record_call(&self, function: &str, ok: bool) {
        let mut s = self.state();
        s.calls.push(RunCall { function: function.to_string(), ok });
        if ok {
            s.last_done = Some(function.to_string());
        }
    }

    /// The function the session last called with success, if any.
    pub(crate) fn last_done(&self) -> Option<String> {
        self.state().last_done.clone()
    }

    /// Records the session's calls as one run (once; later calls start a new one).
    pub(crate) fn flush(&self) {
        let (calls, task) = {
            let mut s = self.state();
            (std::mem::take(&mut s.calls), s.tasks.join(" "))
        };
        if calls.is_empty() {
            return;
        }
        let success = calls.last().is_some_and(|c| c.ok);
        let run = RunRecord {
            id: crate::graph::run_id("mcp-session"),
            task,
            calls,
            success,
            standalone: false,
            at_unix_ms: crate::metrics::unix_ms(),
        };
        // Recording fsyncs and embeds: off the async workers when on one
        // (a session often ends by being dropped inside the runtime).
        let engine = self.engine.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || engine.record_run(run))),
            Err(_) => drop(engine.record_run(run)),
        }
    }
}

/// The MCP annotations that say what a call does (a client may ask its
/// user before a destructive one).
fn hints(effect: Effect) -> ToolAnnotations {
    let mut hints = ToolAnnotations::new();
    hints.read_only_hint = Some(effect == Effect::ReadOnly);
    if effect != Effect::ReadOnly {
        hints.destructive_hint = Some(effect == Effect::Destructive);
    }
    hints
}

/// Moves `functions` to the recent end of `tools` (adding the new ones),
/// then evicts the least recently used beyond `max`. Returns whether the
/// set of tools changed.
fn add_lru(tools: &mut Vec<String>, functions: impl Iterator<Item = String>, max: usize) -> bool {
    let mut before = tools.clone();
    for f in functions {
        tools.retain(|t| *t != f);
        tools.push(f);
    }
    let excess = tools.len().saturating_sub(max);
    tools.drain(..excess);
    let mut after = tools.clone();
    before.sort();
    after.sort();
    before != after
}

impl Drop for Session {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::add_lru;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn least_recently_used_tools_are_evicted() {
        let mut tools = Vec::new();
        assert!(add_lru(&mut tools, names(&["a", "b", "c"]).into_iter(), 3));
        // Refreshing "a" changes the order, not the set.
        assert!(!add_lru(&mut tools, names(&["a"]).into_iter(), 3));
        assert_eq!(tools, ["b", "c", "a"]);
        // "d" evicts "b", the least recently used.
        assert!(add_lru(&mut tools, names(&["d"]).into_iter(), 3));
        assert_eq!(tools, ["c", "a", "d"]);
    }
}
