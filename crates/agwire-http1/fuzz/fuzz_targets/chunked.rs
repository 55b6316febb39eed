//! Chunked bodies: `agwire_http1::fuzzing::check_chunked`'s properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    agwire_http1::fuzzing::check_chunked(data);
});
