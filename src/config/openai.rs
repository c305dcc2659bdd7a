//! `[openai]`: the OpenAI-compatible face (its modes, limits and execute
//! runs), with its defaults and checks.

use serde::{Deserialize, Serialize};

/// `openai.max_tools`: tools forwarded to the model in route mode (docs/architecture.md §9).
pub const DEFAULT_MAX_TOOLS: usize = 20;
/// `openai.max_request_tools`: tools one request may carry; more get 400.
pub const DEFAULT_MAX_REQUEST_TOOLS: usize = 5_000;
/// `openai.embed_budget_ms`: time a route request may spend embedding tools
/// never seen before (the rest are embedded in the background). 400: a
/// first-seen list of 50 tools is embedded whole (0.29–0.31 s on 2 cores)
/// and ranked with the embedding at once (docs/benchmarks.md, "Tools, not lists").
pub const DEFAULT_EMBED_BUDGET_MS: u64 = 400;
/// `openai.tool_memory_requests`: requests whose tool calls route mode
/// remembers (about 1.7 kB each with a 384-dim model).
pub const DEFAULT_TOOL_MEMORY_REQUESTS: usize = 20_000;
/// `openai.tool_cache_entries`: tool vectors kept (route mode).
pub const DEFAULT_TOOL_CACHE_ENTRIES: usize = 20_000;
/// `openai.tool_cache_mb`: memory the kept tool vectors may take.
pub const DEFAULT_TOOL_CACHE_MB: usize = 64;
/// `openai.repair_attempts`: times the model is asked to fix invalid tool-call arguments.
pub const DEFAULT_REPAIR_ATTEMPTS: usize = 2;

/// `openai.default_mode`: the mode of a request that names none and sends no `tools`.
pub const DEFAULT_CHAT_MODE: ChatMode = ChatMode::Route;
/// `openai.execute_deadline_ms`: time an execute run may take (below `server.request_timeout_ms`).
pub const DEFAULT_EXECUTE_DEADLINE_MS: u64 = 90_000;
/// `openai.decompose`: execute mode asks the model to split a request into sub-tasks.
pub const DEFAULT_DECOMPOSE: bool = true;
/// `openai.max_runs`: execute runs in flight at once; more get 429.
pub const DEFAULT_MAX_RUNS: usize = 16;
/// `openai.keep_alive_ms`: a streamed answer with nothing to send for this long sends a `: keep-alive` comment.
pub const DEFAULT_KEEP_ALIVE_MS: u64 = 15_000;
/// `openai.traces`: execute traces kept in memory for `GET /v1/traces/{id}` (oldest dropped).
pub const DEFAULT_TRACES_KEPT: usize = 1_000;
/// `openai.responses_ttl_s`: how long a stored response stays usable as
/// `previous_response_id` (30 days, as OpenAI keeps them).
pub const DEFAULT_RESPONSES_TTL_S: u64 = 30 * 24 * 3600;
/// `openai.responses_mb`: the stored responses' conversations kept at most
/// (the oldest dropped first; 0: keep none).
pub const DEFAULT_RESPONSES_MB: usize = 256;

/// `openai.tool_search`: when the model is offered toolrouter's tool search.
pub const DEFAULT_TOOL_SEARCH: ToolSearch = ToolSearch::Deferred;
/// `openai.tool_search_rounds`: searches the model may make for one request
/// (then it is asked once more without the search).
pub const DEFAULT_TOOL_SEARCH_ROUNDS: usize = 3;
/// `openai.tool_search_results`: tools one search loads at most.
pub const DEFAULT_TOOL_SEARCH_RESULTS: usize = 5;

/// When the model is offered a search over tools it was not given
/// (docs/openai.md, "Tool search").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolSearch {
    /// When the request defers tools (`defer_loading`, a face's tool search tool).
    Deferred,
    /// Also whenever route mode narrows tools out: those become searchable.
    Narrowed,
    /// Never: deferred tools are offered as any other.
    Off,
}

/// How a chat-completions request is served (docs/architecture.md §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatMode {
    /// The client's own tools, narrowed and checked; without tools, forwarded as is.
    Route,
    /// Catalog APIs chosen by the planner and retrieval, offered to the model as tools.
    Plan,
    /// toolrouter runs the whole loop and answers.
    Execute,
}

impl ChatMode {
    /// The mode's name, as `x-toolrouter-mode` and `openai.default_mode` say it.
    pub fn name(self) -> &'static str {
        match self {
            ChatMode::Route => "route",
            ChatMode::Plan => "plan",
            ChatMode::Execute => "execute",
        }
    }

    pub fn parse(name: &str) -> Option<ChatMode> {
        match name {
            "route" => Some(ChatMode::Route),
            "plan" => Some(ChatMode::Plan),
            "execute" => Some(ChatMode::Execute),
            _ => None,
        }
    }
}

/// `[openai]`: the OpenAI-compatible face.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpenAiConfig {
    pub max_tools: usize,
    pub max_request_tools: usize,
    pub repair_attempts: usize,
    /// Model names clients may ask for, mapped to the upstream model's
    /// name. Empty: any name, forwarded unchanged.
    pub models: std::collections::BTreeMap<String, String>,
    pub default_mode: ChatMode,
    pub execute_deadline_ms: u64,
    pub decompose: bool,
    pub max_runs: usize,
    pub traces: usize,
    pub keep_alive_ms: u64,
    pub embed_budget_ms: u64,
    pub tool_cache_entries: usize,
    pub tool_cache_mb: usize,
    /// Requests whose tool calls route mode remembers (0: it learns nothing).
    pub tool_memory_requests: usize,
    pub responses_ttl_s: u64,
    pub responses_mb: usize,
    pub tool_search: ToolSearch,
    pub tool_search_rounds: usize,
    pub tool_search_results: usize,
}

impl OpenAiConfig {
    /// The limits are at least 1, as (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        for (key, n) in [
            ("openai.max_tools", self.max_tools as u64),
            ("openai.max_request_tools", self.max_request_tools as u64),
            ("openai.traces", self.traces as u64),
            ("openai.max_runs", self.max_runs as u64),
            ("openai.keep_alive_ms", self.keep_alive_ms),
            ("openai.tool_cache_entries", self.tool_cache_entries as u64),
            ("openai.tool_cache_mb", self.tool_cache_mb as u64),
            ("openai.responses_ttl_s", self.responses_ttl_s),
            ("openai.tool_search_rounds", self.tool_search_rounds as u64),
            ("openai.tool_search_results", self.tool_search_results as u64),
        ] {
            if n == 0 {
                return Err((key.to_string(), "must be at least 1".to_string()));
            }
        }
        Ok(())
    }
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            max_tools: DEFAULT_MAX_TOOLS,
            max_request_tools: DEFAULT_MAX_REQUEST_TOOLS,
            repair_attempts: DEFAULT_REPAIR_ATTEMPTS,
            models: Default::default(),
            default_mode: DEFAULT_CHAT_MODE,
            execute_deadline_ms: DEFAULT_EXECUTE_DEADLINE_MS,
            decompose: DEFAULT_DECOMPOSE,
            max_runs: DEFAULT_MAX_RUNS,
            traces: DEFAULT_TRACES_KEPT,
            keep_alive_ms: DEFAULT_KEEP_ALIVE_MS,
            embed_budget_ms: DEFAULT_EMBED_BUDGET_MS,
            tool_cache_entries: DEFAULT_TOOL_CACHE_ENTRIES,
            tool_cache_mb: DEFAULT_TOOL_CACHE_MB,
            tool_memory_requests: DEFAULT_TOOL_MEMORY_REQUESTS,
            responses_ttl_s: DEFAULT_RESPONSES_TTL_S,
            responses_mb: DEFAULT_RESPONSES_MB,
            tool_search: DEFAULT_TOOL_SEARCH,
            tool_search_rounds: DEFAULT_TOOL_SEARCH_ROUNDS,
            tool_search_results: DEFAULT_TOOL_SEARCH_RESULTS,
        }
    }
}
