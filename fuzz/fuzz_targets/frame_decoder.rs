#![no_main]
//! The protobuf frame decoder: no panics, chunking-independent, round-trips.

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::frame_decoder(data));
