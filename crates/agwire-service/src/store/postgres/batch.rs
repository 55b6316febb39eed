//! Group commit on PostgreSQL: the event appends of every run executing on
//! this replica, gathered while the previous batch commits, go to the
//! database as one statement and one commit (`agwire_append_many`). Appends
//! are most of a run's writes; a commit waits for the WAL to reach the disk,
//! so sharing it is where the throughput is (as the SQLite writer does).

use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::error::Error;

/// Most appends one commit carries.
const MAX_BATCH: usize = 256;

/// One run's append, waiting for its batch.
struct Call {
    task_id: String,
    events: Vec<String>,
    reply: oneshot::Sender<Result<Option<i64>, Error>>,
}

/// Hands appends to the batching task.
#[derive(Debug, Clone)]
pub(super) struct Appender {
    calls: mpsc::Sender<Call>,
}

impl Appender {
    /// Starts the batching task (it ends with `stop`).
    pub(super) fn start(pool: PgPool, stop: CancellationToken) -> Self {
        let (calls, receiver) = mpsc::channel(4 * MAX_BATCH);
        tokio::spawn(run(pool, receiver, stop));
        Self { calls }
    }

    /// Appends `events` to a run's log: its first number, or `None` when the
    /// run is not running (see `agwire_append`).
    pub(super) async fn append(
        &self,
        task_id: &str,
        events: Vec<String>,
    ) -> Result<Option<i64>, Error> {
        let (reply, answer) = oneshot::channel();
        let call = Call {
            task_id: task_id.to_owned(),
            events,
            reply,
        };
        let gone = || Error::Unavailable("the store is shutting down".into());
        self.calls.send(call).await.map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

async fn run(pool: PgPool, mut receiver: mpsc::Receiver<Call>, stop: CancellationToken) {
    let mut calls = Vec::with_capacity(MAX_BATCH);
    loop {
        let received = tokio::select! {
            () = stop.cancelled() => return,
            received = receiver.recv_many(&mut calls, MAX_BATCH) => received,
        };
        if received == 0 {
            return;
        }
        let batch = std::mem::take(&mut calls);
        match commit(&pool, &batch).await {
            Ok(firsts) => {
                for (call, first) in batch.into_iter().zip(firsts) {
                    let _ = call.reply.send(Ok(first));
                }
            }
            // PostgreSQL undid the statement (a deadlock with another
            // replica's sweep of an abandoned run): nothing was written, so
            // each call goes again on its own and only a bad one fails.
            Err(error) if undone(&error) => {
                for call in batch {
                    let alone = sqlx::query_scalar("SELECT agwire_append($1, $2)")
                        .bind(&call.task_id)
                        .bind(&call.events)
                        .fetch_one(&pool)
                        .await
                        .map_err(Error::from);
                    let _ = call.reply.send(alone);
                }
            }
            // Anything else (a lost connection) may have committed or not:
            // never write twice — the calls fail, and their runs end with an
            // error after what the log holds.
            Err(error) => {
                tracing::error!(%error, "a batch of event appends failed");
                for call in batch {
                    let _ = call.reply.send(Err(Error::Unavailable(format!(
                        "could not append events: {error}"
                    ))));
                }
            }
        }
    }
}

/// Whether PostgreSQL rolled the statement back before anything committed
/// (deadlock, serialization failure).
fn undone(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.code())
        .is_some_and(|code| code == "40P01" || code == "40001")
}

/// One batch, one statement: each call's first number, in order.
async fn commit(pool: &PgPool, batch: &[Call]) -> Result<Vec<Option<i64>>, sqlx::Error> {
    let tasks: Vec<&str> = batch.iter().map(|c| c.task_id.as_str()).collect();
    let events: Vec<&Vec<String>> = batch.iter().map(|c| &c.events).collect();
    sqlx::query_scalar("SELECT first FROM agwire_append_many($1, $2) ORDER BY n")
        .bind(&tasks)
        .bind(sqlx::types::Json(&events))
        .fetch_all(pool)
        .await
}
