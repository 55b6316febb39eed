//! The router → worker pipeline over real HTTP with a scripted model
//! standing in for the provider: the router's choice and its fallback, the
//! tool loop (a schema-invalid call answered with the error, then
//! corrected), time zones from the device, ui_hints → ui_schema live and in
//! history, usage, and frontend tools handed back and answered — through
//! the agent-run endpoint and through the official `HttpAgent`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;

use agwire_client::core::pipeline::Pipeline;
use agwire_client::core::{Event, RunAgentInput, RunFinishedOutcome};
use agwire_llm::{ChatEvent, ChatMessage, ChatModel, ScriptedModel, ScriptedReply};
use agwire_service::brain::llm::LlmBrain;
use common::{body, events, get_json, post, start_brain};
use serde_json::{Value, json};

fn brain(model: &ScriptedModel) -> Arc<LlmBrain> {
    let model: Arc<dyn ChatModel> = Arc::new(model.clone());
    Arc::new(LlmBrain::new(model.clone(), model))
}

fn verified(log: &[(u64, Event)], input: &Value) {
    let input: RunAgentInput = serde_json::from_value(input.clone()).unwrap();
    let mut pipeline = Pipeline::for_input(&input);
    for (_, event) in log {
        pipeline.push(event.clone()).unwrap();
    }
}

fn system_prompt(request: &agwire_llm::ChatRequest) -> String {
    match &request.messages[0] {
        ChatMessage::System(text) => text.clone(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_picks_the_agent_and_an_unusable_answer_falls_back_to_the_default() {
    let model = ScriptedModel::queue(vec![
        ScriptedReply::text(r#"{"agent": "calendar"}"#),
        [ChatEvent::ReasoningDelta("Nothing is booked.".into())]
            .into_iter()
            .chain(ScriptedReply::text("Your calendar is clear."))
            .collect(),
        ScriptedReply::text("Sorry, I cannot decide"),
        ScriptedReply::text("Hello!"),
    ]);
    let server = start_brain(brain(&model)).await;
    let thread = uuid::Uuid::new_v4().to_string();
    let first = body(&thread, "p1", "what is on my calendar?");
    post(server.addr, &first, None).await;
    let log = events(server.addr, "p1", None).await;
    verified(&log, &first);
    let steps: Vec<&str> = log
        .iter()
        .filter_map(|(_, e)| match e {
            Event::StepStarted(s) => Some(s.step_name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(steps, ["router", "worker"]);
    // The model's reasoning streams as AG-UI reasoning.
    let reasoning: String = log
        .iter()
        .filter_map(|(_, e)| match e {
            Event::ReasoningMessageContent(r) => Some(r.delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, "Nothing is booked.");
    let requests = model.requests();
    assert!(requests[0].json_mode, "the router asks for JSON");
    assert!(system_prompt(&requests[0]).contains("- calendar: "));
    assert!(system_prompt(&requests[1]).contains("You manage the user's calendar"));
    let tools: Vec<&str> = requests[1].tools.iter().map(|t| t.name.as_str()).collect();
    assert!(tools.contains(&"calendar_write"), "{tools:?}");

    let second = body(&thread, "p2", "hi again");
    post(server.addr, &second, None).await;
    let log = events(server.addr, "p2", None).await;
    verified(&log, &second);
    let status = get_json(server.addr, "/api/v1/agent/runs/p2").await;
    assert_eq!(status["status"], "succeeded");
    let requests = model.requests();
    assert!(system_prompt(&requests[3]).contains("You are a helpful, concise assistant"));
    // The worker saw the thread so far: both user turns and the first answer.
    let users = requests[3]
        .messages
        .iter()
        .filter(|m| matches!(m, ChatMessage::User { .. }))
        .count();
    assert_eq!(users, 2);
    assert!(requests[3].messages.iter().any(|m| matches!(m,
        ChatMessage::Assistant { content: Some(c), .. } if c == "Your calendar is clear.")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calendar_write_without_its_zone_is_refused_then_corrected_and_shown() {
    let model = ScriptedModel::queue(vec![
        ScriptedReply::text(r#"{"agent": "calendar"}"#),
        ScriptedReply::tool_call(
            "c1",
            "calendar_write",
            r#"{"title": "Standup", "start": "2026-03-17T09:00"}"#,
        ),
        ScriptedReply::tool_call(
            "c2",
            "calendar_write",
            r#"{"title": "Standup", "start": "2026-03-17T09:00", "event_timezone": "America/Los_Angeles"}"#,
        ),
        ScriptedReply::text("Standup is booked for tomorrow at 9."),
    ]);
    let server = start_brain(brain(&model)).await;
    let thread = uuid::Uuid::new_v4().to_string();
    let mut request = body(&thread, "cal", "帮我明天早上9点创建一个日历");
    request["forwardedProps"] = json!({"runtime_mode": "chat", "client_time": {
        "device_timezone": "America/Los_Angeles",
        "client_now_iso": "2026-03-16T09:12:33-07:00",
        "client_epoch_ms": 1_773_677_553_000_i64}});
    post(server.addr, &request, None).await;
    let log = events(server.addr, "cal", None).await;
    verified(&log, &request);

    // The model was told the device's time, not the server's.
    let requests = model.requests();
    let prompt = system_prompt(&requests[1]);
    assert!(
        prompt.contains("2026-03-16T09:12:33-07:00 (Monday, America/Los_Angeles)"),
        "{prompt}"
    );

    let results: Vec<String> = log
        .iter()
        .filter_map(|(_, e)| match e {
            Event::ToolCallResult(r) => Some(r.content.text()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2);
    assert!(
        results[0].contains("event_timezone is required"),
        "{}",
        results[0]
    );
    let created: Value = serde_json::from_str(&results[1]).unwrap();
    assert_eq!(created["event"]["start_utc"], "2026-03-17T16:00:00Z");
    // The model saw the refusal before correcting itself.
    assert!(requests[2].messages.iter().any(|m| matches!(m,
        ChatMessage::Tool { content, .. } if content.contains("event_timezone is required"))));

    // ui_schema streamed live as an activity…
    let activity = log
        .iter()
        .find_map(|(_, e)| match e {
            Event::ActivitySnapshot(a) if a.activity_type == "ui_schema" => Some(a.content.clone()),
            _ => None,
        })
        .expect("a ui_schema activity");
    assert_eq!(activity["version"], "2.0");
    assert_eq!(activity["status"], "success");
    // …and is kept on the answer in history.
    let history = get_json(
        server.addr,
        &format!("/api/v1/agent/history?threadId={thread}"),
    )
    .await;
    let answer = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "assistant")
        .unwrap()
        .clone();
    assert_eq!(answer["content"], "Standup is booked for tomorrow at 9.");
    assert_eq!(
        answer["ui_schema"],
        Value::Object(activity.into_iter().collect())
    );
    // Stored in the user's calendar, visible through the API.
    let calendar = get_json(
        server.addr,
        "/api/v1/calendar/events?from=2026-03-17T00:00:00Z&to=2026-03-18T00:00:00Z",
    )
    .await;
    assert_eq!(calendar["events"][0]["start_utc"], "2026-03-17T16:00:00Z");
    // Usage flows into RUN_FINISHED and the run's status.
    let Some((_, Event::RunFinished(end))) = log.last() else {
        panic!()
    };
    assert!(end.usage.is_some(), "{end:?}");
    // One entry per model call: the router's and the worker's three.
    let status = get_json(server.addr, "/api/v1/agent/runs/cal").await;
    assert_eq!(
        status["usage"].as_array().map(Vec::len),
        Some(4),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frontend_tool_is_handed_back_and_the_next_seed_request_answers_it() {
    let model = agwire_service::brain::demo::model(std::time::Duration::ZERO).recording();
    let server = start_brain(brain(&model)).await;
    let thread = uuid::Uuid::new_v4().to_string();
    let tool = json!({"name": "confirm_booking", "description": "Ask the user to confirm", "parameters": {"type": "object"}});
    let mut first = body(&thread, "fe1", "please confirm_booking for me");
    first["tools"] = json!([tool]);
    post(server.addr, &first, None).await;
    let log = events(server.addr, "fe1", None).await;
    verified(&log, &first);
    let call_id = log
        .iter()
        .find_map(|(_, e)| match e {
            Event::ToolCallStart(s) if s.tool_call_name == "confirm_booking" => {
                Some(s.tool_call_id.clone())
            }
            _ => None,
        })
        .unwrap();
    let Some((_, Event::RunFinished(end))) = log.last() else {
        panic!()
    };
    assert_eq!(
        end.outcome,
        Some(RunFinishedOutcome::Success {
            pending_tool_call_ids: Some(vec![call_id.clone()])
        })
    );
    // Pending for the thread, so a reload (another tab, another replica)
    // asks again.
    let thread_path = format!("/api/v1/agent/threads/{thread}");
    let detail = common::get_json(server.addr, &thread_path).await;
    assert_eq!(
        detail["pendingToolCalls"].as_array().unwrap().len(),
        1,
        "{detail}"
    );
    assert_eq!(
        detail["pendingToolCalls"][0]["toolCallId"],
        call_id.as_str()
    );
    assert_eq!(detail["pendingToolCalls"][0]["name"], "confirm_booking");
    assert_eq!(detail["pendingToolCalls"][0]["runId"], "fe1");
    // The next request: its one user message, then the tool's answer.
    let mut second = body(&thread, "fe2", "done");
    second["messages"] = json!([
        {"id": "fe2-u", "role": "user", "content": "done"},
        {"id": "fe2-t", "role": "tool", "toolCallId": call_id, "content": "confirmed"}
    ]);
    second["tools"] = json!([tool]);
    let accepted = post(server.addr, &second, None).await;
    assert_eq!(accepted.status().as_u16(), 202);
    events(server.addr, "fe2", None).await;
    let detail = common::get_json(server.addr, &thread_path).await;
    assert_eq!(detail["pendingToolCalls"], json!([]), "{detail}");
    // The same answer again (another tab that still showed the question):
    // refused, clearly, and nothing of it kept.
    let mut third = second.clone();
    third["runId"] = json!("fe3");
    let refused = post(server.addr, &third, None).await;
    assert_eq!(refused.status().as_u16(), 409);
    assert_eq!(
        refused.json::<Value>().await.unwrap(),
        json!({"detail": format!("tool call {call_id} was already answered")})
    );
    let missing = reqwest::get(format!("http://{}/api/v1/agent/runs/fe3", server.addr))
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    // The model saw call, answer, then the new turn — in that order.
    let worker = model
        .requests()
        .into_iter()
        .rfind(|r| !r.json_mode)
        .unwrap();
    let kinds: Vec<String> = worker.messages[1..]
        .iter()
        .map(|m| match m {
            ChatMessage::User { .. } => "user".to_owned(),
            ChatMessage::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                format!("call {}", tool_calls[0].name)
            }
            ChatMessage::Assistant { .. } => "assistant".to_owned(),
            ChatMessage::Tool { content, .. } => format!("tool {content}"),
            ChatMessage::System(_) => "system".to_owned(),
        })
        .collect();
    assert_eq!(
        kinds,
        ["user", "call confirm_booking", "tool confirmed", "user"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_http_agent_completes_a_frontend_tool_round_trip() {
    let model = agwire_service::brain::demo::model(std::time::Duration::ZERO).recording();
    let server = start_brain(brain(&model)).await;
    let tools = json!([{"name": "confirm_booking", "description": "Ask the user to confirm", "parameters": {"type": "object", "properties": {}}}]);
    let spec = json!({
        "url": format!("http://{}/api/v1/agui", server.addr),
        "format": "sse",
        "threadId": format!("fe-{}", uuid::Uuid::new_v4()),
        "runs": [
            {"messages": [{"id": "u1", "role": "user", "content": "book it, then confirm_booking"}], "tools": tools},
            {"answerToolCalls": "{\"confirmed\": true}", "tools": tools}
        ]
    });
    let Some(result) = common::http_agent(&spec).await else {
        return;
    };
    let runs = result["runs"].as_array().unwrap();
    for run in runs {
        assert_eq!(run["error"], Value::Null, "{run}");
        assert_eq!(run["logs"], json!([]), "{run}");
    }
    let first_end = runs[0]["events"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(first_end["type"], "RUN_FINISHED");
    assert_eq!(
        first_end["outcome"]["pendingToolCallIds"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let last = runs[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "assistant");
    assert_eq!(last["content"], "Done.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_sees_the_users_image() {
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR pixels";
    let model = ScriptedModel::queue(vec![
        ScriptedReply::text(r#"{"agent": "general"}"#),
        ScriptedReply::text("A very small picture."),
    ]);
    let server = start_brain(brain(&model)).await;
    let url = common::upload(server.addr, PNG).await;
    let thread = uuid::Uuid::new_v4().to_string();
    let mut request = body(&thread, "img", "x");
    request["messages"][0]["content"] = json!([
        {"type": "text", "text": "这张图片里的内容是什么?"},
        {"type": "binary", "mimeType": "image/png", "url": url}
    ]);
    assert_eq!(
        post(server.addr, &request, None).await.status().as_u16(),
        202
    );
    events(server.addr, "img", None).await;
    assert_eq!(
        common::worker_user_parts(&model),
        [
            agwire_llm::UserPart::Text("这张图片里的内容是什么?".into()),
            common::png_data_url(PNG)
        ]
    );
}

/// A run gives its model the user's images newest first, each image once,
/// at most 16 of them (and 8 MiB): the rest stay references the model is
/// told about. On a20bc6d4 every image of the history window went inline,
/// as often as it was sent (here 21 data URLs, the same images again and
/// again), with no total.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_images_are_inlined_once_each_within_a_budget() {
    let model = ScriptedModel::new(|request| {
        if request.json_mode {
            ScriptedReply::text(r#"{"agent": "general"}"#)
        } else {
            ScriptedReply::text("seen")
        }
    })
    .recording();
    let server = start_brain(brain(&model)).await;
    let png = |i: usize| {
        let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR image ".to_vec();
        bytes.extend(i.to_string().bytes());
        bytes
    };
    let mut urls = Vec::new();
    for i in 0..20 {
        urls.push(common::upload(server.addr, &png(i)).await);
    }
    let thread = uuid::Uuid::new_v4().to_string();
    // Seven turns of three images: image 0 in every turn, and two new ones
    // (15 distinct images, 21 sent).
    let mut sent: Vec<usize> = Vec::new();
    for turn in 0..7 {
        let images = [0, 1 + 2 * turn, 2 + 2 * turn];
        sent.extend(images);
        let mut request = body(&thread, &format!("turn{turn}"), "x");
        let mut parts = vec![json!({"type": "text", "text": format!("turn {turn}")})];
        for i in images {
            parts.push(json!({"type": "binary", "mimeType": "image/png", "url": urls[i]}));
        }
        request["messages"][0]["content"] = json!(parts);
        assert_eq!(post(server.addr, &request, None).await.status(), 202);
        common::wait_status(server.addr, &format!("turn{turn}"), "succeeded").await;
    }
    let worker = model
        .requests()
        .into_iter()
        .rfind(|r| !r.json_mode)
        .unwrap();
    let mut inline = Vec::new();
    let mut told = 0;
    for message in &worker.messages {
        if let ChatMessage::User { content } = message {
            for part in content {
                match part {
                    agwire_llm::UserPart::ImageUrl(url) => inline.push(url.clone()),
                    agwire_llm::UserPart::Text(text) if text == "[image attached]" => told += 1,
                    _ => {}
                }
            }
        }
    }
    let distinct: std::collections::HashSet<&String> = inline.iter().collect();
    assert_eq!(distinct.len(), inline.len(), "an image went inline twice");
    assert_eq!(
        inline.len(),
        15,
        "the history's 15 distinct images, each once"
    );
    assert_eq!(told, sent.len() - 15, "the repeats stay references");
    // The newest turn's images are among them.
    for i in [0, 13, 14] {
        let common::DataUrl(url) = common::data_url(&png(i));
        assert!(inline.contains(&url), "image {i}");
    }

    // Past 16 distinct images, the oldest stay references.
    for turn in 7..10 {
        let images = [15 + (turn - 7), 0, 1];
        let mut request = body(&thread, &format!("turn{turn}"), "x");
        let mut parts = vec![json!({"type": "text", "text": "more"})];
        for i in images {
            parts.push(json!({"type": "binary", "mimeType": "image/png", "url": urls[i]}));
        }
        request["messages"][0]["content"] = json!(parts);
        assert_eq!(post(server.addr, &request, None).await.status(), 202);
        common::wait_status(server.addr, &format!("turn{turn}"), "succeeded").await;
    }
    let worker = model
        .requests()
        .into_iter()
        .rfind(|r| !r.json_mode)
        .unwrap();
    let inline: Vec<&String> = worker
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::User { content } => Some(content),
            _ => None,
        })
        .flatten()
        .filter_map(|p| match p {
            agwire_llm::UserPart::ImageUrl(url) => Some(url),
            _ => None,
        })
        .collect();
    assert_eq!(inline.len(), 16, "at most 16 images inline");
    let common::DataUrl(newest) = common::data_url(&png(17));
    assert!(inline.contains(&&newest));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_automation_run_uses_its_jobs_agent_and_tools() {
    let model = ScriptedModel::queue(vec![ScriptedReply::text("Nothing today.")]);
    let server = start_brain(brain(&model)).await;
    let job: Value = reqwest::Client::new()
        .post(format!("http://{}/api/v1/automation/jobs", server.addr))
        .json(&json!({"name": "brief", "schedule": {"every_seconds": 3600}, "timezone": "Asia/Shanghai",
                      "prompt": "What is on my calendar today?",
                      "config": {"agent": "calendar", "enabled_tools": ["calendar_read"]}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let due: jiff::Timestamp = job["nextRunAt"].as_str().unwrap().parse().unwrap();
    let fired = server.service.scheduler().run_due_jobs(due).await.unwrap();
    assert_eq!(fired.len(), 1);
    common::wait_status(server.addr, &fired[0], "succeeded").await;
    // One agent in the job's catalogue: no router call; the worker is the
    // calendar agent with only the job's tools.
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    assert!(system_prompt(&requests[0]).contains("You manage the user's calendar"));
    let tools: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["calendar_read"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_not_answered_in_time_expires() {
    let model = agwire_service::brain::demo::model(std::time::Duration::ZERO);
    let mut config = agwire_service::Config::default();
    config.runs.pending_tool_call_ttl = std::time::Duration::from_secs(1);
    let server =
        common::start_brain_with(&config, agwire_service::auth::Auth::none(), brain(&model)).await;
    let thread = uuid::Uuid::new_v4().to_string();
    let tool = json!({"name": "confirm_booking", "description": "Ask the user to confirm", "parameters": {"type": "object"}});
    let mut first = body(&thread, "ex1", "please confirm_booking for me");
    first["tools"] = json!([tool]);
    post(server.addr, &first, None).await;
    events(server.addr, "ex1", None).await;
    let thread_path = format!("/api/v1/agent/threads/{thread}");
    let detail = get_json(server.addr, &thread_path).await;
    let call = &detail["pendingToolCalls"][0];
    let call_id = call["toolCallId"].as_str().unwrap().to_owned();
    // Stated with the call: a second after it was asked.
    let at = |field: &str| {
        call[field]
            .as_str()
            .unwrap()
            .parse::<jiff::Timestamp>()
            .unwrap()
    };
    assert_eq!(
        at("expiresAt").as_millisecond() - at("askedAt").as_millisecond(),
        1000,
        "{call}"
    );
    // Once past it, no longer listed (polled, with a deadline).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !get_json(server.addr, &thread_path).await["pendingToolCalls"]
        .as_array()
        .unwrap()
        .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "still pending after 30 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // The answer comes too late: refused, named, nothing stored.
    let mut answer = body(&thread, "ex2", "done");
    answer["messages"] = json!([
        {"id": "ex2-u", "role": "user", "content": "done"},
        {"id": "ex2-t", "role": "tool", "toolCallId": call_id, "content": "confirmed"}
    ]);
    answer["tools"] = json!([tool]);
    let refused = post(server.addr, &answer, None).await;
    assert_eq!(refused.status().as_u16(), 409);
    assert_eq!(
        refused.json::<Value>().await.unwrap(),
        json!({"detail": format!("tool call {call_id} expired")})
    );
    let missing = reqwest::get(format!("http://{}/api/v1/agent/runs/ex2", server.addr))
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    // The sweep (every 5 s) counts it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let metrics = reqwest::get(format!("http://{}/metrics", server.addr))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if metrics.contains("agwire_tool_calls_expired_total 1\n") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not swept within 30 s:\n{metrics}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
