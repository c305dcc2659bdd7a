//! `[args]`: how arguments are checked against an API's parameters, with
//! its defaults. The section has no checks beyond its types.

use serde::{Deserialize, Serialize};

/// Default of `args.strict`: reject parameters the API does not declare.
pub const DEFAULT_ARGS_STRICT: bool = true;
/// Default of `args.coerce`: apply the safe coercions before validating.
pub const DEFAULT_ARGS_COERCE: bool = true;

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
