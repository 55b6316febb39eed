//! The `axum_app` example, run: its app on a real port, its model an
//! `OpenAiCompatible` talking to the fake provider of `openai.rs` (the
//! OpenAI wire, over HTTP), its client agwire-client. Two turns: a backend
//! tool run for the signed-in user and a frontend tool handed back, then the
//! client's answer to it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agwire_client::{Client, NoHooks};
use agwire_core::{Message, RunAgentInput, Tool};
use serde_json::{Value, json};

use crate::openai::{choice, fake, model, ok, sse};

#[allow(dead_code)]
#[path = "../examples/axum_app.rs"]
mod example;

fn call(id: &str, name: &str, args: &str) -> Value {
    choice(
        json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                               "function": {"name": name, "arguments": args}}]}),
        Value::Null,
    )
}

fn usage() -> Value {
    json!({"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35}})
}

/// Every wait of the test, bounded.
async fn bound<F: std::future::Future>(f: F) -> Result<F::Output, tokio::time::error::Elapsed> {
    tokio::time::timeout(Duration::from_secs(60), f).await
}

#[tokio::test]
async fn an_llm_agent_beside_the_apps_routes_runs_tools_for_the_signed_in_user() {
    let (provider, fake) = fake().await;
    {
        let mut replies = fake.replies.lock().unwrap();
        // Round 1: the backend tool; round 2: the frontend tool; then,
        // in the next run, an answer.
        replies.push_back(ok(sse(
            &[
                call("call_1", "save_note", "{\"note\":\"window seat\"}"),
                choice(json!({}), json!("tool_calls")),
                usage(),
            ],
            true,
        )));
        replies.push_back(ok(sse(
            &[
                call("call_2", "confirm_booking", "{\"seat\":\"12A\"}"),
                choice(json!({}), json!("tool_calls")),
                usage(),
            ],
            true,
        )));
        replies.push_back(ok(sse(
            &[
                choice(json!({"content": "Booked 12A."}), Value::Null),
                choice(json!({}), json!("stop")),
            ],
            true,
        )));
    }
    let notes = example::Notes::default();
    let tokens = HashMap::from([("alice-token".to_owned(), "alice".to_owned())]);
    let app = example::app(Arc::new(model(provider)), tokens, notes.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    // The app's own route, no token needed.
    let http = reqwest::Client::new();
    let health = bound(http.get(format!("http://{addr}/api/health")).send())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(health.status(), 200);

    // The agent is behind the app's auth: no token, a JSON 401, no model call.
    let anonymous = Client::new(format!("http://{addr}/agent")).unwrap();
    let mut input = RunAgentInput::new("t1", "r1");
    input.messages = vec![Message::user("u1", "Note my window seat, then book 12A.")];
    input.tools = vec![Tool {
        name: "confirm_booking".into(),
        description: "Asks the user to confirm a seat.".into(),
        parameters: Some(json!({"type": "object", "properties": {"seat": {"type": "string"}}})),
        metadata: None,
    }];
    let refused = bound(anonymous.run_to_completion(&input, &mut NoHooks))
        .await
        .unwrap()
        .unwrap_err();
    match refused {
        agwire_client::Error::Status { status, json, .. } => {
            assert_eq!(status, 401);
            assert!(json.unwrap()["detail"].is_string());
        }
        other => panic!("{other:?}"),
    }
    assert!(fake.requests.lock().unwrap().is_empty());

    // Alice: the backend tool runs for her, the frontend tool comes back.
    let alice = Client::builder(format!("http://{addr}/agent"))
        .bearer_token("alice-token")
        .build()
        .unwrap();
    let first = bound(alice.run_to_completion(&input, &mut NoHooks))
        .await
        .unwrap()
        .unwrap();
    assert!(first.error().is_none(), "{:?}", first.error());
    assert_eq!(
        notes.lock().unwrap().get("alice"),
        Some(&vec!["window seat".to_owned()])
    );
    let pending = first.pending_tool_call_ids().to_vec();
    assert_eq!(pending.len(), 1, "{:?}", first.messages());
    // The backend tool's answer is in the conversation, as a tool message.
    let answered: Vec<&str> = first
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool(t) => Some(t.tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(answered.len(), 1);
    assert!(!pending.contains(&answered[0].to_owned()));
    let total: u64 = first.usage().iter().filter_map(|u| u.total_tokens).sum();
    assert_eq!(total, 70, "both model calls' usage reaches RUN_FINISHED");
    {
        let requests = fake.requests.lock().unwrap();
        assert_eq!(requests.len(), 2);
        let (_, body) = &requests[0];
        let system = body["messages"][0]["content"].as_str().unwrap();
        assert!(
            system.contains("alice"),
            "the user reached the agent: {system}"
        );
        let tools: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(tools, ["save_note", "confirm_booking"]);
        let (_, body) = &requests[1];
        let last = body["messages"].as_array().unwrap().last().unwrap();
        assert_eq!(last["role"], "tool");
        assert!(last["content"].as_str().unwrap().contains("window seat"));
    }

    // The client answers the frontend tool; the next run finishes the turn.
    let mut next = RunAgentInput::new("t1", "r2");
    next.tools = input.tools.clone();
    next.messages = first.messages().to_vec();
    next.messages
        .push(Message::tool("t-answer", pending[0].clone(), "confirmed"));
    let second = bound(alice.run_to_completion(&next, &mut NoHooks))
        .await
        .unwrap()
        .unwrap();
    assert!(second.error().is_none(), "{:?}", second.error());
    let said: Vec<String> = second
        .new_messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => a.content.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(said, ["Booked 12A."]);
    let requests = fake.requests.lock().unwrap();
    let (_, body) = &requests[2];
    let last = body["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], pending[0]);
    assert_eq!(last["content"], "confirmed");
}
