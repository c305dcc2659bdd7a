//! `[embedding]`: the embedding model used for dense retrieval, its
//! defaults, where its files are looked for when none are configured, and
//! its checks.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::load::xdg_dir;

/// Texts per `embed` call while indexing (`embedding.batch_size`): bounds memory.
pub const DEFAULT_EMBED_BATCH: usize = 256;
/// Tokens an embedded text is cut to (`embedding.max_length`). all-MiniLM-L6-v2
/// was trained on 128-token sequences; twice that makes indexing ~1.7x slower.
pub const DEFAULT_EMBED_MAX_LENGTH: usize = 128;

/// The default model's directory under [`models_dir`]: toolrouter's own,
/// all-MiniLM-L6-v2 fine-tuned for tool retrieval (`models/tool-minilm/`).
pub const DEFAULT_MODEL: &str = "tool-minilm";

/// `[embedding]`: the embedding model used for dense retrieval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbeddingConfig {
    /// Directory with `model.onnx` and the tokenizer files. Empty: where
    /// `scripts/fetch-models.sh` puts them (`~/.cache/toolrouter/models/tool-minilm`:
    /// all-MiniLM-L6-v2 fine-tuned for tool retrieval, `models/tool-minilm/`).
    pub model_dir: PathBuf,
    /// The ONNX Runtime shared library (>= 1.24). Empty: `ORT_DYLIB_PATH`,
    /// else `~/.cache/toolrouter/models/onnxruntime/libonnxruntime.so`
    /// (`.dylib` on macOS).
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
        models_dir().join(DEFAULT_MODEL)
    }

    /// The ONNX Runtime library in effect.
    pub fn onnxruntime(&self) -> PathBuf {
        if !self.onnxruntime.as_os_str().is_empty() {
            return self.onnxruntime.clone();
        }
        match std::env::var_os("ORT_DYLIB_PATH") {
            Some(p) if !p.is_empty() => PathBuf::from(p),
            _ => models_dir().join(if cfg!(target_os = "macos") {
                "onnxruntime/libonnxruntime.dylib"
            } else {
                "onnxruntime/libonnxruntime.so"
            }),
        }
    }

    /// The embedding cache directory in effect.
    pub fn cache_dir(&self) -> PathBuf {
        if !self.cache_dir.as_os_str().is_empty() {
            return self.cache_dir.clone();
        }
        xdg_dir("XDG_CACHE_HOME", ".cache").join("toolrouter/embeddings")
    }

    /// Configured model files exist and the sizes are at least 1, as (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        for (key, path) in [("embedding.model_dir", &self.model_dir), ("embedding.onnxruntime", &self.onnxruntime)] {
            if !path.as_os_str().is_empty() && !path.exists() {
                return Err((key.to_string(), format!("{} does not exist", path.display())));
            }
        }
        for (key, n) in [("embedding.batch_size", self.batch_size), ("embedding.max_length", self.max_length)] {
            if n == 0 {
                return Err((key.to_string(), "must be at least 1".to_string()));
            }
        }
        Ok(())
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
