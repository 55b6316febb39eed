//! `GET /api/v1/me/usage`: the user's counts against the service's quotas
//! (`[quotas]`), as the accept checks them — so a client can show how much
//! is left, and when more will be.

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::{ApiResult, User};
use crate::service::Service;

/// A user's usage and limits.
#[derive(Serialize, ToSchema)]
#[schema(as = Usage)]
pub(super) struct UsageView {
    /// Runs.
    runs: RunsUsage,
    /// Tokens.
    tokens: TokensUsage,
}

/// Runs accepted in the last 60 seconds (a sliding minute).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct RunsUsage {
    /// How many (`null` without the quota: not counted).
    last_minute: Option<u64>,
    /// `[quotas] runs_per_minute`; `null`: no limit.
    per_minute: Option<u32>,
}

/// Tokens used today (UTC) by runs that ended today.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct TokensUsage {
    /// How many (each run's usage: input and output tokens; `null` without
    /// the quota: not counted).
    today: Option<u64>,
    /// `[quotas] tokens_per_day`; `null`: no limit.
    per_day: Option<u64>,
    /// When the day's count starts again (RFC 3339, 00:00 UTC).
    resets_at: String,
}

#[utoipa::path(
    get,
    path = "/api/v1/me/usage",
    operation_id = "getUsage",
    summary = "The user's usage and quotas",
    description = "Runs accepted in the last minute and tokens used today (UTC), beside the service's `[quotas]`; each is counted only while its quota is on (`null`: no quota, not counted). A run past a quota is refused with 429 `quota exceeded: …` and `Retry-After`.",
    responses((status = 200, description = "Usage", body = UsageView))
)]
pub(super) async fn get_usage(
    State(service): State<Service>,
    User(user): User,
) -> ApiResult<axum::Json<UsageView>> {
    let now = service.engine.usage(&user).await?;
    let resets_at = jiff::Timestamp::from_millisecond(agwire_store::day_ends(now.at_ms))
        .map(|t| t.to_string())
        .unwrap_or_default();
    Ok(axum::Json(UsageView {
        runs: RunsUsage {
            last_minute: now
                .quotas
                .runs_per_minute
                .map(|_| now.usage.runs_last_minute),
            per_minute: now.quotas.runs_per_minute,
        },
        tokens: TokensUsage {
            today: now.quotas.tokens_per_day.map(|_| now.usage.tokens_today),
            per_day: now.quotas.tokens_per_day,
            resets_at,
        },
    }))
}
