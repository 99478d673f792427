//! The MongoDB parser on a script of data and gap steps in both directions
//! (format in `wirelog_parse::fuzz_steps`; the parser's settings small, so
//! cut messages and long names are reached): no input may panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wirelog_parse::mongodb::fuzz(data);
});
