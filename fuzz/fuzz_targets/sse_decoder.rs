#![no_main]
//! The SSE decoder: no panics, chunking-independent.

use agwire_testkit::fuzz_checks as checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::sse_decoder(data));
