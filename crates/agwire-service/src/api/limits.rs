//! Request limits as router layers, each answering JSON `{"detail"}`: the
//! header limits (431), a body limit per route (413, at once when the
//! declared length is over it), and one layer that turns every error the
//! framework answers by itself (unknown route, wrong method, extractor
//! rejections, timeouts) into the same JSON shape.

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Limited};

use crate::api::error::ApiError;

/// An error answer: `{"detail": message}`.
fn detail(status: StatusCode, message: &str) -> Response {
    ApiError::new(status, message).into_response()
}

fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// Largest framework error body read back to become a `detail`.
const MAX_FRAMEWORK_ERROR: usize = 16 * 1024;

/// Every 4xx/5xx answered without a JSON body (404 for an unknown route,
/// 405, axum's extractor rejections, 408 from the request timeout) gets one:
/// its text as `detail`, or the status's reason when it had none.
pub(crate) async fn json_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || is_json(&response) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = match Limited::new(body, MAX_FRAMEWORK_ERROR).collect().await {
        Ok(bytes) => String::from_utf8_lossy(&bytes.to_bytes()).trim().to_owned(),
        Err(_) => String::new(),
    };
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    let body = serde_json::json!({ "detail": message }).to_string();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

/// The configured header limits (431): total bytes of names and values, and
/// count. The connection's own cap is larger, so these answer first.
pub(crate) fn header_limits(
    max_bytes: usize,
    max_count: usize,
) -> impl Fn(Request, Next) -> std::pin::Pin<Box<dyn Future<Output = Response> + Send>> + Clone {
    move |request: Request, next: Next| {
        let headers = request.headers();
        let count = headers.len();
        let bytes: usize = headers
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + 4)
            .sum();
        if count > max_count || bytes > max_bytes {
            let message = format!(
                "request headers too large: at most {max_count} headers and {max_bytes} bytes"
            );
            return Box::pin(async move {
                detail(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, &message)
            });
        }
        Box::pin(next.run(request))
    }
}

/// The 413 of the routes that take small JSON documents (`http.max_body_bytes`).
pub(crate) const BODY_TOO_LARGE: &str = "the request body exceeds the size limit";

/// Bodies declared over a limit by at most this much are read to their end
/// (and dropped) after the 413 is sent, so the client finishes writing and
/// reads the answer instead of finding its socket reset mid-upload (what
/// nginx calls a lingering close). Larger ones are not worth reading.
const LINGER_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// How long such a body may take to arrive.
const LINGER_TIME: Duration = Duration::from_secs(10);

/// A route's body limit: a declared `Content-Length` over `limit` is a 413
/// with `message` before a byte is read; a body that turns out longer
/// (chunked) stops at the limit, and whatever 413 the route answers says
/// `message`.
pub(crate) fn body_limit(
    limit: usize,
    message: &'static str,
) -> impl Fn(Request, Next) -> std::pin::Pin<Box<dyn Future<Output = Response> + Send>> + Clone {
    move |request: Request, next: Next| {
        Box::pin(async move {
            let declared = request
                .headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            if let Some(declared) = declared
                && declared > limit as u64
            {
                let mut response = detail(StatusCode::PAYLOAD_TOO_LARGE, message);
                if declared <= LINGER_MAX_BYTES {
                    let body = request.into_body();
                    tokio::spawn(async move {
                        let drain = async {
                            let mut body = body;
                            while let Some(Ok(_)) = body.frame().await {}
                        };
                        let _ = tokio::time::timeout(LINGER_TIME, drain).await;
                    });
                } else {
                    response
                        .headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                return response;
            }
            let (parts, body) = request.into_parts();
            let limited = Request::from_parts(parts, Body::new(Limited::new(body, limit)));
            let response = next.run(limited).await;
            if response.status() == StatusCode::PAYLOAD_TOO_LARGE && !is_json(&response) {
                return detail(StatusCode::PAYLOAD_TOO_LARGE, message);
            }
            response
        })
    }
}

/// Reads a whole body of at most `limit` bytes: over it, a 413 saying
/// `too_large`; a body that breaks off or times out, a 400.
pub(crate) async fn read_body(
    body: Body,
    limit: usize,
    too_large: &str,
) -> Result<axum::body::Bytes, ApiError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if is_length_limit(&*error) => {
            Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, too_large))
        }
        Err(error) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("could not read the request body: {error}"),
        )),
    }
}

/// A body that could not be read: past the route's limit (413, `too_large`),
/// or broken (400).
pub(crate) fn body_error(error: &axum::Error, too_large: &str) -> ApiError {
    if is_length_limit(error) {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, too_large)
    } else {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("could not read the request body: {error}"),
        )
    }
}

/// Whether a body error is (or wraps) a length limit being hit, by the
/// route's limit layer or the reader's own.
fn is_length_limit(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        if error.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cause = error.source();
    }
    false
}
