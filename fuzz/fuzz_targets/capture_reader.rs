//! Any bytes through the capture reader's streaming path: it must never panic,
//! never loop forever, and never yield more packets or bytes than the input holds.
//!
//! The first byte picks how many bytes each `read` returns, so the refill and
//! compaction paths see records split at every possible point.

#![no_main]

use std::io::{self, Read};

use libfuzzer_sys::fuzz_target;
use wirelog_source::CaptureReader;

struct Chunked {
    data: Vec<u8>,
    pos: usize,
    chunk: usize,
}

impl Read for Chunked {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.chunk).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let chunk = if first == 0 {
        usize::MAX
    } else {
        usize::from(first)
    };
    let input = Chunked {
        data: rest.to_vec(),
        pos: 0,
        chunk,
    };
    let Ok(mut reader) = CaptureReader::from_reader("fuzz", Box::new(input)) else {
        return;
    };
    // gzip input may legitimately expand; the size bounds hold for the rest.
    let plain = !reader.is_gzip();
    let mut n = 0u64;
    while let Some(p) = reader.next_packet() {
        assert!(p.data.len() <= p.wire_len as usize);
        assert!(!plain || p.data.len() <= rest.len());
        n += 1;
    }
    // Every packet costs at least a 16-byte record header or a 16-byte block.
    assert!(!plain || n <= rest.len() as u64 / 16);
    assert_eq!(n, reader.packets());
    assert!(reader.next_packet().is_none());
    for p in reader.problems() {
        assert!(p.count > 0);
    }
});
