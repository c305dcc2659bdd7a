//! The chat core: a typed chat request in, a typed answer out, in no
//! protocol's shape. Every face that speaks chat (chat completions, the
//! Responses API, Anthropic's Messages) decodes its request into a
//! [`ChatRequest`] ([`ChatCore::request`]), has it answered
//! ([`ChatCore::answer`]: a whole [`Completion`], a stream of [`Chunk`]s,
//! or a [`ChatError`]) and encodes that in its own format; no JSON text or
//! HTTP response passes between a face and the core.
//!
//! The core owns the three modes and their decision records:
//!
//! * route ([`route`], streamed by [`stream`]): the client's tools
//!   ([`tools`]) narrowed to the `openai.max_tools` most relevant, the
//!   request sent to the upstream model, returned tool calls checked
//!   against the original schemas and repaired through the model;
//! * plan ([`plan`]): the planner's and retrieval's catalog APIs offered as
//!   the tools, then answered as route mode is;
//! * execute ([`execute`]): toolrouter runs the request itself and answers,
//!   its trace kept in [`traces`].
//!
//! A route request without `tools` is forwarded unchanged.

pub mod error;
pub mod execute;
pub(crate) mod loaded;
pub mod narrowing;
pub mod plan;
pub mod request;
pub mod route;
pub mod search;
pub mod stream;
pub mod tools;
pub mod traces;
mod unparsable;

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::Stream;
use tracing::Instrument;

use crate::config::{Config, OpenAiConfig};
use crate::engine::Engine;
use crate::engine::loading::{Loading, NotReady};
use crate::llm::ChatModel;
use crate::llm::wire::{Chunk, Completion, RequestBody};
use crate::policy::{Facts, Policies};
use crate::retrieval::Embedder;
use crate::retrieval::tool_list::ToolListRanker;
use crate::retrieval::tool_memory::ToolMemory;
use crate::retrieval::tool_vectors::ToolVectors;
pub(crate) use error::ChatError;
use execute::Runner;
use narrowing::Narrowing;
pub(crate) use request::{ChatRequest, Mode};
use tools::{ClientTool, ToolLists};

/// A streamed answer: items in order, ended by the last chunk or by an
/// error (nothing follows an error).
pub(crate) type ChatStream = Pin<Box<dyn Stream<Item = Result<Item, ChatError>> + Send>>;

/// One item of a streamed answer.
// Chunks are nearly every item: boxing them would allocate once more per
// chunk to save the few searches some bytes.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Item {
    /// A chat chunk of the answer.
    Chunk(Chunk),
    /// A search the model made, answered by toolrouter (before the chunks
    /// of the turn that follows it).
    Searched(search::Searched),
}

/// What the core answered.
pub(crate) enum Answer {
    /// A whole chat completion, toolrouter's report in its `toolrouter` field.
    Whole(Box<Completion>),
    /// The answer's chunks as they come (the last with the `toolrouter`
    /// report, then a usage chunk when the request asked for one).
    Streamed(ChatStream),
}

/// What answering chat requests needs: the upstream model, route mode's
/// ranker and the client tool lists seen before, execute mode's runner,
/// and the engine once it is loaded.
pub struct ChatCore {
    config: OpenAiConfig,
    /// The upstream model (`None` without `llm.base_url`).
    llm: Option<Arc<dyn ChatModel>>,
    /// Execute runs: the model, the cap on runs in flight, the traces
    /// (`None` without a model).
    runner: Option<Arc<Runner>>,
    /// Route mode's tool-list indexes, vectors and memory.
    ranker: Arc<ToolListRanker>,
    /// Client tool lists parsed before.
    tool_lists: ToolLists,
    /// The embedding model route mode uses when no engine is loaded (the
    /// overhead bench's server).
    route_embedder: OnceLock<Arc<Embedder>>,
    /// The replicas route mode shares tool vectors and memory with.
    cluster: Option<Arc<crate::cluster::Cluster>>,
    /// The engine, loading or loaded (unset in a server without one).
    loading: OnceLock<Arc<Loading>>,
    /// The tools conversations' searches loaded.
    loaded: Arc<loaded::Loaded>,
    /// The policies of the configuration the process started with, for
    /// the seconds before the engine (which holds the reloaded ones) is loaded.
    startup_policies: Policies,
}

impl ChatCore {
    /// The core of `config`, answering with `llm`; route mode's learning
    /// and execute mode's traces shared through `cluster`, if any.
    pub(crate) fn new(
        config: &Config,
        llm: Option<Arc<dyn ChatModel>>,
        cluster: Option<Arc<crate::cluster::Cluster>>,
    ) -> ChatCore {
        let runner = llm.clone().map(|llm| Arc::new(Runner::new(llm, config, cluster.clone())));
        ChatCore {
            config: config.openai.clone(),
            llm,
            runner,
            ranker: route_ranker(config, cluster.as_ref()),
            tool_lists: ToolLists::new(config.args.strict),
            route_embedder: OnceLock::new(),
            cluster,
            loading: OnceLock::new(),
            loaded: Arc::default(),
            startup_policies: Policies::of(&config.access).unwrap_or_default(),
        }
    }

    /// Answers with the engine `loading` loads, once it is loaded.
    pub(crate) fn set_loading(&self, loading: Arc<Loading>) {
        let _ = self.loading.set(loading);
    }

    /// Route mode ranks with `embedder` while no engine is loaded.
    pub fn set_route_embedder(&self, embedder: Arc<Embedder>) {
        let _ = self.route_embedder.set(embedder);
    }

    /// The upstream model, if one is configured.
    pub(crate) fn model(&self) -> Option<&Arc<dyn ChatModel>> {
        self.llm.as_ref()
    }

    /// Route mode's ranker (its gauges are on `/metrics`).
    pub(crate) fn ranker(&self) -> &Arc<ToolListRanker> {
        &self.ranker
    }

    /// The kept traces of execute runs and decisions (none without a model).
    pub(crate) fn traces(&self) -> Option<&traces::Traces> {
        self.runner.as_ref().map(|r| &r.traces)
    }

    /// The engine being loaded (unset in a server without one, such as
    /// the overhead bench's).
    pub(crate) fn loading(&self) -> Option<&Arc<Loading>> {
        self.loading.get()
    }

    /// The loaded engine, or why there is none yet.
    pub(crate) fn engine(&self) -> Result<&Arc<Engine>, NotReady> {
        let Some(loading) = self.loading.get() else {
            return Err(NotReady::Failed("this server has no engine".into()));
        };
        loading.engine()
    }

    /// Checks a request's fields and reads its tools; `header_mode`: the
    /// mode a face's header names; `budget`: the time the request's model
    /// requests may take, from now.
    pub(crate) fn request(
        &self,
        body: RequestBody,
        header_mode: Option<&str>,
        budget: Duration,
    ) -> Result<ChatRequest, ChatError> {
        request::check(body, &self.config, header_mode, &self.tool_lists, budget)
    }

    /// Answers `request` in its mode, for `client` (the key's name: what
    /// it decides is kept for that key's eyes).
    pub(crate) async fn answer(&self, request: ChatRequest, client: Option<String>) -> Result<Answer, ChatError> {
        let llm = self.llm.clone().ok_or(ChatError::Model(crate::llm::LlmError::NotConfigured))?;
        let span = tracing::info_span!(target: crate::telemetry::TARGET, "chat",
            "otel.name" = format!("{} {}", request.mode.name(), request.model), "gen_ai.operation.name" = "chat",
            "gen_ai.request.model" = request.model.as_str(), "toolrouter.mode" = request.mode.name(),
            "toolrouter.tools.offered" = request.tools.len() as i64, "gen_ai.request.stream" = request.stream);
        self.answer_in_mode(request, client, llm).instrument(span).await
    }

    async fn answer_in_mode(
        &self,
        mut request: ChatRequest,
        client: Option<String>,
        llm: Arc<dyn ChatModel>,
    ) -> Result<Answer, ChatError> {
        if request.mode == Mode::Execute
            && let Some(runner) = &self.runner
        {
            let engine = self.engine().map_err(ChatError::NotReady)?.clone();
            return execute::respond(engine, runner.clone(), request, client, &self.config).await;
        }
        self.restrict(&mut request, client.as_deref())?;
        let mut planned = None;
        if request.mode == Mode::Plan {
            let engine = self.engine().map_err(ChatError::NotReady)?;
            let span = tracing::info_span!(target: crate::telemetry::TARGET, "plan");
            let offer = plan::offer(engine, &request, self.config.max_tools, client.as_deref());
            let (tools, steps) = offer.instrument(span).await?;
            request.tools = Arc::new(tools.into());
            planned = Some(steps);
        }
        let narrowing = self.narrowing_for(client);
        if request.stream {
            let chunks = stream::stream(request, llm, self.config.clone(), narrowing, planned).await?;
            return Ok(Answer::Streamed(chunks));
        }
        let answer = route::complete(request, llm.as_ref(), &self.config, &narrowing, planned).await?;
        Ok(Answer::Whole(Box::new(answer)))
    }

    /// Drops the tools a request carries that `client`'s policy does not
    /// allow (they are never shown to the model); a `tool_choice` forcing
    /// one is refused.
    fn restrict(&self, request: &mut ChatRequest, client: Option<&str>) -> Result<(), ChatError> {
        let policy = match self.engine() {
            Ok(engine) => engine.policy(client),
            Err(_) => self.startup_policies.governing(client),
        };
        let Some(policy) = policy else { return Ok(()) };
        let allowed = |name: &str| policy.allows(&Facts::client(name));
        if let Some(forced) = request.forced.as_deref().filter(|f| !allowed(f)) {
            return Err(ChatError::NotAllowed(format!(
                "`tool_choice` names `{forced}`, which is not allowed for this key (policy `{}`)",
                policy.name
            )));
        }
        if request.tools.iter().all(|t| allowed(&t.name)) {
            return Ok(());
        }
        let kept: Vec<Arc<ClientTool>> = request.tools.iter().filter(|t| allowed(&t.name)).cloned().collect();
        // The body too: a list kept whole is sent on as the client wrote it.
        let all: Vec<usize> = (0..kept.len()).collect();
        request.body.set_raw("tools", route::tools_array(&kept, &all, None));
        request.tools = Arc::new(kept.into());
        Ok(())
    }

    /// Route mode's narrowing with this core's ranker and, once the engine
    /// is loaded, its embedding model and tool graph.
    pub(crate) fn narrowing(&self) -> Narrowing {
        let mut narrowing = Narrowing {
            embedder: self.route_embedder.get().cloned(),
            embed_budget: Duration::from_millis(self.config.embed_budget_ms),
            cluster: self.cluster.clone(),
            memory_bound: self.config.tool_memory_requests,
            loaded: self.loaded.clone(),
            ..Narrowing::lexical(self.ranker.clone())
        };
        if let Ok(engine) = self.engine() {
            let engine = engine.clone();
            narrowing.embedder = engine.embedder();
            narrowing.weight = Arc::new(move |from: &str, to: &str| engine.transition_weight(from, to));
        }
        narrowing
    }

    /// [`ChatCore::narrowing`] keeping its decisions (tools narrowed out,
    /// plans) for the console, visible to `client`, as execute runs are.
    fn narrowing_for(&self, client: Option<String>) -> Narrowing {
        let mut narrowing = self.narrowing();
        if let Some(runner) = &self.runner {
            let runner = runner.clone();
            narrowing.record = Some(Arc::new(move |decision| {
                let id = format!("{:016x}", fastrand::u64(..));
                runner.traces.insert(id.clone(), client.clone(), decision);
                id
            }));
        }
        narrowing
    }
}

/// Route mode's ranker, its tool vectors kept in the state directory
/// (`tool-vectors/`) within `openai.tool_cache_*`, what the model called
/// for which request in `tool-memory/` and, with a cluster,
/// shared with the other replicas (written from the runtime of the
/// caller, when there is one).
fn route_ranker(config: &Config, cluster: Option<&Arc<crate::cluster::Cluster>>) -> Arc<ToolListRanker> {
    let bounds = crate::retrieval::tool_vectors::Bounds {
        entries: config.openai.tool_cache_entries,
        bytes: config.openai.tool_cache_mb << 20,
    };
    let vectors = ToolVectors::new(Some(config.state.dir().join("tool-vectors")), bounds);
    let memory = ToolMemory::new(Some(config.state.dir().join("tool-memory")), config.openai.tool_memory_requests);
    let ranker = Arc::new(ToolListRanker::new(vectors, memory));
    if let (Some(cluster), Ok(runtime)) = (cluster, tokio::runtime::Handle::try_current()) {
        let (cluster, ttl) = (cluster.clone(), Duration::from_secs(config.cluster.tool_vectors_ttl_s));
        let (shared, handle) = (cluster.clone(), runtime.clone());
        ranker.on_embedded(Arc::new(move |entries| {
            let cluster = shared.clone();
            handle.spawn(async move { cluster.share_tool_vectors(&entries, ttl).await });
        }));
        if config.openai.tool_memory_requests > 0 {
            runtime.spawn(follow_tool_memory(cluster, Arc::downgrade(&ranker)));
        }
    }
    ranker
}

/// Keeps what the other replicas' route mode learned: the shared stream
/// from its start, then every second, while the ranker lives.
async fn follow_tool_memory(cluster: Arc<crate::cluster::Cluster>, ranker: std::sync::Weak<ToolListRanker>) {
    let mut position = "0".to_string();
    while ranker.strong_count() > 0 {
        let entries = cluster.read_called(&position).await.unwrap_or_default();
        let Some(last) = entries.last().map(|(id, _)| id.clone()) else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let Some(ranker) = ranker.upgrade() else { return };
        let called: Vec<_> = entries.into_iter().filter_map(|(_, c)| c).collect();
        // Keeping an entry appends to the memory's journal (fsync).
        let _ = tokio::task::spawn_blocking(move || called.iter().filter(|c| ranker.learn_shared(c)).count()).await;
        position = last;
    }
}
