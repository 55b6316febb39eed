//! The rules above the backends, computed once and handed to them as data:
//! what a message is to history and to its thread's title, which
//! attachments a turn refers to, and a run's writes prepared for any
//! backend — everything that needs no database (the turn's messages, JSON
//! of the input, the events) is done by the caller, on its own task; each
//! backend only runs SQL.

use agwire_core::{Event, Message, RunAgentInput, RunFinishedOutcome};

use crate::error::Error;
use crate::run::RunStatus;
use crate::runs::{Ending, NewRun};

/// Characters of a first user message that name a thread without a title
/// (then "…").
pub const DERIVED_TITLE_CHARS: usize = 80;

/// The reference a stored message keeps in place of an attachment's URL.
pub const REFERENCE_PREFIX: &str = "attachment:";

/// Whether `id` is one an attachment can have: the UUIDs the service mints,
/// never a path.
pub fn is_attachment_id(id: &str) -> bool {
    uuid::Uuid::try_parse(id).is_ok()
}
/// What a user message would call its thread: the first line of its text,
/// cut to [`DERIVED_TITLE_CHARS`] (then "…"); empty when it has no text.
pub fn derived_title(first: &agwire_core::UserMessage) -> String {
    let text = first.content.text();
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if line.chars().count() <= DERIVED_TITLE_CHARS {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(DERIVED_TITLE_CHARS).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

/// Whether history shows a message: user messages, and assistant messages
/// that say something (one that only called tools is plumbing) — or that
/// carry a UI, which the store marks shown when it is given one. Decided
/// when the message is stored, so that a day is read by an index.
pub fn shown(message: &Message) -> bool {
    match message {
        Message::User(_) => true,
        Message::Assistant(a) => a.content.as_ref().is_some_and(|c| !c.is_empty()),
        _ => false,
    }
}

/// The attachments the images of user messages refer to (image parts whose
/// URL is `attachment:{id}`), each once, in order of first mention.
pub fn image_references<'a>(
    messages: impl IntoIterator<Item = &'a agwire_core::Message>,
) -> Vec<String> {
    use agwire_core::{Content, ContentPart, Message, PartSource};
    let mut ids: Vec<String> = Vec::new();
    for message in messages {
        let Message::User(user) = message else {
            continue;
        };
        let Content::Parts(parts) = &user.content else {
            continue;
        };
        for part in parts {
            if let ContentPart::Image(media) = part
                && let PartSource::Url { value, .. } = &media.source
                && let Some(id) = value.strip_prefix(REFERENCE_PREFIX)
                && is_attachment_id(id)
                && !ids.iter().any(|known| known == id)
            {
                ids.push(id.to_owned());
            }
        }
    }
    ids
}

/// A message as a row, with what reads of it need without parsing it.
#[derive(Debug, Clone)]
pub(crate) struct MessageRow {
    pub(crate) id: String,
    pub(crate) role: &'static str,
    /// Its AG-UI JSON.
    pub(crate) body: String,
    /// Whether day-scoped history shows it ([`shown`]; a
    /// UI given to it later shows it too).
    pub(crate) shown: bool,
    /// What it would call its thread, for a user message
    /// ([`derived_title`]): the thread's first user message
    /// names it, and the name is stored with the thread, so that listing
    /// threads never reads a message.
    pub(crate) title: Option<String>,
}

pub(crate) fn row(message: &Message) -> Result<MessageRow, Error> {
    Ok(MessageRow {
        id: message.id().to_owned(),
        role: message.role().as_str(),
        body: serde_json::to_string(message)?,
        shown: shown(message),
        title: match message {
            Message::User(user) => Some(derived_title(user)),
            _ => None,
        },
    })
}

/// A validated run, prepared for the writer.
pub(crate) struct Accept {
    /// The new run's task id (unused when the accept turns out a replay).
    pub(crate) task_id: String,
    pub(crate) user: String,
    pub(crate) thread_id: String,
    pub(crate) run_id: String,
    pub(crate) request_hash: String,
    pub(crate) input_json: String,
    pub(crate) mode: Option<&'static str>,
    /// [`crate::RunOptions::to_stored`].
    pub(crate) options: Option<String>,
    /// What to do when the thread has an active run.
    pub(crate) strategy: crate::MultitaskStrategy,
    /// The user's limits.
    pub(crate) quotas: crate::Quotas,
    pub(crate) dedupe: bool,
    /// The `toolCallId`s the turn's tool messages answer (see
    /// [`crate::RunStore::accept_run`]).
    pub(crate) answers: Vec<String>,
    /// Whether every one of `answers` must be pending (the agent-run API:
    /// a turn answers only what its thread asked, once); a whole history
    /// (the standard endpoint) settles those that are and ignores the rest.
    pub(crate) strict_answers: bool,
    /// The turn's messages to add (now, or when the run starts).
    pub(crate) candidates: Vec<MessageRow>,
    /// The attachments the turn's images refer to (`attachment:{id}`), each
    /// once: recorded with the thread, those of `user`'s own, so that
    /// deleting a thread finds what only it refers to without reading a
    /// message.
    pub(crate) attachments: Vec<String>,
    pub(crate) now_ms: i64,
    /// The run as its executor takes it, when the caller asked to start it
    /// (`NewRun::start`) — used if it does not wait.
    pub(crate) start: Option<crate::Claimed>,
}

impl Accept {
    pub(crate) fn prepare(run: &NewRun<'_>) -> Result<Self, Error> {
        let input: &RunAgentInput = run.input;
        let candidates: Vec<&Message> = if run.admission.whole_history {
            input.messages.iter().collect()
        } else {
            // The agent-run API sends exactly one user message — the turn's new one —
            // and may add tool messages answering the previous turn's
            // frontend tool calls. Those answers come before it in the
            // thread, where the conversation needs them.
            let answers = input
                .messages
                .iter()
                .filter(|m| matches!(m, Message::Tool(_)));
            let user = input
                .messages
                .iter()
                .filter(|m| matches!(m, Message::User(_)))
                .take(1);
            answers.chain(user).collect()
        };
        // Only a whole history is matched by id: a single-turn client may
        // reuse ids, and its message must never be dropped.
        let dedupe = run.admission.whole_history;
        let answers = candidates
            .iter()
            .filter_map(|m| match m {
                Message::Tool(tool) => Some(tool.tool_call_id.clone()),
                _ => None,
            })
            .collect();
        let task_id = uuid::Uuid::now_v7().to_string();
        let start = run.start.map(|_| crate::Claimed {
            task_id: task_id.clone(),
            user_id: run.user.to_owned(),
            input: input.clone(),
            mode: run.mode,
            options: run.options.clone(),
            briefing: None,
        });
        Ok(Self {
            task_id,
            user: run.user.to_owned(),
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
            request_hash: run.request_hash.to_owned(),
            input_json: serde_json::to_string(input)?,
            mode: run.mode.map(crate::run::RuntimeMode::as_str),
            options: run.options.to_stored()?,
            strategy: run.admission.strategy,
            quotas: run.quotas,
            dedupe,
            answers,
            strict_answers: !run.admission.whole_history,
            attachments: image_references(candidates.iter().copied()),
            candidates: candidates.into_iter().map(row).collect::<Result<_, _>>()?,
            now_ms: run.now_ms,
            start,
        })
    }
}

impl Accept {
    /// What the turn's first user message would call its thread.
    pub(crate) fn title(&self) -> Option<&str> {
        self.candidates.iter().find_map(|row| row.title.as_deref())
    }

    /// The history of the thread this turn created: its own messages, the
    /// latest [`HISTORY_WINDOW`](crate::HISTORY_WINDOW) of the
    /// [`HISTORY_ROLES`](crate::HISTORY_ROLES), oldest first — what reading
    /// the thread back would give, without the read.
    pub(crate) fn new_thread_history(&self) -> Vec<String> {
        history_of(&self.candidates)
    }

    /// The turn's messages as the `pending_messages` document of a run that
    /// waits (read back by [`pending`]); built only when one does.
    pub(crate) fn pending(&self) -> String {
        let mut document = format!(r#"{{"dedupe":{},"messages":["#, self.dedupe);
        for (i, row) in self.candidates.iter().enumerate() {
            if i > 0 {
                document.push(',');
            }
            document.push_str(&row.body);
        }
        document.push_str("]}");
        document
    }
}

/// A run's end, prepared for the writer.
pub(crate) struct End {
    pub(crate) status: RunStatus,
    pub(crate) error: Option<String>,
    pub(crate) usage: Option<String>,
    /// What the usage adds up to, for the user's count of the day.
    pub(crate) tokens: i64,
    /// The events before the terminal one not yet in the log.
    pub(crate) events: Vec<String>,
    pub(crate) terminal: String,
    pub(crate) output: Vec<MessageRow>,
    /// The last assistant message's id, when the turn's UI goes on it.
    pub(crate) ui_schema: Option<(String, String)>,
    /// The frontend tool calls the run leaves for its client to answer.
    pub(crate) asked: Vec<AskedCall>,
    /// When those expire.
    pub(crate) calls_expire_at: Option<i64>,
    pub(crate) now_ms: i64,
}

/// A tool call a run left unanswered: id, name, argument text.
pub(crate) type AskedCall = (String, String, String);

/// The tool calls a run leaves for its client: those its `RUN_FINISHED`
/// names pending — in `pendingToolCallIds`, or as the `toolCallId` of an
/// interrupt it ended on (or, for a finish without an outcome, every call
/// of its output without an answer there). A run that failed or was
/// cancelled leaves none.
fn asked(ending: &Ending<'_>) -> Vec<AskedCall> {
    let Event::RunFinished(finished) = ending.terminal else {
        return Vec::new();
    };
    let answered: Vec<&str> = ending
        .output
        .iter()
        .filter_map(|m| match m {
            Message::Tool(tool) => Some(tool.tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    let pending = |id: &str| match &finished.outcome {
        None => !answered.contains(&id),
        Some(RunFinishedOutcome::Success {
            pending_tool_call_ids,
        }) => pending_tool_call_ids
            .as_ref()
            .is_some_and(|ids| ids.iter().any(|p| p == id)),
        Some(RunFinishedOutcome::Interrupt { interrupts }) => interrupts
            .iter()
            .any(|i| i.tool_call_id.as_deref() == Some(id)),
        Some(RunFinishedOutcome::Cancelled) => false,
    };
    ending
        .output
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(assistant) => assistant.tool_calls.as_ref(),
            _ => None,
        })
        .flatten()
        .filter(|call| pending(&call.id))
        .map(|call| {
            (
                call.id.clone(),
                call.function.name.clone(),
                call.function.arguments.clone(),
            )
        })
        .collect()
}

impl End {
    pub(crate) fn prepare(ending: &Ending<'_>, now_ms: i64) -> Result<Self, Error> {
        let last_answer = ending
            .output
            .iter()
            .rev()
            .find(|m| matches!(m, Message::Assistant(_)));
        Ok(Self {
            status: ending.status,
            error: ending.error.map(serde_json::Value::to_string),
            usage: ending.usage.map(serde_json::Value::to_string),
            tokens: i64::try_from(ending.tokens).unwrap_or(i64::MAX),
            events: ending.events.iter().map(Event::to_json).collect(),
            terminal: ending.terminal.to_json(),
            output: ending.output.iter().map(row).collect::<Result<_, _>>()?,
            ui_schema: ending
                .ui_schema
                .zip(last_answer)
                .map(|(schema, answer)| (answer.id().to_owned(), schema.to_string())),
            asked: asked(ending),
            calls_expire_at: ending.calls_expire_at,
            now_ms,
        })
    }
}

/// A new thread's history from its turn's messages (see
/// [`Accept::new_thread_history`]): the latest
/// [`HISTORY_WINDOW`](crate::HISTORY_WINDOW) of the
/// [`HISTORY_ROLES`](crate::HISTORY_ROLES), oldest first.
pub(crate) fn history_of(candidates: &[MessageRow]) -> Vec<String> {
    let mut history: Vec<String> = candidates
        .iter()
        .rev()
        .filter(|row| crate::HISTORY_ROLES.contains(&row.role))
        .take(crate::HISTORY_WINDOW as usize)
        .map(|row| row.body.clone())
        .collect();
    history.reverse();
    history
}

/// The waiting messages of a run (its `pending_messages` document): whether
/// to match them by id, and the rows.
pub(crate) fn pending(document: &str) -> Result<(bool, Vec<MessageRow>), Error> {
    #[derive(serde::Deserialize)]
    struct Pending {
        dedupe: bool,
        messages: Vec<Message>,
    }
    let pending: Pending = serde_json::from_str(document)?;
    let rows = pending.messages.iter().map(row).collect::<Result<_, _>>()?;
    Ok((pending.dedupe, rows))
}

/// A claimed run from its stored columns.
pub(crate) fn claimed(
    task_id: String,
    user_id: String,
    input: &str,
    mode: Option<&str>,
    options: Option<&str>,
) -> Result<crate::Claimed, Error> {
    use crate::run::RuntimeMode;
    Ok(crate::Claimed {
        options: stored_options(&task_id, options),
        task_id,
        user_id,
        input: serde_json::from_str(input)?,
        mode: mode.and_then(RuntimeMode::parse),
        briefing: None,
    })
}

/// A run's stored options, read back. Options a run was accepted with were
/// validated then; one this binary cannot read back (written by a newer
/// one, say) is dropped with a warning rather than failing the run.
pub(crate) fn stored_options(task_id: &str, stored: Option<&str>) -> crate::RunOptions {
    crate::RunOptions::from_stored(stored).unwrap_or_else(|error| {
        tracing::warn!(task_id, %error, "a run's stored options could not be read; running without them");
        crate::RunOptions::default()
    })
}
