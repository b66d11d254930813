//! Whatever arrives at an endpoint from the network: raw packets and segments from fields to a
//! listening endpoint with an established connection (see `bth_fuzz::endpoint`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bth_fuzz::endpoint::run(data);
});
