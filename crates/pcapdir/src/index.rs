//! The index beside each pcap file: for every connection uid, the offsets
//! of its packets' records. It has two forms, both little-endian, both
//! starting with a 16-byte header: `WLPCAPIX`, version (u32), zero (u32).
//!
//! The **log** (version 1) is written while the pcap file is open: blocks,
//! each appended once the pcap data up to its `data_end` is on disk: `WLIB`,
//! body length (u32), body. The body is `data_end` (u64), entry count (u32),
//! and per entry: uid length (u8), uid, first and last packet time (i64 ns),
//! packet count (u32), then the record offsets as LEB128 varints, each the
//! difference from the one before (the first from 0). A block cut short by a
//! crash is ignored: the index never points past the data. A lookup reads a
//! log whole.
//!
//! The **sorted** form (version 2) replaces the log once the pcap file is
//! closed ([`compact`]), so that a lookup seeks instead of scanning: one
//! entry per uid. After the header, every entry's offsets (packed as in the
//! log); then the entries, grouped in buckets by the FNV-1a hash of their
//! uid modulo the bucket count (about 8 entries a bucket), each: uid length
//! (u8), uid, first and last packet time (i64 ns), packet count (u32), where
//! its packed offsets are in the file (u64) and their length (u32); then the
//! fence: where each bucket starts (u64 each, and one more for the end of
//! the last); then a 48-byte trailer: `data_end` (u64), the first and last
//! packet time of all entries (i64 ns), where the fence is (u64), bucket
//! count (u32), entry count (u32), `WLIXSEEK`. One uid costs four small
//! reads: the trailer, two fence values, its bucket, its offsets.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use wirelog_record::Uid;

pub(crate) const HEADER: [u8; 16] = *b"WLPCAPIX\x01\0\0\0\0\0\0\0";
const SORTED_HEADER: [u8; 16] = *b"WLPCAPIX\x02\0\0\0\0\0\0\0";
const BLOCK_MAGIC: [u8; 4] = *b"WLIB";
const TRAILER_MAGIC: [u8; 8] = *b"WLIXSEEK";
const TRAILER: usize = 48;
/// Entries per bucket of a sorted index, on average (a bucket is ~0.5 KB).
const PER_BUCKET: usize = 8;
/// Wanting more than one uid per this many buckets, a lookup reads the
/// whole index instead of seeking per uid.
const SEEKS_PER_BUCKET: usize = 4;

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
    /// Bytes of the index file read to answer.
    pub bytes_read: u64,
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

/// Reads the whole index at `path` (either form), keeping the entries whose
/// uid `want` accepts (their offsets decoded; the others skipped). A damaged
/// block is an error naming the file and offset; a log block cut short at
/// the end is not (see [`Index::torn_tail`]).
pub fn read_index(path: &Path, want: impl Fn(&str) -> bool) -> io::Result<Index> {
    let bytes = std::fs::read(path)?;
    let mut ix = parse(path, &bytes, &want)?;
    ix.bytes_read = bytes.len() as u64;
    Ok(ix)
}

/// The entries of `uids` in the index at `path`, reading as little as its
/// form allows: a sorted index is sought into (its trailer, then per uid two
/// fence values, one bucket and that uid's offsets), a log is read whole.
/// `window` (first, last packet time wanted): a sorted index whose packets
/// all lie outside it is left after its trailer.
pub fn lookup(path: &Path, uids: &HashSet<String>, window: Option<(i64, i64)>) -> io::Result<Index> {
    let file = File::open(path)?;
    // Lookups hop: read-ahead would fetch pages no lookup wants.
    // SAFETY: advice on an open descriptor; it cannot fail in a way that matters.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM);
    }
    let len = file.metadata()?.len();
    let mut read = 0u64;
    let mut at = |pos: u64, n: usize| -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; n];
        file.read_exact_at(&mut buf, pos)?;
        read += n as u64;
        Ok(buf)
    };
    let bad = |pos: u64, what: &str| {
        io::Error::new(io::ErrorKind::InvalidData, format!("{}: {what} at byte {pos}", path.display()))
    };
    let head = if len >= HEADER.len() as u64 { at(0, HEADER.len())? } else { Vec::new() };
    if head.get(8) != Some(&2) || head[..8] != HEADER[..8] {
        let mut ix = read_index(path, |u| uids.contains(u))?;
        ix.bytes_read += read;
        return Ok(ix);
    }
    if len < (HEADER.len() + TRAILER) as u64 {
        return Err(bad(0, "sorted index shorter than its trailer"));
    }
    let t = Trailer::decode(&at(len - TRAILER as u64, TRAILER)?).ok_or_else(|| bad(len - TRAILER as u64, "no index trailer"))?;
    let fence_end = t.fence_at + 8 * (u64::from(t.buckets) + 1);
    if t.buckets == 0 || fence_end != len - TRAILER as u64 {
        return Err(bad(t.fence_at, "damaged index fence"));
    }
    let mut ix = Index { data_end: t.data_end, ..Index::default() };
    let outside = window.is_some_and(|(from, to)| t.last_ns < from || t.first_ns > to);
    if outside || t.entries == 0 {
        ix.bytes_read = read;
        return Ok(ix);
    }
    if uids.len() * SEEKS_PER_BUCKET > t.buckets as usize {
        // So many uids that most buckets are wanted: one read is cheaper.
        let mut whole = read_index(path, |u| uids.contains(u))?;
        whole.bytes_read += read;
        return Ok(whole);
    }
    for uid in uids {
        let b = u64::from(bucket_of(uid, t.buckets));
        let f = at(t.fence_at + 8 * b, 16)?;
        let (from, to) = (u64::from_le_bytes(f[..8].try_into().unwrap()), u64::from_le_bytes(f[8..].try_into().unwrap()));
        if from > to || to > t.fence_at {
            return Err(bad(t.fence_at + 8 * b, "damaged index fence"));
        }
        let bucket = at(from, (to - from) as usize)?;
        let mut c = Cur(&bucket);
        while !c.0.is_empty() {
            let e = SortedEntry::decode(&mut c).ok_or_else(|| bad(from, "damaged index bucket"))?;
            if e.uid != uid.as_str() {
                continue;
            }
            if e.pos.saturating_add(u64::from(e.len)) > t.fence_at {
                return Err(bad(from, "index entry's offsets past the entries"));
            }
            let packed = at(e.pos, e.len as usize)?;
            let offsets = decode_offsets(&packed, e.count, t.data_end).map_err(|what| bad(e.pos, what))?;
            ix.entries.push(IndexEntry { uid: uid.clone(), first_ns: e.first_ns, last_ns: e.last_ns, offsets });
            break;
        }
    }
    ix.bytes_read = read;
    Ok(ix)
}

/// Either form, read whole (see [`read_index`]).
fn parse(path: &Path, bytes: &[u8], want: &dyn Fn(&str) -> bool) -> io::Result<Index> {
    let bad = |at: usize, what: &str| {
        io::Error::new(io::ErrorKind::InvalidData, format!("{}: {what} at byte {at}", path.display()))
    };
    if bytes.len() < HEADER.len() {
        return Ok(Index { torn_tail: true, ..Index::default() });
    }
    if bytes[..8] != HEADER[..8] {
        return Err(bad(0, "not a wirelog pcap index"));
    }
    match bytes[8] {
        1 => parse_log(bytes, want, bad),
        2 => parse_sorted(bytes, want, bad),
        v => Err(bad(8, &format!("index version {v}, this wirelog reads versions 1 and 2"))),
    }
}

fn parse_log(bytes: &[u8], want: &dyn Fn(&str) -> bool, bad: impl Fn(usize, &str) -> io::Error) -> io::Result<Index> {
    let mut ix = Index::default();
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

fn parse_sorted(bytes: &[u8], want: &dyn Fn(&str) -> bool, bad: impl Fn(usize, &str) -> io::Error) -> io::Result<Index> {
    let tail = bytes.len().checked_sub(TRAILER).filter(|&t| t >= HEADER.len()).ok_or_else(|| bad(0, "sorted index shorter than its trailer"))?;
    let t = Trailer::decode(&bytes[tail..]).ok_or_else(|| bad(tail, "no index trailer"))?;
    let fence_at = usize::try_from(t.fence_at).ok().filter(|&f| f <= tail).ok_or_else(|| bad(tail, "damaged index trailer"))?;
    let keys_at = bytes
        .get(fence_at..fence_at + 8)
        .map(|f| u64::from_le_bytes(f.try_into().unwrap()) as usize)
        .filter(|&k| (HEADER.len()..=fence_at).contains(&k))
        .ok_or_else(|| bad(fence_at, "damaged index fence"))?;
    let mut ix = Index { data_end: t.data_end, ..Index::default() };
    let mut c = Cur(&bytes[keys_at..fence_at]);
    while !c.0.is_empty() {
        let e = SortedEntry::decode(&mut c).ok_or_else(|| bad(keys_at, "damaged index bucket"))?;
        if !want(e.uid) {
            continue;
        }
        let packed = usize::try_from(e.pos)
            .ok()
            .and_then(|p| bytes.get(p..p.checked_add(e.len as usize)?))
            .filter(|_| e.pos as usize + e.len as usize <= keys_at)
            .ok_or_else(|| bad(keys_at, "index entry's offsets past the entries"))?;
        let offsets = decode_offsets(packed, e.count, t.data_end).map_err(|what| bad(e.pos as usize, what))?;
        ix.entries.push(IndexEntry { uid: e.uid.to_string(), first_ns: e.first_ns, last_ns: e.last_ns, offsets });
    }
    Ok(ix)
}

/// `count` offsets packed as LEB128 deltas, each checked against `data_end`.
fn decode_offsets(packed: &[u8], count: u32, data_end: u64) -> Result<Vec<u64>, &'static str> {
    let mut c = Cur(packed);
    let mut out = Vec::with_capacity(count as usize);
    let mut prev = 0u64;
    for _ in 0..count {
        prev = prev.checked_add(c.varint().ok_or("damaged index offsets")?).ok_or("damaged index offsets")?;
        if prev >= data_end {
            return Err("index entry past the data it vouches for");
        }
        out.push(prev);
    }
    Ok(out)
}

/// One entry of a sorted index's bucket.
struct SortedEntry<'a> {
    uid: &'a str,
    first_ns: i64,
    last_ns: i64,
    count: u32,
    /// Where its packed offsets are in the index file, and their length.
    pos: u64,
    len: u32,
}

impl<'a> SortedEntry<'a> {
    fn decode(c: &mut Cur<'a>) -> Option<SortedEntry<'a>> {
        let ulen = *c.take(1)?.first()? as usize;
        let uid = std::str::from_utf8(c.take(ulen)?).ok()?;
        Some(SortedEntry {
            uid,
            first_ns: c.u64()? as i64,
            last_ns: c.u64()? as i64,
            count: c.u32()?,
            pos: c.u64()?,
            len: c.u32()?,
        })
    }
}

/// The fixed-size end of a sorted index.
struct Trailer {
    data_end: u64,
    /// The file's first and last indexed packet times.
    first_ns: i64,
    last_ns: i64,
    fence_at: u64,
    buckets: u32,
    entries: u32,
}

impl Trailer {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.data_end.to_le_bytes());
        out.extend_from_slice(&self.first_ns.to_le_bytes());
        out.extend_from_slice(&self.last_ns.to_le_bytes());
        out.extend_from_slice(&self.fence_at.to_le_bytes());
        out.extend_from_slice(&self.buckets.to_le_bytes());
        out.extend_from_slice(&self.entries.to_le_bytes());
        out.extend_from_slice(&TRAILER_MAGIC);
    }

    fn decode(b: &[u8]) -> Option<Trailer> {
        let mut c = Cur(b);
        let t = Trailer {
            data_end: c.u64()?,
            first_ns: c.u64()? as i64,
            last_ns: c.u64()? as i64,
            fence_at: c.u64()?,
            buckets: c.u32()?,
            entries: c.u32()?,
        };
        (c.take(8)? == TRAILER_MAGIC).then_some(t)
    }
}

/// The bucket of a uid: FNV-1a, fixed by the format (a std hasher may
/// change between Rust releases).
fn bucket_of(uid: &str, buckets: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in uid.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % u64::from(buckets)) as u32
}

/// Entries of one uid (a log has one per uid per block) as one: its first
/// and last packet time and its offsets, in the order read.
type Merged = HashMap<String, (i64, i64, Vec<u64>)>;

fn merge_by_uid(entries: Vec<IndexEntry>) -> Merged {
    let mut merged = Merged::new();
    for e in entries {
        let m = merged.entry(e.uid).or_insert((e.first_ns, e.last_ns, Vec::new()));
        m.0 = m.0.min(e.first_ns);
        m.1 = m.1.max(e.last_ns);
        m.2.extend(e.offsets);
    }
    merged
}

/// The sorted form of a whole index: one entry per uid.
fn encode_sorted(ix: Index) -> Vec<u8> {
    let merged = merge_by_uid(ix.entries);
    let buckets = merged.len().div_ceil(PER_BUCKET).max(1) as u32;
    let mut out = SORTED_HEADER.to_vec();
    let (mut first_ns, mut last_ns) = (i64::MAX, i64::MIN);
    // Offsets first, then the entries bucket by bucket, each pointing at its offsets.
    let mut keyed: Vec<(u32, String, i64, i64, u32, u64, u32)> = Vec::with_capacity(merged.len());
    for (uid, (first, last, mut offsets)) in merged {
        offsets.sort_unstable();
        first_ns = first_ns.min(first);
        last_ns = last_ns.max(last);
        let pos = out.len() as u64;
        let mut prev = 0u64;
        for &o in &offsets {
            put_varint(&mut out, o - prev);
            prev = o;
        }
        let len = (out.len() as u64 - pos) as u32;
        keyed.push((bucket_of(&uid, buckets), uid, first, last, offsets.len() as u32, pos, len));
    }
    keyed.sort_unstable_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut fence = Vec::with_capacity(buckets as usize + 1);
    let mut next = 0u32;
    for (b, uid, first, last, count, pos, len) in &keyed {
        while next <= *b {
            fence.push(out.len() as u64);
            next += 1;
        }
        out.push(uid.len() as u8);
        out.extend_from_slice(uid.as_bytes());
        out.extend_from_slice(&first.to_le_bytes());
        out.extend_from_slice(&last.to_le_bytes());
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&pos.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
    }
    while next <= buckets {
        fence.push(out.len() as u64);
        next += 1;
    }
    let fence_at = out.len() as u64;
    for f in fence {
        out.extend_from_slice(&f.to_le_bytes());
    }
    Trailer { data_end: ix.data_end, first_ns, last_ns, fence_at, buckets, entries: keyed.len() as u32 }.encode(&mut out);
    out
}

/// Replaces the log index at `path` with its sorted form, written beside it
/// and renamed over it: a reader (or a kill) meets one form or the other,
/// whole. Returns false when it was sorted already. The pcap file may be
/// deleted by the ring meanwhile: its new index is then deleted too.
pub(crate) fn compact(path: &Path, pcap: &Path) -> io::Result<bool> {
    let bytes = std::fs::read(path)?;
    if bytes.len() >= HEADER.len() && bytes[..8] == HEADER[..8] && bytes[8] == 2 {
        return Ok(false);
    }
    let sorted = encode_sorted(parse(path, &bytes, &|_| true)?);
    // Written beside it, exclusively, and renamed within the directory
    // opened without following a link (see wirelog-safefs).
    let (dir, name) = wirelog_safefs::parent_of(path)?;
    let part = format!(".{}.part", name.to_string_lossy());
    let written = dir.remove_file(&part).and_then(|_| dir.create_new(&part)).and_then(|mut f| {
        f.write_all(&sorted)?;
        f.sync_data()
    });
    if let Err(e) = written.and_then(|()| dir.rename(&part, name)) {
        let _ = dir.remove_file(&part);
        return Err(e);
    }
    if !pcap.exists() {
        let _ = dir.remove_file(name);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_record::{Uid, UidGenerator};

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

    /// A directory of its own, an index path in it and its (empty) pcap file.
    fn scratch(name: &str) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("wirelog-ix-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (p, pcap) = (dir.join("a.idx"), dir.join("a.pcap"));
        std::fs::write(&pcap, b"").unwrap();
        (dir, p, pcap)
    }

    /// A log of `n` connections over several blocks (uid i has i % 5 + 1
    /// packets, spread over the blocks), as the writer appends it.
    fn log_of(n: usize, path: &Path) -> Vec<Uid> {
        let mut g = UidGenerator::new(9);
        let uids: Vec<Uid> = (0..n).map(|_| g.next_uid()).collect();
        let mut bytes = HEADER.to_vec();
        let mut bb = BlockBuilder::default();
        let mut off = 24u64;
        for round in 0..5u64 {
            for (i, u) in uids.iter().enumerate() {
                if (i as u64 % 5) >= round {
                    bb.add(*u, (round * 1000 + i as u64) as i64 + 1_000_000, off);
                    off += 100;
                }
            }
            bytes.extend(bb.encode(off));
        }
        std::fs::write(path, &bytes).unwrap();
        uids
    }

    #[test]
    fn a_sorted_index_answers_as_its_log_did_and_a_lookup_reads_about_a_kilobyte() {
        let (dir, p, pcap) = scratch("sorted");
        let uids = log_of(5000, &p);
        let merged = |ix: Index| merge_by_uid(ix.entries);
        let log = read_index(&p, |_| true).unwrap();
        let log_len = std::fs::metadata(&p).unwrap().len();
        let data_end = log.data_end;
        let want = merged(log);
        // A log is read whole by a lookup.
        let one: HashSet<String> = [uids[7].to_string()].into();
        let ix = lookup(&p, &one, None).unwrap();
        assert_eq!(ix.bytes_read, log_len + 16);
        assert_eq!(merged(ix)[uids[7].as_str()], want[uids[7].as_str()]);

        assert!(compact(&p, &pcap).unwrap());
        assert!(!compact(&p, &pcap).unwrap(), "sorted once");
        assert_eq!(std::fs::read(&p).unwrap()[8], 2);
        let all = read_index(&p, |_| true).unwrap();
        assert_eq!(all.data_end, data_end);
        assert_eq!(all.entries.len(), 5000, "one entry per uid");
        assert_eq!(merged(all), want);
        let mut total = 0;
        for u in uids.iter().step_by(97) {
            let one: HashSet<String> = [u.to_string()].into();
            let ix = lookup(&p, &one, None).unwrap();
            assert_eq!(ix.data_end, data_end);
            assert_eq!(ix.entries.len(), 1);
            // The trailer, a fence pair, a bucket (8 entries of ~50 bytes
            // on average, a few times that at worst) and the uid's offsets.
            assert!(ix.bytes_read < 2048, "{} bytes read for one uid of 5000", ix.bytes_read);
            total += ix.bytes_read;
            assert_eq!(merged(ix)[u.as_str()], want[u.as_str()]);
        }
        assert!(total / 52 < 700, "{} bytes read per uid on average", total / 52);
        // Several uids, one unknown; then a window the file's packets miss.
        let some: HashSet<String> = [uids[1].to_string(), uids[4999].to_string(), "Cnot-there".to_string()].into();
        let ix = lookup(&p, &some, None).unwrap();
        assert_eq!(ix.entries.len(), 2);
        let ix = lookup(&p, &some, Some((0, 999_999))).unwrap();
        assert!(ix.entries.is_empty());
        assert_eq!(ix.bytes_read, 16 + 48);
        // Many uids: read whole, same answer.
        let many: HashSet<String> = uids.iter().map(|u| u.to_string()).collect();
        let ix = lookup(&p, &many, None).unwrap();
        assert_eq!(merged(ix), want);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unknown_versions_and_damaged_sorted_indexes_are_errors_naming_the_file() {
        let (dir, p, pcap) = scratch("bad");
        let uids = log_of(100, &p);
        compact(&p, &pcap).unwrap();
        let good = std::fs::read(&p).unwrap();
        let one: HashSet<String> = [uids[3].to_string()].into();
        let mut v3 = good.clone();
        v3[8] = 3;
        std::fs::write(&p, &v3).unwrap();
        let e = lookup(&p, &one, None).unwrap_err().to_string();
        assert!(e.contains("a.idx") && e.contains("version 3"), "{e}");
        // A trailer cut off (not a crash: a sorted index appears whole).
        std::fs::write(&p, &good[..good.len() - 5]).unwrap();
        let e = lookup(&p, &one, None).unwrap_err().to_string();
        assert!(e.contains("a.idx") && e.contains("trailer"), "{e}");
        // A fence pointing past the entries.
        let mut bad = good.clone();
        let fence_at = u64::from_le_bytes(good[good.len() - 24..good.len() - 16].try_into().unwrap()) as usize;
        let end = good.len() - 48;
        bad[fence_at..end].fill(0xff);
        std::fs::write(&p, &bad).unwrap();
        let e = lookup(&p, &one, None).unwrap_err().to_string();
        assert!(e.contains("a.idx") && e.contains("fence"), "{e}");
        assert!(read_index(&p, |_| true).unwrap_err().to_string().contains("fence"));
        // The pcap file gone (deleted by the ring): its new index goes too.
        std::fs::write(&p, &good).unwrap();
        let _ = log_of(10, &p);
        std::fs::remove_file(&pcap).unwrap();
        compact(&p, &pcap).unwrap();
        assert!(!p.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
