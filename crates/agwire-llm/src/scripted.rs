//! A deterministic model for tests and for running the service with no
//! provider configured: replies come from a rule over the request, or from
//! a queue, streamed as a real provider would (word by word, usage, finish).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::chat::{BoxFuture, ChatEvent, ChatModel, ChatRequest, ChatStream, FinishReason, Usage};
use crate::error::Error;

type Rule = dyn Fn(&ChatRequest) -> Vec<ChatEvent> + Send + Sync;

/// Where replies come from.
enum Source {
    Rule(Box<Rule>),
    Queue(Mutex<VecDeque<Vec<ChatEvent>>>),
}

/// A scripted model.
#[derive(Clone)]
pub struct ScriptedModel {
    source: Arc<Source>,
    /// The requests received, when they are kept (see [`ScriptedModel::requests`]).
    requests: Option<Arc<Mutex<Vec<ChatRequest>>>>,
    delay: Duration,
    name: String,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ScriptedModel {
    /// Replies computed by `rule` from each request. It serves any number
    /// of requests and keeps none of them (see [`ScriptedModel::recording`]).
    pub fn new(rule: impl Fn(&ChatRequest) -> Vec<ChatEvent> + Send + Sync + 'static) -> Self {
        Self::from_source(Source::Rule(Box::new(rule)))
    }

    /// These replies, one per call, in order (a call past the end fails).
    /// The requests are kept ([`ScriptedModel::requests`]): there are at most
    /// as many as replies.
    pub fn queue(replies: Vec<Vec<ChatEvent>>) -> Self {
        Self::from_source(Source::Queue(Mutex::new(replies.into()))).recording()
    }

    fn from_source(source: Source) -> Self {
        Self {
            source: Arc::new(source),
            requests: None,
            delay: Duration::ZERO,
            name: "scripted".into(),
        }
    }

    /// Keeps every request it receives, for [`ScriptedModel::requests`]
    /// (tests). A model that serves a service indefinitely must not: its
    /// memory would grow with every call.
    pub fn recording(mut self) -> Self {
        self.requests = Some(Arc::default());
        self
    }

    /// Pauses before each event (demos; runs that must stay in flight).
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Every request received so far, if they are kept (empty otherwise).
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests
            .as_ref()
            .and_then(|r| r.lock().ok().map(|r| r.clone()))
            .unwrap_or_default()
    }
}

impl ChatModel for ScriptedModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatStream, Error>> {
        let reply = match &*self.source {
            Source::Rule(rule) => Some(rule(&request)),
            Source::Queue(queue) => queue.lock().ok().and_then(|mut q| q.pop_front()),
        };
        if let Some(Ok(mut requests)) = self.requests.as_ref().map(|r| r.lock()) {
            requests.push(request);
        }
        let delay = self.delay;
        Box::pin(async move {
            let reply = reply.ok_or(Error::Exhausted)?;
            let stream =
                futures_util::stream::unfold(reply.into_iter(), move |mut events| async move {
                    let event = events.next()?;
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    Some((Ok(event), events))
                });
            Ok(Box::pin(stream) as ChatStream)
        })
    }
}

/// Builders of scripted replies.
#[derive(Debug, Clone, Copy)]
pub struct ScriptedReply;

fn usage(prompt: u64, completion: u64) -> ChatEvent {
    ChatEvent::Usage(Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
        reasoning_tokens: None,
        cached_tokens: None,
    })
}

impl ScriptedReply {
    /// `text` streamed word by word, then usage (one token per word), then
    /// `stop`.
    pub fn text(text: &str) -> Vec<ChatEvent> {
        let words: Vec<ChatEvent> = text
            .split_inclusive(' ')
            .map(|w| ChatEvent::TextDelta(w.to_owned()))
            .collect();
        let n = words.len() as u64;
        let mut reply = words;
        reply.push(usage(10, n));
        reply.push(ChatEvent::Finish(FinishReason::Stop));
        reply
    }

    /// One call to `name` with `arguments` (JSON text) split in three, then
    /// `tool_calls`.
    pub fn tool_call(id: &str, name: &str, arguments: &str) -> Vec<ChatEvent> {
        let mut reply = Self::calls(&[(id, name, arguments)]);
        reply.push(usage(10, 5));
        reply.push(ChatEvent::Finish(FinishReason::ToolCalls));
        reply
    }

    /// Several calls (start and arguments in order), without usage and
    /// finish: to combine.
    pub fn calls(calls: &[(&str, &str, &str)]) -> Vec<ChatEvent> {
        let mut reply = Vec::new();
        for (index, (id, name, arguments)) in calls.iter().enumerate() {
            reply.push(ChatEvent::ToolCallStart {
                index,
                id: (*id).to_owned(),
                name: (*name).to_owned(),
            });
            let chars: Vec<char> = arguments.chars().collect();
            let third = chars.len().div_ceil(3).max(1);
            for piece in chars.chunks(third) {
                reply.push(ChatEvent::ToolCallArgs {
                    index,
                    delta: piece.iter().collect(),
                });
            }
        }
        reply
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ChatRequest {
        ChatRequest {
            messages: vec![crate::ChatMessage::user("hi")],
            ..ChatRequest::default()
        }
    }

    #[tokio::test]
    async fn a_rule_model_keeps_no_request_and_a_queue_keeps_each() {
        // The model `agwire serve` runs without a provider answers forever:
        // keeping every request grew the process by ~10 KiB per run.
        let rule = ScriptedModel::new(|_| ScriptedReply::text("ok"));
        for _ in 0..100 {
            drop(rule.stream(request()).await);
        }
        assert!(rule.requests().is_empty());
        let recorded = ScriptedModel::new(|_| ScriptedReply::text("ok")).recording();
        drop(recorded.stream(request()).await);
        assert_eq!(recorded.requests().len(), 1);
        let queue = ScriptedModel::queue(vec![ScriptedReply::text("a"), ScriptedReply::text("b")]);
        drop(queue.stream(request()).await);
        drop(queue.stream(request()).await);
        assert_eq!(queue.requests().len(), 2);
    }
}
