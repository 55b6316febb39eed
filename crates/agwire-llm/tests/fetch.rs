//! `hf:` downloads against a local server that speaks the hub's protocol:
//! `HEAD` answers a redirect carrying the SHA-256 and size, `GET` redirects
//! to a file server that honours `Range`. A download broken off resumes
//! where it stopped; a file whose SHA-256 differs is discarded; a cached
//! file needs no network.
#![cfg(feature = "local")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agwire_llm::local::fetch::{HubFile, fetch};
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

#[derive(Clone)]
struct Hub {
    file: Arc<Vec<u8>>,
    /// What HEAD claims the SHA-256 is.
    sha256: String,
    /// Full GETs to break off halfway.
    break_full_gets: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    ranges: Arc<Mutex<Vec<String>>>,
}

async fn resolve(State(hub): State<Hub>, method: Method) -> Response {
    hub.requests.fetch_add(1, Ordering::SeqCst);
    let mut response = (StatusCode::FOUND, [(header::LOCATION, "/cdn/model.gguf")]).into_response();
    if method == Method::HEAD {
        let headers = response.headers_mut();
        headers.insert(
            "x-linked-etag",
            format!("\"{}\"", hub.sha256).parse().unwrap(),
        );
        headers.insert("x-linked-size", hub.file.len().to_string().parse().unwrap());
    }
    response
}

async fn cdn(State(hub): State<Hub>, headers: HeaderMap) -> Response {
    hub.requests.fetch_add(1, Ordering::SeqCst);
    if let Some(range) = headers.get(header::RANGE) {
        let range = range.to_str().unwrap().to_owned();
        hub.ranges.lock().unwrap().push(range.clone());
        let from: usize = range
            .trim_start_matches("bytes=")
            .trim_end_matches('-')
            .parse()
            .unwrap();
        let rest = hub.file[from..].to_vec();
        return (
            StatusCode::PARTIAL_CONTENT,
            [(
                header::CONTENT_RANGE,
                format!("bytes {from}-{}/{}", hub.file.len() - 1, hub.file.len()),
            )],
            rest,
        )
            .into_response();
    }
    let breaking = hub
        .break_full_gets
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    let half = hub.file.len() / 2;
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = hub
        .file
        .chunks(64 * 1024)
        .scan(0usize, |sent, chunk| {
            *sent += chunk.len();
            Some((*sent, chunk))
        })
        .map_while(|(sent, chunk)| {
            if breaking && sent > half {
                None
            } else {
                Some(Ok(bytes::Bytes::copy_from_slice(chunk)))
            }
        })
        .chain(breaking.then(|| Err(std::io::Error::other("connection lost"))))
        .collect();
    Body::from_stream(futures_util::stream::iter(chunks)).into_response()
}

async fn hub(file: Vec<u8>, sha256: Option<String>, break_full_gets: usize) -> (String, Hub) {
    let digest: String = Sha256::digest(&file)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let hub = Hub {
        file: Arc::new(file),
        sha256: sha256.unwrap_or(digest),
        break_full_gets: Arc::new(AtomicUsize::new(break_full_gets)),
        requests: Arc::default(),
        ranges: Arc::default(),
    };
    let app = axum::Router::new()
        .route(
            "/owner/repo/resolve/main/model.gguf",
            axum::routing::get(resolve).head(resolve),
        )
        .route("/cdn/model.gguf", axum::routing::get(cdn))
        .with_state(hub.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), hub)
}

fn content() -> Vec<u8> {
    (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

fn cache(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("agwire-fetch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[tokio::test]
async fn a_download_broken_off_resumes_where_it_stopped_and_is_verified() {
    let file = content();
    let (endpoint, hub) = hub(file.clone(), None, 1).await;
    let spec = HubFile::parse("hf:owner/repo/model.gguf").unwrap().unwrap();
    let dir = cache("resume");
    let first = fetch(&spec, &dir, &endpoint, None, |_| {}).await;
    let error = first.expect_err("the first attempt breaks off");
    assert!(error.to_string().contains("resume"), "{error}");
    assert!(
        !spec.cached(&dir).exists(),
        "nothing under the name before it is whole"
    );
    let partial = dir.join("owner/repo/model.gguf.part");
    let had = std::fs::metadata(&partial).unwrap().len();
    assert!(had > 0 && had < file.len() as u64, "{had}");
    // Every byte the attempt counted is on disk when it returns.
    assert!(
        error
            .to_string()
            .contains(&format!("broke off at {had} of")),
        "{error} (on disk: {had})"
    );

    let mut reports = Vec::new();
    let path = fetch(&spec, &dir, &endpoint, None, |p| reports.push(p))
        .await
        .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), file);
    assert_eq!(*hub.ranges.lock().unwrap(), vec![format!("bytes={had}-")]);
    assert_eq!(reports.first().map(|p| p.done), Some(had));
    assert_eq!(reports.last().map(|p| p.done), Some(file.len() as u64));
    assert!(!partial.exists());

    // Cached: no request at all.
    let before = hub.requests.load(Ordering::SeqCst);
    assert_eq!(
        fetch(&spec, &dir, &endpoint, None, |_| {}).await.unwrap(),
        path
    );
    assert_eq!(hub.requests.load(Ordering::SeqCst), before);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_file_whose_sha256_differs_is_discarded() {
    let (endpoint, _hub) = hub(content(), Some("ab".repeat(32)), 0).await;
    let spec = HubFile::parse("hf:owner/repo/model.gguf").unwrap().unwrap();
    let dir = cache("corrupt");
    let error = fetch(&spec, &dir, &endpoint, None, |_| {})
        .await
        .expect_err("checksum mismatch");
    assert!(error.to_string().contains("SHA-256"), "{error}");
    assert!(!spec.cached(&dir).exists());
    assert!(!dir.join("owner/repo/model.gguf.part").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_file_the_hub_does_not_have_is_a_clear_error() {
    let (endpoint, _hub) = hub(content(), None, 0).await;
    let spec = HubFile::parse("hf:owner/other/model.gguf")
        .unwrap()
        .unwrap();
    let dir = cache("missing");
    let error = fetch(&spec, &dir, &endpoint, None, |_| {})
        .await
        .expect_err("404");
    assert!(error.to_string().contains("404"), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}
