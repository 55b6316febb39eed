#![no_main]
//! JSON event decoding: no panics, and what decodes round-trips.

use agwire_testkit::fuzz_checks as checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::json_event(data));
