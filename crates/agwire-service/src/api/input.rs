//! What request input must be before a handler runs, for every endpoint:
//! a JSON body declared as JSON (415 otherwise), and no text the databases
//! cannot hold ([`crate::storable`]) in a JSON body (422) or the URL (400).
//! Judged before the handler, so before anything is written.
//!
//! Why the content type matters beyond parsing: a page on another site can
//! make the browser POST `text/plain`, `multipart/form-data` or
//! `application/x-www-form-urlencoded` without asking (a "simple" request,
//! no CORS preflight); `application/json` it can only send after the
//! service's CORS answer allows it. Requiring it closes that door on every
//! JSON endpoint (the origin check in [`super::browser`] closes it on the
//! rest).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use crate::storable::{nul_detail, nul_in_json};

/// Whether the request says its body is JSON (`application/json` or
/// `application/*+json`, any parameters).
fn declares_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            v == "application/json" || (v.starts_with("application/") && v.ends_with("+json"))
        })
}

/// The 415 every JSON endpoint answers unless the request
/// [`declares_json`].
pub(crate) fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    if declares_json(headers) {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "Content-Type must be application/json",
    ))
}

/// The 422 for a JSON text that holds a NUL character somewhere.
pub(crate) fn storable(json: &[u8]) -> Result<(), ApiError> {
    match nul_in_json(json) {
        Some(at) => Err(ApiError::unprocessable(nul_detail(&at))),
        None => Ok(()),
    }
}

/// A JSON request body's bytes: declared `application/json` (415), within
/// the route's limit (413), and holding no NUL character (422). The handler
/// parses them, with its own messages for what they must be.
pub(crate) struct JsonBody(pub(crate) Bytes);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        require_json(request.headers())?;
        let bytes =
            Bytes::from_request(request, state)
                .await
                .map_err(|rejection| match rejection.status() {
                    // The small routes' limit (`http.max_body_bytes`), as its
                    // layer words it.
                    StatusCode::PAYLOAD_TOO_LARGE => {
                        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, super::limits::BODY_TOO_LARGE)
                    }
                    status => ApiError::new(status, rejection.body_text()),
                })?;
        storable(&bytes)?;
        Ok(Self(bytes))
    }
}

/// The router layer refusing a URL whose path or query holds an encoded
/// NUL (`%00`): every path and query parameter reaches a database lookup, and
/// PostgreSQL would fail the query (a 500) where SQLite finds nothing.
pub(crate) async fn storable_url(request: Request, next: Next) -> Response {
    let target = request
        .uri()
        .path_and_query()
        .map_or("", axum::http::uri::PathAndQuery::as_str);
    let encoded_nul = target
        .as_bytes()
        .windows(3)
        .any(|w| w[0] == b'%' && w[1] == b'0' && w[2] == b'0');
    if encoded_nul {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "the URL must not contain the NUL character (%00)",
        )
        .into_response();
    }
    next.run(request).await
}
