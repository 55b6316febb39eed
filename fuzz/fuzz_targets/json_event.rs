#![no_main]
//! JSON event decoding: no panics, and what decodes round-trips.

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::json_event(data));
