//! The embedding cache: vectors keyed by the hash of (model id, text).
//!
//! One append-only file per model, `<cache_dir>/<model id>.emb`: an 8-byte
//! magic, the vector length as a little-endian `u32`, then records of a
//! 32-byte SHA-256 key and `dims` little-endian `f32`s. Re-indexing after a
//! catalog change embeds only texts whose key is missing. New records are
//! appended and fsync'd chunk by chunk, so an interrupted indexing run keeps
//! what it computed; a torn last record (a crash mid-write) is cut off when
//! the file is next opened. A file with the wrong magic or length is set
//! aside (`.corrupt`) and a fresh one started: the cache is only a cache.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::RetrievalError;
use super::embedder::{Embedder, Role};
use super::progress::Progress;

pub(super) const MAGIC: &[u8; 8] = b"TREMBED1";
pub(super) const HEADER: usize = 12;

/// A cache key: SHA-256 of the model id and the text.
pub(crate) type Key = [u8; 32];

/// The key of `text` under `model_id`.
pub(crate) fn key(model_id: &str, text: &str) -> Key {
    let mut h = Sha256::new();
    h.update(model_id.as_bytes());
    h.update([0]);
    h.update(text.as_bytes());
    h.finalize().into()
}

/// Opens the vector file `path` (this module's format) for appending,
/// handing each of its records, in order, to `each`; returns the file and
/// how many records it holds. A file with the wrong magic or length is set
/// aside (`.corrupt`) and a new one started; a torn last record (a crash
/// mid-write) is cut off. Records are read one by one, never the whole file
/// at once. The tool vectors' file ([`super::tool_vectors`]) is kept so too.
pub(super) fn open_records(
    path: &Path,
    dims: usize,
    mut each: impl FnMut(Key, &[f32]),
) -> std::io::Result<(File, usize)> {
    let record = 32 + 4 * dims;
    let mut header = [0u8; HEADER];
    let len = match File::open(path) {
        Ok(mut f) => {
            let len = f.metadata()?.len() as usize;
            let valid = len >= HEADER
                && f.read_exact(&mut header).is_ok()
                && &header[..8] == MAGIC
                && u32::from_le_bytes(header[8..12].try_into().expect("4 bytes")) as usize == dims;
            if len > 0 && !valid {
                let aside = path.with_extension("emb.corrupt");
                tracing::warn!(file = %path.display(), moved_to = %aside.display(), "vector file has a bad header; starting a new one");
                std::fs::rename(path, &aside)?;
                0
            } else {
                len
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e),
    };
    let mut file = OpenOptions::new().create(true).read(true).append(true).open(path)?;
    if len == 0 {
        let mut header = MAGIC.to_vec();
        header.extend((dims as u32).to_le_bytes());
        file.write_all(&header)?;
        file.sync_all()?;
    }
    let whole = len.saturating_sub(HEADER) / record;
    let torn = len.saturating_sub(HEADER) % record;
    if torn != 0 {
        tracing::warn!(file = %path.display(), bytes = torn, "cutting off a torn record at the end of a vector file");
        file.set_len((HEADER + whole * record) as u64)?;
        file.sync_all()?;
    }
    if whole > 0 {
        let mut reader = std::io::BufReader::with_capacity(1 << 16, File::open(path)?);
        reader.seek_relative(HEADER as i64)?;
        let mut rec = vec![0u8; record];
        let mut vector = Vec::with_capacity(dims);
        for _ in 0..whole {
            reader.read_exact(&mut rec)?;
            vector.clear();
            vector.extend(rec[32..].chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))));
            each(rec[..32].try_into().expect("32 bytes"), &vector);
        }
    }
    Ok((file, whole))
}

/// An open cache file with its records in memory.
#[derive(Debug)]
pub(crate) struct EmbeddingCache {
    path: PathBuf,
    dims: usize,
    index: HashMap<Key, usize>,
    vectors: Vec<f32>,
    file: File,
}

impl EmbeddingCache {
    /// Opens (or creates) the cache of `model_id` in `dir`, every record
    /// read into memory.
    pub(crate) fn open(dir: &Path, model_id: &str, dims: usize) -> std::io::Result<EmbeddingCache> {
        EmbeddingCache::open_keeping(dir, model_id, dims, |_| true)
    }

    /// Opens the cache keeping in memory only the records of `wanted`
    /// keys: a small catalog's index need not hold (even for a moment)
    /// the vectors of every catalog this machine has indexed (74 MB for
    /// ToolBench's).
    pub(crate) fn open_for(dir: &Path, model_id: &str, dims: usize, wanted: &[Key]) -> std::io::Result<EmbeddingCache> {
        let wanted: std::collections::HashSet<&Key> = wanted.iter().collect();
        EmbeddingCache::open_keeping(dir, model_id, dims, |key| wanted.contains(key))
    }

    /// Opens the cache, reading its records one by one (never the whole
    /// file at once) and keeping those `keep` wants.
    fn open_keeping(
        dir: &Path,
        model_id: &str,
        dims: usize,
        keep: impl Fn(&Key) -> bool,
    ) -> std::io::Result<EmbeddingCache> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{model_id}.emb"));
        let (mut index, mut vectors) = (HashMap::new(), Vec::new());
        let (file, _) = open_records(&path, dims, |key, vector| {
            if keep(&key) {
                index.insert(key, vectors.len());
                vectors.extend_from_slice(vector);
            }
        })?;
        Ok(EmbeddingCache { path, dims, index, vectors, file })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.index.len()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The cached vector of `key`.
    pub(crate) fn get(&self, key: &Key) -> Option<&[f32]> {
        self.index.get(key).map(|&at| &self.vectors[at..at + self.dims])
    }

    /// Appends new vectors and fsyncs the file.
    pub(crate) fn put(&mut self, entries: &[(Key, Vec<f32>)]) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(entries.len() * (32 + 4 * self.dims));
        for (key, vector) in entries {
            assert_eq!(vector.len(), self.dims, "vector length must match the cache");
            buf.extend_from_slice(key);
            buf.extend(vector.iter().flat_map(|x| x.to_le_bytes()));
        }
        self.file.write_all(&buf)?;
        self.file.sync_data()?;
        for (key, vector) in entries {
            let at = self.vectors.len();
            self.vectors.extend_from_slice(vector);
            self.index.insert(*key, at);
        }
        Ok(())
    }
}

/// Vectors of `texts` read in `role`: from the cache where it has them, the
/// rest embedded (in batches of `batch`, similar lengths together) and
/// added to it.
pub(crate) fn embed_through(
    cache: &mut EmbeddingCache,
    embedder: &Embedder,
    role: Role,
    texts: &[String],
    batch: usize,
) -> Result<Vec<Vec<f32>>, RetrievalError> {
    embed_through_counted(cache, embedder, role, texts, batch, None)
}

/// [`embed_through`], counting the texts it embeds as `stage` of
/// `progress` and logging every tenth, for the long ones (a memory of
/// thousands of runs embedded again after a change of model).
pub(crate) fn embed_through_counted(
    cache: &mut EmbeddingCache,
    embedder: &Embedder,
    role: Role,
    texts: &[String],
    batch: usize,
    shown: Option<(&Progress, &'static str)>,
) -> Result<Vec<Vec<f32>>, RetrievalError> {
    let keys: Vec<Key> = texts.iter().map(|t| key(embedder.id(), &embedder.as_read(role, t))).collect();
    embed_keyed(cache, embedder, role, texts, &keys, batch, shown)
}

/// [`embed_through_counted`] with the cache keys given (`keys[i]` is
/// `texts[i]`'s): for a caller that keys texts as the index build does.
pub(super) fn embed_keyed(
    cache: &mut EmbeddingCache,
    embedder: &Embedder,
    role: Role,
    texts: &[String],
    keys: &[Key],
    batch: usize,
    shown: Option<(&Progress, &'static str)>,
) -> Result<Vec<Vec<f32>>, RetrievalError> {
    let mut missing: Vec<usize> = (0..texts.len()).filter(|&i| cache.get(&keys[i]).is_none()).collect();
    missing.sort_by_key(|&i| (texts[i].len(), keys[i]));
    missing.dedup_by_key(|i| keys[*i]);
    let mut logged = 0;
    if let Some((progress, stage)) = shown {
        progress.count(stage, missing.len());
    }
    for chunk in missing.chunks(batch.max(1)) {
        let batch: Vec<String> = chunk.iter().map(|&i| texts[i].clone()).collect();
        let entries: Vec<(Key, Vec<f32>)> =
            chunk.iter().map(|&i| keys[i]).zip(embedder.embed_as(role, &batch)?).collect();
        cache.put(&entries).map_err(|source| RetrievalError::Io {
            context: format!("writing the embedding cache {}", cache.path().display()),
            source,
        })?;
        if let Some((progress, _)) = shown {
            progress.advance(chunk.len());
            progress.log_tenths(&mut logged);
        }
    }
    Ok(keys.iter().map(|k| cache.get(k).expect("every text is cached now").to_vec()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_survive_reopening_and_torn_tails_are_cut() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (key("m", "a"), key("m", "b"));
        assert_ne!(a, key("other-model", "a"));
        let mut cache = EmbeddingCache::open(dir.path(), "m", 3).unwrap();
        cache.put(&[(a, vec![1.0, 2.0, 3.0]), (b, vec![4.0, 5.0, 6.0])]).unwrap();
        let path = cache.path().to_path_buf();
        drop(cache);
        // A crash in the middle of the next record.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[7; 40]).unwrap();
        drop(f);
        let cache = EmbeddingCache::open(dir.path(), "m", 3).unwrap();
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&b), Some(&[4.0, 5.0, 6.0][..]));
        assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, HEADER + 2 * (32 + 12));
        // Opened for some keys, it holds those alone and still appends.
        let mut only_b = EmbeddingCache::open_for(dir.path(), "m", 3, &[b, key("m", "c")]).unwrap();
        assert_eq!((only_b.len(), only_b.get(&a), only_b.get(&b)), (1, None, Some(&[4.0, 5.0, 6.0][..])));
        only_b.put(&[(key("m", "c"), vec![0.0; 3])]).unwrap();
        assert_eq!(EmbeddingCache::open(dir.path(), "m", 3).unwrap().len(), 3);
    }

    #[test]
    fn a_file_with_another_shape_is_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = EmbeddingCache::open(dir.path(), "m", 3).unwrap();
        cache.put(&[(key("m", "a"), vec![1.0, 2.0, 3.0])]).unwrap();
        drop(cache);
        let cache = EmbeddingCache::open(dir.path(), "m", 4).unwrap();
        assert!(cache.is_empty());
        assert!(dir.path().join("m.emb.corrupt").exists());
        std::fs::write(dir.path().join("m.emb"), b"garbage").unwrap();
        assert!(EmbeddingCache::open(dir.path(), "m", 4).unwrap().is_empty());
    }
}
