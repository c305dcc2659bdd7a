//! The LLM decider (docs/architecture.md §5): the upstream model chooses
//! each move. It answers the planner's own trait ([`Decider`]) from the
//! engine's room, so the planner (the domain) never imports the model
//! client (outbound).
//!
//! Every decision is one chat-completions request. The candidates go to
//! the model as OpenAI tools — the catalog's definitions, each description
//! ending with the candidate's graph weight `w` from the last step and its
//! availability `α` — after two pseudo-tools, `finish` (with the answer
//! for the user) and `backtrack`. The model's tool call is the move; its
//! arguments are the step's arguments. A text answer without a tool call
//! is a finish.
//!
//! Prompts keep their stable part first, so upstream prefix caches hit as
//! far as they can: the fixed instructions, the pseudo-tools, then the
//! candidates sorted by name; the messages are the opening (the request)
//! followed by the path so far as tool calls and their results,
//! append-only while the search goes forward; notes on failed attempts
//! come last. A repair request offers the same tools as the decision it
//! repairs. Servers that render tools before messages cache up to the
//! first candidate that differs from the previous move's.
//!
//! Paths are judged like the deterministic decider judges them (no extra
//! request). A model error ends the run (a `finish` whose reason says so)
//! and is kept for the caller: without the model no answer can be written.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{Map, Value, json};

use crate::args::Problem;
use crate::catalog::{Api, Catalog};
use crate::llm::wire::{CompletionRequest, Message, RequestBody, ToolCall};
use crate::llm::{ChatModel, LlmError, Usage};
use crate::planner::decider::{Decider, Move, Reflection, View, judge};
use crate::planner::{Candidate, Example, Step};

/// The instructions: the stable head of every decision request.
const INSTRUCTIONS: &str = "You carry out the user's request by calling APIs, one call at a time. \
Call one of the offered API tools with arguments taken from the request or from earlier results. \
Never invent a value: leave out a required argument you cannot know; it is then taken from earlier results \
or asked of the user. When the results answer the request (or no offered API can help), call `finish` with \
the answer for the user, based only on the results. Call `backtrack` when the last result leads nowhere. \
Each API description ends with [w: how often runs go on to it from the last call, 0-1; availability: its \
success rate], and with how much it failed for similar requests lately (0-1) when it did.";

/// Remembered runs shown as worked examples, at most…
const MAX_EXAMPLES: usize = 3;
/// …of tasks at least this similar to the request (cosine).
const MIN_EXAMPLE_SIMILARITY: f32 = 0.5;

/// The remembered runs on similar requests, as a message after the
/// instructions (the instructions stay a stable prefix for upstream caches).
fn examples_message(examples: &[Example]) -> Option<Message> {
    let lines: Vec<String> = examples
        .iter()
        .filter(|e| e.similarity >= MIN_EXAMPLE_SIMILARITY && !e.path.is_empty())
        .take(MAX_EXAMPLES)
        .map(|e| format!("- \"{}\": {}", crate::text::clip(&e.task, 300), e.path.join(" → ")))
        .collect();
    if lines.is_empty() {
        return None;
    }
    let text = format!(
        "Earlier requests like this one were solved by these calls, in order (a guide, not a rule; \
         call only offered APIs):\n{}",
        lines.join("\n")
    );
    Some(Message::new("system", text))
}

/// Characters of a step's result shown to the model.
const MAX_RESULT_CHARS: usize = 2_000;

/// What the decider gathered over a run.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) usage: Usage,
    /// Requests sent to the model.
    pub(crate) requests: usize,
    /// The answer of a `finish` (or of a text reply).
    pub(crate) answer: Option<String>,
    /// The first model error; it ended the run.
    pub(crate) error: Option<LlmError>,
}

/// Chooses moves through the upstream model.
pub(crate) struct LlmDecider {
    llm: Arc<dyn ChatModel>,
    catalog: Arc<Catalog>,
    /// The upstream model's name.
    model: String,
    /// The messages that state the task (user and assistant turns).
    opening: Vec<Message>,
    deadline: Instant,
    report: Mutex<Report>,
}

impl LlmDecider {
    pub(crate) fn new(
        llm: Arc<dyn ChatModel>,
        catalog: Arc<Catalog>,
        model: String,
        opening: Vec<Message>,
        deadline: Instant,
    ) -> LlmDecider {
        LlmDecider { llm, catalog, model, opening, deadline, report: Mutex::new(Report::default()) }
    }

    /// What the run cost and produced.
    pub(crate) fn into_report(self) -> Report {
        self.report.into_inner().unwrap_or_else(|e| e.into_inner())
    }

    /// One request to the model, within the deadline; usage and errors
    /// recorded. After a model error nothing more is asked: the run is
    /// lost. An answer without a message is an empty one.
    async fn ask(&self, tools: Vec<Value>, messages: Vec<Message>) -> Option<Message> {
        if self.report.lock().unwrap_or_else(|e| e.into_inner()).error.is_some() {
            return None;
        }
        let body = CompletionRequest { model: self.model.clone(), messages, tools };
        let result = self.llm.complete(&RequestBody::of(&body), self.deadline).await;
        let mut report = self.report.lock().unwrap_or_else(|e| e.into_inner());
        report.requests += 1;
        match result {
            Ok(answer) => {
                report.usage += answer.tokens();
                Some(answer.message().cloned().unwrap_or_default())
            }
            Err(e) => {
                report.error.get_or_insert(e);
                None
            }
        }
    }

    /// The instructions, worked examples from memory, the opening, then the path as tool calls and results.
    fn messages(&self, view: &View<'_>) -> Vec<Message> {
        let path = view.path;
        let mut messages = vec![Message::new("system", INSTRUCTIONS)];
        if let Some(examples) = examples_message(view.examples) {
            messages.push(examples);
        }
        messages.extend(self.opening.iter().cloned());
        for (i, step) in path.iter().enumerate() {
            messages.push(call_message(&format!("step_{i}"), &step.function, &step.arguments));
            let mut result = step.outcome.status.clone();
            if let Some(response) = &step.outcome.response {
                result = format!("{result}: {}", crate::text::clip(&response.to_string(), MAX_RESULT_CHARS));
            }
            messages.push(Message::tool_result(&format!("step_{i}"), result));
        }
        messages
    }

    /// The pseudo-tools, then the candidates sorted by name.
    fn tools(&self, view: &View<'_>) -> Vec<Value> {
        let mut tools = pseudo_tools();
        let mut offered: Vec<&Candidate> = view.candidates.iter().collect();
        offered.sort_by(|a, b| a.function.cmp(&b.function));
        tools.extend(offered.iter().map(|c| self.tool(c)));
        tools
    }

    fn tool(&self, c: &Candidate) -> Value {
        let mut definition = self.catalog.function_definition(self.catalog.api(c.api));
        if let Some(d) = definition["function"]["description"].as_str() {
            definition["function"]["description"] = json!(annotated(d, c));
        }
        definition
    }
}

/// A candidate's description as the model sees it: what the graph and the
/// memory know of it at the end (see [`INSTRUCTIONS`]).
fn annotated(description: &str, c: &Candidate) -> String {
    let failed = match c.failed_lately > 0.0 {
        true => format!("; failed for similar requests lately: {:.2}", c.failed_lately),
        false => String::new(),
    };
    format!("{description} [w: {:.2}; availability: {:.2}{failed}]", c.w, c.alpha)
}

impl LlmDecider {
    /// A `finish` came without its required `answer`: shows the model the
    /// error, as for any invalid call, and asks once more. `None` when it
    /// still gives none (the caller then has the answer written from the
    /// results).
    async fn finish_answer(&self, view: &View<'_>, arguments: &Map<String, Value>) -> Option<String> {
        let mut messages = self.messages(view);
        messages.push(call_message("finish", "finish", arguments));
        let error = "Error: invalid arguments for `finish`: missing required parameter `answer` (string): the answer \
            for the user, based only on the results. Call `finish` again with it.";
        messages.push(Message::tool_result("finish", error));
        let message = self.ask(self.tools(view), messages).await?;
        let answer = match message.calls().first() {
            Some(call) if call.name() == "finish" => {
                parse_arguments(call).get("answer").and_then(Value::as_str).map(str::to_string)
            }
            Some(_) => None,
            None => Some(message.text()),
        };
        answer.filter(|a| !a.trim().is_empty())
    }
}

impl Decider for LlmDecider {
    async fn decide(&self, view: &View<'_>) -> Move {
        let tools = self.tools(view);
        let mut messages = self.messages(view);
        let notes: Vec<&str> = view.memory.iter().map(String::as_str).filter(|m| !m.starts_with("step ")).collect();
        if !notes.is_empty() {
            messages.push(Message::new("user", format!("Notes on earlier attempts:\n{}", notes.join("\n"))));
        }
        let Some(message) = self.ask(tools, messages).await else {
            return Move::Finish { reason: "the model failed; the run stops".into() };
        };
        let Some(call) = message.calls().first() else {
            self.report.lock().unwrap_or_else(|e| e.into_inner()).answer = Some(message.text());
            return Move::Finish { reason: "the model answered without calling a tool".into() };
        };
        let name = call.name();
        let arguments = parse_arguments(call);
        let said = |key: &str| arguments.get(key).and_then(Value::as_str).map(str::to_string);
        match name {
            "finish" => {
                let answer = match said("answer").filter(|a| !a.trim().is_empty()) {
                    Some(answer) => Some(answer),
                    None => self.finish_answer(view, &arguments).await,
                };
                self.report.lock().unwrap_or_else(|e| e.into_inner()).answer = answer;
                Move::Finish { reason: "the model finished".into() }
            }
            "backtrack" => Move::Backtrack { reason: said("reason").unwrap_or_else(|| "the model backtracked".into()) },
            _ => match view.candidates.iter().find(|c| c.function == name) {
                Some(c) => Move::Next { api: c.api, reason: "chosen by the model".into(), arguments: Some(arguments) },
                None => Move::Finish { reason: format!("the model called `{name}`, which was not offered") },
            },
        }
    }

    async fn reflect(&self, _task: &str, path: &[Step]) -> Reflection {
        judge(path)
    }

    async fn repair(
        &self,
        view: &View<'_>,
        api: &Api,
        arguments: &Map<String, Value>,
        problems: &[Problem],
    ) -> Option<Map<String, Value>> {
        let mut messages = self.messages(view);
        messages.push(call_message("repair", &api.function_name, arguments));
        let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
        let content = format!(
            "Error: invalid arguments for `{}`: {}. Call it again with arguments that fit its schema; \
             leave out values you cannot know.",
            api.function_name,
            problems.join("; ")
        );
        messages.push(Message::tool_result("repair", content));
        let message = self.ask(self.tools(view), messages).await?;
        let call = message.calls().iter().find(|c| c.name() == api.function_name)?;
        Some(parse_arguments(call))
    }
}

/// `finish` and `backtrack`, always first and always the same.
fn pseudo_tools() -> Vec<Value> {
    vec![
        json!({"type": "function", "function": {"name": "finish",
            "description": "The results answer the request, or no offered API can help: give the answer for the user.",
            "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}}),
        json!({"type": "function", "function": {"name": "backtrack",
            "description": "The last result leads nowhere: undo it and choose differently.",
            "parameters": {"type": "object", "properties": {"reason": {"type": "string"}}}}}),
    ]
}

/// An assistant message with one tool call.
fn call_message(id: &str, function: &str, arguments: &Map<String, Value>) -> Message {
    let arguments = Value::Object(arguments.clone()).to_string();
    Message::calling(vec![ToolCall::function(id, function, arguments)])
}

/// A tool call's arguments (a JSON string, or an object from lenient servers);
/// anything else is no arguments, which validation then reports.
fn parse_arguments(call: &ToolCall) -> Map<String, Value> {
    match call.raw_arguments() {
        Some(Value::String(s)) => match serde_json::from_str(s) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        },
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_parsed_leniently() {
        let parsed = |arguments: Value| {
            let mut call = ToolCall::function("1", "f", "");
            call.function.as_mut().unwrap().arguments = Some(arguments);
            Value::Object(parse_arguments(&call))
        };
        assert_eq!(parsed(json!("{\"a\": 1}")), json!({"a": 1}));
        assert_eq!(parsed(json!({"a": 1})), json!({"a": 1}));
        assert_eq!(parsed(json!("{oops")), json!({}));
        assert_eq!(parsed(json!("[1]")), json!({}));
    }

    #[test]
    fn close_remembered_runs_are_worked_examples() {
        let example = |task: &str, similarity: f32| Example {
            task: task.into(),
            path: vec!["a_for_t".into(), "b_for_t".into()],
            similarity,
        };
        assert_eq!(examples_message(&[example("far", 0.3)]), None, "too far to guide");
        let message = examples_message(&[example("snow days in Oslo", 0.8), example("far", 0.2)]).unwrap();
        let text = message.text();
        assert!(message.is("system"));
        assert!(text.contains("\"snow days in Oslo\": a_for_t → b_for_t") && !text.contains("far"), "{text}");
    }

    #[test]
    fn a_candidate_that_failed_for_similar_requests_says_so() {
        let mut c = crate::planner::decider::tests::candidate(1, "a_for_t", Some(1));
        (c.w, c.alpha) = (0.25, 0.8);
        assert_eq!(annotated("Gets a.", &c), "Gets a. [w: 0.25; availability: 0.80]");
        c.failed_lately = 0.7;
        assert_eq!(
            annotated("Gets a.", &c),
            "Gets a. [w: 0.25; availability: 0.80; failed for similar requests lately: 0.70]"
        );
    }
}
