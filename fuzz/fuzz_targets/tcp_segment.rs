//! The TCP segment parser (with and without checksum), the option-area parser, and the BTH →
//! message-fragment interpretation.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bth_fuzz::check_tcp_segment(data);
});
