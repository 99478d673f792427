//! The TCP stream reassembler on arbitrary segment series (format in
//! `wirelog_parse::stream::fuzz`): no panic, budget returned, bytes accounted.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| wirelog_parse::stream::fuzz(data));
