#![allow(unreachable_pub, dead_code, clippy::unwrap_used, clippy::expect_used)] // test helpers shared by several test crates
//! The dojo conversations both dojo tests drive: what to send, run after run,
//! and what each feature must have produced at the end.

use std::net::SocketAddr;

use agwire_codec::proto::FrameDecoder;
use agwire_codec::sse::SseEventDecoder;
use agwire_core::apply::{RunEnd, Session};
use agwire_core::pipeline::Pipeline;
use agwire_core::{Event, Message, RunAgentInput};
use serde_json::{Value, json};

pub async fn serve_dojo(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Sse,
    Proto,
}

impl Format {
    pub fn accept(self) -> &'static str {
        match self {
            Format::Sse => "text/event-stream",
            Format::Proto => "application/vnd.ag-ui.event+proto",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Sse => "sse",
            Format::Proto => "proto",
        }
    }
}

/// One `runAgent` call. `add` holds messages the user adds before it; in them
/// `"$pending"` stands for the first tool call the previous run left pending.
/// `resume` may use `"$interrupt"` for the previous run's first interrupt id.
pub struct Run {
    pub run_id: &'static str,
    pub add: Vec<Value>,
    pub resume: Option<Value>,
}

/// What one run ended with.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub types: Vec<String>,
    pub pending_tool_call_ids: Vec<String>,
    pub pending_interrupts: Vec<String>,
    pub errored: bool,
}

pub type Check = fn(&[Value], &Value, &[RunReport]);

pub struct Scenario {
    pub path: &'static str,
    pub state: Value,
    pub runs: Vec<Run>,
    pub check: Check,
}

pub struct Folded {
    pub final_messages: Vec<Value>,
    pub final_state: Value,
    pub runs: Vec<RunReport>,
    pub warnings: Vec<String>,
    /// Each run's input as sent, with placeholders resolved (the official
    /// client is given exactly these).
    pub resolved_runs: Vec<Value>,
}

pub const THREAD: &str = "dojo-thread";

fn user(text: &str) -> Value {
    json!({"id": "u-1", "role": "user", "content": text})
}

fn first(runs: Vec<Value>) -> Vec<Run> {
    vec![Run {
        run_id: "r1",
        add: runs,
        resume: None,
    }]
}

fn tool_answer(content: &str) -> Value {
    json!({"id": "t-1", "role": "tool", "toolCallId": "$pending", "content": content})
}

/// The last message's text content.
fn last_text(messages: &[Value]) -> &str {
    messages
        .last()
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
}

fn tool_calls(messages: &[Value]) -> Vec<(String, Value)> {
    messages
        .iter()
        .filter_map(|m| m["toolCalls"].as_array())
        .flatten()
        .map(|c| {
            let args = c["function"]["arguments"].as_str().unwrap();
            (
                c["function"]["name"].as_str().unwrap().to_owned(),
                serde_json::from_str(args).unwrap(),
            )
        })
        .collect()
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            path: "/agentic_chat",
            state: json!({}),
            runs: first(vec![user("hi there")]),
            check: |m, _, runs| {
                assert_eq!(m.len(), 2);
                assert_eq!(last_text(m), "Hello! You said: hi there");
                assert!(
                    runs[0]
                        .types
                        .iter()
                        .filter(|t| *t == "TEXT_MESSAGE_CONTENT")
                        .count()
                        > 1
                );
            },
        },
        Scenario {
            path: "/agentic_chat",
            state: json!({}),
            runs: vec![
                Run {
                    run_id: "r1",
                    add: vec![user("make the background red")],
                    resume: None,
                },
                Run {
                    run_id: "r2",
                    add: vec![tool_answer("background set to red")],
                    resume: None,
                },
            ],
            check: |m, _, runs| {
                assert_eq!(
                    tool_calls(m),
                    [("change_background".into(), json!({"background": "red"}))]
                );
                assert_eq!(runs[0].pending_tool_call_ids.len(), 1);
                assert!(runs[1].pending_tool_call_ids.is_empty());
                assert_eq!(last_text(m), "Done: background set to red");
            },
        },
        Scenario {
            path: "/backend_tool_rendering",
            state: json!({}),
            runs: first(vec![user("What is the weather in Paris?")]),
            check: |m, _, runs| {
                assert_eq!(
                    tool_calls(m),
                    [("get_weather".into(), json!({"location": "Paris"}))]
                );
                let tool = m
                    .iter()
                    .find(|m| m["role"] == "tool")
                    .expect("a tool message");
                let result: Value =
                    serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
                assert_eq!(result["temperature"], 21);
                assert_eq!(last_text(m), "It is 21 °C and sunny in Paris.");
                assert!(runs[0].pending_tool_call_ids.is_empty());
                assert!(runs[0].types.contains(&"TOOL_CALL_RESULT".to_owned()));
            },
        },
        Scenario {
            path: "/human_in_the_loop",
            state: json!({}),
            runs: vec![
                Run {
                    run_id: "r1",
                    add: vec![user("plan breakfast")],
                    resume: None,
                },
                Run {
                    run_id: "r2",
                    add: vec![tool_answer(
                        r#"{"steps":[{"description":"Open the fridge","status":"enabled"},{"description":"Take out the milk","status":"disabled"},{"description":"Pour a glass","status":"enabled"}]}"#,
                    )],
                    resume: None,
                },
            ],
            check: |m, _, runs| {
                let calls = tool_calls(m);
                assert_eq!(calls[0].0, "generate_task_steps");
                assert_eq!(calls[0].1["steps"].as_array().unwrap().len(), 3);
                assert!(
                    runs[0]
                        .types
                        .iter()
                        .filter(|t| *t == "TOOL_CALL_ARGS")
                        .count()
                        > 1
                );
                assert_eq!(runs[0].pending_tool_call_ids.len(), 1);
                assert_eq!(last_text(m), "Executing the 2 selected steps.");
            },
        },
        Scenario {
            path: "/agentic_generative_ui",
            state: json!({}),
            runs: first(vec![user("write a post")]),
            check: |m, state, runs| {
                let steps = state["steps"].as_array().unwrap();
                assert_eq!(steps.len(), 5);
                assert!(steps.iter().all(|s| s["status"] == "completed"));
                assert_eq!(
                    runs[0].types.iter().filter(|t| *t == "STATE_DELTA").count(),
                    5
                );
                assert_eq!(last_text(m), "All five steps are completed.");
            },
        },
        Scenario {
            path: "/tool_based_generative_ui",
            state: json!({}),
            runs: vec![
                Run {
                    run_id: "r1",
                    add: vec![user("a haiku please")],
                    resume: None,
                },
                Run {
                    run_id: "r2",
                    add: vec![tool_answer("shown")],
                    resume: None,
                },
            ],
            check: |m, _, _| {
                let calls = tool_calls(m);
                assert_eq!(calls[0].0, "generate_haiku");
                assert_eq!(calls[0].1["japanese"][0], "古池や");
                assert_eq!(last_text(m), "Enjoy the haiku.");
            },
        },
        Scenario {
            path: "/shared_state",
            state: json!({"recipe": {"title": "Soup", "ingredients": [{"icon": "🥕", "name": "Carrot", "amount": "2"}], "instructions": ["Boil."]}, "other": 1}),
            runs: first(vec![user("improve it")]),
            check: |m, state, _| {
                assert_eq!(state["other"], 1);
                assert_eq!(state["recipe"]["title"], "Soup");
                assert_eq!(state["recipe"]["ingredients"].as_array().unwrap().len(), 2);
                assert_eq!(
                    state["recipe"]["instructions"],
                    json!(["Boil.", "Season to taste."])
                );
                assert_eq!(last_text(m), "I added a pinch of salt and a last step.");
            },
        },
        Scenario {
            path: "/predictive_state_updates",
            state: json!({}),
            runs: vec![
                Run {
                    run_id: "r1",
                    add: vec![user("write a story")],
                    resume: None,
                },
                Run {
                    run_id: "r2",
                    add: vec![tool_answer("{\"accepted\":true}")],
                    resume: None,
                },
            ],
            check: |m, state, runs| {
                assert!(
                    state["document"]
                        .as_str()
                        .unwrap()
                        .starts_with("Once upon a time")
                );
                let names: Vec<_> = tool_calls(m).into_iter().map(|c| c.0).collect();
                assert_eq!(names, ["write_document_local", "confirm_changes"]);
                assert!(runs[0].types.contains(&"CUSTOM".to_owned()));
                assert_eq!(runs[0].pending_tool_call_ids.len(), 1);
                assert_eq!(last_text(m), "Changes kept.");
            },
        },
        Scenario {
            path: "/reasoning",
            state: json!({}),
            runs: first(vec![user("what is 6 times 7?")]),
            check: |m, _, runs| {
                assert!(
                    runs[0]
                        .types
                        .contains(&"REASONING_MESSAGE_CONTENT".to_owned())
                );
                let reasoning = m
                    .iter()
                    .find(|m| m["role"] == "reasoning")
                    .expect("a reasoning message");
                assert!(
                    reasoning["content"]
                        .as_str()
                        .unwrap()
                        .ends_with("6 times 7 is 42.")
                );
                assert_eq!(last_text(m), "The answer is 42.");
            },
        },
        Scenario {
            path: "/subagents",
            state: json!({}),
            runs: first(vec![user("research this")]),
            check: |m, _, runs| {
                assert!(runs[0].types.contains(&"SUBAGENT_STARTED".to_owned()));
                assert!(runs[0].types.contains(&"SUBAGENT_FINISHED".to_owned()));
                assert!(m.iter().any(|m| m["content"] == "Found three sources."));
                assert_eq!(last_text(m), "The researcher found three sources.");
            },
        },
        Scenario {
            path: "/interrupt",
            state: json!({}),
            runs: vec![
                Run {
                    run_id: "r1",
                    add: vec![user("send the email")],
                    resume: None,
                },
                Run {
                    run_id: "r2",
                    add: vec![],
                    resume: Some(
                        json!([{"interruptId": "$interrupt", "status": "resolved", "payload": {"approved": true}}]),
                    ),
                },
            ],
            check: |m, _, runs| {
                assert_eq!(runs[0].pending_interrupts, ["r1-approval"]);
                assert!(runs[1].pending_interrupts.is_empty());
                assert_eq!(last_text(m), "Approved: the email was sent.");
            },
        },
    ]
}

fn resolve(value: &Value, pending: &str, interrupt: &str) -> Value {
    match value {
        Value::String(s) if s == "$pending" => json!(pending),
        Value::String(s) if s == "$interrupt" => json!(interrupt),
        Value::Array(a) => Value::Array(a.iter().map(|v| resolve(v, pending, interrupt)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), resolve(v, pending, interrupt)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Runs a scenario as the official client would (one agent, run after run,
/// messages and state carried over), folding with our pipeline.
pub async fn fold_scenario(addr: SocketAddr, scenario: &Scenario, format: Format) -> Folded {
    let client = reqwest::Client::new();
    let mut session = Session::new(Vec::new(), scenario.state.clone());
    let mut reports = Vec::new();
    let mut warnings = Vec::new();
    let mut resolved_runs = Vec::new();
    for run in &scenario.runs {
        let pending = session
            .pending_tool_call_ids
            .first()
            .cloned()
            .unwrap_or_default();
        let interrupt = session
            .pending_interrupts
            .first()
            .map(|i| i.id.clone())
            .unwrap_or_default();
        let add = resolve(&Value::Array(run.add.clone()), &pending, &interrupt);
        let resume = run
            .resume
            .as_ref()
            .map(|r| resolve(r, &pending, &interrupt));
        resolved_runs.push(json!({"runId": run.run_id, "messages": add, "resume": resume}));
        let added: Vec<Message> = serde_json::from_value(add).unwrap();
        let mut messages = session.messages.clone();
        messages.extend(added);
        let mut input = RunAgentInput::prepare(THREAD, run.run_id, &messages, &session.state);
        input.resume = resume.map(|r| serde_json::from_value(r).unwrap());
        let resp = client
            .post(format!("http://{addr}{}", scenario.path))
            .header("content-type", "application/json")
            .header("accept", format.accept())
            .body(serde_json::to_string(&input).unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{}", scenario.path);
        let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
        assert_eq!(content_type, format.accept(), "{}", scenario.path);
        let body = resp.bytes().await.unwrap();
        let mut events = Vec::new();
        match format {
            Format::Sse => {
                let mut d = SseEventDecoder::new();
                d.push(&body, &mut events).unwrap();
                d.finish(&mut events).unwrap();
            }
            Format::Proto => {
                let mut d = FrameDecoder::new();
                d.push(&body, &mut events).unwrap();
                d.finish().unwrap();
            }
        }
        let mut pipeline = Pipeline::for_input(&input);
        for event in events.iter().cloned() {
            pipeline
                .push(event)
                .unwrap_or_else(|e| panic!("{} {format:?}: {e}", scenario.path));
        }
        warnings.extend(pipeline.take_warnings().into_iter().map(|w| w.to_string()));
        session = pipeline.into_session();
        reports.push(RunReport {
            types: events
                .iter()
                .map(|e| Event::type_name(e).to_owned())
                .collect(),
            pending_tool_call_ids: session.pending_tool_call_ids.clone(),
            pending_interrupts: session
                .pending_interrupts
                .iter()
                .map(|i| i.id.clone())
                .collect(),
            errored: matches!(session.last_run, Some(RunEnd::Errored { .. })),
        });
        assert!(
            !reports.last().unwrap().errored,
            "{} ended in RUN_ERROR",
            scenario.path
        );
    }
    Folded {
        final_messages: session
            .messages
            .iter()
            .map(|m| serde_json::to_value(m).unwrap())
            .collect(),
        final_state: session.state.clone(),
        runs: reports,
        warnings,
        resolved_runs,
    }
}
