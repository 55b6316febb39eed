//! Runs the text workload through the pipeline once, for profilers.
#![allow(clippy::unwrap_used, missing_docs)]
fn main() {
    let events = agwire_bench::text_stream(50_000);
    let lines: Vec<String> = events.iter().map(agwire_core::Event::to_json).collect();
    let mut pipeline =
        agwire_core::pipeline::Pipeline::new("bench-thread", Vec::new(), serde_json::json!({}));
    for line in &lines {
        pipeline.push_json(line).unwrap();
    }
    assert_eq!(pipeline.session().messages.len(), 1);
}
