//! PostgreSQL writes the common calls of a group set-based
//! (`agwire_accept_many`, `agwire_write_many`; issue 47): a differential
//! test holds the group functions to the one-call functions they stand for.
//! Two fresh databases take the same random groups — one as groups, the
//! other one call at a time (`agwire_accept`, `agwire_append`, `agwire_end`)
//! — and every answer, every row and every notification must agree.
//!
//! The groups mix the common calls (new threads, ends without tool calls)
//! with every kind the set-based path must leave to the one-call functions
//! or must not disturb: one thread twice in a group, a runId reused or
//! replayed, busy threads under each strategy, answers to tool calls,
//! quotas, UI answers, ends of runs already ended or never accepted.
//! `AGWIRE_GROUPED_SEED=<n>` replays a run's choices.

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use sqlx::postgres::{PgListener, PgPool};

use super::*;
use agwire_service::store::{HISTORY_ROLES, HISTORY_WINDOW};

/// Groups written in one run of the test.
const ROUNDS: usize = 100;
/// A lease, as the replicas' (its value is not compared: it is the clock's).
const LEASE_MS: i64 = 60_000;

/// `agwire_accept` for one call, its arguments read from the object
/// `agwire_accept_many` reads.
const ACCEPT_ONE: &str = r#"SELECT a.outcome, a.task_id, a.created, a.waiting, a.stopped::TEXT AS stopped
FROM jsonb_populate_record(NULL::agwire_accept_call, $1) c,
LATERAL agwire_accept(c.task, c."user", c.thread, c.run, c.hash, c.input, c.mode, c.options,
    c.strategy, c.dedupe, COALESCE(c.ids, ARRAY[]::TEXT[]), COALESCE(c.roles, ARRAY[]::TEXT[]),
    COALESCE(c.bodies, ARRAY[]::TEXT[]), c.pending, c.now, c.owner, $2,
    COALESCE(c.answers, ARRAY[]::TEXT[]), c."strict", COALESCE(c.shown, ARRAY[]::BOOLEAN[]),
    c.title, COALESCE(c.attachments, ARRAY[]::TEXT[]), c.runs_per_minute, c.tokens_per_day) a"#;

/// `agwire_end` for one call, likewise.
const END_ONE: &str = r#"SELECT agwire_end(c.task, c.status, c.error, c.usage, c.terminal,
    COALESCE(c.ids, ARRAY[]::TEXT[]), COALESCE(c.roles, ARRAY[]::TEXT[]),
    COALESCE(c.bodies, ARRAY[]::TEXT[]), c.ui_answer, c.ui_schema, c.now,
    COALESCE(c.call_ids, ARRAY[]::TEXT[]), COALESCE(c.call_names, ARRAY[]::TEXT[]),
    COALESCE(c.call_args, ARRAY[]::TEXT[]), COALESCE(c.shown, ARRAY[]::BOOLEAN[]),
    c.calls_expire_at, c.tokens, c.events, c.n_events)
FROM jsonb_populate_record(NULL::agwire_end_call, $1) c"#;

/// Every table a group writes, as ordered JSON (the run's position and its
/// lease's time left out: the order of positions across threads and the
/// clock are not part of the contract; whether a lease is held is).
const DUMP: &str = r#"SELECT jsonb_build_object(
  'threads', (SELECT jsonb_agg(to_jsonb(t) ORDER BY t.id) FROM threads t),
  'messages', (SELECT jsonb_agg(to_jsonb(m) ORDER BY m.thread_id, m.seq) FROM messages m),
  'runs', (SELECT jsonb_agg(to_jsonb(r) - 'position' - 'lease_until_ms'
                            || jsonb_build_object('leased', r.lease_until_ms IS NOT NULL)
                            ORDER BY r.task_id) FROM runs r),
  'run_events', (SELECT jsonb_agg(to_jsonb(e) ORDER BY e.task_id, e.seq) FROM run_events e),
  'tool_calls', (SELECT jsonb_agg(to_jsonb(c) ORDER BY c.thread_id, c.id) FROM tool_calls c),
  'token_usage', (SELECT jsonb_agg(to_jsonb(u) ORDER BY u.user_id, u.day) FROM token_usage u),
  'quota_runs', (SELECT jsonb_agg(to_jsonb(q) ORDER BY q.user_id, q.accepted_at) FROM quota_runs q),
  'attachment_refs', (SELECT jsonb_agg(to_jsonb(a) ORDER BY a.thread_id, a.attachment_id)
                      FROM attachment_refs a))::TEXT"#;

/// What the rounds made of the rules the set-based paths must leave alone.
const COVERAGE: &str = r#"SELECT format('%s rolled back (%s of them ended), %s stopped otherwise, %s tool calls (%s answered), %s UIs, %s quota rows, %s attachment refs, %s runs queued behind another',
  (SELECT count(*) FROM runs WHERE stop_requested = 'rollback'),
  (SELECT count(*) FROM runs WHERE stop_requested = 'rollback' AND status NOT IN ('queued', 'running')),
  (SELECT count(*) FROM runs WHERE stop_requested = 'interrupt'),
  (SELECT count(*) FROM tool_calls), (SELECT count(*) FROM tool_calls WHERE answered),
  (SELECT count(*) FROM messages WHERE ui_schema IS NOT NULL),
  (SELECT count(*) FROM quota_runs), (SELECT count(*) FROM attachment_refs),
  (SELECT count(*) FROM runs WHERE pending_messages IS NOT NULL))"#;

/// One database of the pair: its pool and a listener on the store's channel.
struct Side {
    pool: PgPool,
    listener: PgListener,
    _database: PgDatabase,
}

impl Side {
    /// What the run `call` started reads besides its input, read now as
    /// `ThreadStore::recent_messages_and_settings` reads it: the owner's
    /// settings as stored, and the thread's latest messages, oldest first.
    async fn briefing(&self, call: &Value) -> (Option<String>, Vec<String>) {
        let (settings, mut history): (Option<String>, Vec<String>) = sqlx::query_as(
            "SELECT (SELECT settings FROM users WHERE id = $1), ARRAY(SELECT body FROM messages \
             WHERE thread_id = $2 AND role IN ('user', 'assistant', 'tool', 'system', 'developer') \
             ORDER BY seq DESC LIMIT $3)",
        )
        .bind(call["user"].as_str().unwrap())
        .bind(call["thread"].as_str().unwrap())
        .bind(HISTORY_WINDOW as i64)
        .fetch_one(&self.pool)
        .await
        .unwrap();
        history.reverse();
        (settings, history)
    }

    async fn new() -> Option<Self> {
        let database = PgDatabase::create().await?;
        // The schema and the functions, as a replica applies them.
        drop(PgStore::connect(&database.url).await.unwrap());
        let pool = PgPool::connect(&database.url).await.unwrap();
        let mut listener = PgListener::connect(&database.url).await.unwrap();
        listener.listen("agwire").await.unwrap();
        Some(Self {
            pool,
            listener,
            _database: database,
        })
    }

    /// Every notification line since the last call, as a sorted set (a
    /// group wakes followers with one payload of lines where one call at a
    /// time sends a notification each; `r`, "a run may be claimable", is a
    /// wake-up, said once or many times).
    async fn heard(&mut self, round: usize) -> Vec<String> {
        let mark = format!("x end of round {round}");
        sqlx::query("SELECT pg_notify('agwire', $1)")
            .bind(&mark)
            .execute(&self.pool)
            .await
            .unwrap();
        let mut lines = std::collections::BTreeSet::new();
        loop {
            let note = tokio::time::timeout(Duration::from_secs(30), self.listener.recv())
                .await
                .expect("the round's mark, within 30 s")
                .unwrap();
            if note.payload() == mark {
                return lines.into_iter().collect();
            }
            lines.extend(note.payload().lines().map(str::to_owned));
        }
    }

    async fn dump(&self) -> Value {
        let text: String = sqlx::query_scalar(DUMP)
            .fetch_one(&self.pool)
            .await
            .unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

use std::time::Duration;

/// The choices of one run of the test.
struct Choices {
    rng: StdRng,
    round: usize,
    /// The tool calls pending on the threads earlier rounds made, as
    /// (thread, call): what a turn may answer.
    pending: Vec<(String, String)>,
}

impl Choices {
    fn now(&self) -> i64 {
        1_700_000_000_000 + i64::try_from(self.round).unwrap() * 7_000
    }

    fn thread(&mut self, k: usize) -> String {
        // Mostly new threads (the set-based path), else one of a few that
        // earlier rounds opened, made busy, gave tool calls.
        if self.rng.random_bool(0.5) {
            format!("new-{}-{k}", self.round)
        } else {
            format!("th{}", self.rng.random_range(0..3))
        }
    }

    /// One accept's object, as `accepts.rs` writes it.
    fn accept(&mut self, k: usize) -> Value {
        let (now, round) = (self.now(), self.round);
        let rng = &mut self.rng;
        let user = *["alice", "alice", "bob"].choose(rng).unwrap();
        let run = if rng.random_bool(0.15) {
            format!("r{}", rng.random_range(0..4))
        } else {
            format!("run-{round}-{k}")
        };
        let n_messages = rng.random_range(0..4);
        let ids: Vec<String> = (0..n_messages)
            .map(|i| {
                if rng.random_bool(0.2) {
                    "m-same".to_owned()
                } else {
                    format!("m-{round}-{k}-{i}")
                }
            })
            .collect();
        let roles: Vec<&str> = (0..n_messages)
            .map(|_| *["user", "user", "tool"].choose(rng).unwrap())
            .collect();
        let bodies: Vec<String> = ids
            .iter()
            .map(|id| format!(r#"{{"id":"{id}","role":"user","content":"hi"}}"#))
            .collect();
        let shown: Vec<bool> = (0..n_messages).map(|_| rng.random_bool(0.7)).collect();
        let thread = self.thread(k);
        let rng = &mut self.rng;
        let pending: Vec<&String> = self
            .pending
            .iter()
            .filter(|(t, _)| *t == thread)
            .map(|(_, call)| call)
            .collect();
        let answers: Vec<String> = match pending.choose(rng) {
            Some(call) if rng.random_bool(0.6) => vec![(*call).clone()],
            _ if rng.random_bool(0.1) => vec![format!("c{}", rng.random_range(0..4))],
            _ => Vec::new(),
        };
        let attachments: Vec<&str> = if rng.random_bool(0.1) {
            vec!["att-alice"]
        } else {
            Vec::new()
        };
        json!({
            "task": format!("task-{round}-{k}"),
            "user": user,
            "thread": thread,
            "run": run,
            "hash": *["h1", "h1", "h2"].choose(rng).unwrap(),
            "input": "{}",
            "mode": *["chat", "agent"].choose(rng).unwrap(),
            "options": if rng.random_bool(0.2) { Value::from(r#"{"webhook":"x"}"#) } else { Value::Null },
            "strategy": *["reject", "enqueue", "interrupt", "interrupt", "rollback", "rollback"]
                .choose(rng)
                .unwrap(),
            "dedupe": rng.random_bool(0.5),
            "ids": ids,
            "roles": roles,
            "bodies": bodies,
            "shown": shown,
            "title": if rng.random_bool(0.7) { Value::from(format!("title {k}")) } else { Value::Null },
            "attachments": attachments,
            "pending": if rng.random_bool(0.5) { Value::from("[]") } else { Value::Null },
            "now": now,
            "owner": if rng.random_bool(0.75) { Value::from("replica-a") } else { Value::Null },
            "answers": answers,
            "strict": rng.random_bool(0.5),
            "runs_per_minute": if rng.random_bool(0.1) { Value::from(3) } else { Value::Null },
            "tokens_per_day": if rng.random_bool(0.1) { Value::from(40) } else { Value::Null },
        })
    }

    /// One end's object, as `batch.rs` writes it.
    fn end(&mut self, task: &str, k: usize) -> Value {
        let (now, round) = (self.now(), self.round);
        let rng = &mut self.rng;
        let n_out = rng.random_range(0..3);
        let ids: Vec<String> = (0..n_out).map(|i| format!("out-{round}-{k}-{i}")).collect();
        let roles: Vec<&str> = (0..n_out)
            .map(|_| *["assistant", "tool"].choose(rng).unwrap())
            .collect();
        let bodies: Vec<String> = ids.iter().map(|id| format!(r#"{{"id":"{id}"}}"#)).collect();
        let shown: Vec<bool> = (0..n_out).map(|_| rng.random_bool(0.5)).collect();
        let asks = if rng.random_bool(0.2) { 1 } else { 0 };
        let call_ids: Vec<String> = (0..asks)
            .map(|_| format!("c{}", rng.random_range(0..4)))
            .collect();
        let ui_answer = if n_out > 0 && rng.random_bool(0.15) {
            Value::from(ids[0].clone())
        } else {
            Value::Null
        };
        let n_events = *[0, 0, 1, 3].choose(rng).unwrap();
        let events: Vec<String> = (0..n_events)
            .map(|i| format!(r#"{{"type":"CUSTOM","name":"e{i}","value":"a\nb"}}"#))
            .collect();
        json!({
            "task": task,
            "status": *["succeeded", "failed", "cancelled"].choose(rng).unwrap(),
            "error": if rng.random_bool(0.3) { Value::from(r#"{"message":"no"}"#) } else { Value::Null },
            "usage": if rng.random_bool(0.5) { Value::from("[]") } else { Value::Null },
            "terminal": r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
            "ids": ids,
            "roles": roles,
            "bodies": bodies,
            "shown": shown,
            "ui_answer": ui_answer,
            "ui_schema": if ui_answer.is_null() { Value::Null } else { Value::from("{}") },
            "now": now + 1_000,
            "call_ids": call_ids,
            "call_names": vec!["confirm"; asks],
            "call_args": vec!["{}"; asks],
            "calls_expire_at": if rng.random_bool(0.5) { Value::from(now + 20_000) } else { Value::Null },
            "tokens": *[0, 0, 7, 30].choose(rng).unwrap(),
            "events": if n_events > 0 { Value::from(events.join("\n")) } else { Value::Null },
            "n_events": n_events,
        })
    }
}

#[tokio::test]
async fn a_group_answers_and_writes_as_its_calls_one_at_a_time() {
    let Some(mut grouped) = Side::new().await else {
        return;
    };
    let mut single = Side::new().await.unwrap();
    let seed = std::env::var("AGWIRE_GROUPED_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("grouped: seed {seed} (AGWIRE_GROUPED_SEED={seed} replays it), {ROUNDS} rounds");
    let mut choices = Choices {
        rng: StdRng::seed_from_u64(seed),
        round: 0,
        pending: Vec::new(),
    };
    // An attachment of alice's that turns may refer to.
    for side in [&grouped, &single] {
        sqlx::query(
            "INSERT INTO attachments (id, user_id, mime_type, size, created_at)
             VALUES ('att-alice', 'alice', 'image/png', 1, 1)",
        )
        .execute(&side.pool)
        .await
        .unwrap();
    }
    let (mut set_based, mut ended) = (0, 0);
    for round in 0..ROUNDS {
        choices.round = round;
        choices.pending = sqlx::query_as(
            "SELECT thread_id, id FROM tool_calls WHERE closed_by IS NULL ORDER BY thread_id, id",
        )
        .fetch_all(&single.pool)
        .await
        .unwrap();
        // The accepts: one group against one call at a time.
        let calls: Vec<Value> = (0..choices.rng.random_range(1..14))
            .map(|k| choices.accept(k))
            .collect();
        let rows = sqlx::query(
            "SELECT outcome, task_id, created, waiting, stopped::TEXT AS stopped,
                    briefed, settings, history
             FROM agwire_accept_many($1, $2, $3) ORDER BY n",
        )
        .bind(Value::from(calls.clone()))
        .bind(LEASE_MS)
        .bind(HISTORY_WINDOW as i32)
        .fetch_all(&grouped.pool)
        .await
        .unwrap_or_else(|e| panic!("seed {seed}, round {round}: the group failed: {e}"));
        let as_group: Vec<_> = rows.iter().map(accept_answer).collect();
        let mut one_by_one = Vec::new();
        for call in &calls {
            let row = sqlx::query(ACCEPT_ONE)
                .bind(call)
                .bind(LEASE_MS)
                .fetch_one(&single.pool)
                .await
                .unwrap();
            let mut answer = accept_answer(&row);
            // A run it started: what reading its briefing right after the
            // call gives (the group answers with it, or with none for a
            // new thread, whose history is the call's own messages).
            if answer.0 == "started" {
                answer.5 = Some(single.briefing(call).await);
            }
            one_by_one.push(answer);
        }
        let as_group: Vec<_> = as_group
            .into_iter()
            .zip(&rows)
            .zip(&calls)
            .map(|((mut answer, row), call)| {
                use sqlx::Row;
                if row.get::<bool, _>("briefed") {
                    let history: Option<Vec<String>> = row.get("history");
                    answer.5 = Some((
                        row.get("settings"),
                        history.unwrap_or_else(|| own_history(call)),
                    ));
                }
                answer
            })
            .collect();
        assert_eq!(
            as_group, one_by_one,
            "seed {seed}, round {round}: the accepts' answers\ncalls: {calls:#?}"
        );
        set_based += as_group
            .iter()
            .zip(&calls)
            .filter(|(a, c)| a.2 && c["thread"].as_str().unwrap().starts_with("new-"))
            .count();
        agree(&mut grouped, &mut single, seed, round, "accepts").await;

        // The writes of active runs: appends to some, ends of others (and
        // of a run already ended, and of one never accepted).
        let active: Vec<String> = sqlx::query_scalar(
            "SELECT task_id FROM runs WHERE status IN ('queued', 'running') ORDER BY task_id",
        )
        .fetch_all(&single.pool)
        .await
        .unwrap();
        let mut appends: Vec<(String, String, i32)> = Vec::new();
        let mut ends = Vec::new();
        for (k, task) in active.iter().enumerate() {
            match choices.rng.random_range(0..6) {
                0 => appends.push((
                    task.clone(),
                    format!(r#"{{"type":"CUSTOM","name":"a{round}","value":1}}"#),
                    1,
                )),
                1 | 2 => ends.push(choices.end(task, k)),
                _ => {}
            }
        }
        if choices.rng.random_bool(0.3) {
            ends.push(choices.end("task-never", 99));
        }
        if let Some(task) = ends.first().map(|e| e["task"].clone())
            && choices.rng.random_bool(0.2)
        {
            // The same run ended twice in one group: the second is too late.
            let again = choices.end(task.as_str().unwrap(), 98);
            ends.push(again);
        }
        let (tasks, batches, counts) = appends.iter().cloned().fold(
            (Vec::new(), Vec::new(), Vec::new()),
            |(mut t, mut b, mut c), (task, batch, count)| {
                t.push(task);
                b.push(batch);
                c.push(count);
                (t, b, c)
            },
        );
        let as_group: Vec<Option<i64>> =
            sqlx::query_scalar("SELECT first FROM agwire_write_many($1, $2, $3, $4) ORDER BY n")
                .bind(&tasks)
                .bind(&batches)
                .bind(&counts)
                .bind(Value::from(ends.clone()))
                .fetch_all(&grouped.pool)
                .await
                .unwrap_or_else(|e| panic!("seed {seed}, round {round}: the writes failed: {e}"));
        let mut one_by_one = Vec::new();
        for (task, batch, count) in &appends {
            let first: Option<i64> = sqlx::query_scalar("SELECT agwire_append($1, $2, $3)")
                .bind(task)
                .bind(batch)
                .bind(count)
                .fetch_one(&single.pool)
                .await
                .unwrap();
            one_by_one.push(first);
        }
        for end in &ends {
            let last: Option<i64> = sqlx::query_scalar(END_ONE)
                .bind(end)
                .fetch_one(&single.pool)
                .await
                .unwrap();
            one_by_one.push(last);
        }
        assert_eq!(
            as_group, one_by_one,
            "seed {seed}, round {round}: the writes' answers\nends: {ends:#?}"
        );
        ended += one_by_one[appends.len()..]
            .iter()
            .filter(|a| a.is_some())
            .count();
        agree(&mut grouped, &mut single, seed, round, "writes").await;
    }
    let covered: String = sqlx::query_scalar(COVERAGE)
        .fetch_one(&single.pool)
        .await
        .unwrap();
    eprintln!("grouped: {set_based} new threads opened in groups, {ended} runs ended; {covered}");
    // The set-based paths were taken, not only the one-call ones.
    assert!(set_based > ROUNDS, "seed {seed}: {set_based} new threads");
    assert!(ended > ROUNDS, "seed {seed}: {ended} ends");
}

/// Outcome, task id, created, waiting, stopped, and for a run it started
/// its briefing: the owner's settings as stored, and the history.
type AcceptAnswer = (
    String,
    Option<String>,
    bool,
    bool,
    Option<String>,
    Option<(Option<String>, Vec<String>)>,
);

fn accept_answer(row: &sqlx::postgres::PgRow) -> AcceptAnswer {
    use sqlx::Row;
    (
        row.get("outcome"),
        row.get("task_id"),
        row.get("created"),
        row.get("waiting"),
        row.get("stopped"),
        None,
    )
}

/// A new thread's history: the call's own messages of the history roles,
/// the latest `HISTORY_WINDOW`, oldest first.
fn own_history(call: &Value) -> Vec<String> {
    let texts = |key: &str| -> Vec<String> {
        call[key]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default()
    };
    let (roles, bodies) = (texts("roles"), texts("bodies"));
    let mut history: Vec<String> = roles
        .iter()
        .zip(bodies)
        .filter(|(role, _)| HISTORY_ROLES.contains(&role.as_str()))
        .map(|(_, body)| body)
        .collect();
    history.drain(..history.len().saturating_sub(HISTORY_WINDOW as usize));
    history
}

/// Both databases hold the same rows and said the same to listeners.
async fn agree(grouped: &mut Side, single: &mut Side, seed: u64, round: usize, what: &str) {
    let (a, b) = (grouped.dump().await, single.dump().await);
    for (table, rows) in a.as_object().unwrap() {
        assert_eq!(
            rows, &b[table],
            "seed {seed}, round {round}, after the {what}: table {table} (left: the group)"
        );
    }
    let (a, b) = (grouped.heard(round).await, single.heard(round).await);
    assert_eq!(
        a, b,
        "seed {seed}, round {round}, after the {what}: the notifications (left: the group)"
    );
}
