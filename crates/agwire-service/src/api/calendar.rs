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

/// Calendar events.
#[derive(Serialize, ToSchema)]
pub(super) struct Events {
    events: Vec<EventView>,
}

#[utoipa::path(
    get,
    path = "/api/v1/calendar/events",
    operation_id = "calendarEvents",
    summary = "The user's calendar events",
    params(
        ("from" = Option<String>, Query, format = DateTime, description = "RFC 3339 with offset; default now"),
        ("to" = Option<String>, Query, format = DateTime, description = "Default from + 30 days"),
    ),
    responses(
        (status = 200, description = "Events overlapping the range", body = Events),
        (status = 422, description = "`from must be an RFC 3339 date-time with an offset`, `to must be after from`", body = Detail),
    )
)]
pub(super) async fn list_events(
    State(service): State<Service>,
    User(user): User,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let instant = |key: &str| {
        query
            .get(key)
            .map(|text| text.parse::<jiff::Timestamp>())
            .transpose()
            .map_err(|_| {
                ApiError::unprocessable(format!(
                    "{key} must be an RFC 3339 date-time with an offset"
                ))
            })
    };
    let (from, to) = (instant("from")?, instant("to")?);
    let from = from.unwrap_or_else(jiff::Timestamp::now);
    let to = to.unwrap_or_else(|| from + jiff::SignedDuration::from_hours(24 * 30));
    if to <= from {
        return Err(ApiError::unprocessable("to must be after from"));
    }
    let events = service
        .engine
        .store
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
