//! What a run is, for every part of the service: how it is admitted to its
//! thread ([`Admission`]), what `forwardedProps` told about it
//! ([`RuntimeMode`], [`ClientTime`]) and its state ([`RunStatus`]). The
//! API's validation produces these; the store, the engine, the brain, the
//! jobs and the clock read them.

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

use crate::error::Error;

/// A run's state. `Queued` and `Running` are active; the rest are final, and
/// a final state never changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Accepted, waiting for its thread or for a worker.
    Queued,
    /// Taken by a worker.
    Running,
    /// Ended with `RUN_FINISHED` (success).
    Succeeded,
    /// Ended with `RUN_ERROR`.
    Failed,
    /// Ended with `RUN_FINISHED` outcome `cancelled`.
    Cancelled,
    /// Ended with `RUN_FINISHED` outcome `interrupt`.
    Interrupted,
}

impl RunStatus {
    /// Every status, active ones first.
    pub const ALL: [Self; 6] = [
        Self::Queued,
        Self::Running,
        Self::Succeeded,
        Self::Failed,
        Self::Cancelled,
        Self::Interrupted,
    ];

    /// Its name in the API and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
        }
    }

    /// Whether the run has yet to end.
    pub fn is_active(self) -> bool {
        matches!(self, Self::Queued | Self::Running)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunStatus {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Self::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| Error::Internal(format!("unknown run status '{s}'")))
    }
}

/// What an accept does when its thread already has an active run — LangGraph
/// Platform's `multitask_strategy` ("double texting"), with its four
/// answers.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum MultitaskStrategy {
    /// Refuse the new run ([`Error::ThreadBusy`]).
    #[default]
    Reject,
    /// Accept it as waiting: it starts when the thread's active runs end.
    Enqueue,
    /// Cancel the thread's active runs — a waiting one ends at once, a
    /// running one is asked to stop and ends as cancelled with what it
    /// said — and start the new run when they have ended.
    Interrupt,
    /// As `Interrupt`, and remove from the thread everything the cancelled
    /// runs added to it (their messages; the tool calls they answered are
    /// pending again), so the thread reads as before them.
    Rollback,
}

impl MultitaskStrategy {
    /// Every strategy.
    pub const ALL: [Self; 4] = [Self::Reject, Self::Enqueue, Self::Interrupt, Self::Rollback];

    /// Its name on the wire, in the configuration and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reject => "reject",
            Self::Enqueue => "enqueue",
            Self::Interrupt => "interrupt",
            Self::Rollback => "rollback",
        }
    }

    /// The strategy with this name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether an accept with it stops the thread's active runs.
    pub fn stops_active_runs(self) -> bool {
        matches!(self, Self::Interrupt | Self::Rollback)
    }
}

impl fmt::Display for MultitaskStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a run is admitted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Admission {
    /// What to do when its thread already has an active run.
    pub strategy: MultitaskStrategy,
    /// The request carries the whole conversation (a standard AG-UI client):
    /// its messages not yet in the thread are appended, in order. Otherwise
    /// (the agent-run API) its one user message — with the tool messages answering the
    /// previous turn's frontend tool calls, placed before it — is the turn's
    /// new input.
    pub whole_history: bool,
}

/// `forwardedProps.runtime_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeMode {
    /// Agents and tools from `system_agents.yaml`.
    Chat,
    /// Agents and tools from the automation job's config.
    Automation,
}

impl RuntimeMode {
    /// Its name on the wire and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Automation => "automation",
        }
    }

    /// The mode with this name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "chat" => Some(Self::Chat),
            "automation" => Some(Self::Automation),
            _ => None,
        }
    }
}

/// What a run's request said about it beyond its input and its mode
/// (`forwardedProps`, validated): kept with the run as one JSON value,
/// given back when it is claimed and when it is read. A new option is a
/// field here — the backends store and read the value whole.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunOptions {
    /// `forwardedProps.client_time`, checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_time: Option<ClientTime>,
    /// The trace the run belongs to (a W3C `traceparent`: the span that
    /// accepted it), when the service exports traces: whichever replica
    /// executes or streams the run continues that trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_parent: Option<String>,
}

impl RunOptions {
    /// No option set (what [`Default`] gives, as a constant: a request
    /// without options borrows it).
    pub const NONE: Self = Self {
        client_time: None,
        trace_parent: None,
    };

    /// As stored: `None` when no option is set (the column stays null).
    pub fn to_stored(&self) -> Result<Option<String>, Error> {
        match self == &Self::default() {
            true => Ok(None),
            false => Ok(Some(serde_json::to_string(self)?)),
        }
    }

    /// Reads back what [`RunOptions::to_stored`] wrote.
    pub fn from_stored(stored: Option<&str>) -> Result<Self, Error> {
        match stored {
            None => Ok(Self::default()),
            Some(text) => Ok(serde_json::from_str(text)?),
        }
    }
}

/// `forwardedProps.client_time`, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientTime {
    /// The device's IANA time zone.
    pub device_timezone: jiff::tz::TimeZone,
    /// Its name as sent.
    pub device_timezone_name: String,
    /// The device's "now", with its offset.
    pub now: jiff::Timestamp,
    /// The device's epoch milliseconds.
    pub epoch_ms: i64,
}

impl ClientTime {
    /// The object it was read from (`device_timezone`, `client_now_iso`,
    /// `client_epoch_ms`).
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "device_timezone": self.device_timezone_name,
            "client_now_iso": self.now.to_string(),
            "client_epoch_ms": self.epoch_ms,
        })
    }

    /// Reads back what [`ClientTime::to_json`] wrote (or what a client sent);
    /// `None` when it does not pass validation.
    pub fn from_json(value: &Value) -> Option<Self> {
        Self::parse(value.as_object()?).ok()
    }

    /// Reads the object a client sent: a known IANA zone, an RFC 3339 time
    /// with its offset, epoch milliseconds as an integer. The error names
    /// the first field (in that order) that is missing or wrong.
    pub fn parse(time: &Map<String, Value>) -> Result<Self, ClientTimeField> {
        let zone_name = time.get("device_timezone").and_then(Value::as_str);
        let zone = zone_name
            .and_then(|name| jiff::tz::TimeZone::get(name).ok())
            .ok_or(ClientTimeField::DeviceTimezone)?;
        let now = time
            .get("client_now_iso")
            .and_then(Value::as_str)
            .and_then(rfc3339_with_offset)
            .ok_or(ClientTimeField::ClientNowIso)?;
        let epoch_ms = time
            .get("client_epoch_ms")
            .and_then(Value::as_i64)
            .ok_or(ClientTimeField::ClientEpochMs)?;
        Ok(Self {
            device_timezone: zone,
            device_timezone_name: zone_name.unwrap_or_default().to_owned(),
            now,
            epoch_ms,
        })
    }
}

/// As the object a client sends ([`ClientTime::to_json`]).
impl serde::Serialize for ClientTime {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

/// From the object a client sends, checked as validation checks it.
impl<'de> serde::Deserialize<'de> for ClientTime {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_json(&value)
            .ok_or_else(|| serde::de::Error::custom("not a valid client_time object"))
    }
}

/// The field of `client_time` that is missing or wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientTimeField {
    /// `device_timezone`: not a known IANA zone.
    DeviceTimezone,
    /// `client_now_iso`: not an RFC 3339 time with an offset.
    ClientNowIso,
    /// `client_epoch_ms`: not an integer.
    ClientEpochMs,
}

/// An RFC 3339 date-time with a `Z` or numeric offset (no bare local times,
/// no bracketed zone names, no week dates).
fn rfc3339_with_offset(text: &str) -> Option<jiff::Timestamp> {
    let bytes = text.as_bytes();
    // date `YYYY-MM-DD`, then `T`/`t`/space, then a time.
    let shape = bytes.len() >= 20
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && matches!(bytes[10], b'T' | b't' | b' ')
        && !text.contains('[');
    let offset = text.ends_with(['Z', 'z'])
        || text
            .rfind(['+', '-'])
            .is_some_and(|i| i > 10 && text[i + 1..].len() == 5 && text.as_bytes()[i + 3] == b':');
    if !(shape && offset) {
        return None;
    }
    text.parse().ok()
}
