//! The embedded app through `router()`: what a browser gets for `/`, a
//! hashed asset, a revalidation, gzip, HEAD and an unknown asset.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns

use std::io::Read;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use tower::ServiceExt;

async fn get(
    app: &Router,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let mut request = Request::get(path);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, body.to_vec())
}

fn script_of(index: &str) -> String {
    let start = index.find("/assets/").unwrap();
    let end = start + index[start..].find(".js").unwrap() + 3;
    index[start..end].to_owned()
}

#[tokio::test]
async fn the_index_is_revalidated_and_hashed_assets_are_immutable() {
    let app: Router = agwire_web::router();
    let (status, headers, body) = get(&app, "/", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    assert_eq!(headers[header::CACHE_CONTROL], "no-cache");
    assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert!(
        headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );
    let index = String::from_utf8(body).unwrap();
    assert!(index.starts_with("<!doctype html>"));
    let (_, _, same) = get(&app, "/index.html", &[]).await;
    assert_eq!(same, index.as_bytes());

    let script = script_of(&index);
    let (status, headers, js) = get(&app, &script, &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers[header::CONTENT_TYPE],
        "text/javascript; charset=utf-8"
    );
    assert_eq!(
        headers[header::CACHE_CONTROL],
        "public, max-age=31536000, immutable"
    );
    assert!(js.len() > 10_000);
    assert!(headers.get(header::CONTENT_SECURITY_POLICY).is_none());

    // The ETag it gave is "not modified" next time, for either form.
    let (_, headers, _) = get(&app, "/", &[]).await;
    let etag = headers[header::ETAG].to_str().unwrap().to_owned();
    for tag in [etag.clone(), format!("W/{etag}"), format!("\"x\", {etag}")] {
        let (status, headers, body) = get(&app, "/", &[("if-none-match", &tag)]).await;
        assert_eq!(status, StatusCode::NOT_MODIFIED, "{tag}");
        assert_eq!(headers[header::ETAG], etag.as_str());
        assert!(body.is_empty());
    }
    let (status, _, _) = get(&app, "/", &[("if-none-match", "\"other\"")]).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn text_is_gzipped_for_clients_that_accept_it() {
    let app: Router = agwire_web::router();
    let (_, _, index) = get(&app, "/", &[]).await;
    let script = script_of(std::str::from_utf8(&index).unwrap());
    let (_, plain_headers, plain) = get(&app, &script, &[]).await;
    assert!(plain_headers.get(header::CONTENT_ENCODING).is_none());
    assert_eq!(plain_headers[header::VARY], "accept-encoding");
    let (status, headers, packed) =
        get(&app, &script, &[("accept-encoding", "gzip, deflate, br")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_ENCODING], "gzip");
    assert!(packed.len() * 2 < plain.len(), "gzip saves at least half");
    let mut unpacked = Vec::new();
    flate2::read::GzDecoder::new(packed.as_slice())
        .read_to_end(&mut unpacked)
        .unwrap();
    assert_eq!(unpacked, plain);
    assert_eq!(headers[header::ETAG], plain_headers[header::ETAG]);
}

#[tokio::test]
async fn head_and_unknown_assets() {
    let app: Router = agwire_web::router();
    let response = app
        .clone()
        .oneshot(Request::head("/").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/html; charset=utf-8"
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(body.is_empty());

    let (status, headers, body) = get(&app, "/assets/nope-123.js", &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(body, br#"{"detail":"asset not found"}"#);

    let (status, headers, _) = get(&app, "/favicon.svg", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "image/svg+xml");
    assert_eq!(headers[header::CACHE_CONTROL], "no-cache");
}
