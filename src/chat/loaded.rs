//! The tools each conversation's tool searches loaded ([`super::search`]),
//! remembered for its later turns.

use std::num::NonZeroUsize;
use std::sync::Mutex;

use lru::LruCache;

use super::tools::ToolList;
use crate::llm::wire::Message;

/// Conversations whose loaded tools are remembered.
const CONVERSATIONS: usize = 10_000;

/// The tools each conversation's searches loaded, by its opening (the
/// first user message) and its tool list, so that a later turn finds them
/// loaded although its client never saw the searches (chat completions;
/// a Responses client with `store: false` that sends only new items). In
/// memory, per replica: a turn another replica serves may search again.
pub(crate) struct Loaded {
    inner: Mutex<LruCache<u64, Vec<String>>>,
}

impl Default for Loaded {
    fn default() -> Loaded {
        Loaded { inner: Mutex::new(LruCache::new(NonZeroUsize::new(CONVERSATIONS).expect("not zero"))) }
    }
}

impl Loaded {
    /// The key of a conversation opening with `messages` over `tools`.
    pub(super) fn key(messages: &[Message], tools: &ToolList) -> u64 {
        let opening = messages.iter().find(|m| m.is("user")).map(Message::text).unwrap_or_default();
        let mut text = opening;
        for tool in tools.iter() {
            text.push('\0');
            text.push_str(&tool.name);
        }
        xxhash_rust::xxh3::xxh3_64(text.as_bytes())
    }

    pub(super) fn get(&self, key: u64) -> Vec<String> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).get(&key).cloned().unwrap_or_default()
    }

    pub(super) fn put(&self, key: u64, names: Vec<String>) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).put(key, names);
    }
}
