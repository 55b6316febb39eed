//! `GET /api/v1/calendar/events?from=&to=`: the user's events overlapping
//! the range (RFC 3339 instants; default: from now, 30 days), each shown in
//! its own zone and in UTC.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::Detail;
use super::{ApiError, ApiResult, User};
use crate::brain::tools::EventView;
use crate::service::Service;

/// Most events one answer lists.
const MAX_EVENTS: u32 = 500;

/// What a range end outside the dates an instant can hold says (jiff's
/// `Timestamp::MIN` and `MAX`, to the second).
const OUT_OF_RANGE: &str = "must be between -009999-01-02T01:59:59Z and 9999-12-30T22:00:00Z";

/// The range end `key` of the query, if given: an RFC 3339 instant with an
/// offset, within the dates an instant can hold.
fn instant(query: &HashMap<String, String>, key: &str) -> ApiResult<Option<jiff::Timestamp>> {
    let Some(text) = query.get(key) else {
        return Ok(None);
    };
    match text.parse::<jiff::Timestamp>() {
        Ok(instant) => Ok(Some(instant)),
        // A well-formed date-time with an offset that still is no instant
        // is past one end of time: said as such.
        Err(_)
            if jiff::fmt::temporal::Pieces::parse(text.as_str())
                .is_ok_and(|p| p.time().is_some() && p.offset().is_some()) =>
        {
            Err(ApiError::unprocessable(format!("{key} {OUT_OF_RANGE}")))
        }
        Err(_) => Err(ApiError::unprocessable(format!(
            "{key} must be an RFC 3339 date-time with an offset"
        ))),
    }
}

/// Calendar events.
#[derive(Serialize, ToSchema)]
pub(super) struct Events {
    #[schema(value_type = Vec<EventDescription>)]
    events: Vec<EventView>,
}

/// An event as tools and the calendar API show it.
#[derive(ToSchema)]
#[schema(as = CalendarEvent)]
#[allow(
    dead_code,
    reason = "a description: the tools' `EventView` is what is sent, field for field"
)]
struct EventDescription {
    id: String,
    title: String,
    /// Local time with offset in `event_timezone`.
    start: String,
    end: String,
    event_timezone: String,
    start_utc: String,
    end_utc: String,
}

#[utoipa::path(
    get,
    path = "/api/v1/calendar/events",
    operation_id = "calendarEvents",
    summary = "The user's calendar events",
    params(
        ("from" = Option<String>, Query, format = DateTime, description = "RFC 3339 with offset; default now"),
        ("to" = Option<String>, Query, format = DateTime, description = "Default from + 30 days (at most the last instant a date can hold, 9999-12-30T22:00:00Z)"),
    ),
    responses(
        (status = 200, description = "Events overlapping the range", body = Events),
        (status = 422, description = "`from must be an RFC 3339 date-time with an offset`, `from must be between -009999-01-02T01:59:59Z and 9999-12-30T22:00:00Z` (and the same two for `to`), `to must be after from`", body = Detail),
    )
)]
pub(super) async fn list_events(
    State(service): State<Service>,
    User(user): User,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let (from, to) = (instant(&query, "from")?, instant(&query, "to")?);
    let from = from.unwrap_or_else(jiff::Timestamp::now);
    let to = match to {
        Some(to) if to <= from => return Err(ApiError::unprocessable("to must be after from")),
        Some(to) => to,
        // Past the last instant a date can hold, the range ends there.
        None => from
            .checked_add(jiff::SignedDuration::from_hours(24 * 30))
            .unwrap_or(jiff::Timestamp::MAX),
    };
    let events = service
        .engine
        .calendar_events(
            &user,
            from.as_millisecond(),
            to.as_millisecond(),
            MAX_EVENTS,
        )
        .await?;
    Ok(axum::Json(Events {
        events: events.iter().map(EventView::new).collect(),
    })
    .into_response())
}
