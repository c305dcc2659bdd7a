//! Loading: the config file, then `TOOLROUTER_*` environment overrides,
//! then validation. Secrets are refused in the file, relative paths in the
//! file are resolved against its directory, and an environment value is
//! parsed as the type of its key's default.

use std::path::{Path, PathBuf};

use toml::{Table, Value};

use super::secret::SECRET_KEYS;
use super::{Config, ConfigError, LLM_KEY_ENV, RAPIDAPI_KEY_ENV, ValueSource};

/// Prefix of environment overrides.
pub const ENV_PREFIX: &str = "TOOLROUTER_";
/// Environment variable naming the config file (also `--config`).
pub const CONFIG_ENV: &str = "TOOLROUTER_CONFIG";

/// Keys holding paths, resolved against the config file's directory.
const PATH_KEYS: [(&str, &str); 12] = [
    ("server", "tls_cert_file"),
    ("server", "tls_key_file"),
    ("cluster", "redis_password_file"),
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
        let mut origins: Vec<(String, ValueSource)> = Vec::new();
        let mut warnings = Vec::new();
        let defaults = Value::try_from(Config::default()).expect("defaults serialize");
        let defaults = defaults.as_table().expect("config is a table");
        let mut env: Vec<(String, String)> = env.into_iter().filter(|(k, _)| k.starts_with(ENV_PREFIX)).collect();
        env.sort();
        for (var, raw) in env {
            // Secrets, the config file's path, and the variables of the
            // scripts (`TOOLROUTER_MODELS`: where models are; `TOOLROUTER_PYENVS`:
            // the test clients) are read where they are used, not keys.
            let not_keys = [
                RAPIDAPI_KEY_ENV,
                LLM_KEY_ENV,
                CONFIG_ENV,
                super::REDIS_PASSWORD_ENV,
                "TOOLROUTER_MODELS",
                "TOOLROUTER_PYENVS",
            ];
            if not_keys.contains(&var.as_str()) {
                continue;
            }
            let Some((section, key, default)) = find_key(defaults, &var[ENV_PREFIX.len()..]) else {
                warnings.push(format!("ignoring unknown environment variable {var} (no such config key)"));
                continue;
            };
            let origin = ValueSource::Env(var.clone());
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
                .unwrap_or_else(|| file.map_or(ValueSource::Default, |f| ValueSource::File(f.to_path_buf())))
        };
        let config: Config = serde_path_to_error::deserialize(Value::Table(table)).map_err(|e| {
            let key = e.path().to_string();
            ConfigError::Key { origin: origin_of(&key), key, message: e.into_inner().to_string() }
        })?;
        config.validate(&origin_of)?;
        Ok((config, warnings))
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
                origin: ValueSource::File(path.to_path_buf()),
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
    // The paths inside `[[catalog.mcp_servers]]`: a working directory, secret files.
    let servers = table.get_mut("catalog").and_then(|c| c.get_mut("mcp_servers")).and_then(Value::as_array_mut);
    for server in servers.into_iter().flatten().filter_map(Value::as_table_mut) {
        if let Some(cwd) = server.get_mut("cwd") {
            resolve_paths(cwd, base);
        }
        let secrets = server.get_mut("secret_headers").and_then(Value::as_table_mut);
        for file in secrets.into_iter().flat_map(|t| t.iter_mut().map(|(_, v)| v)).filter_map(|s| s.get_mut("file")) {
            resolve_paths(file, base);
        }
    }
    // The secret files of `[[upstream.credentials]]`.
    let credentials = table.get_mut("upstream").and_then(|u| u.get_mut("credentials")).and_then(Value::as_array_mut);
    for credential in credentials.into_iter().flatten() {
        if let Some(file) = credential.get_mut("secret").and_then(|s| s.get_mut("file")) {
            resolve_paths(file, base);
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

/// `$VAR`, else `$HOME/<fallback>`, else `<fallback>` in the working directory.
pub(super) fn xdg_dir(var: &str, fallback: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(fallback),
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
