//! `/api/v1/agent/attachments`: upload an image (raw body or multipart
//! `file`), and download one through its signed URL.

use std::collections::HashMap;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::doc::bodies::{Binary, Upload};
use super::error::Detail;
use super::history::base_url;
use super::{ApiError, ApiResult, User, now_ms};
use crate::attachments::{UploadError, sniff};
use crate::service::Service;

/// What a multipart upload may add around its file (boundaries, part
/// headers, other small fields).
pub(super) const MULTIPART_OVERHEAD: usize = 64 * 1024;

const TOO_LARGE: &str = "attachment exceeds size limit";

/// A stored attachment.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Attachment)]
pub(super) struct AttachmentView {
    id: String,
    /// Absolute, signed, expiring GET URL.
    url: String,
    mime_type: &'static str,
    size: usize,
    #[schema(format = DateTime)]
    expires_at: String,
}

#[utoipa::path(
    post,
    path = "/api/v1/agent/attachments",
    operation_id = "uploadAttachment",
    summary = "Upload an image",
    description = "The raw image as the body (with its Content-Type), or multipart/form-data with the file in field `file`. The type is judged by the bytes (PNG, JPEG, GIF, WebP).",
    request_body(content((Binary = "image/*"), (Upload = "multipart/form-data"))),
    responses(
        (status = 201, description = "Stored", body = AttachmentView),
        (status = 400, description = "Malformed multipart body", body = Detail),
        (status = 413, description = "`attachment exceeds size limit`", body = Detail),
        (status = 415, description = "`the upload is not a PNG, JPEG, GIF or WebP image`", body = Detail),
        (status = 422, description = "`multipart upload needs a 'file' field`", body = Detail),
        (status = 503, description = "`attachment storage is unavailable; retry shortly` (the configured bucket failed; nothing was kept)", body = Detail),
    )
)]
pub(super) async fn upload(
    State(service): State<Service>,
    User(user): User,
    request: Request,
) -> ApiResult {
    let Some(attachments) = service.attachments.clone() else {
        return Err(ApiError::not_found("attachments are not enabled"));
    };
    let headers = request.headers().clone();
    let multipart = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    let id = uuid::Uuid::now_v7().to_string();
    let max = attachments.max_bytes;
    let (mime_type, size, in_bucket) = match attachments.bucket() {
        // Into the bucket as it arrives: never the whole file in memory.
        Some(bucket) => {
            let (mime_type, size) = if multipart {
                let mut form = form(request).await?;
                loop {
                    let field = next_field(&mut form).await?;
                    if field.name() == Some("file") {
                        let mut field = Box::pin(field);
                        break stream_to_bucket(bucket, &id, &mut field, max, multipart_failed)
                            .await?;
                    }
                }
            } else {
                let mut body = request.into_body().into_data_stream();
                stream_to_bucket(bucket, &id, &mut body, max, body_failed).await?
            };
            // The object first, then its record; a record that cannot be
            // written leaves no object behind.
            if let Err(error) = service
                .engine
                .record_bucket_attachment(&id, &user, mime_type, size)
                .await
            {
                if let Err(removal) = bucket.delete(&id).await {
                    tracing::warn!(error = %removal, attachment = %id, "could not remove the object of an upload that was not recorded");
                }
                return Err(error.into());
            }
            (mime_type, size, true)
        }
        None => {
            let bytes = if multipart {
                let mut form = form(request).await?;
                loop {
                    let field = next_field(&mut form).await?;
                    if field.name() == Some("file") {
                        break field.bytes().await.map_err(multipart_failed)?;
                    }
                }
            } else {
                super::limits::read_body(request.into_body(), max, TOO_LARGE).await?
            };
            if bytes.len() > max {
                return Err(too_large());
            }
            let mime_type = sniff(&bytes).ok_or_else(not_an_image)?;
            service
                .engine
                .keep_attachment(&id, &user, mime_type, &bytes)
                .await?;
            (mime_type, bytes.len(), false)
        }
    };
    let (url, exp) = attachments
        .url(
            &base_url(&service, &headers),
            &id,
            &user,
            in_bucket,
            now_ms() / 1000,
        )
        .await?;
    let expires_at = jiff::Timestamp::from_second(exp)
        .map(|t| t.to_string())
        .unwrap_or_default();
    Ok((
        StatusCode::CREATED,
        axum::Json(AttachmentView {
            id,
            url,
            mime_type,
            size,
            expires_at,
        }),
    )
        .into_response())
}

fn too_large() -> ApiError {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, TOO_LARGE)
}

fn not_an_image() -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "the upload is not a PNG, JPEG, GIF or WebP image",
    )
}

/// A part that breaks the body's limit is the upload being too large;
/// anything else wrong with the form is a bad request.
#[allow(clippy::needless_pass_by_value)] // the shape `map_err` takes
fn multipart_failed(error: axum::extract::multipart::MultipartError) -> ApiError {
    if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
        too_large()
    } else {
        ApiError::new(StatusCode::BAD_REQUEST, error.body_text())
    }
}

/// A raw body that breaks the route's limit is the upload being too large.
#[allow(clippy::needless_pass_by_value)] // the shape `map_err` takes
fn body_failed(error: axum::Error) -> ApiError {
    super::limits::body_error(&error, TOO_LARGE)
}

/// A multipart upload's form.
async fn form(request: Request) -> ApiResult<axum::extract::Multipart> {
    use axum::extract::FromRequest;
    axum::extract::Multipart::from_request(request, &())
        .await
        .map_err(|rejection| ApiError::new(StatusCode::BAD_REQUEST, rejection.body_text()))
}

/// The form's next field (the upload's `file` is looked for among them);
/// none left means there was none.
async fn next_field(
    form: &mut axum::extract::Multipart,
) -> ApiResult<axum::extract::multipart::Field<'_>> {
    form.next_field()
        .await
        .map_err(multipart_failed)?
        .ok_or_else(|| ApiError::unprocessable("multipart upload needs a 'file' field"))
}

/// How many bytes the type is judged by (WebP's signature is the longest).
const SNIFF_BYTES: usize = 12;

/// Streams an upload into the bucket as attachment `id`: its first bytes
/// judge its type (a body that is not an image writes nothing), the rest
/// goes on as it arrives, the size limit counted on the way.
async fn stream_to_bucket<S, E>(
    bucket: &crate::attachments::Bucket,
    id: &str,
    body: &mut S,
    max: usize,
    failed: fn(E) -> ApiError,
) -> ApiResult<(&'static str, usize)>
where
    S: futures_util::Stream<Item = Result<Bytes, E>> + Unpin,
{
    use futures_util::StreamExt;
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    while head.len() < SNIFF_BYTES {
        match body.next().await {
            Some(Ok(chunk)) => head.extend_from_slice(&chunk),
            Some(Err(error)) => return Err(failed(error)),
            None => break,
        }
        if head.len() > max {
            return Err(too_large());
        }
    }
    let mime_type = sniff(&head).ok_or_else(not_an_image)?;
    match bucket
        .upload(id, mime_type, Bytes::from(head), body, max)
        .await
    {
        Ok(size) => Ok((mime_type, size)),
        Err(UploadError::TooLarge) => Err(too_large()),
        Err(UploadError::Body(error)) => Err(failed(error)),
        Err(UploadError::Bucket(error)) => Err(error.into()),
    }
}

#[utoipa::path(
    get,
    path = "/api/v1/agent/attachments/{id}",
    operation_id = "downloadAttachment",
    summary = "Download by signed URL",
    description = "The signature (HMAC-SHA256 over id, owner and expiry) is the credential.",
    params(
        ("id" = String, Path),
        ("exp" = i64, Query),
        ("sig" = String, Query),
    ),
    responses(
        (status = 200, description = "The image", content_type = "image/*", body = Binary),
        (status = 302, description = "The image is in the attachment bucket: `Location` is its presigned URL"),
        (status = 403, description = "`invalid or expired signature`", body = Detail),
        (status = 404, description = "`attachment not found`", body = Detail),
    )
)]
pub(super) async fn download(
    State(service): State<Service>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let not_found = || ApiError::not_found("attachment not found");
    let Some(attachments) = service.attachments.clone() else {
        return Err(not_found());
    };
    let owner = service
        .engine
        .attachment(&id)
        .await?
        .ok_or_else(not_found)?;
    let exp = query.get("exp").and_then(|e| e.parse::<i64>().ok());
    let sig = query.get("sig").and_then(|s| hex::decode(s).ok());
    let valid = match (exp, sig) {
        (Some(exp), Some(sig)) => {
            attachments.verify(&id, &owner.user_id, exp, &sig, now_ms() / 1000)
        }
        _ => false,
    };
    if !valid {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "invalid or expired signature",
        ));
    }
    // Moved to the bucket since this URL was signed: the bucket serves it.
    if owner.in_bucket && attachments.bucket().is_some() {
        let (url, _) = attachments
            .url("", &id, &owner.user_id, true, now_ms() / 1000)
            .await?;
        let mut response = StatusCode::FOUND.into_response();
        if let Ok(value) = HeaderValue::from_str(&url) {
            response.headers_mut().insert(header::LOCATION, value);
        }
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return Ok(response);
    }
    let bytes = service
        .engine
        .attachment_bytes(&id)
        .await?
        .ok_or_else(not_found)?;
    let mut response = Response::new(Body::from(bytes));
    if let Ok(value) = HeaderValue::from_str(&owner.mime_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=300"),
    );
    Ok(response)
}
