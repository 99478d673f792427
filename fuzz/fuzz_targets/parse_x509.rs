//! The X.509 certificate decoder on arbitrary bytes (entry
//! `wirelog_parse::tls::x509::fuzz`): no input may panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| wirelog_parse::tls::x509::fuzz(data));
