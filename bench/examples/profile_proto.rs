//! Encodes the mixed workload as protobuf frames repeatedly, for profilers.
#![allow(clippy::unwrap_used, missing_docs)]
fn main() {
    let events = agwire_bench::mixed_run(20);
    let mut out = Vec::new();
    for _ in 0..50 {
        out.clear();
        for e in &events {
            agwire_codec::proto::encode_frame(e, &mut out).unwrap();
        }
    }
    assert!(!out.is_empty());
}
