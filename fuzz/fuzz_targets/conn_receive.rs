//! The receive path of an established tcp_bth connection, fed segment sequences derived from the
//! input structurally (see `tcp_bth_fuzz::conn`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tcp_bth_fuzz::conn::run(data);
});
