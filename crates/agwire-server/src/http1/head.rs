//! Request heads in, response heads out, and how each body is framed.

use std::fmt::Write as _;

use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::{Method, Request, StatusCode, Uri, Version};

/// A request head that cannot be served; answered with its status and the
/// connection closed.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) detail: &'static str,
}

const fn refuse(status: StatusCode, detail: &'static str) -> Refusal {
    Refusal { status, detail }
}

/// How the request's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestBody {
    /// `Content-Length: n` (0 when neither header is there).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A parsed request head.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) request: Request<()>,
    /// Bytes of the head, to drop from the read buffer.
    pub(crate) len: usize,
    pub(crate) body: RequestBody,
    /// The connection may carry another request after this one.
    pub(crate) keep_alive: bool,
    /// `Expect: 100-continue`.
    pub(crate) expects_continue: bool,
}

/// Parses a request head from the start of `buf`: `Ok(None)` while it is
/// incomplete.
pub(crate) fn parse(buf: &[u8], max_headers: usize) -> Result<Option<Head>, Refusal> {
    let mut slots = vec![httparse::EMPTY_HEADER; max_headers];
    let mut parsed = httparse::Request::new(&mut slots);
    let len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(refuse(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "too many request headers",
            ));
        }
        Err(_) => return Err(refuse(StatusCode::BAD_REQUEST, "malformed request head")),
    };
    let (Some(method), Some(path), Some(minor)) = (parsed.method, parsed.path, parsed.version)
    else {
        return Err(refuse(StatusCode::BAD_REQUEST, "malformed request line"));
    };
    let method = Method::from_bytes(method.as_bytes())
        .map_err(|_| refuse(StatusCode::BAD_REQUEST, "malformed method"))?;
    let uri: Uri = path
        .parse()
        .map_err(|_| refuse(StatusCode::BAD_REQUEST, "malformed request target"))?;
    let version = if minor == 0 {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    let mut headers = HeaderMap::with_capacity(parsed.headers.len());
    for h in parsed.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| refuse(StatusCode::BAD_REQUEST, "malformed header name"))?;
        let value = HeaderValue::from_bytes(h.value)
            .map_err(|_| refuse(StatusCode::BAD_REQUEST, "malformed header value"))?;
        headers.append(name, value);
    }
    let body = request_body(&headers, version)?;
    let keep_alive = wants_keep_alive(&headers, version);
    let expects_continue = version == Version::HTTP_11
        && headers
            .get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let mut request = Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = version;
    *request.headers_mut() = headers;
    Ok(Some(Head {
        request,
        len,
        body,
        keep_alive,
        expects_continue,
    }))
}

/// RFC 9112 §6.3: chunked wins and must be last; a request with both
/// headers, or with lengths that disagree, is refused (the classic request
/// smuggling ambiguities).
fn request_body(headers: &HeaderMap, version: Version) -> Result<RequestBody, Refusal> {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        if version == Version::HTTP_10 || headers.contains_key(header::CONTENT_LENGTH) {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "transfer-encoding with content-length, or on HTTP/1.0",
            ));
        }
        let last = headers
            .get_all(header::TRANSFER_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .next_back();
        return match last {
            Some(coding) if coding.eq_ignore_ascii_case("chunked") => Ok(RequestBody::Chunked),
            _ => Err(refuse(
                StatusCode::BAD_REQUEST,
                "the request body's transfer-encoding must end with chunked",
            )),
        };
    }
    let mut length = None;
    for value in &headers.get_all(header::CONTENT_LENGTH) {
        for part in value.to_str().unwrap_or("x").split(',') {
            let part = part.trim();
            let n = (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
                .then(|| part.parse::<u64>().ok())
                .flatten()
                .ok_or(refuse(StatusCode::BAD_REQUEST, "malformed content-length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(refuse(
                    StatusCode::BAD_REQUEST,
                    "content-length values disagree",
                ));
            }
            length = Some(n);
        }
    }
    Ok(RequestBody::Length(length.unwrap_or(0)))
}

/// Whether the `Connection` header has `token`.
fn connection_has(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

fn wants_keep_alive(headers: &HeaderMap, version: Version) -> bool {
    if version == Version::HTTP_10 {
        connection_has(headers, "keep-alive")
    } else {
        !connection_has(headers, "close")
    }
}

/// How a response's body goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResponseBody {
    /// No body at all (HEAD, 1xx, 204, 304).
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the connection closes (an HTTP/1.0 client and no length).
    UntilClose,
}

/// Writes the status line and headers of `parts` to `out`, choosing the
/// body's framing: a length when the body knows it, chunks otherwise
/// (closing the connection for an HTTP/1.0 client). Returns the framing and
/// whether the connection may stay open after this response.
pub(crate) fn write_response_head(
    parts: &mut axum::http::response::Parts,
    request_method: &Method,
    request_version: Version,
    exact_len: Option<u64>,
    mut keep_alive: bool,
    out: &mut bytes::BytesMut,
) -> (ResponseBody, bool) {
    let status = parts.status;
    let headers = &mut parts.headers;
    if connection_has(headers, "close") {
        keep_alive = false;
    }
    let no_body = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let framing = if no_body {
        headers.remove(header::TRANSFER_ENCODING);
        if status == StatusCode::NO_CONTENT || status.is_informational() {
            headers.remove(header::CONTENT_LENGTH);
        }
        ResponseBody::None
    } else if let Some(n) = exact_len {
        headers.remove(header::TRANSFER_ENCODING);
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        ResponseBody::Length(n)
    } else if let Some(n) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
    {
        headers.remove(header::TRANSFER_ENCODING);
        ResponseBody::Length(n)
    } else if request_version == Version::HTTP_11 {
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        ResponseBody::Chunked
    } else {
        headers.remove(header::CONTENT_LENGTH);
        keep_alive = false;
        ResponseBody::UntilClose
    };
    let framing = if request_method == Method::HEAD {
        ResponseBody::None
    } else {
        framing
    };
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.extend_from_slice(b" ");
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers.iter() {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !headers.contains_key(header::DATE) {
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(httpdate::fmt_http_date(std::time::SystemTime::now()).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !keep_alive && !headers.contains_key(header::CONNECTION) {
        out.extend_from_slice(b"connection: close\r\n");
    } else if keep_alive && request_version == Version::HTTP_10 {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    (framing, keep_alive)
}

/// The line that starts a chunk of `len` bytes.
pub(crate) fn chunk_size_line(len: usize, out: &mut bytes::BytesMut) {
    let mut line = String::with_capacity(18);
    let _ = write!(line, "{len:x}\r\n");
    out.extend_from_slice(line.as_bytes());
}

/// A small error answer with `{"detail": ...}` and `connection: close`.
pub(crate) fn refusal_response(refusal: &Refusal) -> Vec<u8> {
    let body = serde_json::json!({ "detail": refusal.detail }).to_string();
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        refusal.status.as_str(),
        refusal.status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Result<Option<Head>, Refusal> {
        parse(text.as_bytes(), 16)
    }

    #[test]
    fn a_head_is_parsed_when_complete() {
        assert!(matches!(head("GET / HTTP/1.1\r\nhost: a\r\n"), Ok(None)));
        let parsed = head("POST /x?y=1 HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\nhello")
            .ok()
            .flatten();
        let parsed = parsed.expect("complete");
        assert_eq!(parsed.request.uri().path(), "/x");
        assert_eq!(parsed.body, RequestBody::Length(5));
        assert!(parsed.keep_alive);
        assert_eq!(
            parsed.len,
            "POST /x?y=1 HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\n\r\n".len()
        );
    }

    #[test]
    fn ambiguous_bodies_are_refused() {
        for text in [
            "POST / HTTP/1.1\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n",
            "POST / HTTP/1.1\r\ncontent-length: +5\r\n\r\n",
            "POST / HTTP/1.1\r\ntransfer-encoding: chunked, gzip\r\n\r\n",
            "POST / HTTP/1.0\r\ntransfer-encoding: chunked\r\n\r\n",
        ] {
            let refused = head(text).err().map(|r| r.status);
            assert_eq!(refused, Some(StatusCode::BAD_REQUEST), "{text}");
        }
        let same = head("POST / HTTP/1.1\r\ncontent-length: 5, 5\r\n\r\n")
            .ok()
            .flatten();
        assert_eq!(same.map(|h| h.body), Some(RequestBody::Length(5)));
    }

    #[test]
    fn too_many_headers_is_431() {
        let text = format!("GET / HTTP/1.1\r\n{}\r\n", "a: b\r\n".repeat(17));
        let refused = parse(text.as_bytes(), 16).err().map(|r| r.status);
        assert_eq!(refused, Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE));
    }

    #[test]
    fn keep_alive_follows_the_version_and_connection_header() {
        let ka = |t: &str| head(t).ok().flatten().map(|h| h.keep_alive);
        assert_eq!(ka("GET / HTTP/1.1\r\n\r\n"), Some(true));
        assert_eq!(
            ka("GET / HTTP/1.1\r\nconnection: close\r\n\r\n"),
            Some(false)
        );
        assert_eq!(ka("GET / HTTP/1.0\r\n\r\n"), Some(false));
        assert_eq!(
            ka("GET / HTTP/1.0\r\nconnection: keep-alive\r\n\r\n"),
            Some(true)
        );
    }

    #[test]
    fn the_response_head_frames_its_body() {
        let frame = |status: StatusCode, method: Method, version: Version, len: Option<u64>| {
            let (mut parts, ()) = axum::http::Response::builder()
                .status(status)
                .body(())
                .map(axum::http::Response::into_parts)
                .expect("response");
            let mut out = bytes::BytesMut::new();
            let (framing, keep) =
                write_response_head(&mut parts, &method, version, len, true, &mut out);
            (
                framing,
                keep,
                String::from_utf8(out.to_vec()).unwrap_or_default(),
            )
        };
        let (framing, keep, text) = frame(StatusCode::OK, Method::POST, Version::HTTP_11, None);
        assert_eq!((framing, keep), (ResponseBody::Chunked, true));
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(text.contains("transfer-encoding: chunked\r\n"));
        let (framing, _, text) = frame(StatusCode::OK, Method::GET, Version::HTTP_11, Some(3));
        assert_eq!(framing, ResponseBody::Length(3));
        assert!(text.contains("content-length: 3\r\n"));
        let (framing, _, _) = frame(StatusCode::OK, Method::HEAD, Version::HTTP_11, Some(3));
        assert_eq!(framing, ResponseBody::None);
        let (framing, keep, text) = frame(StatusCode::OK, Method::GET, Version::HTTP_10, None);
        assert_eq!((framing, keep), (ResponseBody::UntilClose, false));
        assert!(text.contains("connection: close\r\n"));
        let (framing, _, _) = frame(
            StatusCode::NO_CONTENT,
            Method::GET,
            Version::HTTP_11,
            Some(0),
        );
        assert_eq!(framing, ResponseBody::None);
    }
}
