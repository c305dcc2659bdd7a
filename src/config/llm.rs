//! `[llm]`: the upstream OpenAI-compatible model toolrouter asks (the
//! OpenAI face forwards to it; the LLM decider and field chooser use it),
//! with the section's defaults and checks.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::secret::secret;

/// Environment variable holding the model API key (never in the file).
pub const LLM_KEY_ENV: &str = "TOOLROUTER_LLM_API_KEY";
/// `llm.timeout_ms`: a whole non-streaming answer, or the gap between two stream events.
pub const DEFAULT_LLM_TIMEOUT_MS: u64 = 60_000;
/// `llm.max_attempts`: tries per request (after connect errors, 5xx and 429; never after a timeout).
pub const DEFAULT_LLM_MAX_ATTEMPTS: u32 = 2;
/// `llm.backoff_ms`: the first retry waits about this (doubling, with jitter).
pub const DEFAULT_LLM_BACKOFF_MS: u64 = 500;
/// `llm.max_retry_wait_ms`: the longest `Retry-After` toolrouter waits out
/// itself; a longer one is passed on to the client at once.
pub const DEFAULT_LLM_MAX_RETRY_WAIT_MS: u64 = 5_000;
/// `llm.max_response_bytes`: larger answers are cut off and the request fails.
pub const DEFAULT_LLM_MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// `[llm]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// The model server's base URL, up to `/v1` (`https://api.openai.com/v1`).
    /// Empty: no model configured.
    pub base_url: String,
    /// File holding the model API key (the environment variable takes precedence).
    pub api_key_file: PathBuf,
    pub timeout_ms: u64,
    pub max_attempts: u32,
    pub backoff_ms: u64,
    pub max_retry_wait_ms: u64,
    pub max_response_bytes: usize,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            base_url: String::new(),
            api_key_file: PathBuf::new(),
            timeout_ms: DEFAULT_LLM_TIMEOUT_MS,
            max_attempts: DEFAULT_LLM_MAX_ATTEMPTS,
            backoff_ms: DEFAULT_LLM_BACKOFF_MS,
            max_retry_wait_ms: DEFAULT_LLM_MAX_RETRY_WAIT_MS,
            max_response_bytes: DEFAULT_LLM_MAX_RESPONSE_BYTES,
        }
    }
}

impl LlmConfig {
    /// The URL is http(s), the limits are at least 1 and a configured key
    /// is readable, as (key, problem).
    pub(super) fn validate(&self) -> Result<(), (String, String)> {
        if !self.base_url.is_empty() {
            match url::Url::parse(&self.base_url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
                _ => return Err(("llm.base_url".into(), format!("{:?} is not an http(s) URL", self.base_url))),
            }
        }
        for (key, n) in [("timeout_ms", self.timeout_ms), ("max_attempts", u64::from(self.max_attempts))] {
            if n == 0 {
                return Err((format!("llm.{key}"), "must be at least 1".into()));
            }
        }
        secret(LLM_KEY_ENV, &self.api_key_file).map_err(|message| ("llm.api_key_file".into(), message))?;
        Ok(())
    }
}
