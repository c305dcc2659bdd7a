//! `toolrouter audit`: the audit log's entries (every file of the state
//! directory's `audit/`), oldest first ([`crate::audit`]).

use std::process::ExitCode;

use clap::Args;

use super::CliError;
use crate::audit::{Decision, read_all};
use crate::config::Config;

#[derive(Debug, Args)]
pub(super) struct AuditArgs {
    /// Only the last N entries.
    #[arg(long, value_name = "N")]
    last: Option<usize>,
    /// Only refused calls.
    #[arg(long)]
    refused: bool,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: &AuditArgs, config: &Config) -> Result<ExitCode, CliError> {
    let state = config.state.dir();
    let entries = read_all(&state).map_err(|e| {
        CliError::Failure(anyhow::anyhow!("reading the audit log in {}: {e}", state.join("audit").display()))
    })?;
    let mut entries: Vec<_> =
        entries.into_iter().filter(|e| !args.refused || e.decision == Decision::Refused).collect();
    if let Some(n) = args.last {
        entries.drain(..entries.len().saturating_sub(n));
    }
    for e in &entries {
        if args.json {
            println!("{}", serde_json::to_string(e).map_err(anyhow::Error::from)?);
            continue;
        }
        let what = match (&e.reason, &e.outcome) {
            (Some(reason), _) => format!("refused: {reason}"),
            (None, Some(outcome)) => outcome.clone(),
            (None, None) => String::new(),
        };
        println!(
            "{} {} {} {} {} {:.1} ms",
            e.at_unix_ms,
            e.client.as_deref().unwrap_or("-"),
            e.via,
            e.tool,
            what,
            e.duration_ms
        );
    }
    Ok(ExitCode::SUCCESS)
}
