//! Reading a chat-completions request before anything is sent upstream:
//! the body split into its top-level fields, kept as the JSON text they
//! came as ([`RequestBody`]: what toolrouter does not change is passed on
//! without being parsed or written again), every field toolrouter relies
//! on checked, the `tools` list read once per distinct list (see
//! [`super::tools`]), the mode chosen.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::error::ChatError;
use super::search::Wanted;
use super::tools::{ToolList, ToolLists};
use super::unparsable::unparsable;
use crate::config::OpenAiConfig;
use crate::llm::wire::{Message, RequestBody};

/// A checked request.
pub(crate) struct ChatRequest {
    /// The client's body but `toolrouter` (toolrouter's own options), as it
    /// came: route mode sends it on with its `model` and `tools` set.
    pub(crate) body: RequestBody,
    /// The name the client asked for.
    pub(crate) model: String,
    /// The name sent upstream.
    pub(crate) upstream_model: String,
    pub(crate) stream: bool,
    pub(crate) include_usage: bool,
    pub(crate) tools: Arc<ToolList>,
    /// The function `tool_choice` names, if it names one.
    pub(crate) forced: Option<String>,
    /// `toolrouter.mode` in the body, else the `x-toolrouter-mode` header,
    /// else route for a request with `tools`, else `openai.default_mode`.
    pub(crate) mode: Mode,
    /// Execute mode: split into sub-tasks (`toolrouter.decompose`, else `openai.decompose`).
    pub(crate) decompose: bool,
    /// `toolrouter.tool_search`: whether the model may search for tools.
    pub(crate) tool_search: Wanted,
    /// When the request's time budget runs out: the model requests made
    /// for it (retries, repairs) end by then.
    pub(crate) deadline: Instant,
}

impl ChatRequest {
    /// The conversation, typed (read when a mode needs it, not for every
    /// request). Its roles were checked by [`parse`]; what can still fail
    /// is nesting past [`super::unparsable::MAX_JSON_DEPTH`].
    pub(crate) fn messages(&self) -> Result<Vec<Message>, ChatError> {
        messages(&self.body)
    }
}

/// The messages of a request body, typed.
pub(crate) fn messages(body: &RequestBody) -> Result<Vec<Message>, ChatError> {
    let raw = body.get("messages").map_or("[]", RawValue::get);
    serde_json::from_str(raw).map_err(|e| ChatError::invalid(unparsable("`messages`", &e), Some("messages")))
}

/// How a request is served.
pub(crate) use crate::config::ChatMode as Mode;

const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

/// A message's role, all that is read of it to check it.
#[derive(Deserialize)]
struct Role<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
}

/// Field `key` of `body` as a `T`, `None` when absent or null; `wrong`
/// is the message when it is something else.
fn field<'a, T: Deserialize<'a>>(body: &'a RequestBody, key: &str, wrong: &str) -> Result<Option<T>, ChatError> {
    match body.get(key) {
        None => Ok(None),
        Some(raw) if raw.get() == "null" => Ok(None),
        Some(raw) => serde_json::from_str(raw.get()).map(Some).map_err(|_| ChatError::invalid(wrong, Some(key))),
    }
}

/// The body of a request: a JSON object's fields.
pub(crate) fn body_of(bytes: &[u8]) -> Result<RequestBody, ChatError> {
    RequestBody::parse(bytes).map_err(|e| match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
        Ok(_) => ChatError::invalid("the request body must be a JSON object", None),
        Err(_) => ChatError::invalid(unparsable("the request body", &e), None),
    })
}

/// toolrouter's options (`toolrouter` in the body, never sent upstream):
/// the mode it names, else `header_mode`, `decompose` and `tool_search`.
fn options(
    body: &mut RequestBody,
    header_mode: Option<&str>,
    config: &OpenAiConfig,
) -> Result<(Option<Mode>, bool, Wanted), ChatError> {
    let options = match body.remove("toolrouter").map(|raw| serde_json::from_str::<Value>(raw.get())) {
        None | Some(Ok(Value::Null)) => Map::new(),
        Some(Ok(Value::Object(o))) => o,
        Some(_) => return Err(ChatError::invalid("`toolrouter` must be an object of options", Some("toolrouter"))),
    };
    let named = match options.get("mode") {
        None | Some(Value::Null) => header_mode,
        Some(Value::String(m)) => Some(m.as_str()),
        Some(_) => return Err(ChatError::invalid("`toolrouter.mode` must be a string", Some("toolrouter.mode"))),
    };
    let mode = match named.map(|m| (m, Mode::parse(m))) {
        None => None,
        Some((_, Some(mode))) => Some(mode),
        Some((other, None)) => {
            return Err(ChatError::invalid(
                format!("unknown mode `{other}`: route, plan or execute"),
                Some("toolrouter.mode"),
            ));
        }
    };
    let decompose = match options.get("decompose") {
        None | Some(Value::Null) => config.decompose,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(ChatError::invalid("`toolrouter.decompose` must be a boolean", Some("toolrouter.decompose")));
        }
    };
    let search = options.get("tool_search").unwrap_or(&Value::Null);
    let search = Wanted::parse(search).map_err(|e| ChatError::invalid(e, Some("toolrouter.tool_search")))?;
    Ok((mode, decompose, search))
}

/// `messages`: a non-empty array of objects, each with a known role.
fn check_messages(body: &RequestBody) -> Result<(), ChatError> {
    let list = "`messages` must be an array of messages";
    let messages: Vec<&RawValue> =
        field(body, "messages", list)?.ok_or_else(|| ChatError::invalid(list, Some("messages")))?;
    if messages.is_empty() {
        return Err(ChatError::invalid("`messages` must not be empty", Some("messages")));
    }
    for (i, m) in messages.iter().enumerate() {
        let role = serde_json::from_str::<Role>(m.get()).ok();
        if !role.is_some_and(|r| ROLES.contains(&&*r.role)) {
            return Err(ChatError::invalid(
                format!("messages[{i}] needs a role: one of {}", ROLES.join(", ")),
                Some(&format!("messages[{i}].role")),
            ));
        }
    }
    Ok(())
}

/// `n`: absent, null or 1. Every choice would need its own checks,
/// repairs and stream: refused rather than half served (only the first
/// choice checked, streamed choices merged).
fn check_n(body: &RequestBody) -> Result<(), ChatError> {
    match field::<Value>(body, "n", "`n` must be a positive integer")? {
        None => Ok(()),
        Some(n) if n.as_u64() == Some(1) => Ok(()),
        Some(n) if n.as_u64().is_some_and(|n| n > 1) => Err(ChatError::invalid(
            format!("toolrouter answers one choice per request (`n` is {n}): send {n} requests instead"),
            Some("n"),
        )),
        Some(_) => Err(ChatError::invalid("`n` must be a positive integer", Some("n"))),
    }
}

/// Parses and checks a request body ([`check`]; the tests' and the fuzzer's entry).
#[cfg(test)]
pub(crate) fn parse(
    bytes: &[u8],
    config: &OpenAiConfig,
    header_mode: Option<&str>,
    lists: &ToolLists,
    budget: Duration,
) -> Result<ChatRequest, ChatError> {
    check(body_of(bytes)?, config, header_mode, lists, budget)
}

/// Checks a request's fields; `lists`: the tool lists seen before;
/// `budget`: the request's time budget, from now.
pub(crate) fn check(
    mut body: RequestBody,
    config: &OpenAiConfig,
    header_mode: Option<&str>,
    lists: &ToolLists,
    budget: Duration,
) -> Result<ChatRequest, ChatError> {
    let (named, decompose, tool_search) = options(&mut body, header_mode, config)?;
    let wrong_model = "`model` must be a non-empty string";
    let model = match field::<String>(&body, "model", wrong_model)? {
        Some(m) if !m.trim().is_empty() => m,
        Some(_) => return Err(ChatError::invalid(wrong_model, Some("model"))),
        None => return Err(ChatError::invalid("you must provide a model parameter", Some("model"))),
    };
    let upstream_model = if config.models.is_empty() {
        model.clone()
    } else {
        config.models.get(&model).cloned().ok_or_else(|| ChatError::UnknownModel(model.clone()))?
    };
    check_messages(&body)?;
    let stream = field::<bool>(&body, "stream", "`stream` must be a boolean")?.unwrap_or(false);
    check_n(&body)?;
    let options = field::<Value>(&body, "stream_options", "").unwrap_or_default();
    let include_usage = options.and_then(|o| o.get("include_usage")?.as_bool()) == Some(true);
    let tool_choice = field::<Value>(&body, "tool_choice", "").unwrap_or_default();
    let forced = tool_choice.and_then(|c| Some(c.get("function")?.get("name")?.as_str()?.to_string()));
    let tools: Arc<ToolList> = match body.get("tools") {
        None => Arc::default(),
        Some(raw) if raw.get() == "null" => Arc::default(),
        Some(raw) => lists.get_or_parse(raw, config.max_request_tools)?,
    };
    if tools.is_empty() {
        // `null` or `[]`: no tools (OpenAI refuses an empty list).
        body.remove("tools");
    }
    let mode = match named {
        Some(mode) => mode,
        None if !tools.is_empty() => Mode::Route,
        None => config.default_mode,
    };
    if mode != Mode::Route && !tools.is_empty() {
        return Err(ChatError::invalid(
            "plan and execute modes use catalog APIs: send no `tools` (or use route mode)",
            Some("tools"),
        ));
    }
    let deadline = Instant::now() + budget;
    Ok(ChatRequest {
        body,
        model,
        upstream_model,
        stream,
        include_usage,
        tools,
        forced,
        mode,
        decompose,
        tool_search,
        deadline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::tools::*;
    use serde_json::json;

    const MS: Duration = Duration::from_secs(1);

    /// The field an error is about.
    fn param(e: &ChatError) -> Option<&str> {
        match e {
            ChatError::Invalid { param, .. } => param.as_deref(),
            _ => None,
        }
    }

    fn body(tools: &[Value]) -> Vec<u8> {
        serde_json::to_vec(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools}))
            .unwrap()
    }

    fn tool_def(name: &str, parameters: Value) -> Value {
        json!({"type": "function", "function": {"name": name, "description": "d", "parameters": parameters}})
    }

    #[test]
    fn a_tool_list_is_parsed_once_and_capped() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let tools: Vec<Value> = (0..3).map(|i| tool_def(&format!("t{i}"), schema.clone())).collect();
        let (config, lists) = (OpenAiConfig::default(), ToolLists::new(true));
        let first = parse(&body(&tools), &config, None, &lists, MS).unwrap();
        let again = parse(&body(&tools), &config, None, &lists, MS).unwrap();
        assert!(Arc::ptr_eq(&first.tools, &again.tools), "a list seen before is not parsed again");
        assert_eq!(first.body.get("tools").map(RawValue::get), Some(serde_json::to_string(&tools).unwrap().as_str()));

        // Tools with the same schema share one compiled validator; calls are checked.
        assert!(std::ptr::eq(
            match &first.tools[0].check {
                Check::Schema(s) => s.validator(),
                Check::Api(..) => unreachable!(),
            },
            match &first.tools[2].check {
                Check::Schema(s) => s.validator(),
                Check::Api(..) => unreachable!(),
            }
        ));
        assert!(first.tools[1].issues(&json!({"n": 1})).is_empty());
        assert!(first.tools[1].issues(&json!({"n": "x"}))[0].contains("/n"));

        let capped = OpenAiConfig { max_request_tools: 2, ..OpenAiConfig::default() };
        let e = parse(&body(&tools), &capped, None, &ToolLists::new(true), MS).err().unwrap();
        assert!(matches!(e, ChatError::Invalid { .. }) && param(&e) == Some("tools"), "{e:?}");
        assert!(e.to_string().contains("3 tools") && e.to_string().contains("openai.max_request_tools"), "{e}");
    }

    #[test]
    fn bad_tool_lists_are_refused_clearly() {
        let (config, lists) = (OpenAiConfig::default(), ToolLists::new(true));
        let refused = |tools: &[Value]| parse(&body(tools), &config, None, &lists, MS).err().expect("refused");
        let e = refused(&[tool_def("a", json!("string"))]);
        assert_eq!(param(&e), Some("tools[0].function.parameters"));
        assert!(e.to_string().contains("must be a JSON Schema object"), "{e}");
        // A schema no reading makes valid is served, its calls unchecked.
        let served = parse(&body(&[tool_def("a", json!({"type": 12, "format": 3}))]), &config, None, &lists, MS);
        let served = served.expect("served");
        assert!(served.tools[0].unchecked().is_some_and(|r| r.contains("format")), "{:?}", served.tools[0]);
        assert!(served.tools[0].issues(&json!({"anything": 1})).is_empty());
        let twice = [tool_def("a", json!({})), tool_def("a", json!({}))];
        assert!(refused(&twice).to_string().contains("two tools are named `a`"));
        let e =
            parse(br#"{"model": "m", "messages": [{"role": "user"}], "tools": {"a": 1}}"#, &config, None, &lists, MS)
                .err()
                .unwrap();
        assert_eq!(param(&e), Some("tools"));
        let e = parse(b"[1, 2]", &config, None, &lists, MS).err().unwrap();
        assert!(e.to_string().contains("must be a JSON object"), "{e}");
        let e = parse(b"{\"model\": ", &config, None, &lists, MS).err().unwrap();
        assert!(e.to_string().contains("not valid JSON"), "{e}");
        // Empty and huge descriptions, non-English text: accepted as they are.
        let odd = [
            json!({"type": "function", "function": {"name": "leer", "description": ""}}),
            json!({"type": "function", "function": {"name": "groß", "description": "天気予報 ".repeat(20_000)}}),
        ];
        assert!(
            refused(&odd[1..]).to_string().contains("must be 1-64 letters"),
            "non-ASCII names are refused by OpenAI too"
        );
        let ok = [odd[0].clone(), tool_def("wetter", json!({"description": "天気予報 ".repeat(20_000)}))];
        assert_eq!(parse(&body(&ok), &config, None, &lists, MS).unwrap().tools.len(), 2);
    }

    #[test]
    fn strict_client_tools_name_unknown_parameters_and_every_enum_value() {
        let schema = json!({"type": "object", "required": ["city"], "properties": {
            "city": {"type": "string"},
            "unit": {"enum": ["a", "b", "c", "d", "e"]},
            "where": {"type": "object", "properties": {"lat": {"type": "number"}}},
            "extra": {"type": "object", "additionalProperties": true, "properties": {}}}});
        let strict = ToolLists::new(true);
        let config = OpenAiConfig::default();
        let tools = parse(&body(&[tool_def("w", schema.clone())]), &config, None, &strict, MS).unwrap().tools;
        let issues = tools[0].issues(&json!({"city": "Paris", "country": "FR"}));
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert!(
            issues[0].contains("unknown parameter `country`") && issues[0].contains("`city`, `unit`, `where`, `extra`"),
            "{issues:?}"
        );
        let nested = tools[0].issues(&json!({"city": "P", "where": {"lat": 1, "lng": 2}}));
        assert!(nested[0].starts_with("/where: unknown parameter `lng`") && nested[0].contains("`lat`"), "{nested:?}");
        assert!(tools[0].issues(&json!({"city": "P", "extra": {"any": 1}})).is_empty(), "open objects stay open");
        let e = tools[0].issues(&json!({"city": "P", "unit": "z"}));
        assert!(e[0].contains(r#""a", "b", "c", "d", "e""#) && !e[0].contains("other candidates"), "{e:?}");
        // Off (args.strict = false): unknown parameters pass, as the schema says.
        let open = ToolLists::new(false);
        let tools = parse(&body(&[tool_def("w", schema)]), &config, None, &open, MS).unwrap().tools;
        assert!(tools[0].issues(&json!({"city": "Paris", "country": "FR"})).is_empty());
    }

    #[test]
    fn n_above_one_and_deep_nesting_are_refused_for_what_they_are() {
        let (config, lists) = (OpenAiConfig::default(), ToolLists::new(true));
        let with_n = |n: Value| {
            let b = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": n});
            parse(&serde_json::to_vec(&b).unwrap(), &config, None, &lists, MS)
        };
        assert!(with_n(json!(1)).is_ok());
        let e = with_n(json!(3)).err().unwrap();
        assert!(matches!(e, ChatError::Invalid { .. }) && param(&e) == Some("n"), "{e:?}");
        assert!(e.to_string().contains("send 3 requests"), "{e}");
        assert_eq!(with_n(json!(0)).err().as_ref().and_then(param), Some("n"));
        let mut deep = json!({"type": "string"});
        for _ in 0..200 {
            deep = json!({"type": "object", "properties": {"x": deep}});
        }
        let e = parse(&body(&[tool_def("deep", deep)]), &config, None, &lists, MS).err().unwrap();
        assert!(e.to_string().contains("nested more than 128 levels") && !e.to_string().contains("not valid"), "{e}");
    }
}
