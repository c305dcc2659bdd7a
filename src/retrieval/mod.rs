//! Retrieval: finding the few APIs, out of the whole catalog, that could
//! serve a request (docs/architecture.md §3).
//!
//! Two signals over each API's documents ([`document`]: the embedded one
//! with its tool's description, the BM25 one without): dense cosine
//! similarity of fastembed embeddings ([`embedder`], [`dense`]: exact scan
//! or instant-distance HNSW) and BM25 ([`bm25`]). A search fuses them with
//! weighted reciprocal rank fusion: each ranked list adds
//! `weight / (RRF_K + rank)` to a document's score. Rank fusion needs no
//! calibration between cosine and BM25 scales, which differ per query; the
//! weights were tuned on one development set and checked on the others
//! (docs/benchmarks.md). On top of that:
//!
//! * APIs of one tool are needed together: tools are also ranked by their
//!   whole text (BM25 over a document per tool), and each API gets its
//!   tool's fused score times [`TOOL_WEIGHT`];
//! * requests asking for several things are split into intents
//!   ([`intents`]), each retrieved on its own; their scores add to the
//!   whole query's (weighted [`INTENT_WEIGHT`]) and each intent's best hit
//!   is kept within the first [`RESERVED_TOP`];
//! * APIs the request names ([`names`]: a function name, or a specific
//!   identifier-like API name such as `getUserProfile`) rank first, then
//!   the best API of each tool it calls by name ("the News Sentiment API"),
//!   whose APIs also get [`NAMED_TOOL_WEIGHT`] as a first place in one
//!   more tool-level list.
//!
//! Route mode ranks a client's own tool list with the same signals
//! ([`tool_list`]).
//!
//! The index (vectors, HNSW graph, BM25 postings) is built once, stored in
//! the state directory ([`index_files`]) and loaded at start; embeddings are
//! cached by text hash ([`cache`]), so rebuilding after a catalog change
//! embeds only what changed.

pub(crate) mod bm25;
mod build;
pub(crate) mod cache;
mod carry;
pub(crate) mod dense;
pub(crate) mod document;
pub mod embedder;
mod fusion;
pub mod index_files;
pub(crate) mod intents;
pub mod names;
mod options;
mod progress;
mod results;
pub(crate) mod tool_list;
pub(crate) mod tool_memory;
pub(crate) mod tool_vectors;
mod tools;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

pub use build::BuildReport;
pub use embedder::{EmbedError, Embedder};
pub use options::*;
pub(crate) use progress::Progress;
pub(crate) use results::{Hit, SearchResults, Signal};

use crate::catalog::{ApiId, Catalog, names::category_dir_name, names::standardize};
use crate::config::{Config, DenseIndex, SearchMode};
use fusion::{add_ranks, first, is_identifier, reserve, signals, sorted};

/// An index of BM25 alone, built in memory in about a second (never
/// stored, so it is never taken for a full index).
fn lexical_index(catalog: &Catalog, documents: &document::Documents) -> index_files::Index {
    index_files::Index {
        dense: dense::Dense::new(1, Vec::new(), None),
        bm25: bm25::Bm25::build(&documents.lexical),
        tools: tools::tool_bm25(catalog),
    }
}

/// Why retrieval cannot run.
#[derive(Debug, thiserror::Error)]
pub enum RetrievalError {
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error("{problem}; run `toolrouter index` to build it (retrieval.auto_index is off)")]
    NoIndex { problem: index_files::Unusable },
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    #[error("the query is empty")]
    EmptyQuery,
}

/// Restricts a search to one category or one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    /// A category, in any spelling (`News, Media`, `news_media`).
    pub category: Option<String>,
    /// A tool, by original or standardized name.
    pub tool: Option<String>,
    /// The APIs a caller's policy allows, by id ([`crate::policy::Policy::mask`]);
    /// `None`: every API.
    pub allowed: Option<Arc<Vec<bool>>>,
}

/// A query made ready for ranking: cut to length, split into intents, embedded.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The whole query first, then its intents.
    pub texts: Vec<String>,
    /// One vector per text when dense retrieval is on; empty otherwise.
    pub vectors: Vec<Vec<f32>>,
    pub cut_chars: usize,
    pub embed_ms: f64,
    /// APIs that served similar requests before (long-term memory), with
    /// the similarity of those requests; ranked as one more list.
    pub remembered: Vec<(ApiId, f32)>,
    /// APIs the tool graph says follow the caller's last call, with the
    /// transition weight: each adds `GRAPH_WEIGHT / (RRF_K + 1)` times its
    /// weight, as route mode counts the graph ([`tool_list`]).
    pub after: Vec<(ApiId, f32)>,
}

/// The loaded index of a catalog, ready to search.
pub struct Retriever {
    catalog: Arc<Catalog>,
    embedder: Option<Arc<Embedder>>,
    index: index_files::Index,
    tool_apis: HashMap<u32, Vec<u32>>,
    /// APIs by their function name and (several-word, specific) API name.
    names: names::NameIndex,
    /// Tools by their name's words.
    tool_names: names::NameIndex,
    options: SearchOptions,
    max_query_chars: usize,
    /// Where the index lives and how it came to be.
    pub index_dir: PathBuf,
    pub built: Option<BuildReport>,
    /// BM25 alone until the dense index is built in the background
    /// ([`Retriever::open_lexical_until_built`]).
    dense_pending: bool,
    /// What each API and tool was indexed from ([`Retriever::carry_over`]).
    fingerprints: carry::Fingerprints,
}

impl std::fmt::Debug for Retriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retriever").field("apis", &self.index.dense.len()).field("index_dir", &self.index_dir).finish()
    }
}

impl Retriever {
    /// Loads the catalog's index from the state directory, building it when
    /// it is missing, stale or damaged (if `retrieval.auto_index`). The
    /// embedding model is loaded unless the mode is lexical.
    pub fn open(catalog: Arc<Catalog>, config: &Config) -> Result<Retriever, RetrievalError> {
        Retriever::open_reporting(catalog, config, &Progress::default())
    }

    /// [`Retriever::open`], saying what it does in `progress`.
    pub(crate) fn open_reporting(
        catalog: Arc<Catalog>,
        config: &Config,
        progress: &Progress,
    ) -> Result<Retriever, RetrievalError> {
        let embedder = match config.retrieval.mode {
            SearchMode::Lexical => None,
            _ => {
                progress.set_stage("loading the embedding model");
                Some(Arc::new(Embedder::load(&config.embedding)?))
            }
        };
        progress.set_stage("loading the search index");
        Retriever::open_with(catalog, config, embedder, false, progress)
    }

    /// [`Retriever::open`] with a loaded embedder (`None`: lexical only;
    /// building then needs one), optionally rebuilding even a usable index,
    /// saying how far a build has got in `progress`.
    pub(crate) fn open_with(
        catalog: Arc<Catalog>,
        config: &Config,
        embedder: Option<Arc<Embedder>>,
        force_build: bool,
        progress: &Progress,
    ) -> Result<Retriever, RetrievalError> {
        let t = Instant::now();
        let documents = document::documents(&catalog);
        let hash = document::catalog_hash(&catalog, &documents);
        tracing::debug!(ms = t.elapsed().as_millis() as u64, "documents and hash");
        let dir = index_files::index_dir(&config.state.dir(), &hash);
        let model_id = embedder.as_ref().map(|e| e.id().to_string());
        let loaded = if force_build {
            Err(index_files::Unusable::Missing(dir.clone()))
        } else {
            index_files::load(&dir, &hash, model_id.as_deref())
        };
        let (index, built) = match loaded {
            Ok((_, index)) => (index, None),
            Err(problem) if !config.retrieval.auto_index && !force_build => {
                return Err(RetrievalError::NoIndex { problem });
            }
            Err(problem) if embedder.is_none() && config.retrieval.mode == SearchMode::Lexical && !force_build => {
                // Lexical search needs no model: index BM25 in memory.
                tracing::info!("{problem}; lexical mode: indexing BM25 in memory");
                (lexical_index(&catalog, &documents), None)
            }
            Err(problem) => {
                if !matches!(problem, index_files::Unusable::Missing(_)) {
                    tracing::warn!("{problem}; rebuilding it");
                }
                let embedder = match &embedder {
                    Some(e) => e.clone(),
                    None => Arc::new(Embedder::load(&config.embedding)?),
                };
                let (index, report) = build::build(&catalog, &documents, &embedder, &config.embedding, progress)?;
                index_files::save(&dir, &hash, embedder.id(), &index).map_err(|source| RetrievalError::Io {
                    context: format!("writing the index to {}", dir.display()),
                    source,
                })?;
                (index, Some(report))
            }
        };
        let fingerprints = carry::Fingerprints::of(&catalog, &documents);
        Ok(Retriever::assemble(catalog, config, embedder, index, dir, built, false).with(fingerprints))
    }

    /// The catalog's stored index if it is usable; else, when it would be
    /// built (`retrieval.auto_index`, a dense mode, a model), BM25 alone,
    /// indexed in memory in about a second, with `true`: the caller builds
    /// the dense index in the background ([`Retriever::open_with`]) and
    /// swaps it in, so that no search waits minutes for a first build.
    pub(crate) fn open_lexical_until_built(
        catalog: Arc<Catalog>,
        config: &Config,
        embedder: Option<Arc<Embedder>>,
        progress: &Progress,
    ) -> Result<(Retriever, bool), RetrievalError> {
        let builds = config.retrieval.auto_index && config.retrieval.mode != SearchMode::Lexical;
        let Some(model) = embedder.as_ref().filter(|_| builds) else {
            return Ok((Retriever::open_with(catalog, config, embedder, false, progress)?, false));
        };
        let documents = document::documents(&catalog);
        let hash = document::catalog_hash(&catalog, &documents);
        let dir = index_files::index_dir(&config.state.dir(), &hash);
        if let Ok((_, index)) = index_files::load(&dir, &hash, Some(model.id())) {
            let fingerprints = carry::Fingerprints::of(&catalog, &documents);
            return Ok((
                Retriever::assemble(catalog, config, embedder, index, dir, None, false).with(fingerprints),
                false,
            ));
        }
        let index = lexical_index(&catalog, &documents);
        let fingerprints = carry::Fingerprints::of(&catalog, &documents);
        Ok((Retriever::assemble(catalog, config, embedder, index, dir, None, true).with(fingerprints), true))
    }

    /// A retriever of `index`, with the name indexes of `catalog`.
    fn assemble(
        catalog: Arc<Catalog>,
        config: &Config,
        embedder: Option<Arc<Embedder>>,
        index: index_files::Index,
        dir: PathBuf,
        built: Option<BuildReport>,
        dense_pending: bool,
    ) -> Retriever {
        let mut tool_apis: HashMap<u32, Vec<u32>> = HashMap::new();
        let mut names = names::NameIndex::default();
        for api in catalog.apis() {
            tool_apis.entry(api.tool.0).or_default().push(api.id.0);
            // In words, catalog names are everyday phrases ("random joke
            // for jokes", "Latest News"): only their written form names them.
            names.insert_verbatim(&api.function_name, api.id.0);
            if is_identifier(&api.name) {
                names.insert_verbatim(&api.name, api.id.0);
            }
        }
        names.keep_specific(NAMED_TOP);
        let mut tool_names = names::NameIndex::default();
        for tool in catalog.tools() {
            tool_names.insert_tool(&tool.name, tool.id.0);
        }
        tool_names.keep_specific(NAMED_TOP);

        Retriever {
            catalog,
            embedder,
            index,
            tool_apis,
            names,
            tool_names,
            options: SearchOptions::from_config(&config.retrieval),
            max_query_chars: config.retrieval.max_query_chars,
            index_dir: dir,
            built,
            dense_pending,
            fingerprints: carry::Fingerprints::default(),
        }
    }

    /// Whether this is BM25 alone while the dense index is being built.
    pub(crate) fn dense_pending(&self) -> bool {
        self.dense_pending
    }

    pub(crate) fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    pub fn options(&self) -> SearchOptions {
        self.options
    }

    /// The embedder, when dense retrieval is on.
    pub fn embedder(&self) -> Option<&Arc<Embedder>> {
        self.embedder.as_ref()
    }

    /// The `k` best APIs for `query` with the configured options.
    pub fn search(&self, query: &str, k: usize, filters: &Filters) -> Result<SearchResults, RetrievalError> {
        self.search_with(query, k, filters, self.options)
    }

    /// The `k` best APIs for `query` with explicit options.
    pub(crate) fn search_with(
        &self,
        query: &str,
        k: usize,
        filters: &Filters,
        options: SearchOptions,
    ) -> Result<SearchResults, RetrievalError> {
        let prepared = self.prepare(query, options)?;
        Ok(self.rank(&prepared, k, filters, options))
    }

    /// Cuts, splits and embeds a query (the costly part of a search).
    pub fn prepare(&self, query: &str, options: SearchOptions) -> Result<Prepared, RetrievalError> {
        let trimmed = query.trim();
        if trimmed.is_empty() {
            return Err(RetrievalError::EmptyQuery);
        }
        let total = trimmed.chars().count();
        let text: String = trimmed.chars().take(self.max_query_chars).collect();
        let cut_chars = total.saturating_sub(self.max_query_chars);
        let mut texts = vec![text];
        if options.intents {
            texts.extend(intents::split(&texts[0]));
        }
        let started = Instant::now();
        let vectors = match &self.embedder {
            Some(embedder) if options.mode != SearchMode::Lexical => {
                let embedded = if options.embed_intents { texts.len() } else { 1 };
                embed_query(embedder, &texts[..embedded])?
            }
            _ => Vec::new(),
        };
        let embed_ms = crate::units::ms(started.elapsed());
        Ok(Prepared { texts, vectors, cut_chars, embed_ms, remembered: Vec::new(), after: Vec::new() })
    }

    /// Ranks a prepared query: fuses the ranked lists of every text and
    /// signal, then combines the whole query's ranking with its intents'.
    pub fn rank(&self, prepared: &Prepared, k: usize, filters: &Filters, options: SearchOptions) -> SearchResults {
        let started = Instant::now();
        let masks = self.masks(filters);
        let mut ctx = RankContext { options, masks: masks.as_ref(), pool: POOL.max(k) };
        // The query is embedded even while the dense index is being built
        // (the long-term memory reads its vector), but ranked by BM25 alone.
        ctx.options.mode = match options.mode {
            SearchMode::Lexical => SearchMode::Lexical,
            _ if prepared.vectors.is_empty() || self.dense_pending => SearchMode::Lexical,
            mode => mode,
        };
        let (mut whole, whole_lexical, whole_dense) = self.score_text(prepared, 0, &ctx);
        let remembered: Vec<(u32, f32)> = prepared
            .remembered
            .iter()
            .filter(|(api, _)| masks.as_ref().is_none_or(|m| m.apis[api.0 as usize]))
            .map(|(api, s)| (api.0, *s))
            .collect();
        add_ranks(&mut whole, &remembered, MEMORY_WEIGHT, options.weights.rrf_k);
        let top = GRAPH_WEIGHT / (options.weights.rrf_k + 1.0);
        for (api, w) in prepared.after.iter().filter(|(api, _)| masks.as_ref().is_none_or(|m| m.apis[api.0 as usize])) {
            *whole.entry(api.0).or_default() += top * w;
        }
        let named_tools = self.add_named_tools(&mut whole, &prepared.texts[0], options.weights, masks.as_ref());
        let intents = if options.intents && options.weights.intent > 0.0 { prepared.texts.len() } else { 1 };
        let ranked: Vec<(u32, f32)> = match options.intent_merge {
            IntentMerge::Sum => {
                let mut fused = whole;
                for i in 1..intents {
                    for (doc, score) in self.score_text(prepared, i, &ctx).0 {
                        *fused.entry(doc).or_default() += options.weights.intent * score;
                    }
                }
                let mut ranked: Vec<(u32, f32)> = fused.into_iter().collect();
                bm25::top_k(&mut ranked, k);
                ranked
            }
            IntentMerge::Reserve => {
                let mut fused = whole;
                let mut bests = Vec::new();
                for i in 1..intents {
                    let scores = self.score_text(prepared, i, &ctx).0;
                    bests.extend(sorted(scores.clone(), 1).first().map(|b| b.0));
                    for (doc, score) in scores {
                        *fused.entry(doc).or_default() += options.weights.intent * score;
                    }
                }
                let mut ranked = sorted(fused, k.max(RESERVED_TOP));
                reserve(&mut ranked, &bests, RESERVED_TOP);
                ranked.truncate(k);
                ranked
            }
        };
        let mut named: Vec<u32> = self
            .names
            .found_in(&prepared.texts[0])
            .into_iter()
            .filter(|&d| masks.as_ref().is_none_or(|m| m.apis[d as usize]))
            .take(NAMED_TOP)
            .collect();
        for (tool, fallback) in named_tools {
            // The tool's best API after the intents joined in, else its best for the whole request.
            let best = ranked.iter().map(|e| e.0).find(|&d| self.catalog.api(ApiId(d)).tool.0 == tool);
            let api = best.unwrap_or(fallback);
            if named.len() < NAMED_TOP && !named.contains(&api) {
                named.push(api);
            }
        }
        let mut ranked = ranked;
        first(&mut ranked, &named, k);
        let hits = ranked
            .into_iter()
            .map(|(doc, score)| Hit {
                api: ApiId(doc),
                score,
                dense: whole_dense.get(&doc).copied(),
                lexical: whole_lexical.get(&doc).copied(),
            })
            .collect();
        SearchResults {
            hits,
            intents: prepared.texts[1..].to_vec(),
            cut_chars: prepared.cut_chars,
            embed_ms: prepared.embed_ms,
            search_ms: crate::units::ms(started.elapsed()),
        }
    }

    /// The ranking of every prepared text on its own (the whole query first,
    /// then each intent), best first, at most `k` each.
    pub(crate) fn text_rankings(&self, prepared: &Prepared, k: usize, options: SearchOptions) -> Vec<Vec<ApiId>> {
        let mut ctx = RankContext { options, masks: None, pool: POOL.max(k) };
        if prepared.vectors.is_empty() {
            ctx.options.mode = SearchMode::Lexical;
        }
        (0..prepared.texts.len())
            .map(|i| sorted(self.score_text(prepared, i, &ctx).0, k).into_iter().map(|(doc, _)| ApiId(doc)).collect())
            .collect()
    }

    /// The fused scores of one text (the whole query or an intent): its
    /// BM25 and dense lists and the tool-level lists. Also returns the
    /// text's own lexical and dense ranks.
    fn score_text(
        &self,
        prepared: &Prepared,
        i: usize,
        ctx: &RankContext,
    ) -> (HashMap<u32, f32>, HashMap<u32, Signal>, HashMap<u32, Signal>) {
        let w = ctx.options.weights;
        // Intents use their vectors only with `embed_intents` (a prepared
        // query may hold them for another variant's sake).
        let embedded = i < prepared.vectors.len() && (i == 0 || ctx.options.embed_intents);
        let use_dense = ctx.options.mode != SearchMode::Lexical && embedded;
        let use_lexical = ctx.options.mode != SearchMode::Dense;
        let mut fused: HashMap<u32, f32> = HashMap::new();
        let (mut lexical, mut dense) = (HashMap::new(), HashMap::new());
        if use_lexical {
            let hits = self.index.bm25.search(&prepared.texts[i], ctx.pool, ctx.masks.map(|m| m.apis.as_slice()));
            add_ranks(&mut fused, &hits, w.lexical, w.rrf_k);
            lexical = signals(&hits);
        }
        if use_dense {
            let v = &prepared.vectors[i];
            let mask = ctx.masks.map(|m| m.apis.as_slice());
            let hits = match (ctx.options.dense_index, mask) {
                (DenseIndex::Hnsw, None) => self
                    .index
                    .dense
                    .approximate(v, ctx.pool)
                    .unwrap_or_else(|| self.index.dense.exact(v, ctx.pool, None)),
                _ => self.index.dense.exact(v, ctx.pool, mask),
            };
            add_ranks(&mut fused, &hits, w.dense, w.rrf_k);
            dense = signals(&hits);
        }
        if w.tool > 0.0 {
            let mut tools: HashMap<u32, f32> = HashMap::new();
            if use_lexical {
                let mask = ctx.masks.map(|m| m.tools.as_slice());
                add_ranks(
                    &mut tools,
                    &self.index.tools.search(&prepared.texts[i], TOOL_POOL, mask),
                    w.lexical,
                    w.rrf_k,
                );
            }
            self.add_to_tools(&mut fused, tools, w.tool, ctx.masks.map(|m| m.apis.as_slice()));
        }
        (fused, lexical, dense)
    }

    /// The tools `text` calls by name ("… with the News Sentiment API"):
    /// adds a first place in one more tool-level list, weighted
    /// `weights.named_tool`, to each of their APIs, and returns the first
    /// [`NAMED_TOP`] tools with their best API by `scores` after that.
    fn add_named_tools(
        &self,
        scores: &mut HashMap<u32, f32>,
        text: &str,
        weights: Weights,
        masks: Option<&Masks>,
    ) -> Vec<(u32, u32)> {
        if weights.named_tool <= 0.0 {
            return Vec::new();
        }
        let tools: Vec<u32> = self
            .tool_names
            .named_as_tools(text)
            .into_iter()
            .filter(|&t| masks.is_none_or(|m| m.tools[t as usize]))
            .collect();
        let mask = masks.map(|m| m.apis.as_slice());
        let first_place = tools.iter().map(|&t| (t, 1.0 / (weights.rrf_k + 1.0))).collect();
        self.add_to_tools(scores, first_place, weights.named_tool, mask);
        let score = |d: &u32| scores.get(d).copied().unwrap_or(0.0);
        let best = |t: &u32| {
            let apis = self.tool_apis.get(t).into_iter().flatten();
            apis.filter(|&&d| mask.is_none_or(|m| m[d as usize]))
                .max_by(|a, b| score(a).total_cmp(&score(b)).then(b.cmp(a)))
                .map(|&d| (*t, d))
        };
        tools.iter().take(NAMED_TOP).filter_map(best).collect()
    }

    /// Adds `weight` × each tool's score to every allowed API of the tool.
    fn add_to_tools(
        &self,
        fused: &mut HashMap<u32, f32>,
        tools: HashMap<u32, f32>,
        weight: f32,
        mask: Option<&[bool]>,
    ) {
        for (tool, score) in tools {
            for &doc in self.tool_apis.get(&tool).into_iter().flatten() {
                if mask.is_none_or(|m| m[doc as usize]) {
                    *fused.entry(doc).or_default() += weight * score;
                }
            }
        }
    }

    /// The document filter for `filters`.
    /// Which APIs and which tools `filters` allow; `None` when nothing is filtered.
    fn masks(&self, filters: &Filters) -> Option<Masks> {
        if filters.category.is_none() && filters.tool.is_none() && filters.allowed.is_none() {
            return None;
        }
        let category = filters.category.as_deref().map(|c| category_dir_name(c).to_lowercase());
        let tool = filters.tool.as_deref().map(standardize);
        let tools: Vec<bool> = self
            .catalog
            .tools()
            .iter()
            .map(|t| {
                category.as_ref().is_none_or(|c| t.category.to_lowercase() == *c)
                    && tool.as_ref().is_none_or(|n| &t.std_name == n)
            })
            .collect();
        let allowed = |a: &crate::catalog::Api| {
            filters.allowed.as_ref().is_none_or(|m| m.get(a.id.0 as usize).copied().unwrap_or(false))
        };
        let apis: Vec<bool> = self.catalog.apis().iter().map(|a| tools[a.tool.0 as usize] && allowed(a)).collect();
        // A tool is searched as a whole while any of its APIs may be returned.
        let mut tools = vec![false; tools.len()];
        for (a, _) in self.catalog.apis().iter().zip(&apis).filter(|(_, ok)| **ok) {
            tools[a.tool.0 as usize] = true;
        }
        Some(Masks { apis, tools })
    }
}

/// What scoring one text needs to know.
struct RankContext<'a> {
    options: SearchOptions,
    masks: Option<&'a Masks>,
    pool: usize,
}

/// The APIs and tools a filtered search may return (indexed by id).
struct Masks {
    apis: Vec<bool>,
    tools: Vec<bool>,
}

/// The vectors of a query's texts (the whole query, then its intents),
/// in two batches: a batch is padded to its longest text, and the whole
/// query is several times longer than any of its sentences, so one batch
/// made each intent cost as much as the whole query.
pub(super) fn embed_query(embedder: &Embedder, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
    let (whole, intents) = texts.split_at(texts.len().min(1));
    let mut vectors = embedder.embed_queries(whole)?;
    vectors.extend(embedder.embed_queries(intents)?);
    Ok(vectors)
}
