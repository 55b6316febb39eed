//! The official `HttpAgent` as a peer: `interop/httpagent.mjs` runs the spec
//! it reads on stdin and prints what the agent saw. Shared by the client's,
//! the server's and the service's interop tests (feature `http-agent`).

use std::path::Path;
use std::process::Stdio;

use serde_json::Value;
use tokio::io::AsyncWriteExt;

/// Runs `httpagent.mjs` in `interop` on `spec`; panics with its stderr when
/// it fails.
pub async fn run(interop: &Path, spec: &Value) -> Value {
    let mut child = tokio::process::Command::new("node")
        .arg("httpagent.mjs")
        .current_dir(interop)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(spec.to_string().as_bytes())
        .await
        .expect("spec written");
    drop(stdin);
    let out = child.wait_with_output().await.expect("httpagent.mjs ends");
    assert!(
        out.status.success(),
        "httpagent.mjs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("httpagent.mjs prints JSON")
}
