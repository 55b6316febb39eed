//! The floor of `agwire serve`'s write path: the rows a run writes — accept
//! (thread, user message, run), claim, its events, its end (status,
//! assistant message, terminal event) — written straight to SQLite in the
//! service's own schema and pragmas (WAL, `synchronous = NORMAL`), many runs
//! per transaction, no service around it. The service is compared with this.
//!
//! Usage: `store_floor [runs (default 20000)] [runs per transaction (default 256)]
//! [token events per run (default 20)] [writes per run (default 2)]`. With 8
//! tokens a run writes what the service's scripted model writes
//! (`RUN_STARTED`, 10 more events, its end). Its log is stored as the
//! service stores it, one row per write: the events split into that many
//! rows, the terminal event with the last.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use agwire_core::{
    BaseEvent, Event, RunFinishedEvent, RunStartedEvent, TextMessageContentEvent,
    TextMessageEndEvent, TextMessageStartEvent,
};
use agwire_service::store::SqliteStore;
use rusqlite::params;

/// Token events per run by default.
const TOKENS: usize = 20;

fn events(thread: &str, run: &str, tokens: usize) -> Vec<String> {
    let base = BaseEvent::default;
    let mut events = vec![Event::RunStarted(
        RunStartedEvent::new(thread, run).base(base()),
    )];
    events.push(Event::TextMessageStart({
        let mut event = TextMessageStartEvent::new("m").base(base());
        event.role = Default::default();
        event
    }));
    for i in 0..tokens {
        events.push(Event::TextMessageContent(
            TextMessageContentEvent::new("m", format!("word{i} ")).base(base()),
        ));
    }
    events.push(Event::TextMessageEnd(
        TextMessageEndEvent::new("m").base(base()),
    ));
    events.iter().map(Event::to_json).collect()
}

fn terminal(thread: &str, run: &str) -> String {
    Event::RunFinished(RunFinishedEvent::new(thread, run)).to_json()
}

fn accept(tx: &rusqlite::Transaction<'_>, i: usize, now: i64) -> (String, String, String) {
    let thread = uuid::Uuid::new_v4().to_string();
    let run = format!("run-{i}");
    let task = uuid::Uuid::now_v7().to_string();
    tx.prepare_cached("INSERT INTO threads (id, user_id, created_at, last_active_at) VALUES (?1, 'local', ?2, ?2)")
        .unwrap()
        .execute(params![thread, now])
        .unwrap();
    let body = format!(r#"{{"id":"{run}-u","role":"user","content":"hello number {i}"}}"#);
    tx.prepare_cached("INSERT INTO messages (thread_id, seq, id, run_id, role, body, created_at) VALUES (?1, 1, ?2, ?3, 'user', ?4, ?5)")
        .unwrap()
        .execute(params![thread, format!("{run}-u"), run, body, now])
        .unwrap();
    let input = format!(
        r#"{{"threadId":"{thread}","runId":"{run}","state":{{}},"messages":[{body}],"tools":[],"context":[],"forwardedProps":{{"runtime_mode":"chat"}}}}"#
    );
    tx.prepare_cached("INSERT INTO runs (task_id, user_id, thread_id, run_id, request_hash, created_thread, status, input, created_at, runtime_mode) VALUES (?1, 'local', ?2, ?3, ?4, 1, 'queued', ?5, ?6, 'chat')")
        .unwrap()
        .execute(params![task, thread, run, input, input, now])
        .unwrap();
    (task, thread, run)
}

fn rest_of_run(
    tx: &rusqlite::Transaction<'_>,
    (task, thread, run): &(String, String, String),
    now: i64,
    tokens: usize,
    writes: usize,
) {
    tx.prepare_cached("UPDATE runs SET status = 'running', started_at = ?1 WHERE task_id = ?2")
        .unwrap()
        .execute(params![now, task])
        .unwrap();
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO run_events (task_id, seq, n_events, events) VALUES (?1, ?2, ?3, ?4)",
        )
        .unwrap();
    let events = events(thread, run, tokens);
    let per_write = events.len().div_ceil(writes.max(1));
    let mut chunks: Vec<Vec<String>> = events.chunks(per_write).map(<[String]>::to_vec).collect();
    chunks.last_mut().unwrap().push(terminal(thread, run));
    let mut seq = 1i64;
    for chunk in chunks {
        let n = chunk.len() as i64;
        insert
            .execute(params![task, seq, n, chunk.join("\n")])
            .unwrap();
        seq += n;
    }
    tx.prepare_cached("UPDATE runs SET status = 'succeeded', finished_at = ?1 WHERE task_id = ?2")
        .unwrap()
        .execute(params![now, task])
        .unwrap();
    let answer = r#"{"id":"m","role":"assistant","content":"word0 word1 word2"}"#;
    tx.prepare_cached("INSERT INTO messages (thread_id, seq, id, run_id, role, body, created_at) VALUES (?1, 2, 'm', ?2, 'assistant', ?3, ?4)")
        .unwrap()
        .execute(params![thread, run, answer, now])
        .unwrap();
}

fn database() -> (std::path::PathBuf, rusqlite::Connection) {
    let dir = std::env::temp_dir().join(format!("agwire-floor-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("agwire.db");
    // The service's schema, by the service's own migrations.
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(SqliteStore::open(&path))
        .unwrap();
    let connection = rusqlite::Connection::open(&path).unwrap();
    connection
        .execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;",
        )
        .unwrap();
    (dir, connection)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let batch: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(256);
    let tokens: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(TOKENS);
    let writes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let now = 1_795_000_000_000i64;

    let (dir, mut connection) = database();
    let started = Instant::now();
    for chunk in (0..runs).collect::<Vec<_>>().chunks(batch) {
        let tx = connection.transaction().unwrap();
        for &i in chunk {
            accept(&tx, i, now);
        }
        tx.commit().unwrap();
    }
    let accept_rate = runs as f64 / started.elapsed().as_secs_f64();
    drop(connection);
    std::fs::remove_dir_all(dir).ok();

    let (dir, mut connection) = database();
    let started = Instant::now();
    for chunk in (0..runs).collect::<Vec<_>>().chunks(batch) {
        let tx = connection.transaction().unwrap();
        for &i in chunk {
            let run = accept(&tx, i, now);
            rest_of_run(&tx, &run, now, tokens, writes);
        }
        tx.commit().unwrap();
    }
    let full_rate = runs as f64 / started.elapsed().as_secs_f64();
    drop(connection);
    std::fs::remove_dir_all(dir).ok();

    println!(
        "store floor (SQLite WAL synchronous=NORMAL, {runs} runs, {batch} per transaction, {} events per run in {writes} rows)",
        tokens + 4
    );
    println!("  accepts/s (thread + message + run):            {accept_rate:.0}");
    println!("  whole runs/s (accept, claim, events, end):     {full_rate:.0}");
}
