//! `GET/PATCH /api/v1/me/profile`: the user's settings (`timezone`,
//! `locale`, and whatever else the front end keeps there).

use axum::extract::State;
use axum::response::IntoResponse;
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::doc::bodies::ProfilePatch;
use super::error::Detail;
use super::input::JsonBody;
use super::{ApiError, ApiResult, User};
use crate::service::Service;

/// A user's profile.
#[derive(Serialize, ToSchema)]
#[schema(as = Profile)]
pub(super) struct ProfileView {
    /// The user id (the token's `sub`).
    id: String,
    /// `timezone` (IANA), `locale` (BCP 47), and whatever else the front
    /// end keeps.
    #[schema(value_type = Object)]
    settings: Map<String, Value>,
}

#[utoipa::path(
    get,
    path = "/api/v1/me/profile",
    operation_id = "getProfile",
    summary = "The user's profile",
    responses((status = 200, description = "Profile", body = ProfileView))
)]
pub(super) async fn get_profile(
    State(service): State<Service>,
    User(user): User,
) -> ApiResult<axum::Json<ProfileView>> {
    let settings = service.engine.settings(&user).await?;
    Ok(axum::Json(ProfileView { id: user, settings }))
}

/// A BCP 47-shaped language tag (`en`, `zh-CN`, `sr-Latn-RS`).
fn is_locale(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= 35
        && tag
            .split('-')
            .all(|p| (1..=8).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_alphanumeric()))
        && tag
            .split('-')
            .next()
            .is_some_and(|l| l.bytes().all(|b| b.is_ascii_alphabetic()))
}

#[utoipa::path(
    patch,
    path = "/api/v1/me/profile",
    operation_id = "patchProfile",
    summary = "Change settings",
    description = "`settings.timezone` must be an IANA zone, `settings.locale` a BCP 47 tag; `null` clears a setting; other settings keys are kept as given.",
    request_body(content = ProfilePatch, content_type = "application/json"),
    responses(
        (status = 200, description = "Profile", body = ProfileView),
        (status = 422, description = "`the profile patch must be a JSON object`, `unknown profile field '<key>'`, `settings must be an object`, `invalid settings.<key>`", body = Detail),
    )
)]
pub(super) async fn patch_profile(
    State(service): State<Service>,
    User(user): User,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let Ok(Value::Object(patch)) = serde_json::from_slice::<Value>(&body) else {
        return Err(ApiError::unprocessable(
            "the profile patch must be a JSON object",
        ));
    };
    if let Some(key) = patch.keys().find(|k| *k != "settings") {
        return Err(ApiError::unprocessable(format!(
            "unknown profile field '{key}'"
        )));
    }
    let Some(Value::Object(changes)) = patch.get("settings") else {
        return Err(ApiError::unprocessable("settings must be an object"));
    };
    for (key, value) in changes {
        let valid = value.is_null()
            || match key.as_str() {
                "timezone" => value
                    .as_str()
                    .is_some_and(|z| jiff::tz::TimeZone::get(z).is_ok()),
                "locale" => value.as_str().is_some_and(is_locale),
                _ => true,
            };
        if !valid {
            return Err(ApiError::unprocessable(format!("invalid settings.{key}")));
        }
    }
    let settings = service.engine.change_settings(&user, changes).await?;
    Ok(axum::Json(ProfileView { id: user, settings }).into_response())
}
