//! The kit against real servers: our dojo (agwire-server), and the official
//! SDKs' producers — a node server on `@ag-ui/encoder` and a FastAPI server on
//! `ag-ui-protocol`, written as AG-UI's documents show them (`interop/`).
//!
//! What each peer breaks is a fact about that peer, asserted here so that a
//! change (ours or theirs) is seen; every table is printed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // helpers outside #[test] fns; tables printed

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use agwire_check::{Check, Family, Report, Verdict};
use agwire_testkit::peers;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A peer server child, killed when dropped.
struct Peer {
    _child: Child,
    base: String,
}

/// Starts `program args` in `dir`; it prints `listening <port>` once bound.
async fn start(program: &Path, args: &[&str], dir: &Path) -> Peer {
    let mut child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the peer did not start within 60 s")
        .unwrap()
        .expect("the peer printed nothing");
    let port = line
        .strip_prefix("listening ")
        .expect("listening <port>")
        .trim()
        .to_owned();
    Peer {
        _child: child,
        base: format!("http://127.0.0.1:{port}"),
    }
}

/// Checks every route of `base`, printing each table; returns the families
/// with violations, per route.
async fn check_routes(
    name: &str,
    base: &str,
    routes: &[&str],
) -> (BTreeMap<String, Vec<Family>>, Vec<Report>) {
    let mut violated = BTreeMap::new();
    let mut reports = Vec::new();
    for route in routes {
        let report = Check::new(format!("{base}{route}"))
            .timeout(Duration::from_secs(20))
            .run()
            .await
            .unwrap();
        println!("--- {name} {route}\n{}", report.to_table());
        let mut families: Vec<Family> = report.violations().map(|v| v.family).collect();
        families.sort();
        families.dedup();
        violated.insert((*route).to_owned(), families);
        reports.push(report);
    }
    (violated, reports)
}

/// Families some report passed.
fn passed_somewhere(reports: &[Report]) -> Vec<Family> {
    Family::ALL
        .into_iter()
        .filter(|f| {
            reports
                .iter()
                .any(|r| r.family(*f).is_some_and(|v| v.verdict == Verdict::Pass))
        })
        .collect()
}

#[tokio::test]
async fn our_dojo_passes_every_scenario_it_takes_part_in() {
    let app = agwire_testkit::dojo::router(|e| e);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let routes = [
        "/agentic_chat",
        "/backend_tool_rendering",
        "/human_in_the_loop",
        "/agentic_generative_ui",
        "/tool_based_generative_ui",
        "/shared_state",
        "/predictive_state_updates",
        "/reasoning",
        "/subagents",
        "/interrupt",
    ];
    let (violated, reports) = check_routes("dojo", &base, &routes).await;
    for (route, families) in &violated {
        assert!(families.is_empty(), "{route}: {families:?}");
    }
    let passed = passed_somewhere(&reports);
    for family in [
        Family::Lifecycle,
        Family::Streaming,
        Family::ToolCalls,
        Family::State,
        Family::Reasoning,
        Family::Subagents,
        Family::Processing,
        Family::Versioning,
        Family::Interrupts,
        Family::RunInput,
        Family::Sse,
        Family::Protobuf,
        Family::Negotiation,
    ] {
        assert!(passed.contains(&family), "no dojo route exercised {family}");
    }
}

const PEER_ROUTES: [&str; 6] = [
    "/agentic_chat",
    "/chunks",
    "/tool_call",
    "/shared_state",
    "/steps",
    "/short",
];

#[tokio::test]
async fn the_official_encoder_server_passes_all_but_input_validation() {
    let Some(interop) = peers::interop_dir() else {
        return;
    };
    let node = start(
        Path::new("node"),
        &["encoder-server.mjs", "--port", "0"],
        &interop,
    )
    .await;
    let (violated, reports) = check_routes("@ag-ui/encoder server", &node.base, &PEER_ROUTES).await;
    // The documented node server hands the request body to the encoder
    // without validating it: a malformed RunAgentInput gets a 200 stream.
    for (route, families) in &violated {
        assert_eq!(families, &[Family::RunInput], "{route}");
    }
    let passed = passed_somewhere(&reports);
    for family in [
        Family::Lifecycle,
        Family::Streaming,
        Family::ToolCalls,
        Family::State,
        Family::Protobuf,
        Family::Negotiation,
    ] {
        assert!(passed.contains(&family), "{family}");
    }
    assert!(reports.iter().all(|r| r.features.protobuf == Some(true)));
}

#[tokio::test]
async fn the_official_python_server_passes_what_it_supports() {
    let Some(interop) = peers::interop_dir() else {
        return;
    };
    let Some(python) = peers::python() else {
        return;
    };
    let py = start(&python, &["python/server.py", "--port", "0"], &interop).await;
    let (violated, reports) =
        check_routes("ag-ui-protocol FastAPI server", &py.base, &PEER_ROUTES).await;
    for (route, families) in &violated {
        assert!(families.is_empty(), "{route}: {families:?}");
    }
    // FastAPI validates the body (422); the encoder only speaks SSE, with
    // Starlette's charset parameter (a warning, not a violation).
    let passed = passed_somewhere(&reports);
    assert!(passed.contains(&Family::RunInput));
    assert!(reports.iter().all(|r| r.features.protobuf == Some(false)));
    assert!(reports.iter().all(|r| {
        r.findings
            .iter()
            .any(|f| f.family == Family::Sse && f.message.contains("charset=utf-8"))
    }));
}

#[tokio::test]
async fn a_langgraph_graph_served_by_the_official_adapter() {
    let Some(python) = peers::langgraph_python() else {
        return;
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop/langgraph");
    let graph = start(&python, &["server.py", "--port", "0"], &dir).await;
    let (violated, reports) = check_routes("ag-ui-langgraph", &graph.base, &["/agent"]).await;
    assert_eq!(violated["/agent"], [], "the adapter broke a rule");
    let report = &reports[0];
    // The graph calls the offered frontend tool and interrupts when asked
    // for approval: both round trips ran.
    for scenario in ["frontend-tools", "interrupt", "cancel", "bad-input"] {
        let verdict = report
            .scenarios
            .iter()
            .find(|s| s.name == scenario)
            .map(|s| s.verdict);
        assert_eq!(verdict, Some(Verdict::Pass), "{scenario}");
    }
}
