//! Request heads: finding where one ends, parsing it, and the framing of
//! its body — strict wherever a lenient reading could let a front end and
//! this server disagree about where a request ends (request smuggling).

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, StatusCode, Uri, Version};

/// Longest request target, as hyper (and `http::Uri`) take it: 414 above.
pub(crate) const MAX_URI_BYTES: usize = u16::MAX as usize - 1;

/// A request head that cannot be served; answered with its status and a
/// JSON `{"detail"}`, and the connection closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) detail: &'static str,
}

pub(crate) const fn refuse(status: StatusCode, detail: &'static str) -> Refusal {
    Refusal { status, detail }
}

pub(crate) const HEAD_TOO_LARGE: Refusal = refuse(
    StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
    "request head too large",
);
pub(crate) const URI_TOO_LONG: Refusal =
    refuse(StatusCode::URI_TOO_LONG, "request target too long");

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

/// Where the head in `buf` ends: just past its empty line (`\n\n` or
/// `\n\r\n`, the line endings `httparse` accepts). `next` is where the
/// search resumes, kept between calls so that a head arriving in pieces is
/// scanned once, not from its first byte on every read; after a find it
/// points past that line feed, so searching again moves on.
pub(crate) fn find_end(buf: &[u8], next: &mut usize) -> Option<usize> {
    let mut i = *next;
    while let Some(offset) = buf
        .get(i..)
        .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
    {
        i += offset;
        match &buf[i + 1..] {
            [] | [b'\r'] => break,
            [b'\n', ..] => {
                *next = i + 1;
                return Some(i + 2);
            }
            [b'\r', b'\n', ..] => {
                *next = i + 1;
                return Some(i + 3);
            }
            _ => i += 1,
        }
    }
    *next = i.min(buf.len());
    None
}

#[cfg(test)]
thread_local! {
    /// How many times this thread parsed a head (the connection's tests
    /// check that a head arriving in pieces is parsed once).
    pub(crate) static PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Parses the request head at the start of `buf`: `Ok(None)` while it is
/// incomplete. `buf` is usually cut at [`find_end`].
pub(crate) fn parse(buf: &[u8], max_headers: usize) -> Result<Option<Head>, Refusal> {
    #[cfg(test)]
    PARSES.with(|parses| parses.set(parses.get() + 1));
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
    if path.len() > MAX_URI_BYTES {
        return Err(URI_TOO_LONG);
    }
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
    check_host(&headers, version)?;
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

/// RFC 9112 §3.2: an HTTP/1.1 request has exactly one `Host`; none, or
/// two (which a front end and this server could each read differently), is
/// a 400. HTTP/1.0 may omit it, but not repeat it. (hyper takes both; nginx
/// refuses both, as here.)
fn check_host(headers: &HeaderMap, version: Version) -> Result<(), Refusal> {
    let mut hosts = headers.get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (_, Some(_)) => Err(refuse(StatusCode::BAD_REQUEST, "more than one host header")),
        (None, None) if version == Version::HTTP_11 => {
            Err(refuse(StatusCode::BAD_REQUEST, "missing host header"))
        }
        _ => Ok(()),
    }
}

/// RFC 9112 §6.3: chunked wins and must be last. Stricter than hyper where
/// being lenient is how requests are smuggled: `Transfer-Encoding` with
/// `Content-Length` (hyper drops the length and closes after), `chunked`
/// more than once, any value that is not ASCII, or lengths that disagree,
/// are all a 400.
fn request_body(headers: &HeaderMap, version: Version) -> Result<RequestBody, Refusal> {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        if version == Version::HTTP_10 || headers.contains_key(header::CONTENT_LENGTH) {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "transfer-encoding with content-length, or on HTTP/1.0",
            ));
        }
        let mut codings = Vec::new();
        let values = headers.get_all(header::TRANSFER_ENCODING);
        for value in &values {
            let value = value.to_str().map_err(|_| {
                refuse(StatusCode::BAD_REQUEST, "malformed transfer-encoding value")
            })?;
            codings.extend(value.split(',').map(str::trim));
        }
        let chunked = |c: &str| c.eq_ignore_ascii_case("chunked");
        return match codings.last() {
            Some(last) if chunked(last) && codings.iter().filter(|c| chunked(c)).count() == 1 => {
                Ok(RequestBody::Chunked)
            }
            _ => Err(refuse(
                StatusCode::BAD_REQUEST,
                "the request body's transfer-encoding must end with chunked, once",
            )),
        };
    }
    let mut length = None;
    for value in &headers.get_all(header::CONTENT_LENGTH) {
        // One number per line. RFC 9110 §8.6 lets a recipient take a list
        // of equal values (`5, 5`), but hyper refuses it, and a list is
        // what a proxy that joined two lengths sends: the stricter reading
        // (the differential test against hyper found the gap).
        let part = value.to_str().unwrap_or("x").trim();
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
    Ok(RequestBody::Length(length.unwrap_or(0)))
}

/// Whether the `Connection` header has `token`.
pub(crate) fn connection_has(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

fn wants_keep_alive(headers: &HeaderMap, version: Version) -> bool {
    if version == Version::HTTP_10 {
        connection_has(headers, "keep-alive") && !connection_has(headers, "close")
    } else {
        !connection_has(headers, "close")
    }
}

/// A small error answer with `{"detail": ...}` and `connection: close`.
/// To what reads as a `HEAD` request, the same head without the body (a
/// client takes no body after a `HEAD` answer, and would read it as the
/// start of another).
pub(crate) fn refusal_response(refusal: &Refusal, request: &[u8]) -> Vec<u8> {
    let body = serde_json::json!({ "detail": refusal.detail }).to_string();
    let head = request
        .iter()
        .position(|b| !b"\r\n".contains(b))
        .is_some_and(|start| request[start..].starts_with(b"HEAD "));
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
        refusal.status.as_str(),
        refusal.status.canonical_reason().unwrap_or(""),
        body.len(),
        if head { "" } else { &body },
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Result<Option<Head>, Refusal> {
        parse(text.as_bytes(), 16)
    }

    fn status(text: &str) -> Option<StatusCode> {
        head(text).err().map(|r| r.status)
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
    fn the_end_of_a_head_is_found_across_reads() {
        let text = b"GET / HTTP/1.1\r\nhost: a\r\n\r\nGET";
        let mut next = 0;
        // Fed one byte more at a time, the end is found once it is there.
        for n in 0..=text.len() {
            let found = find_end(&text[..n], &mut next);
            assert_eq!(found, (n >= 27).then_some(27), "at {n}");
            if found.is_some() {
                next = 0;
            }
        }
        let mut next = 0;
        assert_eq!(
            find_end(b"GET / HTTP/1.1\nhost: a\n\nrest", &mut next),
            Some(24)
        );
        // Searching again moves on to the next empty line.
        let mut next = 0;
        assert_eq!(find_end(b"\n\n\n", &mut next), Some(2));
        assert_eq!(find_end(b"\n\n\n", &mut next), Some(3));
        assert_eq!(find_end(b"\n\n\n", &mut next), None);
    }

    #[test]
    fn ambiguous_bodies_are_refused() {
        for text in [
            "POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n",
            "POST / HTTP/1.1\r\nhost: a\r\ncontent-length: +5\r\n\r\n",
            "POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked, gzip\r\n\r\n",
            "POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked, chunked\r\n\r\n",
            "POST / HTTP/1.0\r\ntransfer-encoding: chunked\r\n\r\n",
        ] {
            assert_eq!(status(text), Some(StatusCode::BAD_REQUEST), "{text}");
        }
        // A value that is not ASCII is not skipped: it is the last coding.
        let refused = parse(
            b"POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\ntransfer-encoding: gzip\xff\r\n\r\n",
            16,
        );
        assert_eq!(
            refused.err().map(|r| r.status),
            Some(StatusCode::BAD_REQUEST)
        );
        // Two equal lengths on two lines are one length; on one line, a
        // list, they are refused (as hyper refuses them).
        let same =
            head("POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 5\r\ncontent-length: 5\r\n\r\n")
                .ok()
                .flatten();
        assert_eq!(same.map(|h| h.body), Some(RequestBody::Length(5)));
        let listed = parse(
            b"POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 5, 5\r\n\r\n",
            16,
        );
        assert_eq!(
            listed.err().map(|r| r.status),
            Some(StatusCode::BAD_REQUEST)
        );
        let gzip_then_chunked =
            head("POST / HTTP/1.1\r\nhost: a\r\ntransfer-encoding: gzip\r\ntransfer-encoding: chunked\r\n\r\n")
                .ok()
                .flatten();
        assert_eq!(
            gzip_then_chunked.map(|h| h.body),
            Some(RequestBody::Chunked)
        );
    }

    #[test]
    fn host_is_required_once_in_http_1_1() {
        assert_eq!(
            status("GET / HTTP/1.1\r\n\r\n"),
            Some(StatusCode::BAD_REQUEST)
        );
        assert_eq!(
            status("GET / HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n"),
            Some(StatusCode::BAD_REQUEST)
        );
        assert_eq!(
            status("GET / HTTP/1.0\r\nhost: a\r\nhost: a\r\n\r\n"),
            Some(StatusCode::BAD_REQUEST)
        );
        assert!(matches!(head("GET / HTTP/1.0\r\n\r\n"), Ok(Some(_))));
    }

    #[test]
    fn a_target_longer_than_hyper_takes_is_414() {
        let text = format!(
            "GET /{} HTTP/1.1\r\nhost: a\r\n\r\n",
            "a".repeat(MAX_URI_BYTES)
        );
        assert_eq!(status(&text), Some(StatusCode::URI_TOO_LONG));
    }

    #[test]
    fn too_many_headers_is_431() {
        let text = format!("GET / HTTP/1.1\r\n{}\r\n", "a: b\r\n".repeat(17));
        assert_eq!(
            status(&text),
            Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        );
    }

    #[test]
    fn keep_alive_follows_the_version_and_connection_header() {
        let ka = |t: &str| head(t).ok().flatten().map(|h| h.keep_alive);
        assert_eq!(ka("GET / HTTP/1.1\r\nhost: a\r\n\r\n"), Some(true));
        assert_eq!(
            ka("GET / HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n"),
            Some(false)
        );
        assert_eq!(ka("GET / HTTP/1.0\r\n\r\n"), Some(false));
        assert_eq!(
            ka("GET / HTTP/1.0\r\nconnection: keep-alive\r\n\r\n"),
            Some(true)
        );
    }
}
