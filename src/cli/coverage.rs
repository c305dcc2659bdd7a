//! `toolrouter catalog coverage --trajectories PATH...`: how many of the
//! function names recorded in trajectories the catalog resolves, and why
//! the others do not resolve. Markdown by default, JSON with `--json`.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{CliError, load_trajectories};
use crate::catalog::Catalog;
use crate::trajectory::resolve::{Cause, coverage};

/// Longest name shown in the Markdown lists (prose "names" are cut).
const NAME_SHOWN: usize = 80;

pub(super) fn run(catalog: &Catalog, paths: &[PathBuf], json: bool) -> Result<ExitCode, CliError> {
    if paths.is_empty() {
        return Err(CliError::Usage("give at least one --trajectories PATH".into()));
    }
    let (trajectories, skipped) = load_trajectories(paths)?;
    let cov = coverage(catalog, &trajectories);
    if json {
        println!("{}", serde_json::to_string_pretty(&cov).map_err(anyhow::Error::from)?);
        return Ok(ExitCode::SUCCESS);
    }
    let pct = |a: usize, b: usize| if b == 0 { 0.0 } else { 100.0 * a as f64 / b as f64 };
    println!(
        "{} trajectories ({skipped} files or records skipped), {} calls, {} distinct names.\n",
        cov.trajectories, cov.calls, cov.distinct_names
    );
    println!("| | calls | % | distinct names | % |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    println!(
        "| resolved | {} | {:.1} | {} | {:.1} |",
        cov.resolved_calls,
        100.0 * cov.call_rate(),
        cov.resolved_names,
        100.0 * cov.name_rate()
    );
    for (by, label) in [
        ("function_name", "… by function name"),
        ("variant", "… by a variant spelling"),
        ("ambiguous", "… of which ambiguous (holder taken)"),
    ] {
        let n = cov.resolved_by.get(by).copied().unwrap_or(0);
        println!("| {label} | {n} | {:.1} | | |", pct(n, cov.calls));
    }
    for (cause, u) in &cov.unresolved {
        println!(
            "| unresolved: {} | {} | {:.1} | {} | {:.1} |",
            name(*cause),
            u.calls,
            pct(u.calls, cov.calls),
            u.names.len(),
            pct(u.names.len(), cov.distinct_names)
        );
    }
    println!("\n| format | calls | resolved | % |");
    println!("| --- | ---: | ---: | ---: |");
    for (format, c) in &cov.by_format {
        println!("| {format} | {} | {} | {:.1} |", c.calls, c.resolved, pct(c.resolved, c.calls));
    }
    for (cause, u) in &cov.unresolved {
        println!(
            "\n<details><summary>{} ({} names, {} calls): {}</summary>\n",
            name(*cause),
            u.names.len(),
            u.calls,
            cause.describe()
        );
        for n in &u.names {
            let mut shown: String = n.name.chars().take(NAME_SHOWN).collect();
            if n.name.chars().count() > NAME_SHOWN {
                shown.push('…');
            }
            let shown = shown.replace('`', "'").replace(['\n', '\r'], " ");
            println!("- `{shown}` ×{}", n.calls);
        }
        println!("\n</details>");
    }
    Ok(ExitCode::SUCCESS)
}

fn name(cause: Cause) -> &'static str {
    match cause {
        Cause::Malformed => "malformed",
        Cause::Hallucinated => "hallucinated",
        Cause::ToolMissing => "tool missing from the catalog",
        Cause::ApiMissing => "API missing from its tool",
    }
}
