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


/// The content identity of a capture file: its size and a 64-bit FNV-1a
/// hash of its first and last MiB (the whole file when smaller than 2 MiB),
/// as `<size>-<hash hex>`. The same bytes give the same identity whatever
/// the file's name or place.
pub fn identify(path: &Path) -> std::io::Result<String> {
    let mut f = File::open(path)?;
    let size = f.metadata()?.len();
    let mut h = Fnv::new();
    h.write(&size.to_le_bytes());
    let mut buf = vec![0u8; EDGE_BYTES as usize];
    let head = size.min(EDGE_BYTES) as usize;
    f.read_exact(&mut buf[..head])?;
    h.write(&buf[..head]);
    if size > EDGE_BYTES {
        let tail_start = (size - EDGE_BYTES).max(EDGE_BYTES);
        let tail = (size - tail_start) as usize;
        f.seek(SeekFrom::Start(tail_start))?;
        f.read_exact(&mut buf[..tail])?;
        h.write(&buf[..tail]);
    }
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
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wirelog-ingest-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn identity_follows_content_not_name() {
        let d = tmpdir("id");
        let a = d.join("a.pcap");
        let b = d.join("b.pcap");
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&a, &big).unwrap();
        std::fs::write(&b, &big).unwrap();
        assert_eq!(identify(&a).unwrap(), identify(&b).unwrap());
        let mut changed = big.clone();
        *changed.last_mut().unwrap() ^= 1;
        std::fs::write(&b, &changed).unwrap();
        assert_ne!(
            identify(&a).unwrap(),
            identify(&b).unwrap(),
            "the tail counts"
        );
        std::fs::write(&b, &big[..100]).unwrap();
        assert!(identify(&b).unwrap().starts_with("100-"));
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
