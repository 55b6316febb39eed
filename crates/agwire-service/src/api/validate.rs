//! The validation of `POST /api/v1/agent/runs`, before anything is
//! written: the agent-run API's rules in its order with its exact messages,
//! then ours.
//!
//! Order: payload size (413) → the body is a `RunAgentInput` → `threadId` is a
//! UUID → `runId` length → message count → user text length →
//! `forwardedProps` → exactly one user message → it comes first → attachment
//! rules (image type, url, no data, at most three) → signed URLs →
//! `client_time` fields → frontend tools colliding with backend tools → no
//! string holds the NUL character, which no database can hold
//! ([`crate::storable`]). Every failure but the first is 422; the first
//! failing rule is the one reported, as the [`ApiError`] the API answers.
//!
//! The agent-run API's own front end writes legacy `binary` content blocks; the core
//! decoder would upgrade or drop them, so attachments are judged on the raw
//! JSON, and the accepted input carries them as 1.x `image` parts with a URL
//! source. Its optional message fields may be `null`
//! (`AssistantMessage.content`, `name`, `encryptedValue`, `ToolMessage.error`,
//! ...): those nulls are read as absent.

use agwire_core::decode::{DecodeMode, decode};
use agwire_core::{Content, ContentPart, Message, RunAgentInput};
use axum::http::StatusCode;
use serde_json::{Map, Value, json};

use super::ApiError;
use crate::run::{ClientTime, ClientTimeField, RunOptions, RuntimeMode};

/// Largest accepted body: 256 KiB.
pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024;
/// Longest `runId`, in characters.
pub const MAX_RUN_ID_CHARS: usize = 128;
/// Most messages in one request.
pub const MAX_MESSAGES: usize = 200;
/// Most characters of text in one user message.
pub const MAX_USER_TEXT_CHARS: usize = 10_000;
/// Most attachments in one message.
pub const MAX_ATTACHMENTS: usize = 3;

/// What validation needs to know beyond the body.
pub struct Rules<'a> {
    /// Names of the backend tools; a frontend tool may not reuse one.
    pub backend_tools: &'a [&'a str],
    /// Whether a URL is a valid, unexpired signed URL of this user's
    /// attachment.
    pub signed_url: &'a dyn Fn(&str) -> bool,
}

impl std::fmt::Debug for Rules<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rules")
            .field("backend_tools", &self.backend_tools)
            .finish_non_exhaustive()
    }
}

impl Default for Rules<'_> {
    /// No backend tools, and every URL accepted (tests and examples only:
    /// the service passes its attachments' check).
    fn default() -> Self {
        Self {
            backend_tools: &[],
            signed_url: &|_| true,
        }
    }
}

/// An accepted request.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidRun {
    /// The input; attachments are `image` parts with URL sources.
    pub input: RunAgentInput,
    /// `forwardedProps.runtime_mode`.
    pub runtime_mode: RuntimeMode,
    /// The rest of `forwardedProps` (`client_time`, when sent).
    pub options: RunOptions,
    /// The user message's attachment URLs, in order.
    pub attachment_urls: Vec<String>,
}

/// One attachment as the front end sent it.
#[derive(Debug, Default)]
struct Attachment {
    mime_type: Option<String>,
    url: Option<String>,
    has_data: bool,
}

/// Validates a request body.
pub fn validate_run(body: &[u8], rules: &Rules<'_>) -> Result<ValidRun, ApiError> {
    if body.len() > MAX_PAYLOAD_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RunAgentInput payload exceeds size limit",
        ));
    }
    let mut raw: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::unprocessable(format!("invalid RunAgentInput: {e}")))?;
    let Some(object) = raw.as_object_mut() else {
        return Err(ApiError::unprocessable(
            "invalid RunAgentInput: expected a JSON object",
        ));
    };
    let forwarded = object
        .get("forwardedProps")
        .or_else(|| object.get("forwarded_props"))
        .cloned();
    strict_shape(object)?;
    let attachments = take_attachments(object);
    let input = decode::<RunAgentInput>(raw, DecodeMode::Lenient)
        .map_err(|e| ApiError::unprocessable(format!("invalid RunAgentInput: {e}")))?
        .value;

    if uuid::Uuid::parse_str(&input.thread_id).is_err() {
        return Err(ApiError::unprocessable("threadId must be a valid UUID"));
    }
    if input.run_id.is_empty() {
        return Err(ApiError::unprocessable("runId must not be empty"));
    }
    if input.run_id.chars().count() > MAX_RUN_ID_CHARS {
        return Err(ApiError::unprocessable("runId exceeds length limit"));
    }
    if input.messages.len() > MAX_MESSAGES {
        return Err(ApiError::unprocessable(
            "RunAgentInput.messages exceeds limit",
        ));
    }
    let too_long = input.messages.iter().any(|m| match m {
        Message::User(u) => text_chars(&u.content) > MAX_USER_TEXT_CHARS,
        _ => false,
    });
    if too_long {
        return Err(ApiError::unprocessable(
            "RunAgentInput user message text exceeds limit",
        ));
    }
    let (runtime_mode, client_time) = forwarded_props(forwarded.as_ref())
        .ok_or_else(|| ApiError::unprocessable("invalid RunAgentInput.forwardedProps"))?;
    let users = input
        .messages
        .iter()
        .filter(|m| matches!(m, Message::User(_)))
        .count();
    if users != 1 {
        return Err(ApiError::unprocessable(
            "RunAgentInput.messages must contain exactly one user message",
        ));
    }
    if !matches!(input.messages.first(), Some(Message::User(_))) {
        return Err(ApiError::unprocessable(
            "RunAgentInput.messages[0].role must be user",
        ));
    }
    let user_attachments = attachments.first().map_or(&[][..], Vec::as_slice);
    let all = || attachments.iter().flatten();
    if all().any(|a| {
        !a.mime_type
            .as_deref()
            .is_some_and(|m| m.starts_with("image/"))
    }) {
        return Err(ApiError::unprocessable(
            "binary content requires image mimeType",
        ));
    }
    if all().any(|a| a.url.as_deref().is_none_or(str::is_empty)) {
        return Err(ApiError::unprocessable("binary content requires url"));
    }
    if all().any(|a| a.has_data) {
        return Err(ApiError::unprocessable(
            "binary content data is not allowed",
        ));
    }
    if attachments.iter().any(|a| a.len() > MAX_ATTACHMENTS) {
        return Err(ApiError::unprocessable("Too many attachments"));
    }
    let attachment_urls: Vec<String> = user_attachments
        .iter()
        .filter_map(|a| a.url.clone())
        .collect();
    if attachment_urls.iter().any(|u| !(rules.signed_url)(u)) {
        return Err(ApiError::unprocessable(
            "binary content url is not a valid signed URL",
        ));
    }
    let client_time = client_time.map(check_client_time).transpose()?;
    if let Some(tool) = input
        .tools
        .iter()
        .find(|t| rules.backend_tools.contains(&t.name.as_str()))
    {
        return Err(ApiError::unprocessable(format!(
            "RunAgentInput.tools: '{}' is the name of a backend tool; frontend tools must not reuse it",
            tool.name
        )));
    }
    if let Some(at) = crate::storable::nul_in_json(body) {
        return Err(ApiError::unprocessable(format!(
            "invalid RunAgentInput: {}",
            crate::storable::nul_detail(&at)
        )));
    }
    Ok(ValidRun {
        input,
        runtime_mode,
        options: RunOptions {
            client_time,
            trace_parent: None,
        },
        attachment_urls,
    })
}

/// Message roles AG-UI defines.
const ROLES: [&str; 7] = [
    "user",
    "assistant",
    "system",
    "developer",
    "tool",
    "reasoning",
    "activity",
];
/// Content part types a user message may hold (the agent-run API's `text` and
/// `binary`, and AG-UI 1.x media parts).
const PART_TYPES: [&str; 6] = ["text", "binary", "image", "audio", "video", "document"];

/// What the lenient decoder would silently drop is refused here instead,
/// naming the field: a message of an unknown role, a content part of an
/// unknown type, a tool whose `parameters` is not a JSON Schema object. A
/// run must never proceed on less than the client sent.
fn strict_shape(object: &Map<String, Value>) -> Result<(), ApiError> {
    let invalid = |why: String| ApiError::unprocessable(format!("invalid RunAgentInput: {why}"));
    if let Some(Value::Array(messages)) = object.get("messages") {
        for (i, message) in messages.iter().enumerate() {
            let Some(message) = message.as_object() else {
                return Err(invalid(format!("messages[{i}] must be an object")));
            };
            match message.get("role") {
                Some(Value::String(role)) if ROLES.contains(&role.as_str()) => {}
                Some(role) => {
                    return Err(invalid(format!("messages[{i}].role: unknown role {role}")));
                }
                None => return Err(invalid(format!("messages[{i}].role is required"))),
            }
            let Some(Value::Array(parts)) = message.get("content") else {
                continue;
            };
            for (j, part) in parts.iter().enumerate() {
                match part.get("type") {
                    Some(Value::String(kind)) if PART_TYPES.contains(&kind.as_str()) => {}
                    Some(kind) => {
                        return Err(invalid(format!(
                            "messages[{i}].content[{j}].type: unknown content part type {kind}"
                        )));
                    }
                    None => {
                        return Err(invalid(format!(
                            "messages[{i}].content[{j}].type is required"
                        )));
                    }
                }
            }
        }
    }
    if let Some(Value::Array(tools)) = object.get("tools") {
        for (i, tool) in tools.iter().enumerate() {
            let Some(tool) = tool.as_object() else {
                return Err(invalid(format!("tools[{i}] must be an object")));
            };
            if tool
                .get("name")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(invalid(format!(
                    "tools[{i}].name must be a non-empty string"
                )));
            }
            match tool.get("parameters") {
                Some(schema @ Value::Object(_)) => {
                    if let Err(error) = jsonschema::meta::validate(schema) {
                        return Err(invalid(format!(
                            "tools[{i}].parameters is not a valid JSON Schema: {error}"
                        )));
                    }
                }
                Some(_) => {
                    return Err(invalid(format!(
                        "tools[{i}].parameters must be a JSON Schema object"
                    )));
                }
                None => {
                    return Err(invalid(format!("tools[{i}].parameters is required")));
                }
            }
        }
    }
    Ok(())
}

/// Characters of text in a user message (Unicode scalar values).
fn text_chars(content: &Content) -> usize {
    match content {
        Content::Text(text) => text.chars().count(),
        Content::Parts(parts) => parts
            .iter()
            .map(|p| match p {
                ContentPart::Text(t) => t.text.chars().count(),
                _ => 0,
            })
            .sum(),
    }
}

/// Reads the attachments of every user message out of the raw body, leaving
/// in their place what the decoder can read: a 1.x `image` part with a URL
/// source (or, for an attachment without a URL, which the rules reject
/// anyway, an empty text part). Also reads the API's `null` optional
/// message fields as absent. Returns the attachments per user message, in
/// message order.
fn take_attachments(object: &mut Map<String, Value>) -> Vec<Vec<Attachment>> {
    let mut found = Vec::new();
    let Some(Value::Array(messages)) = object.get_mut("messages") else {
        return found;
    };
    for message in messages.iter_mut() {
        let Some(message) = message.as_object_mut() else {
            continue;
        };
        drop_null_optionals(message);
        if message.get("role").and_then(Value::as_str) != Some("user") {
            continue;
        }
        let mut attachments = Vec::new();
        if let Some(Value::Array(parts)) = message.get_mut("content") {
            for part in parts.iter_mut() {
                if let Some(attachment) = attachment(part) {
                    *part = match &attachment.url {
                        Some(url) if !url.is_empty() => json!({
                            "type": "image",
                            "source": {"type": "url", "value": url, "mimeType": attachment.mime_type},
                        }),
                        _ => json!({"type": "text", "text": ""}),
                    };
                    if part["source"]["mimeType"].is_null()
                        && let Some(source) = part.get_mut("source").and_then(Value::as_object_mut)
                    {
                        source.remove("mimeType");
                    }
                    attachments.push(attachment);
                }
            }
        }
        found.push(attachments);
    }
    found
}

/// The attachment a content part is, if it is one: a legacy `binary` block
/// or a 1.x media part.
fn attachment(part: &Value) -> Option<Attachment> {
    let kind = part.get("type")?.as_str()?;
    let string = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    match kind {
        "binary" => Some(Attachment {
            mime_type: string(part.get("mimeType")),
            url: string(part.get("url")),
            has_data: part.get("data").is_some_and(|d| !d.is_null()),
        }),
        "image" | "audio" | "video" | "document" => {
            let source = part.get("source");
            let source_type = source.and_then(|s| s.get("type")).and_then(Value::as_str);
            let mime = string(source.and_then(|s| s.get("mimeType")));
            Some(Attachment {
                // An image part with no declared type is still an image.
                mime_type: match (kind, mime) {
                    ("image", None) => Some("image/*".into()),
                    (_, mime) => mime,
                },
                url: (source_type == Some("url"))
                    .then(|| string(source.and_then(|s| s.get("value"))))
                    .flatten(),
                has_data: source_type == Some("data"),
            })
        }
        _ => None,
    }
}

/// The agent-run API allows `null` for these optional message fields.
fn drop_null_optionals(message: &mut Map<String, Value>) {
    for key in ["name", "encryptedValue", "encrypted_value", "error"] {
        if message.get(key).is_some_and(Value::is_null) {
            message.remove(key);
        }
    }
    if message.get("role").and_then(Value::as_str) == Some("assistant")
        && message.get("content").is_some_and(Value::is_null)
    {
        message.remove("content");
    }
    for key in ["toolCalls", "tool_calls"] {
        if let Some(Value::Array(calls)) = message.get_mut(key) {
            for call in calls.iter_mut().filter_map(Value::as_object_mut) {
                for k in ["encryptedValue", "encrypted_value"] {
                    if call.get(k).is_some_and(Value::is_null) {
                        call.remove(k);
                    }
                }
            }
        }
    }
}

/// `forwardedProps`: an object with `runtime_mode` (`chat`/`automation`) and
/// optionally `client_time` (an object), nothing else.
fn forwarded_props(value: Option<&Value>) -> Option<(RuntimeMode, Option<&Map<String, Value>>)> {
    let props = value?.as_object()?;
    if props
        .keys()
        .any(|k| k != "runtime_mode" && k != "client_time")
    {
        return None;
    }
    let mode = RuntimeMode::parse(props.get("runtime_mode")?.as_str()?)?;
    let client_time = match props.get("client_time") {
        None => None,
        Some(Value::Object(map)) => Some(map),
        Some(_) => return None,
    };
    Some((mode, client_time))
}

/// `client_time`, checked, with the exact message for its first bad field.
fn check_client_time(time: &Map<String, Value>) -> Result<ClientTime, ApiError> {
    ClientTime::parse(time).map_err(|bad| {
        ApiError::unprocessable(match bad {
            ClientTimeField::DeviceTimezone => "invalid client_time.device_timezone",
            ClientTimeField::ClientNowIso => "invalid client_time.client_now_iso",
            ClientTimeField::ClientEpochMs => "invalid client_time.client_epoch_ms",
        })
    })
}
