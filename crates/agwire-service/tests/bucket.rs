//! Attachments in an S3-compatible bucket (`[attachments] url`), against a
//! real object store: SeaweedFS's S3 gateway on loopback, one instance per
//! test (agwire-testkit's `s3`). Uploads stream into it, downloads are its
//! own presigned URLs, runs give those URLs back, and a bucket that fails
//! is said — on SQLite, and on PostgreSQL in the test command's second pass.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // helpers outside #[test] fns; the seed is printed

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agwire_client::core::Event;
use agwire_llm::{ChatModel, ScriptedModel, ScriptedReply};
use agwire_service::auth::{Auth, sign_jwt};
use agwire_service::brain::llm::LlmBrain;
use agwire_service::{BuiltinAgent, Config};
use agwire_testkit::s3::{BUCKET, SeaweedFs};
use common::{body, bucket_client, events, objects, start, start_brain_with};
use object_store::ObjectStoreExt;
use serde_json::{Value, json};

/// A PNG by its signature (the service judges types by the bytes).
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR bucket pixels";

/// The service's configuration for a fresh prefix of `weed`'s bucket.
fn config(weed: &SeaweedFs) -> (Config, String) {
    let mut config = Config::default();
    let prefix = common::use_bucket(weed, &mut config);
    (config, prefix)
}

fn token(user: &str) -> String {
    sign_jwt(
        b"bucket-secret",
        user,
        jiff::Timestamp::now().as_second() + 600,
    )
}

/// Uploads `bytes` as `user` (raw body); the answer.
async fn upload_as(
    addr: std::net::SocketAddr,
    user: Option<&str>,
    bytes: Vec<u8>,
) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/agent/attachments"))
        .header("content-type", "image/png")
        .body(bytes);
    if let Some(user) = user {
        request = request.bearer_auth(token(user));
    }
    request.send().await.unwrap()
}

async fn json_of(response: reqwest::Response, status: u16) -> Value {
    let got = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert_eq!(got, status, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// A run of one user message with the image at `url`.
fn with_image(thread: &str, run_id: &str, url: &str) -> Value {
    let mut request = body(thread, run_id, "x");
    request["messages"][0]["content"] = json!([
        {"type": "text", "text": "what is this?"},
        {"type": "binary", "mimeType": "image/png", "url": url}
    ]);
    request
}

async fn post_as(addr: std::net::SocketAddr, user: Option<&str>, run: &Value) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/agent/runs"))
        .json(run);
    if let Some(user) = user {
        request = request.bearer_auth(token(user));
    }
    request.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_goes_to_the_bucket_and_its_presigned_url_serves_it() {
    let Some(weed) = SeaweedFs::start() else {
        return;
    };
    let (mut config, prefix) = config(&weed);
    config.attachments.max_bytes = 64 * 1024;
    let server = start(&config, BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;

    let raw = json_of(upload_as(addr, None, PNG.to_vec()).await, 201).await;
    let id = raw["id"].as_str().unwrap();
    let url = raw["url"].as_str().unwrap();
    // The bucket's own URL, signed (SigV4 query), for the object of the id.
    assert!(
        url.starts_with(&format!("{}/{BUCKET}/{prefix}/{id}?", weed.endpoint)),
        "{url}"
    );
    assert!(url.contains("X-Amz-Signature="), "{url}");
    assert_eq!(raw["mimeType"], "image/png");
    assert_eq!(raw["size"], PNG.len());
    // The bucket serves it, typed; the service never sees the download.
    let fetched = reqwest::get(url).await.unwrap();
    assert_eq!(fetched.status().as_u16(), 200);
    assert_eq!(fetched.headers()["content-type"], "image/png");
    assert_eq!(fetched.bytes().await.unwrap().as_ref(), PNG);
    // Nothing of it beside the database.
    if !common::on_postgres() {
        let files = std::fs::read_dir(server.dir.join("attachments"))
            .unwrap()
            .count();
        assert_eq!(files, 0);
    }
    // Unsigned, the object is not public.
    let unsigned = url.split('?').next().unwrap();
    assert_eq!(reqwest::get(unsigned).await.unwrap().status().as_u16(), 403);

    // Multipart, with a field before the file.
    let boundary = "XyZ";
    let mut form = format!(
        "--{boundary}\r\ncontent-disposition: form-data; name=\"note\"\r\n\r\nhello\r\n\
         --{boundary}\r\ncontent-disposition: form-data; name=\"file\"; filename=\"a.png\"\r\ncontent-type: image/png\r\n\r\n"
    )
    .into_bytes();
    form.extend_from_slice(PNG);
    form.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let multipart = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/agent/attachments"))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(form)
        .send()
        .await
        .unwrap();
    let multipart = json_of(multipart, 201).await;
    let again = reqwest::get(multipart["url"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(again.bytes().await.unwrap().as_ref(), PNG);
    let kept = objects(&weed, &prefix).await;
    assert_eq!(kept.len(), 2, "{kept:?}");

    // Refused uploads leave nothing in the bucket: not an image (judged
    // before anything is written), past the limit (refused as it passes).
    let pdf = upload_as(addr, None, b"%PDF-1.7 not an image at all".to_vec()).await;
    assert_eq!(
        json_of(pdf, 415).await,
        json!({"detail": "the upload is not a PNG, JPEG, GIF or WebP image"})
    );
    let mut large = PNG.to_vec();
    large.resize(200 * 1024, 7);
    let refused = upload_as(addr, None, large).await;
    assert_eq!(
        json_of(refused, 413).await,
        json!({"detail": "attachment exceeds size limit"})
    );
    assert_eq!(objects(&weed, &prefix).await, kept);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_upload_goes_up_in_parts_and_comes_back_whole() {
    use sha2::Digest;
    let Some(weed) = SeaweedFs::start() else {
        return;
    };
    let (config, prefix) = config(&weed);
    let server = start(&config, BuiltinAgent::default(), Auth::none()).await;
    // 9 MiB (parts of 5 MiB: a multipart upload of two), seeded noise.
    let seed = u64::from(std::process::id());
    eprintln!("image seed: {seed}");
    let mut image = PNG.to_vec();
    let mut state = seed | 1;
    while image.len() < 9 * 1024 * 1024 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        image.extend_from_slice(&state.to_le_bytes());
    }
    let answer = json_of(upload_as(server.addr, None, image.clone()).await, 201).await;
    assert_eq!(answer["size"], image.len());
    let fetched = reqwest::get(answer["url"].as_str().unwrap())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(fetched.len(), image.len());
    assert_eq!(sha2::Sha256::digest(&fetched), sha2::Sha256::digest(&image));
    let stored = objects(&weed, &prefix).await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    // It went up in parts: S3 (and SeaweedFS) give an object completed from
    // a multipart upload the ETag `"<digest of the parts' digests>-<parts>"`,
    // a single PUT the plain MD5 of its bytes.
    let head = bucket_client(&weed)
        .head(&object_store::path::Path::from(stored[0].as_str()))
        .await
        .unwrap();
    let etag = head.e_tag.unwrap_or_default();
    assert!(
        etag.trim_matches('"').ends_with("-2"),
        "a 9 MiB upload in 5 MiB parts has a two-part ETag, not {etag:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_takes_its_users_presigned_url_and_the_model_sees_the_image() {
    let Some(weed) = SeaweedFs::start() else {
        return;
    };
    let (config, _prefix) = config(&weed);
    let model = ScriptedModel::queue(vec![
        ScriptedReply::text(r#"{"agent": "general"}"#),
        ScriptedReply::text("A very small picture."),
    ]);
    let chat: Arc<dyn ChatModel> = Arc::new(model.clone());
    let server = start_brain_with(
        &config,
        Auth::jwt(b"bucket-secret".to_vec()),
        Arc::new(LlmBrain::new(chat.clone(), chat)),
    )
    .await;
    let addr = server.addr;
    let uploaded = json_of(upload_as(addr, Some("alice"), PNG.to_vec()).await, 201).await;
    let url = uploaded["url"].as_str().unwrap();

    // Another user's presigned URL: refused, as another user's signed URL
    // is, with nothing written.
    let thread = uuid::Uuid::new_v4().to_string();
    let theirs = post_as(addr, Some("bob"), &with_image(&thread, "b1", url)).await;
    assert_eq!(
        json_of(theirs, 422).await,
        json!({"detail": "binary content url is not a valid signed URL"})
    );
    // Her own URL tampered with — another id, a later expiry, another
    // signature — is not one the bucket signed: refused the same way.
    let id = uploaded["id"].as_str().unwrap();
    let expires = url
        .split(['?', '&'])
        .find(|p| p.starts_with("X-Amz-Expires="))
        .unwrap();
    let mut resigned = url.to_owned();
    let last = resigned.pop().unwrap();
    resigned.push(if last == '0' { '1' } else { '0' });
    for tampered in [
        url.replace(id, &uuid::Uuid::now_v7().to_string()),
        url.replace(expires, "X-Amz-Expires=604800"),
        resigned,
    ] {
        let refused = post_as(addr, Some("alice"), &with_image(&thread, "a0", &tampered)).await;
        assert_eq!(
            json_of(refused, 422).await,
            json!({"detail": "binary content url is not a valid signed URL"}),
            "{tampered}"
        );
    }
    // None of the refusals wrote anything: no run a0, no thread.
    let client = reqwest::Client::new();
    for path in [
        "/api/v1/agent/runs/a0".to_owned(),
        format!("/api/v1/agent/threads/{thread}"),
    ] {
        let answer = client
            .get(format!("http://{addr}{path}"))
            .bearer_auth(token("alice"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 404, "{path}");
    }

    // The owner's run: accepted, the model gets the bytes inline.
    let mine = post_as(addr, Some("alice"), &with_image(&thread, "a1", url)).await;
    assert_eq!(mine.status().as_u16(), 202);
    common::wait_status_as(addr, "a1", "succeeded", &token("alice")).await;
    let parts = common::worker_user_parts(&model);
    assert_eq!(parts[1], common::png_data_url(PNG));

    // History hands out a fresh presigned URL, which serves the image.
    let history: Value = reqwest::Client::new()
        .get(format!(
            "http://{addr}/api/v1/agent/history?threadId={thread}"
        ))
        .bearer_auth(token("alice"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let fresh = history["messages"][0]["attachments"][0]["url"]
        .as_str()
        .unwrap();
    assert!(fresh.starts_with(&weed.endpoint), "{fresh}");
    let image = reqwest::get(fresh).await.unwrap().bytes().await.unwrap();
    assert_eq!(image.as_ref(), PNG);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_bucket_is_a_503_at_upload_and_a_run_error_for_a_run_that_needs_it() {
    let Some(mut weed) = SeaweedFs::start() else {
        return;
    };
    let (config, _prefix) = config(&weed);
    let server = start(&config, BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let uploaded = json_of(upload_as(addr, None, PNG.to_vec()).await, 201).await;
    let url = uploaded["url"].as_str().unwrap().to_owned();
    weed.kill();

    let refused = upload_as(addr, None, PNG.to_vec()).await;
    assert_eq!(
        json_of(refused, 503).await,
        json!({"detail": "attachment storage is unavailable; retry shortly"})
    );
    // A run whose image is there (its URL was handed out) is accepted, and
    // ends with a RUN_ERROR that says why — a valid run's log.
    let thread = uuid::Uuid::new_v4().to_string();
    let run = post_as(addr, None, &with_image(&thread, "needs-it", &url)).await;
    assert_eq!(run.status().as_u16(), 202);
    let log = events(addr, "needs-it", None).await;
    assert!(
        matches!(log.first(), Some((_, Event::RunStarted(_)))),
        "{log:?}"
    );
    match log.last() {
        Some((_, Event::RunError(error))) => {
            assert_eq!(
                error.code.as_deref(),
                Some("attachment_storage_unavailable")
            );
            assert!(
                error.message.contains("attachment storage is unavailable"),
                "{}",
                error.message
            );
        }
        other => panic!("the run did not end with its error: {other:?}"),
    }
    assert_eq!(log.len(), 2, "{log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_presigned_url_expires_and_is_then_refused_by_both() {
    let Some(weed) = SeaweedFs::start() else {
        return;
    };
    let (mut config, _prefix) = config(&weed);
    config.attachments.url_ttl_seconds = 2;
    let server = start(&config, BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let uploaded = json_of(upload_as(addr, None, PNG.to_vec()).await, 201).await;
    let url = uploaded["url"].as_str().unwrap().to_owned();
    let until: jiff::Timestamp = uploaded["expiresAt"].as_str().unwrap().parse().unwrap();
    assert_eq!(reqwest::get(&url).await.unwrap().status().as_u16(), 200);
    // Polled: the bucket refuses it once it has expired (within a minute).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = reqwest::get(&url).await.unwrap().status().as_u16();
        if status == 403 {
            break;
        }
        assert_eq!(status, 200);
        assert!(
            Instant::now() < deadline,
            "the bucket still serves an expired URL"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(jiff::Timestamp::now() >= until, "refused before it expired");
    // And so does the service, in a run.
    let thread = uuid::Uuid::new_v4().to_string();
    let run = post_as(addr, None, &with_image(&thread, "late", &url)).await;
    assert_eq!(
        json_of(run, 422).await,
        json!({"detail": "binary content url is not a valid signed URL"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_thread_removes_its_images_from_the_bucket() {
    let Some(weed) = SeaweedFs::start() else {
        return;
    };
    let (config, prefix) = config(&weed);
    let server = start(&config, BuiltinAgent::default(), Auth::none()).await;
    let addr = server.addr;
    let (kept, gone) = (
        uuid::Uuid::new_v4().to_string(),
        uuid::Uuid::new_v4().to_string(),
    );
    // Each thread's image, as the bucket names it.
    let mut objects_of = Vec::new();
    for (thread, run) in [(&kept, "k1"), (&gone, "g1")] {
        let uploaded = json_of(upload_as(addr, None, PNG.to_vec()).await, 201).await;
        objects_of.push(format!("{prefix}/{}", uploaded["id"].as_str().unwrap()));
        let url = uploaded["url"].as_str().unwrap();
        assert_eq!(
            post_as(addr, None, &with_image(thread, run, url))
                .await
                .status()
                .as_u16(),
            202
        );
        common::wait_status(addr, run, "succeeded").await;
    }
    let mut both = objects_of.clone();
    both.sort();
    assert_eq!(objects(&weed, &prefix).await, both);
    let deleted = reqwest::Client::new()
        .delete(format!("http://{addr}/api/v1/agent/threads/{gone}"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 204);
    // The deleted thread's image is gone, and the kept thread's is the one
    // left (not merely one object of two).
    assert_eq!(objects(&weed, &prefix).await, [objects_of[0].clone()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_kept_beside_the_database_move_to_the_bucket_verified_once() {
    let Some(weed) = SeaweedFs::start() else {
        return;
    };
    // Uploaded before there was a bucket: beside the database.
    let before = start(&Config::default(), BuiltinAgent::default(), Auth::none()).await;
    let old_url = common::upload(before.addr, PNG).await;
    let second = common::upload(before.addr, b"GIF89a and the rest").await;
    assert!(
        old_url.starts_with(&format!("http://{}/", before.addr)),
        "{old_url}"
    );

    let (config, prefix) = config(&weed);
    let bucket = Arc::new(
        agwire_service::attachments::Bucket::open(
            config.attachments.url.as_deref().unwrap(),
            &config.attachments,
        )
        .await
        .unwrap(),
    );
    let store = before.database.open_with_bucket(Some(bucket.clone())).await;
    let mut seen = Vec::new();
    let copied = agwire_service::attachments::copy_to_bucket(&*store, &bucket, |id, size| {
        seen.push((id.to_owned(), size));
    })
    .await
    .unwrap();
    assert_eq!(copied.moved, 2, "{copied:?}");
    assert_eq!(
        copied.bytes,
        (PNG.len() + b"GIF89a and the rest".len()) as u64
    );
    assert_eq!(seen.len(), 2);
    assert_eq!(objects(&weed, &prefix).await.len(), 2);
    // Moved: the copy beside the database is gone, the record says where.
    for (id, _) in &seen {
        let record = store.attachment(id).await.unwrap().unwrap();
        assert!(record.in_bucket, "{id}");
        if !common::on_postgres() {
            assert!(!before.dir.join("attachments").join(id).exists(), "{id}");
        }
    }
    // Idempotent: nothing left to move.
    let again = agwire_service::attachments::copy_to_bucket(&*store, &bucket, |_, _| {})
        .await
        .unwrap();
    assert_eq!(again.moved, 0, "{again:?}");

    // A service with the bucket, on the same database: a URL signed before
    // sends the client to the bucket, which serves the image as it was.
    let after = common::start_on(before.database.clone(), &config, Auth::none(), |s| s).await;
    let moved_url = old_url.replace(&before.addr.to_string(), &after.addr.to_string());
    let fetched = reqwest::get(&moved_url).await.unwrap();
    assert_eq!(fetched.status().as_u16(), 200);
    assert!(
        fetched.url().as_str().starts_with(&weed.endpoint),
        "{}",
        fetched.url()
    );
    assert_eq!(fetched.headers()["content-type"], "image/png");
    assert_eq!(fetched.bytes().await.unwrap().as_ref(), PNG);
    let gif = second.replace(&before.addr.to_string(), &after.addr.to_string());
    let fetched = reqwest::get(&gif).await.unwrap();
    assert_eq!(fetched.headers()["content-type"], "image/gif");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_removes_objects_no_record_names_and_nothing_else() {
    let Some(weed) = SeaweedFs::start() else {
        return;
    };
    let (config, prefix) = config(&weed);
    let server = start(&config, BuiltinAgent::default(), Auth::none()).await;
    let recorded = json_of(upload_as(server.addr, None, PNG.to_vec()).await, 201).await;
    let recorded = format!("{prefix}/{}", recorded["id"].as_str().unwrap());
    // What a crash between an upload and its record leaves, and an object
    // that is not the service's at all.
    let client = bucket_client(&weed);
    let orphan = format!("{prefix}/{}", uuid::Uuid::now_v7());
    let foreign = format!("{prefix}/notes.txt");
    for name in [&orphan, &foreign] {
        client
            .put(
                &object_store::path::Path::from(name.as_str()),
                b"left".to_vec().into(),
            )
            .await
            .unwrap();
    }
    let bucket = Arc::new(
        agwire_service::attachments::Bucket::open(
            config.attachments.url.as_deref().unwrap(),
            &config.attachments,
        )
        .await
        .unwrap(),
    );
    let store = server.database.open_with_bucket(Some(bucket.clone())).await;
    let now_s = jiff::Timestamp::now().as_second();
    use agwire_service::attachments::{SWEEP_GRACE_SECONDS, sweep};
    // Within the grace an object may be an upload about to be recorded.
    assert_eq!(
        sweep(&*store, &bucket, SWEEP_GRACE_SECONDS, now_s)
            .await
            .unwrap(),
        0
    );
    assert_eq!(objects(&weed, &prefix).await.len(), 3);
    // Past it, the orphan goes; the recorded image and the foreign file stay.
    let later = now_s + SWEEP_GRACE_SECONDS + 60;
    assert_eq!(
        sweep(&*store, &bucket, SWEEP_GRACE_SECONDS, later)
            .await
            .unwrap(),
        1
    );
    let mut left = vec![recorded, foreign];
    left.sort();
    assert_eq!(objects(&weed, &prefix).await, left);
}
