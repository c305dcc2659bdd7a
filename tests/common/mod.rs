//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::PathBuf;
use std::sync::OnceLock;

use toolrouter::catalog::{Catalog, Sources};

/// The ToolBench data directory: `$TOOLBENCH_DIR`, else `../shared/datasets/toolbench`
/// beside the repository. `None` (the test says it is skipping) only when
/// neither exists; a `TOOLBENCH_DIR` that does not exist is a failure.
pub fn toolbench_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("TOOLBENCH_DIR") {
        let dir = PathBuf::from(dir);
        assert!(dir.join("tools").is_dir(), "TOOLBENCH_DIR={} has no tools/ directory", dir.display());
        return Some(dir);
    }
    let sibling = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets/toolbench");
    if sibling.join("tools").is_dir() {
        return Some(sibling);
    }
    eprintln!("SKIPPED: no ToolBench data (set TOOLBENCH_DIR); this test needs ../shared/datasets/toolbench");
    None
}

/// The full ToolBench catalog (tool files only), loaded once per test binary.
pub fn toolbench_catalog() -> Option<&'static Catalog> {
    static CATALOG: OnceLock<Option<Catalog>> = OnceLock::new();
    CATALOG
        .get_or_init(|| {
            let dir = toolbench_dir()?;
            let sources = Sources { paths: vec![dir.join("tools")], ..Sources::default() };
            Some(Catalog::load(&sources).expect("the ToolBench catalog loads"))
        })
        .as_ref()
}

/// The path of the built `toolrouter` binary.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_toolrouter"))
}

/// Whether the embedding model and ONNX Runtime are where the default
/// config looks (`scripts/fetch-models.sh` puts them there; the test
/// command runs it). Tests that embed say SKIPPED without them.
pub fn model_available() -> bool {
    let config = toolrouter::config::EmbeddingConfig::default();
    let ok = config.model_dir().join("model.onnx").is_file() && config.onnxruntime().is_file();
    if !ok {
        eprintln!("SKIPPED: no embedding model (run scripts/fetch-models.sh)");
    }
    ok
}
