//! The search index on disk.
//!
//! One directory per catalog content, `<state>/index/<catalog hash, 16 hex>/`:
//!
//! * `manifest.json`: format version, full catalog hash, model id, vector
//!   length, number of APIs, and the length and SHA-256 of every other file;
//! * `vectors.f32`: the document vectors, little-endian `f32`s;
//! * `bm25.bin`: the BM25 postings of the APIs (postcard);
//! * `tools.bin`: the BM25 postings of the tools (postcard);
//! * `hnsw.bin`: the HNSW graph (postcard).
//!
//! A new index is written into a temporary sibling directory, every file
//! fsync'd, then renamed into place, so a reader sees a whole index or none.
//! Loading checks the manifest against the catalog and model in use
//! (stale) and every file against its hash (damaged): an index is never
//! used silently wrong. The [`KEEP_INDEXES`] most recent directories are kept.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::bm25::Bm25;
use super::dense::Dense;
use super::embedder::hex;

/// Version of the on-disk layout; bump to rebuild every index.
pub(crate) const INDEX_FORMAT: u32 = 3;
/// Index directories kept in the state directory (one per catalog content).
pub(crate) const KEEP_INDEXES: usize = 3;

const VECTORS: &str = "vectors.f32";
const BM25: &str = "bm25.bin";
const TOOLS: &str = "tools.bin";
const HNSW: &str = "hnsw.bin";
const MANIFEST: &str = "manifest.json";

/// What an index was built from, and the files it consists of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub(crate) format: u32,
    pub(crate) catalog_hash: String,
    pub(crate) model_id: String,
    pub(crate) dims: usize,
    pub(crate) apis: usize,
    pub(crate) files: Vec<FileEntry>,
    pub(crate) built_unix: u64,
}

/// One file of an index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FileEntry {
    pub(crate) name: String,
    pub(crate) bytes: u64,
    pub(crate) sha256: String,
}

/// Why a stored index cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Unusable {
    #[error("no index at {0}")]
    Missing(PathBuf),
    #[error("the index at {dir} is stale: {why}")]
    Stale { dir: PathBuf, why: String },
    #[error("the index at {dir} is damaged: {why}")]
    Damaged { dir: PathBuf, why: String },
}

/// The parts of a search index.
#[derive(Debug)]
pub(crate) struct Index {
    pub(crate) dense: Dense,
    /// BM25 over the APIs' lexical documents.
    pub(crate) bm25: Bm25,
    /// BM25 over the tools' documents.
    pub(crate) tools: Bm25,
}

/// The directory of the index of a catalog with this content hash.
pub(crate) fn index_dir(state_dir: &Path, catalog_hash: &str) -> PathBuf {
    state_dir.join("index").join(&catalog_hash[..16.min(catalog_hash.len())])
}

/// Loads the index in `dir`, checking that it was built for this catalog
/// and model (`model_id: None` accepts any model: lexical-only use).
pub(crate) fn load(dir: &Path, catalog_hash: &str, model_id: Option<&str>) -> Result<(Manifest, Index), Unusable> {
    let damaged = |why: String| Unusable::Damaged { dir: dir.to_path_buf(), why };
    let stale = |why: String| Unusable::Stale { dir: dir.to_path_buf(), why };
    let text = match std::fs::read(dir.join(MANIFEST)) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unusable::Missing(dir.to_path_buf())),
        Err(e) => return Err(damaged(format!("cannot read {MANIFEST}: {e}"))),
    };
    let manifest: Manifest = serde_json::from_slice(&text).map_err(|e| damaged(format!("{MANIFEST}: {e}")))?;
    if manifest.format != INDEX_FORMAT {
        return Err(stale(format!("index format {} (this toolrouter writes {INDEX_FORMAT})", manifest.format)));
    }
    if manifest.catalog_hash != catalog_hash {
        return Err(stale(format!("built for catalog {}, the catalog is now {catalog_hash}", manifest.catalog_hash)));
    }
    if let Some(model) = model_id
        && manifest.model_id != model
    {
        return Err(stale(format!("built with embedding model {}, the model is now {model}", manifest.model_id)));
    }
    let read = |name: &str| -> Result<Option<Vec<u8>>, Unusable> {
        let Some(entry) = manifest.files.iter().find(|f| f.name == name) else { return Ok(None) };
        let bytes = std::fs::read(dir.join(name)).map_err(|e| damaged(format!("cannot read {name}: {e}")))?;
        if bytes.len() as u64 != entry.bytes || hex(&Sha256::digest(&bytes)) != entry.sha256 {
            return Err(damaged(format!("{name} does not match its checksum")));
        }
        Ok(Some(bytes))
    };
    let t = std::time::Instant::now();
    let vectors = read(VECTORS)?.ok_or_else(|| damaged(format!("the manifest lists no {VECTORS}")))?;
    if manifest.dims == 0 || vectors.len() != manifest.apis * manifest.dims * 4 {
        return Err(damaged(format!("{VECTORS} does not hold {} vectors of {}", manifest.apis, manifest.dims)));
    }
    let vectors: Vec<f32> =
        vectors.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))).collect();
    let postings = |name: &str| -> Result<Bm25, Unusable> {
        let bytes = read(name)?.ok_or_else(|| damaged(format!("the manifest lists no {name}")))?;
        postcard::from_bytes(&bytes).map_err(|e| damaged(format!("{name}: {e}")))
    };
    let bm25 = postings(BM25)?;
    if bm25.len() != manifest.apis {
        return Err(damaged(format!("{BM25} covers {} documents, not {}", bm25.len(), manifest.apis)));
    }
    let tools = postings(TOOLS)?;
    let hnsw = match read(HNSW)? {
        Some(bytes) => Some(postcard::from_bytes(&bytes).map_err(|e| damaged(format!("{HNSW}: {e}")))?),
        None => None,
    };
    let dense = Dense::new(manifest.dims, vectors, hnsw);
    tracing::debug!(ms = t.elapsed().as_millis() as u64, "index loaded");
    Ok((manifest, Index { dense, bm25, tools }))
}

/// Writes an index into `dir` atomically and prunes old index directories.
pub(crate) fn save(dir: &Path, catalog_hash: &str, model_id: &str, index: &Index) -> std::io::Result<Manifest> {
    let Index { dense, bm25, tools } = index;
    let parent = dir.parent().expect("index dirs live in <state>/index");
    std::fs::create_dir_all(parent)?;
    let tmp = parent.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("index")
    ));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)?;
    }
    std::fs::create_dir(&tmp)?;
    let mut files = Vec::new();
    let vector_bytes: Vec<u8> = dense.vectors().iter().flat_map(|x| x.to_le_bytes()).collect();
    files.push(write_file(&tmp, VECTORS, &vector_bytes)?);
    files.push(write_file(&tmp, BM25, &postcard::to_stdvec(bm25).map_err(std::io::Error::other)?)?);
    files.push(write_file(&tmp, TOOLS, &postcard::to_stdvec(tools).map_err(std::io::Error::other)?)?);
    if let Some(hnsw) = dense.hnsw() {
        files.push(write_file(&tmp, HNSW, &postcard::to_stdvec(hnsw).map_err(std::io::Error::other)?)?);
    }
    let manifest = Manifest {
        format: INDEX_FORMAT,
        catalog_hash: catalog_hash.to_string(),
        model_id: model_id.to_string(),
        dims: dense.dims(),
        apis: dense.len(),
        files,
        built_unix: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
    };
    write_file(&tmp, MANIFEST, &serde_json::to_vec_pretty(&manifest).map_err(std::io::Error::other)?)?;
    File::open(&tmp)?.sync_all()?;
    if dir.exists() {
        let old = parent.join(format!(".old-{}", std::process::id()));
        std::fs::rename(dir, &old)?;
        std::fs::rename(&tmp, dir)?;
        std::fs::remove_dir_all(&old)?;
    } else {
        std::fs::rename(&tmp, dir)?;
    }
    File::open(parent)?.sync_all()?;
    prune(parent, dir);
    Ok(manifest)
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<FileEntry> {
    let mut f = File::create(dir.join(name))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok(FileEntry { name: name.to_string(), bytes: bytes.len() as u64, sha256: hex(&Sha256::digest(bytes)) })
}

/// Removes all but the [`KEEP_INDEXES`] most recently modified index
/// directories (never `current`), and leftovers of interrupted writes.
fn prune(parent: &Path, current: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    let mut dirs: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(".tmp-") || name.starts_with(".old-") {
            // Another process may be writing right now: only clear old leftovers.
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|e| e.as_secs() > 3600));
            if old {
                let _ = std::fs::remove_dir_all(&path);
            }
            continue;
        }
        if path != current && path.is_dir() {
            let modified = entry.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
            dirs.push((modified, path));
        }
    }
    dirs.sort_by_key(|d| std::cmp::Reverse(d.0));
    for (_, path) in dirs.into_iter().skip(KEEP_INDEXES.saturating_sub(1)) {
        tracing::info!(dir = %path.display(), "removing an old index");
        let _ = std::fs::remove_dir_all(&path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Index {
        let docs = vec!["weather forecast".to_string(), "exchange rates".to_string()];
        let mut dense = Dense::new(2, vec![1.0, 0.0, 0.0, 1.0], None);
        dense.build_hnsw();
        Index { dense, bm25: Bm25::build(&docs), tools: Bm25::build(&docs[..1]) }
    }

    #[test]
    fn saved_indexes_load_and_problems_are_named() {
        let state = tempfile::tempdir().unwrap();
        let dir = index_dir(state.path(), "abcdef0123456789ff");
        assert!(matches!(load(&dir, "abcdef0123456789ff", Some("m")), Err(Unusable::Missing(_))));
        let index = sample();
        save(&dir, "abcdef0123456789ff", "m", &index).unwrap();
        let (manifest, loaded) = load(&dir, "abcdef0123456789ff", Some("m")).unwrap();
        assert_eq!((manifest.apis, manifest.dims), (2, 2));
        assert!(loaded.dense.hnsw().is_some());
        assert_eq!(loaded.dense.vector(1), &[0.0, 1.0]);
        assert_eq!(loaded.tools.len(), 1);

        let err = load(&dir, "abcdef0123456789ff", Some("other-model")).unwrap_err().to_string();
        assert!(err.contains("stale") && err.contains("other-model"), "{err}");
        let err = load(&dir, "abcdef0123456789ee", Some("m")).unwrap_err().to_string();
        assert!(err.contains("stale") && err.contains("built for catalog"), "{err}");

        // One flipped byte is caught by the checksum.
        let path = dir.join(VECTORS);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[3] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let err = load(&dir, "abcdef0123456789ff", Some("m")).unwrap_err();
        assert!(matches!(err, Unusable::Damaged { .. }), "{err}");
        std::fs::write(dir.join(MANIFEST), "{").unwrap();
        assert!(matches!(load(&dir, "abcdef0123456789ff", None), Err(Unusable::Damaged { .. })));
        // Rewriting over a damaged index works.
        save(&dir, "abcdef0123456789ff", "m", &index).unwrap();
        assert!(load(&dir, "abcdef0123456789ff", None).is_ok());
    }

    #[test]
    fn old_indexes_are_pruned() {
        let state = tempfile::tempdir().unwrap();
        let index = sample();
        for i in 0..5 {
            let hash = format!("{i}{}", "0".repeat(17));
            save(&index_dir(state.path(), &hash), &hash, "m", &index).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let left = std::fs::read_dir(state.path().join("index")).unwrap().count();
        assert_eq!(left, KEEP_INDEXES);
    }
}
