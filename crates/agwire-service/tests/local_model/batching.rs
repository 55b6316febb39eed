//! Continuous batching on the test model: calls share forward passes, a
//! cancelled call's cells are freed while others go on, a short call is not
//! stuck behind long ones, the queue has a limit a run hears about, and a
//! prefix computed for one sequence serves another.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agwire_client::core::Event;
use agwire_llm::local::{LocalConfig, LocalModel, SequenceState};
use agwire_llm::{ChatEvent, ChatMessage, ChatModel, ChatRequest, ChatStream, Usage, collect};
use agwire_service::brain::llm::LlmBrain;
use futures_util::StreamExt;

use super::{TURN, finished, model_path, verified};
use crate::common::{body, events, post, start_brain};

fn load(parallel: usize, queue: usize) -> Option<Arc<LocalModel>> {
    let path = model_path()?;
    let mut config = LocalConfig::new(path);
    config.parallel = parallel;
    config.threads = 2;
    config.queue = queue;
    Some(Arc::new(LocalModel::load(config).unwrap()))
}

/// An answer that cannot end before `max_tokens`: the schema asks for more
/// numbers than fit.
fn counting(from: u32, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::user(format!("Count from {from} upwards."))],
        response_schema: Some(serde_json::json!({
            "type": "array", "items": {"type": "integer"}, "minItems": 1000
        })),
        max_tokens: Some(max_tokens),
        temperature: Some(0.0),
        ..ChatRequest::default()
    }
}

/// Reads a stream to its end: when each text piece came, and the usage.
async fn timed(mut stream: ChatStream) -> (Vec<Instant>, Usage) {
    let mut times = Vec::new();
    let mut usage = None;
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            ChatEvent::TextDelta(_) => times.push(Instant::now()),
            ChatEvent::Usage(u) => usage = Some(u),
            _ => {}
        }
    }
    (times, usage.expect("a finished call reports its usage"))
}

/// Waits until the engine's sequences satisfy `done`; fails after 60 s.
async fn until(what: &str, model: &LocalModel, done: impl Fn(&[SequenceState]) -> bool) {
    let mut sequences = model.watch_sequences();
    // The borrow `wait_for` returns is dropped at once: it holds the
    // engine's next publication.
    let reached = tokio::time::timeout(Duration::from_secs(60), sequences.wait_for(|s| done(s)))
        .await
        .is_ok_and(|seen| seen.is_ok());
    assert!(
        reached,
        "{what}: not within 60 s; sequences {:?}, stats {:?}",
        model.sequences(),
        model.stats()
    );
}

fn busy(sequences: &[SequenceState]) -> usize {
    sequences.iter().filter(|s| s.busy).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_calls_share_forward_passes_and_their_tokens_interleave() {
    let Some(model) = load(2, 8) else { return };
    let _turn = TURN.lock().await;
    let (a, b) = (
        model.stream(counting(1, 80)).await.unwrap(),
        model.stream(counting(500, 80)).await.unwrap(),
    );
    let (a, b) = tokio::join!(tokio::spawn(timed(a)), tokio::spawn(timed(b)));
    let ((a, a_usage), (b, b_usage)) = (a.unwrap(), b.unwrap());
    assert_eq!(
        (a_usage.completion_tokens, b_usage.completion_tokens),
        (80, 80)
    );
    // Each one's pieces came while the other's were still coming.
    let inside = |x: &[Instant], y: &[Instant]| {
        let (first, last) = (y[0], y[y.len() - 1]);
        x.iter().filter(|t| **t > first && **t < last).count()
    };
    assert!(inside(&a, &b) > 10 && inside(&b, &a) > 10, "{a:?} {b:?}");
    // And not by taking turns: one forward pass advanced both.
    assert_eq!(model.stats().most_at_once, 2, "{:?}", model.stats());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_frees_its_cells_while_another_goes_on() {
    let Some(model) = load(2, 8) else { return };
    let _turn = TURN.lock().await;
    let other = tokio::spawn(timed(model.stream(counting(500, 400)).await.unwrap()));
    let mut cancelled = model.stream(counting(1, 3000)).await.unwrap();
    let mut pieces = 0;
    while pieces < 5 {
        match cancelled.next().await {
            Some(Ok(ChatEvent::TextDelta(_))) => pieces += 1,
            Some(Ok(_)) => {}
            other => panic!("the call ended early: {other:?}"),
        }
    }
    until("both running", &model, |s| busy(s) == 2).await;
    drop(cancelled);
    // One call runs; no idle sequence holds a cell (the cancelled one's are
    // gone, not kept as a cache).
    until("the cancelled call's cells freed", &model, |s| {
        busy(s) == 1 && s.iter().all(|s| s.busy || s.cells == 0)
    })
    .await;
    assert!(
        !other.is_finished(),
        "the other call ended too soon to tell"
    );
    let (_, usage) = other.await.unwrap();
    assert_eq!(
        usage.completion_tokens, 400,
        "the other call went on to its end"
    );
    let stats = model.stats();
    assert_eq!((stats.calls, stats.cancelled), (2, 1), "{stats:?}");
    // A finished call's cells stay, for the next call that starts the same.
    until("the finished call's cache kept", &model, |s| {
        busy(s) == 0 && s.iter().any(|s| s.cells > 0)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_call_is_not_stuck_behind_long_ones() {
    let Some(model) = load(1, 8) else { return };
    let _turn = TURN.lock().await;
    // The one sequence generates a long answer, read as it comes.
    let long = tokio::spawn(timed(model.stream(counting(1, 3000)).await.unwrap()));
    until("the long call running", &model, |s| busy(s) == 1).await;
    // Another long one waits for it, in order.
    let waiting = model.stream(counting(7, 3000)).await.unwrap();
    // A router-sized call (a few tokens under a schema) runs beside it.
    let route = ChatRequest {
        messages: vec![ChatMessage::user("Which agent: chat or calendar?")],
        response_schema: Some(serde_json::json!({
            "type": "object",
            "properties": {"agent": {"enum": ["chat", "calendar"]}},
            "required": ["agent"], "additionalProperties": false
        })),
        max_tokens: Some(20),
        temperature: Some(0.0),
        ..ChatRequest::default()
    };
    let answer = tokio::time::timeout(Duration::from_secs(60), async {
        collect(model.stream(route).await.unwrap()).await
    })
    .await
    .expect("the short call waited behind the long ones")
    .unwrap();
    let value: serde_json::Value = serde_json::from_str(&answer.text).unwrap();
    assert!(
        value["agent"] == "chat" || value["agent"] == "calendar",
        "{value}"
    );
    assert!(
        !long.is_finished(),
        "the short call waited for the long one"
    );
    // The second long call is still waiting its turn: only the first long
    // call and the short one have started.
    assert_eq!(model.stats().calls, 2, "{:?}", model.stats());
    long.abort();
    drop(waiting);
    until("all calls gone", &model, |s| busy(s) == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_queue_limit_a_run_fails_with_model_busy() {
    let Some(model) = load(1, 1) else { return };
    let _turn = TURN.lock().await;
    let running = tokio::spawn(timed(model.stream(counting(1, 3000)).await.unwrap()));
    until("the long call running", &model, |s| busy(s) == 1).await;
    // The queue's one place taken.
    let waiting = model.stream(counting(7, 3000)).await.unwrap();
    let brain: Arc<dyn ChatModel> = model.clone();
    let server = start_brain(Arc::new(LlmBrain::new(brain.clone(), brain))).await;
    let thread = uuid::Uuid::new_v4().to_string();
    let input = body(&thread, "busy-1", "Hello there!");
    assert!(post(server.addr, &input, None).await.status().is_success());
    let log = events(server.addr, "busy-1", None).await;
    // A valid run that ends in a clear error, at once (not after the
    // running call).
    verified(&log, &input);
    assert!(!finished(&log), "{log:?}");
    let Some((_, Event::RunError(error))) = log.last() else {
        panic!("{log:?}")
    };
    assert_eq!(error.code.as_deref(), Some("model_busy"), "{error:?}");
    assert!(error.message.contains("busy"), "{error:?}");
    assert!(!running.is_finished());
    // The router's call and the worker's were refused, nothing queued.
    assert_eq!(model.stats().refused, 2, "{:?}", model.stats());
    running.abort();
    drop(waiting);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefix_computed_once_serves_every_sequence() {
    let Some(model) = load(2, 8) else { return };
    let _turn = TURN.lock().await;
    let system: String = (0..12)
        .map(|i| format!("Rule {i}: answer politely, briefly and in plain words. "))
        .collect();
    let chat = |user: &str| ChatRequest {
        messages: vec![ChatMessage::system(system.clone()), ChatMessage::user(user)],
        max_tokens: Some(100),
        temperature: Some(0.0),
        ..ChatRequest::default()
    };
    let first = collect(model.stream(chat("Hello.")).await.unwrap())
        .await
        .unwrap();
    let prompt = first.usage.unwrap().prompt_tokens;
    assert!(prompt > 150, "{prompt}");
    // Two at once: one finds the prefix in its own sequence, the other in
    // the first's (its cells shared, not computed again).
    let (b, c) = tokio::join!(
        async { collect(model.stream(chat("What is two plus two?")).await.unwrap()).await },
        async { collect(model.stream(chat("Name a colour.")).await.unwrap()).await },
    );
    for answer in [b.unwrap(), c.unwrap()] {
        let usage = answer.usage.unwrap();
        assert!(
            usage.cached_tokens.unwrap_or(0) >= prompt - 20,
            "{usage:?} (the first call's prompt: {prompt} tokens)"
        );
    }
}
