//! The compatibility boundary: retired 0.x event shapes become their 1.x
//! equivalents before anything else sees them.
//!
//! Per-event legacy shapes (whole-field `null`s, `binary` content parts) are
//! handled by the decoder itself. What remains here is the one translation that
//! needs memory across events: `THINKING_*` → `REASONING_*`, where a 0.x producer
//! names nothing and the ids must be minted by the opener and reused by its
//! continuations.

use serde_json::{Map, Value};

use crate::content::{Content, ContentPart};
use crate::decode::{DecodeError, Decoded};
use crate::message::Message;
use crate::{Event, RunAgentInput, Warning, WarningKind};

/// Translates `THINKING_*` events; every other event passes through untouched.
#[derive(Debug, Clone, Default)]
pub struct CompatBoundary {
    span_id: Option<String>,
    message_id: Option<String>,
}

impl CompatBoundary {
    /// A boundary with no open thinking step.
    pub fn new() -> Self {
        Self::default()
    }

    /// Translates one event. A `THINKING_*` event becomes its `REASONING_*`
    /// equivalent (decoded leniently, so members the new event does not have are
    /// stripped with warnings); anything else is returned as is.
    pub fn translate(&mut self, event: Event) -> Result<Decoded<Event>, DecodeError> {
        let Event::Unknown(unknown) = event else {
            return Ok(Decoded {
                value: event,
                warnings: Vec::new(),
            });
        };
        let Value::Object(mut map) = unknown.value else {
            return Ok(Decoded {
                value: Event::Unknown(unknown),
                warnings: Vec::new(),
            });
        };
        let mut warnings = Vec::new();
        let target = match unknown.event_type.as_str() {
            "THINKING_START" => {
                let id = mint();
                self.span_id = Some(id.clone());
                if let Some(title) = map.remove("title") {
                    warnings.push(Warning::new(
                        WarningKind::LegacyTranslated,
                        format!(
                            "Dropping THINKING_START.title {title}: REASONING_START has no title field, so the span's label cannot be carried."
                        ),
                    ));
                }
                set_id(&mut map, id);
                "REASONING_START"
            }
            "THINKING_TEXT_MESSAGE_START" => {
                let id = mint();
                self.message_id = Some(id.clone());
                set_id(&mut map, id);
                map.insert("role".into(), Value::from("reasoning"));
                "REASONING_MESSAGE_START"
            }
            "THINKING_TEXT_MESSAGE_CONTENT" => {
                let id = continuation(
                    &self.message_id,
                    "THINKING_TEXT_MESSAGE_CONTENT",
                    &mut warnings,
                );
                set_id(&mut map, id);
                "REASONING_MESSAGE_CONTENT"
            }
            "THINKING_TEXT_MESSAGE_END" => {
                let id = continuation(&self.message_id, "THINKING_TEXT_MESSAGE_END", &mut warnings);
                self.message_id = None;
                set_id(&mut map, id);
                "REASONING_MESSAGE_END"
            }
            "THINKING_END" => {
                let id = continuation(&self.span_id, "THINKING_END", &mut warnings);
                self.span_id = None;
                set_id(&mut map, id);
                "REASONING_END"
            }
            _ => {
                return Ok(Decoded {
                    value: Event::Unknown(crate::UnknownEvent {
                        event_type: unknown.event_type,
                        value: Value::Object(map),
                    }),
                    warnings,
                });
            }
        };
        warnings.insert(
            0,
            Warning::new(
                WarningKind::LegacyTranslated,
                format!(
                    "Converting deprecated {} to {target}. The old shape leaves the protocol after its shim window.",
                    unknown.event_type
                ),
            ),
        );
        map.insert("type".into(), Value::from(target));
        let mut decoded = Event::from_value(Value::Object(map))?;
        warnings.append(&mut decoded.warnings);
        decoded.warnings = warnings;
        Ok(decoded)
    }
}

fn mint() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn set_id(map: &mut Map<String, Value>, id: String) {
    map.insert("messageId".into(), Value::String(id));
}

/// A continuation names nothing; without an opener there is no id to reuse, so
/// one is minted — and announced, because the verifier will then reject an id no
/// producer ever wrote, and the cause must be traceable.
fn continuation(established: &Option<String>, from: &str, warnings: &mut Vec<Warning>) -> String {
    if let Some(id) = established {
        return id.clone();
    }
    let minted = mint();
    warnings.push(Warning::new(
        WarningKind::LegacyTranslated,
        format!(
            "Minting a messageId ('{minted}') for {from}: no THINKING opener preceded it, so there was no id to continue."
        ),
    ));
    minted
}

/// The version-gated downgrades a consumer applies for a producer known to
/// speak at most some old version (its "peer ceiling", the official client's
/// `maxProtocolVersion`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerCeiling {
    /// Below 1.0: the producer predates `protocolVersion`.
    pub omits_protocol_version: bool,
    /// At most 0.0.57: no subagents (`SUBAGENT_*` dropped, `subagentRunId` stripped).
    pub predates_subagents: bool,
    /// At most 0.0.39: message content is a plain string and `parentRunId` unknown.
    pub predates_content_parts: bool,
}

impl PeerCeiling {
    /// The downgrades for a peer whose ceiling is `version` (dotted numeric,
    /// e.g. `"0.0.57"`); `None` when the version cannot be compared.
    pub fn parse(version: &str) -> Option<Self> {
        use crate::version::compare_versions;
        use std::cmp::Ordering::{Greater, Less};
        Some(Self {
            omits_protocol_version: compare_versions(version, "1.0")? == Less,
            predates_subagents: compare_versions(version, "0.0.57")? != Greater,
            predates_content_parts: compare_versions(version, "0.0.39")? != Greater,
        })
    }

    /// Adapts an outgoing input to the peer.
    pub fn downgrade_input(&self, input: &mut RunAgentInput) -> Vec<Warning> {
        let mut warnings = Vec::new();
        if self.omits_protocol_version {
            input.protocol_version = None;
        }
        if self.predates_subagents {
            for message in &mut input.messages {
                message.clear_subagent_run_id();
            }
        }
        if self.predates_content_parts {
            input.parent_run_id = None;
            for message in &mut input.messages {
                if let Some(w) = flatten_content(message) {
                    warnings.push(w);
                }
            }
        }
        warnings
    }

    /// Adapts an incoming event from the peer: `None` when it must be dropped.
    pub fn downgrade_event(&self, mut event: Event) -> (Option<Event>, Option<Warning>) {
        if !self.predates_subagents {
            return (Some(event), None);
        }
        if matches!(
            event,
            Event::SubagentStarted(_) | Event::SubagentFinished(_) | Event::SubagentError(_)
        ) {
            let warning = Warning::new(
                WarningKind::LegacyTranslated,
                format!(
                    "AG-UI is dropping {} because the target agent predates subagent support.",
                    event.type_name()
                ),
            );
            return (None, Some(warning));
        }
        event.clear_subagent_run_id();
        (Some(event), None)
    }
}

/// Joins the text parts of array content into one string, as a ≤ 0.0.39 peer
/// expects; media parts cannot be represented and are dropped, with a warning.
fn flatten_content(message: &mut Message) -> Option<Warning> {
    let content = match message {
        Message::User(m) => &mut m.content,
        Message::Tool(m) => &mut m.content,
        Message::Assistant(m) => {
            m.content.get_or_insert_with(String::new);
            return None;
        }
        _ => return None,
    };
    let Content::Parts(parts) = content else {
        return None;
    };
    let dropped: Vec<&str> = parts
        .iter()
        .filter(|p| !matches!(p, ContentPart::Text(_)))
        .map(ContentPart::kind)
        .collect();
    let warning = (!dropped.is_empty()).then(|| {
        Warning::new(
            WarningKind::LegacyTranslated,
            format!(
                "Flattening message content for a <=0.0.39 peer DROPS non-text parts ({}). The peer cannot receive them.",
                dropped.join(", ")
            ),
        )
    });
    let text: String = parts
        .iter()
        .filter_map(|p| match p {
            ContentPart::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    *content = Content::Text(text);
    warning
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventType;

    fn thinking(json: &str) -> Event {
        Event::from_json(json).unwrap().value
    }

    #[test]
    fn thinking_sequence_becomes_reasoning_with_paired_ids() {
        let mut boundary = CompatBoundary::new();
        let seq = [
            r#"{"type":"THINKING_START","title":"plan"}"#,
            r#"{"type":"THINKING_TEXT_MESSAGE_START"}"#,
            r#"{"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"hmm"}"#,
            r#"{"type":"THINKING_TEXT_MESSAGE_END"}"#,
            r#"{"type":"THINKING_END"}"#,
        ];
        let out: Vec<Decoded<Event>> = seq
            .iter()
            .map(|s| boundary.translate(thinking(s)).unwrap())
            .collect();
        let types: Vec<_> = out.iter().map(|d| d.value.event_type().unwrap()).collect();
        assert_eq!(
            types,
            [
                EventType::ReasoningStart,
                EventType::ReasoningMessageStart,
                EventType::ReasoningMessageContent,
                EventType::ReasoningMessageEnd,
                EventType::ReasoningEnd
            ]
        );
        let id = |e: &Event| -> String {
            serde_json::to_value(e).unwrap()["messageId"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(id(&out[0].value), id(&out[4].value));
        assert_eq!(id(&out[1].value), id(&out[2].value));
        assert_eq!(id(&out[1].value), id(&out[3].value));
        assert_ne!(id(&out[0].value), id(&out[1].value));
        assert!(out[0].warnings.iter().any(|w| w.message.contains("title")));
        match &out[2].value {
            Event::ReasoningMessageContent(c) => assert_eq!(c.delta, "hmm"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn orphan_continuation_mints_and_warns() {
        let mut boundary = CompatBoundary::new();
        let out = boundary
            .translate(thinking(r#"{"type":"THINKING_TEXT_MESSAGE_END"}"#))
            .unwrap();
        assert_eq!(out.value.event_type(), Some(EventType::ReasoningMessageEnd));
        assert!(out.warnings.iter().any(|w| w.message.contains("Minting")));
    }

    #[test]
    fn other_events_pass_through() {
        let mut boundary = CompatBoundary::new();
        let e = thinking(r#"{"type":"FUTURE","x":1}"#);
        let out = boundary.translate(e.clone()).unwrap();
        assert_eq!(out.value, e);
        assert!(out.warnings.is_empty());
    }
}
