//! Route mode's tool vectors shared by the replicas: a tool one replica
//! embedded is known to all of them, so a list first seen by another
//! replica is ranked with the embedding at once.
//!
//! Each vector is one Redis string, `<prefix>:toolvec:<key in hex>` (the
//! key is the SHA-256 of the model id and the text embedded:
//! [`crate::retrieval::cache::key`], so two models never share a vector),
//! holding its floats little-endian; it expires after
//! `cluster.tool_vectors_ttl_s`, renewed whenever a replica embeds the
//! tool again. A replica reads the vectors it lacks before embedding
//! (within `cluster.timeout_ms`) and writes each batch it embeds.

use std::time::Duration;

use super::Cluster;
use crate::retrieval::cache::Key;

/// Keys read per `MGET` (one pipeline holds them all).
const READ_BATCH: usize = 256;

impl Cluster {
    /// The vectors of `keys` that some replica shared, as (key, vector);
    /// values that are not `dims` floats are left out. Empty when Redis
    /// does not answer in time.
    pub(crate) async fn tool_vectors(&self, keys: &[Key], dims: usize) -> Vec<(Key, Vec<f32>)> {
        if keys.is_empty() || dims == 0 {
            return Vec::new();
        }
        let mut pipe = redis::pipe();
        for chunk in keys.chunks(READ_BATCH) {
            let names: Vec<String> = chunk.iter().map(|k| self.tool_vector_key(k)).collect();
            pipe.cmd("MGET").arg(names);
        }
        let mut connection = self.connection.clone();
        let Ok(replies) = self.run(pipe.query_async::<Vec<Vec<Option<Vec<u8>>>>>(&mut connection)).await else {
            return Vec::new();
        };
        let values = replies.into_iter().flatten();
        keys.iter().zip(values).filter_map(|(key, bytes)| Some((*key, floats(&bytes?, dims)?))).collect()
    }

    /// Shares vectors this replica embedded, for `ttl`; whether Redis took them.
    pub(crate) async fn share_tool_vectors(&self, entries: &[(Key, std::sync::Arc<[f32]>)], ttl: Duration) -> bool {
        if entries.is_empty() {
            return true;
        }
        let mut pipe = redis::pipe();
        for (key, vector) in entries {
            let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
            pipe.cmd("SET").arg(self.tool_vector_key(key)).arg(bytes).arg("EX").arg(ttl.as_secs().max(1)).ignore();
        }
        let mut connection = self.publisher.clone();
        self.run_within(self.bulk_timeout, pipe.query_async::<()>(&mut connection)).await.is_ok()
    }

    fn tool_vector_key(&self, key: &Key) -> String {
        self.key("toolvec", &crate::retrieval::embedder::hex(key))
    }
}

/// `bytes` as `dims` little-endian floats, if that is what they are.
fn floats(bytes: &[u8], dims: usize) -> Option<Vec<f32>> {
    (bytes.len() == 4 * dims)
        .then(|| bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

#[cfg(test)]
mod tests {
    use super::floats;

    #[test]
    fn only_whole_vectors_of_the_right_length_are_read() {
        let bytes: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(floats(&bytes, 2), Some(vec![1.5, -2.0]));
        assert_eq!(floats(&bytes, 3), None);
        assert_eq!(floats(&bytes[..7], 2), None);
    }
}
