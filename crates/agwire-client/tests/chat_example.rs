//! The `chat` example, run: two typed turns against an agwire-server
//! endpoint on a real port whose agent reports what it was sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use agwire_client::HttpAgent;
use agwire_server::core::RunAgentInput;
use agwire_server::{Agent, AgentEndpoint, AgentError, RunContext};
use serde_json::json;

#[allow(dead_code)]
#[path = "../examples/chat.rs"]
mod example;

/// Says how many messages it got, and counts the turns in the state.
struct Counting;

impl Agent for Counting {
    async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        let turns = ctx.state()["turns"].as_u64().unwrap_or(0) + 1;
        ctx.say(&format!("turn {turns}: {} messages", input.messages.len()))
            .await?;
        ctx.set_state(json!({ "turns": turns })).await?;
        Ok(())
    }
}

#[tokio::test]
async fn the_chat_example_keeps_the_conversation_from_turn_to_turn() {
    let app = axum::Router::new().route_service("/agent", AgentEndpoint::new(Counting));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut agent = HttpAgent::new(format!("http://{addr}/agent")).unwrap();
    let typed = "hello\n\nand again\n/state\n/quit\nnever sent\n";
    let mut out = Vec::new();
    tokio::time::timeout(
        Duration::from_secs(60),
        example::chat(&mut agent, typed.as_bytes(), &mut out),
    )
    .await
    .expect("the chat ends")
    .unwrap();
    // The second turn sent the first turn's question and answer too, and
    // the state the first run left.
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "turn 1: 1 messages\nturn 2: 3 messages\n{\"turns\":2}\n"
    );
    assert_eq!(agent.messages().len(), 4);
}
