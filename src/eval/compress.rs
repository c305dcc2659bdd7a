//! Compression over every recorded response of a replay table: how many
//! are over the budget before and after, characters saved, and whether
//! every output is valid JSON within the budget.

use serde::Serialize;

use crate::catalog::Catalog;
use crate::compress::compress;
use crate::upstream::{ReplayTable, replay_body};

/// One response before and after.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Pair {
    pub(crate) function: String,
    pub(crate) before: String,
    pub(crate) after: String,
}

/// The figures of one run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    pub(crate) budget: usize,
    pub(crate) responses: usize,
    pub(crate) over_budget_before: usize,
    pub(crate) over_budget_after: usize,
    pub(crate) invalid_json_after: usize,
    /// Over the responses that were over the budget.
    pub(crate) mean_chars_saved: f64,
    pub(crate) p95_chars_saved: f64,
    pub(crate) mean_chars_before: f64,
    pub(crate) mean_chars_after: f64,
    pub(crate) max_chars_after: usize,
    /// The largest responses, before and after.
    pub(crate) samples: Vec<Pair>,
}

/// Compresses every successful recording of `table` to `budget`.
pub(crate) fn evaluate(table: &ReplayTable, catalog: &Catalog, budget: usize, samples: usize) -> Report {
    let mut saved = Vec::new();
    let (mut over_before, mut over_after, mut invalid, mut max_after) = (0, 0, 0, 0);
    let (mut sum_before, mut sum_after) = (0usize, 0usize);
    let mut pairs: Vec<(usize, Pair)> = Vec::new();
    let mut n = 0;
    let mut recordings: Vec<_> = table.iter().filter(|(_, r)| r.error.is_empty()).collect();
    recordings.sort_by_key(|(api, r)| (api.0, r.arguments.len()));
    for (api, recording) in recordings {
        let api = catalog.api(api);
        let body = replay_body(&recording.response);
        let context = format!("{} {}", api.description, serde_json::Value::Object(recording.arguments.clone()));
        let c = compress(&body, &context, budget, None);
        n += 1;
        sum_before += c.chars_before;
        sum_after += c.chars_after;
        max_after = max_after.max(c.chars_after);
        if serde_json::from_str::<serde_json::Value>(&c.text).is_err() {
            invalid += 1;
        }
        if c.chars_after > budget {
            over_after += 1;
        }
        if c.chars_before > budget {
            over_before += 1;
            saved.push((c.chars_before - c.chars_after) as f64);
            pairs.push((
                c.chars_before,
                Pair { function: api.function_name.clone(), before: body.to_string(), after: c.text },
            ));
        }
    }
    saved.sort_by(f64::total_cmp);
    pairs.sort_by_key(|p| std::cmp::Reverse(p.0));
    let mean = |sum: usize| if n == 0 { 0.0 } else { sum as f64 / n as f64 };
    Report {
        budget,
        responses: n,
        over_budget_before: over_before,
        over_budget_after: over_after,
        invalid_json_after: invalid,
        mean_chars_saved: if saved.is_empty() { 0.0 } else { saved.iter().sum::<f64>() / saved.len() as f64 },
        p95_chars_saved: saved.get(((saved.len().max(1) - 1) as f64 * 0.95).round() as usize).copied().unwrap_or(0.0),
        mean_chars_before: mean(sum_before),
        mean_chars_after: mean(sum_after),
        max_chars_after: max_after,
        samples: pairs.into_iter().take(samples).map(|(_, p)| p).collect(),
    }
}
