//! The web app at `/` (issue 13) in headless Chromium against this build of
//! `agwire serve`: `web/e2e/app.test.mjs` (node's test runner, Playwright
//! driving Debian's Chromium) starts the binary itself — scripted model,
//! OpenAI-compatible fake provider, `--jwt-secret` — and walks every feature.
//! Skipped loudly when node, Chromium, faketime or `web/node_modules` is
//! missing; a failure under `AGWIRE_REQUIRE_INTEROP=1` (`scripts/test`).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Where Debian's faketime package puts the library the tests preload.
const LIBFAKETIME: [&str; 3] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
];

fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn the_web_app_works_in_a_real_browser() {
    let web = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../web");
    let chromium = std::env::var("AGWIRE_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let missing: Vec<String> = [
        (!runs("node", "--version")).then(|| "node".to_owned()),
        (!runs(&chromium, "--version")).then(|| format!("Chromium ({chromium})")),
        (!LIBFAKETIME
            .iter()
            .any(|p| std::path::Path::new(p).is_file()))
        .then(|| "libfaketime (apt-get install faketime)".to_owned()),
        (!web
            .join("node_modules/playwright-core/package.json")
            .is_file())
        .then(|| "web/node_modules (npm ci in web/)".to_owned()),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !missing.is_empty() {
        let why = format!("missing for the browser tests: {}", missing.join(", "));
        assert!(
            std::env::var("AGWIRE_REQUIRE_INTEROP").as_deref() != Ok("1"),
            "{why}"
        );
        eprintln!("\n!!!!! {why} — the web app's browser tests are SKIPPED, not passed. !!!!!\n");
        return;
    }
    // Each browser test has its own two-minute bound; the whole run, this.
    let bound = Duration::from_secs(600);
    let mut node = Command::new("node")
        .args(["--test", "--test-reporter=spec", "e2e/app.test.mjs"])
        .current_dir(&web)
        .env("AGWIRE_BIN", env!("CARGO_BIN_EXE_agwire"))
        .env("AGWIRE_CHROMIUM", &chromium)
        .spawn()
        .expect("node runs");
    let status = crate::common::wait_exit(&mut node, bound);
    assert!(status.success(), "the browser tests failed ({status})");
}
