//! The scripted model `agwire serve` runs when no LLM provider is
//! configured: deterministic, offline, and enough to exercise the whole
//! pipeline — the router's choice, backend tools (time, calendar), a
//! frontend tool named in the message, and a reply.
//!
//! It reads only what a real model reads: the request's messages (the
//! system prompt carries the user's time and zone) and tools.

use agwire_llm::{ChatEvent, ChatMessage, ChatRequest, ScriptedModel, ScriptedReply, UserPart};
use serde_json::{Value, json};

const CALENDAR_WORDS: [&str; 8] = [
    "calendar", "meeting", "event", "schedule", "日历", "日程", "会议", "提醒",
];
const TIME_WORDS: [&str; 4] = ["time", "几点", "时间", "clock"];

/// The demo model (`delay` between streamed pieces).
pub fn model(delay: std::time::Duration) -> ScriptedModel {
    ScriptedModel::new(reply).with_delay(delay)
}

fn text_of(message: &ChatMessage) -> Option<String> {
    match message {
        ChatMessage::User { content } => Some(
            content
                .iter()
                .filter_map(|p| match p {
                    UserPart::Text(t) => Some(t.as_str()),
                    UserPart::ImageUrl(_) => None,
                })
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    }
}

fn mentions(text: &str, words: &[&str]) -> bool {
    let lower = text.to_lowercase();
    words.iter().any(|w| lower.contains(w))
}

/// The reply to one request.
fn reply(request: &ChatRequest) -> Vec<ChatEvent> {
    let last_user = request
        .messages
        .iter()
        .rev()
        .find_map(text_of)
        .unwrap_or_default();
    if request.json_mode {
        // The router.
        let agent = if mentions(&last_user, &CALENDAR_WORDS) {
            "calendar"
        } else {
            "general"
        };
        return ScriptedReply::text(&json!({"agent": agent}).to_string());
    }
    let offered = |name: &str| request.tools.iter().any(|t| t.name == name);
    if let Some(ChatMessage::Tool { content, .. }) = request.messages.last() {
        return ScriptedReply::text(&after_tool(content));
    }
    // A frontend tool the user names: hand it to the client.
    if let Some(tool) = request.tools.iter().find(|t| {
        !crate::brain::tools::NAMES.contains(&t.name.as_str())
            && last_user.contains(t.name.as_str())
    }) {
        return ScriptedReply::tool_call("fe-1", &tool.name, "{}");
    }
    if offered("calendar_write") && mentions(&last_user, &CALENDAR_WORDS) {
        let system = request.messages.iter().find_map(|m| match m {
            ChatMessage::System(s) => Some(s.as_str()),
            _ => None,
        });
        if let Some(args) = system.and_then(|s| calendar_args(s, &last_user)) {
            return ScriptedReply::tool_call("cal-1", "calendar_write", &args.to_string());
        }
    }
    if offered("get_current_time") && mentions(&last_user, &TIME_WORDS) {
        return ScriptedReply::tool_call("time-1", "get_current_time", "{}");
    }
    ScriptedReply::text(&format!("You said: {last_user}"))
}

fn after_tool(content: &str) -> String {
    let result: Value = serde_json::from_str(content).unwrap_or(Value::Null);
    if let Some(error) = result.get("error").and_then(Value::as_str) {
        return format!("The tool failed: {error}");
    }
    if let Some(event) = result.get("event") {
        return format!(
            "Created \"{}\" from {} to {} ({}).",
            event["title"].as_str().unwrap_or_default(),
            event["start"].as_str().unwrap_or_default(),
            event["end"].as_str().unwrap_or_default(),
            event["event_timezone"].as_str().unwrap_or_default(),
        );
    }
    if let Some(now) = result.get("now").and_then(Value::as_str) {
        return format!(
            "It is {now} ({}).",
            result["timezone"].as_str().unwrap_or_default()
        );
    }
    "Done.".into()
}

/// `calendar_write` arguments for "tomorrow at 9"-style requests, from the
/// user's "now" and zone as the system prompt states them.
fn calendar_args(system: &str, text: &str) -> Option<Value> {
    let now_text = system
        .split("Current date and time for the user: ")
        .nth(1)?
        .split_whitespace()
        .next()?;
    let now: jiff::Timestamp = now_text.parse().ok()?;
    let zone_name = system
        .split("The user's time zone is ")
        .nth(1)?
        .split_whitespace()
        .next()?;
    let zone = jiff::tz::TimeZone::get(zone_name).ok()?;
    let today = now.to_zoned(zone).date();
    let lower = text.to_lowercase();
    let day = if lower.contains("tomorrow") || text.contains("明天") {
        today.tomorrow().ok()?
    } else {
        today
    };
    let hour = hour_in(&lower).unwrap_or(9);
    let title = if text.chars().count() > 60 {
        text.chars().take(60).collect()
    } else {
        text.to_owned()
    };
    Some(json!({
        "title": title,
        "start": format!("{day}T{hour:02}:00"),
        "event_timezone": zone_name,
    }))
}

/// "at 9", "9am", "9 pm", "9点", "15:00".
fn hour_in(text: &str) -> Option<i8> {
    let bytes: Vec<char> = text.chars().collect();
    for (i, c) in bytes.iter().enumerate() {
        if !c.is_ascii_digit() || (i > 0 && bytes[i - 1].is_ascii_digit()) {
            continue;
        }
        let digits: String = bytes[i..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        let rest: String = bytes[i + digits.len()..].iter().collect();
        let mut hour: i8 = digits.parse().ok()?;
        let rest = rest.trim_start();
        let is_time = rest.starts_with("am")
            || rest.starts_with("pm")
            || rest.starts_with('点')
            || rest.starts_with(':')
            || text[..text.char_indices().nth(i).map_or(0, |(b, _)| b)].ends_with("at ");
        if !is_time || hour > 23 {
            continue;
        }
        if rest.starts_with("pm") && hour < 12 {
            hour += 12;
        }
        return Some(hour);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_are_read_from_common_phrasings() {
        assert_eq!(hour_in("tomorrow at 9"), Some(9));
        assert_eq!(hour_in("at 3pm please"), Some(15));
        assert_eq!(hour_in("明天早上9点创建一个日历"), Some(9));
        assert_eq!(hour_in("meet at 15:30"), Some(15));
        assert_eq!(hour_in("2 people"), None);
    }

    #[test]
    fn tomorrow_at_nine_in_the_users_zone() {
        let system = "x\n\nCurrent date and time for the user: 2026-03-16T09:12:33-07:00 (Monday, America/Los_Angeles). Resolve...\nThe user's time zone is America/Los_Angeles (from their device); ...";
        let args = calendar_args(system, "Put a standup in my calendar tomorrow at 9").unwrap();
        assert_eq!(args["start"], "2026-03-17T09:00");
        assert_eq!(args["event_timezone"], "America/Los_Angeles");
    }
}
