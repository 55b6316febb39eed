//! `/api/v1/automation/jobs`: create, list, read, update, delete a job, and
//! its runs. The rules live in [`crate::jobs`].

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::{ApiError, ApiResult, User};
use crate::jobs::{MAX_JOBS_PER_USER, apply, show};
use crate::service::Service;
use crate::store::JobRecord;

/// Runs a job's run list shows (newest first).
const MAX_JOB_RUNS: u32 = 100;

fn body_object(body: &[u8]) -> ApiResult<Map<String, Value>> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(ApiError::unprocessable("the body must be a JSON object")),
    }
}

pub(super) async fn create(
    State(service): State<Service>,
    User(user): User,
    body: axum::body::Bytes,
) -> ApiResult {
    let patch = body_object(&body)?;
    for required in ["name", "schedule", "timezone", "prompt"] {
        if !patch.contains_key(required) {
            return Err(ApiError::unprocessable(format!("{required} is required")));
        }
    }
    let store = &service.engine.store;
    if store.jobs(&user).await?.len() >= MAX_JOBS_PER_USER {
        return Err(ApiError::unprocessable(
            "too many automation jobs (at most 100)",
        ));
    }
    let now = Timestamp::now();
    let mut job = JobRecord {
        id: uuid::Uuid::now_v7().to_string(),
        user_id: user,
        name: String::new(),
        schedule: String::new(),
        timezone: String::new(),
        prompt: String::new(),
        config: "{}".into(),
        enabled: true,
        thread_id: uuid::Uuid::new_v4().to_string(),
        next_run_at: None,
        created_at: now.as_millisecond(),
        updated_at: now.as_millisecond(),
    };
    apply(&service.engine.runtime, &mut job, &patch, now).map_err(ApiError::unprocessable)?;
    // The job's thread is created with it, owned by its user.
    store.create_job(&job).await?;
    Ok((StatusCode::CREATED, axum::Json(show(&job))).into_response())
}

pub(super) async fn list(State(service): State<Service>, User(user): User) -> ApiResult {
    let jobs = service.engine.store.jobs(&user).await?;
    Ok(axum::Json(json!({"jobs": jobs.iter().map(show).collect::<Vec<_>>()})).into_response())
}

/// `user`'s job, or 404.
async fn owned(service: &Service, user: &str, id: &str) -> ApiResult<JobRecord> {
    service
        .engine
        .store
        .job(user, id)
        .await?
        .ok_or_else(|| ApiError::not_found("job not found"))
}

pub(super) async fn read(
    State(service): State<Service>,
    User(user): User,
    Path(id): Path<String>,
) -> ApiResult {
    let job = owned(&service, &user, &id).await?;
    Ok(axum::Json(show(&job)).into_response())
}

pub(super) async fn update(
    State(service): State<Service>,
    User(user): User,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    let mut job = owned(&service, &user, &id).await?;
    let patch = body_object(&body)?;
    apply(&service.engine.runtime, &mut job, &patch, Timestamp::now())
        .map_err(ApiError::unprocessable)?;
    if !service.engine.store.update_job(&job).await? {
        // Deleted since it was read.
        return Err(ApiError::not_found("job not found"));
    }
    Ok(axum::Json(show(&job)).into_response())
}

pub(super) async fn remove(
    State(service): State<Service>,
    User(user): User,
    Path(id): Path<String>,
) -> ApiResult {
    if !service.engine.store.delete_job(&user, &id).await? {
        return Err(ApiError::not_found("job not found"));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub(super) async fn runs(
    State(service): State<Service>,
    User(user): User,
    Path(id): Path<String>,
) -> ApiResult {
    let job = owned(&service, &user, &id).await?;
    let runs = service
        .engine
        .store
        .thread_runs(&job.thread_id, MAX_JOB_RUNS)
        .await?;
    Ok(axum::Json(json!({"runs": runs.iter().map(|run| json!({
        "taskId": run.task_id,
        "runId": run.run_id,
        "threadId": run.thread_id,
        "status": run.status,
        "createdAt": run.created_at,
        "startedAt": run.started_at,
        "finishedAt": run.finished_at,
    })).collect::<Vec<_>>()}))
    .into_response())
}
