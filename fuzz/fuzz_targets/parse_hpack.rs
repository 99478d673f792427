//! The HPACK decoder on arbitrary header blocks (format in
//! `wirelog_parse::http2::hpack::fuzz`): no input may panic. Seeded from
//! the HPACK vectors of shared/testdata/hpack by fuzz/run.sh.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| wirelog_parse::http2::hpack::fuzz(data));
