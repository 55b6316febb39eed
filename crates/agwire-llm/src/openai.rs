//! OpenAI-compatible `/chat/completions` streaming: OpenAI, DashScope/Qwen,
//! DeepSeek, vLLM, Ollama, llama.cpp server.
//!
//! Read leniently, as these servers really write: `finish_reason` null, ""
//! or absent on intermediate chunks and sometimes beside the last content;
//! tool-call deltas without `index` (matched by `id`, else the last call),
//! repeated ids and names, arguments split anywhere, parallel calls
//! interleaved; `usage` as `{}`, null, or alone in a last chunk with no
//! choices; `reasoning_content` / `reasoning` deltas; an `error` object
//! mid-stream. Retries (backoff, `Retry-After`) happen only before the answer
//! starts; after that errors are items of the stream.

use std::collections::VecDeque;
use std::time::Duration;

use agwire_codec::sse::{SseDecoder, SseFrame};
use serde_json::{Map, Value, json};

use crate::chat::{
    BoxFuture, ChatEvent, ChatMessage, ChatModel, ChatRequest, ChatStream, FinishReason,
    ToolChoice, Usage, UserPart,
};
use crate::error::Error;

/// How to reach a provider.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Base URL (`https://api.openai.com/v1`, `http://localhost:11434/v1`).
    pub base_url: String,
    /// Bearer key, when the server wants one.
    pub api_key: Option<String>,
    /// Default model.
    pub model: String,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Time to wait for the answer to start (headers).
    pub first_byte_timeout: Duration,
    /// Retries on 408/409/429/5xx and connection errors, before the answer
    /// starts.
    pub max_retries: u32,
    /// First backoff (doubles each retry, at most 20 s; `Retry-After` wins).
    pub initial_backoff: Duration,
}

impl OpenAiConfig {
    /// A config with defaults for everything but where and what.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(120),
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
        }
    }

    /// Sends `Authorization: Bearer <key>`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// From `AGWIRE_LLM_BASE_URL`, `AGWIRE_LLM_API_KEY`, `AGWIRE_LLM_MODEL`
    /// (`None` without a base URL).
    pub fn from_env() -> Option<Self> {
        let base = std::env::var("AGWIRE_LLM_BASE_URL")
            .ok()
            .filter(|b| !b.is_empty())?;
        let model = std::env::var("AGWIRE_LLM_MODEL").unwrap_or_else(|_| "gpt-4o-mini".into());
        let mut config = Self::new(base, model);
        config.api_key = std::env::var("AGWIRE_LLM_API_KEY")
            .ok()
            .filter(|k| !k.is_empty());
        Some(config)
    }
}

/// An OpenAI-compatible provider.
#[derive(Debug, Clone)]
pub struct OpenAiCompatible {
    config: OpenAiConfig,
    client: reqwest::Client,
    name: String,
}

impl OpenAiCompatible {
    /// A provider from its config.
    pub fn new(config: OpenAiConfig) -> Result<Self, Error> {
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| Error::Transport(e.to_string()))?;
        Ok(Self {
            name: format!("openai:{}", config.model),
            config,
            client,
        })
    }

    fn url(&self) -> String {
        format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        )
    }

    async fn start(&self, request: ChatRequest) -> Result<ChatStream, Error> {
        let body = request_body(&request, &self.config.model);
        let mut attempt = 0;
        loop {
            let mut http = self
                .client
                .post(self.url())
                .header("content-type", "application/json")
                .header("accept", "text/event-stream")
                .body(body.to_string());
            if let Some(key) = &self.config.api_key {
                http = http.bearer_auth(key);
            }
            // The caller's trace continues at the provider (W3C
            // `traceparent`), when a propagator is installed.
            for (name, value) in crate::telemetry::trace_headers() {
                http = http.header(name, value);
            }
            let sent = tokio::time::timeout(self.config.first_byte_timeout, http.send()).await;
            let wait = match sent {
                Ok(Ok(response)) if response.status().is_success() => {
                    return Ok(answer_stream(response));
                }
                Ok(Ok(response)) => {
                    let status = response.status().as_u16();
                    let retry_after = response
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    let text = response.text().await.unwrap_or_default();
                    let error = Error::Http {
                        status,
                        message: provider_message(&text),
                    };
                    if !matches!(status, 408 | 409 | 429 | 500 | 502 | 503 | 504)
                        || attempt >= self.config.max_retries
                    {
                        return Err(error);
                    }
                    tracing::warn!(%error, attempt, "retrying the model call");
                    retry_after
                }
                Ok(Err(error)) => {
                    if attempt >= self.config.max_retries {
                        return Err(Error::Transport(error.to_string()));
                    }
                    tracing::warn!(%error, attempt, "retrying the model call");
                    None
                }
                Err(_) => {
                    return Err(Error::Transport("no answer before the timeout".into()));
                }
            };
            let backoff = self
                .config
                .initial_backoff
                .saturating_mul(1 << attempt.min(6))
                .min(Duration::from_secs(20));
            tokio::time::sleep(wait.unwrap_or(backoff).min(Duration::from_secs(30))).await;
            attempt += 1;
        }
    }
}

impl ChatModel for OpenAiCompatible {
    fn name(&self) -> &str {
        &self.name
    }

    fn info(&self) -> crate::ModelInfo {
        let info = crate::ModelInfo {
            provider: "openai".to_owned(),
            model: self.config.model.clone(),
            server: None,
        };
        match reqwest::Url::parse(&self.config.base_url) {
            Ok(url) => match (url.host_str(), url.port_or_known_default()) {
                (Some(host), Some(port)) => info.server(host, port),
                _ => info,
            },
            Err(_) => info,
        }
    }

    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatStream, Error>> {
        Box::pin(self.start(request))
    }
}

/// The provider's own message in an error body (`{"error": {"message"}}`),
/// else the body's start.
fn provider_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error").filter(|e| e.is_string()))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    message.unwrap_or_else(|| body.chars().take(2048).collect())
}

/// The request as OpenAI's API reads it.
pub(crate) fn request_body(request: &ChatRequest, default_model: &str) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|message| match message {
            ChatMessage::System(text) => json!({"role": "system", "content": text}),
            ChatMessage::User { content } => {
                let content = match content.as_slice() {
                    [UserPart::Text(text)] => Value::String(text.clone()),
                    parts => Value::Array(
                        parts
                            .iter()
                            .map(|part| match part {
                                UserPart::Text(text) => json!({"type": "text", "text": text}),
                                UserPart::ImageUrl(url) => {
                                    json!({"type": "image_url", "image_url": {"url": url}})
                                }
                            })
                            .collect(),
                    ),
                };
                json!({"role": "user", "content": content})
            }
            ChatMessage::Assistant {
                content,
                tool_calls,
                ..
            } => {
                let mut m = json!({"role": "assistant", "content": content});
                if !tool_calls.is_empty() {
                    m["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                        .collect();
                }
                m
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
        })
        .collect();
    let mut body = json!({
        "model": request.model.as_deref().unwrap_or(default_model),
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
    }
    if let Some(choice) = &request.tool_choice {
        body["tool_choice"] = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Named(name) => json!({"type": "function", "function": {"name": name}}),
        };
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(n) = request.max_tokens {
        body["max_tokens"] = json!(n);
    }
    if request.json_mode {
        body["response_format"] = json!({"type": "json_object"});
    }
    body
}

/// One tool call being assembled.
#[derive(Debug, Default)]
struct Call {
    provider_index: Option<u64>,
    id: Option<String>,
    name: String,
    /// Arguments that arrived before the name (sent once it is known).
    pending: String,
    started: bool,
}

/// Turns chunk payloads into [`ChatEvent`]s.
#[derive(Debug, Default)]
pub(crate) struct ChunkReader {
    calls: Vec<Call>,
    /// Index of each started call in start order.
    started: usize,
    order: Vec<usize>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    done: bool,
}

fn number(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_u64)
}

impl ChunkReader {
    /// Reads one `data:` payload.
    pub(crate) fn chunk(&mut self, data: &str, out: &mut Vec<ChatEvent>) -> Result<(), Error> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Value =
            serde_json::from_str(data).map_err(|e| Error::Malformed(e.to_string()))?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(Error::Provider(message));
        }
        if let Some(usage) = chunk.get("usage").and_then(Value::as_object)
            && let Some(prompt) = number(usage.get("prompt_tokens"))
        {
            let completion = number(usage.get("completion_tokens")).unwrap_or(0);
            self.usage = Some(Usage {
                prompt_tokens: prompt,
                completion_tokens: completion,
                total_tokens: number(usage.get("total_tokens")).unwrap_or(prompt + completion),
                reasoning_tokens: number(
                    chunk.pointer("/usage/completion_tokens_details/reasoning_tokens"),
                ),
                cached_tokens: number(chunk.pointer("/usage/prompt_tokens_details/cached_tokens"))
                    .or_else(|| number(usage.get("prompt_cache_hit_tokens"))),
            });
        }
        for choice in chunk
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            // Only the first choice (n = 1) is ours.
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.get("delta").and_then(Value::as_object) {
                self.delta(delta, out);
            }
            if let Some(reason) = choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
            {
                self.finish = Some(match reason {
                    "stop" | "eos" => FinishReason::Stop,
                    "length" => FinishReason::Length,
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "content_filter" => FinishReason::ContentFilter,
                    other => FinishReason::Other(other.to_owned()),
                });
            }
        }
        Ok(())
    }

    fn delta(&mut self, delta: &Map<String, Value>, out: &mut Vec<ChatEvent>) {
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta
                .get(key)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                out.push(ChatEvent::ReasoningDelta(text.to_owned()));
                break;
            }
        }
        if let Some(text) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            out.push(ChatEvent::TextDelta(text.to_owned()));
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.tool_call(call, out);
        }
    }

    fn tool_call(&mut self, call: &Value, out: &mut Vec<ChatEvent>) {
        let index = call.get("index").and_then(Value::as_u64);
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|i| !i.is_empty());
        let slot = if let Some(index) = index {
            self.calls
                .iter()
                .position(|c| c.provider_index == Some(index))
        } else if let Some(id) = id {
            self.calls
                .iter()
                .position(|c| c.id.as_deref() == Some(id))
                .or_else(|| {
                    // A new id: a new call — unless the last call has no id
                    // yet (the id came late).
                    self.calls
                        .last()
                        .filter(|c| c.id.is_none())
                        .map(|_| self.calls.len() - 1)
                })
        } else {
            self.calls.len().checked_sub(1)
        };
        let slot = slot.unwrap_or_else(|| {
            self.calls.push(Call {
                provider_index: index,
                ..Call::default()
            });
            self.calls.len() - 1
        });
        let entry = &mut self.calls[slot];
        if entry.id.is_none()
            && let Some(id) = id
        {
            entry.id = Some(id.to_owned());
        }
        let function = call.get("function");
        if entry.name.is_empty()
            && let Some(name) = function
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
        {
            name.clone_into(&mut entry.name);
        }
        if let Some(args) = function
            .and_then(|f| f.get("arguments"))
            .and_then(Value::as_str)
        {
            entry.pending.push_str(args);
        }
        self.flush(slot, out);
    }

    /// Starts a call once its name is known, then sends what waited.
    fn flush(&mut self, slot: usize, out: &mut Vec<ChatEvent>) {
        let started = self.started;
        let entry = &mut self.calls[slot];
        if !entry.started {
            if entry.name.is_empty() {
                return;
            }
            entry.started = true;
            let id = entry
                .id
                .clone()
                .unwrap_or_else(|| format!("call_{started}"));
            entry.id = Some(id.clone());
            self.order.push(slot);
            self.started += 1;
            out.push(ChatEvent::ToolCallStart {
                index: started,
                id,
                name: entry.name.clone(),
            });
        }
        let entry = &mut self.calls[slot];
        if !entry.pending.is_empty() {
            let index = self.order.iter().position(|s| *s == slot).unwrap_or(0);
            out.push(ChatEvent::ToolCallArgs {
                index,
                delta: std::mem::take(&mut entry.pending),
            });
        }
    }

    /// The stream ended (`[DONE]` or end of body): usage and finish, or
    /// why not.
    pub(crate) fn end(&mut self, out: &mut Vec<ChatEvent>) -> Result<(), Error> {
        if !self.done && self.finish.is_none() {
            return Err(Error::Truncated);
        }
        if let Some(unnamed) = self.calls.iter().find(|c| !c.started) {
            tracing::warn!(id = ?unnamed.id, "a tool call without a name was dropped");
        }
        if let Some(usage) = self.usage.take() {
            out.push(ChatEvent::Usage(usage));
        }
        let finish = self.finish.take().unwrap_or(if self.started > 0 {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        });
        out.push(ChatEvent::Finish(finish));
        Ok(())
    }

    /// `[DONE]` was read.
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }
}

struct Reading {
    response: reqwest::Response,
    decoder: SseDecoder,
    reader: ChunkReader,
    frames: Vec<SseFrame>,
    queue: VecDeque<Result<ChatEvent, Error>>,
    over: bool,
}

impl Reading {
    fn take(&mut self, frames_done: bool) {
        let mut events = Vec::new();
        for frame in self.frames.drain(..) {
            if self.reader.is_done() {
                break;
            }
            if let Err(error) = self.reader.chunk(&frame.data, &mut events) {
                self.queue.extend(events.drain(..).map(Ok));
                self.queue.push_back(Err(error));
                self.over = true;
                return;
            }
        }
        if frames_done || self.reader.is_done() {
            let end = self.reader.end(&mut events);
            self.queue.extend(events.drain(..).map(Ok));
            if let Err(error) = end {
                self.queue.push_back(Err(error));
            }
            self.over = true;
        } else {
            self.queue.extend(events.drain(..).map(Ok));
        }
    }
}

fn answer_stream(response: reqwest::Response) -> ChatStream {
    let reading = Reading {
        response,
        decoder: SseDecoder::new(),
        reader: ChunkReader::default(),
        frames: Vec::new(),
        queue: VecDeque::new(),
        over: false,
    };
    Box::pin(futures_util::stream::unfold(reading, |mut r| async move {
        loop {
            if let Some(item) = r.queue.pop_front() {
                return Some((item, r));
            }
            if r.over {
                return None;
            }
            match r.response.chunk().await {
                Ok(Some(bytes)) => {
                    if let Err(error) = r.decoder.push(&bytes, &mut r.frames) {
                        r.queue.push_back(Err(Error::Malformed(error.to_string())));
                        r.over = true;
                        continue;
                    }
                    r.take(false);
                }
                Ok(None) => {
                    let _ = r.decoder.finish(&mut r.frames);
                    r.take(true);
                }
                Err(error) => {
                    // Broken off: what was complete still counts.
                    r.take(false);
                    if !r.over {
                        r.queue.push_back(Err(if r.reader.is_done() {
                            Error::Transport(error.to_string())
                        } else {
                            Error::Truncated
                        }));
                        r.over = true;
                    }
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(chunks: &[&str]) -> (Vec<ChatEvent>, Result<(), Error>) {
        let mut reader = ChunkReader::default();
        let mut out = Vec::new();
        for chunk in chunks {
            if let Err(e) = reader.chunk(chunk, &mut out) {
                return (out, Err(e));
            }
        }
        let end = reader.end(&mut out);
        (out, end)
    }

    #[test]
    fn calls_without_index_are_matched_by_id_then_continued() {
        let (events, end) = read(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        end.unwrap();
        assert_eq!(
            events,
            [
                ChatEvent::ToolCallStart {
                    index: 0,
                    id: "a".into(),
                    name: "f".into()
                },
                ChatEvent::ToolCallArgs {
                    index: 0,
                    delta: "{\"x\"".into()
                },
                ChatEvent::ToolCallArgs {
                    index: 0,
                    delta: ":1}".into()
                },
                ChatEvent::ToolCallStart {
                    index: 1,
                    id: "b".into(),
                    name: "g".into()
                },
                ChatEvent::ToolCallArgs {
                    index: 1,
                    delta: "{}".into()
                },
                ChatEvent::Finish(FinishReason::ToolCalls),
            ]
        );
    }

    #[test]
    fn a_name_arriving_late_holds_the_arguments_and_ids_are_made_up_when_missing() {
        let (events, end) = read(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"2}"}}]}}]}"#,
            "[DONE]",
        ]);
        end.unwrap();
        assert_eq!(
            events,
            [
                ChatEvent::ToolCallStart {
                    index: 0,
                    id: "call_0".into(),
                    name: "f".into()
                },
                ChatEvent::ToolCallArgs {
                    index: 0,
                    delta: "{\"a\":2}".into()
                },
                ChatEvent::Finish(FinishReason::ToolCalls),
            ]
        );
    }

    #[test]
    fn empty_usage_and_finish_reasons_are_ignored_and_a_cut_stream_is_an_error() {
        let (events, end) = read(&[
            r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":""}],"usage":{}}"#,
            r#"{"choices":[{"delta":{"content":"!"},"finish_reason":null}],"usage":null}"#,
        ]);
        assert!(matches!(end, Err(Error::Truncated)));
        assert_eq!(
            events,
            [
                ChatEvent::TextDelta("hi".into()),
                ChatEvent::TextDelta("!".into())
            ]
        );
    }

    #[test]
    fn error_bodies_name_the_providers_message() {
        assert_eq!(
            provider_message(
                r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#
            ),
            "Incorrect API key provided"
        );
        assert_eq!(
            provider_message("upstream connect error"),
            "upstream connect error"
        );
    }
}
