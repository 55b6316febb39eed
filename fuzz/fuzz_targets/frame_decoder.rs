#![no_main]
//! The protobuf frame decoder: no panics, chunking-independent, round-trips.

use agwire_testkit::fuzz_checks as checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::frame_decoder(data));
