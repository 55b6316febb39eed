//! The official `@ag-ui/client` `HttpAgent` (node, pinned in `interop/`) drives
//! every dojo feature over SSE and over protobuf: no error, no warning of any
//! kind from the SDK, the response really in the asked format, and the
//! messages and state it folds equal ours and satisfy the feature's checks.

use crate::dojo_scenarios;
use agwire_testkit::{http_agent, peers};

use dojo_scenarios::{Format, RunReport, THREAD, fold_scenario, scenarios, serve_dojo};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_http_agent_runs_every_dojo_feature() {
    let Some(interop) = peers::interop_dir() else {
        return;
    };
    let addr = serve_dojo(agwire_testkit::dojo::router(|e| e)).await;
    let mut checked = 0;
    for scenario in scenarios() {
        for format in [Format::Sse, Format::Proto] {
            let ours = fold_scenario(addr, &scenario, format).await;
            let spec = json!({
                "url": format!("http://{addr}{}", scenario.path),
                "format": format.name(),
                "threadId": THREAD,
                "state": scenario.state,
                "runs": ours.resolved_runs,
            });
            let theirs = http_agent::run(&interop, &spec).await;
            let what = format!("{} over {}", scenario.path, format.name());
            let types: Vec<&str> = theirs["contentTypes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap())
                .collect();
            assert_eq!(types, vec![format.accept(); scenario.runs.len()], "{what}");
            let runs = theirs["runs"].as_array().unwrap();
            let mut reports = Vec::new();
            for run in runs {
                assert_eq!(run["error"], Value::Null, "{what}: {}", run["error"]);
                assert_eq!(run["logs"], json!([]), "{what}: the SDK said something");
                reports.push(RunReport {
                    types: run["events"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|e| e["type"].as_str().unwrap().to_owned())
                        .collect(),
                    pending_tool_call_ids: ours.runs[reports.len()].pending_tool_call_ids.clone(),
                    pending_interrupts: run["pendingInterrupts"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|i| i["id"].as_str().unwrap().to_owned())
                        .collect(),
                    errored: false,
                });
            }
            let last = runs.last().unwrap();
            let messages = last["messages"].as_array().unwrap();
            assert_eq!(
                messages, &ours.final_messages,
                "{what}: messages differ from ours"
            );
            assert_eq!(
                last["state"], ours.final_state,
                "{what}: state differs from ours"
            );
            (scenario.check)(messages, &last["state"], &reports);
            checked += 1;
        }
    }
    assert_eq!(checked, 22);
}
