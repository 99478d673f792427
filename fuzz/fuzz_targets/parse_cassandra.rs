//! The Cassandra (CQL) parser on a script of steps (`wirelog_parse::fuzz_steps`:
//! a control byte picks the direction, data or a gap, and the length). No
//! input may panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wirelog_parse::cassandra::fuzz(data);
});
