//! OpenTelemetry, judged at a real OTLP/HTTP receiver (the test kit's,
//! decoding with the `opentelemetry-proto` messages): a run posted with a
//! W3C `traceparent` is one trace — the request, the run, its model calls
//! and its tool call, correctly parented, with their attributes — on one
//! process and across two replicas on PostgreSQL; the provider receives
//! the trace; a collector that is down costs no run and its drops are
//! counted; without an endpoint nothing is exported or stamped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use agwire_client::core::Event;
use agwire_testkit::otlp::{Receiver, Span, SpanKind, trace_tree};
use agwire_testkit::pg::PgDatabase;
use rand::Rng;
use serde_json::{Value, json};

use crate::common;
use common::{
    body, checked_log, data_dir, get, seeded_rng, serve, serve_logging_to, until, wait_final,
};

/// How long the spans of one run may take to reach the receiver (the
/// batch processor exports every 50 ms here).
const ARRIVAL: Duration = Duration::from_secs(60);

/// The environment of a traced `agwire serve`: the receiver, quick
/// exports, the fake provider.
fn traced_env(receiver: &Receiver, provider: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
        ("OTEL_SERVICE_NAME", "agwire-test".into()),
        ("OTEL_BSP_SCHEDULE_DELAY", "50".into()),
        ("OTEL_METRIC_EXPORT_INTERVAL", "200".into()),
        ("AGWIRE_LLM_BASE_URL", provider.into()),
        ("AGWIRE_LLM_API_KEY", "sk-local".into()),
        ("AGWIRE_LLM_MODEL", "fake-model".into()),
    ]
}

fn borrowed<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// A caller's trace: a random trace id and parent span id (seeded).
fn caller(rng: &mut impl Rng) -> (String, String) {
    let trace: [u8; 16] = rng.random();
    let parent: [u8; 8] = rng.random();
    (hex(&trace), hex(&parent))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn post_traced(
    client: &reqwest::Client,
    base: &str,
    body: &Value,
    trace: &str,
    parent: &str,
) -> u16 {
    client
        .post(format!("{base}/api/v1/agent/runs"))
        .header("traceparent", format!("00-{trace}-{parent}-01"))
        .json(body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

fn one<'a>(spans: &'a [Span], what: &str, pick: impl Fn(&Span) -> bool) -> &'a Span {
    let found: Vec<&Span> = spans.iter().filter(|s| pick(s)).collect();
    assert_eq!(found.len(), 1, "one {what} expected, found {}", found.len());
    found[0]
}

/// The spans of `trace` once the run's span, its model and tool calls and
/// its request have all arrived.
async fn whole_run(receiver: &Receiver, trace: &str, chats: usize) -> Vec<Span> {
    let spans = receiver
        .wait_spans(ARRIVAL, "the run's whole trace", |spans| {
            let of = |name: &str| {
                spans
                    .iter()
                    .filter(|s| s.trace_id == trace && s.name.starts_with(name))
                    .count()
            };
            of("ag_ui.run") >= 1
                && of("chat ") >= chats
                && of("execute_tool ") >= 1
                && of("POST /api/v1/agent/runs") >= 1
        })
        .await;
    spans.into_iter().filter(|s| s.trace_id == trace).collect()
}

/// Every span received once a log reader's span of `trace` has arrived,
/// and that span.
async fn reader_span(receiver: &Receiver, trace: &str) -> (Vec<Span>, Span) {
    let is_reader = |s: &Span| s.trace_id == trace && s.name == "ag_ui.run.stream";
    let spans = receiver
        .wait_spans(ARRIVAL, "a log reader's span", |spans| {
            spans.iter().any(is_reader)
        })
        .await;
    let stream = spans.iter().find(|s| is_reader(s)).unwrap().clone();
    (spans, stream)
}

/// The run's spans as one tree, checked: request (child of the caller) →
/// run → model calls and the tool call; returns the run span.
fn check_run_tree(spans: &[Span], parent: &str, run_id: &str, events: usize) -> Span {
    let tree = trace_tree(spans, &spans[0].trace_id);
    eprintln!("{tree}");
    let post = one(spans, "POST request span", |s| {
        s.name == "POST /api/v1/agent/runs"
    });
    assert_eq!(post.kind, SpanKind::Server, "{tree}");
    assert_eq!(post.parent_span_id.as_deref(), Some(parent), "{tree}");
    assert_eq!(post.attr_str("http.request.method"), Some("POST"));
    assert_eq!(post.attr_str("http.route"), Some("/api/v1/agent/runs"));
    assert_eq!(
        post.attr_i64("http.response.status_code"),
        Some(202),
        "{:?}",
        post.attr("http.response.status_code")
    );
    let run = one(spans, "run span", |s| s.name == "ag_ui.run");
    assert_eq!(
        run.parent_span_id.as_deref(),
        Some(post.span_id.as_str()),
        "{tree}"
    );
    assert_eq!(run.attr_str("ag_ui.run_id"), Some(run_id));
    assert_eq!(run.attr_str("ag_ui.run.outcome"), Some("succeeded"));
    assert_eq!(run.attr_i64("ag_ui.run.event_count"), Some(events as i64));
    assert_eq!(run.attr_str("gen_ai.operation.name"), Some("invoke_agent"));
    let user = run.attr_str("enduser.pseudo.id").unwrap();
    assert!(
        user.len() == 64 && user.bytes().all(|b| b.is_ascii_hexdigit()),
        "{user}"
    );
    assert!(run.attr("enduser.id").is_none());
    let chats: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "chat fake-model")
        .collect();
    assert_eq!(chats.len(), 3, "router, worker (tool call), worker\n{tree}");
    let mut stages: Vec<&str> = chats
        .iter()
        .map(|s| s.attr_str("agwire.llm.stage").unwrap())
        .collect();
    stages.sort_unstable();
    assert_eq!(stages, ["router", "worker", "worker"]);
    for chat in &chats {
        assert_eq!(
            chat.parent_span_id.as_deref(),
            Some(run.span_id.as_str()),
            "{tree}"
        );
        assert_eq!(chat.kind, SpanKind::Client);
        assert_eq!(chat.attr_str("gen_ai.operation.name"), Some("chat"));
        assert_eq!(chat.attr_str("gen_ai.provider.name"), Some("openai"));
        assert_eq!(chat.attr_str("gen_ai.request.model"), Some("fake-model"));
        assert_eq!(chat.attr_str("server.address"), Some("127.0.0.1"));
        assert_eq!(chat.attr_i64("gen_ai.usage.input_tokens"), Some(20));
        assert_eq!(chat.attr_i64("gen_ai.usage.output_tokens"), Some(8));
        let first = chat.attr("gen_ai.response.time_to_first_chunk").unwrap();
        assert!(first.as_f64().unwrap() > 0.0, "{first}");
        assert!(chat.attr("gen_ai.response.finish_reasons").is_some());
    }
    let tool = one(spans, "tool span", |s| {
        s.name == "execute_tool get_current_time"
    });
    assert_eq!(
        tool.parent_span_id.as_deref(),
        Some(run.span_id.as_str()),
        "{tree}"
    );
    assert_eq!(tool.attr_str("gen_ai.tool.name"), Some("get_current_time"));
    assert_eq!(tool.attr_str("gen_ai.operation.name"), Some("execute_tool"));
    // The tool ran between the call that asked for it and the one that
    // answered with it.
    let asked = chats
        .iter()
        .filter(|c| c.attr_str("agwire.llm.stage") == Some("worker"))
        .map(|c| c.end_unix_nano)
        .min()
        .unwrap();
    assert!(tool.start_unix_nano >= asked, "{tree}");
    run.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_posted_with_a_traceparent_is_one_trace_at_the_collector() {
    let receiver = Receiver::start().await;
    let (provider, seen) = common::fake_provider(None).await;
    let dir = data_dir("telemetry");
    let config = dir.join("agwire.toml");
    std::fs::write(
        &config,
        "[telemetry]\ncapture_content = true\nslow_store_write_ms = 0\n",
    )
    .unwrap();
    let log = dir.join("stderr.log");
    let mut env = traced_env(&receiver, &provider);
    env.push(("RUST_LOG", "info".into()));
    let server = serve_logging_to(
        &dir,
        &["--config", config.to_str().unwrap()],
        &borrowed(&env),
        Stdio::from(std::fs::File::create(&log).unwrap()),
    );
    let base = &server.base;
    let client = reqwest::Client::new();
    let mut rng = seeded_rng("a_run_posted_with_a_traceparent_is_one_trace_at_the_collector");
    let (trace, parent) = caller(&mut rng);
    let thread = uuid::Uuid::new_v4().to_string();
    let request = body(&thread, "traced-1", "what time is it?");
    assert_eq!(
        post_traced(&client, base, &request, &trace, &parent).await,
        202
    );
    let status = wait_final(&client, base, "traced-1").await;
    assert_eq!(status["status"], "succeeded", "{status}");
    let events = checked_log(&client, base, &thread, "traced-1").await;

    // RUN_STARTED names the trace.
    let Some(Event::RunStarted(started)) = events.first() else {
        panic!("{events:?}");
    };
    let metadata = started.base.metadata.as_deref().unwrap();
    assert_eq!(metadata["trace_id"], trace.as_str());
    let spans = whole_run(&receiver, &trace, 3).await;
    let run = check_run_tree(&spans, &parent, "traced-1", events.len());
    assert!(
        metadata["traceparent"]
            .as_str()
            .unwrap()
            .starts_with(&format!("00-{trace}-{}-", run.span_id))
    );
    assert_eq!(
        run.resource.get("service.name").and_then(Value::as_str),
        Some("agwire-test")
    );
    assert!(run.resource.contains_key("service.instance.id"));

    // Captured content: the prompt and the answer on each model call, the
    // tool's arguments and answer on its span.
    let chat = spans
        .iter()
        .find(|s| s.attr_str("agwire.llm.stage") == Some("router"))
        .unwrap();
    let details = chat
        .events
        .iter()
        .find(|e| e.name == "gen_ai.client.inference.operation.details")
        .unwrap();
    let input = details.attributes["gen_ai.input.messages"]
        .as_str()
        .unwrap();
    assert!(input.contains("what time is it?"), "{input}");
    let output = details.attributes["gen_ai.output.messages"]
        .as_str()
        .unwrap();
    assert!(output.contains("calendar"), "{output}");
    let tool = spans
        .iter()
        .find(|s| s.name == "execute_tool get_current_time")
        .unwrap();
    assert_eq!(tool.attr_str("gen_ai.tool.call.arguments"), Some("{}"));
    assert!(tool.attr_str("gen_ai.tool.call.result").is_some());

    // Store writes at or over the threshold (0 here): the accept under the
    // request, the appends and the end under the run.
    let post = spans
        .iter()
        .find(|s| s.name == "POST /api/v1/agent/runs")
        .unwrap();
    let accept = one(&spans, "accept write", |s| s.name == "accept_run sqlite");
    assert_eq!(
        accept.parent_span_id.as_deref(),
        Some(post.span_id.as_str())
    );
    assert_eq!(accept.attr_str("db.system.name"), Some("sqlite"));
    let end = one(&spans, "end write", |s| s.name == "end_run sqlite");
    assert_eq!(end.parent_span_id.as_deref(), Some(run.span_id.as_str()));

    // The provider was told the trace: each request's traceparent names
    // one of the model call spans.
    let chats: Vec<&str> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .map(|s| s.span_id.as_str())
        .collect();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    for (_, traceparent) in &seen {
        let traceparent = traceparent.as_deref().expect("traceparent sent");
        let parts: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(parts[1], trace, "{traceparent}");
        assert!(chats.contains(&parts[2]), "{traceparent} not a chat span");
    }

    // Reading the log continued the run's trace, linked to that request.
    let (spans, stream) = reader_span(&receiver, &trace).await;
    assert_eq!(
        stream.parent_span_id.as_deref(),
        Some(post.span_id.as_str())
    );
    let reader = spans
        .iter()
        .find(|s| s.span_id == stream.links[0].span_id)
        .expect("the link names the reader's request span");
    assert_eq!(reader.name, "GET /api/v1/agent/runs/{runId}/events");

    // The same counters as /metrics, and the GenAI histograms, over OTLP.
    let metrics = receiver
        .wait_metrics(ARRIVAL, "the run's metrics", |points| {
            let has = |name: &str| points.iter().any(|p| p.name == name);
            has("agwire.runs.accepted")
                && has("gen_ai.client.operation.duration")
                && has("agwire.event.append.duration")
                && points.iter().any(|p| {
                    p.name == "gen_ai.client.token.usage"
                        && p.attributes.get("gen_ai.token.type") == Some(&json!("input"))
                        && p.count == 3
                })
        })
        .await;
    let accepted = metrics
        .iter()
        .rev()
        .find(|p| p.name == "agwire.runs.accepted")
        .unwrap();
    assert_eq!(accepted.value, 1.0);
    let input_tokens = metrics
        .iter()
        .rev()
        .find(|p| {
            p.name == "gen_ai.client.token.usage"
                && p.attributes.get("gen_ai.token.type") == Some(&json!("input"))
                && p.count == 3
        })
        .unwrap();
    assert_eq!(input_tokens.value, 60.0, "three calls of 20 input tokens");

    // The run's log lines name its trace.
    drop(server);
    let logged = std::fs::read_to_string(&log).unwrap();
    let ended = logged
        .lines()
        .find(|l| l.contains("run ended"))
        .unwrap_or_else(|| panic!("no run line in\n{logged}"));
    assert!(ended.contains(&format!("trace_id={trace}")), "{ended}");
    assert!(
        !logged.contains("ag_ui.run{"),
        "export-only spans in the logs:\n{logged}"
    );
}

/// Replica A accepts the run; its only place is taken, so replica B
/// executes it, and a reader on B streams it: one trace, the run under
/// A's request, executed by B's process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_postgresql_continue_one_trace() {
    let Some(database) = PgDatabase::create().await else {
        return;
    };
    let receiver = Receiver::start().await;
    let hold = Arc::new(common::Hold::default());
    let (provider, _seen) = common::fake_provider(Some(hold.clone())).await;
    let dir = data_dir("telemetry-replicas");
    let one_place = dir.join("one-place.toml");
    std::fs::write(
        &one_place,
        "[runs]\nmax_concurrent = 1\n[telemetry]\nslow_store_write_ms = 0\n",
    )
    .unwrap();
    let every_write = dir.join("every-write.toml");
    std::fs::write(&every_write, "[telemetry]\nslow_store_write_ms = 0\n").unwrap();
    let mut env = traced_env(&receiver, &provider);
    env.push(("AGWIRE_DATABASE_URL", database.url.clone()));
    let a = serve(
        &data_dir("replica-a"),
        &["--config", one_place.to_str().unwrap()],
        &borrowed(&env),
    );
    let b = serve(
        &data_dir("replica-b"),
        &["--config", every_write.to_str().unwrap()],
        &borrowed(&env),
    );
    let client = reqwest::Client::new();
    let mut rng = seeded_rng("two_replicas_on_postgresql_continue_one_trace");

    // A's one place: a run held at its router call.
    let held = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        common::post(&client, &a.base, &body(&held, "held-1", "hold")).await,
        202
    );
    tokio::time::timeout(Duration::from_secs(60), hold.arrived.notified())
        .await
        .expect("the held run's router call reached the provider within 60 s");

    let (trace, parent) = caller(&mut rng);
    let thread = uuid::Uuid::new_v4().to_string();
    let request = body(&thread, "across-1", "what time is it?");
    assert_eq!(
        post_traced(&client, &a.base, &request, &trace, &parent).await,
        202
    );
    let status = wait_final(&client, &b.base, "across-1").await;
    assert_eq!(status["status"], "succeeded", "{status}");
    let events = checked_log(&client, &b.base, &thread, "across-1").await;
    hold.release.notify_one();

    let spans = whole_run(&receiver, &trace, 3).await;
    let run = check_run_tree(&spans, &parent, "across-1", events.len());
    let post = spans
        .iter()
        .find(|s| s.name == "POST /api/v1/agent/runs")
        .unwrap();
    let instance = |s: &Span| s.resource["service.instance.id"].clone();
    assert_ne!(
        instance(&run),
        instance(post),
        "the run was executed by the replica that accepted it, not the other"
    );
    assert_eq!(
        run.attr_str("enduser.pseudo.id").map(str::len),
        Some(64),
        "{run:?}"
    );
    for chat in spans.iter().filter(|s| s.name.starts_with("chat ")) {
        assert_eq!(instance(chat), instance(&run));
    }
    let end = one(&spans, "end write", |s| s.name == "end_run postgresql");
    assert_eq!(end.parent_span_id.as_deref(), Some(run.span_id.as_str()));
    // B's reader of the log: in the run's trace.
    let (_, stream) = reader_span(&receiver, &trace).await;
    assert_eq!(instance(&stream), instance(&run));
    assert_eq!(
        stream.parent_span_id.as_deref(),
        Some(post.span_id.as_str())
    );
    let held = wait_final(&client, &a.base, "held-1").await;
    assert_eq!(held["status"], "succeeded", "{held}");

    // A job's tick starts its run's trace: the run is the tick's child.
    let job: Value = client
        .post(format!("{}/api/v1/automation/jobs", b.base))
        .json(&json!({
            "name": "tick", "schedule": {"every_seconds": 3600},
            "timezone": "UTC", "prompt": "what time is it?"
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let job_id = job["id"].as_str().unwrap().to_owned();
    let pool = sqlx::PgPool::connect(&database.url).await.unwrap();
    sqlx::query(
        "UPDATE automation_jobs SET next_run_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT WHERE id = $1",
    )
    .bind(&job_id)
    .execute(&pool)
    .await
    .unwrap();
    let spans = receiver
        .wait_spans(ARRIVAL, "the job tick's run", |spans| {
            spans
                .iter()
                .filter(|t| {
                    t.name == "agwire.job.tick" && t.attr_str("agwire.job.id") == Some(&job_id)
                })
                .any(|tick| {
                    spans.iter().any(|s| {
                        s.name == "ag_ui.run"
                            && s.parent_span_id.as_deref() == Some(tick.span_id.as_str())
                            && s.trace_id == tick.trace_id
                            && s.attr_str("ag_ui.run.outcome") == Some("succeeded")
                    })
                })
        })
        .await;
    // Both replicas may find the tick due before either moves the job on:
    // each then accepts it, and the second accept replays the first (one
    // run). So one tick is one or two spans — the same tick (due time, run
    // id), each a root — and exactly one of them is the run's parent.
    let ticks: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "agwire.job.tick" && s.attr_str("agwire.job.id") == Some(&job_id))
        .collect();
    assert!((1..=2).contains(&ticks.len()), "{} tick spans", ticks.len());
    for tick in &ticks {
        assert!(tick.parent_span_id.is_none(), "a tick starts its trace");
        assert_eq!(
            tick.attr_i64("agwire.job.due_ms"),
            ticks[0].attr_i64("agwire.job.due_ms"),
            "one tick"
        );
        assert_eq!(
            tick.attr_str("ag_ui.run_id"),
            ticks[0].attr_str("ag_ui.run_id"),
            "one run"
        );
    }
    let parents = ticks
        .iter()
        .filter(|tick| {
            spans.iter().any(|s| {
                s.name == "ag_ui.run" && s.parent_span_id.as_deref() == Some(tick.span_id.as_str())
            })
        })
        .count();
    assert_eq!(parents, 1, "the run is the child of one tick span");
}

/// A collector nobody listens on: runs succeed as ever, and the spans the
/// service could not deliver are counted on /metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_costs_no_run_and_its_drops_are_counted() {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let (provider, _seen) = common::fake_provider(None).await;
    let endpoint = format!("http://{closed}");
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "1000"),
        ("AGWIRE_LLM_BASE_URL", provider.as_str()),
        ("AGWIRE_LLM_MODEL", "fake-model"),
    ];
    let server = serve(&data_dir("telemetry-down"), &[], &env);
    let base = &server.base;
    let client = reqwest::Client::new();
    for i in 0..3 {
        let thread = uuid::Uuid::new_v4().to_string();
        let run = format!("down-{i}");
        assert_eq!(
            common::post(&client, base, &body(&thread, &run, "what time is it?")).await,
            202
        );
        let status = wait_final(&client, base, &run).await;
        assert_eq!(status["status"], "succeeded", "{status}");
    }
    let dropped = |text: &str, reason: &str| -> u64 {
        let key = format!("agwire_otel_spans_dropped_total{{reason=\"{reason}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&key))
            .unwrap_or_else(|| panic!("no {key} in\n{text}"))
            .parse()
            .unwrap()
    };
    let metrics = || async {
        client
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    // Each run's request, run, three model and one tool span at least.
    until("18 spans counted as export_failed", ARRIVAL, || async {
        dropped(&metrics().await, "export_failed") >= 18
    })
    .await;
    let text = metrics().await;
    assert!(
        text.contains("agwire_otel_spans_exported_total 0\n"),
        "{text}"
    );
    assert_eq!(dropped(&text, "queue_full"), 0);
    let health = get(&client, base, "/healthz").await;
    assert_eq!(health["status"], "ok");
}

/// Without an endpoint: no trace on RUN_STARTED, no `traceparent` to the
/// provider, no span counters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_nothing_is_exported_or_stamped() {
    let (provider, seen) = common::fake_provider(None).await;
    let env = [
        ("AGWIRE_LLM_BASE_URL", provider.as_str()),
        ("AGWIRE_LLM_MODEL", "fake-model"),
    ];
    let server = serve(&data_dir("telemetry-off"), &[], &env);
    let base = &server.base;
    let client = reqwest::Client::new();
    let thread = uuid::Uuid::new_v4().to_string();
    let mut rng = seeded_rng("without_an_endpoint_nothing_is_exported_or_stamped");
    let (trace, parent) = caller(&mut rng);
    assert_eq!(
        post_traced(
            &client,
            base,
            &body(&thread, "off-1", "what time is it?"),
            &trace,
            &parent
        )
        .await,
        202
    );
    wait_final(&client, base, "off-1").await;
    let events = checked_log(&client, base, &thread, "off-1").await;
    let Some(Event::RunStarted(started)) = events.first() else {
        panic!("{events:?}");
    };
    assert!(started.base.metadata.is_none(), "{started:?}");
    assert!(seen.lock().unwrap().iter().all(|(_, t)| t.is_none()));
    let text = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!text.contains("agwire_otel"), "{text}");
}

/// A caller whose trace is not sampled (`traceparent` flags `00`): the run
/// is not exported — no span of its trace reaches the collector, though a
/// sampled run after it does — yet the provider still hears the trace
/// (flags `00`, so it does not sample either), and RUN_STARTED names none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_the_caller_did_not_sample_is_not_exported_but_still_propagated() {
    let receiver = Receiver::start().await;
    let (provider, seen) = common::fake_provider(None).await;
    let env = traced_env(&receiver, &provider);
    let server = serve(&data_dir("telemetry-unsampled"), &[], &borrowed(&env));
    let base = &server.base;
    let client = reqwest::Client::new();
    let mut rng =
        seeded_rng("a_trace_the_caller_did_not_sample_is_not_exported_but_still_propagated");
    let (unsampled, parent) = caller(&mut rng);
    let thread = uuid::Uuid::new_v4().to_string();
    let status = client
        .post(format!("{base}/api/v1/agent/runs"))
        .header("traceparent", format!("00-{unsampled}-{parent}-00"))
        .json(&body(&thread, "unsampled-1", "what time is it?"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 202);
    assert_eq!(
        wait_final(&client, base, "unsampled-1").await["status"],
        "succeeded"
    );
    let events = checked_log(&client, base, &thread, "unsampled-1").await;
    let Some(Event::RunStarted(started)) = events.first() else {
        panic!("{events:?}");
    };
    assert!(started.base.metadata.is_none(), "{started:?}");
    let told: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, t)| t.clone().expect("traceparent sent"))
        .collect();
    assert_eq!(told.len(), 3);
    for traceparent in &told {
        assert!(
            traceparent.starts_with(&format!("00-{unsampled}-")) && traceparent.ends_with("-00"),
            "{traceparent}"
        );
    }

    // A sampled run after it: once its trace has arrived, the unsampled
    // one's spans (ended earlier) would have too.
    let (sampled, parent) = caller(&mut rng);
    let thread = uuid::Uuid::new_v4().to_string();
    assert_eq!(
        post_traced(
            &client,
            base,
            &body(&thread, "sampled-1", "what time is it?"),
            &sampled,
            &parent
        )
        .await,
        202
    );
    wait_final(&client, base, "sampled-1").await;
    let spans = whole_run(&receiver, &sampled, 3).await;
    assert!(!spans.is_empty());
    let leaked: Vec<String> = receiver
        .spans()
        .iter()
        .filter(|s| s.trace_id == unsampled)
        .map(|s| s.name.clone())
        .collect();
    assert!(
        leaked.is_empty(),
        "spans of an unsampled trace exported: {leaked:?}"
    );
}
