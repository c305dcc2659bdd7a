//! `toolrouter validate <function-name> '<json args>'`: exit 0 when the
//! arguments are valid (the coerced arguments are printed), 1 when they are
//! not (every problem is printed, on stdout), 2 when the input is malformed.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::{Value, json};

use super::catalog::find;
use super::{CliError, EXIT_FAILURE, load_catalog};
use crate::args::{self, Options};
use crate::config::Config;

/// Largest arguments document read (from the command line, a file or stdin).
pub(crate) const MAX_ARGUMENTS_BYTES: u64 = 1 << 20;

#[derive(Debug, Args)]
pub(super) struct ValidateArgs {
    /// Function name (variant spellings of trajectories are accepted).
    function: String,
    /// Arguments as a JSON object; `-` reads stdin, `@FILE` reads a file.
    arguments: String,
    /// Also check a URL the call carries against the API's host and path.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Reject unknown parameters (default from `args.strict`).
    #[arg(long, overrides_with = "no_strict")]
    strict: bool,
    /// Pass unknown parameters through with a warning.
    #[arg(long)]
    no_strict: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(a: &ValidateArgs, config: &Config) -> Result<ExitCode, CliError> {
    let text = read_arguments(&a.arguments)?;
    let arguments: Value = serde_json::from_str(&text).map_err(|e| {
        CliError::Usage(format!(
            "the arguments are not valid JSON ({e}); pass a JSON object such as '{{\"q\": \"x\"}}'"
        ))
    })?;
    let catalog = load_catalog(config)?;
    let (api, _) = find(&catalog, &a.function)?;
    let mut options = Options::from(&config.args);
    if a.strict {
        options.strict = true;
    }
    if a.no_strict {
        options.strict = false;
    }
    let mut result = args::validate(api, &arguments, options);
    if let Some(url) = &a.url
        && let Err(problem) = args::check_url(api, url, &config.upstream.allowed_hosts)
    {
        result = match result {
            Ok(valid) => Err(args::Invalid {
                function: api.function_name.clone(),
                problems: vec![problem],
                coercions: valid.coercions,
            }),
            Err(mut invalid) => {
                invalid.problems.push(problem);
                Err(invalid)
            }
        };
    }
    if a.json {
        let report = match &result {
            Ok(v) => {
                json!({"function": api.function_name, "valid": true, "arguments": v.arguments, "coercions": v.coercions, "warnings": v.warnings})
            }
            Err(e) => {
                json!({"function": api.function_name, "valid": false, "problems": e.problems, "coercions": e.coercions})
            }
        };
        println!("{}", serde_json::to_string_pretty(&report).map_err(anyhow::Error::from)?);
    } else {
        match &result {
            Ok(v) => {
                println!("valid: {}", serde_json::to_string(&v.arguments).map_err(anyhow::Error::from)?);
                for c in &v.coercions {
                    println!("coerced: {c}");
                }
                for w in &v.warnings {
                    println!("warning: {w}");
                }
            }
            Err(e) => println!("{e}"),
        }
    }
    Ok(if result.is_ok() { ExitCode::SUCCESS } else { ExitCode::from(EXIT_FAILURE) })
}

pub(super) fn read_arguments(spec: &str) -> Result<String, CliError> {
    let too_big = || CliError::Usage(format!("the arguments exceed {MAX_ARGUMENTS_BYTES} bytes"));
    let mut text = String::new();
    if spec == "-" {
        std::io::stdin()
            .take(MAX_ARGUMENTS_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| CliError::Usage(format!("cannot read the arguments from stdin: {e}")))?;
    } else if let Some(path) = spec.strip_prefix('@') {
        let path = PathBuf::from(path);
        let file =
            std::fs::File::open(&path).map_err(|e| CliError::Usage(format!("cannot read {}: {e}", path.display())))?;
        file.take(MAX_ARGUMENTS_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", path.display())))?;
    } else {
        text = spec.to_string();
    }
    if text.len() as u64 > MAX_ARGUMENTS_BYTES {
        return Err(too_big());
    }
    Ok(text)
}
