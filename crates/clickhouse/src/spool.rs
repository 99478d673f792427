//! The on-disk spool: batches ClickHouse did not take, kept until it does.
//!
//! One file per batch, `<seq>.batch` (20 digits, so names sort as numbers):
//! a header line `wirelog-spool 1 <table> <rows> <token>` and the batch's
//! RowBinary bytes. A file is written to a temporary name, fsynced, renamed
//! and the directory fsynced, so after a crash (or SIGKILL) a name is either
//! absent or the whole batch. The deduplication token travels in the file:
//! a batch sent again after a restart is the same insert to the server.
//!
//! The spool is bounded (`--spool-size`): a batch that does not fit is
//! dropped and counted by the caller. One process uses a spool at a time
//! (an exclusive lock on `LOCK`).
//!
//! Files are created, opened, renamed and removed through the directory
//! opened without following a link (wirelog-safefs): a link planted in the
//! spool is refused or replaced, never followed.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use wirelog_safefs::Dir;

use crate::schema::Table;

const MAGIC: &str = "wirelog-spool 1";

/// One batch: what one INSERT sends.
#[derive(Debug, Clone)]
pub struct Payload {
    /// Order of the batch: sent in ascending order, across restarts.
    pub seq: u64,
    pub table: Table,
    /// `insert_deduplication_token`: the same for every attempt.
    pub token: String,
    pub rows: u64,
    pub data: Bytes,
}

pub struct Spool {
    dir: PathBuf,
    limit: u64,
    /// seq -> (file size, rows).
    files: BTreeMap<u64, (u64, u64)>,
    bytes: u64,
    _lock: File,
}

fn name(seq: u64) -> String {
    format!("{seq:020}.batch")
}

impl Spool {
    /// Opens (creating) the spool directory, locks it, removes temporary
    /// files of an interrupted write and lists the batches waiting.
    pub fn open(dir: &Path, limit: u64) -> io::Result<Spool> {
        let ctx = |what: &str, e: io::Error| io::Error::new(e.kind(), format!("spool {}: {what}: {e}", dir.display()));
        let d = Dir::create(dir).map_err(|e| ctx("cannot create", e))?;
        let lock = d.open_lock("LOCK").map_err(|e| ctx("cannot open LOCK", e))?;
        // SAFETY: flock on a descriptor we own; no memory is passed.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("spool {}: in use by another wirelog process (give each probe its own --spool-dir)", dir.display()),
            ));
        }
        let mut files = BTreeMap::new();
        let mut bytes = 0;
        for e in fs::read_dir(dir).map_err(|e| ctx("cannot list", e))? {
            let e = e?;
            let file_name = e.file_name();
            let n = file_name.to_string_lossy();
            if n.ends_with(".tmp") {
                let _ = d.remove_file(&file_name);
                continue;
            }
            let Some(seq) = n.strip_suffix(".batch").and_then(|s| s.parse::<u64>().ok()) else {
                continue;
            };
            match read_header(&e.path()) {
                Ok((_, rows, _, _)) => {
                    let size = e.metadata()?.len();
                    bytes += size;
                    files.insert(seq, (size, rows));
                }
                Err(err) => {
                    // Kept aside for a human, never sent: it is not a batch we wrote.
                    eprintln!("wirelog: warning: spool file {}: {err}; renamed to .bad", e.path().display());
                    let _ = d.rename(&file_name, e.path().with_extension("bad").file_name().unwrap_or_default());
                }
            }
        }
        Ok(Spool { dir: dir.to_path_buf(), limit, files, bytes, _lock: lock })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Rows in the spooled batches.
    pub fn rows(&self) -> u64 {
        self.files.values().map(|(_, r)| r).sum()
    }

    pub fn first(&self) -> Option<u64> {
        self.files.keys().next().copied()
    }

    pub fn max_seq(&self) -> Option<u64> {
        self.files.keys().next_back().copied()
    }

    /// Writes a batch durably; `Ok(false)` when it does not fit in the limit.
    pub fn put(&mut self, p: &Payload) -> io::Result<bool> {
        let header = format!("{MAGIC} {} {} {}\n", p.table.name(), p.rows, p.token);
        let size = (header.len() + p.data.len()) as u64;
        if self.bytes + size > self.limit {
            return Ok(false);
        }
        let tmp = format!(".{}.tmp", name(p.seq));
        let d = Dir::open(&self.dir)?;
        let write = || -> io::Result<()> {
            d.remove_file(&tmp)?;
            let mut f = d.create_new(&tmp)?;
            f.write_all(header.as_bytes())?;
            f.write_all(&p.data)?;
            f.sync_all()?;
            d.rename(&tmp, name(p.seq))?;
            d.sync()
        };
        if let Err(e) = write() {
            let _ = d.remove_file(&tmp);
            return Err(io::Error::new(e.kind(), format!("spool {}: cannot write a batch: {e}", self.dir.display())));
        }
        if let Some((old, _)) = self.files.insert(p.seq, (size, p.rows)) {
            self.bytes -= old;
        }
        self.bytes += size;
        Ok(true)
    }

    /// Reads a spooled batch back.
    pub fn read(&self, seq: u64) -> io::Result<Payload> {
        let path = self.dir.join(name(seq));
        let (table, rows, token, offset) = read_header(&path)?;
        let mut all = Vec::new();
        open_batch(&path)?.read_to_end(&mut all)?;
        Ok(Payload { seq, table, token, rows, data: Bytes::from(all).slice(offset..) })
    }

    /// Forgets a batch the server took (or one that cannot be read).
    pub fn remove(&mut self, seq: u64) -> io::Result<()> {
        if let Some((size, _)) = self.files.remove(&seq) {
            self.bytes -= size;
            Dir::open(&self.dir)?.remove_file(name(seq))?;
        }
        Ok(())
    }

    /// Sets a batch that cannot be read aside as `.bad` and forgets it.
    pub fn quarantine(&mut self, seq: u64) {
        if let Some((size, _)) = self.files.remove(&seq) {
            self.bytes -= size;
            let _ = Dir::open(&self.dir).and_then(|d| d.rename(name(seq), format!("{seq:020}.bad")));
        }
    }
}

/// Opens a spooled file: never through a link, a regular file of one link.
fn open_batch(path: &Path) -> io::Result<File> {
    let (d, name) = wirelog_safefs::parent_of(path)?;
    d.open_file(name, false)
}

/// (table, rows, token, offset of the data).
fn read_header(path: &Path) -> io::Result<(Table, u64, String, usize)> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {why}", path.display()));
    let mut f = open_batch(path)?;
    let mut head = [0u8; 512];
    let n = io::Read::read(&mut f, &mut head)?;
    let end = head[..n].iter().position(|&b| b == b'\n').ok_or_else(|| bad("no header line"))?;
    let line = std::str::from_utf8(&head[..end]).map_err(|_| bad("header is not text"))?;
    let rest = line.strip_prefix(MAGIC).ok_or_else(|| bad("not a wirelog spool file"))?;
    let mut parts = rest.split_whitespace();
    let table = parts.next().and_then(Table::from_name).ok_or_else(|| bad("unknown table"))?;
    let rows = parts.next().and_then(|r| r.parse().ok()).ok_or_else(|| bad("bad row count"))?;
    let token = parts.next().ok_or_else(|| bad("no token"))?.to_string();
    Ok((table, rows, token, end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_store::Kind;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wirelog-spool-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn payload(seq: u64, n: usize) -> Payload {
        Payload {
            seq,
            table: Table::Store(Kind::Conns),
            token: format!("p-1-{seq}"),
            rows: n as u64,
            data: Bytes::from(vec![seq as u8; n]),
        }
    }

    #[test]
    fn batches_survive_reopening_in_order_and_the_limit_holds() {
        let d = tmpdir("order");
        {
            let mut s = Spool::open(&d, 400).unwrap();
            assert!(s.put(&payload(7, 100)).unwrap());
            assert!(s.put(&payload(3, 100)).unwrap());
            // Header + 300 bytes would pass the 400-byte limit.
            assert!(!s.put(&payload(9, 300)).unwrap());
            // A second process is refused.
            assert!(Spool::open(&d, 400).is_err());
        }
        fs::write(d.join(".00000000000000000011.batch.tmp"), b"half").unwrap();
        fs::write(d.join("00000000000000000012.batch"), b"garbage").unwrap();
        let mut s = Spool::open(&d, 400).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s.rows(), 200);
        assert_eq!(s.first(), Some(3));
        let p = s.read(3).unwrap();
        assert_eq!((p.token.as_str(), p.rows, p.data.len()), ("p-1-3", 100, 100));
        assert!(p.data.iter().all(|&b| b == 3));
        s.remove(3).unwrap();
        assert_eq!(s.first(), Some(7));
        assert!(d.join("00000000000000000012.bad").exists());
        assert!(!d.join(".00000000000000000011.batch.tmp").exists());
        drop(s);
        fs::remove_dir_all(&d).unwrap();
    }
}
