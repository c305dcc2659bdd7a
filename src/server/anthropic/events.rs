//! A streamed chat completion as Anthropic's event stream: `message_start`
//! and a `ping`; each content block opened with `content_block_start`,
//! grown with `content_block_delta` (`text_delta`, or `input_json_delta`
//! for a tool call's arguments), closed with `content_block_stop` before
//! the next opens; then `message_delta` (the `stop_reason`, usage) and
//! `message_stop`. A stream that fails ends with an `error` event.

use bytes::Bytes;
use serde_json::{Value, json};

use super::output;
use super::search::SearchTool;
use crate::chat::search::Searched;
use crate::llm::wire::{Chunk, ToolCall};
use crate::server::translate::Translator;
use crate::server::translate::new_id;

/// The block being written.
enum Open {
    Text,
    /// A tool call, by its chat index.
    Call(u64),
}

/// Turns chat chunks into Anthropic events, in order.
pub(crate) struct MessageEvents {
    model: Value,
    /// Blocks opened so far (the open one is the last).
    blocks: usize,
    open: Option<Open>,
    finish: Option<String>,
    usage: Option<crate::llm::wire::CompletionUsage>,
    report: Option<Value>,
    /// The request's tool search tool (its blocks name it).
    search_tool: SearchTool,
}

fn event(kind: &str, mut data: Value) -> Bytes {
    data["type"] = Value::from(kind);
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}

impl MessageEvents {
    /// `model`: the request's; `search_tool`: its tool search tool.
    pub(crate) fn new(model: Value, search_tool: SearchTool) -> MessageEvents {
        MessageEvents { model, blocks: 0, open: None, finish: None, usage: None, report: None, search_tool }
    }

    fn call_delta(&mut self, call: &ToolCall, out: &mut Vec<Bytes>) {
        let index = call.index.unwrap_or(0);
        if !matches!(self.open, Some(Open::Call(i)) if i == index) {
            let id = match call.id() {
                "" => new_id("toolu_"),
                id => id.to_string(),
            };
            let block = json!({"type": "tool_use", "id": id, "name": call.name(), "input": {}});
            self.open_block(Open::Call(index), block, out);
        }
        let piece = call.arguments();
        if !piece.is_empty() {
            let delta = json!({"type": "input_json_delta", "partial_json": piece});
            out.push(event("content_block_delta", json!({"index": self.blocks - 1, "delta": delta})));
        }
    }

    fn open_block(&mut self, open: Open, block: Value, out: &mut Vec<Bytes>) {
        self.close(out);
        out.push(event("content_block_start", json!({"index": self.blocks, "content_block": block})));
        self.blocks += 1;
        self.open = Some(open);
    }

    fn close(&mut self, out: &mut Vec<Bytes>) {
        if self.open.take().is_some() {
            out.push(event("content_block_stop", json!({"index": self.blocks - 1})));
        }
    }
}

impl Translator for MessageEvents {
    /// A search as its two blocks: the `server_tool_use` (its input as one
    /// `input_json_delta`), then the `tool_search_tool_result`, whole.
    fn searched(&mut self, searched: &Searched) -> Vec<Bytes> {
        let mut out = Vec::new();
        let [mut call, result] = self.search_tool.blocks(searched);
        let input = std::mem::replace(&mut call["input"], json!({}));
        self.close(&mut out);
        out.push(event("content_block_start", json!({"index": self.blocks, "content_block": call})));
        let delta = json!({"type": "input_json_delta", "partial_json": input.to_string()});
        out.push(event("content_block_delta", json!({"index": self.blocks, "delta": delta})));
        out.push(event("content_block_stop", json!({"index": self.blocks})));
        out.push(event("content_block_start", json!({"index": self.blocks + 1, "content_block": result})));
        out.push(event("content_block_stop", json!({"index": self.blocks + 1})));
        self.blocks += 2;
        out
    }

    /// `message_start` and a `ping`.
    fn start(&mut self) -> Vec<Bytes> {
        let message = json!({"id": new_id("msg_"), "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": 0}});
        vec![event("message_start", json!({"message": message})), event("ping", json!({}))]
    }

    /// The events one chunk brings.
    fn chunk(&mut self, chunk: &Chunk) -> Vec<Bytes> {
        let mut out = Vec::new();
        if let Some(report) = chunk.extra.get("toolrouter") {
            self.report = Some(report.clone());
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage.clone();
        }
        let Some(choice) = chunk.choices.iter().find(|c| c.index.unwrap_or(0) == 0) else { return out };
        if let Some(delta) = &choice.delta {
            let text = delta.text();
            if !text.is_empty() {
                if !matches!(self.open, Some(Open::Text)) {
                    self.open_block(Open::Text, json!({"type": "text", "text": ""}), &mut out);
                }
                out.push(event(
                    "content_block_delta",
                    json!({"index": self.blocks - 1, "delta": {"type": "text_delta", "text": text}}),
                ));
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

    /// The open block's stop, `message_delta`, `message_stop`.
    fn end(&mut self) -> Vec<Bytes> {
        let mut out = Vec::new();
        self.close(&mut out);
        let mut delta = json!({
            "delta": {"stop_reason": output::stop_reason(self.finish.as_deref()), "stop_sequence": null},
            "usage": output::usage(self.usage.as_ref()),
        });
        if let Some(report) = &self.report {
            delta["toolrouter"] = report.clone();
        }
        out.push(event("message_delta", delta));
        out.push(event("message_stop", json!({})));
        out
    }

    /// An `error` event carrying `message`.
    fn fail(&mut self, message: &str) -> Vec<Bytes> {
        vec![event("error", json!({"error": {"type": "api_error", "message": message}}))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::wire::{ChunkChoice, Message};

    fn chunk(delta: Message, finish: Option<&str>) -> Chunk {
        Chunk { choices: vec![ChunkChoice::new(delta, finish.map(str::to_string))], ..Chunk::default() }
    }

    #[test]
    fn text_then_a_tool_call_stream_as_anthropic_events() {
        let mut t = MessageEvents::new(json!("claude"), SearchTool::default());
        let mut out = t.start();
        out.extend(t.chunk(&chunk(Message::text_delta("Look"), None)));
        out.extend(t.chunk(&chunk(Message::text_delta("ing."), None)));
        let first = ToolCall { index: Some(0), ..ToolCall::function("call_1", "weather", "") };
        let rest = ToolCall { index: Some(0), id: None, ..ToolCall::function("", "", "{\"city\":\"Oslo\"}") };
        out.extend(t.chunk(&chunk(Message::calling(vec![first]), None)));
        out.extend(t.chunk(&chunk(Message::calling(vec![rest]), Some("tool_calls"))));
        out.extend(t.end());
        let events: Vec<Value> = out
            .iter()
            .map(|b| {
                let text = std::str::from_utf8(b).unwrap();
                serde_json::from_str(text.trim_end().split_once("\ndata: ").unwrap().1).unwrap()
            })
            .collect();
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        assert_eq!(events[6]["content_block"]["id"], "call_1");
        assert_eq!(events[6]["index"], 1);
        assert_eq!(events[7]["delta"], json!({"type": "input_json_delta", "partial_json": "{\"city\":\"Oslo\"}"}));
        assert_eq!(events[9]["delta"]["stop_reason"], "tool_use");
        assert_eq!(
            t.fail("broke")[0],
            Bytes::from(
                "event: error\ndata: {\"error\":{\"type\":\"api_error\",\"message\":\"broke\"},\"type\":\"error\"}\n\n"
            )
        );
    }
}
