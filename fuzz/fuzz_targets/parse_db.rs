//! The MySQL, PostgreSQL and Redis parsers on a script of steps: the first
//! byte picks the protocol and the settings, then each step is a control
//! byte `c` (bit 0: direction; bits 1-2: 3 = a gap of `c >> 3` bytes, else
//! data; bits 3-7: length - 1) followed by that many bytes. No input may panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wirelog_parse::{Dir, ParseConfig, Protocol, ProtocolParser};

fuzz_target!(|data: &[u8]| {
    let Some((&conf, mut rest)) = data.split_first() else { return };
    let proto = [Protocol::Mysql, Protocol::Pgsql, Protocol::Redis][(conf % 3) as usize];
    let cfg = ParseConfig {
        redact: conf & 4 != 0,
        max_header_bytes: if conf & 8 != 0 { 64 } else { 64 * 1024 },
        max_text_bytes: if conf & 16 != 0 { 3 } else { 4096 },
        transaction_timeout_ns: 5,
        ..ParseConfig::default()
    };
    let mut p = proto.stream_parser(&cfg);
    let mut out = Vec::new();
    let mut ts = 0;
    while let Some((&c, r)) = rest.split_first() {
        ts += 1;
        let dir = if c & 1 == 0 { Dir::ToServer } else { Dir::ToClient };
        let n = ((c >> 3) as usize + 1).min(r.len());
        if (c >> 1) & 3 == 3 {
            p.gap(dir, ts, (c >> 3) as u64, &mut out);
            rest = r;
        } else {
            p.data(dir, ts, &r[..n], &mut out);
            rest = &r[n..];
        }
        if c == 0xff {
            p.expire(ts, &mut out);
        }
        if p.gave_up() {
            break;
        }
    }
    p.finish(ts, &mut out);
    for tx in &out {
        if let (Some(a), Some(b)) = (tx.request, tx.response) {
            assert!(a.first_ns <= a.last_ns && b.first_ns <= b.last_ns);
        }
    }
});
