#![no_main]
//! The SSE decoder: no panics, chunking-independent.

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::sse_decoder(data));
