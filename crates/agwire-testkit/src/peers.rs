//! Where the official peers and data are: shared by the test suites of every
//! crate, so they all skip — or fail — the same way.

use std::path::PathBuf;

/// The official spec data (`AGUI_SPEC_DIR`, default `../shared/agui-spec` next to
/// the repository). `None` — announced loudly — when it is not on this machine,
/// unless `AGWIRE_REQUIRE_INTEROP=1` (set by `scripts/test`, so in CI), which
/// makes a missing directory a failure: no official-data test passes hollow.
pub fn spec_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("AGUI_SPEC_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/agui-spec"),
    };
    if dir.join("1.1/schema.json").is_file() && dir.join("1.1/conformance/streams").is_dir() {
        return Some(dir);
    }
    let why = format!(
        "AG-UI spec data not found at {} — set AGUI_SPEC_DIR",
        dir.display()
    );
    if std::env::var("AGWIRE_REQUIRE_INTEROP").as_deref() == Ok("1") {
        panic!("{why}");
    }
    eprintln!("\n!!!!! {why}. The official-data tests are SKIPPED, not passed. !!!!!\n");
    None
}

/// The JSON document at `path`; panics naming the file when it cannot be
/// read or parsed.
pub fn read_json(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `interop/` directory with the official npm peers installed, and node on
/// the PATH. `None` — announced loudly — when either is missing, unless
/// `AGWIRE_REQUIRE_INTEROP=1` (set by `scripts/test`), which makes it a failure.
pub fn interop_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("AGWIRE_INTEROP_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../interop"),
    };
    let node = std::process::Command::new("node")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if node
        && dir
            .join("node_modules/@ag-ui/client/package.json")
            .is_file()
    {
        return Some(dir);
    }
    let why = format!(
        "node or the pinned @ag-ui/client is missing under {} (run `npm ci` in interop/)",
        dir.display()
    );
    if std::env::var("AGWIRE_REQUIRE_INTEROP").as_deref() == Ok("1") {
        panic!("{why}");
    }
    eprintln!(
        "\n!!!!! {why} — the differential tests against the official client are SKIPPED, not passed. !!!!!\n"
    );
    None
}

/// The python of the pinned Python peer's venv (`AGWIRE_PYTHON`, default
/// `interop/python/.venv`). `None` — announced loudly — when it is missing,
/// unless `AGWIRE_REQUIRE_INTEROP=1`, which makes it a failure.
pub fn python() -> Option<PathBuf> {
    venv_python(
        "AGWIRE_PYTHON",
        "interop/python/.venv",
        "the Python peer (run interop/python/setup-venv.sh)",
    )
}

/// The python of the LangGraph peer's venv (`AGWIRE_LANGGRAPH_PYTHON`,
/// default `interop/langgraph/.venv`), as [`python`] finds its own.
pub fn langgraph_python() -> Option<PathBuf> {
    venv_python(
        "AGWIRE_LANGGRAPH_PYTHON",
        "interop/langgraph/.venv",
        "the LangGraph peer (run interop/langgraph/setup-venv.sh)",
    )
}

fn venv_python(variable: &str, default: &str, what: &str) -> Option<PathBuf> {
    let path = std::env::var_os(variable).map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(default)
                .join("bin/python")
        },
        PathBuf::from,
    );
    if path.is_file() {
        return Some(path);
    }
    let why = format!("{what} is missing at {}", path.display());
    if std::env::var("AGWIRE_REQUIRE_INTEROP").as_deref() == Ok("1") {
        panic!("{why}");
    }
    eprintln!("\n!!!!! {why} — its tests are SKIPPED, not passed. !!!!!\n");
    None
}

/// How long a peer or a command run by a test may take before it is
/// killed and the test fails with what it had said.
pub const PEER_BOUND: std::time::Duration = std::time::Duration::from_secs(300);

/// Runs `command` with `input` on its stdin, reading its stdout and stderr
/// side by side (a chatty peer fills neither pipe), for at most `bound`: a
/// command still running then is killed and the test fails with what it
/// wrote. Its output, whether it succeeded or not.
pub fn output_within(
    mut command: std::process::Command,
    input: Option<String>,
    bound: std::time::Duration,
) -> std::process::Output {
    use std::io::{Read, Write};
    use std::process::Stdio;
    let mut child = command
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
    // Written from a thread: a peer that answers while it reads would
    // otherwise fill its stdout pipe and stall both.
    let writer = child.stdin.take().zip(input).map(|(mut stdin, input)| {
        std::thread::spawn(move || {
            // A peer that exits without reading all of it is judged by its
            // status and output, not by the broken pipe.
            let _ = stdin.write_all(input.as_bytes());
        })
    });
    let (done, finished) = std::sync::mpsc::channel();
    let read = |mut pipe: Box<dyn Read + Send>| {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            let _ = done.send(());
            bytes
        })
    };
    let stdout = read(Box::new(child.stdout.take().expect("stdout")));
    let stderr = read(Box::new(child.stderr.take().expect("stderr")));
    let deadline = std::time::Instant::now() + bound;
    // Both pipes end when the command exits (or closes them).
    let mut open = 2;
    while open > 0 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match finished.recv_timeout(left) {
            Ok(()) => open -= 1,
            Err(_) => break,
        }
    }
    // Then its exit, within what is left of the bound.
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the command") {
            break Some(status);
        }
        if open > 0 || std::time::Instant::now() >= deadline {
            break None;
        }
        // Pipes closed, exit imminent: a short poll under the deadline.
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        let out = stdout.join().unwrap_or_default();
        let err = stderr.join().unwrap_or_default();
        panic!(
            "{command:?} did not finish within {bound:?}; it wrote\n{}\n{}",
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&err)
        );
    };
    if let Some(writer) = writer {
        writer.join().expect("writer");
    }
    std::process::Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// Runs a peer `command` (node, python) that reads `input` on stdin and
/// answers one JSON value per line on stdout, within [`PEER_BOUND`];
/// panics with its stderr when it fails. Returns the answers and what it
/// wrote to stderr.
pub fn json_lines(
    command: std::process::Command,
    input: String,
) -> (Vec<serde_json::Value>, String) {
    let output = output_within(command, Some(input), PEER_BOUND);
    let out = String::from_utf8_lossy(&output.stdout);
    let err = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "the peer failed ({}): {err}",
        output.status
    );
    let answers = out
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad answer ({e}): {l}")))
        .collect();
    (answers, err)
}

#[cfg(test)]
mod tests {
    use super::output_within;
    use std::process::Command;
    use std::time::Duration;

    fn sh(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        command
    }

    /// A peer that writes more to stderr than a pipe holds before it
    /// answers on stdout: read side by side, both arrive (read one after
    /// the other, the peer blocks on a full stderr pipe and never answers).
    #[test]
    fn a_chatty_peer_is_read_on_both_pipes_at_once() {
        let output = output_within(
            sh("head -c 1048576 /dev/zero >&2; cat; echo done"),
            Some("asked\n".to_owned()),
            Duration::from_secs(60),
        );
        assert!(output.status.success());
        assert_eq!(output.stderr.len(), 1 << 20);
        assert_eq!(String::from_utf8_lossy(&output.stdout), "asked\ndone\n");
    }

    /// A command that never ends is killed at the bound, and the test fails
    /// with what it wrote.
    #[test]
    fn a_hung_command_fails_at_the_bound_with_what_it_wrote() {
        let hung = std::panic::catch_unwind(|| {
            output_within(
                sh("echo before the hang; exec sleep 600"),
                None,
                Duration::from_millis(500),
            )
        });
        let message = *hung.unwrap_err().downcast::<String>().unwrap();
        assert!(message.contains("did not finish within 500ms"), "{message}");
        assert!(message.contains("before the hang"), "{message}");
    }
}
