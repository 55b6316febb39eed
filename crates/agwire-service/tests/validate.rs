//! The agent-run API's validation table, rule by rule, each boundary on both sides,
//! the order between rules, and the seed's four request examples.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns

use agwire_core::{ContentPart, Message, PartSource};
use agwire_service::ApiError;
use agwire_service::run::RuntimeMode;
use agwire_service::validate::{MAX_PAYLOAD_BYTES, Rules, ValidRun, validate_run};
use serde_json::{Value, json};

const THREAD: &str = "550e8400-e29b-41d4-a716-446655440000";
const SIGNED: &str = "https://agwire.test/api/v1/agent/attachments/a1?exp=9&sig=ok";

fn base() -> Value {
    json!({
        "threadId": THREAD,
        "runId": "run-001",
        "state": {},
        "messages": [{"id": "msg-001", "role": "user", "content": "hello"}],
        "tools": [],
        "context": [],
        "forwardedProps": {"runtime_mode": "chat"}
    })
}

fn signed(url: &str) -> bool {
    url.ends_with("sig=ok")
}

fn rules() -> Rules<'static> {
    Rules {
        backend_tools: &["calendar_write"],
        signed_url: &signed,
    }
}

fn check(body: &Value) -> Result<ValidRun, ApiError> {
    validate_run(body.to_string().as_bytes(), &rules())
}

#[track_caller]
fn rejects(body: &Value, detail: &str) {
    match check(body) {
        Ok(_) => panic!("accepted, expected '{detail}': {body}"),
        Err(r) => {
            assert_eq!(r.detail(), detail, "{body}");
            assert_eq!(r.status().as_u16(), 422);
        }
    }
}

#[track_caller]
fn accepts(body: &Value) -> ValidRun {
    check(body).unwrap_or_else(|r| panic!("rejected with '{}': {body}", r.detail()))
}

fn with(mut body: Value, pointer: &str, value: Value) -> Value {
    *body.pointer_mut(pointer).unwrap() = value;
    body
}

fn user_parts(parts: Value) -> Value {
    with(base(), "/messages/0/content", parts)
}

fn binary(url: &str) -> Value {
    json!({"type": "binary", "mimeType": "image/png", "url": url})
}

#[test]
fn payload_size_limit_is_256_kib() {
    let body = base().to_string();
    let pad = |total: usize| {
        let mut b = body.clone().into_bytes();
        b.truncate(b.len() - 1); // drop the closing brace, pad, close again
        b.resize(total - 1, b' ');
        b.push(b'}');
        b
    };
    assert!(validate_run(&pad(MAX_PAYLOAD_BYTES), &rules()).is_ok());
    let over = validate_run(&pad(MAX_PAYLOAD_BYTES + 1), &rules()).unwrap_err();
    assert_eq!(
        (over.status().as_u16(), over.detail()),
        (413, "RunAgentInput payload exceeds size limit")
    );
}

#[test]
fn the_body_must_be_a_run_agent_input() {
    for body in [
        "not json",
        "[]",
        "{\"threadId\": 5}",
        r#"{"runId": "r", "messages": []}"#,
    ] {
        let r = validate_run(body.as_bytes(), &rules()).unwrap_err();
        assert_eq!(r.status().as_u16(), 422);
        assert!(
            r.detail().starts_with("invalid RunAgentInput"),
            "{body}: {}",
            r.detail()
        );
    }
    let r = check(&with(base(), "/messages/0/content", json!(5))).unwrap_err();
    assert!(r.detail().contains("/messages/0/content"), "{}", r.detail());
}

#[test]
fn thread_id_must_be_a_uuid() {
    for bad in [
        "",
        "thread-1",
        "550e8400-e29b-41d4-a716-44665544000",
        "550e8400e29b41d4a716446655440000zz",
    ] {
        rejects(
            &with(base(), "/threadId", json!(bad)),
            "threadId must be a valid UUID",
        );
    }
    accepts(&with(
        base(),
        "/threadId",
        json!("550E8400-E29B-41D4-A716-446655440000"),
    ));
}

#[test]
fn run_id_is_at_most_128_characters() {
    accepts(&with(base(), "/runId", json!("r".repeat(128))));
    accepts(&with(base(), "/runId", json!("雪".repeat(128)))); // characters, not bytes
    rejects(
        &with(base(), "/runId", json!("r".repeat(129))),
        "runId exceeds length limit",
    );
}

#[test]
fn at_most_200_messages() {
    let messages = |n: usize| {
        let mut m = vec![json!({"id": "u", "role": "user", "content": "hi"})];
        m.extend(
            (1..n).map(|i| json!({"id": format!("a{i}"), "role": "assistant", "content": "ok"})),
        );
        Value::Array(m)
    };
    accepts(&with(base(), "/messages", messages(200)));
    rejects(
        &with(base(), "/messages", messages(201)),
        "RunAgentInput.messages exceeds limit",
    );
}

#[test]
fn user_text_is_at_most_10000_characters() {
    const RULE: &str = "RunAgentInput user message text exceeds limit";
    accepts(&with(
        base(),
        "/messages/0/content",
        json!("é".repeat(10_000)),
    ));
    rejects(
        &with(base(), "/messages/0/content", json!("x".repeat(10_001))),
        RULE,
    );
    let parts = |a: usize, b: usize| json!([{"type": "text", "text": "x".repeat(a)}, {"type": "text", "text": "y".repeat(b)}]);
    accepts(&user_parts(parts(5_000, 5_000)));
    rejects(&user_parts(parts(5_000, 5_001)), RULE);
}

#[test]
fn forwarded_props_needs_runtime_mode_and_nothing_else() {
    const RULE: &str = "invalid RunAgentInput.forwardedProps";
    let mut missing = base();
    missing.as_object_mut().unwrap().remove("forwardedProps");
    rejects(&missing, RULE);
    for bad in [
        json!(null),
        json!([]),
        json!("chat"),
        json!({}),
        json!({"runtime_mode": "other"}),
        json!({"runtime_mode": null}),
        json!({"runtime_mode": "chat", "extra": 1}),
        json!({"runtime_mode": "chat", "client_time": "now"}),
    ] {
        rejects(&with(base(), "/forwardedProps", bad), RULE);
    }
    let run = accepts(&with(
        base(),
        "/forwardedProps",
        json!({"runtime_mode": "automation"}),
    ));
    assert_eq!(run.runtime_mode, RuntimeMode::Automation);
    assert!(run.options.client_time.is_none());
}

#[test]
fn exactly_one_user_message_and_it_comes_first() {
    let assistant = json!({"id": "a", "role": "assistant", "content": "hi"});
    let user = json!({"id": "u", "role": "user", "content": "hi"});
    rejects(
        &with(base(), "/messages", json!([assistant])),
        "RunAgentInput.messages must contain exactly one user message",
    );
    rejects(
        &with(base(), "/messages", json!([user, user])),
        "RunAgentInput.messages must contain exactly one user message",
    );
    rejects(
        &with(base(), "/messages", json!([assistant, user])),
        "RunAgentInput.messages[0].role must be user",
    );
    let tool = json!({"id": "t", "role": "tool", "toolCallId": "c1", "content": "done"});
    accepts(&with(base(), "/messages", json!([user, tool])));
}

#[test]
fn attachment_rules_in_table_order() {
    rejects(
        &user_parts(json!([{"type": "binary", "mimeType": "application/pdf", "url": SIGNED}])),
        "binary content requires image mimeType",
    );
    rejects(
        &user_parts(json!([{"type": "binary", "url": SIGNED}])),
        "binary content requires image mimeType",
    );
    rejects(
        &user_parts(json!([{"type": "binary", "mimeType": "image/png"}])),
        "binary content requires url",
    );
    rejects(
        &user_parts(json!([{"type": "binary", "mimeType": "image/png", "data": "iVBORw0KGgo="}])),
        "binary content requires url",
    );
    rejects(
        &user_parts(
            json!([{"type": "binary", "mimeType": "image/png", "url": SIGNED, "data": "iVBORw0KGgo="}]),
        ),
        "binary content data is not allowed",
    );
    accepts(&user_parts(json!([
        binary(SIGNED),
        binary(SIGNED),
        binary(SIGNED)
    ])));
    rejects(
        &user_parts(json!([
            binary(SIGNED),
            binary(SIGNED),
            binary(SIGNED),
            binary(SIGNED)
        ])),
        "Too many attachments",
    );
    // The image rule outranks the count: four attachments, one a PDF.
    rejects(
        &user_parts(json!([binary(SIGNED), binary(SIGNED), binary(SIGNED),
            {"type": "binary", "mimeType": "application/pdf", "url": SIGNED}])),
        "binary content requires image mimeType",
    );
    rejects(
        &user_parts(json!([binary("https://elsewhere.example/x.png")])),
        "binary content url is not a valid signed URL",
    );
}

#[test]
fn the_same_rules_hold_for_1x_media_parts() {
    let image = |source: Value| json!({"type": "image", "source": source});
    accepts(&user_parts(json!([image(
        json!({"type": "url", "value": SIGNED, "mimeType": "image/jpeg"})
    )])));
    accepts(&user_parts(json!([image(
        json!({"type": "url", "value": SIGNED})
    )])));
    rejects(
        &user_parts(json!([image(
            json!({"type": "data", "value": "iVBORw0KGgo=", "mimeType": "image/png"})
        )])),
        "binary content requires url",
    );
    rejects(
        &user_parts(
            json!([{"type": "document", "source": {"type": "url", "value": SIGNED, "mimeType": "application/pdf"}}]),
        ),
        "binary content requires image mimeType",
    );
    rejects(
        &user_parts(json!([image(
            json!({"type": "url", "value": "https://evil.example/x.png"})
        )])),
        "binary content url is not a valid signed URL",
    );
}

#[test]
fn accepted_attachments_become_image_parts_with_url_sources() {
    let run = accepts(&user_parts(json!([
        {"type": "text", "text": "what is this?"},
        binary(SIGNED),
    ])));
    assert_eq!(run.attachment_urls, [SIGNED]);
    let Message::User(user) = &run.input.messages[0] else {
        unreachable!()
    };
    let agwire_core::Content::Parts(parts) = &user.content else {
        panic!("{:?}", user.content)
    };
    let ContentPart::Image(image) = &parts[1] else {
        panic!("{parts:?}")
    };
    assert_eq!(
        image.source,
        PartSource::Url {
            value: SIGNED.into(),
            mime_type: Some("image/png".into())
        }
    );
}

#[test]
fn client_time_fields_are_checked() {
    let time = |tz: Value, now: Value, ms: Value| {
        with(
            base(),
            "/forwardedProps",
            json!({"runtime_mode": "chat",
            "client_time": {"device_timezone": tz, "client_now_iso": now, "client_epoch_ms": ms}}),
        )
    };
    let ok_now = json!("2026-03-16T09:12:33-07:00");
    let run = accepts(&time(
        json!("America/Los_Angeles"),
        ok_now.clone(),
        json!(1_773_678_753_000_i64),
    ));
    let client = run.options.client_time.unwrap();
    assert_eq!(client.device_timezone_name, "America/Los_Angeles");
    assert_eq!(client.now.as_millisecond(), 1_773_677_553_000);
    accepts(&time(json!("UTC"), json!("2026-03-16T16:12:33Z"), json!(0)));
    for tz in [
        json!("Mars/Olympus"),
        json!("PST8PDT-ish"),
        json!(""),
        json!(null),
        json!(7),
    ] {
        rejects(
            &time(tz, ok_now.clone(), json!(1)),
            "invalid client_time.device_timezone",
        );
    }
    for now in [
        json!("2026-03-16T09:12:33"),
        json!("2026-03-16"),
        json!("yesterday"),
        json!("2026-03-16T09:12:33[America/Los_Angeles]"),
        json!(1_773_678_753_000_i64),
    ] {
        rejects(
            &time(json!("UTC"), now, json!(1)),
            "invalid client_time.client_now_iso",
        );
    }
    for ms in [json!(1.5), json!("1773678753000"), json!(null)] {
        rejects(
            &time(json!("UTC"), ok_now.clone(), ms),
            "invalid client_time.client_epoch_ms",
        );
    }
}

#[test]
fn frontend_tools_may_not_reuse_backend_tool_names() {
    let tool =
        |name: &str| json!([{"name": name, "description": "d", "parameters": {"type": "object"}}]);
    accepts(&with(base(), "/tools", tool("get_weather")));
    let r = check(&with(base(), "/tools", tool("calendar_write"))).unwrap_err();
    assert_eq!(r.status().as_u16(), 422);
    assert!(
        r.detail()
            .contains("'calendar_write' is the name of a backend tool"),
        "{}",
        r.detail()
    );
}

#[test]
fn the_first_failing_rule_in_table_order_is_reported() {
    let mut body = with(base(), "/threadId", json!("nope"));
    body = with(body, "/runId", json!("r".repeat(200)));
    rejects(&body, "threadId must be a valid UUID");
    let body = with(
        with(base(), "/runId", json!("r".repeat(200))),
        "/forwardedProps",
        json!({}),
    );
    rejects(&body, "runId exceeds length limit");
    let body = with(
        with(base(), "/messages/0/content", json!("x".repeat(10_001))),
        "/forwardedProps",
        json!({}),
    );
    rejects(&body, "RunAgentInput user message text exceeds limit");
    let body = with(
        with(base(), "/forwardedProps", json!({})),
        "/messages",
        json!([{"id": "a", "role": "assistant", "content": "x"}]),
    );
    rejects(&body, "invalid RunAgentInput.forwardedProps");
}

#[test]
fn snake_case_and_seed_nulls_are_accepted() {
    let body = json!({
        "thread_id": THREAD,
        "run_id": "run-9",
        "messages": [
            {"id": "u", "role": "user", "content": "hi", "name": null, "encryptedValue": null},
            {"id": "a", "role": "assistant", "content": null, "name": null, "encryptedValue": null,
             "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}, "encryptedValue": null}]},
            {"id": "t", "role": "tool", "toolCallId": "c1", "content": "ok", "error": null, "encryptedValue": null},
            {"id": "s", "role": "system", "content": "be nice", "name": null}
        ],
        "forwarded_props": {"runtime_mode": "chat"}
    });
    let run = accepts(&body);
    assert_eq!(run.input.run_id, "run-9");
    assert_eq!(run.input.messages.len(), 4);
}

#[test]
fn the_seed_examples_are_accepted() {
    let examples = [
        r#"{ "threadId": "550e8400-e29b-41d4-a716-446655440000", "runId": "run-001", "state": {}, "messages": [ { "id": "msg-001", "role": "user", "content": "帮我查一下北京今天的天气" } ], "tools": [], "context": [], "forwardedProps": { "runtime_mode": "chat" } }"#,
        r#"{ "threadId": "550e8400-e29b-41d4-a716-446655440000", "runId": "run-002", "state": {}, "messages": [ { "id": "msg-001", "role": "user", "content": [ { "type": "text", "text": "这张图片里的内容是什么?" }, { "type": "binary", "mimeType": "image/png", "url": "https://storage.example.com/agent-inputs/user-123/image.png?signature=xxx" } ] } ], "tools": [], "context": [], "forwardedProps": { "runtime_mode": "chat" } }"#,
        r#"{ "threadId": "550e8400-e29b-41d4-a716-446655440000", "runId": "run-003", "state": {}, "messages": [ { "id": "msg-001", "role": "user", "content": "北京天气怎么样?" } ], "tools": [ { "name": "get_weather", "description": "获取指定城市的天气信息", "parameters": { "type": "object", "properties": { "city": { "type": "string", "description": "城市名称" } }, "required": ["city"] } } ], "context": [], "forwardedProps": { "runtime_mode": "chat" } }"#,
        r#"{ "threadId": "550e8400-e29b-41d4-a716-446655440000", "runId": "run-004", "state": {}, "messages": [ { "id": "msg-001", "role": "user", "content": "帮我明天早上9点创建一个日历" } ], "tools": [], "context": [], "forwardedProps": { "runtime_mode": "chat", "client_time": { "device_timezone": "America/Los_Angeles", "client_now_iso": "2026-03-16T09:12:33-07:00", "client_epoch_ms": 1773658353000 } } }"#,
    ];
    // The example's storage URL stands for a URL this service signed.
    let rules = Rules {
        backend_tools: &["calendar_write"],
        signed_url: &|u| u.contains("signature="),
    };
    for (i, body) in examples.iter().enumerate() {
        let run = validate_run(body.as_bytes(), &rules)
            .unwrap_or_else(|r| panic!("example {}: {}", i + 1, r.detail()));
        assert_eq!(run.input.run_id, format!("run-00{}", i + 1));
    }
}
