//! Compiled JSON Schema validators, kept process-wide by a hash of the
//! schema's JSON text and of how it is compiled.
//!
//! Compiling a schema costs far more than checking arguments with it (a
//! ToolBench API's schema took ~50 µs to compile, profiled in
//! docs/benchmarks.md, "tools/call latency"), and the same schemas come back:
//! the catalog's APIs are called again and again, and clients send the
//! same tools in many lists. The cache is an LRU so that a long-lived
//! server calling many distinct APIs stays bounded.

use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::sync::{Arc, LazyLock, Mutex};

use lru::LruCache;
use serde_json::Value;

/// Compiled validators kept.
const KEPT: usize = 4_096;

/// How a schema is compiled: part of the key, since one schema text
/// compiled two ways gives two validators.
#[derive(Debug, Clone, Copy, Hash)]
pub(crate) enum Dialect {
    /// Draft 2020-12, after [`crate::catalog::dialect::normalize`], formats not
    /// checked: a client's own tools.
    Client,
    /// Draft 2020-12 with formats checked: the catalog's APIs.
    Catalog,
}

static CACHE: LazyLock<Mutex<LruCache<u64, Arc<jsonschema::Validator>>>> =
    LazyLock::new(|| Mutex::new(LruCache::new(NonZeroUsize::new(KEPT).expect("not zero"))));

/// The validator of `schema` compiled as `dialect`: from the cache, or
/// compiled now by `compile` and kept. A failure to compile is not kept.
pub(crate) fn cached<E>(
    dialect: Dialect,
    schema: &Value,
    compile: impl FnOnce(&Value) -> Result<jsonschema::Validator, E>,
) -> Result<Arc<jsonschema::Validator>, E> {
    let mut h = std::hash::DefaultHasher::new();
    dialect.hash(&mut h);
    schema.to_string().hash(&mut h);
    let key = h.finish();
    if let Some(v) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(v.clone());
    }
    let compiled = Arc::new(compile(schema)?);
    CACHE.lock().unwrap_or_else(|e| e.into_inner()).put(key, compiled.clone());
    Ok(compiled)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
        jsonschema::validator_for(schema).map_err(|e| e.to_string())
    }

    #[test]
    fn a_schema_is_compiled_once_per_dialect() {
        let schema = json!({"type": "object", "properties": {"cache_test_a": {"type": "integer"}}});
        let first = cached(Dialect::Client, &schema, compile).unwrap();
        let again = cached(Dialect::Client, &schema, |_| Err("compiled twice".to_string())).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let other = cached(Dialect::Catalog, &schema, compile).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert!(!again.is_valid(&json!({"cache_test_a": "x"})));
    }

    #[test]
    fn a_failure_is_not_kept() {
        let schema = json!({"type": "object", "properties": {"cache_test_b": {"pattern": "("}}});
        assert!(cached(Dialect::Catalog, &schema, compile).is_err());
        let mut compiled = false;
        let _ = cached(Dialect::Catalog, &schema, |s| {
            compiled = true;
            compile(s)
        });
        assert!(compiled, "a schema that failed to compile is compiled again next time");
    }
}
