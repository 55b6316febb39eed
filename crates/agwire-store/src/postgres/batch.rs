//! Group commit on PostgreSQL: the event appends and the ends of every run
//! executing on this replica, gathered while the previous batch commits, go
//! to the database as one statement and one commit (`agwire_write_many`).
//! They are most of a run's writes; a commit waits for the WAL to reach the
//! disk, so sharing it is where the throughput is. The loop is the store's
//! one group commit (`store::group`); this file says how a group is
//! written.

use std::collections::HashSet;

use serde_json::json;
use sqlx::{PgConnection, PgPool};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::kept::Kept;
use super::undone;
use crate::error::Error;
use crate::group::{Commit, GroupCommit, Shape};
use crate::rules::End;

/// Most writes one commit carries.
const MAX_BATCH: usize = 256;

/// A run's end as `agwire_end` takes it.
pub(super) struct EndCall {
    pub(super) task_id: String,
    pub(super) end: End,
}

impl EndCall {
    /// `agwire_end`'s arguments as the object `agwire_write_many` reads.
    fn to_json(&self) -> serde_json::Value {
        let end = &self.end;
        let (answer, schema) = end.ui_schema.as_ref().map(|(a, s)| (a, s)).unzip();
        json!({
            "task": self.task_id,
            "status": end.status.as_str(),
            "error": end.error,
            "usage": end.usage,
            "events": (!end.events.is_empty()).then(|| crate::log::join(&end.events)),
            "n_events": end.events.len(),
            "terminal": end.terminal,
            "ids": end.output.iter().map(|m| &m.id).collect::<Vec<_>>(),
            "roles": end.output.iter().map(|m| m.role).collect::<Vec<_>>(),
            "bodies": end.output.iter().map(|m| &m.body).collect::<Vec<_>>(),
            "shown": end.output.iter().map(|m| m.shown).collect::<Vec<_>>(),
            "ui_answer": answer,
            "ui_schema": schema,
            "now": end.now_ms,
            "call_ids": end.asked.iter().map(|c| &c.0).collect::<Vec<_>>(),
            "call_names": end.asked.iter().map(|c| &c.1).collect::<Vec<_>>(),
            "call_args": end.asked.iter().map(|c| &c.2).collect::<Vec<_>>(),
            "calls_expire_at": end.calls_expire_at,
            "tokens": end.tokens,
        })
    }

    /// `agwire_end` on its own (its last events with it).
    async fn alone(&self, pool: &PgPool) -> Result<Option<i64>, sqlx::Error> {
        let end = &self.end;
        let (answer, schema) = end.ui_schema.as_ref().map(|(a, s)| (a, s)).unzip();
        sqlx::query_scalar(
            "SELECT agwire_end($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)",
        )
        .bind(&self.task_id)
        .bind(end.status.as_str())
        .bind(end.error.as_deref())
        .bind(end.usage.as_deref())
        .bind(&end.terminal)
        .bind(end.output.iter().map(|m| m.id.as_str()).collect::<Vec<_>>())
        .bind(end.output.iter().map(|m| m.role).collect::<Vec<_>>())
        .bind(
            end.output
                .iter()
                .map(|m| m.body.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(answer)
        .bind(schema)
        .bind(end.now_ms)
        .bind(end.asked.iter().map(|c| c.0.as_str()).collect::<Vec<_>>())
        .bind(end.asked.iter().map(|c| c.1.as_str()).collect::<Vec<_>>())
        .bind(end.asked.iter().map(|c| c.2.as_str()).collect::<Vec<_>>())
        .bind(end.output.iter().map(|m| m.shown).collect::<Vec<_>>())
        .bind(end.calls_expire_at)
        .bind(end.tokens)
        .bind((!end.events.is_empty()).then(|| crate::log::join(&end.events)))
        .bind(i32::try_from(end.events.len()).unwrap_or(i32::MAX))
        .fetch_one(pool)
        .await
    }
}

/// One write waiting for its batch.
enum Write {
    /// Events for a run's log, as its one row holds them (`log::join`).
    Append {
        task_id: String,
        events: String,
        n_events: i32,
    },
    /// A run's end (boxed: far larger than an append, and far rarer).
    End(Box<EndCall>),
}

impl Write {
    fn task_id(&self) -> &str {
        match self {
            Self::Append { task_id, .. } => task_id,
            Self::End(call) => &call.task_id,
        }
    }

    /// The write on its own (`agwire_append` or `agwire_end`).
    async fn alone(&self, pool: &PgPool) -> Result<Option<i64>, sqlx::Error> {
        match self {
            Self::Append {
                task_id,
                events,
                n_events,
            } => {
                sqlx::query_scalar("SELECT agwire_append($1, $2, $3)")
                    .bind(task_id)
                    .bind(events)
                    .bind(n_events)
                    .fetch_one(pool)
                    .await
            }
            Self::End(call) => call.alone(pool).await,
        }
    }
}

/// A write and where its answer goes: the number `agwire_append` or
/// `agwire_end` gives.
struct Call {
    write: Write,
    reply: oneshot::Sender<Result<Option<i64>, Error>>,
}

/// Hands writes to the group commit.
#[derive(Debug, Clone)]
pub(super) struct Writer {
    group: GroupCommit<Writes>,
}

impl Writer {
    /// Starts the group commit (it ends with `stop`).
    pub(super) fn start(pool: PgPool, stop: CancellationToken) -> Self {
        let shape = Shape {
            max_group: MAX_BATCH,
            lanes: 1,
            first_guess: std::time::Duration::from_millis(1),
            queue: 4 * MAX_BATCH,
        };
        Self {
            group: GroupCommit::spawn(
                Writes {
                    kept: Kept::new(pool.clone()),
                    pool,
                },
                shape,
                stop,
            ),
        }
    }

    /// Appends `events` to a run's log: its first number, or `None` when the
    /// run is not running (see `agwire_append`).
    pub(super) async fn append(
        &self,
        task_id: &str,
        events: Vec<String>,
    ) -> Result<Option<i64>, Error> {
        self.call(Write::Append {
            task_id: task_id.to_owned(),
            events: crate::log::join(&events),
            n_events: i32::try_from(events.len()).unwrap_or(i32::MAX),
        })
        .await
    }

    /// Ends a run: its terminal event's number, or `None` when it had
    /// already ended (see `agwire_end`).
    pub(super) async fn end(&self, call: EndCall) -> Result<Option<i64>, Error> {
        self.call(Write::End(Box::new(call))).await
    }

    async fn call(&self, write: Write) -> Result<Option<i64>, Error> {
        let (reply, answer) = oneshot::channel();
        self.group.queue(Call { write, reply }).await?;
        answer.await.map_err(|_| Error::ShuttingDown)?
    }
}

/// How a group of run writes is committed: one `agwire_write_many`.
struct Writes {
    pool: PgPool,
    /// The lane's connection, kept between groups.
    kept: Kept,
}

impl Commit for Writes {
    type Call = Call;
    type Failure = sqlx::Error;

    /// A run's second write waits for the next group (a group numbers each
    /// run's events once); appends go first, then ends — the order of
    /// `agwire_write_many`'s answers.
    fn arrange(&self, group: &mut Vec<Call>, later: &mut Vec<Call>) {
        let mut runs = HashSet::with_capacity(group.len());
        let mut kept = Vec::with_capacity(group.len());
        for call in group.drain(..) {
            if runs.insert(call.write.task_id().to_owned()) {
                kept.push(call);
            } else {
                later.push(call);
            }
        }
        kept.sort_by_key(|call| matches!(call.write, Write::End(_)));
        *group = kept;
    }

    async fn together(&self, group: &mut Vec<Call>) -> Result<(), sqlx::Error> {
        let mut conn = self.kept.take().await?;
        let numbers = commit(&mut conn, group).await;
        self.kept.keep(conn, &numbers);
        let numbers = match numbers {
            Ok(numbers) => numbers,
            Err(error) => {
                if !undone(&error) {
                    tracing::error!(%error, "a batch of run writes failed");
                }
                return Err(error);
            }
        };
        if numbers.len() == group.len() {
            for (call, number) in group.drain(..).zip(numbers) {
                let _ = call.reply.send(Ok(number));
            }
        } else {
            let error = format!("{} answers to {} writes", numbers.len(), group.len());
            tracing::error!(error, "a batch of run writes answered wrongly");
            for call in group.drain(..) {
                let _ = call.reply.send(Err(Error::Internal(error.clone())));
            }
        }
        Ok(())
    }

    async fn alone(&self, call: Call) {
        let alone = call.write.alone(&self.pool).await.map_err(Error::from);
        let _ = call.reply.send(alone);
    }

    /// PostgreSQL undid the statement (a deadlock with another replica's
    /// sweep of an abandoned run, one run's value it refused): nothing was
    /// written, so each call goes again on its own and only a bad one fails.
    fn undone(&self, failure: &sqlx::Error) -> bool {
        undone(failure)
    }

    /// Anything else (a lost connection) may have committed or not: never
    /// write twice — the call fails, and its run ends with an error after
    /// what the log holds.
    fn fail(&self, call: Call, failure: &sqlx::Error) {
        let _ = call
            .reply
            .send(Err(Error::LogUnavailable(failure.to_string())));
    }
}

/// One batch (appends first, then ends), one statement: each call's number,
/// in order.
async fn commit(conn: &mut PgConnection, batch: &[Call]) -> Result<Vec<Option<i64>>, sqlx::Error> {
    let mut tasks: Vec<&str> = Vec::new();
    let mut batches: Vec<&str> = Vec::new();
    let mut counts: Vec<i32> = Vec::new();
    let mut ends: Vec<serde_json::Value> = Vec::new();
    for call in batch {
        match &call.write {
            Write::Append {
                task_id,
                events,
                n_events,
            } => {
                tasks.push(task_id);
                batches.push(events);
                counts.push(*n_events);
            }
            Write::End(end) => ends.push(end.to_json()),
        }
    }
    sqlx::query_scalar("SELECT first FROM agwire_write_many($1, $2, $3, $4) ORDER BY n")
        .bind(&tasks)
        .bind(&batches)
        .bind(&counts)
        .bind(sqlx::types::Json(&ends))
        .fetch_all(conn)
        .await
}
