//! Tool search: the model asks for tools it was not given, and toolrouter
//! finds them with route mode's own ranking (BM25, the embedding model,
//! what the memory learned, the tool graph from the tools the conversation
//! called), loads them and asks the model again, within the same client
//! request.
//!
//! A request defers tools (`"defer_loading": true` beside `function`, or a
//! face's own form: the Responses API's deferred functions and namespaces,
//! Anthropic's deferred tools), or route mode narrows tools out while
//! `openai.tool_search` is `narrowed` (or the request asks with
//! `toolrouter.tool_search`): the model is then offered the loaded tools
//! and one more function, [`SEARCH_TOOL`]. When it calls it, each search
//! is answered with the tools found (their names and descriptions), which
//! are added to the tools offered (after the others: the tools block only
//! grows, so an upstream prompt cache survives), and the model is asked
//! again. After `openai.tool_search_rounds` turns of searching it is asked
//! once more without the search, so a model that searches forever stops.
//!
//! On a later turn the tools found earlier stay loaded: the conversation
//! holds the search calls and their results (faces map their own items,
//! `tool_search_call`/`tool_search_output` or `server_tool_use`/
//! `tool_search_tool_result`, onto them), a deferred tool the conversation
//! called is loaded too, and so are the tools [`Loaded`] remembers for
//! the conversation (chat completions' clients never see the searches).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::loaded::Loaded;
use super::narrowing::{Learning, Narrowing};
use super::tools::{ClientTool, ToolList};
use crate::config::{OpenAiConfig, ToolSearch};
use crate::llm::wire::Message;

/// The name of the search function the model is offered.
pub(crate) const SEARCH_TOOL: &str = "tool_search";

/// Longest query read (longer ones are cut, and the model told).
const MAX_QUERY_CHARS: usize = 1_000;
/// Longest regular expression accepted (Anthropic's limit).
const MAX_PATTERN_CHARS: usize = 200;
/// Memory a compiled pattern may take (`regex`'s size limit: a pattern
/// that would build a huge automaton is refused, never run).
const PATTERN_SIZE_LIMIT: usize = 1 << 20;
/// Longest description of a found tool shown to the model.
const DESCRIPTION_CHARS: usize = 300;

/// How the model's searches are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Flavor {
    /// Words: ranked as route mode ranks tools.
    #[default]
    Words,
    /// A regular expression over names and descriptions (Anthropic's
    /// regex tool); the matches ranked as words.
    Regex,
}

/// What a request says of the search (`toolrouter.tool_search`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Wanted {
    /// Nothing: `openai.tool_search` decides.
    #[default]
    Default,
    /// `false`: never offered; deferred tools are offered as any other.
    Off,
    /// `true`, `"words"` or `"regex"`: offered over deferred tools and over
    /// those route mode narrows out.
    On(Flavor),
}

impl Wanted {
    /// `toolrouter.tool_search`'s value, or what is wrong with it.
    pub(crate) fn parse(value: &Value) -> Result<Wanted, &'static str> {
        match value {
            Value::Null => Ok(Wanted::Default),
            Value::Bool(false) => Ok(Wanted::Off),
            Value::Bool(true) => Ok(Wanted::On(Flavor::Words)),
            Value::String(s) if s == "words" => Ok(Wanted::On(Flavor::Words)),
            Value::String(s) if s == "regex" => Ok(Wanted::On(Flavor::Regex)),
            _ => Err("`toolrouter.tool_search` must be true, false, \"words\" or \"regex\""),
        }
    }

    fn off(self, config: &OpenAiConfig) -> bool {
        self == Wanted::Off || config.tool_search == ToolSearch::Off
    }

    fn flavor(self) -> Flavor {
        match self {
            Wanted::On(flavor) => flavor,
            _ => Flavor::Words,
        }
    }
}

/// One search the model made, and what it found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Searched {
    /// The model's call id.
    pub(crate) call_id: String,
    pub(crate) query: String,
    /// Names of the tools it loaded, in the order they were added.
    pub(crate) found: Vec<String>,
    /// Why the search was refused (an empty query, a pattern that does
    /// not compile), as the model was told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

/// The searches of a whole answer, from its `toolrouter` report (a face
/// shows them in its own shape).
pub(crate) fn rounds(answer: &crate::llm::wire::Completion) -> Vec<Searched> {
    let rounds = answer.extra.get("toolrouter").and_then(|r| r.get("tool_search")?.get("rounds"));
    rounds.and_then(|r| Vec::<Searched>::deserialize(r).ok()).unwrap_or_default()
}

/// A request's tool search: what may be found, what is loaded.
pub(crate) struct Search {
    tools: Arc<ToolList>,
    /// Indexes (in the request's tools) of the tools a search may find.
    searchable: Vec<usize>,
    /// Indexes loaded by this request's searches, in order.
    pub(crate) found: Vec<usize>,
    pub(crate) rounds: Vec<Searched>,
    /// Turns of the model that searched.
    turns: usize,
    max_turns: usize,
    results: usize,
    flavor: Flavor,
    /// What to learn when the model calls a tool found by the last search.
    learning: std::sync::Mutex<Option<Learning>>,
    /// Deferred tools earlier turns loaded (offered from the start).
    earlier: Vec<usize>,
    /// Where the conversation's loaded tools are remembered, and its key.
    remember: Option<(Arc<Loaded>, u64)>,
}

/// The search of a request that defers tools, and the tools loaded from
/// the start (indexes in `tools`, in block order: the tools not deferred,
/// then those earlier turns loaded). `None` when nothing is deferred, or
/// the search is off (`openai.tool_search`, `toolrouter.tool_search`).
pub(crate) fn deferred(
    tools: &Arc<ToolList>,
    messages: &[Message],
    wanted: Wanted,
    config: &OpenAiConfig,
    loaded: &Arc<Loaded>,
) -> Option<(Vec<usize>, Search)> {
    if wanted.off(config) || !tools.iter().any(|t| t.deferred) {
        return None;
    }
    let key = Loaded::key(messages, tools);
    let mut keep: Vec<usize> = (0..tools.len()).filter(|&i| !tools[i].deferred).collect();
    let mut earlier = Vec::new();
    for name in loaded.get(key).into_iter().chain(loaded_earlier(messages)) {
        if let Some(i) = tools.iter().position(|t| t.name == name && t.deferred)
            && !keep.contains(&i)
        {
            keep.push(i);
            earlier.push(i);
        }
    }
    let searchable = (0..tools.len()).filter(|i| !keep.contains(i)).collect();
    let mut search = Search::new(tools.clone(), searchable, wanted.flavor(), config);
    search.earlier = earlier;
    search.remember = Some((loaded.clone(), key));
    Some((keep, search))
}

/// The search over the tools route mode narrowed out of `keep`, when
/// `openai.tool_search` is `narrowed` or the request asked for it.
pub(crate) fn narrowed(tools: &Arc<ToolList>, keep: &[usize], wanted: Wanted, config: &OpenAiConfig) -> Option<Search> {
    let on = matches!(wanted, Wanted::On(_)) || config.tool_search == ToolSearch::Narrowed;
    if wanted.off(config) || !on || keep.len() == tools.len() {
        return None;
    }
    let searchable = (0..tools.len()).filter(|i| !keep.contains(i)).collect();
    Some(Search::new(tools.clone(), searchable, wanted.flavor(), config))
}

/// Names of the tools earlier turns loaded, in order: called, or found
/// by a search whose result is in the conversation ([`result_text`]'s
/// form: a face writes a client's own search results so too).
fn loaded_earlier(messages: &[Message]) -> Vec<String> {
    let mut names = Vec::new();
    for message in messages {
        names.extend(message.calls().iter().map(|c| c.name().to_string()));
        if message.is("tool") && message.text().starts_with("{\"found\"") {
            let result = serde_json::from_str::<Value>(&message.text()).unwrap_or_default();
            let listed = result.get("found").and_then(Value::as_array).into_iter().flatten();
            names.extend(listed.filter_map(|t| Some(t.get("name")?.as_str()?.to_string())));
        }
    }
    names
}

/// The text of a search's result as the model reads it (and as a face
/// writes an earlier turn's result back into the conversation): the tools
/// found, by name, with their descriptions when known.
pub(crate) fn result_text(found: &[(&str, Option<&str>)], error: Option<&str>) -> String {
    let listed: Vec<Value> = found
        .iter()
        .map(|(name, description)| match description {
            Some(d) => json!({"name": name, "description": d}),
            None => json!({"name": name}),
        })
        .collect();
    let mut result = json!({"found": listed});
    match error {
        Some(error) => result["error"] = json!(error),
        None if listed.is_empty() => result["note"] = json!("No other tool matches; answer with the tools you have."),
        None => result["note"] = json!("These tools are loaded: call them by name."),
    }
    result.to_string()
}

impl Search {
    fn new(tools: Arc<ToolList>, searchable: Vec<usize>, flavor: Flavor, config: &OpenAiConfig) -> Search {
        Search {
            tools,
            searchable,
            found: Vec::new(),
            rounds: Vec::new(),
            turns: 0,
            max_turns: config.tool_search_rounds,
            results: config.tool_search_results,
            flavor,
            learning: std::sync::Mutex::new(None),
            earlier: Vec::new(),
            remember: None,
        }
    }

    /// Whether the model is still offered the search.
    pub(crate) fn open(&self) -> bool {
        self.turns < self.max_turns
    }

    /// The search function's definition, as the model is offered it.
    pub(crate) fn definition(&self) -> Box<RawValue> {
        let query = match self.flavor {
            Flavor::Words => "What the tool you need should do, in a few words.",
            Flavor::Regex => "A regular expression matched against tool names and descriptions.",
        };
        let definition = json!({"type": "function", "function": {
            "name": SEARCH_TOOL,
            "description": format!(
                "Search {} more tools you were not given. The tools found are loaded: call them by name \
                 from your next turn on.",
                self.searchable.len()
            ),
            "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": query}},
                "required": ["query"]}}});
        serde_json::value::to_raw_value(&definition).expect("a JSON value is JSON")
    }

    /// Whether `message` calls the search.
    pub(crate) fn called(message: &Message) -> bool {
        message.calls().iter().any(|c| c.name() == SEARCH_TOOL)
    }

    /// Answers `message`'s calls when it calls the search: every search
    /// run (what it found loaded), every other call of the turn left for
    /// the model to make again. Returns the messages to add to
    /// `conversation` (the model's own, then one result per call), or
    /// `None` when it does not search or the rounds are spent.
    pub(crate) async fn answer(
        &mut self,
        message: &Message,
        conversation: &[Message],
        narrowing: &Narrowing,
    ) -> Option<Vec<Message>> {
        if !self.open() || !Search::called(message) {
            return None;
        }
        self.turns += 1;
        let mut added = vec![message.clone()];
        for call in message.calls() {
            if call.name() != SEARCH_TOOL {
                let note = "Not executed: this turn also searched for tools. Call it again now.";
                added.push(Message::tool_result(call.id(), note));
                continue;
            }
            let searched = self.search(call.id(), &call.arguments(), conversation, narrowing).await;
            let found: Vec<(&str, Option<&str>)> = searched
                .found
                .iter()
                .map(|name| {
                    let tool = self.tools.iter().find(|t| &t.name == name);
                    (name.as_str(), tool.and_then(|t| description(t)))
                })
                .collect();
            added.push(Message::tool_result(call.id(), result_text(&found, searched.error.as_deref())));
            self.rounds.push(searched);
        }
        if let Some((loaded, key)) = &self.remember {
            let names = self.earlier.iter().chain(&self.found).map(|&i| self.tools[i].name.clone());
            loaded.put(*key, names.collect());
        }
        Some(added)
    }

    /// One search: its query read from `arguments`, the tools it finds.
    pub(crate) async fn search(
        &mut self,
        id: &str,
        arguments: &str,
        conversation: &[Message],
        narrowing: &Narrowing,
    ) -> Searched {
        let mut searched = Searched { call_id: id.to_string(), query: String::new(), found: Vec::new(), error: None };
        let args = serde_json::from_str::<Value>(arguments).unwrap_or_default();
        let query = args.get("query").or_else(|| args.get("pattern")).and_then(Value::as_str).unwrap_or("");
        searched.query = query.chars().take(MAX_QUERY_CHARS).collect();
        if searched.query.trim().is_empty() {
            searched.error = Some("the query is empty: say what the tool should do".into());
            return searched;
        }
        let left: Vec<usize> = self.searchable.iter().copied().filter(|i| !self.found.contains(i)).collect();
        let candidates = match self.flavor {
            Flavor::Words => left,
            Flavor::Regex => match matching(&self.tools, &left, &searched.query) {
                Ok(matched) => matched,
                Err(why) => {
                    searched.error = Some(why);
                    return searched;
                }
            },
        };
        let found = self.rank(&candidates, &searched.query, conversation, narrowing).await;
        self.found.extend(&found);
        searched.found = found.iter().map(|&i| self.tools[i].name.clone()).collect();
        searched
    }

    /// The best of `candidates` for `query` (in the conversation), best
    /// first, by route mode's ranking over the request's whole list (its
    /// index and vectors made once): all of them when they are few.
    async fn rank(
        &mut self,
        candidates: &[usize],
        query: &str,
        conversation: &[Message],
        narrowing: &Narrowing,
    ) -> Vec<usize> {
        if candidates.len() <= self.results {
            return candidates.to_vec();
        }
        // The query is the latest request; the user's words before it the
        // earlier ones; the tools called, the graph's and the memory's cue.
        let mut asked: Vec<Message> =
            conversation.iter().filter(|m| m.is("user") || !m.calls().is_empty()).cloned().collect();
        asked.push(Message::new("user", query));
        let (found, learning) = narrowing.best(&self.tools, &asked, candidates, self.results).await;
        *self.learning.get_mut().unwrap_or_else(|e| e.into_inner()) = learning;
        found
    }

    /// Learns from the final answer which found tool served the last search.
    pub(crate) fn learn(&self, message: &Message) {
        if let Some(learning) = self.learning.lock().unwrap_or_else(|e| e.into_inner()).take() {
            learning.learn(message, &self.tools);
        }
    }

    /// What the answer's `toolrouter` report says of the search.
    pub(crate) fn report(&self) -> Value {
        json!({"searchable": self.searchable.len(), "turns": self.turns, "rounds": self.rounds,
            "stopped": (!self.open()).then_some("openai.tool_search_rounds")})
    }
}

/// The tool's description, cut for the model.
fn description(tool: &ClientTool) -> Option<&str> {
    let text = tool.description();
    let end = text.char_indices().nth(DESCRIPTION_CHARS).map_or(text.len(), |(i, _)| i);
    Some(&text[..end]).filter(|d| !d.is_empty())
}

/// The tools of `candidates` whose name or description `pattern` matches.
fn matching(tools: &ToolList, candidates: &[usize], pattern: &str) -> Result<Vec<usize>, String> {
    if pattern.chars().count() > MAX_PATTERN_CHARS {
        return Err(format!("the pattern is longer than {MAX_PATTERN_CHARS} characters"));
    }
    // `regex` runs in linear time: no pattern is catastrophic, only big.
    let regex = regex::RegexBuilder::new(pattern)
        .case_insensitive(true)
        .size_limit(PATTERN_SIZE_LIMIT)
        .build()
        .map_err(|e| format!("the pattern is not a valid regular expression ({e})"))?;
    let matches = |t: &ClientTool| regex.is_match(&t.name) || regex.is_match(t.description());
    Ok(candidates.iter().copied().filter(|&i| matches(&tools[i])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::tools::client_tool;

    fn tools(deferred: &[(&str, &str)], loaded: &[&str]) -> Arc<ToolList> {
        let make = |name: &str, description: &str, defer: bool| {
            let definition = json!({"type": "function", "defer_loading": defer, "function": {"name": name,
                "description": description, "parameters": {"type": "object", "properties": {}}}});
            Arc::new(client_tool(&definition, true).unwrap())
        };
        let mut all: Vec<Arc<ClientTool>> = loaded.iter().map(|n| make(n, "loaded", false)).collect();
        all.extend(deferred.iter().map(|(n, d)| make(n, d, true)));
        Arc::new(ToolList::from(all))
    }

    fn messages(value: Value) -> Vec<Message> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_search_is_asked_for_in_words_or_refused_clearly() {
        assert_eq!(Wanted::parse(&Value::Null), Ok(Wanted::Default));
        assert_eq!(Wanted::parse(&json!(false)), Ok(Wanted::Off));
        assert_eq!(Wanted::parse(&json!(true)), Ok(Wanted::On(Flavor::Words)));
        assert_eq!(Wanted::parse(&json!("regex")), Ok(Wanted::On(Flavor::Regex)));
        assert!(Wanted::parse(&json!("bm25")).unwrap_err().contains("\"words\" or \"regex\""));
    }

    /// Deferred tools are not offered; tools earlier turns found or called
    /// are, after the loaded ones; the definition never carries `defer_loading`.
    #[test]
    fn earlier_turns_keep_what_they_loaded() {
        let tools = tools(&[("get_weather", "weather"), ("get_time", "time"), ("book", "hotels")], &["sum"]);
        assert!(!tools[1].definition.get().contains("defer_loading"), "{}", tools[1].definition.get());
        let config = OpenAiConfig::default();
        let fresh = messages(json!([{"role": "user", "content": "hi"}]));
        let (keep, search) = deferred(&tools, &fresh, Wanted::Default, &config, &Arc::default()).unwrap();
        assert_eq!((keep, search.searchable.clone()), (vec![0], vec![1, 2, 3]));
        let earlier = messages(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [{"id": "s1", "type": "function", "function": {"name": SEARCH_TOOL, "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "s1", "content": result_text(&[("book", None)], None)},
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
        ]));
        let (keep, search) = deferred(&tools, &earlier, Wanted::Default, &config, &Arc::default()).unwrap();
        assert_eq!(keep, [0, 3, 2], "found, then called, in the conversation's order");
        assert_eq!(search.searchable, [1]);
        assert!(deferred(&tools, &fresh, Wanted::Off, &config, &Arc::default()).is_none(), "asked off");
        let off = OpenAiConfig { tool_search: ToolSearch::Off, ..OpenAiConfig::default() };
        assert!(deferred(&tools, &fresh, Wanted::Default, &off, &Arc::default()).is_none(), "configured off");
        // Narrowed-out tools are searchable when asked for or configured.
        let all = tools.len();
        assert!(narrowed(&tools, &[0, 1], Wanted::Default, &config).is_none());
        assert_eq!(narrowed(&tools, &[0, 1], Wanted::On(Flavor::Words), &config).unwrap().searchable, [2, 3]);
        let narrowing = OpenAiConfig { tool_search: ToolSearch::Narrowed, ..OpenAiConfig::default() };
        assert!(narrowed(&tools, &[0, 1], Wanted::Default, &narrowing).is_some());
        assert!(
            narrowed(&tools, &(0..all).collect::<Vec<_>>(), Wanted::Default, &narrowing).is_none(),
            "none left out"
        );
    }

    /// Every search of a turn is answered, the other calls of the turn are
    /// not run; empty queries and bad patterns are told to the model; the
    /// turns are bounded, then the search is no longer offered.
    #[tokio::test]
    async fn searches_are_answered_and_bounded() {
        let tools = tools(&[("get_weather", "Current weather for a city"), ("get_time", "Time in a city")], &["sum"]);
        let config = OpenAiConfig { tool_search_rounds: 2, ..OpenAiConfig::default() };
        let (_, mut search) = deferred(&tools, &[], Wanted::Default, &config, &Arc::default()).unwrap();
        let narrowing = Narrowing::lexical(Arc::default());
        let turn = messages(json!([{"role": "assistant", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": SEARCH_TOOL, "arguments": "{\"query\": \"weather\"}"}},
            {"id": "b", "type": "function", "function": {"name": SEARCH_TOOL, "arguments": "{\"query\": \"  \"}"}},
            {"id": "c", "type": "function", "function": {"name": "sum", "arguments": "{}"}}]}]))
        .remove(0);
        let added = search.answer(&turn, &[], &narrowing).await.unwrap();
        assert_eq!(added.len(), 4, "the turn, then a result per call");
        assert!(
            added[1].text().contains("get_weather") && added[1].text().contains("Current weather"),
            "{:?}",
            added[1]
        );
        assert!(added[2].text().contains("the query is empty"), "{:?}", added[2]);
        assert!(added[1].text().starts_with("{\"found\""), "the form later turns read: {:?}", added[1]);
        assert!(added[3].text().starts_with("Not executed"), "{:?}", added[3]);
        assert_eq!(search.rounds.len(), 2);
        // Two tools only: a search finds every one left, in the list's order.
        assert_eq!(search.rounds[0].found, ["get_weather", "get_time"]);
        assert!(search.rounds[1].found.is_empty() && search.rounds[1].error.is_some());
        assert!(search.answer(&turn, &[], &narrowing).await.is_some(), "the second turn");
        assert!(!search.open() && search.answer(&turn, &[], &narrowing).await.is_none(), "then no more");
        assert_eq!(search.report()["stopped"], "openai.tool_search_rounds");
        let offered = crate::chat::route::tools_array(&tools, &[0], Some(&search));
        assert!(!offered.get().contains(SEARCH_TOOL), "a spent search is not offered: {}", offered.get());
    }

    /// A client that never sees the searches (chat completions) finds the
    /// tools they loaded on its conversation's next turn; another
    /// conversation does not.
    #[tokio::test]
    async fn a_conversation_keeps_what_its_searches_loaded() {
        let tools = tools(
            &[("book", "Book hotels"), ("get_weather", "Current weather for a city"), ("get_time", "Time")],
            &["sum"],
        );
        let config = OpenAiConfig { tool_search_results: 1, ..OpenAiConfig::default() };
        let loaded: Arc<Loaded> = Arc::default();
        let first = messages(json!([{"role": "user", "content": "Weather in Oslo?"}]));
        let (keep, mut search) = deferred(&tools, &first, Wanted::Default, &config, &loaded).unwrap();
        assert_eq!(keep, [0]);
        let turn = messages(json!([{"role": "assistant", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": SEARCH_TOOL, "arguments": "{\"query\": \"weather\"}"}}]}]))
        .remove(0);
        search.answer(&turn, &first, &Narrowing::lexical(Arc::default())).await.unwrap();
        assert_eq!(search.rounds[0].found, ["get_weather"]);
        let second = messages(json!([{"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": "Sunny."}, {"role": "user", "content": "And tomorrow?"}]));
        let (keep, search) = deferred(&tools, &second, Wanted::Default, &config, &loaded).unwrap();
        assert_eq!((keep, search.searchable), (vec![0, 2], vec![1, 3]));
        let other = messages(json!([{"role": "user", "content": "Book a hotel"}]));
        assert_eq!(deferred(&tools, &other, Wanted::Default, &config, &loaded).unwrap().0, [0]);
    }

    /// A huge query is cut to its first `MAX_QUERY_CHARS` characters and searched.
    #[tokio::test]
    async fn a_huge_query_is_cut() {
        let tools = tools(&[("get_weather", "Current weather"), ("get_time", "Time")], &[]);
        let (_, mut search) =
            deferred(&tools, &[], Wanted::Default, &OpenAiConfig::default(), &Arc::default()).unwrap();
        let query = "weather ".repeat(100_000);
        let arguments = json!({"query": query}).to_string();
        let searched = search.search("a", &arguments, &[], &Narrowing::lexical(Arc::default())).await;
        assert_eq!(searched.query.chars().count(), MAX_QUERY_CHARS);
        assert!(searched.error.is_none() && searched.found.contains(&"get_weather".to_string()), "{searched:?}");
    }

    #[test]
    fn patterns_that_cannot_run_are_refused_never_run() {
        let tools = tools(&[("get_weather", "Current weather"), ("get_time", "Time")], &[]);
        assert_eq!(matching(&tools, &[0, 1], "WEATH.R").unwrap(), [0], "case-insensitive, names and descriptions");
        assert!(matching(&tools, &[0, 1], "((").unwrap_err().contains("not a valid regular expression"));
        assert!(matching(&tools, &[0, 1], &"a".repeat(201)).unwrap_err().contains("longer than 200"));
        // Nested repetition is linear in `regex`; a pattern whose automaton is huge is refused.
        assert!(matching(&tools, &[0, 1], "(a+)+$").is_ok());
        assert!(matching(&tools, &[0, 1], "\\w{1000}\\w{1000}").unwrap_err().contains("not a valid"));
    }
}
