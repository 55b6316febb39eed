//! agwire-client against the reference producers — the Python FastAPI server
//! written with `ag-ui-protocol`'s `EventEncoder` (SSE, chunk events
//! included) and the node server using `@ag-ui/encoder` (SSE and protobuf) —
//! folds exactly what the official `@ag-ui/client` `HttpAgent` folds from the
//! same servers, and neither says a word of warning.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // helpers outside #[test] fns

use std::path::Path;
use std::process::Stdio;

use agwire_client::core::RunAgentInput;
use agwire_client::{Accept, Client, NoHooks};
use agwire_testkit::http_agent as http_agent_peer;
use agwire_testkit::peers;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A peer server process, killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

async fn start(program: &Path, args: &[&str], dir: &Path) -> Server {
    let mut child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines
        .next_line()
        .await
        .unwrap()
        .expect("the server printed nothing");
    let port = line
        .strip_prefix("listening ")
        .expect("listening <port>")
        .trim()
        .parse()
        .unwrap();
    Server { child, port }
}

async fn http_agent(interop: &Path, spec: &Value) -> Value {
    http_agent_peer::run(interop, spec).await
}

const ROUTES: [&str; 5] = [
    "/agentic_chat",
    "/chunks",
    "/tool_call",
    "/shared_state",
    "/steps",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn folds_like_the_official_client_from_the_reference_servers() {
    let Some(interop) = peers::interop_dir() else {
        return;
    };
    let Some(python) = peers::python() else {
        return;
    };
    let py = start(&python, &["python/server.py", "--port", "0"], &interop).await;
    let node = start(
        Path::new("node"),
        &["encoder-server.mjs", "--port", "0"],
        &interop,
    )
    .await;
    let mut compared = 0;
    for (server, port, format, content_type) in [
        // Starlette appends a charset; the official client still reads SSE.
        ("python", py.port, "sse", "text/event-stream; charset=utf-8"),
        // The Python encoder always answers SSE, whatever Accept says.
        (
            "python",
            py.port,
            "proto",
            "text/event-stream; charset=utf-8",
        ),
        ("node", node.port, "sse", "text/event-stream"),
        (
            "node",
            node.port,
            "proto",
            "application/vnd.ag-ui.event+proto",
        ),
    ] {
        for route in ROUTES {
            let what = format!("{server} {route} asked for {format}");
            let url = format!("http://127.0.0.1:{port}{route}");
            let state = json!({"recipe": "soup"});
            let user = json!({"id": "u1", "role": "user", "content": "hi there"});

            let mut input = RunAgentInput::new("peer-thread", "r1");
            input.messages = vec![serde_json::from_value(user.clone()).unwrap()];
            input.state = Some(state.clone());
            let accept = if format == "proto" {
                Accept::Proto
            } else {
                Accept::Sse
            };
            let client = Client::builder(&url).accept(accept).build().unwrap();
            let mut run = client.run(&input).await.unwrap();
            while let Some(event) = run.next().await {
                event.unwrap_or_else(|e| panic!("{what}: {e}"));
            }
            assert_eq!(run.take_warnings(), vec![], "{what}");
            let ours = run.into_session();
            let summary = client
                .run_to_completion(&input, &mut NoHooks)
                .await
                .unwrap();
            assert_eq!(
                summary.session, ours,
                "{what}: run() and run_to_completion() differ"
            );

            let theirs = http_agent(
                &interop,
                &json!({"url": url, "format": format, "threadId": "peer-thread", "state": state,
                        "runs": [{"runId": "r1", "messages": [user]}]}),
            )
            .await;
            assert_eq!(theirs["contentTypes"], json!([content_type]), "{what}");
            let run = &theirs["runs"][0];
            assert_eq!(run["error"], Value::Null, "{what}");
            assert_eq!(run["logs"], json!([]), "{what}");
            let our_messages = serde_json::to_value(&ours.messages).unwrap();
            assert_eq!(run["messages"], our_messages, "{what}: messages");
            assert_eq!(run["state"], ours.state, "{what}: state");
            assert!(
                ours.messages.len() >= 2 || route == "/shared_state",
                "{what}: nothing folded"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 20);
}
