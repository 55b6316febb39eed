//! SSE and protobuf encode/decode throughput on the shared workloads.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use agwire_bench::{mixed_run, text_stream};
use agwire_codec::proto::{FrameDecoder, encode_frame};
use agwire_codec::sse::{SseEncoder, SseEventDecoder};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    for (name, events) in [
        ("text_100k", text_stream(100_000)),
        ("mixed_20_turns", mixed_run(20)),
    ] {
        let mut sse = Vec::new();
        let mut proto = Vec::new();
        for e in &events {
            SseEncoder::new().encode(e, &mut sse);
            encode_frame(e, &mut proto).unwrap();
        }
        let mut group = c.benchmark_group(format!("codec/{name}"));
        group.sample_size(10);
        group.throughput(Throughput::Elements(events.len() as u64));
        let mut buf = Vec::with_capacity(sse.len().max(proto.len()) + 1024);
        group.bench_function("sse_encode", |b| {
            b.iter(|| {
                buf.clear();
                for e in &events {
                    SseEncoder::new().encode(e, &mut buf);
                }
                black_box(buf.len())
            });
        });
        group.bench_function("sse_decode", |b| {
            b.iter(|| {
                let mut d = SseEventDecoder::new();
                let mut out = Vec::with_capacity(events.len());
                for chunk in sse.chunks(65536) {
                    d.push(chunk, &mut out).unwrap();
                }
                d.finish(&mut out).unwrap();
                black_box(out.len())
            });
        });
        group.bench_function("proto_encode", |b| {
            b.iter(|| {
                buf.clear();
                for e in &events {
                    encode_frame(e, &mut buf).unwrap();
                }
                black_box(buf.len())
            });
        });
        group.bench_function("proto_decode", |b| {
            b.iter(|| {
                let mut d = FrameDecoder::new();
                let mut out = Vec::with_capacity(events.len());
                for chunk in proto.chunks(65536) {
                    d.push(chunk, &mut out).unwrap();
                }
                d.finish().unwrap();
                black_box(out.len())
            });
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
