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

/// Runs a peer `command` (node, python) that reads `input` on stdin and
/// answers one JSON value per line on stdout; panics with its stderr when it
/// fails. Returns the answers and what it wrote to stderr.
pub fn json_lines(
    mut command: std::process::Command,
    input: String,
) -> (Vec<serde_json::Value>, String) {
    use std::io::{Read, Write};
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the peer");
    let mut stdin = child.stdin.take().expect("stdin");
    // Written from a thread: a peer that answers while it reads would
    // otherwise fill its stdout pipe and stall both.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let mut out = String::new();
    let mut stdout = child.stdout.take().expect("stdout");
    stdout.read_to_string(&mut out).expect("read the answers");
    writer.join().expect("writer").expect("write the input");
    let status = child.wait().expect("wait for the peer");
    let mut err = String::new();
    let _ = child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err);
    assert!(status.success(), "the peer failed ({status}): {err}");
    let answers = out
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad answer ({e}): {l}")))
        .collect();
    (answers, err)
}
