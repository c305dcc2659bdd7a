//! Execute mode (docs/architecture.md §5, §9): toolrouter carries out a request itself
//! and writes the answer.
//!
//! ```text
//! decompose  the model splits the request into sub-tasks, each naming the
//!            earlier ones whose results it needs (one request; JSON)
//! waves      sub-tasks whose needs are met run concurrently: the planner
//!            with the LLM decider, arguments validated, completed from
//!            earlier outputs and repaired, calls through the upstream
//!            layer, responses compressed
//! learn      every sub-task run that called an API is recorded in the graph
//! answer     a value nothing supplies → a question for the user;
//!            one sub-task finished by the model → its answer;
//!            otherwise the model writes the answer from the results
//! ```
//!
//! Everything is traced: the sub-tasks, each run's moves, candidates,
//! arguments, outcomes and compressed responses, the tokens spent.
//! Prompts put their fixed instructions first and the request last.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value};

use super::llm_decider::{self, LlmDecider};
use crate::catalog::Api;
use crate::consent::{Consent, Verdict};
use crate::engine::{CallRequest, Called, Engine};
use crate::graph::{RunCall, RunRecord};
use crate::llm::wire::{Completion, CompletionRequest, Message, RequestBody};
use crate::llm::{ChatModel, LlmError, Usage};
use crate::planner::{Caller, Ending, PlanRun, Settings, StepOutcome};
use crate::text::clip;

/// Sub-tasks a request is split into, at most.
pub(crate) const MAX_SUBTASKS: usize = 5;
/// Characters of a sub-task's text, at most.
const MAX_SUBTASK_CHARS: usize = 500;
/// Characters of earlier sub-tasks' results shown to a sub-task that needs them.
const MAX_EARLIER_CHARS: usize = 6_000;

const DECOMPOSE: &str = "Split the user's request into the fewest sub-tasks that each need their own API \
lookups. Reply with JSON only: {\"subtasks\": [{\"task\": \"...\", \"after\": [indexes of earlier sub-tasks \
whose results it needs]}]}. A request that is one task is a list of one.";

const SUMMARIZE: &str = "Answer the user's request from the results of the API calls below. Use only what \
the results say; say plainly what could not be found. Be concise.";

/// What to execute.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// The conversation's text turns (system, user, assistant), oldest first.
    pub(crate) messages: Vec<Message>,
    /// The upstream model's name.
    pub(crate) model: String,
    /// The client's key id, for upstream rate limits.
    pub(crate) client: Option<String>,
    pub(crate) deadline: Duration,
    /// Ask the model to split the request into sub-tasks.
    pub(crate) decompose: bool,
    pub(crate) repair_attempts: usize,
}

/// How an execution ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    /// The answer is written from the results of successful API calls.
    Answered,
    /// The answer asks the user for values nothing else supplies.
    NeedsInput,
    /// The run stopped before a destructive call: the answer lists the
    /// calls waiting for the user's consent (`pending_consent`).
    NeedsConsent,
    /// No API call succeeded: the answer is the model's account of what
    /// could not be done (or its reply without any API), not a result.
    Infeasible,
}

/// A value the user must give.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Need {
    pub(crate) function: String,
    pub(crate) parameter: String,
    pub(crate) description: String,
}

/// One sub-task and its run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Subtask {
    pub(crate) task: String,
    /// Earlier sub-tasks whose results it needed.
    pub(crate) after: Vec<usize>,
    /// Sub-tasks of the same wave ran concurrently.
    pub(crate) wave: usize,
    pub(crate) run: Option<PlanRun>,
    /// The model's answer when it finished this sub-task.
    pub(crate) answer: Option<String>,
    /// The calls made, as the graph learns them.
    pub(crate) calls: Vec<RunCall>,
    /// The run's sequence number in the graph's log.
    pub(crate) recorded: Option<u64>,
    /// Destructive calls the run stopped at, waiting for the user's consent.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) pending: Vec<Consent>,
    pub(crate) error: Option<String>,
}

/// A finished execution: the answer and its trace.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Solution {
    pub(crate) status: Status,
    pub(crate) answer: String,
    pub(crate) needs: Vec<Need>,
    /// Destructive calls waiting for the user's consent (`POST /v1/consents/{id}`).
    pub(crate) pending_consent: Vec<Consent>,
    pub(crate) subtasks: Vec<Subtask>,
    pub(crate) usage: Usage,
    pub(crate) model_requests: usize,
    pub(crate) elapsed_ms: f64,
}

/// Executes `request`. Errors are the model's (without it there is no
/// answer); an API that fails is part of the trace, not an error.
pub(crate) async fn solve(
    engine: &Arc<Engine>,
    llm: &Arc<dyn ChatModel>,
    request: &Request,
) -> Result<Solution, LlmError> {
    let started = Instant::now();
    let deadline = started + request.deadline;
    let text = user_text(&request.messages);
    let mut usage = Usage::default();
    let mut model_requests = 0;
    let mut subtasks = if request.decompose {
        model_requests += 1;
        let answer = ask(llm.as_ref(), request, deadline, DECOMPOSE, None).await?;
        usage += answer.tokens();
        parse_subtasks(&answer.text())
    } else {
        Vec::new()
    };
    if subtasks.is_empty() {
        subtasks.push(Subtask::new(text.clone(), Vec::new()));
    }
    // Waves: every sub-task whose needs are met runs now, concurrently.
    let mut waves = 0;
    while let Some(wave) = ready(&subtasks) {
        for &i in &wave {
            subtasks[i].wave = waves;
        }
        waves += 1;
        let runs = wave.iter().map(|&i| run_subtask(engine, llm, request, &subtasks, i, deadline));
        for (i, (done, report)) in wave.iter().zip(futures_util::future::join_all(runs).await) {
            usage += report.usage;
            model_requests += report.requests;
            subtasks[*i] = done;
            if let Some(e) = report.error {
                return Err(e);
            }
        }
    }
    let needs = needs(engine, &subtasks);
    // Answered only when some API call succeeded and stood on a run's path.
    let called = subtasks.iter().any(|s| s.run.as_ref().is_some_and(|r| !r.steps.is_empty()));
    let done = if called { Status::Answered } else { Status::Infeasible };
    let pending_consent: Vec<Consent> = subtasks.iter().flat_map(|s| s.pending.iter().cloned()).collect();
    let (status, answer) = if !pending_consent.is_empty() {
        (Status::NeedsConsent, consent_question(&pending_consent))
    } else if !needs.is_empty() {
        (Status::NeedsInput, question(&needs))
    } else if let [only] = subtasks.as_slice()
        && let Some(answer) = only.answer.clone().filter(|a| !a.trim().is_empty())
    {
        (done, answer)
    } else {
        model_requests += 1;
        let answer = ask(llm.as_ref(), request, deadline, SUMMARIZE, Some(results(&subtasks))).await?;
        usage += answer.tokens();
        (done, answer.text())
    };
    Ok(Solution {
        status,
        answer,
        needs,
        pending_consent,
        subtasks,
        usage,
        model_requests,
        elapsed_ms: crate::units::ms(started.elapsed()),
    })
}

impl Subtask {
    fn new(task: String, after: Vec<usize>) -> Subtask {
        Subtask {
            task,
            after,
            wave: 0,
            run: None,
            answer: None,
            calls: Vec::new(),
            recorded: None,
            pending: Vec::new(),
            error: None,
        }
    }

    fn done(&self) -> bool {
        self.run.is_some() || self.error.is_some()
    }
}

/// The next wave: the sub-tasks not run whose needs have run.
fn ready(subtasks: &[Subtask]) -> Option<Vec<usize>> {
    let wave: Vec<usize> = (0..subtasks.len())
        .filter(|&i| !subtasks[i].done() && subtasks[i].after.iter().all(|&j| subtasks[j].done()))
        .collect();
    (!wave.is_empty()).then_some(wave)
}

/// Runs sub-task `i`, given the results of those it needs, and records it in the graph.
async fn run_subtask(
    engine: &Arc<Engine>,
    llm: &Arc<dyn ChatModel>,
    request: &Request,
    subtasks: &[Subtask],
    i: usize,
    deadline: Instant,
) -> (Subtask, llm_decider::Report) {
    let mut sub = subtasks[i].clone();
    let earlier: Vec<&Subtask> = sub.after.iter().map(|&j| &subtasks[j]).collect();
    let outputs: Vec<Value> = earlier
        .iter()
        .filter_map(|s| s.run.as_ref())
        .flat_map(|r| r.steps.iter().filter_map(|s| s.outcome.response.clone()))
        .collect();
    let mut opening = request.messages.clone();
    if subtasks.len() > 1 {
        let mut part = format!("Do only this part of the request now: {}", sub.task);
        if !earlier.is_empty() {
            let known = clip(&results(earlier.iter().copied()), MAX_EARLIER_CHARS);
            part.push_str(&format!("\n\nWhat the parts it builds on found:\n{known}"));
        }
        opening.push(Message::new("user", part));
    }
    let decider = LlmDecider::new(llm.clone(), engine.catalog(), request.model.clone(), opening, deadline);
    let caller = Calls {
        engine,
        client: request.client.as_deref(),
        request: &sub.task,
        deadline,
        made: Mutex::default(),
        pending: Mutex::default(),
    };
    let mut settings = Settings::from(&engine.config);
    settings.budget.deadline = deadline.saturating_duration_since(Instant::now());
    settings.repair_attempts = request.repair_attempts;
    let result = engine.run(&sub.task, settings, outputs, (&decider, &caller), request.client.as_deref()).await;
    let report = decider.into_report();
    sub.calls = caller.made.into_inner().unwrap_or_else(|e| e.into_inner());
    sub.pending = caller.pending.into_inner().unwrap_or_else(|e| e.into_inner());
    sub.answer = report.answer.clone();
    match result {
        Ok(run) => {
            // The graph learns the path that stood (and every failure, for
            // availability), not the successful calls the run backed out of.
            let on_path: Vec<&str> = run.steps.iter().map(|s| s.function.as_str()).collect();
            let calls: Vec<RunCall> =
                sub.calls.iter().filter(|c| !c.ok || on_path.contains(&c.function.as_str())).cloned().collect();
            if !calls.is_empty() {
                let success =
                    matches!(run.ending, Ending::Finished { .. }) && report.error.is_none() && !run.steps.is_empty();
                let record = RunRecord {
                    id: crate::graph::run_id("execute"),
                    task: sub.task.clone(),
                    calls,
                    success,
                    standalone: false,
                    at_unix_ms: crate::metrics::unix_ms(),
                };
                // Appending to the log fsyncs: off the async workers.
                let e = engine.clone();
                sub.recorded = tokio::task::spawn_blocking(move || e.record_run(record)).await.ok().flatten();
            }
            sub.run = Some(run);
        }
        Err(e) => sub.error = Some(e.to_string()),
    }
    (sub, report)
}

/// Carries out steps through the engine (validation, upstream, compression)
/// and keeps the calls for the graph.
struct Calls<'a> {
    engine: &'a Arc<Engine>,
    client: Option<&'a str>,
    request: &'a str,
    /// The run's deadline: a call still going then is given up.
    deadline: Instant,
    made: Mutex<Vec<RunCall>>,
    /// The destructive calls it stopped at (then it calls nothing more).
    pending: Mutex<Vec<Consent>>,
}

impl Calls<'_> {
    /// Whether this call may be made now: `Err` with the step's outcome
    /// when it waits for the user's consent (or was refused), or when the
    /// run already waits for one.
    fn consented(&self, api: &Api, arguments: &Value) -> Result<(), String> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if !pending.is_empty() {
            return Err("not called: the run waits for the user's consent to an earlier call".into());
        }
        if !self.engine.needs_consent(self.client, &self.engine.catalog(), api) {
            return Ok(());
        }
        match self.engine.consents.verdict(self.client, &api.function_name, arguments) {
            Verdict::Go => Ok(()),
            Verdict::Refused => Err("not called: the user refused this destructive call".into()),
            Verdict::Ask(consent) => {
                let why = format!("not called: a destructive call waits for the user's consent ({})", consent.id);
                pending.push(consent);
                Err(why)
            }
        }
    }
}

impl Caller for Calls<'_> {
    async fn call(&self, api: &Api, arguments: &Map<String, Value>) -> StepOutcome {
        let started = Instant::now();
        let arguments = Value::Object(arguments.clone());
        let left = self.deadline.saturating_duration_since(Instant::now());
        let request = CallRequest {
            function: &api.function_name,
            arguments: &arguments,
            client: self.client,
            via: "execute",
            purpose: self.request,
            standalone: false,
        };
        if let Err(status) = self.consented(api, &arguments) {
            self.engine.record_refusal(&request, &status).await;
            return StepOutcome { ok: false, status, response: None, elapsed_ms: crate::units::ms(started.elapsed()) };
        }
        let call = self.engine.call(request);
        // Cut off by the run's own deadline: nothing learned of the API.
        let Ok(called) = tokio::time::timeout(left, call).await else {
            let status = "not finished: the run's deadline passed".to_string();
            return StepOutcome { ok: false, status, response: None, elapsed_ms: crate::units::ms(started.elapsed()) };
        };
        // What the graph learns: the API's answers and its failures, not
        // toolrouter's own refusals (unknown name, invalid arguments, its
        // rate limits, the guard: `CallError::asked`).
        let (ok, status, response, learned) = match called {
            Called::Unknown(unknown) => (false, unknown.to_string(), None, false),
            Called::Refused(problem) => (false, format!("invalid arguments: {problem}"), None, false),
            Called::NotAllowed(refused) => (false, refused.to_string(), None, false),
            Called::Invalid(invalid) => (false, format!("invalid arguments: {invalid}"), None, false),
            Called::Failed(e) => (false, format!("failed ({}): {e}", e.class.name()), None, e.asked),
            Called::Done { response, compressed, .. } => {
                let status = match response.failure() {
                    Some(why) => format!("HTTP {}, but {why}", response.status),
                    None => format!("HTTP {}", response.status),
                };
                (response.outcome().ok, status, serde_json::from_str(&compressed.text).ok(), true)
            }
        };
        if learned {
            let call = RunCall { function: api.function_name.clone(), ok };
            self.made.lock().unwrap_or_else(|e| e.into_inner()).push(call);
        }
        StepOutcome { ok, status, response, elapsed_ms: crate::units::ms(started.elapsed()) }
    }
}

/// One plain request to the model: `instructions`, the conversation, then `extra`.
async fn ask(
    llm: &dyn ChatModel,
    request: &Request,
    deadline: Instant,
    instructions: &str,
    extra: Option<String>,
) -> Result<Completion, LlmError> {
    let mut messages = vec![Message::new("system", instructions)];
    messages.extend(request.messages.iter().cloned());
    if let Some(extra) = extra {
        messages.push(Message::new("user", extra));
    }
    let body = CompletionRequest { model: request.model.clone(), messages, tools: Vec::new() };
    llm.complete(&RequestBody::of(&body), deadline).await
}

/// The sub-tasks in a decomposition answer; none when it does not parse
/// (the request then runs whole). `after` keeps only earlier indexes.
pub(crate) fn parse_subtasks(content: &str) -> Vec<Subtask> {
    let json = match (content.find('{'), content.rfind('}')) {
        (Some(a), Some(b)) if a < b => &content[a..=b],
        _ => return Vec::new(),
    };
    let Ok(value) = serde_json::from_str::<Value>(json) else { return Vec::new() };
    let mut out = Vec::new();
    for (i, s) in value["subtasks"].as_array().into_iter().flatten().take(MAX_SUBTASKS).enumerate() {
        let Some(task) = s["task"].as_str().map(str::trim).filter(|t| !t.is_empty()) else { return Vec::new() };
        let task: String = task.chars().take(MAX_SUBTASK_CHARS).collect();
        let mut after: Vec<usize> = (s["after"].as_array().into_iter().flatten())
            .filter_map(Value::as_u64)
            .map(|j| j as usize)
            .filter(|&j| j < i)
            .collect();
        after.sort_unstable();
        after.dedup();
        out.push(Subtask::new(task, after));
    }
    out
}

/// The users' words, oldest first.
fn user_text(messages: &[Message]) -> String {
    let texts: Vec<String> =
        messages.iter().filter(|m| m.is("user")).map(Message::text).filter(|t| !t.trim().is_empty()).collect();
    texts.join("\n")
}

/// The values the user must give: from the first sub-task that stopped for one.
fn needs(engine: &Engine, subtasks: &[Subtask]) -> Vec<Need> {
    let Some((function, missing)) = subtasks.iter().find_map(|s| match &s.run.as_ref()?.ending {
        Ending::NeedsInput { function, missing } => Some((function, missing)),
        _ => None,
    }) else {
        return Vec::new();
    };
    let catalog = engine.catalog();
    let api = catalog.find(function).ok();
    missing
        .iter()
        .map(|p| Need {
            function: function.clone(),
            parameter: p.clone(),
            description: api
                .and_then(|a| a.params.iter().find(|q| &q.key == p))
                .map(|q| q.description.clone())
                .unwrap_or_default(),
        })
        .collect()
}

/// The question that asks the user for `needs`.
/// The answer of a run that stopped before destructive calls.
fn consent_question(pending: &[Consent]) -> String {
    let items: Vec<String> = pending
        .iter()
        .map(|c| format!("- `{}` with {} (consent id `{}`)", c.function, clip(&c.arguments.to_string(), 500), c.id))
        .collect();
    format!(
        "Before going on I need your consent: this may change or delete data.\n{}\nConfirm (or refuse) each, then send the request again.",
        items.join("\n")
    )
}

fn question(needs: &[Need]) -> String {
    let items: Vec<String> = needs
        .iter()
        .map(|n| {
            if n.description.is_empty() {
                format!("- {}", n.parameter)
            } else {
                format!("- {}: {}", n.parameter, n.description)
            }
        })
        .collect();
    format!(
        "To go on I need {} that your request does not give (for `{}`):\n{}\nPlease provide {}.",
        if needs.len() == 1 { "a value" } else { "some values" },
        needs[0].function,
        items.join("\n"),
        if needs.len() == 1 { "it" } else { "them" }
    )
}

/// The results of `subtasks`, for the model.
fn results<'a>(subtasks: impl IntoIterator<Item = &'a Subtask>) -> String {
    let mut out = String::from("Results of the API calls:");
    for (i, s) in subtasks.into_iter().enumerate() {
        out.push_str(&format!("\n\nSub-task {}: {}", i + 1, s.task));
        if let Some(e) = &s.error {
            out.push_str(&format!("\n- not run: {e}"));
        }
        for step in s.run.iter().flat_map(|r| &r.steps) {
            let response = step.outcome.response.as_ref().map(Value::to_string).unwrap_or_default();
            out.push_str(&format!(
                "\n- {}({}) → {} {response}",
                step.function,
                Value::Object(step.arguments.clone()),
                step.outcome.status
            ));
        }
        // The decider's own answer adds nothing to the results it read, but
        // it is all there is of a run that called nothing.
        if let Some(answer) = s.answer.as_ref().filter(|_| s.run.as_ref().is_none_or(|r| r.steps.is_empty())) {
            out.push_str(&format!("\n- answered without calls: {answer}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn subtasks_parse_leniently_and_only_look_back() {
        let content = "Sure:\n```json\n{\"subtasks\": [{\"task\": \"find the city\", \"after\": []}, \
            {\"task\": \"weather there\", \"after\": [0, 0, 1, 7]}]}\n```";
        let subs = parse_subtasks(content);
        assert_eq!(subs.len(), 2);
        assert_eq!(subs[1].task, "weather there");
        assert_eq!(subs[1].after, [0]);
        assert!(parse_subtasks("no json here").is_empty());
        assert!(parse_subtasks("{\"subtasks\": [{\"task\": \"\"}]}").is_empty());
        let many = json!({"subtasks": (0..9).map(|i| json!({"task": format!("t{i}")})).collect::<Vec<_>>()});
        assert_eq!(parse_subtasks(&many.to_string()).len(), MAX_SUBTASKS);
    }

    #[test]
    fn waves_follow_needs() {
        let mut subs =
            vec![Subtask::new("a".into(), vec![]), Subtask::new("b".into(), vec![0]), Subtask::new("c".into(), vec![])];
        assert_eq!(ready(&subs), Some(vec![0, 2]));
        subs[0].error = Some("x".into());
        subs[2].error = Some("x".into());
        assert_eq!(ready(&subs), Some(vec![1]));
        subs[1].error = Some("x".into());
        assert_eq!(ready(&subs), None);
    }

    #[test]
    fn the_question_names_every_value() {
        let needs = vec![Need { function: "f".into(), parameter: "city".into(), description: "City name".into() }];
        let q = question(&needs);
        assert!(q.contains("city: City name") && q.contains("`f`"), "{q}");
    }
}
