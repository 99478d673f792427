//! The HTTP/2 parser on a script of data and gap steps in both directions
//! (format in `wirelog_parse::http2::fuzz`): no input may panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| wirelog_parse::http2::fuzz(data));
