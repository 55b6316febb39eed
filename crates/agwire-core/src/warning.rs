//! Non-fatal deviations reported while reading or folding a stream.

use std::fmt;

/// Something a stage removed, translated or could not apply without failing the
/// run. The spec says a consumer SHOULD report these; every stage also emits
/// them as `tracing` warnings at the point where the pipeline runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// What kind of deviation this is.
    pub kind: WarningKind,
    /// A sentence describing it, worded like the reference client where one exists.
    pub message: String,
}

/// The kinds of [`Warning`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WarningKind {
    /// An unknown member, or an unrecognised union member, was removed.
    Stripped,
    /// An event of a type the protocol does not describe was dropped.
    UnknownEventDropped,
    /// A retired (0.x) shape was translated to its 1.x equivalent.
    LegacyTranslated,
    /// The producer declared a protocol version newer than ours, or one we
    /// cannot interpret.
    ProtocolVersion,
    /// A `STATE_DELTA` could not be applied; the state is unchanged.
    StatePatchFailed,
    /// An `ACTIVITY_DELTA` could not be applied; the content is unchanged.
    ActivityPatchFailed,
    /// An event named a message, tool call or other entity that does not exist.
    MissingTarget,
    /// Anything else the apply stage tolerated.
    Tolerated,
}

impl Warning {
    /// A warning of `kind`.
    pub fn new(kind: WarningKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn stripped(context: &str, path: &str) -> Self {
        Self::new(
            WarningKind::Stripped,
            format!("Removed unrecognised material at '{path}' on {context}."),
        )
    }

    /// A legacy whole-field `null` at `path` of `context` (an event type or a
    /// type name) that was read as an absent field.
    pub fn legacy_null(context: &str, path: &str) -> Self {
        Self::new(
            WarningKind::LegacyTranslated,
            format!("Converting deprecated {context} '{path}: null' to an absent field."),
        )
    }

    /// Emits the warning through `tracing`.
    pub fn trace(&self) {
        tracing::warn!(kind = ?self.kind, "{}", self.message);
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
