//! Secrets: the API keys toolrouter sends, which never live in the config
//! file, are read from an environment variable or a key file, and are never
//! printed or logged.

use std::fmt;
use std::path::Path;

use super::{Config, LLM_KEY_ENV, RAPIDAPI_KEY_ENV};

/// Keys that must never be set in the file, with where to put them instead.
pub(super) const SECRET_KEYS: [(&str, &str, &str, &str); 3] = [
    ("cluster", "redis_password", super::REDIS_PASSWORD_ENV, "cluster.redis_password_file"),
    ("upstream", "rapidapi_key", RAPIDAPI_KEY_ENV, "upstream.rapidapi_key_file"),
    ("llm", "api_key", LLM_KEY_ENV, "llm.api_key_file"),
];

/// A secret value: never printed, never logged.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub(super) fn new(value: String) -> Secret {
        Secret(value)
    }

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

impl Config {
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
pub(super) fn secret(env: &str, file: &Path) -> Result<Option<Secret>, String> {
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
