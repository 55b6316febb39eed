//! `GET /api/v1/calendar/events?from=&to=`: the user's events overlapping
//! the range (RFC 3339 instants; default: from now, 30 days), each shown in
//! its own zone and in UTC.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::response::IntoResponse;
use serde_json::json;

use super::{ApiError, ApiResult, User};
use crate::service::Service;

/// Most events one answer lists.
const MAX_EVENTS: u32 = 500;

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
    Ok(axum::Json(
        json!({"events": events.iter().map(crate::brain::tools::event_json).collect::<Vec<_>>()}),
    )
    .into_response())
}
