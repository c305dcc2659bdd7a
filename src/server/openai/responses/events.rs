//! A streamed chat completion as the Responses API's event stream:
//! `response.created` and `response.in_progress` first; for the text,
//! `response.output_item.added` (a `message`), `response.content_part.added`,
//! `response.output_text.delta`…; for each tool call,
//! `response.output_item.added` (a `function_call`) and
//! `response.function_call_arguments.delta`…; at the end the `.done` event
//! of each part and item, then `response.completed` (or
//! `response.incomplete`) with the whole response; a stream that fails
//! ends with `response.failed` carrying the error. Every event has its
//! `sequence_number`, as OpenAI's do.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use serde_json::{Value, json};

use super::output::{self, Echo};
use super::store::Keeper;
use crate::chat::search::Searched;
use crate::llm::wire::Chunk;
use crate::server::translate::Translator;
use crate::server::translate::new_id;

/// One output item as it grows.
enum Item {
    Text {
        id: String,
        text: String,
    },
    Call {
        id: String,
        call_id: String,
        name: String,
        arguments: String,
    },
    /// An item made whole at once (a search toolrouter ran).
    Done(Value),
}

/// Turns chat chunks into Responses events, in order.
pub(crate) struct ResponseEvents {
    echo: Echo,
    seq: u64,
    model: Option<String>,
    items: Vec<Item>,
    /// The text item's place in `items`.
    text: Option<usize>,
    /// Each tool call's place in `items`, by its chat index.
    calls: BTreeMap<u64, usize>,
    finish: Option<String>,
    usage: Option<Value>,
    /// toolrouter's report, carried into the final response.
    report: Option<Value>,
    /// Keeps the response when the stream ends well (`store`).
    keeper: Option<Keeper>,
    /// Whether it was kept.
    kept: Arc<AtomicBool>,
}

impl ResponseEvents {
    /// The events of the response `echo` describes, kept by `keeper` at the end.
    pub(crate) fn new(echo: Echo, keeper: Option<Keeper>) -> ResponseEvents {
        ResponseEvents {
            keeper,
            kept: Arc::new(AtomicBool::new(false)),
            echo,
            seq: 0,
            model: None,
            items: Vec::new(),
            text: None,
            calls: BTreeMap::new(),
            finish: None,
            usage: None,
            report: None,
        }
    }

    fn event(&mut self, kind: &str, mut data: Value) -> Bytes {
        data["type"] = Value::from(kind);
        data["sequence_number"] = Value::from(self.seq);
        self.seq += 1;
        Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
    }

    fn response(&self, status: &str) -> Value {
        let output = match status {
            "in_progress" => Vec::new(),
            _ => self.items.iter().map(|item| done_item(item, "completed", self.echo.tools())).collect(),
        };
        let mut response = self.echo.response(status, self.model.as_deref(), output, self.usage.clone());
        if let Some(report) = &self.report {
            response["toolrouter"] = report.clone();
        }
        response
    }

    fn text_delta(&mut self, text: &str, out: &mut Vec<Bytes>) {
        let at = match self.text {
            Some(at) => at,
            None => {
                let (at, id) = (self.items.len(), new_id("msg_"));
                let item =
                    json!({"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []});
                out.push(self.event("response.output_item.added", json!({"output_index": at, "item": item})));
                let part = output::text_part("");
                out.push(self.event(
                    "response.content_part.added",
                    json!({"item_id": id, "output_index": at, "content_index": 0, "part": part}),
                ));
                self.items.push(Item::Text { id, text: String::new() });
                self.text = Some(at);
                at
            }
        };
        let Item::Text { id, text: all } = &mut self.items[at] else { unreachable!("the text item") };
        all.push_str(text);
        let id = id.clone();
        out.push(self.event(
            "response.output_text.delta",
            json!({"item_id": id, "output_index": at, "content_index": 0, "delta": text, "logprobs": []}),
        ));
    }

    fn call_delta(&mut self, call: &crate::llm::wire::ToolCall, out: &mut Vec<Bytes>) {
        let index = call.index.unwrap_or(0);
        let at = match self.calls.get(&index) {
            Some(&at) => at,
            None => {
                let at = self.items.len();
                let id = new_id("fc_");
                let call_id = match call.id() {
                    "" => new_id("call_"),
                    id => id.to_string(),
                };
                let item = output::call_item(&id, &call_id, call.name(), "", "in_progress", self.echo.tools());
                out.push(self.event("response.output_item.added", json!({"output_index": at, "item": item})));
                self.items.push(Item::Call { id, call_id, name: call.name().to_string(), arguments: String::new() });
                self.calls.insert(index, at);
                at
            }
        };
        let piece = call.arguments();
        let Item::Call { id, name, arguments, .. } = &mut self.items[at] else { unreachable!("a call item") };
        if name.is_empty() {
            *name = call.name().to_string();
        }
        if piece.is_empty() {
            return;
        }
        arguments.push_str(&piece);
        let id = id.clone();
        out.push(self.event(
            "response.function_call_arguments.delta",
            json!({"item_id": id, "output_index": at, "delta": piece}),
        ));
    }
}

impl Translator for ResponseEvents {
    /// Each search as its two items, added and done at once.
    fn searched(&mut self, searched: &Searched) -> Vec<Bytes> {
        let mut out = Vec::new();
        for item in super::search::items(searched, self.echo.tools()) {
            let at = self.items.len();
            out.push(self.event("response.output_item.added", json!({"output_index": at, "item": item})));
            out.push(self.event("response.output_item.done", json!({"output_index": at, "item": item})));
            self.items.push(Item::Done(item));
        }
        out
    }

    /// `response.created`, `response.in_progress`.
    fn start(&mut self) -> Vec<Bytes> {
        let response = self.response("in_progress");
        vec![
            self.event("response.created", json!({"response": response})),
            self.event("response.in_progress", json!({"response": response})),
        ]
    }

    /// The events one chunk brings.
    fn chunk(&mut self, chunk: &Chunk) -> Vec<Bytes> {
        let mut out = Vec::new();
        self.model = chunk.model.clone().or(self.model.take());
        if let Some(report) = chunk.extra.get("toolrouter") {
            self.report = Some(report.clone());
        }
        if let Some(usage) = &chunk.usage {
            self.usage = Some(output::usage(usage));
        }
        // Responses have one output: the first choice's.
        let Some(choice) = chunk.choices.iter().find(|c| c.index.unwrap_or(0) == 0) else { return out };
        if let Some(delta) = &choice.delta {
            let text = delta.text();
            if !text.is_empty() {
                self.text_delta(&text, &mut out);
            }
            for call in delta.calls() {
                self.call_delta(call, &mut out);
            }
        }
        if let Some(finish) = &choice.finish_reason {
            self.finish = Some(finish.clone());
        }
        out
    }

    /// Keeps the response (`store`), before `response.completed` tells it.
    fn finishing(&mut self) -> Option<futures_util::future::BoxFuture<'static, ()>> {
        let keeper = self.keeper.take()?;
        let output: Vec<Value> =
            self.items.iter().map(|item| done_item(item, "completed", self.echo.tools())).collect();
        let (id, kept) = (self.echo.id.clone(), self.kept.clone());
        Some(Box::pin(async move { kept.store(keeper.keep(id, &output).await, Ordering::Relaxed) }))
    }

    /// The `.done` events of every part and item, then `response.completed`
    /// (or `response.incomplete`).
    fn end(&mut self) -> Vec<Bytes> {
        self.echo.store = self.kept.load(Ordering::Relaxed);
        let mut out = Vec::new();
        for at in 0..self.items.len() {
            let done = done_item(&self.items[at], "completed", self.echo.tools());
            match &self.items[at] {
                Item::Done(_) => continue, // Said when it was added.
                Item::Text { id, text } => {
                    let (id, text) = (id.clone(), text.clone());
                    out.push(self.event(
                        "response.output_text.done",
                        json!({"item_id": id, "output_index": at, "content_index": 0, "text": text, "logprobs": []}),
                    ));
                    out.push(self.event(
                        "response.content_part.done",
                        json!({"item_id": id, "output_index": at, "content_index": 0, "part": output::text_part(&text)}),
                    ));
                }
                Item::Call { id, name, arguments, .. } => {
                    let (id, name, arguments) = (id.clone(), name.clone(), arguments.clone());
                    out.push(self.event(
                        "response.function_call_arguments.done",
                        json!({"item_id": id, "output_index": at, "name": name, "arguments": arguments}),
                    ));
                }
            }
            out.push(self.event("response.output_item.done", json!({"output_index": at, "item": done})));
        }
        let status = output::status(self.finish.as_deref());
        let response = self.response(status);
        let kind = if status == "incomplete" { "response.incomplete" } else { "response.completed" };
        out.push(self.event(kind, json!({"response": response})));
        out
    }

    /// `response.failed`, carrying `message`.
    fn fail(&mut self, message: &str) -> Vec<Bytes> {
        self.echo.store = false;
        let mut response = self.response("failed");
        response["error"] = json!({"code": "server_error", "message": message});
        vec![self.event("response.failed", json!({"response": response}))]
    }
}

/// An item as its `.done` event (and the final response) shows it.
fn done_item(item: &Item, status: &str, tools: Option<&Value>) -> Value {
    match item {
        Item::Text { id, text } => output::message_item(id, text, status),
        Item::Call { id, call_id, name, arguments } => output::call_item(id, call_id, name, arguments, status, tools),
        Item::Done(item) => item.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::wire::{ChunkChoice, CompletionUsage, Message, ToolCall};

    fn events(bytes: &[Bytes]) -> Vec<Value> {
        bytes
            .iter()
            .map(|b| {
                let text = std::str::from_utf8(b).unwrap();
                let (head, data) = text.trim_end().split_once('\n').unwrap();
                let event: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
                assert_eq!(head.strip_prefix("event: ").unwrap(), event["type"], "the event line names the type");
                event
            })
            .collect()
    }

    fn chunk(delta: Message, finish: Option<&str>) -> Chunk {
        Chunk {
            model: Some("m".into()),
            choices: vec![ChunkChoice::new(delta, finish.map(str::to_string))],
            ..Chunk::default()
        }
    }

    #[test]
    fn text_and_a_tool_call_stream_as_responses_events() {
        let mut t = ResponseEvents::new(Echo::new(json!({"model": "m", "input": "hi"})), None);
        let mut out = t.start();
        out.extend(t.chunk(&chunk(Message::text_delta("Hel"), None)));
        out.extend(t.chunk(&chunk(Message::text_delta("lo"), None)));
        let mut first = ToolCall::function("", "weather", "{\"ci");
        first.index = Some(0);
        let mut rest = ToolCall { index: Some(0), ..ToolCall::function("", "", "ty\":\"Oslo\"}") };
        rest.id = None;
        out.extend(t.chunk(&chunk(Message::calling(vec![first]), None)));
        out.extend(t.chunk(&chunk(Message::calling(vec![rest]), Some("tool_calls"))));
        let usage = CompletionUsage {
            prompt_tokens: Some(3),
            completion_tokens: Some(2),
            total_tokens: Some(5),
            ..Default::default()
        };
        out.extend(t.chunk(&Chunk { usage: Some(usage), ..Chunk::default() }));
        out.extend(t.end());
        let events = events(&out);
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        let numbers: Vec<u64> = events.iter().map(|e| e["sequence_number"].as_u64().unwrap()).collect();
        assert_eq!(numbers, (0..15).collect::<Vec<u64>>());
        let completed = &events[14]["response"];
        assert_eq!(completed["status"], "completed");
        assert_eq!(completed["output"][0]["content"][0]["text"], "Hello");
        let call = &completed["output"][1];
        assert_eq!((&call["name"], &call["arguments"]), (&json!("weather"), &json!("{\"city\":\"Oslo\"}")));
        assert!(call["call_id"].as_str().unwrap().starts_with("call_"), "a call without an id gets one: {call}");
        assert_eq!(events[6]["item"]["call_id"], call["call_id"], "the same id from the start");
        assert_eq!(completed["usage"]["total_tokens"], 5);
        assert_eq!(events[0]["response"]["status"], "in_progress");
        let failed = events_of_failure();
        assert_eq!(failed["response"]["status"], "failed");
        assert_eq!(failed["response"]["error"]["message"], "the model server broke off");
    }

    fn events_of_failure() -> Value {
        let mut t = ResponseEvents::new(Echo::new(json!({"model": "m", "input": "hi"})), None);
        t.start();
        events(&t.fail("the model server broke off")).remove(0)
    }
}
