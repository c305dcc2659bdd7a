//! The vectors of the tools clients have sent (route mode), one per tool
//! text, whatever list it came in.
//!
//! A tool is embedded once, keyed by the SHA-256 of the model id and the
//! text embedded ([`super::cache::key`]): any list made of known tools,
//! in any order, any subset, is ranked with the embedding at once. The
//! store is an LRU bounded by entries and by bytes; with a directory it
//! is kept across restarts in the embedding cache's file format
//! (`<dir>/<model id>.emb`: a header, then 32-byte keys each followed by
//! the vector; read by [`super::cache::open_records`]), appended and
//! fsync'd batch by batch. The file is
//! rewritten atomically (a temporary file, fsync, rename, directory fsync)
//! from what the LRU holds when it has twice as many records, so it stays
//! bounded too. Being a cache, a damaged file is set aside and a new one
//! started; a torn last record is cut off.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use lru::LruCache;

use super::cache::{Key, MAGIC, open_records};

/// How many tool vectors are kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bounds {
    pub(crate) entries: usize,
    pub(crate) bytes: usize,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds { entries: 20_000, bytes: 64 << 20 }
    }
}

/// The tool vectors of one model.
pub(crate) struct ToolVectors {
    inner: Mutex<Option<Store>>,
    dir: Option<PathBuf>,
    bounds: Bounds,
}

struct Store {
    model: String,
    dims: usize,
    map: LruCache<Key, Arc<[f32]>>,
    file: Option<Log>,
}

/// The store's file: where it is, and how many records it holds.
struct Log {
    path: PathBuf,
    file: File,
    records: usize,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ToolVectors {
    /// An empty store; `dir`: where it is kept across restarts (`None`: memory only).
    pub(crate) fn new(dir: Option<PathBuf>, bounds: Bounds) -> ToolVectors {
        ToolVectors { inner: Mutex::new(None), dir, bounds }
    }

    /// Vectors held (of the model last used).
    pub(crate) fn len(&self) -> usize {
        locked(&self.inner).as_ref().map_or(0, |s| s.map.len())
    }

    /// The vectors of `keys` under `model` (`None` where not held).
    pub(crate) fn get(&self, model: &str, dims: usize, keys: &[Key]) -> Vec<Option<Arc<[f32]>>> {
        let mut inner = locked(&self.inner);
        let store = self.store(&mut inner, model, dims);
        keys.iter().map(|k| store.map.get(k).cloned()).collect()
    }

    /// Keeps new vectors (and writes them to the file, when there is one).
    pub(crate) fn put(&self, model: &str, entries: Vec<(Key, Vec<f32>)>) {
        let Some(dims) = entries.first().map(|(_, v)| v.len()) else { return };
        let mut inner = locked(&self.inner);
        let store = self.store(&mut inner, model, dims);
        if let Some(log) = &mut store.file
            && let Err(e) = log.append(&entries, dims)
        {
            tracing::warn!(file = %log.path.display(), error = %e, "tool vectors are no longer written to disk");
            store.file = None;
        }
        for (key, vector) in entries.into_iter().filter(|(_, v)| v.len() == dims) {
            store.map.put(key, vector.into());
        }
        let capacity = store.map.cap().get();
        if let Some(log) = &mut store.file
            && log.records > 2 * capacity
            && let Err(e) = log.rewrite(&store.map, dims)
        {
            tracing::warn!(file = %log.path.display(), error = %e, "tool vectors are no longer written to disk");
            store.file = None;
        }
    }

    /// The store of `model`, opened (and read from its file) on first use.
    fn store<'a>(&self, inner: &'a mut Option<Store>, model: &str, dims: usize) -> &'a mut Store {
        if inner.as_ref().is_some_and(|s| s.model == model && s.dims == dims) {
            return inner.as_mut().expect("checked");
        }
        let per_entry = 32 + 4 * dims.max(1) + 64;
        let capacity = self.bounds.entries.min(self.bounds.bytes / per_entry).max(1);
        let mut map = LruCache::new(NonZeroUsize::new(capacity).expect("at least 1"));
        let file = self.dir.as_ref().and_then(|dir| match Log::open(dir, model, dims, &mut map) {
            Ok(log) => Some(log),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "tool vectors are kept in memory only");
                None
            }
        });
        inner.insert(Store { model: model.to_string(), dims, map, file })
    }
}

impl Log {
    /// Opens (or starts) `<dir>/<model>.emb`, reading its records into `map` (oldest first).
    fn open(dir: &Path, model: &str, dims: usize, map: &mut LruCache<Key, Arc<[f32]>>) -> std::io::Result<Log> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{model}.emb"));
        let (file, records) = open_records(&path, dims, |key, vector| {
            map.put(key, vector.into());
        })?;
        Ok(Log { path, file, records })
    }

    fn append(&mut self, entries: &[(Key, Vec<f32>)], dims: usize) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(entries.len() * (32 + 4 * dims));
        for (key, vector) in entries.iter().filter(|(_, v)| v.len() == dims) {
            buf.extend_from_slice(key);
            buf.extend(vector.iter().flat_map(|x| x.to_le_bytes()));
            self.records += 1;
        }
        self.file.write_all(&buf)?;
        self.file.sync_data()
    }

    /// Replaces the file with the records `map` holds, least recent first.
    fn rewrite(&mut self, map: &LruCache<Key, Arc<[f32]>>, dims: usize) -> std::io::Result<()> {
        write_new(&self.path, dims, map.iter().rev())?;
        self.file = OpenOptions::new().append(true).open(&self.path)?;
        self.records = map.len();
        Ok(())
    }
}

/// Writes `path` anew, atomically: a temporary file beside it, fsync'd,
/// renamed over it, the directory fsync'd.
fn write_new<'a>(
    path: &Path,
    dims: usize,
    records: impl Iterator<Item = (&'a Key, &'a Arc<[f32]>)>,
) -> std::io::Result<()> {
    let tmp = path.with_extension("emb.tmp");
    let mut out = std::io::BufWriter::new(File::create(&tmp)?);
    out.write_all(MAGIC)?;
    out.write_all(&(dims as u32).to_le_bytes())?;
    for (key, vector) in records {
        out.write_all(key)?;
        for x in vector.iter() {
            out.write_all(&x.to_le_bytes())?;
        }
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::cache::{HEADER, key};

    #[test]
    fn vectors_are_bounded_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let bounds = Bounds { entries: 10, bytes: usize::MAX };
        let store = ToolVectors::new(Some(dir.path().to_path_buf()), bounds);
        for round in 0..5 {
            let entries = (0..10).map(|i| (key("m", &format!("{round}-{i}")), vec![i as f32, round as f32])).collect();
            store.put("m", entries);
        }
        assert_eq!(store.len(), 10, "the LRU holds its bound");
        let file = dir.path().join("m.emb");
        let size = std::fs::metadata(&file).unwrap().len() as usize;
        assert!(size <= HEADER + 2 * 10 * (32 + 8) + 10 * (32 + 8), "the file is rewritten when it doubles: {size}");
        drop(store);
        let again = ToolVectors::new(Some(dir.path().to_path_buf()), bounds);
        let got = again.get("m", 2, &[key("m", "4-3"), key("m", "0-3")]);
        assert_eq!(got[0].as_deref(), Some(&[3.0, 4.0][..]), "the latest round is back after a restart");
        assert!(got[1].is_none(), "the oldest were evicted");
        // A torn tail is cut off; what came before it stays.
        let mut f = OpenOptions::new().append(true).open(&file).unwrap();
        f.write_all(&[1, 2, 3]).unwrap();
        drop((f, again));
        let torn = ToolVectors::new(Some(dir.path().to_path_buf()), bounds);
        assert!(torn.get("m", 2, &[key("m", "4-9")])[0].is_some());
        assert_eq!((std::fs::metadata(&file).unwrap().len() as usize - HEADER) % (32 + 8), 0);
    }

    #[test]
    fn the_byte_bound_holds_and_a_bad_file_is_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("m.emb"), b"not a vector file").unwrap();
        let store = ToolVectors::new(Some(dir.path().to_path_buf()), Bounds { entries: 1_000, bytes: 4 * 1_600 });
        store.put("m", (0..100).map(|i| (key("m", &i.to_string()), vec![0.5; 384])).collect());
        assert!(store.len() <= 4, "{}", store.len());
        assert!(dir.path().join("m.emb.corrupt").exists());
    }
}
