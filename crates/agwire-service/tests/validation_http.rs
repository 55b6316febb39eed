//! The agent-run API's validation table over real HTTP: every rule's exact message,
//! each limit on both sides of its boundary, the seed's four request
//! examples accepted, and nothing stored for any rejected request.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns

use crate::common;

use agwire_service::auth::Auth;
use agwire_service::{BuiltinAgent, Config};
use common::{body, start};
use serde_json::{Value, json};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR boundary test image";

fn thread() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn with(mut value: Value, pointer: &str, new: Value) -> Value {
    *value.pointer_mut(pointer).unwrap() = new;
    value
}

/// A valid request whose serialized size is exactly `size` bytes (padded in
/// `context`).
fn sized(size: usize) -> String {
    let base = with(
        body(&thread(), "sized", "hi"),
        "/context",
        json!([{"description": "pad", "value": ""}]),
    )
    .to_string();
    let pad = size - base.len();
    let text = with(
        body(&thread(), "sized", "hi"),
        "/context",
        json!([{"description": "pad", "value": "x".repeat(pad)}]),
    )
    .to_string();
    assert_eq!(text.len(), size);
    text
}

fn binary(url: &str) -> Value {
    json!({"type": "binary", "mimeType": "image/png", "url": url})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rule_on_both_sides_of_its_boundary() {
    let server = start(&Config::default(), BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let client = reqwest::Client::new();
    let mut signed = Vec::new();
    for _ in 0..4 {
        signed.push(common::upload(addr, PNG).await);
    }
    let tampered = format!("{}0", signed[0]);
    let one = |content: Value| with(body(&thread(), "r", "x"), "/messages/0/content", content);
    let props = |props: Value| with(body(&thread(), "r", "hi"), "/forwardedProps", props);
    let assistant = |i: usize| json!({"id": format!("a{i}"), "role": "assistant", "content": "ok"});
    let messages = |n: usize| {
        let mut list = vec![json!({"id": "u", "role": "user", "content": "hi"})];
        list.extend((1..n).map(assistant));
        with(body(&thread(), "r", "hi"), "/messages", json!(list))
    };
    let client_time = |key: &str, value: Value| {
        let mut time = json!({
            "device_timezone": "America/Los_Angeles",
            "client_now_iso": "2026-03-16T09:12:33-07:00",
            "client_epoch_ms": 1_773_658_353_000_i64
        });
        time[key] = value;
        props(json!({"runtime_mode": "chat", "client_time": time}))
    };
    let max = 256 * 1024;

    // (request body, expected: None = accepted, Some((status, detail)))
    let cases: Vec<(String, Option<(u16, &str)>)> = vec![
        // Payload size.
        (sized(max), None),
        (
            sized(max + 1),
            Some((413, "RunAgentInput payload exceeds size limit")),
        ),
        // threadId.
        (
            with(body(&thread(), "r", "hi"), "/threadId", json!("t-1")).to_string(),
            Some((422, "threadId must be a valid UUID")),
        ),
        // runId length, in characters.
        (body(&thread(), &"é".repeat(128), "hi").to_string(), None),
        (
            body(&thread(), &"r".repeat(129), "hi").to_string(),
            Some((422, "runId exceeds length limit")),
        ),
        // Message count.
        (messages(200).to_string(), None),
        (
            messages(201).to_string(),
            Some((422, "RunAgentInput.messages exceeds limit")),
        ),
        // User text, in characters (multi-byte counts once).
        (body(&thread(), "r", &"é".repeat(10_000)).to_string(), None),
        (
            body(&thread(), "r", &"e".repeat(10_001)).to_string(),
            Some((422, "RunAgentInput user message text exceeds limit")),
        ),
        // forwardedProps.
        (props(json!({"runtime_mode": "automation"})).to_string(), None),
        (
            props(json!({})).to_string(),
            Some((422, "invalid RunAgentInput.forwardedProps")),
        ),
        (
            props(json!({"runtime_mode": "batch"})).to_string(),
            Some((422, "invalid RunAgentInput.forwardedProps")),
        ),
        (
            props(json!({"runtime_mode": "chat", "debug": true})).to_string(),
            Some((422, "invalid RunAgentInput.forwardedProps")),
        ),
        (
            props(json!(["chat"])).to_string(),
            Some((422, "invalid RunAgentInput.forwardedProps")),
        ),
        // Exactly one user message, and first.
        (
            with(
                body(&thread(), "r", "hi"),
                "/messages",
                json!([assistant(1)]),
            )
            .to_string(),
            Some((
                422,
                "RunAgentInput.messages must contain exactly one user message",
            )),
        ),
        (
            with(
                body(&thread(), "r", "hi"),
                "/messages",
                json!([{"id": "u1", "role": "user", "content": "a"}, {"id": "u2", "role": "user", "content": "b"}]),
            )
            .to_string(),
            Some((
                422,
                "RunAgentInput.messages must contain exactly one user message",
            )),
        ),
        (
            with(
                body(&thread(), "r", "hi"),
                "/messages",
                json!([assistant(1), {"id": "u", "role": "user", "content": "hi"}]),
            )
            .to_string(),
            Some((422, "RunAgentInput.messages[0].role must be user")),
        ),
        // Attachments.
        (
            one(json!([{"type": "binary", "mimeType": "application/pdf", "url": signed[0]}]))
                .to_string(),
            Some((422, "binary content requires image mimeType")),
        ),
        (
            one(json!([{"type": "binary", "mimeType": "image/png"}])).to_string(),
            Some((422, "binary content requires url")),
        ),
        (
            one(json!([{"type": "binary", "mimeType": "image/png", "url": signed[0], "data": "iVBORw0KGgo="}]))
                .to_string(),
            Some((422, "binary content data is not allowed")),
        ),
        (
            one(json!([binary(&signed[0]), binary(&signed[1]), binary(&signed[2])])).to_string(),
            None,
        ),
        (
            one(json!([
                binary(&signed[0]),
                binary(&signed[1]),
                binary(&signed[2]),
                binary(&signed[3])
            ]))
            .to_string(),
            Some((422, "Too many attachments")),
        ),
        // 1.x image parts follow the same rules.
        (
            one(json!([{"type": "image", "source": {"type": "url", "value": signed[0], "mimeType": "image/png"}}]))
                .to_string(),
            None,
        ),
        (
            one(json!([{"type": "image", "source": {"type": "data", "value": "iVBORw0KGgo=", "mimeType": "image/png"}}]))
                .to_string(),
            Some((422, "binary content requires url")),
        ),
        // Signed URLs (ours).
        (
            one(json!([binary("https://elsewhere.example/a.png")])).to_string(),
            Some((422, "binary content url is not a valid signed URL")),
        ),
        (
            one(json!([binary(&tampered)])).to_string(),
            Some((422, "binary content url is not a valid signed URL")),
        ),
        // client_time (ours).
        (client_time("device_timezone", json!("Asia/Tokyo")).to_string(), None),
        (
            client_time("device_timezone", json!("Mars/Olympus_Mons")).to_string(),
            Some((422, "invalid client_time.device_timezone")),
        ),
        (
            client_time("client_now_iso", json!("2026-03-16T09:12:33")).to_string(),
            Some((422, "invalid client_time.client_now_iso")),
        ),
        (
            client_time("client_epoch_ms", json!(1.5)).to_string(),
            Some((422, "invalid client_time.client_epoch_ms")),
        ),
        (
            client_time("client_epoch_ms", json!("1773658353000")).to_string(),
            Some((422, "invalid client_time.client_epoch_ms")),
        ),
        // Frontend tools may not take a backend tool's name.
        (
            with(
                body(&thread(), "r", "hi"),
                "/tools",
                json!([{"name": "get_weather", "description": "d", "parameters": {"type": "object"}}]),
            )
            .to_string(),
            None,
        ),
        (
            with(
                body(&thread(), "r", "hi"),
                "/tools",
                json!([{"name": "get_current_time", "description": "d", "parameters": {"type": "object"}}]),
            )
            .to_string(),
            Some((
                422,
                "RunAgentInput.tools: 'get_current_time' is the name of a backend tool; frontend tools must not reuse it",
            )),
        ),
    ];
    let mut accepted = 0;
    for (i, (request, expected)) in cases.iter().enumerate() {
        // Distinct run ids for the accepted ones (the ids above repeat).
        let request = match expected {
            None => {
                let mut value: Value = serde_json::from_str(request).unwrap();
                if value["runId"] == "r" || value["runId"] == "sized" {
                    value["runId"] = json!(format!("case-{i}"));
                }
                let text = value.to_string();
                // The payload boundary case must keep its exact size.
                if request.len() == max {
                    request.clone()
                } else {
                    text
                }
            }
            Some(_) => request.clone(),
        };
        let response = client
            .post(format!("http://{addr}/api/v1/agent/runs"))
            .header("content-type", "application/json")
            .body(request)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap();
        match expected {
            None => {
                assert_eq!(status, 202, "case {i}: {answer}");
                accepted += 1;
            }
            Some((want_status, want)) => {
                assert_eq!(status, *want_status, "case {i}: {answer}");
                assert_eq!(answer, json!({"detail": want}), "case {i}");
            }
        }
    }
    // Only the accepted ones were stored.
    let metrics = client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!("agwire_runs_accepted_total {accepted}\n")),
        "{metrics}"
    );

    // Not a RunAgentInput at all.
    for (request, prefix) in [
        ("not json", "invalid RunAgentInput: "),
        ("[1, 2]", "invalid RunAgentInput: "),
        (r#"{"threadId": 5}"#, "invalid RunAgentInput: "),
    ] {
        let response = client
            .post(format!("http://{addr}/api/v1/agent/runs"))
            .header("content-type", "application/json")
            .body(request)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 422, "{request}");
        let answer: Value = response.json().await.unwrap();
        assert!(
            answer["detail"].as_str().unwrap().starts_with(prefix),
            "{answer}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seeds_four_request_examples_are_accepted() {
    let server = start(&Config::default(), BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let client = reqwest::Client::new();
    let url = common::upload(addr, PNG).await;
    // The agent-run API's documented examples, verbatim but for what a live service must own:
    // the storage URL is one this service signed, and each goes on a fresh
    // thread (the seed reuses one thread id, busy while a run is active).
    let examples = [
        r#"{ "threadId": "T", "runId": "run-001", "state": {}, "messages": [ { "id": "msg-001", "role": "user", "content": "帮我查一下北京今天的天气" } ], "tools": [], "context": [], "forwardedProps": { "runtime_mode": "chat" } }"#,
        r#"{ "threadId": "T", "runId": "run-002", "state": {}, "messages": [ { "id": "msg-001", "role": "user", "content": [ { "type": "text", "text": "这张图片里的内容是什么?" }, { "type": "binary", "mimeType": "image/png", "url": "U" } ] } ], "tools": [], "context": [], "forwardedProps": { "runtime_mode": "chat" } }"#,
        r#"{ "threadId": "T", "runId": "run-003", "state": {}, "messages": [ { "id": "msg-001", "role": "user", "content": "北京天气怎么样?" } ], "tools": [ { "name": "get_weather", "description": "获取指定城市的天气信息", "parameters": { "type": "object", "properties": { "city": { "type": "string", "description": "城市名称" } }, "required": ["city"] } } ], "context": [], "forwardedProps": { "runtime_mode": "chat" } }"#,
        r#"{ "threadId": "T", "runId": "run-004", "state": {}, "messages": [ { "id": "msg-001", "role": "user", "content": "帮我明天早上9点创建一个日历" } ], "tools": [], "context": [], "forwardedProps": { "runtime_mode": "chat", "client_time": { "device_timezone": "America/Los_Angeles", "client_now_iso": "2026-03-16T09:12:33-07:00", "client_epoch_ms": 1773658353000 } } }"#,
    ];
    for example in examples {
        let thread = thread();
        let request = example
            .replace(r#""threadId": "T""#, &format!(r#""threadId": "{thread}""#))
            .replace(r#""url": "U""#, &format!(r#""url": "{url}""#));
        let response = client
            .post(format!("http://{addr}/api/v1/agent/runs"))
            .header("content-type", "application/json")
            .body(request)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 202, "{example}");
        let accepted: Value = response.json().await.unwrap();
        assert_eq!(accepted["threadId"], thread);
        assert_eq!(accepted["created"], true);
    }
}
