//! The dojo agents over real HTTP, SSE and protobuf: each feature's
//! conversation folded as the official client folds it (our pipeline here;
//! `dojo_interop.rs` asks `@ag-ui/client` itself), and what each feature must
//! produce.

use crate::dojo_scenarios;

use dojo_scenarios::{Format, fold_scenario, scenarios, serve_dojo};

#[tokio::test]
async fn every_feature_folds_to_what_it_should_produce() {
    let addr = serve_dojo(agwire_testkit::dojo::router(|e| e)).await;
    for scenario in scenarios() {
        for format in [Format::Sse, Format::Proto] {
            let folded = fold_scenario(addr, &scenario, format).await;
            (scenario.check)(&folded.final_messages, &folded.final_state, &folded.runs);
            assert!(
                folded.warnings.is_empty(),
                "{} {format:?}: {:?}",
                scenario.path,
                folded.warnings
            );
        }
    }
}
