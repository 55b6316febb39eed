//! `/api/v1/automation/jobs`: create, list, read, update, delete a job, and
//! its runs. The rules live in [`crate::jobs`].

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::http::{Service, User, detail};
use crate::jobs::{MAX_JOBS_PER_USER, apply, show};
use crate::store::JobRecord;

fn unprocessable(message: impl AsRef<str>) -> Response {
    detail(StatusCode::UNPROCESSABLE_ENTITY, message.as_ref())
}

fn body_object(body: &[u8]) -> Option<Map<String, Value>> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

const NOT_AN_OBJECT: &str = "the body must be a JSON object";

pub(crate) async fn create(
    State(service): State<Service>,
    User(user): User,
    body: axum::body::Bytes,
) -> Response {
    let Some(patch) = body_object(&body) else {
        return unprocessable(NOT_AN_OBJECT);
    };
    for required in ["name", "schedule", "timezone", "prompt"] {
        if !patch.contains_key(required) {
            return unprocessable(format!("{required} is required"));
        }
    }
    match service.engine.store.jobs(&user).await {
        Ok(jobs) if jobs.len() >= MAX_JOBS_PER_USER => {
            return unprocessable("too many automation jobs (at most 100)");
        }
        Ok(_) => {}
        Err(error) => return error.into(),
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
    if let Err(why) = apply(&service.engine.runtime, &mut job, &patch, now) {
        return unprocessable(why);
    }
    // The job's thread is created with it, owned by its user.
    match service.engine.store.create_job(&job).await {
        Ok(()) => (StatusCode::CREATED, axum::Json(show(&job))).into_response(),
        Err(error) => error.into(),
    }
}

pub(crate) async fn list(State(service): State<Service>, User(user): User) -> Response {
    match service.engine.store.jobs(&user).await {
        Ok(jobs) => {
            axum::Json(json!({"jobs": jobs.iter().map(show).collect::<Vec<_>>()})).into_response()
        }
        Err(error) => error.into(),
    }
}

async fn owned(service: &Service, user: &str, id: &str) -> Result<JobRecord, Box<Response>> {
    match service.engine.store.job(user, id).await {
        Ok(Some(job)) => Ok(job),
        Ok(None) => Err(Box::new(detail(StatusCode::NOT_FOUND, "job not found"))),
        Err(error) => Err(Box::new(error.into())),
    }
}

pub(crate) async fn read(
    State(service): State<Service>,
    User(user): User,
    Path(id): Path<String>,
) -> Response {
    match owned(&service, &user, &id).await {
        Ok(job) => axum::Json(show(&job)).into_response(),
        Err(response) => *response,
    }
}

pub(crate) async fn update(
    State(service): State<Service>,
    User(user): User,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let mut job = match owned(&service, &user, &id).await {
        Ok(job) => job,
        Err(response) => return *response,
    };
    let Some(patch) = body_object(&body) else {
        return unprocessable(NOT_AN_OBJECT);
    };
    if let Err(why) = apply(&service.engine.runtime, &mut job, &patch, Timestamp::now()) {
        return unprocessable(why);
    }
    match service.engine.store.update_job(&job).await {
        Ok(_) => axum::Json(show(&job)).into_response(),
        Err(error) => error.into(),
    }
}

pub(crate) async fn remove(
    State(service): State<Service>,
    User(user): User,
    Path(id): Path<String>,
) -> Response {
    match service.engine.store.delete_job(&user, &id).await {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => detail(StatusCode::NOT_FOUND, "job not found"),
        Err(error) => error.into(),
    }
}

pub(crate) async fn runs(
    State(service): State<Service>,
    User(user): User,
    Path(id): Path<String>,
) -> Response {
    let job = match owned(&service, &user, &id).await {
        Ok(job) => job,
        Err(response) => return *response,
    };
    match service.engine.store.thread_runs(&job.thread_id, 100).await {
        Ok(runs) => axum::Json(json!({"runs": runs.iter().map(|run| json!({
            "taskId": run.task_id,
            "runId": run.run_id,
            "threadId": run.thread_id,
            "status": run.status.as_str(),
            "createdAt": run.created_at,
            "startedAt": run.started_at,
            "finishedAt": run.finished_at,
        })).collect::<Vec<_>>()}))
        .into_response(),
        Err(error) => error.into(),
    }
}
