//! [`HttpAgent`] against a real agwire-server endpoint on loopback: what it
//! sends run after run (the server records every request body), what it
//! keeps when a run fails, the transport it runs on (TLS by default, a
//! caller's own `reqwest::Client`), and, turn by turn, the official
//! `HttpAgent` doing the same.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agwire_client::core::{
    Context, Event, Interrupt, Message, ResumeEntry, ResumeStatus, Role, RunAgentInput, Tool,
};
use agwire_client::{Client, Error, Hook, HttpAgent, RunOptions, Subscriber, reqwest};
use agwire_server::{Agent, AgentEndpoint, AgentError, RunContext};
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// Every wait in these tests is bounded by this.
const LIMIT: Duration = Duration::from_secs(30);

async fn bounded<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(LIMIT, future)
        .await
        .expect("timed out")
}

/// The text of the last user message.
fn last_user_text(input: &RunAgentInput) -> String {
    input
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::User(u) => Some(u.content.text()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Answers according to the last user message; by default it says how many
/// messages it received and puts the state it received in a snapshot.
struct Echo;

impl Agent for Echo {
    async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        let heard = input.messages.len();
        match last_user_text(&input).as_str() {
            "fail" => {
                ctx.say("partial answer").await?;
                return Err(AgentError::new("boom").with_code("test_failure"));
            }
            "call confirm" if !matches!(input.messages.last(), Some(Message::Tool(_))) => {
                ctx.tool_call("confirm", &json!({"question": "sure?"}))
                    .await?;
            }
            "delta" => {
                let mut state = ctx.state().clone();
                state["count"] = json!(state["count"].as_i64().unwrap_or(0) + 1);
                ctx.set_state(state).await?;
            }
            "interrupt" => {
                ctx.interrupt(Interrupt::new("approve-1", "confirmation"));
            }
            "activity" => {
                let mut plan = serde_json::Map::new();
                plan.insert("steps".into(), json!(["look", "answer"]));
                ctx.activity_snapshot("plan-1", "PLAN", plan).await?;
                ctx.say("planned").await?;
            }
            _ => {
                ctx.say(&format!("heard {heard} messages")).await?;
                ctx.state_snapshot(json!({"heard": heard, "received": input.state}))
                    .await?;
            }
        }
        Ok(())
    }
}

/// The endpoint on a real port, recording each request's headers and body;
/// when `cut_next` is set, the next request instead gets a response that
/// starts a message, waits for `cut`, and then breaks the connection
/// (without SSE ids, so it cannot be resumed).
struct Server {
    url: String,
    requests: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
    cut_next: Arc<AtomicBool>,
    cut: Arc<Notify>,
}

impl Server {
    async fn start() -> Self {
        let endpoint = AgentEndpoint::new(Echo);
        let requests: Arc<Mutex<Vec<(HeaderMap, Value)>>> = Arc::default();
        let cut_next = Arc::new(AtomicBool::new(false));
        let cut = Arc::new(Notify::new());
        let (seen, next, signal) = (requests.clone(), cut_next.clone(), cut.clone());
        let app = axum::Router::new().route(
            "/agent",
            post(move |request: Request| {
                let (endpoint, seen, next, signal) =
                    (endpoint.clone(), seen.clone(), next.clone(), signal.clone());
                async move {
                    let (head, body) = request.into_parts();
                    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
                    let body: Value = serde_json::from_slice(&bytes).unwrap();
                    seen.lock()
                        .unwrap()
                        .push((head.headers.clone(), body.clone()));
                    if next.swap(false, Ordering::SeqCst) {
                        return broken_response(&body, signal);
                    }
                    endpoint
                        .handle(Request::from_parts(head, Body::from(bytes)))
                        .await
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            url: format!("http://{addr}/agent"),
            requests,
            cut_next,
            cut,
        }
    }

    /// The body of the `n`th request.
    fn body(&self, n: usize) -> Value {
        self.requests.lock().unwrap()[n].1.clone()
    }

    fn headers(&self, n: usize) -> HeaderMap {
        self.requests.lock().unwrap()[n].0.clone()
    }

    fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

/// Starts a run and a message, then, once `cut` is notified, breaks the
/// connection.
fn broken_response(input: &Value, cut: Arc<Notify>) -> axum::response::Response {
    let events = [
        json!({"type": "RUN_STARTED", "threadId": input["threadId"], "runId": input["runId"]}),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "cut-1", "role": "assistant"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "cut-1", "delta": "half an ans"}),
    ];
    let sse: Vec<u8> = events
        .iter()
        .flat_map(|e| format!("data: {e}\n\n").into_bytes())
        .collect();
    let head = futures_util::stream::iter([Ok::<_, std::io::Error>(sse)]);
    let broken = futures_util::stream::once(async move {
        cut.notified().await;
        Err(std::io::Error::other("connection dropped"))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(futures_util::StreamExt::chain(
            head, broken,
        )))
        .unwrap()
}

fn assistant_text(message: &Message) -> &str {
    match message {
        Message::Assistant(m) => m.content.as_deref().unwrap_or_default(),
        other => panic!("not an assistant message: {other:?}"),
    }
}

fn is_uuid(id: &str) -> bool {
    uuid::Uuid::parse_str(id).is_ok()
}

/// Records which messages the hooks announced as new.
#[derive(Default)]
struct NewMessages(Vec<String>, usize);

impl Subscriber for NewMessages {
    fn on_new_message(&mut self, message: &Message, _: &agwire_client::core::apply::Session) {
        self.0.push(message.id().to_owned());
    }
    fn on_run_finalized(&mut self) {
        self.1 += 1;
    }
}

/// (a) Two turns: the second request carries the first turn's user and
/// assistant messages and the state the first run left, on the same thread,
/// with fresh ids.
#[tokio::test]
async fn the_second_turn_sends_the_first_turns_messages_and_state() {
    let server = Server::start().await;
    let mut agent = HttpAgent::new(&server.url).unwrap();
    let thread = agent.thread_id().to_owned();
    assert!(is_uuid(&thread), "{thread}");

    let u1 = agent.add_user_message("hello");
    let first = bounded(agent.run()).await.unwrap();
    let body = server.body(0);
    assert_eq!(body["threadId"], thread.as_str());
    assert_eq!(
        body["messages"],
        json!([{"id": u1, "role": "user", "content": "hello"}])
    );
    assert_eq!(body["state"], json!({}));
    assert_eq!(
        body["protocolVersion"],
        agwire_client::core::PROTOCOL_VERSION
    );
    assert_eq!(first.new_messages.len(), 1);
    assert_eq!(assistant_text(&first.new_messages[0]), "heard 1 messages");
    assert_eq!(agent.messages().len(), 2);
    assert_eq!(agent.state(), &json!({"heard": 1, "received": {}}));

    let u2 = agent.add_user_message("again");
    let mut hooks = NewMessages::default();
    let second = bounded(agent.run_with_subscriber(RunOptions::new(), &mut hooks))
        .await
        .unwrap();
    let body2 = server.body(1);
    assert_eq!(body2["threadId"], thread.as_str());
    assert_eq!(
        body2["messages"],
        json!([
            {"id": u1, "role": "user", "content": "hello"},
            serde_json::to_value(&first.new_messages[0]).unwrap(),
            {"id": u2, "role": "user", "content": "again"},
        ])
    );
    assert_eq!(body2["state"], json!({"heard": 1, "received": {}}));
    assert_eq!(assistant_text(&second.new_messages[0]), "heard 3 messages");
    // The hooks saw only this run's message as new.
    assert_eq!(hooks.0, [second.new_messages[0].id()]);
    assert_eq!(hooks.1, 1);

    // Ids: run ids and message ids generated, all distinct.
    let (r1, r2) = (
        body["runId"].as_str().unwrap(),
        body2["runId"].as_str().unwrap(),
    );
    assert!(is_uuid(r1) && is_uuid(r2) && r1 != r2, "{r1} {r2}");
    assert!(is_uuid(&u1) && is_uuid(&u2) && u1 != u2, "{u1} {u2}");
    let ids: std::collections::HashSet<&str> = agent.messages().iter().map(Message::id).collect();
    assert_eq!(ids.len(), 4);
    assert_eq!(agent.thread_id(), thread);
    assert_eq!(
        agent.state(),
        &json!({"heard": 3, "received": {"heard": 1, "received": {}}})
    );
}

/// (b) A `STATE_DELTA` the server applied is what the next run sends, through
/// the streaming form too; the builder's thread id and initial state are used.
#[tokio::test]
async fn a_state_delta_is_what_the_next_run_sends() {
    let server = Server::start().await;
    let mut agent = HttpAgent::builder(Client::new(&server.url).unwrap())
        .thread_id("thread-b")
        .state(json!({"count": 0, "keep": "me"}))
        .build();
    agent.add_user_message("delta");
    let mut run = bounded(agent.run_stream(RunOptions::new())).await.unwrap();
    let mut types = Vec::new();
    while let Some(event) = bounded(run.next()).await {
        types.push(event.unwrap().type_name().to_owned());
    }
    assert!(types.iter().any(|t| t == "STATE_DELTA"), "{types:?}");
    assert!(!types.iter().any(|t| t == "STATE_SNAPSHOT"), "{types:?}");
    assert!(run.summary().unwrap().error().is_none());
    drop(run);
    assert_eq!(agent.state(), &json!({"count": 1, "keep": "me"}));

    agent.add_user_message("delta");
    bounded(agent.run()).await.unwrap();
    assert_eq!(server.body(0)["state"], json!({"count": 0, "keep": "me"}));
    assert_eq!(server.body(1)["state"], json!({"count": 1, "keep": "me"}));
    assert_eq!(server.body(0)["threadId"], "thread-b");
    assert_eq!(server.body(1)["threadId"], "thread-b");
    assert_eq!(agent.state(), &json!({"count": 2, "keep": "me"}));
}

/// (c) A frontend tool call the run left pending, answered with
/// `add_tool_result`, reaches the agent as a tool message after the call.
#[tokio::test]
async fn a_tool_result_answers_the_pending_call_in_the_next_run() {
    let server = Server::start().await;
    let mut agent = HttpAgent::new(&server.url).unwrap();
    agent.add_user_message("call confirm");
    let first = bounded(agent.run()).await.unwrap();
    let [call_id] = first.pending_tool_call_ids() else {
        panic!("{:?}", first.pending_tool_call_ids())
    };
    assert_eq!(agent.pending_tool_call_ids(), first.pending_tool_call_ids());
    let Message::Assistant(call) = &first.new_messages[0] else {
        panic!("{:?}", first.new_messages)
    };
    assert_eq!(call.tool_calls.as_ref().unwrap()[0].id, *call_id);

    let answer = agent.add_tool_result(call_id, "yes");
    assert!(agent.pending_tool_call_ids().is_empty());
    let second = bounded(agent.run()).await.unwrap();
    let messages = server.body(1)["messages"].clone();
    assert_eq!(messages.as_array().unwrap().len(), 3, "{messages}");
    assert_eq!(messages[1]["toolCalls"][0]["id"], call_id.as_str());
    assert_eq!(
        messages[2],
        json!({"id": answer, "role": "tool", "toolCallId": call_id, "content": "yes"})
    );
    assert_eq!(assistant_text(&second.new_messages[0]), "heard 3 messages");
    assert!(second.pending_tool_call_ids().is_empty());
}

/// Interrupts the last run left are the agent's, and `resume` answers them;
/// the builder's tools, context and props go with every run unless the run's
/// options replace them.
#[tokio::test]
async fn run_options_and_defaults_reach_the_agent() {
    let server = Server::start().await;
    let tool = Tool {
        name: "confirm".into(),
        description: "Asks the user.".into(),
        parameters: Some(json!({"type": "object"})),
        metadata: None,
    };
    let context = Context {
        description: "user".into(),
        value: "Ada".into(),
    };
    let mut agent = HttpAgent::builder(Client::new(&server.url).unwrap())
        .tools(vec![tool])
        .context(vec![context])
        .forwarded_props(json!({"model": "small"}))
        .build();
    agent.add_user_message("interrupt");
    bounded(agent.run()).await.unwrap();
    let body = server.body(0);
    assert_eq!(body["tools"][0]["name"], "confirm");
    assert_eq!(
        body["context"],
        json!([{"description": "user", "value": "Ada"}])
    );
    assert_eq!(body["forwardedProps"], json!({"model": "small"}));
    assert!(body.get("resume").is_none());
    assert_eq!(agent.pending_interrupts()[0].id, "approve-1");

    let resume = vec![ResumeEntry {
        interrupt_id: "approve-1".into(),
        status: ResumeStatus::Resolved,
        payload: Some(json!({"approved": true})),
        metadata: None,
    }];
    let options = RunOptions::new()
        .run_id("run-custom")
        .tools(Vec::new())
        .forwarded_props(json!({"model": "large"}))
        .resume(resume);
    agent.add_user_message("approved");
    bounded(agent.run_with(options)).await.unwrap();
    let body = server.body(1);
    assert_eq!(body["runId"], "run-custom");
    assert_eq!(body["tools"], json!([]));
    assert_eq!(
        body["context"],
        json!([{"description": "user", "value": "Ada"}])
    );
    assert_eq!(body["forwardedProps"], json!({"model": "large"}));
    assert_eq!(
        body["resume"],
        json!([{"interruptId": "approve-1", "status": "resolved", "payload": {"approved": true}}])
    );
    assert!(agent.pending_interrupts().is_empty());
}

/// (d) A run that ends in `RUN_ERROR` keeps the earlier conversation and what
/// it delivered, and the next run sends all of it.
#[tokio::test]
async fn a_run_error_keeps_the_conversation() {
    let server = Server::start().await;
    let mut agent = HttpAgent::new(&server.url).unwrap();
    agent.add_user_message("hello");
    bounded(agent.run()).await.unwrap();
    let before = agent.messages().to_vec();

    agent.add_user_message("fail");
    let failed = bounded(agent.run()).await.unwrap();
    assert_eq!(failed.error(), Some(("boom", Some("test_failure"))));
    assert_eq!(agent.messages().len(), 4, "{:?}", agent.messages());
    assert_eq!(agent.messages()[..2], before[..]);
    assert_eq!(assistant_text(&agent.messages()[3]), "partial answer");
    // The state is the one the first run left (the failed run set none).
    assert_eq!(agent.state(), &json!({"heard": 1, "received": {}}));

    agent.add_user_message("again");
    let next = bounded(agent.run()).await.unwrap();
    assert_eq!(
        server.body(2)["messages"],
        serde_json::to_value(&agent.messages()[..5]).unwrap()
    );
    assert_eq!(assistant_text(&next.new_messages[0]), "heard 5 messages");
}

/// Cuts the connection once the run's first text arrived.
struct CutAfterText(Arc<Notify>);

impl Subscriber for CutAfterText {
    fn on_text_message_content(&mut self, _: &str, _: &str, _: Hook<'_>) {
        self.0.notify_one();
    }
}

/// (d) A run whose connection breaks, with no SSE ids to resume from, is an
/// error; the agent keeps the earlier conversation, the new user message and
/// what arrived before the break, and the next run sends them.
#[tokio::test]
async fn a_dropped_connection_keeps_the_conversation() {
    let server = Server::start().await;
    let mut agent = HttpAgent::new(&server.url).unwrap();
    agent.add_user_message("hello");
    bounded(agent.run()).await.unwrap();
    let before = agent.messages().to_vec();
    let state = agent.state().clone();

    let asked = agent.add_user_message("tell me more");
    server.cut_next.store(true, Ordering::SeqCst);
    let mut cut = CutAfterText(server.cut.clone());
    let error = bounded(agent.run_with_subscriber(RunOptions::new(), &mut cut))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Transport(_)), "{error:?}");
    assert_eq!(agent.messages()[..2], before[..]);
    assert_eq!(agent.messages()[2].id(), asked);
    assert_eq!(agent.messages()[3].id(), "cut-1");
    assert_eq!(assistant_text(&agent.messages()[3]), "half an ans");
    assert_eq!(agent.messages().len(), 4);
    assert_eq!(agent.state(), &state);

    // The streaming form keeps the same.
    server.cut_next.store(true, Ordering::SeqCst);
    agent.messages_mut().pop(); // the half message is not worth resending
    let mut run = bounded(agent.run_stream(RunOptions::new())).await.unwrap();
    let mut failed = None;
    while let Some(event) = bounded(run.next()).await {
        match event {
            Ok(Event::TextMessageContent(_)) => server.cut.notify_one(),
            Ok(_) => {}
            Err(error) => failed = Some(error),
        }
    }
    assert!(matches!(failed, Some(Error::Transport(_))), "{failed:?}");
    drop(run);
    assert_eq!(agent.messages().len(), 4);
    assert_eq!(agent.messages()[2].id(), asked);

    // Nothing answered: the agent is as it was.
    let unreachable = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let mut offline =
        HttpAgent::builder(Client::new(format!("http://{unreachable}/agent")).unwrap())
            .messages(agent.messages().to_vec())
            .state(state.clone())
            .build();
    let error = bounded(offline.run()).await.unwrap_err();
    assert!(
        matches!(&error, Error::Transport(e) if e.is_connect()),
        "{error:?}"
    );
    assert_eq!(offline.messages(), agent.messages());

    bounded(agent.run()).await.unwrap();
    let sent = server.body(3)["messages"].clone();
    assert_eq!(sent, serde_json::to_value(&agent.messages()[..4]).unwrap());
    assert_eq!(server.body(3)["state"], state);
    assert_eq!(server.count(), 4);
}

/// A run given up part-way — its [`agwire_client::AgentRun`] dropped, or the
/// future of `run()` dropped by a `select!` — keeps what arrived before.
#[tokio::test]
async fn a_run_dropped_midway_keeps_what_arrived() {
    let server = Server::start().await;
    let mut agent = HttpAgent::new(&server.url).unwrap();
    let asked = agent.add_user_message("hello");

    // The server holds the connection open after the first text (it is
    // never told to cut it).
    server.cut_next.store(true, Ordering::SeqCst);
    let mut run = bounded(agent.run_stream(RunOptions::new())).await.unwrap();
    loop {
        match bounded(run.next()).await.unwrap().unwrap() {
            Event::TextMessageContent(_) => break,
            _ => continue,
        }
    }
    assert_eq!(run.session().messages.len(), 2);
    assert!(run.summary().is_none());
    drop(run);
    let ids: Vec<&str> = agent.messages().iter().map(Message::id).collect();
    assert_eq!(ids, [asked.as_str(), "cut-1"]);
    assert_eq!(assistant_text(&agent.messages()[1]), "half an ans");

    // The same with the future of a whole run, dropped when its first text
    // arrives.
    agent.messages_mut().pop();
    server.cut_next.store(true, Ordering::SeqCst);
    let arrived = Arc::new(Notify::new());
    let mut hook = CutAfterText(arrived.clone());
    let run = agent.run_with_subscriber(RunOptions::new(), &mut hook);
    bounded(async {
        tokio::select! {
            result = run => panic!("the run ended: {result:?}"),
            () = arrived.notified() => {}
        }
    })
    .await;
    let ids: Vec<&str> = agent.messages().iter().map(Message::id).collect();
    assert_eq!(ids, [asked.as_str(), "cut-1"]);
    assert_eq!(server.count(), 2);
}

/// Activity messages are the agent's own: not sent, but kept across runs.
#[tokio::test]
async fn activity_messages_stay_the_agents_own() {
    let server = Server::start().await;
    let mut agent = HttpAgent::new(&server.url).unwrap();
    agent.add_user_message("activity");
    bounded(agent.run()).await.unwrap();
    let activity = |agent: &HttpAgent| {
        agent
            .messages()
            .iter()
            .filter(|m| m.role() == Role::Activity)
            .count()
    };
    assert_eq!(activity(&agent), 1, "{:?}", agent.messages());
    agent.add_user_message("hello");
    let mut hooks = NewMessages::default();
    let summary = bounded(agent.run_with_subscriber(RunOptions::new(), &mut hooks))
        .await
        .unwrap();
    let sent = server.body(1)["messages"].clone();
    assert!(
        sent.as_array()
            .unwrap()
            .iter()
            .all(|m| m["role"] != "activity"),
        "{sent}"
    );
    assert_eq!(activity(&agent), 1, "{:?}", agent.messages());
    assert_eq!(summary.new_messages.len(), 1, "{:?}", summary.new_messages);
    assert_eq!(hooks.0, [summary.new_messages[0].id()]);
}

/// (e) https is spoken out of the box: a client for an https URL sends a TLS
/// ClientHello (which a listener on loopback reads, then hangs up), and fails
/// as a connection, not for want of a TLS backend. Holds the crate's default
/// features to this; a `default-features = false` build cannot pass it.
#[tokio::test]
async fn https_urls_are_spoken_by_default() {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hello = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = [0u8; 6];
        socket.read_exact(&mut head).await.unwrap();
        head
        // The socket closes here: the handshake fails.
    });
    let client = Client::new(format!("https://{addr}/agent")).unwrap();
    let input = RunAgentInput::new("thread-1", "run-1");
    let error = bounded(client.run(&input)).await.unwrap_err();
    let Error::Transport(error) = &error else {
        panic!("{error:?}")
    };
    // Without a TLS backend reqwest fails at connect time too, but names the
    // scheme it cannot speak (and sends nothing).
    let text = format!("{error:?}");
    assert!(!text.contains("scheme"), "{text}");
    assert!(error.is_connect() && !error.is_builder(), "{text}");
    let head = bounded(hello).await.unwrap();
    // A TLS record: handshake (22), version 3.x, then a ClientHello (1).
    assert_eq!((head[0], head[1], head[5]), (22, 3, 1), "{head:?}");
}

/// (f) A caller's own `reqwest::Client` carries the requests (its default
/// header reaches the server); the timeouts it owns cannot also be set here.
#[tokio::test]
async fn a_callers_reqwest_client_is_used() {
    let server = Server::start().await;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("x-test-client", "custom".parse().unwrap());
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap();
    let client = Client::builder(&server.url)
        .http_client(http.clone())
        .header("x-per-request", "ours")
        .build()
        .unwrap();
    let mut agent = HttpAgent::builder(client).build();
    agent.add_user_message("hello");
    bounded(agent.run()).await.unwrap();
    let seen = server.headers(0);
    assert_eq!(seen["x-test-client"], "custom");
    assert_eq!(seen["x-per-request"], "ours");

    for builder in [
        Client::builder(&server.url)
            .http_client(http.clone())
            .timeout(Duration::from_secs(1)),
        Client::builder(&server.url)
            .http_client(http.clone())
            .connect_timeout(Duration::from_secs(1)),
    ] {
        let error = builder.build().unwrap_err();
        assert!(matches!(error, Error::Config(_)), "{error:?}");
    }
}

/// The official `HttpAgent`, driven through the same turns against the same
/// agent, sends the same requests and ends every turn with the same
/// conversation and state: messages, a snapshot, a pending frontend tool call
/// answered, a delta, a `RUN_ERROR`, an activity message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_turn_by_turn_like_the_official_http_agent() {
    let Some(interop) = agwire_testkit::peers::interop_dir() else {
        return;
    };
    let turns = [
        "hello",
        "call confirm",
        "answer",
        "delta",
        "fail",
        "activity",
        "bye",
    ];
    let theirs_server = Server::start().await;
    let ours_server = Server::start().await;

    // Theirs: one agent, run after run (`answerToolCalls` answers the
    // pending call with a tool message `answer-<call id>`).
    let runs: Vec<Value> = turns
        .iter()
        .enumerate()
        .map(|(i, turn)| match *turn {
            "answer" => json!({"runId": format!("r{i}"), "answerToolCalls": "yes"}),
            text => json!({"runId": format!("r{i}"),
                           "messages": [{"id": format!("u{i}"), "role": "user", "content": text}]}),
        })
        .collect();
    let spec = json!({"url": theirs_server.url, "format": "sse", "threadId": "diff-thread",
                      "state": {"count": 0}, "runs": runs});
    let theirs = bounded(agwire_testkit::http_agent::run(&interop, &spec)).await;

    // Ours, the same turns.
    let mut agent = HttpAgent::builder(Client::new(&ours_server.url).unwrap())
        .thread_id("diff-thread")
        .state(json!({"count": 0}))
        .build();
    for (i, turn) in turns.iter().enumerate() {
        if *turn == "answer" {
            for id in agent.pending_tool_call_ids().to_vec() {
                agent.add_message(Message::tool(format!("answer-{id}"), id, "yes"));
            }
        } else {
            agent.add_message(Message::user(format!("u{i}"), *turn));
        }
        let summary = bounded(agent.run_with(RunOptions::new().run_id(format!("r{i}"))))
            .await
            .unwrap();
        let run = &theirs["runs"][i];
        let what = format!("turn {i} ({turn})");
        assert_eq!(run["error"], Value::Null, "{what}");
        let mut sent = ours_server.body(i);
        let mut expected = theirs_server.body(i);
        // Ours declares the protocol version it speaks; the pinned 1.0.0
        // client predates the member.
        for body in [&mut sent, &mut expected] {
            body.as_object_mut().unwrap().remove("protocolVersion");
        }
        assert_eq!(sent, expected, "{what}: request");
        // httpagent.mjs prints the agent's live array, which later turns'
        // added messages were pushed onto (until a run replaced it): compare
        // up to them.
        let ours = serde_json::to_value(agent.messages()).unwrap();
        let ours = ours.as_array().unwrap();
        let theirs_messages = run["messages"].as_array().unwrap();
        let (now, added_later) = theirs_messages.split_at(ours.len().min(theirs_messages.len()));
        assert_eq!(ours, now, "{what}: messages");
        assert!(
            added_later.iter().all(|m| {
                let id = m["id"].as_str().unwrap();
                let later = id
                    .strip_prefix('u')
                    .and_then(|n| n.parse::<usize>().ok())
                    .is_some_and(|n| n > i);
                later || id.starts_with("answer-")
            }),
            "{what}: messages {added_later:?}"
        );
        assert_eq!(agent.state(), &run["state"], "{what}: state");
        assert_eq!(
            serde_json::to_value(&summary.new_messages).unwrap(),
            run["newMessages"],
            "{what}: new messages"
        );
    }
}
