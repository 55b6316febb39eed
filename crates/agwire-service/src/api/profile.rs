//! `GET/PATCH /api/v1/me/profile`: the user's settings (`timezone`,
//! `locale`, and whatever else the front end keeps there).

use axum::body::Bytes;
use axum::extract::State;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::{ApiError, ApiResult, User, now_ms};
use crate::service::Service;

pub(super) async fn get_profile(State(service): State<Service>, User(user): User) -> ApiResult {
    let settings = service.engine.store.settings(&user).await?;
    Ok(axum::Json(json!({"id": &user, "settings": settings})).into_response())
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

pub(super) async fn patch_profile(
    State(service): State<Service>,
    User(user): User,
    body: Bytes,
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
    let store = &service.engine.store;
    let mut settings = store.settings(&user).await?;
    for (key, value) in changes {
        // `null` clears a setting.
        if value.is_null() {
            settings.remove(key);
        } else {
            settings.insert(key.clone(), value.clone());
        }
    }
    store.set_settings(&user, &settings, now_ms()).await?;
    Ok(axum::Json(json!({"id": &user, "settings": settings})).into_response())
}
