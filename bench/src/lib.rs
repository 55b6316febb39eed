//! The benchmark workloads, shared by the criterion benches and the
//! side-by-side runner so that every implementation sees the same events.

use agwire_core::{
    BaseEvent, Event, Message, MessagesSnapshotEvent, PatchOperation, RunFinishedEvent,
    RunStartedEvent, StateDeltaEvent, StateSnapshotEvent, StepFinishedEvent, StepStartedEvent,
    TextMessageContentEvent, TextMessageEndEvent, TextMessageRole, TextMessageStartEvent,
    ToolCallArgsEvent, ToolCallEndEvent, ToolCallResultEvent, ToolCallStartEvent,
};
use serde_json::{Value, json};

/// A deterministic stand-in for model output: ~20-byte deltas, mostly ASCII
/// with the occasional multi-byte character, as real streams have.
const WORDS: &[&str] = &[
    "The ",
    "quick ",
    "agent ",
    "streams ",
    "tokens ",
    "to ",
    "the ",
    "user ",
    "interface, ",
    "one ",
    "small ",
    "delta ",
    "at ",
    "a ",
    "time; ",
    "café ",
    "naïve ",
    "→ ",
    "日本 ",
    "✓ ",
];

fn delta(i: usize) -> String {
    let mut s = String::with_capacity(24);
    let mut k = i.wrapping_mul(2_654_435_761);
    while s.len() < 18 {
        s.push_str(WORDS[k % WORDS.len()]);
        k = k / WORDS.len() + 7;
    }
    s
}

fn base() -> BaseEvent {
    BaseEvent::default()
}

fn run_started() -> Event {
    Event::RunStarted(
        RunStartedEvent::new("bench-thread", "bench-run")
            .protocol_version("1.0")
            .base(base()),
    )
}

fn run_finished() -> Event {
    Event::RunFinished(RunFinishedEvent::new("bench-thread", "bench-run").base(base()))
}

fn text(events: &mut Vec<Event>, id: &str, deltas: usize, offset: usize) {
    events.push(Event::TextMessageStart(
        TextMessageStartEvent::new(id)
            .role(TextMessageRole::Assistant)
            .base(base()),
    ));
    for i in 0..deltas {
        events.push(Event::TextMessageContent(
            TextMessageContentEvent::new(id, delta(offset + i)).base(base()),
        ));
    }
    events.push(Event::TextMessageEnd(
        TextMessageEndEvent::new(id).base(base()),
    ));
}

/// The `i`-th word of the stand-in model output (~7 bytes, some multi-byte).
pub fn word(i: usize) -> &'static str {
    WORDS[i % WORDS.len()]
}

/// Workload (a): one run streaming `n` `TEXT_MESSAGE_CONTENT` events of ~20 bytes.
pub fn text_stream(n: usize) -> Vec<Event> {
    let mut events = Vec::with_capacity(n + 4);
    events.push(run_started());
    text(&mut events, "msg-1", n, 0);
    events.push(run_finished());
    events
}

/// A ~`bytes`-sized application state: a list of records, as a UI would hold.
fn big_state(bytes: usize, version: usize) -> Value {
    let per_item = 100;
    let items: Vec<Value> = (0..bytes / per_item)
        .map(|i| {
            json!({"id": format!("item-{i}"), "title": format!("Task {i} of the plan"),
                   "done": (i + version).is_multiple_of(3), "score": (i * 7 + version) % 100})
        })
        .collect();
    json!({"version": version, "items": items, "filter": {"status": "all", "query": null}})
}

/// Workload (b): a realistic mixed run of `turns` turns — streamed text, a tool
/// call with streamed arguments and its result, steps, a ~50 KB
/// `STATE_SNAPSHOT` and JSON Patch deltas per turn, and a `MESSAGES_SNAPSHOT`
/// every fifth turn.
pub fn mixed_run(turns: usize) -> Vec<Event> {
    let mut events = vec![run_started()];
    let mut history: Vec<Message> = Vec::new();
    for t in 0..turns {
        events.push(Event::StepStarted(
            StepStartedEvent::new(format!("turn-{t}")).base(base()),
        ));
        let msg = format!("msg-{t}");
        text(&mut events, &msg, 200, t * 1000);
        let call = format!("call-{t}");
        events.push(Event::ToolCallStart(
            ToolCallStartEvent::new(call.clone(), "search_documents")
                .parent_message_id(msg.clone())
                .base(base()),
        ));
        let args = json!({"query": delta(t), "limit": 10, "filters": {"year": 2026}}).to_string();
        for piece in args.as_bytes().chunks(8) {
            events.push(Event::ToolCallArgs(
                ToolCallArgsEvent::new(call.clone(), String::from_utf8_lossy(piece).into_owned())
                    .base(base()),
            ));
        }
        events.push(Event::ToolCallEnd(
            ToolCallEndEvent::new(call.clone()).base(base()),
        ));
        events.push(Event::ToolCallResult(
            ToolCallResultEvent::new(
                format!("tool-{t}"),
                call.clone(),
                json!({"hits": 3, "titles": ["a", "b", "c"]}).to_string(),
            )
            .base(base()),
        ));
        events.push(Event::StateSnapshot(
            StateSnapshotEvent::new(big_state(50_000, t)).base(base()),
        ));
        for d in 0..20 {
            events.push(Event::StateDelta(
                StateDeltaEvent::new(vec![
                    PatchOperation::replace(format!("/items/{d}/done"), json!(d % 2 == 0)),
                    PatchOperation::add(
                        "/items/-",
                        json!({"id": format!("new-{t}-{d}"), "done": false}),
                    ),
                ])
                .base(base()),
            ));
        }
        events.push(Event::StepFinished(
            StepFinishedEvent::new(format!("turn-{t}")).base(base()),
        ));
        history.push(Message::user(format!("user-{t}"), delta(t)));
        history.push(Message::assistant(msg, delta(t + 1)));
        if t % 5 == 4 {
            events.push(Event::MessagesSnapshot(
                MessagesSnapshotEvent::new(history.clone()).base(base()),
            ));
        }
    }
    events.push(run_finished());
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use agwire_core::pipeline::Pipeline;

    #[test]
    fn workloads_are_valid_streams() {
        for events in [text_stream(1000), mixed_run(6)] {
            let mut pipeline = Pipeline::new("bench-thread", Vec::new(), json!({}));
            for e in &events {
                pipeline.push_json(&e.to_json()).unwrap();
            }
            assert!(pipeline.take_warnings().is_empty());
            assert!(!pipeline.session().messages.is_empty());
        }
    }
}
