//! Request heads: `agwire_http1::fuzzing::check_head`'s properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    agwire_http1::fuzzing::check_head(data);
});
