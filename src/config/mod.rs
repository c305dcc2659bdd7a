//! Configuration: `config/toolrouter.toml` plus `TOOLROUTER_*` environment
//! overrides, validated at start.
//!
//! The file has sections of keys (`[catalog] paths = [...]`). Every key can
//! be overridden by the environment variable `TOOLROUTER_<SECTION>_<KEY>`
//! (upper case: `TOOLROUTER_ARGS_STRICT=false`); list keys take a TOML
//! array or a comma-separated list. Relative paths in the file are relative
//! to the file's directory; in the environment, to the working directory.
//! Every key has a default (the `DEFAULT_*` constants and the shipped
//! `config/toolrouter.toml`, which a test keeps identical), so no file is
//! needed.
//!
//! Secrets never live in the file: the RapidAPI key comes from
//! `TOOLROUTER_UPSTREAM_RAPIDAPI_KEY` or the file named by
//! `upstream.rapidapi_key_file`, and is never printed. Errors name the key
//! and where its value came from.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::{Table, Value};

mod llm;
mod server;
mod upstream;
pub use llm::*;
pub use server::*;
pub use upstream::*;

/// Prefix of environment overrides.
pub const ENV_PREFIX: &str = "TOOLROUTER_";
/// Environment variable holding the RapidAPI key.
pub const RAPIDAPI_KEY_ENV: &str = "TOOLROUTER_UPSTREAM_RAPIDAPI_KEY";
/// Environment variable naming the config file (also `--config`).
pub const CONFIG_ENV: &str = "TOOLROUTER_CONFIG";
/// Default log filter (`log.level`): a level or a `tracing` filter directive.
pub const DEFAULT_LOG_LEVEL: &str = "info";
/// Default of `args.strict`: reject parameters the API does not declare.
pub const DEFAULT_ARGS_STRICT: bool = true;
/// Default of `args.coerce`: apply the safe coercions before validating.
pub const DEFAULT_ARGS_COERCE: bool = true;

/// Keys that must never be set in the file, with where to put them instead.
const SECRET_KEYS: [(&str, &str, &str, &str); 2] = [
    ("upstream", "rapidapi_key", RAPIDAPI_KEY_ENV, "upstream.rapidapi_key_file"),
    ("llm", "api_key", LLM_KEY_ENV, "llm.api_key_file"),
];
/// Keys holding paths, resolved against the config file's directory.
const PATH_KEYS: [(&str, &str); 9] = [
    ("llm", "api_key_file"),
    ("catalog", "paths"),
    ("catalog", "query_files"),
    ("upstream", "rapidapi_key_file"),
    ("upstream", "replay_dir"),
    ("state", "dir"),
    ("embedding", "model_dir"),
    ("embedding", "onnxruntime"),
    ("embedding", "cache_dir"),
];
/// Texts per `embed` call while indexing (`embedding.batch_size`): bounds memory.
pub const DEFAULT_EMBED_BATCH: usize = 256;
/// Tokens an embedded text is cut to (`embedding.max_length`). all-MiniLM-L6-v2
/// was trained on 128-token sequences; twice that makes indexing ~1.7x slower.
pub const DEFAULT_EMBED_MAX_LENGTH: usize = 128;
/// `graph.a`: the `a` of `f(x)` in the online update (docs/architecture.md §4).
pub const DEFAULT_GRAPH_A: f64 = 0.1;
/// `graph.beta`: the share of static weights kept by online updates (docs/architecture.md §4).
pub const DEFAULT_GRAPH_BETA: f64 = 0.8;
/// `graph.max_calls`: longer trajectories are not used for transitions (docs/architecture.md §4).
pub const DEFAULT_GRAPH_MAX_CALLS: usize = 8;
/// `graph.snapshot_every`: runs recorded between two graph snapshots.
pub const DEFAULT_SNAPSHOT_EVERY: u64 = 100;
/// `planner.max_steps`: steps one planner run may take.
pub const DEFAULT_MAX_STEPS: usize = 8;
/// `planner.max_backtracks`.
pub const DEFAULT_MAX_BACKTRACKS: usize = 8;
/// `planner.max_restarts`.
pub const DEFAULT_MAX_RESTARTS: usize = 2;
/// `planner.deadline_ms`: time one planner run may take.
pub const DEFAULT_PLAN_DEADLINE_MS: u64 = 10_000;
/// `planner.roots`: first steps offered.
pub const DEFAULT_ROOTS: usize = 10;
/// `planner.neighbors`: successors offered per step (K in docs/architecture.md §5).
pub const DEFAULT_NEIGHBORS: usize = 5;
/// `planner.alpha_min`: APIs whose availability learned from runs is lower
/// are not offered (α_min in docs/architecture.md §5; the catalog's prior alone excludes none).
pub const DEFAULT_ALPHA_MIN: f64 = 0.2;
/// `planner.hints`: remembered tasks consulted.
pub const DEFAULT_HINTS: usize = 3;
/// Longest query searched, in characters (`retrieval.max_query_chars`); the rest is cut and reported.
pub const DEFAULT_MAX_QUERY_CHARS: usize = 2000;

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub catalog: CatalogConfig,
    pub args: ArgsConfig,
    pub upstream: UpstreamConfig,
    pub compress: CompressConfig,
    pub state: StateConfig,
    pub embedding: EmbeddingConfig,
    pub retrieval: RetrievalConfig,
    pub graph: GraphConfig,
    pub planner: PlannerConfig,
    pub server: ServerConfig,
    pub mcp: McpConfig,
    pub openai: OpenAiConfig,
    pub llm: LlmConfig,
    pub log: LogConfig,
}

/// `[catalog]`: where APIs come from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CatalogConfig {
    /// ToolBench tool directories, JSONL files, OpenAPI specs or directories
    /// of them. Empty: the embedded example catalog.
    pub paths: Vec<PathBuf>,
    /// Add the embedded examples to a configured catalog too.
    pub include_embedded: bool,
    /// ToolBench query files whose `api_list` adds tools that have no tool file.
    pub query_files: Vec<PathBuf>,
}

/// `[args]`: argument validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArgsConfig {
    pub strict: bool,
    pub coerce: bool,
}

impl Default for ArgsConfig {
    fn default() -> Self {
        ArgsConfig { strict: DEFAULT_ARGS_STRICT, coerce: DEFAULT_ARGS_COERCE }
    }
}

/// `[state]`: where toolrouter keeps what it builds and learns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StateConfig {
    /// Empty: `$XDG_STATE_HOME/toolrouter`, else `~/.local/state/toolrouter`.
    pub dir: PathBuf,
}

impl StateConfig {
    /// The state directory in effect.
    pub fn dir(&self) -> PathBuf {
        if !self.dir.as_os_str().is_empty() {
            return self.dir.clone();
        }
        xdg_dir("XDG_STATE_HOME", ".local/state").join("toolrouter")
    }
}

/// `[embedding]`: the embedding model used for dense retrieval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbeddingConfig {
    /// Directory with `model.onnx` and the tokenizer files. Empty: where
    /// `scripts/fetch-models.sh` puts them (`~/.cache/toolrouter/models/all-MiniLM-L6-v2`).
    pub model_dir: PathBuf,
    /// The ONNX Runtime shared library (>= 1.24). Empty: `ORT_DYLIB_PATH`,
    /// else `~/.cache/toolrouter/models/onnxruntime/libonnxruntime.so`.
    pub onnxruntime: PathBuf,
    /// A fastembed model name (e.g. `BAAI/bge-small-en-v1.5`) downloaded at
    /// start instead of `model_dir`: needs internet and a build with `--features hub`.
    pub model: String,
    /// ONNX Runtime threads; 0: one per core.
    pub threads: usize,
    /// Texts per embedding call while indexing (bounds memory).
    pub batch_size: usize,
    /// Tokens a text is cut to.
    pub max_length: usize,
    /// Embedding cache, keyed by each text's hash. Empty: `~/.cache/toolrouter/embeddings`.
    pub cache_dir: PathBuf,
}

impl Default for EmbeddingConfig {
    fn default() -> Self {
        EmbeddingConfig {
            model_dir: PathBuf::new(),
            onnxruntime: PathBuf::new(),
            model: String::new(),
            threads: 0,
            batch_size: DEFAULT_EMBED_BATCH,
            max_length: DEFAULT_EMBED_MAX_LENGTH,
            cache_dir: PathBuf::new(),
        }
    }
}

impl EmbeddingConfig {
    /// The model directory in effect.
    pub fn model_dir(&self) -> PathBuf {
        if !self.model_dir.as_os_str().is_empty() {
            return self.model_dir.clone();
        }
        models_dir().join("all-MiniLM-L6-v2")
    }

    /// The ONNX Runtime library in effect.
    pub fn onnxruntime(&self) -> PathBuf {
        if !self.onnxruntime.as_os_str().is_empty() {
            return self.onnxruntime.clone();
        }
        match std::env::var_os("ORT_DYLIB_PATH") {
            Some(p) if !p.is_empty() => PathBuf::from(p),
            _ => models_dir().join("onnxruntime/libonnxruntime.so"),
        }
    }

    /// The embedding cache directory in effect.
    pub fn cache_dir(&self) -> PathBuf {
        if !self.cache_dir.as_os_str().is_empty() {
            return self.cache_dir.clone();
        }
        xdg_dir("XDG_CACHE_HOME", ".cache").join("toolrouter/embeddings")
    }
}

/// Where `scripts/fetch-models.sh` puts models: `$TOOLROUTER_MODELS`, else
/// `$XDG_CACHE_HOME/toolrouter/models`, else `~/.cache/toolrouter/models`.
pub fn models_dir() -> PathBuf {
    match std::env::var_os("TOOLROUTER_MODELS") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => xdg_dir("XDG_CACHE_HOME", ".cache").join("toolrouter/models"),
    }
}

/// `$VAR`, else `$HOME/<fallback>`, else `<fallback>` in the working directory.
fn xdg_dir(var: &str, fallback: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(fallback),
    }
}

/// Which ranking signals a search uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// Dense and lexical ranks fused.
    #[default]
    Hybrid,
    /// Embedding similarity only.
    Dense,
    /// BM25 only.
    Lexical,
}

/// How the dense side finds nearest neighbours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DenseIndex {
    /// instant-distance HNSW (approximate).
    #[default]
    Hnsw,
    /// A scan of every vector (exact).
    Exact,
}

/// `[retrieval]`: finding the APIs for a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetrievalConfig {
    pub mode: SearchMode,
    pub dense_index: DenseIndex,
    /// Split multi-part requests into intents and retrieve each too (by
    /// BM25; also by their own vectors with `embed_intents`).
    pub intents: bool,
    /// Embed each intent too (one more batch of the model: about 35 ms
    /// more at p99 on two cores for 0.004 Recall@10, docs/benchmarks.md).
    pub embed_intents: bool,
    /// Build (or rebuild) the index when it is missing, stale or damaged;
    /// otherwise refuse with a message to run `toolrouter index`.
    pub auto_index: bool,
    /// Longest query searched, in characters; the rest is cut and reported.
    pub max_query_chars: usize,
}

impl Default for RetrievalConfig {
    fn default() -> Self {
        RetrievalConfig {
            mode: SearchMode::Hybrid,
            dense_index: DenseIndex::Hnsw,
            intents: true,
            embed_intents: false,
            auto_index: true,
            max_query_chars: DEFAULT_MAX_QUERY_CHARS,
        }
    }
}

/// `[graph]`: the tool graph learned from trajectories and runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GraphConfig {
    /// `a` of `f(x)`: how fast online evaluations move transition weights.
    pub a: f64,
    /// `β`: the share of the static weights and availability kept online.
    pub beta: f64,
    /// Trajectories whose path has more calls are not used for transitions.
    pub max_calls: usize,
    /// Runs recorded between two snapshots of the graph.
    pub snapshot_every: u64,
}

impl Default for GraphConfig {
    fn default() -> Self {
        GraphConfig {
            a: DEFAULT_GRAPH_A,
            beta: DEFAULT_GRAPH_BETA,
            max_calls: DEFAULT_GRAPH_MAX_CALLS,
            snapshot_every: DEFAULT_SNAPSHOT_EVERY,
        }
    }
}

/// `[planner]`: the graph-guided depth-first search over APIs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlannerConfig {
    /// Steps a run may take (failed ones included).
    pub max_steps: usize,
    pub max_backtracks: usize,
    /// Restarts without the roots that led nowhere.
    pub max_restarts: usize,
    /// Time a run may take, in milliseconds.
    pub deadline_ms: u64,
    /// First steps offered (the retrieval ranking's top).
    pub roots: usize,
    /// Successors offered per step (graph neighbours padded from retrieval).
    pub neighbors: usize,
    /// APIs with a lower availability α are never offered.
    pub alpha_min: f64,
    /// Similar remembered tasks whose paths are used as hints.
    pub hints: usize,
}

impl Default for PlannerConfig {
    fn default() -> Self {
        PlannerConfig {
            max_steps: DEFAULT_MAX_STEPS,
            max_backtracks: DEFAULT_MAX_BACKTRACKS,
            max_restarts: DEFAULT_MAX_RESTARTS,
            deadline_ms: DEFAULT_PLAN_DEADLINE_MS,
            roots: DEFAULT_ROOTS,
            neighbors: DEFAULT_NEIGHBORS,
            alpha_min: DEFAULT_ALPHA_MIN,
            hints: DEFAULT_HINTS,
        }
    }
}

/// `[log]`: diagnostics on stderr.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    pub level: String,
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig { level: DEFAULT_LOG_LEVEL.to_string(), format: LogFormat::Text }
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// A secret value: never printed, never logged.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The value, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Where a value came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    File(PathBuf),
    Env(String),
    /// Neither: the built-in default.
    Default,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(p) => write!(f, "in {}", p.display()),
            Origin::Env(var) => write!(f, "set by {var}"),
            Origin::Default => f.write_str("its default"),
        }
    }
}

/// A configuration that cannot be used. The CLI exits with code 2.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {} is not valid TOML: {message}", path.display())]
    Syntax { path: PathBuf, message: String },
    #[error("config key `{key}` ({origin}): {message}")]
    Key { key: String, origin: Origin, message: String },
}

impl Config {
    /// Loads `file` (or only defaults), applies the process environment and validates.
    pub fn load(file: Option<&Path>) -> Result<(Config, Vec<String>), ConfigError> {
        Config::load_with_env(file, std::env::vars())
    }

    /// [`Config::load`] with an explicit environment (for tests). Returns
    /// the config and warnings (unknown `TOOLROUTER_*` variables).
    pub fn load_with_env(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<(Config, Vec<String>), ConfigError> {
        let mut table = match file {
            Some(path) => read_file(path)?,
            None => Table::new(),
        };
        let mut origins: Vec<(String, Origin)> = Vec::new();
        let mut warnings = Vec::new();
        let defaults = Value::try_from(Config::default()).expect("defaults serialize");
        let defaults = defaults.as_table().expect("config is a table");
        let mut env: Vec<(String, String)> = env.into_iter().filter(|(k, _)| k.starts_with(ENV_PREFIX)).collect();
        env.sort();
        for (var, raw) in env {
            if var == RAPIDAPI_KEY_ENV || var == LLM_KEY_ENV || var == CONFIG_ENV {
                continue;
            }
            let Some((section, key, default)) = find_key(defaults, &var[ENV_PREFIX.len()..]) else {
                warnings.push(format!("ignoring unknown environment variable {var} (no such config key)"));
                continue;
            };
            let origin = Origin::Env(var.clone());
            let value = env_value(&raw, default).map_err(|message| ConfigError::Key {
                key: format!("{section}.{key}"),
                origin: origin.clone(),
                message,
            })?;
            let slot = table.entry(section.clone()).or_insert_with(|| Value::Table(Table::new()));
            if let Value::Table(t) = slot {
                t.insert(key.clone(), value);
            }
            origins.push((format!("{section}.{key}"), origin));
        }
        let origin_of = |key: &str| {
            origins
                .iter()
                .find(|(k, _)| key.starts_with(k.as_str()))
                .map(|(_, o)| o.clone())
                .unwrap_or_else(|| file.map_or(Origin::Default, |f| Origin::File(f.to_path_buf())))
        };
        let config: Config = serde_path_to_error::deserialize(Value::Table(table)).map_err(|e| {
            let key = e.path().to_string();
            ConfigError::Key { origin: origin_of(&key), key, message: e.into_inner().to_string() }
        })?;
        config.validate(&origin_of)?;
        Ok((config, warnings))
    }

    /// Checks what types alone cannot: paths exist, filters parse, hosts are well-formed.
    fn validate(&self, origin_of: &dyn Fn(&str) -> Origin) -> Result<(), ConfigError> {
        let fail =
            |key: &str, message: String| ConfigError::Key { key: key.to_string(), origin: origin_of(key), message };
        for (key, paths) in [("catalog.paths", &self.catalog.paths), ("catalog.query_files", &self.catalog.query_files)]
        {
            for (i, p) in paths.iter().enumerate() {
                if !p.exists() {
                    return Err(fail(&format!("{key}[{i}]"), format!("{} does not exist", p.display())));
                }
            }
        }
        for (key, path) in
            [("embedding.model_dir", &self.embedding.model_dir), ("embedding.onnxruntime", &self.embedding.onnxruntime)]
        {
            if !path.as_os_str().is_empty() && !path.exists() {
                return Err(fail(key, format!("{} does not exist", path.display())));
            }
        }
        if !(0.0..=1.0).contains(&self.graph.beta) {
            return Err(fail("graph.beta", format!("must be between 0 and 1, got {}", self.graph.beta)));
        }
        if !(self.graph.a > 0.0 && self.graph.a.is_finite()) {
            return Err(fail("graph.a", format!("must be a positive number, got {}", self.graph.a)));
        }
        if !(0.0..=1.0).contains(&self.planner.alpha_min) {
            return Err(fail("planner.alpha_min", format!("must be between 0 and 1, got {}", self.planner.alpha_min)));
        }
        for (key, n) in [
            ("planner.max_steps", self.planner.max_steps),
            ("planner.deadline_ms", self.planner.deadline_ms as usize),
            ("planner.roots", self.planner.roots),
            ("planner.neighbors", self.planner.neighbors),
            ("graph.max_calls", self.graph.max_calls),
            ("graph.snapshot_every", self.graph.snapshot_every as usize),
            ("embedding.batch_size", self.embedding.batch_size),
            ("embedding.max_length", self.embedding.max_length),
            ("retrieval.max_query_chars", self.retrieval.max_query_chars),
        ] {
            if n == 0 {
                return Err(fail(key, "must be at least 1".to_string()));
            }
        }
        for (i, p) in self.catalog.query_files.iter().enumerate() {
            if !p.is_file() {
                return Err(fail(&format!("catalog.query_files[{i}]"), format!("{} is not a file", p.display())));
            }
        }
        tracing_subscriber::EnvFilter::try_new(&self.log.level)
            .map_err(|e| fail("log.level", format!("{:?} is not a level or filter: {e}", self.log.level)))?;
        for (i, host) in self.upstream.allowed_hosts.iter().enumerate() {
            let bare = host.strip_prefix("*.").unwrap_or(host);
            if url::Url::parse(&format!("http://{bare}/")).ok().and_then(|u| u.host_str().map(str::to_string)).is_none()
                || bare.contains('/')
            {
                return Err(fail(
                    &format!("upstream.allowed_hosts[{i}]"),
                    format!("{host:?} is not a host, host:port or *.domain"),
                ));
            }
        }
        if let Some((key, message)) = self.llm.problems() {
            return Err(fail(&key, message));
        }
        self.llm_key().map_err(|message| fail("llm.api_key_file", message))?;
        if let Some((key, message)) = self.server.problems() {
            return Err(fail(&key, message));
        }
        for (key, n) in [
            ("mcp.max_session_tools", self.mcp.max_session_tools),
            ("mcp.page_size", self.mcp.page_size),
            ("openai.max_tools", self.openai.max_tools),
            ("openai.max_request_tools", self.openai.max_request_tools),
            ("openai.traces", self.openai.traces),
            ("openai.max_runs", self.openai.max_runs),
            ("openai.keep_alive_ms", self.openai.keep_alive_ms as usize),
        ] {
            if n == 0 {
                return Err(fail(key, "must be at least 1".to_string()));
            }
        }
        if self.openai.execute_deadline_ms == 0 || self.openai.execute_deadline_ms >= self.server.request_timeout_ms {
            return Err(fail(
                "openai.execute_deadline_ms",
                format!(
                    "must be above 0 and below server.request_timeout_ms ({}), got {}",
                    self.server.request_timeout_ms, self.openai.execute_deadline_ms
                ),
            ));
        }
        if let Some((key, message)) = self.upstream.problems() {
            return Err(fail(&key, message));
        }
        if self.compress.budget < 64 {
            return Err(fail(
                "compress.budget",
                format!("must be at least 64 characters, got {}", self.compress.budget),
            ));
        }
        self.rapidapi_key().map_err(|message| fail("upstream.rapidapi_key_file", message))?;
        Ok(())
    }

    /// The RapidAPI key: the environment variable, else the key file, else none.
    pub fn rapidapi_key(&self) -> Result<Option<Secret>, String> {
        secret(RAPIDAPI_KEY_ENV, &self.upstream.rapidapi_key_file)
    }

    /// The model API key: the environment variable, else the key file, else none.
    pub fn llm_key(&self) -> Result<Option<Secret>, String> {
        secret(LLM_KEY_ENV, &self.llm.api_key_file)
    }

    /// Where the RapidAPI key comes from, without revealing it.
    pub fn rapidapi_key_source(&self) -> String {
        secret_source(RAPIDAPI_KEY_ENV, &self.upstream.rapidapi_key_file)
    }

    /// Where the model API key comes from, without revealing it.
    pub fn llm_key_source(&self) -> String {
        secret_source(LLM_KEY_ENV, &self.llm.api_key_file)
    }
}

/// A secret from the environment variable `env`, else from `file`, else none.
fn secret(env: &str, file: &Path) -> Result<Option<Secret>, String> {
    if let Ok(key) = std::env::var(env)
        && !key.trim().is_empty()
    {
        return Ok(Some(Secret(key.trim().to_string())));
    }
    if file.as_os_str().is_empty() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    match text.trim() {
        "" => Err(format!("{} is empty", file.display())),
        key => Ok(Some(Secret(key.to_string()))),
    }
}

fn secret_source(env: &str, file: &Path) -> String {
    match secret(env, file) {
        Ok(Some(_)) if std::env::var(env).is_ok_and(|k| !k.trim().is_empty()) => format!("set (from {env})"),
        Ok(Some(_)) => format!("set (from {})", file.display()),
        Ok(None) => "not set".to_string(),
        Err(e) => format!("unreadable: {e}"),
    }
}

fn read_file(path: &Path) -> Result<Table, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
    let mut table: Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Syntax { path: path.to_path_buf(), message: e.to_string() })?;
    for (section, key, env, instead) in SECRET_KEYS {
        if table.get(section).and_then(|s| s.get(key)).is_some() {
            return Err(ConfigError::Key {
                key: format!("{section}.{key}"),
                origin: Origin::File(path.to_path_buf()),
                message: format!("secrets cannot be set in the config file; use {env} or `{instead}`"),
            });
        }
    }
    let base = path.parent().unwrap_or(Path::new(""));
    for (section, key) in PATH_KEYS {
        if let Some(value) = table.get_mut(section).and_then(|s| s.get_mut(key)) {
            resolve_paths(value, base);
        }
    }
    Ok(table)
}

/// Makes relative path strings (alone or in a list) relative to `base`.
fn resolve_paths(value: &mut Value, base: &Path) {
    match value {
        Value::String(s) if !s.is_empty() && Path::new(s.as_str()).is_relative() => {
            *s = base.join(&*s).to_string_lossy().into_owned();
        }
        Value::Array(items) => items.iter_mut().for_each(|v| resolve_paths(v, base)),
        _ => {}
    }
}

/// Maps `CATALOG_QUERY_FILES` to (`catalog`, `query_files`, default value).
fn find_key<'a>(defaults: &'a Table, rest: &str) -> Option<(String, String, &'a Value)> {
    let rest = rest.to_ascii_lowercase();
    defaults.iter().find_map(|(section, keys)| {
        let key = rest.strip_prefix(section.as_str())?.strip_prefix('_')?;
        let default = keys.as_table()?.get(key)?;
        Some((section.clone(), key.to_string(), default))
    })
}

/// Parses an environment value as the type of the key's default.
fn env_value(raw: &str, default: &Value) -> Result<Value, String> {
    let raw_trim = raw.trim();
    match default {
        Value::Boolean(_) => match raw_trim.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(Value::Boolean(true)),
            "false" | "0" | "no" | "off" => Ok(Value::Boolean(false)),
            _ => Err(format!("expected true or false, got {raw:?}")),
        },
        Value::Integer(_) => {
            raw_trim.parse().map(Value::Integer).map_err(|_| format!("expected an integer, got {raw:?}"))
        }
        Value::Float(_) => raw_trim.parse().map(Value::Float).map_err(|_| format!("expected a number, got {raw:?}")),
        Value::Array(_) if raw_trim.starts_with('[') => {
            let table: Table = format!("v = {raw_trim}").parse().map_err(|e| format!("not a TOML array: {e}"))?;
            Ok(table["v"].clone())
        }
        Value::Array(_) => Ok(Value::Array(
            raw.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| Value::String(s.to_string())).collect(),
        )),
        _ => Ok(Value::String(raw.to_string())),
    }
}

#[cfg(test)]
mod tests;
