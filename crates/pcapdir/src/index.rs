//! The index beside each pcap file: for every connection uid, the offsets
//! of its packets' records.
//!
//! Format (little-endian): a 16-byte header, `WLPCAPIX`, version (u32, 1),
//! zero (u32); then blocks, each appended once the pcap data up to its
//! `data_end` is on disk: `WLIB`, body length (u32), body. The body is
//! `data_end` (u64), entry count (u32), and per entry: uid length (u8), uid,
//! first and last packet time (i64 ns), packet count (u32), then the record
//! offsets as LEB128 varints, each the difference from the one before (the
//! first from 0). A block cut short by a crash is ignored: the index never
//! points past the data.

use std::collections::HashMap;
use std::io;
use std::path::Path;

use wirelog_record::Uid;

pub(crate) const HEADER: [u8; 16] = *b"WLPCAPIX\x01\0\0\0\0\0\0\0";
const BLOCK_MAGIC: [u8; 4] = *b"WLIB";

/// Where one connection's packets are in one pcap file (within one block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub uid: String,
    pub first_ns: i64,
    pub last_ns: i64,
    /// Byte offsets of the packets' record headers, ascending.
    pub offsets: Vec<u64>,
}

/// An index as read back.
#[derive(Debug, Default)]
pub struct Index {
    pub entries: Vec<IndexEntry>,
    /// The pcap data every block read vouches for: no offset points past it.
    pub data_end: u64,
    /// The file ended inside a block (a writer killed while appending it).
    pub torn_tail: bool,
}

/// The packets of one block, gathered by the writer.
#[derive(Default)]
pub(crate) struct BlockBuilder {
    conns: HashMap<Uid, (i64, i64, Vec<u64>)>,
}

impl BlockBuilder {
    pub fn add(&mut self, uid: Uid, ts_ns: i64, offset: u64) {
        let e = self.conns.entry(uid).or_insert((ts_ns, ts_ns, Vec::new()));
        e.0 = e.0.min(ts_ns);
        e.1 = e.1.max(ts_ns);
        e.2.push(offset);
    }

    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// The block's bytes (header included); the builder is emptied.
    pub fn encode(&mut self, data_end: u64) -> Vec<u8> {
        let mut body = Vec::with_capacity(12 + self.conns.len() * 40);
        body.extend_from_slice(&data_end.to_le_bytes());
        body.extend_from_slice(&(self.conns.len() as u32).to_le_bytes());
        for (uid, (first, last, offsets)) in self.conns.drain() {
            let u = uid.as_bytes();
            body.push(u.len() as u8);
            body.extend_from_slice(u);
            body.extend_from_slice(&first.to_le_bytes());
            body.extend_from_slice(&last.to_le_bytes());
            body.extend_from_slice(&(offsets.len() as u32).to_le_bytes());
            let mut prev = 0u64;
            for o in offsets {
                put_varint(&mut body, o - prev);
                prev = o;
            }
        }
        let mut out = Vec::with_capacity(8 + body.len());
        out.extend_from_slice(&BLOCK_MAGIC);
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A cursor over a block body; `None` when it runs out.
struct Cur<'a>(&'a [u8]);

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    }
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.take(1)?.first()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
}

/// Reads the index at `path`, keeping the entries whose uid `want` accepts
/// (their offsets decoded; the others skipped). A damaged block is an error
/// naming the file and offset; a block cut short at the end is not (see
/// [`Index::torn_tail`]).
pub fn read_index(path: &Path, want: impl Fn(&str) -> bool) -> io::Result<Index> {
    let bytes = std::fs::read(path)?;
    let bad = |at: usize, what: &str| {
        io::Error::new(io::ErrorKind::InvalidData, format!("{}: {what} at byte {at}", path.display()))
    };
    let mut ix = Index::default();
    if bytes.len() < HEADER.len() {
        ix.torn_tail = true;
        return Ok(ix);
    }
    if bytes[..8] != HEADER[..8] || bytes[8] != 1 {
        return Err(bad(0, "not a wirelog pcap index (version 1)"));
    }
    let mut at = HEADER.len();
    while at < bytes.len() {
        if bytes.len() - at < 8 {
            ix.torn_tail = true;
            break;
        }
        if bytes[at..at + 4] != BLOCK_MAGIC {
            return Err(bad(at, "no index block"));
        }
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        let Some(body) = bytes.get(at + 8..at + 8 + len) else {
            ix.torn_tail = true;
            break;
        };
        let mut c = Cur(body);
        let damaged = || bad(at, "damaged index block");
        let data_end = c.u64().ok_or_else(damaged)?;
        let n = c.u32().ok_or_else(damaged)?;
        for _ in 0..n {
            let ulen = *c.take(1).ok_or_else(damaged)?.first().ok_or_else(damaged)? as usize;
            let uid = std::str::from_utf8(c.take(ulen).ok_or_else(damaged)?).map_err(|_| damaged())?;
            let first_ns = c.u64().ok_or_else(damaged)? as i64;
            let last_ns = c.u64().ok_or_else(damaged)? as i64;
            let count = c.u32().ok_or_else(damaged)?;
            let keep = want(uid);
            let mut offsets = Vec::with_capacity(if keep { count as usize } else { 0 });
            let mut prev = 0u64;
            for _ in 0..count {
                prev += c.varint().ok_or_else(damaged)?;
                if prev >= data_end {
                    return Err(bad(at, "index entry past the data it vouches for"));
                }
                if keep {
                    offsets.push(prev);
                }
            }
            if keep {
                ix.entries.push(IndexEntry { uid: uid.to_string(), first_ns, last_ns, offsets });
            }
        }
        ix.data_end = ix.data_end.max(data_end);
        at += 8 + len;
    }
    Ok(ix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_record::UidGenerator;

    #[test]
    fn blocks_round_trip_and_a_torn_tail_is_ignored() {
        let dir = std::env::temp_dir().join(format!("wirelog-ix-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.idx");
        let mut g = UidGenerator::new(1);
        let (a, b) = (g.next_uid(), g.next_uid());
        let mut bb = BlockBuilder::default();
        bb.add(a, 10, 24);
        bb.add(b, 11, 100);
        bb.add(a, 12, 300_000);
        let mut bytes = HEADER.to_vec();
        bytes.extend(bb.encode(400_000));
        bb.add(b, 20, 400_000);
        let second = bb.encode(500_000);
        bytes.extend(&second[..second.len() - 1]);
        std::fs::write(&p, &bytes).unwrap();
        let ix = read_index(&p, |u| u == a.as_str()).unwrap();
        assert!(ix.torn_tail);
        assert_eq!(ix.data_end, 400_000);
        assert_eq!(ix.entries, vec![IndexEntry { uid: a.to_string(), first_ns: 10, last_ns: 12, offsets: vec![24, 300_000] }]);
        bytes.extend(&second[second.len() - 1..]);
        std::fs::write(&p, &bytes).unwrap();
        let ix = read_index(&p, |_| true).unwrap();
        assert!(!ix.torn_tail);
        assert_eq!(ix.entries.len(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
