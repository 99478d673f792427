//! The captures a store holds: `<dir>/ingested.tsv` lists every capture file
//! read into the store (its content identity, path, packets, time range and
//! when), so reading one again can be refused instead of counting its
//! traffic twice.
//!
//! The file is text, one ingest per line after a `#fields` header, and is
//! replaced atomically (temporary, fsync, rename) by the store's writer, under
//! its lock, after the ingest's rows are in the store's files and (with
//! ClickHouse) every batch of the run is in ClickHouse or its spool: the
//! list never names a capture whose rows are not in the store.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::fsutil::publish;
use crate::StoreError;
pub use wirelog_record::Ingest;

/// Name of the registry inside the store directory.
pub const INGESTED_FILE: &str = "ingested.tsv";

const HEADER: &str = "#fields\tidentity\tpackets\tfirst_ns\tlast_ns\tingested_ns\tfilter\tpath";

/// Bytes hashed at each end of a file: enough to tell captures apart (the
/// first packets' timestamps and the last ones'), cheap for any size.
const EDGE_BYTES: u64 = 1 << 20;

/// Bytes read at a time: a multiple of [`EdgeHash`]'s 32-byte block, so that
/// only the last read of a file can end inside a block; a 1 MiB buffer cost
/// its page faults, and one zeroed before each read its memset.
const READ_CHUNK: usize = 64 << 10;

/// The content identity of a capture file: its size and a 64-bit hash of
/// its first and last MiB (the whole file when smaller than 2 MiB), as
/// `<size>-v<hash hex>`. The same bytes give the same identity whatever
/// the file's name or place. The `v` tells it from the first form,
/// [`identify_v1`], which older wirelogs recorded.
pub fn identify(path: &Path) -> std::io::Result<String> {
    let mut f = File::open(path)?;
    let size = f.metadata()?.len();
    let mut h = EdgeHash::new(size);
    let mut buf = Vec::with_capacity(READ_CHUNK.min(size as usize));
    // Only the file's last range may end inside a block: the head, when
    // the file has a tail, is 1 MiB.
    read_edges(&mut f, size, &mut buf, |bytes| h.write(bytes))?;
    Ok(format!("{size}-v{:016x}", h.finish()))
}

/// Reads the first and last MiB of `f` (`size` bytes; the whole file when
/// smaller than 2 MiB) into `buf` a [`READ_CHUNK`] at a time, handing each
/// piece to `hash`. `buf` is filled where it lies, never zeroed first.
fn read_edges(f: &mut File, size: u64, buf: &mut Vec<u8>, mut hash: impl FnMut(&[u8])) -> std::io::Result<()> {
    let mut range = |f: &mut File, len: u64| -> std::io::Result<()> {
        let mut left = len;
        while left > 0 {
            let n = left.min(READ_CHUNK as u64);
            buf.clear();
            Read::by_ref(f).take(n).read_to_end(buf)?;
            if buf.len() as u64 != n {
                return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the file shrank while read"));
            }
            hash(buf);
            left -= n;
        }
        Ok(())
    };
    range(f, size.min(EDGE_BYTES))?;
    if size > EDGE_BYTES {
        let tail_start = (size - EDGE_BYTES).max(EDGE_BYTES);
        f.seek(SeekFrom::Start(tail_start))?;
        range(f, size - tail_start)?;
    }
    Ok(())
}

/// A 64-bit hash eight bytes a step, in four independent lanes (a 32-byte
/// block a round, so the multiplies overlap). Each step, `lane = rotl((lane ^
/// word) * K, 29)`, is a bijection of the lane for a given word and of the
/// word for a given lane, and so is each step of the finish: two inputs of
/// the same length that differ in one word always hash differently. Not
/// meant to resist someone crafting collisions, only to tell captures apart.
struct EdgeHash {
    lanes: [u64; 4],
    /// Bytes of a last, partial block (only the final `write` has one).
    rest: [u8; 32],
    rest_len: usize,
}

/// Odd multipliers with bits spread over the word (the fractional part of
/// the golden ratio, and of sqrt(3) made odd), and the finisher's.
const LANE_K: u64 = 0x9e37_79b9_7f4a_7c15;
const SEED_K: u64 = 0xbb67_ae85_84ca_a73b;

impl EdgeHash {
    fn new(size: u64) -> EdgeHash {
        // The size seeds the lanes: files of other sizes start apart.
        let s = size.wrapping_mul(SEED_K);
        EdgeHash { lanes: [s, s ^ 1, s ^ 2, s ^ 3], rest: [0; 32], rest_len: 0 }
    }

    #[inline]
    fn step(lane: u64, word: u64) -> u64 {
        (lane ^ word).wrapping_mul(LANE_K).rotate_left(29)
    }

    /// Hashes `bytes`; every call but the last must be whole blocks.
    fn write(&mut self, bytes: &[u8]) {
        debug_assert_eq!(self.rest_len, 0, "only the last write may end inside a block");
        let mut blocks = bytes.chunks_exact(32);
        for b in &mut blocks {
            for (i, lane) in self.lanes.iter_mut().enumerate() {
                let word = u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
                *lane = EdgeHash::step(*lane, word);
            }
        }
        let rest = blocks.remainder();
        self.rest[..rest.len()].copy_from_slice(rest);
        self.rest_len = rest.len();
    }

    fn finish(mut self) -> u64 {
        if self.rest_len > 0 {
            // The partial block zero-padded, its length in the last word's
            // top byte (at most 31 bytes: that byte is padding).
            self.rest[31] = self.rest_len as u8;
            for (i, lane) in self.lanes.iter_mut().enumerate() {
                let word = u64::from_le_bytes(self.rest[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
                *lane = EdgeHash::step(*lane, word);
            }
        }
        let mut h = 0u64;
        for lane in self.lanes {
            h = EdgeHash::mix(h ^ EdgeHash::mix(lane));
        }
        h
    }

    /// A bijective avalanche of a word (xor-shifts and odd multiplies).
    fn mix(mut x: u64) -> u64 {
        x ^= x >> 31;
        x = x.wrapping_mul(LANE_K);
        x ^= x >> 29;
        x = x.wrapping_mul(SEED_K);
        x ^ (x >> 32)
    }
}

/// The first form of a capture's identity, `<size>-<FNV-1a hex>` (64-bit
/// FNV-1a of the size and the same bytes as [`identify`], a byte at a time:
/// seven times the instructions), which the stores of older wirelogs hold.
/// Computed only to recognise those ([`earlier_ingests_of`]).
pub fn identify_v1(path: &Path) -> std::io::Result<String> {
    let mut f = File::open(path)?;
    let size = f.metadata()?.len();
    let mut h = Fnv::new();
    h.write(&size.to_le_bytes());
    let mut buf = Vec::with_capacity(READ_CHUNK.min(size as usize));
    read_edges(&mut f, size, &mut buf, |bytes| h.write(bytes))?;
    Ok(format!("{size}-{:016x}", h.0))
}

struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Whether `recorded` is an identity of the first form for a file of
/// `size` bytes: `<size>-` and 16 lowercase hex digits.
fn first_form_of_size(recorded: &str, size: &str) -> bool {
    recorded
        .strip_prefix(size)
        .and_then(|r| r.strip_prefix('-'))
        .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The ingests among `earlier` of the capture at `path`, whose identity
/// [`identify`] gave as `identity`, oldest first: those recorded under it,
/// and those an older wirelog recorded under the first form. That form is
/// computed (reading the file's edges again) only when `earlier` holds one
/// for a file of the same size, so a store without old ingests never pays it.
pub fn earlier_ingests_of<'a>(path: &Path, identity: &str, earlier: &'a [Ingest]) -> std::io::Result<Vec<&'a Ingest>> {
    let size = identity.split_once('-').map_or(identity, |(s, _)| s);
    let first_form = if earlier.iter().any(|e| first_form_of_size(&e.identity, size)) {
        Some(identify_v1(path)?)
    } else {
        None
    };
    Ok(earlier
        .iter()
        .filter(|e| e.identity == identity || first_form.as_deref() == Some(e.identity.as_str()))
        .collect())
}

/// The ingests recorded in the store `dir`, oldest first (none when the
/// store or its list does not exist), with those of a `read` whose commit
/// was decided but not finished (see [`crate::staging`]): they are as good
/// as recorded, the store's next writer completes them.
pub fn read_ingests(dir: &Path) -> Result<Vec<Ingest>, StoreError> {
    let mut out = read_list(&dir.join(INGESTED_FILE))?;
    for extra in crate::staging::committed_ingests(dir)? {
        if !out.contains(&extra) {
            out.push(extra);
        }
    }
    Ok(out)
}

/// The ingests of one list file (`ingested.tsv` or a run's commit record).
pub(crate) fn read_list(path: &Path) -> Result<Vec<Ingest>, StoreError> {
    let Some(text) = crate::fsutil::read_own_file(path)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let bad = |what: &str| StoreError::corrupt(path, format!("line {}: {what}", n + 1));
        let f: Vec<&str> = line.splitn(7, '\t').collect();
        if f.len() != 7 {
            return Err(bad("expected 7 tab-separated fields"));
        }
        let int = |s: &str, what: &str| {
            s.parse::<i64>()
                .map_err(|_| bad(&format!("{what} {s:?} is not a number")))
        };
        out.push(Ingest {
            identity: f[0].to_string(),
            packets: int(f[1], "packets")?.max(0) as u64,
            first_ns: int(f[2], "first_ns")?,
            last_ns: int(f[3], "last_ns")?,
            ingested_ns: int(f[4], "ingested_ns")?,
            filter: unescape(f[5]),
            path: unescape(f[6]),
        });
    }
    Ok(out)
}

/// Adds ingests to the list of the store `dir`, leaving out those it
/// already holds (a commit completed again after a crash). Called by the
/// store's writer (which holds the directory's lock) once their rows are
/// in the store's files.
pub(crate) fn append_ingests(dir: &Path, new: &[Ingest]) -> Result<(), StoreError> {
    let dst = dir.join(INGESTED_FILE);
    let mut all = read_list(&dst)?;
    let before = all.len();
    for i in new {
        if !all.contains(i) {
            all.push(i.clone());
        }
    }
    if all.len() == before {
        return Ok(());
    }
    let tmp: PathBuf = dir.join(format!(".{INGESTED_FILE}.tmp"));
    write_list(&tmp, &dst, &all)
}

/// Writes `list` to `dst` atomically (through `tmp`, fsynced).
pub(crate) fn write_list(tmp: &Path, dst: &Path, list: &[Ingest]) -> Result<(), StoreError> {
    let mut text = String::from(HEADER);
    text.push('\n');
    for i in list {
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            i.identity,
            i.packets,
            i.first_ns,
            i.last_ns,
            i.ingested_ns,
            escape(&i.filter),
            escape(&i.path)
        ));
    }
    let mut f = crate::fsutil::create_temp(tmp)?;
    f.write_all(text.as_bytes())
        .map_err(|e| StoreError::io(tmp, "write", e))?;
    publish(&f, tmp, dst, true)
}

/// Paths may hold tabs, newlines and backslashes: written escaped.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('\t', "\\t")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(o) => out.push(o),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wirelog-ingest-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// 3,000,000 bytes of a fixed pattern: a head, a tail and bytes between.
    fn pattern() -> Vec<u8> {
        (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn identity_follows_content_not_name() {
        let d = tmpdir("id");
        let a = d.join("a.pcap");
        let b = d.join("b.pcap");
        let big = pattern();
        std::fs::write(&a, &big).unwrap();
        std::fs::write(&b, &big).unwrap();
        assert_eq!(identify(&a).unwrap(), identify(&b).unwrap());
        let mut changed = big.clone();
        *changed.last_mut().unwrap() ^= 1;
        std::fs::write(&b, &changed).unwrap();
        assert_ne!(identify(&a).unwrap(), identify(&b).unwrap(), "the tail counts");
        let mut changed = big.clone();
        changed[0] ^= 0x80;
        std::fs::write(&b, &changed).unwrap();
        assert_ne!(identify(&a).unwrap(), identify(&b).unwrap(), "the head counts");
        // The middle (past the first MiB, before the last) is not read.
        let mut changed = big.clone();
        changed[1_500_000] ^= 1;
        std::fs::write(&b, &changed).unwrap();
        assert_eq!(identify(&a).unwrap(), identify(&b).unwrap(), "only the edges are hashed");
        std::fs::write(&b, &big[..100]).unwrap();
        assert!(identify(&b).unwrap().starts_with("100-v"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Identities are kept in stores: the same bytes must give the same
    /// identity in every version. Pinned values, each also computed by an
    /// independent Python transcription of the two hashes.
    #[test]
    fn identities_are_stable() {
        let d = tmpdir("pinned");
        let f = d.join("f.pcap");
        let big = pattern();
        let cases: [(&[u8], &str, &str); 5] = [
            (&big, "3000000-vd586082910837ee4", "3000000-d57e4f515f45f00c"),
            // Between one and two MiB: the tail starts after the head.
            (&big[..1_500_000], "1500000-v3809110fd574ee65", "1500000-68126335ebf1947a"),
            (&big[..100], "100-v99c603623a3bb2e7", "100-27005d95880342dd"),
            (&big[..64], "64-va88b4e44989f9397", "64-11b187c74d98430d"),
            (b"", "0-v26719df71a44c142", "0-a8c7f832281a39c5"),
        ];
        for (bytes, v2, v1) in cases {
            std::fs::write(&f, bytes).unwrap();
            assert_eq!(identify(&f).unwrap(), v2, "{} bytes", bytes.len());
            assert_eq!(identify_v1(&f).unwrap(), v1, "{} bytes", bytes.len());
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Every byte of a small file counts, wherever it falls in its block,
    /// and so does the length of a last partial block.
    #[test]
    fn one_byte_changes_the_identity() {
        let d = tmpdir("onebyte");
        let f = d.join("f.pcap");
        let base: Vec<u8> = pattern()[..77].to_vec();
        std::fs::write(&f, &base).unwrap();
        let mut seen = vec![identify(&f).unwrap()];
        for i in 0..base.len() {
            let mut b = base.clone();
            b[i] ^= 1;
            std::fs::write(&f, &b).unwrap();
            seen.push(identify(&f).unwrap());
        }
        let mut unique = seen.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), seen.len(), "{seen:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// An ingest under `identity` (the other fields any: the tests compare
    /// identities, or an ingest with itself); the staging tests' too.
    pub(crate) fn ingest(identity: &str) -> Ingest {
        Ingest {
            identity: identity.into(),
            path: "a.pcap".into(),
            packets: 5,
            first_ns: 1,
            last_ns: 2,
            ingested_ns: 3,
            filter: String::new(),
        }
    }

    #[test]
    fn a_capture_recorded_under_either_form_is_recognised() {
        let d = tmpdir("forms");
        let f = d.join("f.pcap");
        std::fs::write(&f, &pattern()[..100]).unwrap();
        let id = identify(&f).unwrap();
        let old = identify_v1(&f).unwrap();
        assert_ne!(id, old);
        let earlier = vec![ingest(&old), ingest("100-v0000000000000000"), ingest(&id), ingest("100-0123456789abcdef")];
        let held = earlier_ingests_of(&f, &id, &earlier).unwrap();
        assert_eq!(held, vec![&earlier[0], &earlier[2]]);
        // No first-form identity of its size: the file is not read again
        // (a path that does not exist would fail to).
        let gone = d.join("gone.pcap");
        let earlier = vec![ingest("101-27005d95880342dd"), ingest("10-27005d95880342dd"), ingest(&id)];
        assert_eq!(earlier_ingests_of(&gone, &id, &earlier).unwrap(), vec![&earlier[2]]);
        // One of its size: read, and a file gone is an error, not a miss.
        let earlier = vec![ingest("100-0123456789abcdef")];
        assert!(earlier_ingests_of(&gone, &id, &earlier).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_list_round_trips_odd_paths() {
        let d = tmpdir("list");
        assert!(read_ingests(&d).unwrap().is_empty());
        let one = Ingest {
            identity: "10-00ff".into(),
            path: "odd\tname\\with\nnewline.pcap".into(),
            packets: 5,
            first_ns: 1,
            last_ns: 2,
            ingested_ns: 3,
            filter: "port 80".into(),
        };
        append_ingests(&d, std::slice::from_ref(&one)).unwrap();
        let two = Ingest {
            identity: "11-01".into(),
            path: "b.pcap".into(),
            ..one.clone()
        };
        append_ingests(&d, std::slice::from_ref(&two)).unwrap();
        assert_eq!(read_ingests(&d).unwrap(), vec![one, two]);
        std::fs::write(d.join(INGESTED_FILE), "x\ty\n").unwrap();
        let e = read_ingests(&d).unwrap_err().to_string();
        assert!(e.contains("ingested.tsv") && e.contains("line 1"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
