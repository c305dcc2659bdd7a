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
const SECRET_KEYS: [(&str, &str, &str); 1] = [("upstream", "rapidapi_key", "upstream.rapidapi_key_file")];
/// Keys holding paths, resolved against the config file's directory.
const PATH_KEYS: [(&str, &str); 3] =
    [("catalog", "paths"), ("catalog", "query_files"), ("upstream", "rapidapi_key_file")];

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub catalog: CatalogConfig,
    pub args: ArgsConfig,
    pub upstream: UpstreamConfig,
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

/// `[upstream]`: calls to APIs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    /// Hosts calls may go to besides the catalog's own (`host`, `host:port`, `*.domain`).
    pub allowed_hosts: Vec<String>,
    /// File holding the RapidAPI key (empty: only the environment variable).
    pub rapidapi_key_file: PathBuf,
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
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(p) => write!(f, "in {}", p.display()),
            Origin::Env(var) => write!(f, "set by {var}"),
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
            if var == RAPIDAPI_KEY_ENV || var == CONFIG_ENV {
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
                .unwrap_or_else(|| Origin::File(file.map(Path::to_path_buf).unwrap_or_default()))
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
        self.rapidapi_key().map_err(|message| fail("upstream.rapidapi_key_file", message))?;
        Ok(())
    }

    /// The RapidAPI key: the environment variable, else the key file, else none.
    pub fn rapidapi_key(&self) -> Result<Option<Secret>, String> {
        if let Ok(key) = std::env::var(RAPIDAPI_KEY_ENV)
            && !key.trim().is_empty()
        {
            return Ok(Some(Secret(key.trim().to_string())));
        }
        let path = &self.upstream.rapidapi_key_file;
        if path.as_os_str().is_empty() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        match text.trim() {
            "" => Err(format!("{} is empty", path.display())),
            key => Ok(Some(Secret(key.to_string()))),
        }
    }

    /// Where the RapidAPI key comes from, without revealing it.
    pub fn rapidapi_key_source(&self) -> String {
        match self.rapidapi_key() {
            Ok(Some(_)) if std::env::var(RAPIDAPI_KEY_ENV).is_ok_and(|k| !k.trim().is_empty()) => {
                format!("set (from {RAPIDAPI_KEY_ENV})")
            }
            Ok(Some(_)) => format!("set (from {})", self.upstream.rapidapi_key_file.display()),
            Ok(None) => "not set".to_string(),
            Err(e) => format!("unreadable: {e}"),
        }
    }
}

fn read_file(path: &Path) -> Result<Table, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
    let mut table: Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Syntax { path: path.to_path_buf(), message: e.to_string() })?;
    for (section, key, instead) in SECRET_KEYS {
        if table.get(section).and_then(|s| s.get(key)).is_some() {
            return Err(ConfigError::Key {
                key: format!("{section}.{key}"),
                origin: Origin::File(path.to_path_buf()),
                message: format!("secrets cannot be set in the config file; use {RAPIDAPI_KEY_ENV} or `{instead}`"),
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
