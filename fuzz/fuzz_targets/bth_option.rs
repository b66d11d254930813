//! The tcp_bth option parser: never panics, and whatever it accepts emits back to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bth_fuzz::check_bth_option(data);
});
