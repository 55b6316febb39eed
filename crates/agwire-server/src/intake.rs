//! [`Intake`]: reading an AG-UI request before anything is streamed.

use agwire_codec::negotiate::{Negotiator, WireFormat};
use agwire_core::RunAgentInput;
use agwire_core::decode::{DecodeMode, decode};
use axum::body::Body;
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};

/// Default request body limit: 10 MiB, the official SSE parser's event limit.
pub const DEFAULT_MAX_BODY_BYTES: usize = 10 * 1024 * 1024;

/// Why a request was refused before its stream began. Each has an HTTP
/// status ([`IntakeError::status`]) and a message ([`IntakeError::detail`]);
/// as a response it is that status with a JSON body `{"detail": "..."}`.
/// A handler with messages of its own matches on the variant instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IntakeError {
    /// 405: not a `POST`.
    #[error("method not allowed: use POST")]
    MethodNotAllowed,
    /// 415: a `Content-Type` that is not JSON (`application/json` or
    /// `application/*+json`), or none where one is required.
    #[error("the body must be a JSON RunAgentInput (Content-Type: application/json)")]
    UnsupportedMediaType,
    /// 413: the body (as declared by `Content-Length`, or as read) is over the limit.
    #[error("the body exceeds {limit} bytes")]
    PayloadTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// 400: the body could not be read.
    #[error("could not read the body: {0}")]
    Unreadable(String),
    /// 400: the body is not JSON.
    #[error("invalid JSON: {0}")]
    InvalidJson(String),
    /// 422: JSON, but not a `RunAgentInput`.
    #[error("{0}")]
    InvalidInput(String),
}

impl IntakeError {
    /// The HTTP status this refusal is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            IntakeError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            IntakeError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            IntakeError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            IntakeError::Unreadable(_) | IntakeError::InvalidJson(_) => StatusCode::BAD_REQUEST,
            IntakeError::InvalidInput(_) => StatusCode::UNPROCESSABLE_ENTITY,
        }
    }

    /// The message of the JSON body.
    pub fn detail(&self) -> String {
        self.to_string()
    }
}

impl IntoResponse for IntakeError {
    fn into_response(self) -> Response {
        let mut response = detail_response(self.status(), &self.detail());
        if self == IntakeError::MethodNotAllowed {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
        }
        response
    }
}

/// A status with a JSON body `{"detail": detail}`.
pub(crate) fn detail_response(status: StatusCode, detail: &str) -> Response {
    let body = serde_json::json!({ "detail": detail }).to_string();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The checks an AG-UI request passes before its stream begins, in order:
/// the method (`POST`), the content type (JSON), a declared `Content-Length`
/// over the limit (refused at once, before a byte of the body is read), the
/// body read within the limit, the JSON parse; and, beside them, the
/// `Accept` negotiation of the response's [`WireFormat`].
///
/// [`AgentEndpoint`](crate::AgentEndpoint) runs exactly these; a handler of
/// its own uses the step it needs — [`Intake::bytes`], [`Intake::json`] or
/// [`Intake::run_input`] — and applies its own validation afterwards.
///
/// ```
/// use agwire_server::{Intake, IntakeError};
/// use axum::extract::Request;
/// use axum::response::{IntoResponse, Response};
///
/// async fn handler(request: Request) -> Response {
///     let intake = Intake::new().max_body_bytes(64 * 1024);
///     let (value, format) = match intake.json(request).await {
///         Ok(accepted) => accepted,
///         // Our own message for one refusal, the standard one for the rest.
///         Err(IntakeError::PayloadTooLarge { .. }) => {
///             return (axum::http::StatusCode::PAYLOAD_TOO_LARGE, "too big").into_response();
///         }
///         Err(error) => return error.into_response(),
///     };
///     // ... validate `value`, then stream in `format`
///     # let _ = (value, format);
///     # unimplemented!()
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Intake {
    negotiator: Negotiator,
    max_body_bytes: usize,
    require_content_type: bool,
}

impl Default for Intake {
    fn default() -> Self {
        Self::new()
    }
}

impl Intake {
    /// The defaults: a 10 MiB body limit, the standard negotiation (SSE only
    /// without the `proto` feature), and a request without `Content-Type`
    /// read as JSON.
    pub fn new() -> Self {
        let negotiator = Negotiator::new();
        #[cfg(not(feature = "proto"))]
        let negotiator = negotiator.sse_only();
        Self {
            negotiator,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            require_content_type: false,
        }
    }

    /// The `Accept` negotiation.
    pub fn negotiator(mut self, negotiator: Negotiator) -> Self {
        self.negotiator = negotiator;
        self
    }

    /// Largest body accepted, in bytes.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Whether a request without `Content-Type` is refused with 415 too
    /// (by default it is read as JSON; any other content type is refused).
    pub fn require_content_type(mut self, yes: bool) -> Self {
        self.require_content_type = yes;
        self
    }

    /// The format the response is sent in, from the request's `Accept`.
    pub fn format(&self, headers: &HeaderMap) -> WireFormat {
        self.negotiator
            .choose(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()))
    }

    /// Method, content type and declared length: what is checked before the
    /// body is read.
    pub fn check_head(&self, method: &Method, headers: &HeaderMap) -> Result<(), IntakeError> {
        if method != Method::POST {
            return Err(IntakeError::MethodNotAllowed);
        }
        match headers.get(header::CONTENT_TYPE) {
            Some(content_type) if !is_json(content_type) => {
                return Err(IntakeError::UnsupportedMediaType);
            }
            None if self.require_content_type => return Err(IntakeError::UnsupportedMediaType),
            _ => {}
        }
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_body_bytes as u64) {
            return Err(self.too_large());
        }
        Ok(())
    }

    fn too_large(&self) -> IntakeError {
        IntakeError::PayloadTooLarge {
            limit: self.max_body_bytes,
        }
    }

    /// The checked request's body, and the response format.
    pub async fn bytes(&self, request: Request) -> Result<(Bytes, WireFormat), IntakeError> {
        let (parts, body) = request.into_parts();
        self.bytes_of(&parts, body).await
    }

    /// [`Intake::bytes`] of a request already split, so the caller keeps
    /// its head (an agent sees it: [`crate::RunContext::request`]).
    async fn bytes_of(&self, head: &Parts, body: Body) -> Result<(Bytes, WireFormat), IntakeError> {
        self.check_head(&head.method, &head.headers)?;
        let format = self.format(&head.headers);
        let body = Limited::new(body, self.max_body_bytes)
            .collect()
            .await
            .map_err(|err| {
                if err.downcast_ref::<LengthLimitError>().is_some() {
                    self.too_large()
                } else {
                    IntakeError::Unreadable(err.to_string())
                }
            })?
            .to_bytes();
        Ok((body, format))
    }

    /// The checked request's body parsed as JSON, and the response format.
    pub async fn json(
        &self,
        request: Request,
    ) -> Result<(serde_json::Value, WireFormat), IntakeError> {
        let (parts, body) = request.into_parts();
        self.json_of(&parts, body).await
    }

    async fn json_of(
        &self,
        head: &Parts,
        body: Body,
    ) -> Result<(serde_json::Value, WireFormat), IntakeError> {
        let (body, format) = self.bytes_of(head, body).await?;
        let value = serde_json::from_slice(&body)
            .map_err(|err| IntakeError::InvalidJson(err.to_string()))?;
        Ok((value, format))
    }

    /// The checked request's `RunAgentInput` (decoded leniently, as the
    /// official client's peers are read; warnings are traced), and the
    /// response format.
    pub async fn run_input(
        &self,
        request: Request,
    ) -> Result<(RunAgentInput, WireFormat), IntakeError> {
        let (parts, body) = request.into_parts();
        self.run_input_of(&parts, body).await
    }

    /// [`Intake::run_input`] of a request already split: the head stays
    /// the caller's.
    pub async fn run_input_of(
        &self,
        head: &Parts,
        body: Body,
    ) -> Result<(RunAgentInput, WireFormat), IntakeError> {
        let (value, format) = self.json_of(head, body).await?;
        let decoded = decode::<RunAgentInput>(value, DecodeMode::Lenient)
            .map_err(|err| IntakeError::InvalidInput(err.to_string()))?;
        for warning in &decoded.warnings {
            warning.trace();
        }
        Ok((decoded.value, format))
    }
}

/// `application/json` or `application/<anything>+json`, parameters aside.
fn is_json(content_type: &HeaderValue) -> bool {
    let Ok(value) = content_type.to_str() else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, headers: &[(&str, &str)], body: &'static str) -> Request {
        let mut builder = axum::http::Request::builder().method(method).uri("/");
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        builder.body(Body::from(body)).unwrap()
    }

    #[tokio::test]
    async fn each_refusal_has_its_status() {
        let intake = Intake::new().max_body_bytes(10);
        let cases: [(Request, StatusCode); 8] = [
            (request("GET", &[], ""), StatusCode::METHOD_NOT_ALLOWED),
            (
                request("POST", &[("content-type", "text/plain")], "{}"),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ),
            (
                request(
                    "POST",
                    &[("content-type", "application/x-www-form-urlencoded")],
                    "{}",
                ),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ),
            (
                request("POST", &[("content-length", "1000000000000")], ""),
                StatusCode::PAYLOAD_TOO_LARGE,
            ),
            (
                request("POST", &[], "[1,2,3,4,5,6,7,8]"),
                StatusCode::PAYLOAD_TOO_LARGE,
            ),
            (
                request("POST", &[("content-type", "application/json")], "{"),
                StatusCode::BAD_REQUEST,
            ),
            (
                request(
                    "POST",
                    &[("content-type", "Application/JSON; charset=utf-8")],
                    "[]",
                ),
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
            (
                request("POST", &[("content-type", "application/vnd.x+json")], "{}"),
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
        ];
        for (i, (req, status)) in cases.into_iter().enumerate() {
            let err = intake.run_input(req).await.unwrap_err();
            assert_eq!(err.status(), status, "case {i}: {err}");
            let response = err.clone().into_response();
            assert_eq!(response.status(), status);
            assert_eq!(response.headers()["content-type"], "application/json");
            let body = response.into_body().collect().await.unwrap().to_bytes();
            let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(json["detail"], err.detail(), "case {i}");
        }
        let strict = Intake::new().require_content_type(true);
        assert_eq!(
            strict.bytes(request("POST", &[], "{}")).await.unwrap_err(),
            IntakeError::UnsupportedMediaType
        );
    }

    #[tokio::test]
    async fn an_accepted_request_yields_its_input_and_format() {
        let body = r#"{"threadId":"t","runId":"r","messages":[],"tools":[],"context":[],"state":{},"forwardedProps":{}}"#;
        let req = request(
            "POST",
            &[
                ("content-type", "application/json"),
                ("accept", "application/vnd.ag-ui.event+proto"),
            ],
            body,
        );
        let (input, format) = Intake::new().run_input(req).await.unwrap();
        assert_eq!(
            (input.thread_id.as_str(), input.run_id.as_str()),
            ("t", "r")
        );
        #[cfg(feature = "proto")]
        assert_eq!(format, WireFormat::Protobuf);
        let (bytes, format) = Intake::new()
            .bytes(request("POST", &[], body))
            .await
            .unwrap();
        assert_eq!(&bytes[..], body.as_bytes());
        assert_eq!(format, WireFormat::Sse);
    }
}
