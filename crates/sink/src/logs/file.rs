//! A log file that holds whole lines only, also when its disk is full.
//!
//! Lines are collected in memory and written in chunks that end at a line
//! end, at the file's known length (`pwrite`): a write cut short by a full
//! disk is truncated back to the last whole line and the chunk stays in
//! memory, to be written when space returns. While the disk is full at most
//! `max_pending` bytes wait; lines beyond that are dropped and counted, never
//! half-written. A free-space floor (`min_free`) pauses writing before the
//! disk is full, so the probe never takes its last byte from other processes.
//!
//! The file appears only with its header: its first chunk (the Zeek header
//! and what followed it) is written to a new hidden file in the log
//! directory, which is renamed to the log's name once that write is whole.
//! A disk too full for the header leaves no file, only the counted loss.
//! Everything goes through the directory's descriptor ([`Dir`]): a planted
//! link under either name is replaced or refused, never followed.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wirelog_safefs::Dir;

/// Bytes collected before they are written (the size of a BufWriter's buffer).
const CHUNK: usize = 1 << 16;

/// How long a file that found no space waits before the next write is tried
/// on its own (an explicit `flush` always tries).
const SPACE_RETRY: Duration = Duration::from_secs(1);

/// What a [`LogFile`] wrote and could not write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFileStats {
    /// Record lines dropped (header lines are not counted): the disk stayed
    /// full with `max_pending` bytes waiting, or at close.
    pub dropped: u64,
    /// Writes that failed for lack of space (ENOSPC, EDQUOT), kept for a retry.
    pub space_failures: u64,
    /// Writes put off because free space was below the floor.
    pub pauses: u64,
    /// The last lack-of-space error, naming the file.
    pub last_error: Option<String>,
}

pub struct LogFile {
    dir: Arc<Dir>,
    name: String,
    path: PathBuf,
    /// None until the first chunk (with the header) is written whole.
    file: Option<File>,
    /// Bytes in the file: whole lines only.
    len: u64,
    /// Bytes not written yet.
    buf: Vec<u8>,
    max_pending: usize,
    min_free: u64,
    /// While the disk is full: no write is tried on its own before this.
    retry_at: Option<Instant>,
    /// A line is being dropped and its end has not come yet.
    dropping: bool,
    stats: LogFileStats,
}

impl LogFile {
    /// The log `name` in `dir`: an earlier file of that name is removed now
    /// (a run's log never reads as an earlier one's); the new one appears at
    /// the first write, with its header. At most `max_pending` bytes wait in
    /// memory while the disk is full; writing pauses while the file system
    /// has less than `min_free` bytes available (0: no floor).
    pub fn create(dir: Arc<Dir>, name: &str, max_pending: usize, min_free: u64) -> io::Result<LogFile> {
        dir.remove_file(name)?;
        Ok(LogFile {
            path: dir.join(name),
            name: name.to_string(),
            dir,
            file: None,
            len: 0,
            buf: Vec::with_capacity(CHUNK),
            max_pending: max_pending.max(CHUNK),
            min_free,
            retry_at: None,
            dropping: false,
            stats: LogFileStats::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn stats(&self) -> &LogFileStats {
        &self.stats
    }

    /// True while lines wait for space.
    pub fn waiting(&self) -> bool {
        self.retry_at.is_some()
    }

    /// Gives up on what still waits (at exit): its lines are counted as
    /// dropped. The file keeps its whole lines.
    pub fn abandon_pending(&mut self) -> LogFileStats {
        let pending = std::mem::take(&mut self.buf);
        self.stats.dropped += record_lines(&pending);
        self.retry_at = None;
        self.stats.clone()
    }

    /// Writes the whole lines collected so far. Lack of space is not an
    /// error: the lines wait (counted); any other failure names the file.
    fn drain(&mut self) -> io::Result<()> {
        let Some(last_nl) = self.buf.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let end = last_nl + 1;
        if self.min_free > 0 {
            if let Some(avail) = available(self.dir.path()) {
                if avail < self.min_free.saturating_add(end as u64) {
                    self.stats.pauses += 1;
                    self.retry_at = Some(Instant::now() + SPACE_RETRY);
                    return Ok(());
                }
            }
        }
        let written = match &self.file {
            Some(file) => file.write_all_at(&self.buf[..end], self.len).map_err(|e| {
                // Whatever part of the chunk reached the file is cut off
                // again: the file ends with a whole line.
                let cut = file.set_len(self.len);
                (e, cut)
            }),
            None => self.first_chunk(end).map_err(|e| (e, Ok(()))),
        };
        match written {
            Ok(()) => {
                self.len += end as u64;
                self.buf.drain(..end);
                self.retry_at = None;
                Ok(())
            }
            Err((e, cut)) => {
                if is_out_of_space(&e) {
                    self.stats.space_failures += 1;
                    self.stats.last_error = Some(format!("cannot write {}: {e}", self.path.display()));
                    self.retry_at = Some(Instant::now() + SPACE_RETRY);
                    return cut.map_err(|c| self.error("truncate", c));
                }
                Err(self.error("write", e))
            }
        }
    }

    /// Writes the first `end` bytes (the header and what follows it) to a
    /// new hidden file and renames it to the log's name: the log appears
    /// whole-headed or not at all (the hidden file is removed on failure).
    fn first_chunk(&mut self, end: usize) -> io::Result<()> {
        let tmp = format!(".{}.part", self.name);
        // A leftover of a killed run (or anything planted) under the hidden
        // name is removed first: the file is then created exclusively.
        self.dir.remove_file(&tmp)?;
        let file = self.dir.create_new(&tmp)?;
        let done = file.write_all_at(&self.buf[..end], 0).and_then(|()| self.dir.rename(&tmp, &self.name));
        if let Err(e) = done {
            let _ = self.dir.remove_file(&tmp);
            return Err(e);
        }
        self.file = Some(file);
        Ok(())
    }

    fn error(&self, op: &str, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("cannot {op} {}: {e}", self.path.display()))
    }
}

impl LogFile {
    /// Takes the whole lines `lines` holds, as [`Write::write`] would: when
    /// nothing waits to be written the buffer itself is taken (and this
    /// file's empty one given back), not copied.
    ///
    /// The lines are copied (through `write`) in two cases: something is
    /// already waiting, which happens once per log (its header, written
    /// through `Write`, waits for the first chunk of lines so that the file
    /// appears whole-headed), and while the disk is full (`write` then
    /// bounds what waits and drops whole lines, counted). Tested by
    /// `take_lines_swaps_or_copies`.
    pub fn take_lines(&mut self, lines: &mut Vec<u8>) -> io::Result<()> {
        if !self.buf.is_empty() || self.dropping || self.waiting() {
            let r = self.write_all(lines);
            lines.clear();
            return r;
        }
        std::mem::swap(&mut self.buf, lines);
        lines.clear();
        if self.buf.len() >= CHUNK {
            self.drain()?;
        }
        Ok(())
    }
}

impl Write for LogFile {
    /// Takes the bytes into memory (writers hand over one whole record per
    /// call), writing chunks out as they fill.
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let at_line_start = self.buf.last().is_none_or(|&b| b == b'\n');
        if self.dropping || (self.waiting() && at_line_start && self.buf.len() + data.len() > self.max_pending) {
            // The disk is full and the memory given is used: the record is
            // dropped whole (with what follows of it, should it come in parts).
            let mut rest = data;
            if self.dropping {
                match rest.iter().position(|&b| b == b'\n') {
                    Some(i) => rest = &rest[i + 1..],
                    None => return Ok(data.len()),
                }
            }
            self.stats.dropped += record_lines(rest);
            self.dropping = !rest.is_empty() && !rest.ends_with(b"\n");
            return Ok(data.len());
        }
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK && self.retry_at.is_none_or(|t| Instant::now() >= t) {
            self.drain()?;
        }
        Ok(data.len())
    }

    /// Writes what is collected (tried even while waiting for space).
    fn flush(&mut self) -> io::Result<()> {
        self.drain()
    }
}

/// Lines of records in `data` (Zeek header lines start with '#').
fn record_lines(data: &[u8]) -> u64 {
    data.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty() && l[0] != b'#')
        .count() as u64
}

fn is_out_of_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// Bytes available to an unprivileged writer on the file system of `path`.
pub fn available(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `statvfs` is plain integers, for which all zeroes is a value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs fills the struct; c is a valid C string.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_lines_reach_the_file() {
        let dir = std::env::temp_dir().join(format!("wirelog-logfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.log");
        std::fs::write(&p, b"an earlier run's\n").unwrap();
        let mut f = LogFile::create(Arc::new(Dir::open(&dir).unwrap()), "x.log", 1 << 20, 0).unwrap();
        // The earlier file is gone; the new one appears at the first write.
        assert!(!p.exists());
        f.write_all(b"#header\n").unwrap();
        f.write_all(b"a\tb\n").unwrap();
        f.write_all(b"half").unwrap();
        f.flush().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"#header\na\tb\n");
        f.write_all(b" done\n").unwrap();
        f.flush().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"#header\na\tb\nhalf done\n");
        assert_eq!(f.abandon_pending().dropped, 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `take_lines` takes the caller's buffer when nothing waits (giving
    /// the file's empty one back), and copies after the header and while
    /// the disk is full, where lines beyond `max_pending` are dropped whole
    /// and counted.
    #[test]
    fn take_lines_swaps_or_copies() {
        let dir = std::env::temp_dir().join(format!("wirelog-takelines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let d = Arc::new(Dir::open(&dir).unwrap());
        let mut f = LogFile::create(d.clone(), "x.log", CHUNK, 0).unwrap();
        f.write_all(b"#header\n").unwrap();
        // The header waits: the lines are copied, the caller keeps its buffer.
        let mut lines = Vec::with_capacity(1024);
        lines.extend_from_slice(b"a\n");
        let ours = lines.as_ptr();
        f.take_lines(&mut lines).unwrap();
        assert!(lines.is_empty() && lines.as_ptr() == ours);
        f.flush().unwrap();
        assert_eq!(std::fs::read(dir.join("x.log")).unwrap(), b"#header\na\n");
        // Nothing waits: the buffer itself is taken.
        lines.extend_from_slice(b"b\nc\n");
        f.take_lines(&mut lines).unwrap();
        assert!(lines.is_empty() && lines.as_ptr() != ours && f.buf.as_ptr() == ours);
        f.flush().unwrap();
        assert_eq!(std::fs::read(dir.join("x.log")).unwrap(), b"#header\na\nb\nc\n");
        assert_eq!(f.abandon_pending().dropped, 0);
        // A disk "full" (a floor no file system meets): lines wait, copied,
        // up to max_pending; then whole lines are dropped and counted.
        let mut g = LogFile::create(d, "y.log", CHUNK, u64::MAX).unwrap();
        g.write_all(b"#h\n").unwrap();
        g.flush().unwrap();
        assert!(g.waiting());
        let long = [&[b'x'; 29_999][..], b"\n"].concat();
        for _ in 0..4 {
            lines.extend_from_slice(&long);
            g.take_lines(&mut lines).unwrap();
            assert!(lines.is_empty());
        }
        assert_eq!(g.buf.len(), 3 + 2 * long.len(), "two lines wait");
        assert_eq!(g.stats().dropped, 2);
        assert_eq!(g.abandon_pending().dropped, 4, "with the two abandoned");
        assert!(!dir.join("y.log").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn counts_record_lines() {
        assert_eq!(record_lines(b"#x\na\nb\n"), 2);
        assert_eq!(record_lines(b""), 0);
        assert_eq!(record_lines(b"partial"), 1);
    }
}
