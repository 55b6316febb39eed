//! `OpenAiCompatible` against a local fake OpenAI-compatible server over real
//! HTTP: chunk sequences written the way OpenAI, DeepSeek, Ollama and
//! llama.cpp write them (split mid-line and mid-UTF-8), retries, errors, the
//! request body, and cancellation closing the upstream connection.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::needless_pass_by_value
)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agwire_llm::{
    ChatEvent, ChatMessage, ChatModel, ChatRequest, Error, FinishReason, OpenAiCompatible,
    OpenAiConfig, ToolCall, ToolChoice, ToolSpec, Usage, UserPart, collect,
};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Response, StatusCode};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// One scripted answer of the fake server.
#[derive(Clone)]
pub(crate) struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    /// Body pieces, written separately.
    pieces: Vec<Vec<u8>>,
    /// Keep writing `: ping` forever after the pieces (cancellation test).
    endless: bool,
}

#[derive(Clone, Default)]
pub(crate) struct Fake {
    pub(crate) replies: Arc<Mutex<VecDeque<Reply>>>,
    pub(crate) requests: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
    dropped: Arc<AtomicBool>,
}

struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

async fn completions(State(fake): State<Fake>, headers: HeaderMap, body: Bytes) -> Response<Body> {
    fake.requests
        .lock()
        .unwrap()
        .push((headers, serde_json::from_slice(&body).unwrap()));
    let reply = fake
        .replies
        .lock()
        .unwrap()
        .pop_front()
        .expect("a scripted reply");
    let flag = DropFlag(fake.dropped);
    let pieces = reply.pieces.clone();
    let endless = reply.endless;
    let stream = futures_util::stream::unfold((0usize, flag), move |(i, flag)| {
        let pieces = pieces.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            if i < pieces.len() {
                return Some((
                    Ok::<_, std::io::Error>(Bytes::from(pieces[i].clone())),
                    (i + 1, flag),
                ));
            }
            if endless {
                tokio::time::sleep(Duration::from_millis(20)).await;
                return Some((Ok(Bytes::from_static(b": ping\n\n")), (i + 1, flag)));
            }
            drop(flag);
            None
        }
    });
    let mut response = Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
    for (k, v) in &reply.headers {
        response = response.header(*k, v);
    }
    if reply.status == 200 {
        response = response.header("content-type", "text/event-stream");
    }
    response.body(Body::from_stream(stream)).unwrap()
}

pub(crate) async fn fake() -> (SocketAddr, Fake) {
    let fake = Fake::default();
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, fake)
}

/// `data:` lines of OpenAI chunk objects, then `[DONE]`; the bytes split at
/// fixed, awkward places (mid-line, mid-UTF-8).
pub(crate) fn sse(chunks: &[Value], done: bool) -> Vec<Vec<u8>> {
    let mut text = String::new();
    for (i, delta_choice) in chunks.iter().enumerate() {
        let mut chunk = json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1_773_658_353,
            "model": "test-model", "system_fingerprint": null
        });
        for (k, v) in delta_choice.as_object().unwrap() {
            chunk[k] = v.clone();
        }
        if chunk.get("choices").is_none() {
            chunk["choices"] = json!([]);
        }
        text.push_str(&format!("data: {chunk}\n\n"));
        let _ = i;
    }
    if done {
        text.push_str("data: [DONE]\n\n");
    }
    let bytes = text.into_bytes();
    bytes.chunks(37).map(<[u8]>::to_vec).collect()
}

pub(crate) fn choice(delta: Value, finish: Value) -> Value {
    json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}]})
}

pub(crate) fn ok(pieces: Vec<Vec<u8>>) -> Reply {
    Reply {
        status: 200,
        headers: Vec::new(),
        pieces,
        endless: false,
    }
}

pub(crate) fn model(addr: SocketAddr) -> OpenAiCompatible {
    let mut config = OpenAiConfig::new(format!("http://{addr}/v1/"), "test-model");
    config.api_key = Some("sk-test".into());
    config.initial_backoff = Duration::from_millis(5);
    OpenAiCompatible::new(config).unwrap()
}

async fn drain(model: &OpenAiCompatible, request: ChatRequest) -> (Vec<ChatEvent>, Option<Error>) {
    let mut stream = model.stream(request).await.unwrap();
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(error) => return (events, Some(error)),
        }
    }
    (events, None)
}

fn hello() -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::user("hi")],
        ..ChatRequest::default()
    }
}

#[tokio::test]
async fn text_with_usage_in_a_last_chunk_without_choices() {
    let (addr, fake) = fake().await;
    fake.replies.lock().unwrap().push_back(ok(sse(
        &[
            choice(json!({"role": "assistant", "content": ""}), Value::Null),
            choice(json!({"content": "你好，"}), json!("")),
            choice(json!({"content": "world"}), Value::Null),
            choice(json!({}), json!("stop")),
            json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15,
                   "completion_tokens_details": {"reasoning_tokens": 0}, "prompt_tokens_details": {"cached_tokens": 4}}}),
        ],
        true,
    )));
    let (events, error) = drain(&model(addr), hello()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events,
        [
            ChatEvent::TextDelta("你好，".into()),
            ChatEvent::TextDelta("world".into()),
            ChatEvent::Usage({
                let mut usage = Usage::new(12, 3);
                usage.reasoning_tokens = Some(0);
                usage.cached_tokens = Some(4);
                usage
            }),
            ChatEvent::Finish(FinishReason::Stop),
        ]
    );
}

#[tokio::test]
async fn parallel_tool_calls_interleaved_with_split_arguments() {
    let (addr, fake) = fake().await;
    let call = |index: u64, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut c = json!({"index": index, "function": {"arguments": args}});
        if let Some(id) = id {
            c["id"] = json!(id);
            c["type"] = json!("function");
        }
        if let Some(name) = name {
            c["function"]["name"] = json!(name);
        }
        choice(json!({"tool_calls": [c]}), Value::Null)
    };
    fake.replies.lock().unwrap().push_back(ok(sse(
        &[
            call(0, Some("call_a"), Some("get_weather"), ""),
            call(1, Some("call_b"), Some("get_time"), ""),
            call(0, None, None, "{\"ci"),
            call(1, None, None, "{\"tz\":"),
            call(0, None, None, "ty\":\"Paris\"}"),
            call(1, None, None, "\"UTC\"}"),
            choice(json!({}), json!("tool_calls")),
            json!({"choices": [], "usage": {}}),
        ],
        true,
    )));
    let answer = collect(model(addr).stream(hello()).await.unwrap())
        .await
        .unwrap();
    assert_eq!(
        answer.tool_calls,
        [
            ToolCall {
                id: "call_a".into(),
                name: "get_weather".into(),
                arguments: "{\"city\":\"Paris\"}".into()
            },
            ToolCall {
                id: "call_b".into(),
                name: "get_time".into(),
                arguments: "{\"tz\":\"UTC\"}".into()
            },
        ]
    );
    assert_eq!(answer.finish, FinishReason::ToolCalls);
    assert_eq!(answer.usage, None);
}

#[tokio::test]
async fn llama_cpp_calls_without_index_and_finish_beside_content() {
    let (addr, fake) = fake().await;
    fake.replies.lock().unwrap().push_back(ok(sse(
        &[
            choice(json!({"tool_calls": [{"id": "x1", "type": "function", "function": {"name": "calendar_write", "arguments": "{\"title\":"}}]}), Value::Null),
            choice(json!({"tool_calls": [{"function": {"arguments": "\"Standup\"}"}}]}), Value::Null),
            choice(json!({"content": "ok"}), json!("tool_calls")),
        ],
        true,
    )));
    let (events, error) = drain(&model(addr), hello()).await;
    assert!(error.is_none());
    assert_eq!(
        events,
        [
            ChatEvent::ToolCallStart {
                index: 0,
                id: "x1".into(),
                name: "calendar_write".into()
            },
            ChatEvent::ToolCallArgs {
                index: 0,
                delta: "{\"title\":".into()
            },
            ChatEvent::ToolCallArgs {
                index: 0,
                delta: "\"Standup\"}".into()
            },
            ChatEvent::TextDelta("ok".into()),
            ChatEvent::Finish(FinishReason::ToolCalls),
        ]
    );
}

#[tokio::test]
async fn deepseek_reasoning_then_content() {
    let (addr, fake) = fake().await;
    fake.replies.lock().unwrap().push_back(ok(sse(
        &[
            choice(json!({"role": "assistant", "content": null, "reasoning_content": "Let me think"}), Value::Null),
            choice(json!({"content": null, "reasoning_content": "…done."}), Value::Null),
            choice(json!({"content": "42", "reasoning_content": null}), Value::Null),
            choice(json!({"content": ""}), json!("stop")),
            json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14, "prompt_cache_hit_tokens": 2}}),
        ],
        true,
    )));
    let answer = collect(model(addr).stream(hello()).await.unwrap())
        .await
        .unwrap();
    assert_eq!(answer.reasoning, "Let me think…done.");
    assert_eq!(answer.text, "42");
    assert_eq!(answer.usage.unwrap().cached_tokens, Some(2));
}

#[tokio::test]
async fn errors_mid_stream_and_cut_streams_are_stream_errors() {
    let (addr, fake) = fake().await;
    fake.replies.lock().unwrap().push_back(ok(sse(
        &[
            choice(json!({"content": "par"}), Value::Null),
            json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error"}}),
        ],
        false,
    )));
    fake.replies.lock().unwrap().push_back(ok(sse(
        &[choice(json!({"content": "half"}), Value::Null)],
        false,
    )));
    let model = model(addr);
    let (events, error) = drain(&model, hello()).await;
    assert_eq!(events, [ChatEvent::TextDelta("par".into())]);
    assert!(
        matches!(error, Some(Error::Provider(ref m)) if m.contains("server had an error")),
        "{error:?}"
    );
    let (events, error) = drain(&model, hello()).await;
    assert_eq!(events, [ChatEvent::TextDelta("half".into())]);
    assert!(matches!(error, Some(Error::Truncated)), "{error:?}");
    // Neither was retried: one request each.
    assert_eq!(fake.requests.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn rate_limits_are_retried_and_auth_errors_are_not() {
    let (addr, fake) = fake().await;
    let limited = Reply {
        status: 429,
        headers: vec![("retry-after", "0".into())],
        pieces: vec![br#"{"error":{"message":"Rate limit reached"}}"#.to_vec()],
        endless: false,
    };
    {
        let mut replies = fake.replies.lock().unwrap();
        replies.push_back(limited.clone());
        replies.push_back(Reply {
            status: 503,
            ..limited.clone()
        });
        replies.push_back(ok(sse(
            &[choice(json!({"content": "finally"}), json!("stop"))],
            true,
        )));
        replies.push_back(Reply {
            status: 401,
            headers: Vec::new(),
            pieces: vec![br#"{"error":{"message":"Incorrect API key provided: sk-test.","type":"invalid_request_error","code":"invalid_api_key"}}"#.to_vec()],
            endless: false,
        });
    }
    let model = model(addr);
    let answer = collect(model.stream(hello()).await.unwrap()).await.unwrap();
    assert_eq!(answer.text, "finally");
    assert_eq!(fake.requests.lock().unwrap().len(), 3);
    let error = model.stream(hello()).await.err().unwrap();
    match error {
        Error::Http { status, message } => {
            assert_eq!(status, 401);
            assert_eq!(message, "Incorrect API key provided: sk-test.");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fake.requests.lock().unwrap().len(), 4);
}

#[tokio::test]
async fn the_request_is_written_the_openai_way() {
    let (addr, fake) = fake().await;
    fake.replies.lock().unwrap().push_back(ok(sse(
        &[choice(json!({"content": "k"}), json!("stop"))],
        true,
    )));
    let request = ChatRequest {
        model: None,
        messages: vec![
            ChatMessage::system("be brief"),
            ChatMessage::User {
                content: vec![
                    UserPart::Text("what is this?".into()),
                    UserPart::ImageUrl("https://x/a.png".into()),
                ],
            },
            ChatMessage::Assistant {
                content: None,
                reasoning: Some("hidden".into()),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "look".into(),
                    arguments: "{}".into(),
                }],
            },
            ChatMessage::Tool {
                tool_call_id: "c1".into(),
                content: "{\"seen\":true}".into(),
            },
            ChatMessage::user("and now?"),
        ],
        tools: vec![ToolSpec {
            name: "look".into(),
            description: "Look".into(),
            parameters: json!({"type": "object"}),
        }],
        tool_choice: Some(ToolChoice::Auto),
        temperature: Some(0.5),
        max_tokens: Some(100),
        json_mode: true,
        response_schema: None,
    };
    collect(model(addr).stream(request).await.unwrap())
        .await
        .unwrap();
    let (headers, body) = fake.requests.lock().unwrap()[0].clone();
    assert_eq!(headers["authorization"], "Bearer sk-test");
    assert_eq!(
        body,
        json!({
            "model": "test-model",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "https://x/a.png"}}]},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "{\"seen\":true}"},
                {"role": "user", "content": "and now?"}
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "tools": [{"type": "function", "function": {"name": "look", "description": "Look", "parameters": {"type": "object"}}}],
            "tool_choice": "auto",
            "temperature": 0.5,
            "max_tokens": 100,
            "response_format": {"type": "json_object"}
        })
    );
}

#[tokio::test]
async fn dropping_the_stream_closes_the_upstream_connection() {
    let (addr, fake) = fake().await;
    fake.replies.lock().unwrap().push_back(Reply {
        endless: true,
        ..ok(sse(
            &[choice(json!({"content": "streaming..."}), Value::Null)],
            false,
        ))
    });
    let mut stream = model(addr).stream(hello()).await.unwrap();
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        ChatEvent::TextDelta("streaming...".into())
    );
    assert!(!fake.dropped.load(Ordering::SeqCst));
    drop(stream);
    for _ in 0..200 {
        if fake.dropped.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the server never saw the connection close");
}
