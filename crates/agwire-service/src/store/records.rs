//! The record stores every backend writes with the same SQL (threads,
//! profiles, calendars, jobs): one text, instantiated for each backend's
//! store and row type. Placeholders are `$n`, which SQLite reads too.

/// A thread's latest messages an agent is given (`RunContext::history`),
/// newest first: `$1` the thread, `$2` how many. The roles are
/// `HISTORY_ROLES`'s.
pub(in crate::store) const RECENT_MESSAGES: &str = "SELECT body FROM messages WHERE thread_id = $1 \
     AND role IN ('user', 'assistant', 'tool', 'system', 'developer') ORDER BY seq DESC LIMIT $2";

/// A user's profile settings (JSON text): `$1` the user.
pub(in crate::store) const SETTINGS: &str = "SELECT settings FROM users WHERE id = $1";

/// The config of the automation job a thread belongs to: `$1` the user, `$2`
/// the thread.
pub(in crate::store) const JOB_CONFIG: &str =
    "SELECT config FROM automation_jobs WHERE user_id = $1 AND thread_id = $2";

/// Implements `ThreadStore`, `ProfileStore`, `CalendarStore` and `JobStore`
/// for a backend store with a `pool` field.
macro_rules! shared_records {
    ($store:ty, $row:ty) => {
        #[async_trait]
        impl ThreadStore for $store {
            async fn thread_owner(&self, thread_id: &str) -> Result<Option<String>, Error> {
                Ok(
                    sqlx::query_scalar("SELECT user_id FROM threads WHERE id = $1")
                        .bind(thread_id)
                        .fetch_optional(&self.pool)
                        .await?,
                )
            }

            async fn latest_thread(&self, user: &str) -> Result<Option<String>, Error> {
                Ok(sqlx::query_scalar("SELECT id FROM threads WHERE user_id = $1 ORDER BY last_active_at DESC, created_at DESC LIMIT 1",
                )
                .bind(user)
                .fetch_optional(&self.pool)
                .await?)
            }

            async fn thread_messages(
                &self,
                thread_id: &str,
                roles: &[&str],
            ) -> Result<Vec<StoredMessage>, Error> {
                let rows = sqlx::query("SELECT seq, role, body, created_at, ui_schema FROM messages WHERE thread_id = $1 ORDER BY seq",
                )
                .bind(thread_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .filter(|row| roles.contains(&row.get::<String, _>("role").as_str()))
                    .map(stored_message)
                    .collect()
            }

            async fn last_shown_before(
                &self,
                thread_id: &str,
                before_ms: i64,
            ) -> Result<Option<i64>, Error> {
                Ok(sqlx::query_scalar(
                    "SELECT MAX(created_at) FROM messages WHERE thread_id = $1 AND shown AND created_at < $2",
                )
                .bind(thread_id)
                .bind(before_ms)
                .fetch_one(&self.pool)
                .await?)
            }

            async fn shown_messages(
                &self,
                thread_id: &str,
                from_ms: i64,
                to_ms: i64,
            ) -> Result<Vec<StoredMessage>, Error> {
                let rows = sqlx::query(
                    "SELECT seq, body, created_at, ui_schema FROM messages \
                     WHERE thread_id = $1 AND shown AND created_at >= $2 AND created_at < $3 ORDER BY seq",
                )
                .bind(thread_id)
                .bind(from_ms)
                .bind(to_ms)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(stored_message).collect()
            }

            async fn recent_messages(
                &self,
                thread_id: &str,
                limit: u32,
            ) -> Result<Vec<String>, Error> {
                let mut bodies: Vec<String> = sqlx::query_scalar(crate::store::records::RECENT_MESSAGES)
                    .bind(thread_id)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await?;
                bodies.reverse();
                Ok(bodies)
            }

            async fn threads(
                &self,
                user: &str,
                after: Option<(i64, &str)>,
                limit: u32,
            ) -> Result<Vec<ThreadRecord>, Error> {
                // No cursor: everything is "after" (i64::MAX, "").
                let (active, id) = after.unwrap_or((i64::MAX, ""));
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {THREAD_COLUMNS} FROM threads t WHERE t.user_id = $1 \
                     AND (t.last_active_at < $2 OR (t.last_active_at = $2 AND t.id < $3)) \
                     ORDER BY t.last_active_at DESC, t.id DESC LIMIT $4"
                )))
                .bind(user)
                .bind(active)
                .bind(id)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(thread_record).collect()
            }

            async fn thread(&self, user: &str, thread_id: &str) -> Result<Option<ThreadRecord>, Error> {
                let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {THREAD_COLUMNS} FROM threads t WHERE t.user_id = $1 AND t.id = $2"
                )))
                .bind(user)
                .bind(thread_id)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(thread_record).transpose()
            }

            async fn set_thread_title(
                &self,
                user: &str,
                thread_id: &str,
                title: Option<&str>,
            ) -> Result<bool, Error> {
                let result = sqlx::query("UPDATE threads SET title = $1 WHERE id = $2 AND user_id = $3")
                    .bind(title)
                    .bind(thread_id)
                    .bind(user)
                    .execute(&self.pool)
                    .await?;
                Ok(result.rows_affected() == 1)
            }

            async fn pending_tool_calls(&self, thread_id: &str) -> Result<Vec<PendingToolCall>, Error> {
                let rows = sqlx::query(
                    "SELECT id, name, arguments, run_id, asked_at FROM tool_calls \
                     WHERE thread_id = $1 AND closed_by IS NULL ORDER BY asked_at, id",
                )
                .bind(thread_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|row| {
                        Ok(PendingToolCall {
                            tool_call_id: row.try_get("id")?,
                            name: row.try_get("name")?,
                            arguments: row.try_get("arguments")?,
                            run_id: row.try_get("run_id")?,
                            asked_at: row.try_get("asked_at")?,
                        })
                    })
                    .collect()
            }

            async fn delete_thread(&self, user: &str, thread_id: &str) -> Result<DeletedThread, Error> {
                // Locked against every write of the thread (an accept
                // waits, or sees it gone and starts a new one).
                let mut tx = self.begin_locked(thread_id).await?;
                let owner: Option<String> = sqlx::query_scalar("SELECT user_id FROM threads WHERE id = $1")
                    .bind(thread_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                if owner.as_deref() != Some(user) {
                    return Err(Error::ThreadNotFound);
                }
                let job: Option<String> = sqlx::query_scalar("SELECT id FROM automation_jobs WHERE thread_id = $1 LIMIT 1")
                    .bind(thread_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                if let Some(job_id) = job {
                    return Err(Error::ThreadOfJob { job_id });
                }
                let active: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM runs WHERE thread_id = $1 AND status IN ('queued', 'running')",
                )
                .bind(thread_id)
                .fetch_one(&mut *tx)
                .await?;
                if active > 0 {
                    return Err(Error::ThreadBusy);
                }
                // The attachments its turns refer to, less those another of
                // the owner's threads refers to too: recorded with each
                // thread when its turns were accepted (`attachment_refs`,
                // the owner's own attachments only), so this is two index
                // reads per attachment, not a scan of the owner's messages
                // under the write lock.
                let attachments: Vec<String> = sqlx::query_scalar(
                    "DELETE FROM attachments WHERE user_id = $1 AND id IN ( \
                       SELECT r.attachment_id FROM attachment_refs r WHERE r.thread_id = $2 \
                       AND NOT EXISTS (SELECT 1 FROM attachment_refs o \
                                       WHERE o.attachment_id = r.attachment_id AND o.thread_id <> $2)) \
                     RETURNING id",
                )
                .bind(user)
                .bind(thread_id)
                .fetch_all(&mut *tx)
                .await?;
                sqlx::query("DELETE FROM attachment_refs WHERE thread_id = $1")
                    .bind(thread_id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("DELETE FROM run_events WHERE task_id IN (SELECT task_id FROM runs WHERE thread_id = $1)")
                    .bind(thread_id)
                    .execute(&mut *tx)
                    .await?;
                let runs = sqlx::query("DELETE FROM runs WHERE thread_id = $1")
                    .bind(thread_id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                let messages = sqlx::query("DELETE FROM messages WHERE thread_id = $1")
                    .bind(thread_id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                sqlx::query("DELETE FROM tool_calls WHERE thread_id = $1")
                    .bind(thread_id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("DELETE FROM threads WHERE id = $1")
                    .bind(thread_id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                self.remove_attachment_bytes(&attachments).await;
                Ok(DeletedThread {
                    runs,
                    messages,
                    attachments,
                })
            }
        }

        /// A thread's columns as [`thread_record`] reads them (`t` is the
        /// thread).
        const THREAD_COLUMNS: &str = "t.id, t.title, t.derived_title, t.created_at, t.last_active_at, \
            (SELECT r.run_id FROM runs r WHERE r.thread_id = t.id AND r.status IN ('queued', 'running') \
             ORDER BY r.created_at LIMIT 1) AS active_run, \
            (SELECT j.id FROM automation_jobs j WHERE j.thread_id = t.id LIMIT 1) AS job_id";

        impl $store {
            /// Names the threads stored before names were stored with them
            /// (`derived_title`, from their first user message), in pages:
            /// once a thread has a user message its name is never NULL
            /// again, so after the first start this finds nothing.
            pub(in crate::store) async fn fill_derived_titles(&self) -> Result<u64, Error> {
                let mut named = 0;
                loop {
                    let rows = sqlx::query(
                        "SELECT t.id, (SELECT m.body FROM messages m WHERE m.thread_id = t.id \
                         AND m.role = 'user' ORDER BY m.seq LIMIT 1) AS first FROM threads t \
                         WHERE t.derived_title IS NULL AND EXISTS (SELECT 1 FROM messages m \
                         WHERE m.thread_id = t.id AND m.role = 'user') LIMIT 256",
                    )
                    .fetch_all(&self.pool)
                    .await?;
                    if rows.is_empty() {
                        return Ok(named);
                    }
                    for row in &rows {
                        let id: String = row.try_get("id")?;
                        let body: Option<String> = row.try_get("first")?;
                        let title = match body.map(|b| serde_json::from_str::<agwire_core::Message>(&b)) {
                            Some(Ok(agwire_core::Message::User(user))) => crate::threads::derived_title(&user),
                            _ => String::new(),
                        };
                        sqlx::query("UPDATE threads SET derived_title = $1 WHERE id = $2 AND derived_title IS NULL")
                            .bind(title)
                            .bind(id)
                            .execute(&self.pool)
                            .await?;
                        named += 1;
                    }
                }
            }
        }

        /// A message row (`seq`, `body`, `created_at`, `ui_schema`).
        fn stored_message(row: &$row) -> Result<StoredMessage, Error> {
            let body: String = row.try_get("body")?;
            Ok(StoredMessage {
                seq: row.try_get("seq")?,
                message: serde_json::from_str(&body)?,
                created_at: row.try_get("created_at")?,
                ui_schema: row
                    .try_get::<Option<String>, _>("ui_schema")?
                    .and_then(|u| serde_json::from_str(&u).ok()),
            })
        }

        fn thread_record(row: &$row) -> Result<ThreadRecord, Error> {
            Ok(ThreadRecord {
                thread_id: row.try_get("id")?,
                title: row.try_get("title")?,
                derived_title: row.try_get("derived_title")?,
                created_at: row.try_get("created_at")?,
                last_active_at: row.try_get("last_active_at")?,
                active_run_id: row.try_get("active_run")?,
                job_id: row.try_get("job_id")?,
            })
        }

        #[async_trait]
        impl ProfileStore for $store {
            async fn settings(
                &self,
                user: &str,
            ) -> Result<serde_json::Map<String, serde_json::Value>, Error> {
                let text: Option<String> = sqlx::query_scalar(crate::store::records::SETTINGS)
                    .bind(user)
                    .fetch_optional(&self.pool)
                    .await?;
                Ok(match text {
                    Some(text) => serde_json::from_str(&text)?,
                    None => serde_json::Map::new(),
                })
            }

            async fn set_settings(
                &self,
                user: &str,
                settings: &serde_json::Map<String, serde_json::Value>,
                now_ms: i64,
            ) -> Result<(), Error> {
                sqlx::query(
                    "INSERT INTO users (id, settings, updated_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (id) DO UPDATE SET settings = $2, updated_at = $3",
                )
                .bind(user)
                .bind(serde_json::to_string(settings)?)
                .bind(now_ms)
                .execute(&self.pool)
                .await?;
                Ok(())
            }
        }

        #[async_trait]
        impl CalendarStore for $store {
            async fn put_calendar_event(&self, event: &CalendarEvent, now_ms: i64) -> Result<bool, Error> {
                let result = sqlx::query("INSERT INTO calendar_events (id, user_id, title, start_ms, end_ms, timezone, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $7) \
                     ON CONFLICT (id) DO UPDATE SET title = $3, start_ms = $4, end_ms = $5, timezone = $6, updated_at = $7 \
                     WHERE calendar_events.user_id = EXCLUDED.user_id",
                )
                .bind(&event.id)
                .bind(&event.user_id)
                .bind(&event.title)
                .bind(event.start_ms)
                .bind(event.end_ms)
                .bind(&event.timezone)
                .bind(now_ms)
                .execute(&self.pool)
                .await?;
                Ok(result.rows_affected() == 1)
            }

            async fn calendar_event(&self, user: &str, id: &str) -> Result<Option<CalendarEvent>, Error> {
                let row = sqlx::query("SELECT id, user_id, title, start_ms, end_ms, timezone FROM calendar_events WHERE user_id = $1 AND id = $2",
                )
                .bind(user)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
                Ok(row.as_ref().map(calendar_event))
            }

            async fn delete_calendar_event(&self, user: &str, id: &str) -> Result<bool, Error> {
                let result = sqlx::query("DELETE FROM calendar_events WHERE user_id = $1 AND id = $2")
                    .bind(user)
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                Ok(result.rows_affected() == 1)
            }

            async fn calendar_events(
                &self,
                user: &str,
                from_ms: i64,
                to_ms: i64,
                limit: u32,
            ) -> Result<Vec<CalendarEvent>, Error> {
                let rows = sqlx::query(
                    "SELECT id, user_id, title, start_ms, end_ms, timezone FROM calendar_events \
                     WHERE user_id = $1 AND start_ms < $2 AND end_ms > $3 ORDER BY start_ms, id LIMIT $4",
                )
                .bind(user)
                .bind(to_ms)
                .bind(from_ms)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await?;
                Ok(rows.iter().map(calendar_event).collect())
            }
        }

        fn calendar_event(row: &$row) -> CalendarEvent {
            CalendarEvent {
                id: row.get("id"),
                user_id: row.get("user_id"),
                title: row.get("title"),
                start_ms: row.get("start_ms"),
                end_ms: row.get("end_ms"),
                timezone: row.get("timezone"),
            }
        }

        const JOB_COLUMNS: &str = "id, user_id, name, schedule, timezone, prompt, config, enabled, thread_id, next_run_at, created_at, updated_at";

        fn job(row: &$row) -> JobRecord {
            JobRecord {
                id: row.get("id"),
                user_id: row.get("user_id"),
                name: row.get("name"),
                schedule: row.get("schedule"),
                timezone: row.get("timezone"),
                prompt: row.get("prompt"),
                config: row.get("config"),
                enabled: row.get("enabled"),
                thread_id: row.get("thread_id"),
                next_run_at: row.get("next_run_at"),
                created_at: row.get("created_at"),
                updated_at: row.get("updated_at"),
            }
        }

        #[async_trait]
        impl JobStore for $store {
            async fn create_job(&self, job: &JobRecord) -> Result<(), Error> {
                let mut tx = self.pool.begin().await?;
                let inserted = sqlx::query(
                    "INSERT INTO threads (id, user_id, created_at, last_active_at) VALUES ($1, $2, $3, $3) \
                     ON CONFLICT (id) DO NOTHING",
                )
                .bind(&job.thread_id)
                .bind(&job.user_id)
                .bind(job.created_at)
                .execute(&mut *tx)
                .await?;
                if inserted.rows_affected() != 1 {
                    return Err(Error::JobThreadTaken);
                }
                sqlx::query(sqlx::AssertSqlSafe(format!("INSERT INTO automation_jobs ({JOB_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
                )))
                .bind(&job.id)
                .bind(&job.user_id)
                .bind(&job.name)
                .bind(&job.schedule)
                .bind(&job.timezone)
                .bind(&job.prompt)
                .bind(&job.config)
                .bind(job.enabled)
                .bind(&job.thread_id)
                .bind(job.next_run_at)
                .bind(job.created_at)
                .bind(job.updated_at)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn update_job(&self, job: &JobRecord) -> Result<bool, Error> {
                let result = sqlx::query("UPDATE automation_jobs SET name = $1, schedule = $2, timezone = $3, prompt = $4, config = $5, \
                     enabled = $6, next_run_at = $7, updated_at = $8 WHERE id = $9 AND user_id = $10",
                )
                .bind(&job.name)
                .bind(&job.schedule)
                .bind(&job.timezone)
                .bind(&job.prompt)
                .bind(&job.config)
                .bind(job.enabled)
                .bind(job.next_run_at)
                .bind(job.updated_at)
                .bind(&job.id)
                .bind(&job.user_id)
                .execute(&self.pool)
                .await?;
                Ok(result.rows_affected() == 1)
            }

            async fn job(&self, user: &str, id: &str) -> Result<Option<JobRecord>, Error> {
                let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {JOB_COLUMNS} FROM automation_jobs WHERE user_id = $1 AND id = $2"
                )))
                .bind(user)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
                Ok(row.as_ref().map(job))
            }

            async fn job_of_thread(&self, user: &str, thread_id: &str) -> Result<Option<JobRecord>, Error> {
                let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {JOB_COLUMNS} FROM automation_jobs WHERE user_id = $1 AND thread_id = $2"
                )))
                .bind(user)
                .bind(thread_id)
                .fetch_optional(&self.pool)
                .await?;
                Ok(row.as_ref().map(job))
            }

            async fn jobs(&self, user: &str) -> Result<Vec<JobRecord>, Error> {
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {JOB_COLUMNS} FROM automation_jobs WHERE user_id = $1 ORDER BY created_at, id"
                )))
                .bind(user)
                .fetch_all(&self.pool)
                .await?;
                Ok(rows.iter().map(job).collect())
            }

            async fn delete_job(&self, user: &str, id: &str) -> Result<bool, Error> {
                let result = sqlx::query("DELETE FROM automation_jobs WHERE user_id = $1 AND id = $2")
                    .bind(user)
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                Ok(result.rows_affected() == 1)
            }

            async fn due_jobs(&self, now_ms: i64, limit: u32) -> Result<Vec<JobRecord>, Error> {
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {JOB_COLUMNS} FROM automation_jobs WHERE enabled AND next_run_at <= $1 \
                     ORDER BY next_run_at LIMIT $2"
                )))
                .bind(now_ms)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await?;
                Ok(rows.iter().map(job).collect())
            }

            async fn advance_job(&self, id: &str, due: i64, next: Option<i64>) -> Result<bool, Error> {
                let result = sqlx::query("UPDATE automation_jobs SET next_run_at = $1 WHERE id = $2 AND next_run_at = $3 AND enabled",
                )
                .bind(next)
                .bind(id)
                .bind(due)
                .execute(&self.pool)
                .await?;
                Ok(result.rows_affected() == 1)
            }
        }
    };
}

pub(super) use shared_records;

/// The run reads both backends answer with the same SQL, as inherent
/// methods their `RunStore` impls call (`RUN_COLUMNS` and `record` come
/// with them).
macro_rules! shared_run_reads {
    ($store:ty, $row:ty) => {
        const RUN_COLUMNS: &str = "task_id, user_id, thread_id, run_id, status, error, usage, created_at, started_at, finished_at";

        fn record(row: &$row) -> Result<RunRecord, Error> {
            Ok(RunRecord {
                task_id: row.try_get("task_id")?,
                user_id: row.try_get("user_id")?,
                thread_id: row.try_get("thread_id")?,
                run_id: row.try_get("run_id")?,
                status: row.try_get::<String, _>("status")?.parse()?,
                error: row.try_get("error")?,
                usage: row.try_get("usage")?,
                created_at: row.try_get("created_at")?,
                started_at: row.try_get("started_at")?,
                finished_at: row.try_get("finished_at")?,
            })
        }

        impl $store {
            async fn read_events_after(
                &self,
                task_id: &str,
                after: u64,
            ) -> Result<Vec<(u64, Event)>, Error> {
                let rows = sqlx::query(
                    "SELECT seq, event FROM run_events WHERE task_id = $1 AND seq > $2 ORDER BY seq",
                )
                .bind(task_id)
                .bind(i64::try_from(after).unwrap_or(i64::MAX))
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|row| {
                        let seq: i64 = row.try_get("seq")?;
                        let text: String = row.try_get("event")?;
                        let event = Event::from_json(&text)?.value;
                        Ok((u64::try_from(seq).unwrap_or(0), event))
                    })
                    .collect()
            }

            async fn read_run(&self, user: &str, run_id: &str) -> Result<Option<RunRecord>, Error> {
                let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {RUN_COLUMNS} FROM runs WHERE user_id = $1 AND run_id = $2"
                )))
                .bind(user)
                .bind(run_id)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(record).transpose()
            }

            async fn read_run_status(&self, task_id: &str) -> Result<Option<RunStatus>, Error> {
                let status: Option<String> =
                    sqlx::query_scalar("SELECT status FROM runs WHERE task_id = $1")
                        .bind(task_id)
                        .fetch_optional(&self.pool)
                        .await?;
                status.map(|s| s.parse()).transpose()
            }

            async fn read_status_counts(&self) -> Result<Vec<(RunStatus, i64)>, Error> {
                let rows = sqlx::query("SELECT status, COUNT(*) AS n FROM runs GROUP BY status")
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter()
                    .map(|row| Ok((row.try_get::<String, _>("status")?.parse()?, row.try_get("n")?)))
                    .collect()
            }
        }
    };
}

pub(super) use shared_run_reads;
