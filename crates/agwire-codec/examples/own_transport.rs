//! AG-UI events from your own transport: SSE bytes arrive in pieces of any
//! size (here from stdin; in an app from a WebSocket, a queue, a file), are
//! decoded, verified by the official client's rules and folded into the
//! conversation — the text printed as it streams, the outcome at the end.
//!
//! ```sh
//! curl -sN -X POST http://127.0.0.1:8080/api/v1/agui -H 'content-type: application/json' \
//!   -d '{"threadId":"t1","runId":"r1","messages":[{"id":"u1","role":"user","content":"hi"}]}' \
//!   | cargo run -p agwire-codec --example own_transport
//! ```
//!
//! Exits 1, naming the event, on a stream the official client would reject.

use std::io::{Read, Write};

use agwire_codec::sse::SseEventDecoder;
use agwire_core::apply::{RunEnd, Session};
use agwire_core::pipeline::Pipeline;
use agwire_core::{Event, Message};

/// Why a stream was refused.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The bytes are not SSE events.
    Decode(agwire_codec::Error),
    /// An event the official client rejects (the 1-based index of the event).
    Verify(usize, agwire_core::Error),
    /// The transport failed.
    Io(std::io::Error),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Decode(e) => write!(f, "not an AG-UI SSE stream: {e}"),
            Refused::Verify(n, e) => write!(f, "event {n} refused: {e}"),
            Refused::Io(e) => write!(f, "reading: {e}"),
        }
    }
}

/// Reads `input` to its end through the decoder and the official client's
/// pipeline; writes each text delta to `out` as it arrives. Returns the
/// folded session: messages, state, how the run ended.
pub(crate) fn follow(mut input: impl Read, out: &mut impl Write) -> Result<Session, Refused> {
    let mut decoder = SseEventDecoder::new();
    // The thread is the first RUN_STARTED's: the pipeline starts with no
    // messages and an empty state, as a new conversation does.
    let mut pipeline: Option<Pipeline> = None;
    let mut seen = 0;
    let mut events = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = input.read(&mut chunk).map_err(Refused::Io)?;
        if n == 0 {
            decoder.finish(&mut events).map_err(Refused::Decode)?;
        } else {
            decoder
                .push(&chunk[..n], &mut events)
                .map_err(Refused::Decode)?;
        }
        for event in events.drain(..) {
            seen += 1;
            let pipeline = pipeline.get_or_insert_with(|| {
                let thread = match &event {
                    Event::RunStarted(started) => started.thread_id.clone(),
                    _ => String::new(),
                };
                Pipeline::new(thread, Vec::new(), serde_json::json!({}))
            });
            let delivered = pipeline.push(event).map_err(|e| Refused::Verify(seen, e))?;
            for event in delivered {
                if let Event::TextMessageContent(content) = event {
                    let _ = out.write_all(content.delta.as_bytes());
                    let _ = out.flush();
                }
            }
        }
        if n == 0 {
            break;
        }
    }
    Ok(pipeline.map(Pipeline::into_session).unwrap_or_default())
}

fn main() -> std::process::ExitCode {
    let mut stdout = std::io::stdout();
    match follow(std::io::stdin().lock(), &mut stdout) {
        Ok(session) => {
            let ended = match &session.last_run {
                Some(RunEnd::Finished { .. }) => "finished".to_owned(),
                Some(RunEnd::Errored { message, .. }) => format!("failed: {message}"),
                None => "no run".to_owned(),
            };
            let assistant = session
                .messages
                .iter()
                .filter(|m| matches!(m, Message::Assistant(_)))
                .count();
            let _ = writeln!(
                stdout,
                "\n-- {ended}; {} messages ({assistant} from the assistant); state {}",
                session.messages.len(),
                session.state
            );
            std::process::ExitCode::SUCCESS
        }
        Err(refused) => {
            let _ = writeln!(std::io::stderr(), "{refused}");
            std::process::ExitCode::FAILURE
        }
    }
}
