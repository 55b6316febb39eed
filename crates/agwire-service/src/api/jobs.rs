//! `/api/v1/automation/jobs`: create, list, read, update, delete a job, and
//! its runs. The rules live in [`crate::jobs`].

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use jiff::Timestamp;
use serde::Serialize;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use super::doc::bodies::JobInput;
use super::error::Detail;
use super::input::JsonBody;
use super::runs::RunView;
use super::{ApiError, ApiResult, User};
use crate::jobs::{JobRecord, MAX_JOBS_PER_USER, apply, new_job};
use crate::service::Service;

/// Runs a job's run list shows (newest first).
const MAX_JOB_RUNS: u32 = 100;

fn body_object(body: &[u8]) -> ApiResult<Map<String, Value>> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(ApiError::unprocessable("the body must be a JSON object")),
    }
}

/// A job as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Job)]
pub(super) struct JobView {
    id: String,
    name: String,
    /// `{"cron": ...}` or `{"every_seconds": ...}`.
    #[schema(value_type = Object)]
    schedule: Value,
    timezone: String,
    prompt: String,
    #[schema(value_type = Object)]
    config: Value,
    enabled: bool,
    thread_id: String,
    #[schema(format = DateTime)]
    next_run_at: Option<String>,
    #[schema(format = DateTime)]
    created_at: Option<String>,
    #[schema(format = DateTime)]
    updated_at: Option<String>,
}

impl From<&JobRecord> for JobView {
    fn from(job: &JobRecord) -> Self {
        let at = |ms: Option<i64>| {
            ms.and_then(|ms| Timestamp::from_millisecond(ms).ok())
                .map(|t| t.to_string())
        };
        Self {
            id: job.id.clone(),
            name: job.name.clone(),
            schedule: serde_json::from_str(&job.schedule).unwrap_or(Value::Null),
            timezone: job.timezone.clone(),
            prompt: job.prompt.clone(),
            config: serde_json::from_str(&job.config).unwrap_or_else(|_| json!({})),
            enabled: job.enabled,
            thread_id: job.thread_id.clone(),
            next_run_at: at(job.next_run_at),
            created_at: at(Some(job.created_at)),
            updated_at: at(Some(job.updated_at)),
        }
    }
}

/// A user's jobs.
#[derive(Serialize, ToSchema)]
pub(super) struct Jobs {
    jobs: Vec<JobView>,
}

/// A job's runs, newest first.
#[derive(Serialize, ToSchema)]
pub(super) struct JobRuns {
    runs: Vec<RunView>,
}

const INVALID_JOB: &str = "`<field> is required`, `invalid schedule: <why>` (`every_seconds must be at least 60`, `every_seconds must be at most 3153600000 (100 years)`, what is wrong with the cron expression), `timezone must be an IANA time zone`, `name must be 1 to 200 characters`, `prompt must be 1 to 10000 characters`, `invalid config: <why>`, `enabled must be a boolean`, `unknown job field '<key>'`, `too many automation jobs (at most 100)`";

#[utoipa::path(
    post,
    path = "/api/v1/automation/jobs",
    operation_id = "createJob",
    summary = "Create an automation job",
    request_body(content = JobInput, content_type = "application/json"),
    responses(
        (status = 201, description = "Created", body = JobView),
        (status = 422, description = INVALID_JOB, body = Detail),
    )
)]
pub(super) async fn create(
    State(service): State<Service>,
    User(user): User,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let patch = body_object(&body)?;
    for required in ["name", "schedule", "timezone", "prompt"] {
        if !patch.contains_key(required) {
            return Err(ApiError::unprocessable(format!("{required} is required")));
        }
    }
    if service.engine.jobs(&user).await?.len() >= MAX_JOBS_PER_USER {
        return Err(ApiError::unprocessable(
            "too many automation jobs (at most 100)",
        ));
    }
    let now = Timestamp::now();
    let mut job = new_job(user, now);
    apply(&service.engine.runtime, &mut job, &patch, now).map_err(ApiError::unprocessable)?;
    service.engine.create_job(&job).await?;
    Ok((StatusCode::CREATED, axum::Json(JobView::from(&job))).into_response())
}

#[utoipa::path(
    get,
    path = "/api/v1/automation/jobs",
    operation_id = "listJobs",
    summary = "The user's jobs",
    responses((status = 200, description = "Jobs", body = Jobs))
)]
pub(super) async fn list(
    State(service): State<Service>,
    User(user): User,
) -> ApiResult<axum::Json<Jobs>> {
    let jobs = service.engine.jobs(&user).await?;
    Ok(axum::Json(Jobs {
        jobs: jobs.iter().map(JobView::from).collect(),
    }))
}

/// `user`'s job, or 404.
async fn owned(service: &Service, user: &str, id: &str) -> ApiResult<JobRecord> {
    service
        .engine
        .job(user, id)
        .await?
        .ok_or_else(|| ApiError::not_found("job not found"))
}

#[utoipa::path(
    get,
    path = "/api/v1/automation/jobs/{id}",
    operation_id = "getJob",
    summary = "A job",
    params(("id" = String, Path)),
    responses(
        (status = 200, description = "Job", body = JobView),
        (status = 404, description = "`job not found`", body = Detail),
    )
)]
pub(super) async fn read(
    State(service): State<Service>,
    User(user): User,
    Path(id): Path<String>,
) -> ApiResult {
    let job = owned(&service, &user, &id).await?;
    Ok(axum::Json(JobView::from(&job)).into_response())
}

#[utoipa::path(
    patch,
    path = "/api/v1/automation/jobs/{id}",
    operation_id = "patchJob",
    summary = "Change a job",
    params(("id" = String, Path)),
    request_body(content = JobInput, content_type = "application/json"),
    responses(
        (status = 200, description = "Job", body = JobView),
        (status = 404, description = "`job not found`", body = Detail),
        (status = 422, description = "As for create", body = Detail),
    )
)]
pub(super) async fn update(
    State(service): State<Service>,
    User(user): User,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult {
    let mut job = owned(&service, &user, &id).await?;
    let patch = body_object(&body)?;
    apply(&service.engine.runtime, &mut job, &patch, Timestamp::now())
        .map_err(ApiError::unprocessable)?;
    if !service.engine.update_job(&job).await? {
        // Deleted since it was read.
        return Err(ApiError::not_found("job not found"));
    }
    Ok(axum::Json(JobView::from(&job)).into_response())
}

#[utoipa::path(
    delete,
    path = "/api/v1/automation/jobs/{id}",
    operation_id = "deleteJob",
    summary = "Delete a job (its runs and thread stay)",
    params(("id" = String, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "`job not found`", body = Detail),
    )
)]
pub(super) async fn remove(
    State(service): State<Service>,
    User(user): User,
    Path(id): Path<String>,
) -> ApiResult {
    if !service.engine.delete_job(&user, &id).await? {
        return Err(ApiError::not_found("job not found"));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[utoipa::path(
    get,
    path = "/api/v1/automation/jobs/{id}/runs",
    operation_id = "jobRuns",
    summary = "A job's runs, newest first",
    params(("id" = String, Path)),
    responses(
        (status = 200, description = "Runs", body = JobRuns),
        (status = 404, description = "`job not found`", body = Detail),
    )
)]
pub(super) async fn runs(
    State(service): State<Service>,
    User(user): User,
    Path(id): Path<String>,
) -> ApiResult {
    let job = owned(&service, &user, &id).await?;
    let runs = service.engine.job_runs(&job, MAX_JOB_RUNS).await?;
    Ok(axum::Json(JobRuns {
        runs: runs.iter().map(|run| RunView::new(run, false)).collect(),
    })
    .into_response())
}
