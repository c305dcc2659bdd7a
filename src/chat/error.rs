//! Why the chat core could not answer: one typed error, in no protocol's
//! shape. Each face turns it into its own (OpenAI's error object with its
//! status, Anthropic's, a stream's error event).

use crate::engine::EngineError;
use crate::engine::loading::NotReady;
use crate::llm::LlmError;

/// Why a chat request was not answered.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The request is wrong; `param` names the field (`messages[2].role`).
    #[error("{message}")]
    Invalid { message: String, param: Option<String> },
    /// The request names a model this server does not serve.
    #[error("the model `{0}` does not exist; see GET /v1/models")]
    UnknownModel(String),
    /// The model server failed or refused, after toolrouter's own retries.
    #[error(transparent)]
    Model(#[from] LlmError),
    /// Plan mode's search failed; `param`: the field whose words it searched.
    #[error("{0}")]
    Engine(EngineError),
    /// Plan and execute modes need the engine, still loading or failed.
    #[error(transparent)]
    NotReady(NotReady),
    /// Execute mode already runs `openai.max_runs` requests.
    #[error("{0} execute runs are in flight (openai.max_runs); try again shortly")]
    Busy(usize),
    /// The model's tool calls stayed invalid after every repair.
    #[error("the model's tool call arguments stayed invalid after {repairs} repair attempt(s): {detail}")]
    InvalidToolCalls { repairs: usize, detail: String },
    /// The caller's policy does not allow a tool the request forces.
    #[error("{0}")]
    NotAllowed(String),
    /// An execute run ended without an answer (its task panicked).
    #[error("the run failed: {0}")]
    RunFailed(String),
}

impl ChatError {
    /// The request is wrong at `param`.
    pub(crate) fn invalid(message: impl Into<String>, param: Option<&str>) -> ChatError {
        ChatError::Invalid { message: message.into(), param: param.map(str::to_string) }
    }
}
