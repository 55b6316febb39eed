//! decode → verify → apply throughput of agwire-core's consumer pipeline, and
//! the serde_json floor every encoder is measured against.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use agwire_bench::{mixed_run, text_stream};
use agwire_core::pipeline::Pipeline;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

fn lines(events: &[agwire_core::Event]) -> Vec<String> {
    events.iter().map(agwire_core::Event::to_json).collect()
}

fn bench(c: &mut Criterion) {
    for (name, events) in [
        ("text_100k", text_stream(100_000)),
        ("mixed_20_turns", mixed_run(20)),
    ] {
        let lines = lines(&events);
        let bytes: usize = lines.iter().map(String::len).sum();
        let mut group = c.benchmark_group(format!("pipeline/{name}"));
        group.sample_size(10);
        group.throughput(Throughput::Elements(events.len() as u64));
        group.bench_function("decode_verify_apply", |b| {
            b.iter(|| {
                let mut pipeline = Pipeline::new("bench-thread", Vec::new(), serde_json::json!({}));
                for line in &lines {
                    black_box(pipeline.push_json(line).unwrap());
                }
                black_box(pipeline.session().messages.len())
            });
        });
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_function("serde_json_floor", |b| {
            let mut buf = Vec::with_capacity(bytes + 1024);
            b.iter(|| {
                buf.clear();
                for e in &events {
                    serde_json::to_writer(&mut buf, e).unwrap();
                }
                black_box(buf.len())
            });
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
