//! The Memcached parsers on a script of steps (`wirelog_parse::fuzz_steps`
//! after a first byte choosing TCP, text or binary by the bytes themselves,
//! or UDP datagrams with their frame header, and redaction). No input may
//! panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wirelog_parse::memcached::fuzz(data);
});
