//! Who chooses the next move of the DFS, and the deterministic chooser.
//!
//! A [`Decider`] sees the task, the path so far, the candidates (each with
//! its transition weight `w` from the current node, availability `α`,
//! retrieval similarity to every part of the task, and long-term memory
//! hint) and the short-term memory of earlier moves, and answers
//! [`Move::Next`], [`Move::Finish`] or [`Move::Backtrack`]. After a finish
//! it judges the path ([`Reflection`]). The methods are async so that an
//! LLM decider (which asks a model) fits the same trait.
//!
//! [`DeterministicDecider`] (docs/architecture.md §5) needs no model. A candidate's score
//! is a weighted mix of its relevance to the task (its retrieval score over
//! the best one), its similarity to the parts of the task not served yet,
//! `w` and `α`, plus a memory hint. It takes the best candidate while that
//! stays relevant enough, follows a strong graph edge to a relevant API,
//! and finishes otherwise.

use std::future::Future;

use serde::Serialize;
use serde_json::{Map, Value};

use super::Step;
use crate::args::Problem;
use crate::catalog::{Api, ApiId};

/// Weight of the relevance to the whole task in a candidate's score.
pub(crate) const RELEVANCE_WEIGHT: f64 = 1.0;
/// Weight of the similarity to the task's unserved parts.
pub(crate) const PART_WEIGHT: f64 = 0.1;
/// Weight of the transition weight `w`.
pub(crate) const W_WEIGHT: f64 = 0.5;
/// Weight of availability (centred on 0.5).
pub(crate) const ALPHA_WEIGHT: f64 = 0.1;
/// Weight of a long-term memory hint.
pub(crate) const HINT_WEIGHT: f64 = 0.3;
/// A candidate serves a part when its similarity to it (1 / its rank in the
/// part's own ranking) is at least this: it is among the part's three best.
pub(crate) const MIN_GAIN: f32 = 0.3;
/// Further steps need a relevance (retrieval score over the best) of at
/// least this. Swept on the development sets (`eval plan --min-relevance
/// 0.5,0.7,0.8,0.85,0.9`): 0.8 has the best F1 with the fewest steps.
pub(crate) const MIN_RELEVANCE: f32 = 0.8;
/// Steps taken whatever their relevance (while a candidate has some): the
/// development queries need two APIs on average, and a plan shorter than
/// the retrieval ranking's top two lost to it (0.386 vs 0.420 F1).
pub(crate) const MIN_STEPS: usize = 2;
/// A step within [`MIN_STEPS`] still needs this much relevance.
pub(crate) const MIN_STEP_RELEVANCE: f32 = 0.2;
/// A graph edge this heavy (and heavier than `Finish`) is followed…
pub(crate) const FOLLOW_W: f64 = 0.5;
/// …to an API at least this relevant.
pub(crate) const FOLLOW_RELEVANCE: f32 = 0.2;

/// Where a candidate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// An out-neighbour of the current node in the tool graph.
    Graph,
    /// The retrieval ranking of the task (or of one of its parts).
    Retrieval,
}

/// One API the decider may choose.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    pub(crate) api: ApiId,
    pub(crate) function: String,
    /// Transition weight from the current node (0 from the start or without an edge).
    pub(crate) w: f64,
    pub(crate) alpha: f64,
    /// Relevance to the task: its retrieval score over the best one (0 if unranked).
    pub(crate) relevance: f32,
    /// Place in the task's retrieval ranking (from 1; `None`: unranked),
    /// which orders candidates of equal score.
    pub(crate) rank: Option<usize>,
    /// Similarity to each text, the whole task first, then each part:
    /// 1 / the candidate's rank in that text's retrieval ranking (0 if unranked).
    pub(crate) similarity: Vec<f32>,
    /// Similarity of the task to a remembered successful task whose path used this API.
    pub(crate) hint: f32,
    /// How much similar tasks saw it fail lately (0 to 1; `relevance` and
    /// `hint` are already lowered by it).
    pub(crate) failed_lately: f32,
    pub(crate) source: Source,
}

impl Candidate {
    /// The best similarity to any of `parts` (text indexes).
    pub(crate) fn gain(&self, parts: &[usize]) -> f32 {
        parts.iter().map(|&t| self.similarity.get(t).copied().unwrap_or(0.0)).fold(0.0, f32::max)
    }
}

/// A move of the search.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "move", rename_all = "snake_case")]
pub enum Move {
    /// Call this API next.
    Next {
        api: ApiId,
        reason: String,
        /// The arguments the decider chose (a model does); `None`: the
        /// planner fills them from the request.
        #[serde(skip_serializing_if = "Option::is_none")]
        arguments: Option<Map<String, Value>>,
    },
    /// The task is done (or nothing useful is left).
    Finish { reason: String },
    /// Undo the last step.
    Backtrack { reason: String },
}

/// A judgement of a finished path.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Reflection {
    Success,
    /// Steps from `first_bad` on went wrong: cut back to it and go on.
    Partial {
        first_bad: usize,
    },
    /// Nothing useful came out: restart without these roots.
    Failure {
        drop_roots: Vec<ApiId>,
    },
}

/// What the decider sees.
#[derive(Debug)]
pub struct View<'a> {
    /// The task's texts: the whole task, then its parts (intents).
    pub(crate) texts: &'a [String],
    /// Text indexes the path does not serve yet (parts, or the whole task if it has none).
    pub(crate) unserved: &'a [usize],
    pub(crate) path: &'a [Step],
    pub(crate) candidates: &'a [Candidate],
    /// `w(current node, Finish)` (0 from the start or without a graph).
    pub(crate) finish_w: f64,
    /// Earlier moves and their reasons (short-term memory).
    pub(crate) memory: &'a [String],
    /// Remembered successful runs on similar tasks (long-term memory), closest first.
    pub(crate) examples: &'a [super::Example],
}

/// Chooses moves and judges paths.
pub trait Decider: Sync {
    fn decide(&self, view: &View<'_>) -> impl Future<Output = Move> + Send;
    fn reflect(&self, task: &str, path: &[Step]) -> impl Future<Output = Reflection> + Send;

    /// New arguments for `api` after `arguments` broke its schema with
    /// `problems` (`None`: this decider cannot repair; the step fails).
    fn repair(
        &self,
        _view: &View<'_>,
        _api: &Api,
        _arguments: &Map<String, Value>,
        _problems: &[Problem],
    ) -> impl Future<Output = Option<Map<String, Value>>> + Send {
        async { None }
    }
}

/// The deterministic decider (docs/architecture.md §5).
#[derive(Debug, Clone)]
pub struct DeterministicDecider {
    /// Never follow graph edges on their own account.
    pub(crate) ignore_graph: bool,
    /// See [`MIN_RELEVANCE`].
    pub(crate) min_relevance: f32,
    /// See [`MIN_STEPS`].
    pub(crate) min_steps: usize,
}

impl Default for DeterministicDecider {
    fn default() -> Self {
        DeterministicDecider { ignore_graph: false, min_relevance: MIN_RELEVANCE, min_steps: MIN_STEPS }
    }
}

impl DeterministicDecider {
    /// A candidate's score for the current view.
    pub(crate) fn score(c: &Candidate, unserved: &[usize]) -> f64 {
        RELEVANCE_WEIGHT * c.relevance as f64
            + PART_WEIGHT * c.gain(unserved) as f64
            + W_WEIGHT * c.w
            + ALPHA_WEIGHT * (c.alpha - 0.5)
            + HINT_WEIGHT * c.hint as f64
    }

    fn choose(&self, view: &View<'_>) -> Move {
        // Without graph edges among the candidates, the retrieval ranking
        // decides, moved only by memory hints: the other terms (parts,
        // availability) only reordered near-ties, and lost F1; brought in
        // by hints alone, they cost 0.002–0.006 F1 on every development
        // set (docs/benchmarks.md, "Planning").
        let graph = view.candidates.iter().any(|c| c.w > 0.0);
        let score = |c: &Candidate| {
            if graph { Self::score(c, view.unserved) } else { c.relevance as f64 + HINT_WEIGHT * c.hint as f64 }
        };
        let best = view
            .candidates
            .iter()
            .map(|c| (score(c), c))
            .max_by(|a, b| a.0.total_cmp(&b.0).then_with(|| comes_first(a.1, b.1, view.unserved)));
        let Some((score, best)) = best else {
            return if view.path.is_empty() {
                Move::Finish { reason: "no API matches the task".into() }
            } else {
                Move::Backtrack { reason: "no candidate left from here".into() }
            };
        };
        if view.path.is_empty() {
            return Move::Next {
                api: best.api,
                reason: format!("best match for the task (score {score:.2})"),
                arguments: None,
            };
        }
        let short = view.path.len() < self.min_steps && best.relevance >= MIN_STEP_RELEVANCE;
        if best.relevance >= self.min_relevance || short {
            let part = view
                .unserved
                .iter()
                .copied()
                .filter(|&t| best.similarity.get(t).copied().unwrap_or(0.0) >= MIN_GAIN)
                .max_by(|a, b| best.similarity[*a].total_cmp(&best.similarity[*b]));
            let what = match part {
                Some(t) if t > 0 => format!("serves \"{}\"", crate::text::clip(&view.texts[t], 60)),
                _ => "relevant to the task".to_string(),
            };
            let via = if best.w > 0.0 { format!(", w {:.2} from the last step", best.w) } else { String::new() };
            let reason = format!("{what} (relevance {:.2}{via})", best.relevance);
            return Move::Next { api: best.api, reason, arguments: None };
        }
        if !self.ignore_graph {
            let follow = view
                .candidates
                .iter()
                .filter(|c| c.w >= FOLLOW_W && c.w > view.finish_w && c.relevance >= FOLLOW_RELEVANCE)
                .max_by(|a, b| a.w.total_cmp(&b.w));
            if let Some(c) = follow {
                return Move::Next {
                    api: c.api,
                    reason: format!("runs usually go on to it from here (w {:.2} vs Finish {:.2})", c.w, view.finish_w),
                    arguments: None,
                };
            }
        }
        Move::Finish {
            reason: format!(
                "no other API is relevant enough (best relevance {:.2}; w to Finish {:.2})",
                best.relevance, view.finish_w
            ),
        }
    }
}

/// Of two candidates with equal scores, `Greater` when `a` goes first: the
/// one more similar to the earliest unserved part of the request where they
/// differ ("Search locations named Berlin. Then get the weather forecast
/// there."), then the one ranked higher (ranked before unranked), then by
/// function name. Named APIs put first share the top's score, so ties are
/// common; without other evidence the plan then follows the request's
/// order and the ranking.
fn comes_first(a: &Candidate, b: &Candidate, unserved: &[usize]) -> std::cmp::Ordering {
    let similarity = |c: &Candidate, t: usize| c.similarity.get(t).copied().unwrap_or(0.0);
    let mut parts = unserved.to_vec();
    parts.sort_unstable();
    let by_parts = parts
        .iter()
        .map(|&t| similarity(a, t).total_cmp(&similarity(b, t)))
        .find(|o| o.is_ne())
        .unwrap_or(std::cmp::Ordering::Equal);
    let place = |c: &Candidate| c.rank.unwrap_or(usize::MAX);
    by_parts.then_with(|| place(b).cmp(&place(a))).then_with(|| b.function.cmp(&a.function))
}

impl Decider for DeterministicDecider {
    async fn decide(&self, view: &View<'_>) -> Move {
        self.choose(view)
    }

    async fn reflect(&self, _task: &str, path: &[Step]) -> Reflection {
        judge(path)
    }
}

/// The deterministic judgement of a path: a failed first step means the
/// roots led nowhere, a later failed step is where to go back to.
pub(crate) fn judge(path: &[Step]) -> Reflection {
    match path.iter().position(|s| !s.outcome.ok) {
        _ if path.is_empty() => Reflection::Failure { drop_roots: Vec::new() },
        Some(0) => Reflection::Failure { drop_roots: vec![path[0].api] },
        Some(k) => Reflection::Partial { first_bad: k },
        None => Reflection::Success,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn candidate(id: u32, function: &str, rank: Option<usize>) -> Candidate {
        Candidate {
            api: ApiId(id),
            function: function.into(),
            w: 0.0,
            alpha: 0.5,
            relevance: 1.0,
            rank,
            similarity: vec![0.0],
            hint: 0.0,
            failed_lately: 0.0,
            source: Source::Retrieval,
        }
    }

    fn first_choice(candidates: &[Candidate], unserved: &[usize]) -> ApiId {
        let texts = ["task".to_string(), "part one".to_string(), "part two".to_string()];
        let view = View { texts: &texts, unserved, path: &[], candidates, finish_w: 0.0, memory: &[], examples: &[] };
        match DeterministicDecider::default().choose(&view) {
            Move::Next { api, .. } => api,
            other => panic!("expected a step, got {other:?}"),
        }
    }

    /// Named APIs put first share the top's score: of equal scores, the
    /// request's order of parts decides, then the ranking, then the name.
    #[test]
    fn equal_scores_follow_the_request_then_the_ranking() {
        let ranked = [candidate(1, "a_second", Some(2)), candidate(2, "z_first", Some(1)), candidate(3, "b", None)];
        assert_eq!(first_choice(&ranked, &[0]), ApiId(2));
        let unranked = [candidate(1, "b", None), candidate(2, "a", None)];
        assert_eq!(first_choice(&unranked, &[0]), ApiId(2), "unranked ties fall back to the name");
        // Parts 1 and 2 unserved: the one closer to part 1 goes first, whatever its rank.
        let mut second_part = candidate(1, "a", Some(1));
        second_part.similarity = vec![1.0, 0.33, 1.0];
        let mut first_part = candidate(2, "b", Some(2));
        first_part.similarity = vec![0.5, 1.0, 0.0];
        assert_eq!(first_choice(&[second_part, first_part], &[1, 2]), ApiId(2));
    }
}
