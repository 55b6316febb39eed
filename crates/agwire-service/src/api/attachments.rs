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
use crate::attachments::sniff;
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
    let too_large = || ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, TOO_LARGE);
    let bytes: Bytes = if multipart {
        use axum::extract::FromRequest;
        let mut form = axum::extract::Multipart::from_request(request, &())
            .await
            .map_err(|rejection| ApiError::new(StatusCode::BAD_REQUEST, rejection.body_text()))?;
        // A part that breaks the body's limit is the upload being too large;
        // anything else wrong with the form is a bad request.
        let failed = |e: axum::extract::multipart::MultipartError| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                too_large()
            } else {
                ApiError::new(StatusCode::BAD_REQUEST, e.body_text())
            }
        };
        let mut file = None;
        while let Some(field) = form.next_field().await.map_err(failed)? {
            if field.name() == Some("file") {
                file = Some(field.bytes().await.map_err(failed)?);
                break;
            }
        }
        match file {
            Some(bytes) if bytes.len() > attachments.max_bytes => return Err(too_large()),
            Some(bytes) => bytes,
            None => {
                return Err(ApiError::unprocessable(
                    "multipart upload needs a 'file' field",
                ));
            }
        }
    } else {
        super::limits::read_body(request.into_body(), attachments.max_bytes, TOO_LARGE).await?
    };
    let Some(mime_type) = sniff(&bytes) else {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the upload is not a PNG, JPEG, GIF or WebP image",
        ));
    };
    let id = uuid::Uuid::now_v7().to_string();
    service
        .engine
        .store
        .insert_attachment(&id, &user, mime_type, &bytes, now_ms())
        .await?;
    let (url, exp) = attachments.sign(&base_url(&service, &headers), &id, &user, now_ms() / 1000);
    let expires_at = jiff::Timestamp::from_second(exp)
        .map(|t| t.to_string())
        .unwrap_or_default();
    Ok((
        StatusCode::CREATED,
        axum::Json(AttachmentView {
            id,
            url,
            mime_type,
            size: bytes.len(),
            expires_at,
        }),
    )
        .into_response())
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
        .store
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
    let bytes = service
        .engine
        .store
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
