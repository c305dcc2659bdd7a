//! Why an engine operation failed (not an API call: see [`super::Called`]),
//! in the terms a face needs to answer: the request's fault, the
//! server's, or a bug.

/// Errors of the engine's operations (not of an API call: see [`super::Called`]).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The request's fault (an empty query): faces answer 400.
    #[error("{0}")]
    BadInput(String),
    /// The search index or the embedding model failed (faces answer 503;
    /// what to do about it is in the server's log, not in the answer).
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
}

impl From<crate::retrieval::RetrievalError> for EngineError {
    /// Only an empty query is the client's fault; an index or a model that
    /// fails is the server's, logged with the fix (`toolrouter index`…).
    fn from(e: crate::retrieval::RetrievalError) -> EngineError {
        match e {
            crate::retrieval::RetrievalError::EmptyQuery => EngineError::BadInput(e.to_string()),
            e => {
                tracing::error!(error = %e, "search failed");
                EngineError::Unavailable(
                    "the search index or the embedding model failed; the server's log says why".into(),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only an empty query is the client's fault; a failed index or model
    /// is the server's, and its fix stays in the log, not in the answer.
    #[test]
    fn retrieval_failures_are_the_servers_not_the_clients() {
        use crate::retrieval::RetrievalError;
        assert!(matches!(EngineError::from(RetrievalError::EmptyQuery), EngineError::BadInput(_)));
        let io = RetrievalError::Io { context: "reading /state/index".into(), source: std::io::Error::other("gone") };
        let EngineError::Unavailable(message) = EngineError::from(io) else {
            panic!("an unreadable index is the server's")
        };
        assert!(!message.contains("/state") && !message.contains("toolrouter index"), "{message}");
    }
}
