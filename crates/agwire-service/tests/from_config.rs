//! `Service::from_config`: the service an embedder gets from a
//! configuration alone (SQLite in a data dir, the scripted model), served
//! over TCP, takes a run and streams it to its end; a drain ends the
//! background tasks it started.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use agwire_client::core::Event;
use agwire_codec::sse::SseEventDecoder;
use agwire_service::{Config, Service};
use common::{body, post};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_from_config_serves_a_run_and_its_drain_ends_the_background_tasks() {
    let dir = common::data_dir("from-config");
    let config = Config {
        data_dir: dir.join("data"),
        grace_seconds: 5,
        ..Config::default()
    };
    let service = Service::from_config(&config).await.unwrap();
    // Without a bucket, the scheduler is the one background task.
    assert_eq!(service.background_tasks(), 1);
    assert!(config.data_dir.join("agwire.db").is_file());
    assert!(config.data_dir.join("url-signing.key").is_file());

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn({
        let service = service.clone();
        async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            service
                .serve(listener, service.router(), service.drain_after(shutdown))
                .await
        }
    });

    let thread = uuid::Uuid::new_v4().to_string();
    let mut response = post(
        addr,
        &body(&thread, "from-config-1", "hello"),
        Some("text/event-stream"),
    )
    .await;
    assert_eq!(response.status().as_u16(), 200);
    let mut decoder = SseEventDecoder::new();
    let mut streamed = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !streamed
        .iter()
        .any(|e: &Event| e.type_name() == "RUN_FINISHED")
    {
        let chunk = tokio::time::timeout_at(deadline, response.chunk())
            .await
            .expect("RUN_FINISHED within 60 s")
            .unwrap()
            .unwrap_or_else(|| panic!("the stream ended without RUN_FINISHED: {streamed:?}"));
        decoder.push(&chunk, &mut streamed).unwrap();
    }
    assert_eq!(streamed.first().map(Event::type_name), Some("RUN_STARTED"));
    assert!(
        streamed
            .iter()
            .any(|e| e.type_name() == "TEXT_MESSAGE_CONTENT"),
        "{streamed:?}"
    );

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(30), served)
        .await
        .expect("served and drained within 30 s")
        .unwrap()
        .unwrap();
    assert_eq!(service.background_tasks(), 0);
}
