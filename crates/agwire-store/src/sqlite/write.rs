//! A run's writes as they run on the writer's connection ([`super::writer`]):
//! accept, append events, end, cancel while queued, claim — each prepared by
//! the caller ([`crate::rules`]), so the writer thread only runs
//! SQL.

use rusqlite::{OptionalExtension, Transaction, params};

use crate::error::Error;
use crate::rules::{Accept, End, MessageRow};
use crate::run::{MultitaskStrategy, RuntimeMode};
use crate::sql::{
    FORGET_RUNS, JOB_CONFIG, NTH_RECENT_RUN, RECENT_MESSAGES, RECORD_RUN, SETTINGS, TOKENS_ON_DAY,
};
use crate::{Accepted, Briefing, HISTORY_WINDOW, Stopped, cancelled_log, run_started};

impl Accept {
    /// The rules of `RunStore::accept_run`, in its order.
    pub(super) fn run(self, tx: &Transaction<'_>) -> Result<Accepted, Error> {
        let title = self.title().map(str::to_owned);
        let existing = tx
            .prepare_cached(
                "SELECT task_id, thread_id, request_hash, created_thread FROM runs \
                 WHERE user_id = ?1 AND run_id = ?2",
            )?
            .query_row(params![self.user, self.run_id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .optional()?;
        if let Some((task_id, thread_id, hash, created)) = existing {
            if thread_id != self.thread_id || hash != self.request_hash {
                return Err(Error::RunIdReused {
                    run_id: self.run_id,
                });
            }
            return Ok(Accepted {
                task_id,
                thread_id: self.thread_id,
                run_id: self.run_id,
                created: created != 0,
                replayed: true,
                waiting: false,
                started: None,
                stopped: Vec::new(),
            });
        }
        check_quotas(tx, &self.user, self.quotas, self.now_ms)?;
        let owner: Option<String> = tx
            .prepare_cached("SELECT user_id FROM threads WHERE id = ?1")?
            .query_row([&self.thread_id], |r| r.get(0))
            .optional()?;
        let created =
            match owner {
                Some(owner) if owner != self.user => {
                    return Err(Error::ThreadNotFound);
                }
                Some(_) => false,
                None => {
                    tx.prepare_cached(
                    "INSERT INTO threads (id, user_id, created_at, last_active_at, derived_title) \
                     VALUES (?1, ?2, ?3, ?3, ?4)",
                )?
                .execute(params![self.thread_id, self.user, self.now_ms, title])?;
                    true
                }
            };
        // A thread this accept created holds nothing yet: no run to wait
        // behind, no tool call to settle, no message to match, and its
        // history is what the turn brings. Those reads are skipped, not
        // their rules (the contract suite runs both paths).
        let active = if created {
            Vec::new()
        } else {
            active_runs(tx, &self.thread_id)?
        };
        let busy = !active.is_empty();
        if busy && self.strategy == MultitaskStrategy::Reject {
            return Err(Error::ThreadBusy);
        }
        // The runs a rollback takes back: the tool calls they closed count
        // as pending for this turn's answers.
        let rolled_back: Vec<&str> = match self.strategy {
            MultitaskStrategy::Rollback => active.iter().map(|r| r.run_id.as_str()).collect(),
            _ => Vec::new(),
        };
        if created {
            if let (true, Some(id)) = (self.strict_answers, self.answers.first()) {
                return Err(Error::ToolCallNotPending {
                    tool_call_id: id.clone(),
                });
            }
        } else if self.strict_answers {
            check_answers(
                tx,
                &self.thread_id,
                &self.answers,
                &rolled_back,
                self.now_ms,
            )?;
        }
        // Every refusal is behind us: from here on the accept writes.
        if self.quotas.runs_per_minute.is_some() {
            tx.prepare_cached(RECORD_RUN)?
                .execute(params![self.user, self.now_ms])?;
            tx.prepare_cached(FORGET_RUNS)?
                .execute(params![self.user, self.now_ms - crate::RUN_WINDOW_MS])?;
        }
        let mut stopped = Vec::new();
        let mut waiting = busy;
        if busy && self.strategy.stops_active_runs() {
            stopped = stop_active(tx, &self.thread_id, &active, self.strategy, self.now_ms)?;
            // Only a run still running holds the thread; a waiting one ended.
            waiting = stopped.iter().any(|run| run.ended.is_none());
        }
        if created {
            insert_messages_from(
                tx,
                &self.thread_id,
                &self.run_id,
                &self.candidates,
                0,
                self.now_ms,
            )?;
        } else {
            close_tool_calls(
                tx,
                &self.thread_id,
                &self.run_id,
                &self.answers,
                self.now_ms,
            )?;
        }
        // A run waiting behind another adds its messages when it starts (or
        // is cancelled), so the thread reads in the order turns happened.
        let pending = if waiting {
            Some(self.pending())
        } else {
            if !created {
                add_new_messages(
                    tx,
                    &self.thread_id,
                    &self.run_id,
                    &self.candidates,
                    self.dedupe,
                    self.now_ms,
                )?;
            }
            None
        };
        let mut started = self.start.filter(|_| !waiting);
        if let Some(run) = &mut started {
            let history = created.then(|| crate::rules::history_of(&self.candidates));
            run.briefing = Some(briefing(
                tx,
                &self.user,
                &self.thread_id,
                self.mode,
                history,
            )?);
        }
        let task_id = self.task_id;
        tx.prepare_cached(
            "INSERT INTO runs (task_id, user_id, thread_id, run_id, request_hash, created_thread, status, \
             input, created_at, pending_messages, runtime_mode, options, started_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        )?
        .execute(params![
            task_id,
            self.user,
            self.thread_id,
            self.run_id,
            self.request_hash,
            i64::from(created),
            if started.is_some() { "running" } else { "queued" },
            self.input_json,
            self.now_ms,
            pending.as_deref(),
            self.mode,
            self.options,
            started.as_ref().map(|_| self.now_ms),
        ])?;
        if !created {
            // A thread without a name yet takes the turn's, if its messages
            // went in now (a waiting run's go in when it starts).
            let title = if waiting { None } else { title };
            tx.prepare_cached(
                "UPDATE threads SET last_active_at = ?1, derived_title = COALESCE(derived_title, ?3) \
                 WHERE id = ?2",
            )?
            .execute(params![self.now_ms, self.thread_id, title])?;
        }
        if !self.attachments.is_empty() {
            tx.prepare_cached(
                "INSERT OR IGNORE INTO attachment_refs (thread_id, attachment_id) \
                 SELECT ?1, a.id FROM attachments a \
                 WHERE a.id IN (SELECT value FROM json_each(?2)) AND a.user_id = ?3",
            )?
            .execute(params![
                self.thread_id,
                serde_json::to_string(&self.attachments)?,
                self.user
            ])?;
        }
        Ok(Accepted {
            task_id,
            thread_id: self.thread_id,
            run_id: self.run_id,
            created,
            replayed: false,
            waiting,
            started,
            stopped,
        })
    }
}

/// What a run starting now reads besides its input (`Claimed::briefing`),
/// read in the transaction that starts it: the pages are the ones it just
/// wrote, and it costs no trip to another thread. `known`: the thread's
/// history when the caller has it (a thread it just created).
fn briefing(
    tx: &Transaction<'_>,
    user: &str,
    thread_id: &str,
    mode: Option<&str>,
    known: Option<Vec<String>>,
) -> Result<Briefing, Error> {
    let settings: Option<String> = tx
        .prepare_cached(SETTINGS)?
        .query_row([user], |r| r.get(0))
        .optional()?;
    let history = match known {
        Some(history) => history,
        None => {
            let mut history: Vec<String> = tx
                .prepare_cached(RECENT_MESSAGES)?
                .query_map(params![thread_id, HISTORY_WINDOW], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            history.reverse();
            history
        }
    };
    let job_config: Option<String> = if mode == Some(RuntimeMode::Automation.as_str()) {
        tx.prepare_cached(JOB_CONFIG)?
            .query_row(params![user, thread_id], |r| r.get(0))
            .optional()?
    } else {
        None
    };
    Ok(Briefing {
        settings,
        history,
        job_config,
    })
}

/// An active run of a thread.
struct ActiveRun {
    task_id: String,
    run_id: String,
    running: bool,
}

/// The thread's active runs, oldest first.
fn active_runs(tx: &Transaction<'_>, thread_id: &str) -> Result<Vec<ActiveRun>, Error> {
    let runs = tx
        .prepare_cached(
            "SELECT task_id, run_id, status = 'running' FROM runs \
             WHERE thread_id = ?1 AND status IN ('queued', 'running') ORDER BY rowid",
        )?
        .query_map([thread_id], |r| {
            Ok(ActiveRun {
                task_id: r.get(0)?,
                run_id: r.get(1)?,
                running: r.get(2)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(runs)
}

/// Stops a thread's active runs for an accept with an interrupt or
/// rollback strategy (`RunStore::accept_run`): a waiting one ends cancelled
/// here, a running one is marked to stop; a rollback takes back what they
/// added to the thread.
fn stop_active(
    tx: &Transaction<'_>,
    thread_id: &str,
    active: &[ActiveRun],
    strategy: MultitaskStrategy,
    now_ms: i64,
) -> Result<Vec<Stopped>, Error> {
    let mut stopped = Vec::with_capacity(active.len());
    for run in active {
        let ended = if run.running {
            tx.prepare_cached(
                "UPDATE runs SET stop_requested = ?1 WHERE task_id = ?2 AND status = 'running'",
            )?
            .execute(params![strategy.as_str(), run.task_id])?;
            None
        } else {
            let log = cancelled_log(thread_id, &run.run_id).map(|event| event.to_json());
            cancel_queued(tx, &run.task_id, &log, now_ms)?
        };
        stopped.push(Stopped {
            task_id: run.task_id.clone(),
            run_id: run.run_id.clone(),
            ended,
        });
    }
    if strategy == MultitaskStrategy::Rollback {
        let ids = serde_json::to_string(&active.iter().map(|r| &r.run_id).collect::<Vec<_>>())?;
        tx.prepare_cached(
            "DELETE FROM messages WHERE thread_id = ?1 AND run_id IN (SELECT value FROM json_each(?2))",
        )?
        .execute(params![thread_id, ids])?;
        tx.prepare_cached(
            "UPDATE tool_calls SET closed_by = NULL, answered = 0 \
             WHERE thread_id = ?1 AND closed_by IN (SELECT value FROM json_each(?2))",
        )?
        .execute(params![thread_id, ids])?;
        // A thread left without a user message is unnamed again (the next
        // turn's first message names it).
        tx.prepare_cached(
            "UPDATE threads SET derived_title = NULL WHERE id = ?1 \
             AND NOT EXISTS (SELECT 1 FROM messages WHERE thread_id = ?1 AND role = 'user')",
        )?
        .execute([thread_id])?;
    }
    Ok(stopped)
}

/// The agent-run API's rule for a turn's answers (`RunStore::accept_run`):
/// each must answer a pending call of the thread — one closed by a run in
/// `rolled_back` counts as pending (the accept reopens it) — and not past
/// its expiry at `now_ms`, or the turn is refused, before anything of it is
/// kept.
fn check_answers(
    tx: &Transaction<'_>,
    thread_id: &str,
    answers: &[String],
    rolled_back: &[&str],
    now_ms: i64,
) -> Result<(), Error> {
    let mut state = tx.prepare_cached(
        "SELECT closed_by, answered, expired OR COALESCE(expires_at <= ?3, 0) \
         FROM tool_calls WHERE thread_id = ?1 AND id = ?2",
    )?;
    for id in answers {
        let found: Option<(Option<String>, bool, bool)> = state
            .query_row(params![thread_id, id, now_ms], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()?;
        let tool_call_id = id.clone();
        match found {
            None => return Err(Error::ToolCallNotPending { tool_call_id }),
            Some((_, _, true)) => return Err(Error::ToolCallExpired { tool_call_id }),
            Some((Some(by), _, _)) if rolled_back.contains(&by.as_str()) => {}
            Some((Some(_), true, _)) => return Err(Error::ToolCallAnswered { tool_call_id }),
            Some((Some(_), false, _)) => return Err(Error::ToolCallClosed { tool_call_id }),
            Some((None, _, _)) => {}
        }
    }
    Ok(())
}

/// Closes the thread's pending tool calls by `run_id`, as answered (by one
/// of `answers`) or gone past; an expired one stays expired.
fn close_tool_calls(
    tx: &Transaction<'_>,
    thread_id: &str,
    run_id: &str,
    answers: &[String],
    now_ms: i64,
) -> Result<(), Error> {
    tx.prepare_cached(
        "UPDATE tool_calls SET closed_by = ?1, answered = id IN (SELECT value FROM json_each(?2)) \
         WHERE thread_id = ?3 AND closed_by IS NULL AND NOT expired \
         AND (expires_at IS NULL OR expires_at > ?4)",
    )?
    .execute(params![
        run_id,
        serde_json::to_string(answers)?,
        thread_id,
        now_ms
    ])?;
    Ok(())
}

/// `RunStore::append_events`: appends to a running run's log only.
pub(super) fn append_running(
    tx: &Transaction<'_>,
    task_id: &str,
    events: &[String],
) -> Result<u64, Error> {
    let status: Option<String> = tx
        .prepare_cached("SELECT status FROM runs WHERE task_id = ?1")?
        .query_row([task_id], |r| r.get(0))
        .optional()?;
    if status.as_deref() != Some("running") {
        return Err(Error::RunNotRunning {
            task_id: task_id.to_owned(),
        });
    }
    append(tx, task_id, events)
}

/// Appends events (as JSON) to a run's log as one row (`log`), numbered on
/// from its last one; the first one's number.
pub(super) fn append(tx: &Transaction<'_>, task_id: &str, events: &[String]) -> Result<u64, Error> {
    if events.is_empty() {
        return Ok(0);
    }
    let last: i64 = tx
        .prepare_cached(
            "SELECT COALESCE((SELECT seq + n_events - 1 FROM run_events WHERE task_id = ?1 \
             ORDER BY seq DESC LIMIT 1), 0)",
        )?
        .query_row([task_id], |r| r.get(0))?;
    tx.prepare_cached(
        "INSERT INTO run_events (task_id, seq, n_events, events) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![
        task_id,
        last + 1,
        i64::try_from(events.len()).unwrap_or(i64::MAX),
        crate::log::join(events)
    ])?;
    Ok(u64::try_from(last + 1).unwrap_or(0))
}

/// `RunStore::accept_run`'s quota rule: the user's runs of the last minute
/// and tokens of the day against `quotas` (the writer is the only one, so
/// what it reads is what an accepted run's record adds to).
fn check_quotas(
    tx: &Transaction<'_>,
    user: &str,
    quotas: crate::Quotas,
    now_ms: i64,
) -> Result<(), Error> {
    if let Some(limit) = quotas.runs_per_minute {
        let nth: Option<i64> = tx
            .prepare_cached(NTH_RECENT_RUN)?
            .query_row(
                params![
                    user,
                    now_ms - crate::RUN_WINDOW_MS,
                    i64::from(limit).saturating_sub(1)
                ],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(accepted_at) = nth {
            return Err(Error::QuotaExceeded {
                quota: crate::Quota::RunsPerMinute(limit),
                retry_after_ms: crate::quotas::runs_retry_after(accepted_at, now_ms),
            });
        }
    }
    if let Some(limit) = quotas.tokens_per_day {
        let used: i64 = tx
            .prepare_cached(TOKENS_ON_DAY)?
            .query_row(params![user, crate::utc_day(now_ms)], |r| r.get(0))
            .optional()?
            .unwrap_or(0);
        if u64::try_from(used).unwrap_or(0) >= limit {
            return Err(Error::QuotaExceeded {
                quota: crate::Quota::TokensPerDay(limit),
                retry_after_ms: (crate::day_ends(now_ms) - now_ms).max(1),
            });
        }
    }
    Ok(())
}

impl End {
    /// `RunStore::end_run`: all of it, or nothing when the run had ended.
    pub(super) fn run(mut self, tx: &Transaction<'_>, task_id: &str) -> Result<Option<u64>, Error> {
        // Events are appended to a running run only (as `append_running`).
        let moved = tx
            .prepare_cached(
                "UPDATE runs SET status = ?1, error = ?2, usage = ?3, finished_at = ?4 \
                 WHERE task_id = ?5 AND status IN ('queued', 'running') \
                 AND (?6 = 0 OR status = 'running') \
                 RETURNING thread_id, run_id, stop_requested IS 'rollback', user_id",
            )?
            .query_row(
                params![
                    self.status.as_str(),
                    self.error,
                    self.usage,
                    self.now_ms,
                    task_id,
                    !self.events.is_empty(),
                ],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, bool>(2)?,
                        r.get::<_, String>(3)?,
                    ))
                },
            )
            .optional()?;
        let Some((thread_id, run_id, rolled_back, user)) = moved else {
            return Ok(None);
        };
        if self.tokens > 0 {
            tx.prepare_cached(
                "INSERT INTO token_usage (user_id, day, tokens) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (user_id, day) DO UPDATE SET tokens = tokens + excluded.tokens",
            )?
            .execute(params![user, crate::utc_day(self.now_ms), self.tokens])?;
        }
        // A run that ends before its first event was written (a crash right
        // after the claim, a failed setup) still gets a valid log:
        // `RUN_STARTED` first, then its one terminal event.
        if self.events.is_empty() {
            let logged: Option<i64> = tx
                .prepare_cached("SELECT seq FROM run_events WHERE task_id = ?1 LIMIT 1")?
                .query_row([task_id], |r| r.get(0))
                .optional()?;
            if logged.is_none() {
                self.events.push(run_started(&thread_id, &run_id).to_json());
            }
        }
        if rolled_back {
            // Its thread reads as before it: its output, its tool calls and
            // its UI stay out (its log still ends as given).
            self.output.clear();
            self.asked.clear();
            self.ui_schema = None;
        }
        insert_messages(tx, &thread_id, &run_id, &self.output, self.now_ms)?;
        let mut ask = tx.prepare_cached(
            "INSERT INTO tool_calls (thread_id, id, run_id, name, arguments, asked_at, expires_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (thread_id, id) DO UPDATE SET \
             run_id = ?3, name = ?4, arguments = ?5, asked_at = ?6, expires_at = ?7, \
             closed_by = NULL, answered = 0, expired = 0",
        )?;
        for (id, name, arguments) in &self.asked {
            ask.execute(params![
                thread_id,
                id,
                run_id,
                name,
                arguments,
                self.now_ms,
                self.calls_expire_at
            ])?;
        }
        if let Some((answer, schema)) = &self.ui_schema {
            // A message that carries a UI shows in history.
            tx.prepare_cached(
                "UPDATE messages SET ui_schema = ?1, shown = 1 \
                 WHERE thread_id = ?2 AND run_id = ?3 AND id = ?4",
            )?
            .execute(params![schema, thread_id, run_id, answer])?;
        }
        // The remaining events and the terminal one: one row.
        let before = self.events.len() as u64;
        self.events.push(self.terminal);
        append(tx, task_id, &self.events).map(|first| Some(first + before))
    }
}

/// `RunStore::cancel_queued`: `queued` → `cancelled` with its whole log, or
/// nothing when it was no longer queued.
pub(super) fn cancel_queued(
    tx: &Transaction<'_>,
    task_id: &str,
    events: &[String],
    now_ms: i64,
) -> Result<Option<u64>, Error> {
    let changed = tx
        .prepare_cached(
            "UPDATE runs SET status = 'cancelled', finished_at = ?1 WHERE task_id = ?2 AND status = 'queued'",
        )?
        .execute(params![now_ms, task_id])?;
    if changed != 1 {
        return Ok(None);
    }
    // A run cancelled while it waited never reached its thread: its
    // messages stay in the run's stored input only.
    append(tx, task_id, events).map(Some)
}

/// Appends `candidates` in order — with `dedupe`, only those whose id the
/// thread does not hold yet.
fn add_new_messages(
    tx: &Transaction<'_>,
    thread_id: &str,
    run_id: &str,
    candidates: &[MessageRow],
    dedupe: bool,
    now_ms: i64,
) -> Result<(), Error> {
    if !dedupe {
        return insert_messages(tx, thread_id, run_id, candidates, now_ms);
    }
    let mut known = tx.prepare_cached("SELECT 1 FROM messages WHERE thread_id = ?1 AND id = ?2")?;
    let mut new = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        let held: Option<i64> = known
            .query_row(params![thread_id, candidate.id], |r| r.get(0))
            .optional()?;
        if held.is_none() {
            new.push(candidate.clone());
        }
    }
    insert_messages(tx, thread_id, run_id, &new, now_ms)
}

fn insert_messages(
    tx: &Transaction<'_>,
    thread_id: &str,
    run_id: &str,
    messages: &[MessageRow],
    now_ms: i64,
) -> Result<(), Error> {
    if messages.is_empty() {
        return Ok(());
    }
    let last: i64 = tx
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE thread_id = ?1")?
        .query_row([thread_id], |r| r.get(0))?;
    insert_messages_from(tx, thread_id, run_id, messages, last, now_ms)
}

/// [`insert_messages`] after the thread's message `last`.
fn insert_messages_from(
    tx: &Transaction<'_>,
    thread_id: &str,
    run_id: &str,
    messages: &[MessageRow],
    mut seq: i64,
    now_ms: i64,
) -> Result<(), Error> {
    let mut insert = tx.prepare_cached(
        "INSERT INTO messages (thread_id, seq, id, run_id, role, body, created_at, shown) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for row in messages {
        seq += 1;
        insert.execute(params![
            thread_id, seq, row.id, run_id, row.role, row.body, now_ms, row.shown
        ])?;
    }
    Ok(())
}

/// `RunStore::claim_runnable`'s transaction: up to `limit` runs, each the
/// oldest active run of its idle thread, oldest first; a run that waited
/// adds its messages now. `register` sees each before the commit.
pub(super) fn claim(
    tx: &Transaction<'_>,
    limit: u32,
    now_ms: i64,
    register: &crate::OnClaim,
) -> Result<Vec<crate::Claimed>, Error> {
    let mut select = tx.prepare_cached(
        "UPDATE runs SET status = 'running', started_at = max(?1, created_at) WHERE task_id IN ( \
           SELECT q.task_id FROM runs q WHERE q.status = 'queued' \
           AND q.rowid = (SELECT MIN(o.rowid) FROM runs o \
                          WHERE o.thread_id = q.thread_id AND o.status IN ('queued', 'running')) \
           ORDER BY q.rowid LIMIT ?2) \
         RETURNING task_id, user_id, thread_id, run_id, input, pending_messages, runtime_mode, options",
    )?;
    type Row = (
        String,
        String,
        String,
        String,
        String,
        Option<String>,
        Option<String>,
        Option<String>,
    );
    let rows: Vec<Row> = select
        .query_map(params![now_ms, i64::from(limit)], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
            ))
        })?
        .collect::<Result<_, _>>()?;
    let mut claimed = Vec::with_capacity(rows.len());
    for (task_id, user_id, thread_id, run_id, input, pending, mode, options) in rows {
        if let Some(pending) = pending {
            flush_pending(tx, &task_id, (&thread_id, &run_id), &pending, now_ms)?;
        }
        let briefing = briefing(tx, &user_id, &thread_id, mode.as_deref(), None)?;
        let mut run = crate::rules::claimed(
            task_id,
            user_id,
            &input,
            mode.as_deref(),
            options.as_deref(),
        )?;
        run.briefing = Some(briefing);
        claimed.push(run);
    }
    // Oldest first, whatever order RETURNING gave.
    claimed.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    for run in &claimed {
        register(&run.task_id);
    }
    Ok(claimed)
}

/// Appends the messages of a run that waited (see `RunStore::accept_run`).
fn flush_pending(
    tx: &Transaction<'_>,
    task_id: &str,
    (thread_id, run_id): (&str, &str),
    pending: &str,
    now_ms: i64,
) -> Result<(), Error> {
    let (dedupe, rows) = crate::rules::pending(pending)?;
    add_new_messages(tx, thread_id, run_id, &rows, dedupe, now_ms)?;
    if let Some(title) = rows.iter().find_map(|row| row.title.as_deref()) {
        tx.prepare_cached(
            "UPDATE threads SET derived_title = ?1 WHERE id = ?2 AND derived_title IS NULL",
        )?
        .execute(params![title, thread_id])?;
    }
    tx.prepare_cached("UPDATE runs SET pending_messages = NULL WHERE task_id = ?1")?
        .execute([task_id])?;
    Ok(())
}
