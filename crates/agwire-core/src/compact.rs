//! Compaction: the short form of a stream.
//!
//! [`compact_events`] gives the same result as the reference client's
//! `compactEvents` (`@ag-ui/client` 1.0.0): each text message's and each tool
//! call's deltas become one, and the state events of a run collapse into one
//! `STATE_SNAPSHOT` when the window holds a snapshot.
//!
//! ```
//! use agwire_core::Event;
//! use agwire_core::compact::compact_events;
//!
//! let events: Vec<Event> = [
//!     r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}"#,
//!     r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"Hel"}"#,
//!     r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"lo"}"#,
//!     r#"{"type":"TEXT_MESSAGE_END","messageId":"m"}"#,
//! ]
//! .iter()
//! .map(|line| Event::from_json(line).unwrap().value)
//! .collect();
//! let compacted = compact_events(&events);
//! assert_eq!(compacted.len(), 3);
//! assert!(compacted[1].to_json().contains(r#""delta":"Hello""#));
//! ```

use serde_json::{Map, Value};

use crate::apply::merge_metadata;
use crate::event::{
    BaseEvent, Event, StateSnapshotEvent, TextMessageContentEvent, ToolCallArgsEvent,
};
use crate::patch::reference::pretty;
use crate::patch::{Patched, patch_like_reference};
use crate::{Metadata, Warning, WarningKind};

/// The short form of a stream (merged text / tool-argument deltas, state deltas
/// collapsed into a snapshot), with the same semantics as the official
/// client's `compactEvents`.
///
/// Like that function it reorders: a message's (or tool call's) events are
/// emitted together when its end arrives, followed by the other events that
/// arrived while it was open. State events are gathered per run and emitted
/// just before the next `RUN_STARTED`, `RUN_FINISHED` or `RUN_ERROR` (or at the
/// end); a window that holds a `STATE_SNAPSHOT` becomes one snapshot of the
/// state it ends with, and one without is kept as it is, since its deltas are
/// relative to a state the window never saw. A delta that cannot be applied
/// while collapsing is skipped with a warning, through `tracing`.
///
/// The synthesized events carry the merged metadata of the events they
/// replace and nothing else (no `subagentRunId`, timestamp or `rawEvent`), as
/// in the reference client.
pub fn compact_events(events: &[Event]) -> Vec<Event> {
    let mut compacted = Vec::with_capacity(events.len());
    let mut texts: Vec<Pending> = Vec::new();
    let mut tools: Vec<Pending> = Vec::new();
    let mut state: Vec<&Event> = Vec::new();

    for event in events {
        match event {
            Event::TextMessageStart(e) => pending(&mut texts, &e.message_id).start(event),
            Event::TextMessageContent(e) => {
                pending(&mut texts, &e.message_id).delta(&e.delta, event.metadata());
            }
            Event::TextMessageEnd(e) => {
                let at = position(&mut texts, &e.message_id);
                texts
                    .remove(at)
                    .flush(Stream::Text, Some(event), &mut compacted);
            }
            Event::ToolCallStart(e) => pending(&mut tools, &e.tool_call_id).start(event),
            Event::ToolCallArgs(e) => {
                pending(&mut tools, &e.tool_call_id).delta(&e.delta, event.metadata());
            }
            Event::ToolCallEnd(e) => {
                let at = position(&mut tools, &e.tool_call_id);
                tools
                    .remove(at)
                    .flush(Stream::Tool, Some(event), &mut compacted);
            }
            Event::RunStarted(_) | Event::RunFinished(_) | Event::RunError(_) => {
                flush_state(&state, &mut compacted);
                state.clear();
                compacted.push(event.clone());
            }
            Event::StateSnapshot(_) | Event::StateDelta(_) => state.push(event),
            other => {
                // An event arriving while a message or tool call is open waits
                // for that one's end, so each stream's events stay together.
                let open = texts
                    .iter_mut()
                    .chain(tools.iter_mut())
                    .find(|p| p.start.is_some());
                match open {
                    Some(open) => open.others.push(other.clone()),
                    None => compacted.push(other.clone()),
                }
            }
        }
    }

    for open in texts {
        open.flush(Stream::Text, None, &mut compacted);
    }
    for open in tools {
        open.flush(Stream::Tool, None, &mut compacted);
    }
    flush_state(&state, &mut compacted);
    compacted
}

/// Which kind of stream a [`Pending`] buffers.
#[derive(Debug, Clone, Copy)]
enum Stream {
    Text,
    Tool,
}

/// The buffered events of one text message or tool call.
#[derive(Debug)]
struct Pending {
    id: String,
    start: Option<Event>,
    /// The deltas so far, concatenated, and whether there were any.
    deltas: String,
    has_deltas: bool,
    /// Metadata of the deltas, and of starts replayed after them, in arrival order.
    post_start_metadata: Option<Metadata>,
    /// Events that arrived while this one was open.
    others: Vec<Event>,
}

/// The open stream with `id`, opened when there is none. Streams are kept in
/// the order they were opened, which decides where an interleaved event waits.
fn pending<'a>(open: &'a mut Vec<Pending>, id: &str) -> &'a mut Pending {
    let at = position(open, id);
    &mut open[at]
}

fn position(open: &mut Vec<Pending>, id: &str) -> usize {
    if let Some(at) = open.iter().position(|p| p.id == id) {
        return at;
    }
    open.push(Pending {
        id: id.to_owned(),
        start: None,
        deltas: String::new(),
        has_deltas: false,
        post_start_metadata: None,
        others: Vec::new(),
    });
    open.len() - 1
}

impl Pending {
    fn start(&mut self, event: &Event) {
        let previous = self.start.as_ref().and_then(Event::metadata);
        let mut start = event.clone();
        let metadata = if self.has_deltas {
            // The start is emitted ahead of the collapsed deltas, so a start
            // replayed after them keeps its fields but its metadata is merged
            // after theirs, where it arrived.
            merge_metadata(&mut self.post_start_metadata, event.metadata());
            previous.cloned()
        } else if self.start.is_some() {
            // A start replayed before any delta merges into the first, as two
            // uncompacted starts would merge into one message.
            let mut merged = previous.cloned();
            merge_metadata(&mut merged, event.metadata());
            merged
        } else {
            event.metadata().cloned()
        };
        if let Some(base) = start.base_mut() {
            base.metadata = metadata.map(Box::new);
        }
        self.start = Some(start);
    }

    fn delta(&mut self, delta: &str, metadata: Option<&Metadata>) {
        self.deltas.push_str(delta);
        self.has_deltas = true;
        merge_metadata(&mut self.post_start_metadata, metadata);
    }

    fn flush(self, stream: Stream, end: Option<&Event>, out: &mut Vec<Event>) {
        out.extend(self.start);
        if self.has_deltas {
            let base = BaseEvent {
                metadata: self.post_start_metadata.map(Box::new),
                ..BaseEvent::default()
            };
            out.push(match stream {
                Stream::Text => Event::TextMessageContent(TextMessageContentEvent {
                    message_id: self.id,
                    delta: self.deltas,
                    subagent_run_id: None,
                    base,
                }),
                Stream::Tool => Event::ToolCallArgs(ToolCallArgsEvent {
                    tool_call_id: self.id,
                    delta: self.deltas,
                    subagent_run_id: None,
                    base,
                }),
            });
        }
        out.extend(end.cloned());
        out.extend(self.others);
    }
}

/// Emits a run's state events: one snapshot of the state they end with when
/// they hold a snapshot (everything before the last one is overwritten by it),
/// or the events as they are when they do not.
fn flush_state(events: &[&Event], out: &mut Vec<Event>) {
    let Some(last_snapshot) = events
        .iter()
        .rposition(|e| matches!(e, Event::StateSnapshot(_)))
    else {
        out.extend(events.iter().map(|&e| e.clone()));
        return;
    };

    // `None` is the reference client's `undefined`, which the next patch
    // reads as `null`.
    let mut state: Option<Value> = Some(Value::Object(Map::new()));
    for event in &events[last_snapshot..] {
        match event {
            Event::StateSnapshot(e) => state = Some(e.snapshot.clone()),
            Event::StateDelta(e) => {
                let was_undefined = state.is_none();
                let doc = state.get_or_insert(Value::Null);
                match patch_like_reference(doc, &e.delta) {
                    Ok(Patched::Document) => {}
                    Ok(Patched::Undefined) => state = None,
                    Err(error) => {
                        let current = if was_undefined {
                            "undefined".to_owned()
                        } else {
                            pretty(doc)
                        };
                        Warning::new(
                            WarningKind::StatePatchFailed,
                            format!(
                                "[ag-ui][compact] Failed to apply state patch while compacting:\nCurrent state: {current}\nPatch operations: {}\nError: {error}",
                                pretty(&e.delta),
                            ),
                        )
                        .trace();
                        if was_undefined {
                            state = None;
                        }
                    }
                }
            }
            _ => {}
        }
    }

    let mut metadata = None;
    for event in events {
        merge_metadata(&mut metadata, event.metadata());
    }
    out.push(Event::StateSnapshot(StateSnapshotEvent {
        snapshot: state.unwrap_or(Value::Null),
        subagent_run_id: None,
        base: BaseEvent {
            metadata: metadata.map(Box::new),
            ..BaseEvent::default()
        },
    }));
}
