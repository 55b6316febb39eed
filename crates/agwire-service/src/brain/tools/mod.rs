//! Backend tools: run server-side when the model calls them, their
//! arguments checked against their JSON Schema first (an invalid call is
//! answered with the errors, so the model can correct itself).
//!
//! `calendar_write` requires `event_timezone` and never defaults it (the
//! agent-run API: a calendar write must carry its zone); the run's clock (device →
//! profile → UTC) is what the model is told, not what the tool assumes.

use std::collections::BTreeMap;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::{Value, json};

use crate::clock::{RunClock, parse_in_zone};
use crate::store::{CalendarEvent, Store};

/// Every backend tool's name; a frontend tool may not reuse one.
pub(crate) const NAMES: [&str; 5] = [
    "get_current_time",
    "calendar_write",
    "calendar_read",
    "calendar_delete",
    "render_ui",
];

/// Most events `calendar_read` returns.
const READ_LIMIT: u32 = 50;

/// What a tool call needs to know about its run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToolEnv<'a> {
    /// The store (calendar).
    pub store: &'a dyn Store,
    /// The run's user.
    pub user: &'a str,
    /// The run's clock.
    pub clock: &'a RunClock,
    /// Server time now (ms), for record keeping.
    pub now_ms: i64,
}

/// A tool's answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolOutput {
    /// What the model reads (JSON text).
    pub content: String,
    /// A UI hint for the turn's `ui_schema`, if the tool offers one.
    pub ui_hint: Option<Value>,
    /// The call failed (bad arguments, not found); the model may retry.
    pub is_error: bool,
}

impl ToolOutput {
    fn ok(content: &Value, ui_hint: Option<Value>) -> Self {
        Self {
            content: content.to_string(),
            ui_hint,
            is_error: false,
        }
    }

    fn error(message: impl Into<String>) -> Self {
        Self {
            content: json!({"error": message.into()}).to_string(),
            ui_hint: None,
            is_error: true,
        }
    }
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolSpec {
    /// Name.
    pub name: &'static str,
    /// What it does (the model reads this).
    pub description: &'static str,
    /// Its arguments' JSON Schema.
    pub parameters: Value,
}

/// The backend tools, with their argument validators compiled once.
pub(crate) struct BackendTools {
    specs: Vec<ToolSpec>,
    validators: BTreeMap<&'static str, jsonschema::Validator>,
}

impl std::fmt::Debug for BackendTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendTools")
            .field("tools", &self.validators.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn specs() -> Vec<ToolSpec> {
    let when = "Local date-time in event_timezone, YYYY-MM-DDTHH:MM (or with an explicit offset).";
    vec![
        ToolSpec {
            name: "get_current_time",
            description: "The current date and time, in the user's time zone or the one given.",
            parameters: json!({
                "type": "object",
                "properties": {"timezone": {"type": "string", "description": "IANA time zone, e.g. Europe/Paris"}},
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "calendar_write",
            description: "Create a calendar event, or update one by id. event_timezone is required: the IANA zone the user means (ask if unsure).",
            parameters: json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "An existing event's id, to update it"},
                    "title": {"type": "string", "minLength": 1, "maxLength": 300},
                    "start": {"type": "string", "description": when},
                    "end": {"type": "string", "description": when},
                    "duration_minutes": {"type": "integer", "minimum": 1, "maximum": 10080},
                    "event_timezone": {"type": "string", "description": "IANA time zone of start/end, e.g. America/Los_Angeles"}
                },
                "required": ["title", "start", "event_timezone"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "calendar_read",
            description: "List the user's calendar events overlapping a time range.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "from": {"type": "string", "description": "Range start, local date-time in timezone"},
                    "to": {"type": "string", "description": "Range end, local date-time in timezone"},
                    "timezone": {"type": "string", "description": "IANA zone of from/to and of the answer (default: the user's)"}
                },
                "required": ["from", "to"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "calendar_delete",
            description: "Delete a calendar event by id.",
            parameters: json!({
                "type": "object",
                "properties": {"id": {"type": "string", "minLength": 1}},
                "required": ["id"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "render_ui",
            description: "Show a small UI card under your answer (see ui_hints: title, badge, body, fields, blocks, actions, status).",
            parameters: json!({
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": ["info", "success", "warning", "error", "pending"]},
                    "title": {"type": "string"},
                    "badge": {"type": "string"},
                    "body": {"type": "string"},
                    "fields": {"type": "object"},
                    "image": {"type": "string"},
                    "blocks": {"type": "array"},
                    "actions": {"type": "array"}
                }
            }),
        },
    ]
}

impl Default for BackendTools {
    fn default() -> Self {
        Self::new()
    }
}

impl BackendTools {
    /// Every backend tool.
    pub(crate) fn new() -> Self {
        let specs = specs();
        let validators = specs
            .iter()
            .filter_map(|spec| match jsonschema::validator_for(&spec.parameters) {
                Ok(validator) => Some((spec.name, validator)),
                Err(error) => {
                    // Our own schemas: a test compiles every one.
                    tracing::error!(tool = spec.name, %error, "invalid tool schema");
                    None
                }
            })
            .collect();
        Self { specs, validators }
    }

    /// The tools `enabled` names (unknown names are skipped), in order.
    pub(crate) fn specs(&self, enabled: &[String]) -> Vec<&ToolSpec> {
        enabled
            .iter()
            .filter_map(|name| self.specs.iter().find(|s| s.name == name))
            .collect()
    }

    /// Whether `name` is a backend tool.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.validators.contains_key(name)
    }

    /// Runs tool `name` on `arguments` (the model's JSON text).
    pub(crate) async fn call(&self, name: &str, arguments: &str, env: ToolEnv<'_>) -> ToolOutput {
        let Some(validator) = self.validators.get(name) else {
            return ToolOutput::error(format!("no backend tool named '{name}'"));
        };
        let args: Value = if arguments.trim().is_empty() {
            json!({})
        } else {
            match serde_json::from_str(arguments) {
                Ok(args) => args,
                Err(e) => return ToolOutput::error(format!("arguments are not JSON: {e}")),
            }
        };
        let problems: Vec<String> = validator
            .iter_errors(&args)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        if !problems.is_empty() {
            let mut message = format!("invalid arguments: {}", problems.join("; "));
            if name == "calendar_write" && args.get("event_timezone").is_none() {
                message = format!(
                    "event_timezone is required and is never assumed: call again with the IANA time zone the user means (their current zone is {})",
                    env.clock.zone_name
                );
            }
            return ToolOutput::error(message);
        }
        let result = match name {
            "get_current_time" => current_time(&args, env),
            "calendar_write" => calendar_write(&args, env).await,
            "calendar_read" => calendar_read(&args, env).await,
            "calendar_delete" => calendar_delete(&args, env).await,
            "render_ui" => Ok(ToolOutput::ok(&json!({"rendered": true}), Some(args))),
            _ => Err(format!("no backend tool named '{name}'")),
        };
        result.unwrap_or_else(ToolOutput::error)
    }
}

fn zone(name: &str) -> Result<TimeZone, String> {
    TimeZone::get(name).map_err(|_| format!("'{name}' is not an IANA time zone"))
}

fn local(ms: i64, zone: &TimeZone) -> String {
    Timestamp::from_millisecond(ms)
        .map(|t| {
            t.to_zoned(zone.clone())
                .strftime("%Y-%m-%dT%H:%M:%S%:z")
                .to_string()
        })
        .unwrap_or_default()
}

fn current_time(args: &Value, env: ToolEnv<'_>) -> Result<ToolOutput, String> {
    let (zone_name, tz) = match args.get("timezone").and_then(Value::as_str) {
        Some(name) => (name.to_owned(), zone(name)?),
        None => (env.clock.zone_name.clone(), env.clock.zone.clone()),
    };
    let now = env.clock.now.timestamp().to_zoned(tz);
    Ok(ToolOutput::ok(
        &json!({
            "now": now.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string(),
            "weekday": now.strftime("%A").to_string(),
            "timezone": zone_name,
            "utc": now.timestamp().to_string(),
        }),
        None,
    ))
}

/// An event as tools and the calendar API show it.
#[derive(Debug, serde::Serialize)]
pub(crate) struct EventView {
    id: String,
    title: String,
    /// Local time with offset in `event_timezone`.
    start: String,
    end: String,
    event_timezone: String,
    start_utc: String,
    end_utc: String,
}

impl EventView {
    pub(crate) fn new(event: &CalendarEvent) -> Self {
        let tz = TimeZone::get(&event.timezone).unwrap_or(TimeZone::UTC);
        let utc = |ms: i64| {
            Timestamp::from_millisecond(ms)
                .map(|t| t.to_string())
                .unwrap_or_default()
        };
        Self {
            id: event.id.clone(),
            title: event.title.clone(),
            start: local(event.start_ms, &tz),
            end: local(event.end_ms, &tz),
            event_timezone: event.timezone.clone(),
            start_utc: utc(event.start_ms),
            end_utc: utc(event.end_ms),
        }
    }
}

/// [`EventView`] as JSON, for a tool's result.
fn event_json(event: &CalendarEvent) -> Value {
    serde_json::to_value(EventView::new(event)).unwrap_or(Value::Null)
}

async fn calendar_write(args: &Value, env: ToolEnv<'_>) -> Result<ToolOutput, String> {
    let zone_name = args["event_timezone"].as_str().unwrap_or_default();
    let tz = zone(zone_name)?;
    let start = parse_in_zone(args["start"].as_str().unwrap_or_default(), &tz).map_err(|e| e.0)?;
    let end = match (
        args.get("end").and_then(Value::as_str),
        args.get("duration_minutes").and_then(Value::as_i64),
    ) {
        (Some(end), _) => parse_in_zone(end, &tz).map_err(|e| e.0)?,
        (None, Some(minutes)) => start
            .checked_add(jiff::SignedDuration::from_mins(minutes))
            .map_err(|e| e.to_string())?,
        (None, None) => start
            .checked_add(jiff::SignedDuration::from_hours(1))
            .map_err(|e| e.to_string())?,
    };
    if end <= start {
        return Err("end must be after start".into());
    }
    let update = args.get("id").and_then(Value::as_str);
    if let Some(id) = update
        && env
            .store
            .calendar_event(env.user, id)
            .await
            .map_err(|e| e.to_string())?
            .is_none()
    {
        return Err(format!("no calendar event with id '{id}'"));
    }
    let event = CalendarEvent {
        id: update.map_or_else(|| uuid::Uuid::now_v7().to_string(), str::to_owned),
        user_id: env.user.to_owned(),
        title: args["title"].as_str().unwrap_or_default().to_owned(),
        start_ms: start.as_millisecond(),
        end_ms: end.as_millisecond(),
        timezone: zone_name.to_owned(),
    };
    let stored = env
        .store
        .put_calendar_event(&event, env.now_ms)
        .await
        .map_err(|e| e.to_string())?;
    if !stored {
        return Err(format!("no calendar event with id '{}'", event.id));
    }
    let result = event_json(&event);
    let hint = json!({
        "status": "success",
        "title": event.title,
        "badge": if update.is_some() { "UPDATED" } else { "CREATED" },
        "fields": [
            {"label": "Start", "value": result["start"]},
            {"label": "End", "value": result["end"]},
            {"label": "Time zone", "value": event.timezone},
        ],
        "actions": [{"label": "Delete", "variant": "danger", "action": {"type": "message", "text": format!("Delete the event \"{}\"", event.title)}}],
        "meta": {"toolId": event.id},
    });
    Ok(ToolOutput::ok(
        &json!({"event": result, "updated": update.is_some()}),
        Some(hint),
    ))
}

async fn calendar_read(args: &Value, env: ToolEnv<'_>) -> Result<ToolOutput, String> {
    let (zone_name, tz) = match args.get("timezone").and_then(Value::as_str) {
        Some(name) => (name.to_owned(), zone(name)?),
        None => (env.clock.zone_name.clone(), env.clock.zone.clone()),
    };
    let from = parse_in_zone(args["from"].as_str().unwrap_or_default(), &tz).map_err(|e| e.0)?;
    let to = parse_in_zone(args["to"].as_str().unwrap_or_default(), &tz).map_err(|e| e.0)?;
    let events = env
        .store
        .calendar_events(
            env.user,
            from.as_millisecond(),
            to.as_millisecond(),
            READ_LIMIT,
        )
        .await
        .map_err(|e| e.to_string())?;
    let listed: Vec<Value> = events
        .iter()
        .map(|e| {
            let mut shown = event_json(e);
            // Shown in the zone the question was asked in.
            shown["start"] = local(e.start_ms, &tz).into();
            shown["end"] = local(e.end_ms, &tz).into();
            shown
        })
        .collect();
    Ok(ToolOutput::ok(
        &json!({"timezone": zone_name, "events": listed, "truncated": events.len() == READ_LIMIT as usize}),
        None,
    ))
}

async fn calendar_delete(args: &Value, env: ToolEnv<'_>) -> Result<ToolOutput, String> {
    let id = args["id"].as_str().unwrap_or_default();
    let deleted = env
        .store
        .delete_calendar_event(env.user, id)
        .await
        .map_err(|e| e.to_string())?;
    if !deleted {
        return Err(format!("no calendar event with id '{id}'"));
    }
    Ok(ToolOutput::ok(&json!({"deleted": id}), None))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
