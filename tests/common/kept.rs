//! Kept packets (`--pcap-dir`) read back for the tests: pcap records and
//! the uid index, parsed here from their documented formats.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One record of a pcap file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    pub ts_ns: i64,
    pub orig_len: u32,
    pub data: Vec<u8>,
    /// Where the record header starts in its file.
    pub offset: u64,
}

/// The whole records of a pcap file (microsecond or nanosecond, either
/// byte order), and whether it ends inside a record.
pub fn read_pcap(p: &Path) -> (Vec<Rec>, bool) {
    let b = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(b.len() >= 24, "{}: no pcap header", p.display());
    let magic = u32::from_le_bytes(b[..4].try_into().unwrap());
    let (le, nano) = match magic {
        0xa1b2_c3d4 => (true, false),
        0xa1b2_3c4d => (true, true),
        0xd4c3_b2a1 => (false, false),
        0x4d3c_b2a1 => (false, true),
        m => panic!("{}: magic {m:#x}", p.display()),
    };
    let u32_at = |i: usize| {
        let a: [u8; 4] = b[i..i + 4].try_into().unwrap();
        if le {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        }
    };
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let cap = u32_at(at + 8) as usize;
        if at + 16 + cap > b.len() {
            return (out, true);
        }
        let frac = u32_at(at + 4) as i64;
        out.push(Rec {
            ts_ns: u32_at(at) as i64 * 1_000_000_000 + if nano { frac } else { frac * 1000 },
            orig_len: u32_at(at + 12),
            data: b[at + 16..at + 16 + cap].to_vec(),
            offset: at as u64,
        });
        at += 16 + cap;
    }
    (out, at != b.len())
}

/// The pcap files of a `--pcap-dir`, oldest first (names sort by time).
pub fn kept_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    v.sort();
    v
}

pub fn kept_records(dir: &Path) -> Vec<Rec> {
    kept_files(dir).iter().flat_map(|f| read_pcap(f).0).collect()
}

/// Records compared without their file offsets.
pub fn strip(v: &[Rec]) -> Vec<(i64, u32, &[u8])> {
    v.iter().map(|r| (r.ts_ns, r.orig_len, r.data.as_slice())).collect()
}

/// The uid offsets of an index file, written here from its documented
/// format (crates/pcapdir/src/index.rs), and whether it ends inside a block.
/// Both forms: the log of an open (or killed) writer's file, and the sorted
/// form a closed file's log is replaced with.
pub fn read_index(p: &Path) -> (HashMap<String, Vec<u64>>, bool) {
    let b = std::fs::read(p).unwrap();
    assert_eq!(&b[..8], b"WLPCAPIX", "{}", p.display());
    if b[8] == 2 {
        return (read_sorted_index(&b), false);
    }
    assert_eq!(b[8], 1, "{}: index version", p.display());
    let mut at = 16;
    let mut out: HashMap<String, Vec<u64>> = HashMap::new();
    while at < b.len() {
        if b.len() - at < 8 {
            return (out, true);
        }
        assert_eq!(&b[at..at + 4], b"WLIB");
        let len = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize;
        if at + 8 + len > b.len() {
            return (out, true);
        }
        let body = &b[at + 8..at + 8 + len];
        let mut i = 8;
        let n = u32::from_le_bytes(body[i..i + 4].try_into().unwrap());
        i += 4;
        for _ in 0..n {
            let ul = body[i] as usize;
            let uid = String::from_utf8(body[i + 1..i + 1 + ul].to_vec()).unwrap();
            i += 1 + ul + 16;
            let count = u32::from_le_bytes(body[i..i + 4].try_into().unwrap());
            i += 4;
            let offsets;
            (offsets, i) = varints(body, i, count);
            out.entry(uid).or_default().extend(offsets);
        }
        at += 8 + len;
    }
    (out, false)
}

/// `count` LEB128 deltas from `b[i..]`: the offsets, and where they end.
fn varints(b: &[u8], mut i: usize, count: u32) -> (Vec<u64>, usize) {
    let mut out = Vec::new();
    let mut prev = 0u64;
    for _ in 0..count {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let c = b[i];
            i += 1;
            v |= u64::from(c & 0x7f) << shift;
            shift += 7;
            if c & 0x80 == 0 {
                break;
            }
        }
        prev += v;
        out.push(prev);
    }
    (out, i)
}

/// The sorted form: entries from the first fence value to the fence, each
/// pointing at its packed offsets.
fn read_sorted_index(b: &[u8]) -> HashMap<String, Vec<u64>> {
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    let t = b.len() - 48;
    assert_eq!(&b[t + 40..], b"WLIXSEEK");
    let fence_at = u64_at(t + 24) as usize;
    let mut i = u64_at(fence_at) as usize;
    let mut out = HashMap::new();
    while i < fence_at {
        let ul = b[i] as usize;
        let uid = String::from_utf8(b[i + 1..i + 1 + ul].to_vec()).unwrap();
        i += 1 + ul + 16;
        let (count, pos) = (u32_at(i), u64_at(i + 4) as usize);
        i += 4 + 8 + 4;
        assert!(out.insert(uid, varints(b, pos, count).0).is_none(), "one entry per uid");
    }
    out
}
