//! The receive path of an established tcp_bth connection, fed segment sequences derived from the
//! input structurally (see `bth_fuzz::conn`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bth_fuzz::conn::run(data);
});
