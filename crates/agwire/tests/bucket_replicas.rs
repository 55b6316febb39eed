//! Two `agwire serve` replicas on one PostgreSQL database with their
//! attachments in one bucket (SeaweedFS's S3 gateway), per-user auth on: an
//! image uploaded to one is what a run accepted and executed by the other
//! gives its agent, another user can use it on neither,
//! and a third party downloads it straight from the bucket by the
//! presigned URL — the replicas never serve the bytes; and the command that
//! moves a database's images into the bucket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agwire_testkit::pg::PgDatabase;
use agwire_testkit::s3::{BUCKET, SeaweedFs};
use serde_json::{Value, json};

use crate::common;
use common::{body, data_dir, serve};

/// The replicas' HS256 secret (per-user bearer auth on).
const SECRET: &str = "bucket-replicas-secret";

fn token(user: &str) -> String {
    let expires = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    agwire_service::auth::sign_jwt(SECRET.as_bytes(), user, i64::try_from(expires).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_attachments_through_one_bucket() {
    let Some(database) = PgDatabase::create().await else {
        return;
    };
    let Some(weed) = SeaweedFs::start() else {
        return;
    };
    let prefix = format!("replicas-{}", uuid::Uuid::new_v4().simple());
    let bucket_url = format!("s3://{BUCKET}/{prefix}");
    // The bucket as an operator gives it: the AWS environment.
    let mut env: Vec<(&str, String)> = weed.env();
    env.push(("AGWIRE_DATABASE_URL", database.url.clone()));
    env.push(("AGWIRE_ATTACHMENTS_URL", bucket_url));
    env.push(("AGWIRE_JWT_SECRET", SECRET.to_owned()));
    // Each replica its own model provider (a test double speaking the
    // OpenAI wire): what each one's agents were given, and so which
    // replica executed a run, is on record.
    let mut providers = Vec::new();
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let (provider, seen) = common::fake_provider(None).await;
        let mut env = env.clone();
        env.push(("AGWIRE_LLM_BASE_URL", provider));
        env.push(("AGWIRE_LLM_API_KEY", "sk-local".to_owned()));
        env.push(("AGWIRE_LLM_MODEL", "fake-model".to_owned()));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        replicas.push(serve(&data_dir("bucket-replica"), &[], &env));
        providers.push(seen);
    }
    let (a, b) = (&replicas[0].base, &replicas[1].base);
    let client = reqwest::Client::new();
    let (alice, bob) = (token("alice"), token("bob"));

    let png = b"\x89PNG\r\n\x1a\n shared through the bucket".to_vec();
    let uploaded: Value = client
        .post(format!("{a}/api/v1/agent/attachments"))
        .bearer_auth(&alice)
        .header("content-type", "image/png")
        .body(png.clone())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = uploaded["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("{}/{BUCKET}/{prefix}/", weed.endpoint)),
        "{uploaded}"
    );

    // Accepted and streamed by the other replica (which starts the runs it
    // accepts and follows): its agent's setup reads the image from the
    // bucket, and the run succeeds.
    let thread = uuid::Uuid::new_v4().to_string();
    let mut run = body(&thread, "with-image", "x");
    run["messages"][0]["content"] = json!([
        {"type": "text", "text": "what is this?"},
        {"type": "binary", "mimeType": "image/png", "url": url}
    ]);
    // Another user cannot use it, on either replica, and nothing is kept.
    for base in [a, b] {
        let refused = client
            .post(format!("{base}/api/v1/agent/runs"))
            .bearer_auth(&bob)
            .json(&run)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status().as_u16(), 422, "{base}");
        let refused: Value = refused.json().await.unwrap();
        assert_eq!(
            refused,
            json!({"detail": "binary content url is not a valid signed URL"})
        );
    }
    let streamed = client
        .post(format!("{b}/api/v1/agent/runs"))
        .bearer_auth(&alice)
        .header("accept", "text/event-stream")
        .json(&run)
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status().as_u16(), 200);
    let text = tokio::time::timeout(std::time::Duration::from_secs(60), streamed.text())
        .await
        .expect("the run's stream ends within 60 s")
        .unwrap();
    assert!(text.contains("RUN_FINISHED"), "{text}");
    assert!(!text.contains("RUN_ERROR"), "{text}");
    // The second replica executed it, and its agent was given the very
    // bytes uploaded to the first (as a PNG data URL); the first replica's
    // model saw nothing of it.
    let image = {
        use base64::Engine;
        format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(&png)
        )
    };
    let gave_image = |seen: &common::Seen| {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|(request, _)| request["messages"].to_string().contains(&image))
            .count()
    };
    assert!(
        gave_image(&providers[1]) > 0,
        "replica b's model never saw the image"
    );
    assert_eq!(gave_image(&providers[0]), 0, "replica a executed the run");

    // History, read on the first replica, hands out a fresh presigned URL;
    // a client with no token and no replica downloads the image with it.
    let theirs = client
        .get(format!("{b}/api/v1/agent/history?threadId={thread}"))
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap();
    assert_eq!(theirs.status().as_u16(), 404);
    let history: Value = client
        .get(format!("{a}/api/v1/agent/history?threadId={thread}"))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let fresh = history["messages"][0]["attachments"][0]["url"]
        .as_str()
        .unwrap();
    assert!(fresh.starts_with(&weed.endpoint), "{history}");
    let image = reqwest::get(fresh).await.unwrap();
    assert_eq!(image.status().as_u16(), 200);
    assert_eq!(image.headers()["content-type"], "image/png");
    assert_eq!(image.bytes().await.unwrap().as_ref(), png.as_slice());
}

/// `agwire attachments copy-to-bucket` on a database whose images are in
/// its rows: every one moved, verified, and served from the bucket after;
/// a second run finds nothing left to move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_to_bucket_moves_a_databases_images_once() {
    let Some(database) = PgDatabase::create().await else {
        return;
    };
    let Some(weed) = SeaweedFs::start() else {
        return;
    };
    let client = reqwest::Client::new();
    let png = b"\x89PNG\r\n\x1a\n kept in a row".to_vec();
    let old_url = {
        let before = serve(
            &data_dir("before-bucket"),
            &[],
            &[("AGWIRE_DATABASE_URL", database.url.as_str())],
        );
        let uploaded: Value = client
            .post(format!("{}/api/v1/agent/attachments", before.base))
            .header("content-type", "image/png")
            .body(png.clone())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let url = uploaded["url"].as_str().unwrap().to_owned();
        url[url.find("/api/").unwrap()..].to_owned()
    };
    let prefix = format!("moved-{}", uuid::Uuid::new_v4().simple());
    let mut env: Vec<(&str, String)> = weed.env();
    env.push(("AGWIRE_DATABASE_URL", database.url.clone()));
    env.push(("AGWIRE_ATTACHMENTS_URL", format!("s3://{BUCKET}/{prefix}")));
    let copy = || {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_agwire"));
        command
            .args(["attachments", "copy-to-bucket", "--data-dir"])
            .arg(data_dir("copy"));
        for (key, value) in &env {
            command.env(key, value);
        }
        let output =
            agwire_testkit::peers::output_within(command, None, agwire_testkit::peers::PEER_BOUND);
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let first = copy();
    assert!(first.contains("1 attachments moved"), "{first}");
    let second = copy();
    assert!(second.contains("0 attachments moved"), "{second}");

    // A replica with the bucket serves the image from there: the URL
    // signed before redirects to a presigned one.
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let after = serve(&data_dir("after-bucket"), &[], &env);
    let fetched = client
        .get(format!("{}{old_url}", after.base))
        .send()
        .await
        .unwrap();
    assert_eq!(fetched.status().as_u16(), 200);
    assert!(
        fetched.url().as_str().starts_with(&weed.endpoint),
        "{}",
        fetched.url()
    );
    assert_eq!(fetched.bytes().await.unwrap().as_ref(), png.as_slice());
    let bytes: Option<Vec<u8>> = sqlx::query_scalar("SELECT bytes FROM attachments")
        .fetch_one(&sqlx::PgPool::connect(&database.url).await.unwrap())
        .await
        .unwrap();
    assert_eq!(
        bytes, None,
        "the row's copy is dropped once the bucket's is verified"
    );
}
