//! The writer thread: batches of kept packets in, rotated pcap files and
//! their indexes out.
//!
//! Records collect in a buffer written with one `write` per megabyte. Each
//! written range is handed to the kernel's writeback at once
//! (`sync_file_range(WRITE)`); when the next range is written, the one
//! before is waited for and dropped from the page cache
//! (`posix_fadvise(DONTNEED)`), so kept packets never pile up as dirty or
//! cached pages that stall the host when flushed. Only then are the index
//! entries of its packets appended: the index never points past data on
//! disk. A closed file's index is sorted for lookups by a thread of its own
//! ([`Compactor`]), so the writer goes straight on with the next file.
//!
//! A write error (a full disk) ends the file with whole records only, all
//! of them indexed: a write cut short inside a record is truncated back to
//! the last whole record, and an index block that cannot be appended is cut
//! off again with the data it would have indexed. The counters say what
//! the files hold (`written`) and what was lost (`write_failed`).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wirelog_record::Uid;
use wirelog_safefs::Dir;

use crate::index::{compact, BlockBuilder, HEADER as INDEX_HEADER};
use crate::name::{file_name, index_path};
use crate::ring::{enforce, RingLimits};
use crate::{KeepCounters, KeepSender, KeptBatch};

/// Records are written in chunks of this size.
const CHUNK: usize = 1 << 20;
/// An idle writer makes what it holds durable and indexed this often.
const IDLE_FLUSH: Duration = Duration::from_secs(1);
/// After a write error (a full disk) the writer waits this long before it
/// tries a new file; packets meanwhile are counted as lost, not retried one
/// by one.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Emptied batches kept for reuse.
const SPARES: usize = 16;
/// pcap's nanosecond-resolution magic number.
pub const PCAP_NS_MAGIC: u32 = 0xa1b2_3c4d;

/// Where and how kept packets are written.
#[derive(Debug, Clone)]
pub struct PcapDirConfig {
    pub dir: PathBuf,
    /// A file is closed before it grows past this many bytes (`--pcap-file-size`).
    pub file_size: u64,
    /// Files also end at every multiple of this period since the epoch,
    /// by packet time (`--pcap-rotate`).
    pub rotate_ns: Option<i64>,
    pub ring: RingLimits,
    /// Bytes kept of each packet (`--pcap-snaplen`).
    pub snaplen: u32,
    /// Batches the writer's queue holds before senders drop.
    pub queue_batches: usize,
}

/// What the writer reports when it ends.
#[derive(Debug, Default, Clone)]
pub struct WriterSummary {
    /// The first write error (later ones are only counted).
    pub first_error: Option<String>,
}

/// A running writer and the queue to it.
pub struct PcapDir {
    tx: Option<SyncSender<KeptBatch>>,
    spares: Arc<Mutex<Vec<KeptBatch>>>,
    counters: Arc<KeepCounters>,
    snaplen: u32,
    thread: Option<JoinHandle<WriterSummary>>,
}

impl PcapDir {
    /// Creates the directory if needed and starts the writer thread.
    pub fn start(cfg: PcapDirConfig) -> io::Result<PcapDir> {
        // The directory is opened without following a link (and made when
        // missing); every file goes through it (see wirelog-safefs).
        let dir = Dir::create(&cfg.dir).map_err(|e| io::Error::new(e.kind(), format!("--pcap-dir: {e}")))?;
        let probe = ".wirelog-write-test";
        dir.remove_file(probe)
            .and_then(|_| dir.create_new(probe))
            .and_then(|_| dir.remove_file(probe))
            .map_err(|e| io::Error::new(e.kind(), format!("--pcap-dir: cannot write: {e}")))?;
        let (tx, rx) = sync_channel(cfg.queue_batches.max(1));
        let spares = Arc::new(Mutex::new(Vec::new()));
        let counters = Arc::new(KeepCounters::default());
        let snaplen = cfg.snaplen;
        let mut w = Writer {
            cfg,
            counters: counters.clone(),
            spares: spares.clone(),
            open: None,
            seq: 0,
            newest_ns: i64::MIN,
            first_error: None,
            retry_at: None,
            failing: false,
            compactor: Compactor::start()?,
        };
        let thread = std::thread::Builder::new()
            .name("wirelog-pcap".into())
            .spawn(move || {
                w.run(rx);
                WriterSummary { first_error: w.first_error }
            })?;
        Ok(PcapDir { tx: Some(tx), spares, counters, snaplen, thread: Some(thread) })
    }

    /// A sender for one packet path.
    pub fn sender(&self) -> KeepSender {
        KeepSender {
            tx: self.tx.clone().expect("sender after finish"),
            spares: self.spares.clone(),
            counters: self.counters.clone(),
            batch: KeptBatch::default(),
            snaplen: self.snaplen,
            cut: 0,
            wait: false,
        }
    }

    pub fn counters(&self) -> Arc<KeepCounters> {
        self.counters.clone()
    }

    /// Waits for the writer to write what was queued and close its file
    /// (every sender must be dropped first).
    pub fn finish(mut self) -> WriterSummary {
        self.tx = None;
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(s)) => s,
            _ => WriterSummary { first_error: Some("the pcap writer thread panicked".into()) },
        }
    }
}

struct OpenFile {
    path: PathBuf,
    file: File,
    index: File,
    linktype: u32,
    /// The rotation period the file's first packet is in.
    bucket: i64,
    packets: u64,
    /// Records not written yet.
    buf: Vec<u8>,
    buf_packets: u64,
    /// Bytes the file has with `buf`; bytes written; bytes on disk.
    len: u64,
    written: u64,
    durable: u64,
    /// Index entries (uid, time, record start, record end) whose data is
    /// not on disk yet.
    pending: VecDeque<(Uid, i64, u64, u64)>,
    block: BlockBuilder,
    /// Bytes of the index file; the data its blocks cover.
    index_len: u64,
    indexed: u64,
    /// Ranges written (their packets counted written) that the index does
    /// not cover yet: where each ends, and its packets.
    unindexed: VecDeque<(u64, u64)>,
}

struct Writer {
    cfg: PcapDirConfig,
    counters: Arc<KeepCounters>,
    spares: Arc<Mutex<Vec<KeptBatch>>>,
    open: Option<OpenFile>,
    seq: u64,
    newest_ns: i64,
    first_error: Option<String>,
    /// Set by a write error: no new file before then.
    retry_at: Option<Instant>,
    /// Write errors since the last file that could be written.
    failing: bool,
    compactor: Compactor,
}

/// The thread that sorts the index of each closed file (see
/// [`crate::index`]). A file whose index is not sorted (the probe was
/// killed first, or sorting failed) keeps its log, which lookups read whole.
struct Compactor {
    tx: Option<std::sync::mpsc::Sender<PathBuf>>,
    thread: Option<JoinHandle<()>>,
}

impl Compactor {
    fn start() -> io::Result<Compactor> {
        let (tx, rx) = std::sync::mpsc::channel::<PathBuf>();
        let thread = std::thread::Builder::new().name("wirelog-pcap-index".into()).spawn(move || {
            let mut said = false;
            for pcap in rx {
                let idx = index_path(&pcap);
                match compact(&idx, &pcap) {
                    Ok(_) => {}
                    // Deleted by the ring before its turn.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) if !said => {
                        said = true;
                        eprintln!("wirelog: pcap: {}: cannot sort the index ({e}); it stays a log, read whole by lookups", idx.display());
                    }
                    Err(_) => {}
                }
            }
        })?;
        Ok(Compactor { tx: Some(tx), thread: Some(thread) })
    }

    fn closed(&self, pcap: PathBuf) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(pcap);
        }
    }

    /// Sorts what is queued, then ends.
    fn finish(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Writer {
    fn run(&mut self, rx: Receiver<KeptBatch>) {
        loop {
            match rx.recv_timeout(IDLE_FLUSH) {
                Ok(mut b) => {
                    self.write_batch(&b);
                    b.clear();
                    if let Ok(mut s) = self.spares.lock() {
                        if s.len() < SPARES {
                            s.push(b);
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => self.flush(true),
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        self.close();
        // The last file is closed too now: the ring holds it within bounds.
        match enforce(&self.cfg.dir, &self.cfg.ring, None, 0, self.newest_ns) {
            Ok(gone) => {
                self.counters.deleted.fetch_add(gone.len() as u64, Relaxed);
            }
            Err(e) => self.fail(format!("{}: cannot delete old pcap files: {e}", self.cfg.dir.display())),
        }
        self.compactor.finish();
    }

    fn fail(&mut self, what: String) {
        if self.first_error.is_none() {
            eprintln!("wirelog: pcap: {what}");
            self.first_error = Some(what);
        }
    }

    /// A write that lost packets: said once per spell of errors, and no new
    /// file is tried for [`RETRY_AFTER`].
    fn failed(&mut self, what: String) {
        if !self.failing && self.first_error.is_some() {
            eprintln!("wirelog: pcap: {what}");
        }
        self.fail(what);
        self.failing = true;
        self.retry_at = Some(Instant::now() + RETRY_AFTER);
    }

    fn write_batch(&mut self, b: &KeptBatch) {
        let mut at = 0usize;
        for m in &b.meta {
            let data = &b.data[at..at + m.cap_len as usize];
            at += m.cap_len as usize;
            self.newest_ns = self.newest_ns.max(m.ts_ns);
            let rec_len = 16 + m.cap_len as u64;
            let bucket = self.cfg.rotate_ns.map_or(0, |p| m.ts_ns.div_euclid(p));
            let rotate = match &self.open {
                None => true,
                Some(f) => {
                    f.linktype != m.linktype
                        || (f.packets > 0 && f.len + rec_len > self.cfg.file_size)
                        || bucket > f.bucket
                }
            };
            if rotate {
                self.close();
                if self.retry_at.is_some_and(|t| Instant::now() < t) {
                    self.counters.write_failed.fetch_add(1, Relaxed);
                    continue;
                }
                if let Err(e) = self.open_file(m.ts_ns, m.linktype, bucket) {
                    self.failed(format!("cannot create a pcap file in {}: {e}", self.cfg.dir.display()));
                    self.counters.write_failed.fetch_add(1, Relaxed);
                    continue;
                }
            }
            let Some(f) = self.open.as_mut() else { continue };
            let start = f.len;
            let ts = m.ts_ns.max(0);
            f.buf.extend_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
            f.buf.extend_from_slice(&((ts % 1_000_000_000) as u32).to_le_bytes());
            f.buf.extend_from_slice(&m.cap_len.to_le_bytes());
            f.buf.extend_from_slice(&m.orig_len.to_le_bytes());
            f.buf.extend_from_slice(data);
            f.len += rec_len;
            f.packets += 1;
            f.buf_packets += 1;
            if let Some(uid) = m.uid {
                f.pending.push_back((uid, m.ts_ns, start, f.len));
            }
            if f.buf.len() >= CHUNK {
                self.flush(false);
            }
        }
    }

    fn open_file(&mut self, ts_ns: i64, linktype: u32, bucket: i64) -> io::Result<()> {
        let path = loop {
            let p = self.cfg.dir.join(file_name(ts_ns, self.seq));
            self.seq += 1;
            if !p.exists() {
                break p;
            }
        };
        // Both files appear under their names with their headers written, so
        // a reader (or a kill) never meets one without its header.
        // A failure (a full disk) leaves nothing behind.
        // Created exclusively in the directory opened without following a
        // link, renamed within it (see wirelog-safefs).
        let dir = Dir::open(&self.cfg.dir)?;
        let with_header = |dest: &std::path::Path, header: &[u8]| -> io::Result<File> {
            let name = dest.file_name().unwrap_or_default();
            let part = format!(".{}.part", name.to_string_lossy());
            dir.remove_file(&part)?;
            let mut f = dir.create_new(&part)?;
            match f.write_all(header).and_then(|()| dir.rename(&part, name)) {
                Ok(()) => Ok(f),
                Err(e) => {
                    let _ = dir.remove_file(&part);
                    Err(e)
                }
            }
        };
        let mut header = Vec::with_capacity(24);
        header.extend_from_slice(&PCAP_NS_MAGIC.to_le_bytes());
        header.extend_from_slice(&2u16.to_le_bytes());
        header.extend_from_slice(&4u16.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes()); // thiszone
        header.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        header.extend_from_slice(&self.cfg.snaplen.to_le_bytes());
        header.extend_from_slice(&linktype.to_le_bytes());
        // The index first: a pcap file is never without one.
        let index = with_header(&index_path(&path), &INDEX_HEADER)?;
        let file = with_header(&path, &header).inspect_err(|_| {
            let _ = dir.remove_file(index_path(&path).file_name().unwrap_or_default());
        })?;
        self.counters.files.fetch_add(1, Relaxed);
        if std::mem::take(&mut self.failing) {
            eprintln!("wirelog: pcap: writing again, in {}", path.display());
        }
        self.retry_at = None;
        self.open = Some(OpenFile {
            path: path.clone(),
            file,
            index,
            linktype,
            bucket,
            packets: 0,
            len: header.len() as u64,
            buf: Vec::with_capacity(CHUNK + (256 << 10)),
            buf_packets: 0,
            written: header.len() as u64,
            durable: 0,
            pending: VecDeque::new(),
            block: BlockBuilder::default(),
            index_len: INDEX_HEADER.len() as u64,
            indexed: header.len() as u64,
            unindexed: VecDeque::new(),
        });
        match enforce(&self.cfg.dir, &self.cfg.ring, Some(&path), self.cfg.file_size, self.newest_ns) {
            Ok(gone) => {
                self.counters.deleted.fetch_add(gone.len() as u64, Relaxed);
            }
            Err(e) => self.fail(format!("{}: cannot delete old pcap files: {e}", self.cfg.dir.display())),
        }
        Ok(())
    }

    /// Writes the buffer; the range written before it is waited for,
    /// dropped from the page cache and indexed (`all`: this one too).
    fn flush(&mut self, all: bool) {
        let Some(f) = self.open.as_mut() else { return };
        if !f.buf.is_empty() {
            let from = f.written;
            let (n, err) = write_some(&mut f.file, &f.buf);
            if let Some(e) = err {
                let what = format!(
                    "{}: {e}; it ends with its last whole record, the next file is tried in {} s",
                    f.path.display(),
                    RETRY_AFTER.as_secs()
                );
                if let Some(f) = self.open.take() {
                    self.end_cut(f, n);
                }
                self.failed(what);
                return;
            }
            self.counters.written.fetch_add(f.buf_packets, Relaxed);
            self.counters.written_bytes.fetch_add(f.buf.len() as u64, Relaxed);
            f.written += f.buf.len() as u64;
            f.unindexed.push_back((f.written, f.buf_packets));
            f.buf.clear();
            f.buf_packets = 0;
            start_writeback(&f.file, from, f.written - from);
            if f.durable < from {
                settle(&f.file, f.durable, from - f.durable);
                f.durable = from;
            }
        }
        if all && f.durable < f.written {
            settle(&f.file, f.durable, f.written - f.durable);
            f.durable = f.written;
        }
        if let Err(e) = index_durable(f) {
            let what = format!(
                "{}: {e}; its pcap file ends with the last indexed record, the next file is tried in {} s",
                index_path(&f.path).display(),
                RETRY_AFTER.as_secs()
            );
            if let Some(f) = self.open.take() {
                self.end_at_index(f);
            }
            self.failed(what);
        }
    }

    /// Ends a file whose buffer could be written only `n` bytes far: the
    /// whole records among them stay (a torn one is truncated away) and are
    /// indexed; the rest of the buffer is lost.
    fn end_cut(&mut self, mut f: OpenFile, n: usize) {
        let (keep, whole) = whole_records(&f.buf[..n]);
        if keep < n {
            if let Err(e) = f.file.set_len(f.written + keep as u64) {
                // The torn record stays; the index still never points at it.
                self.fail(format!("{}: cannot cut a torn record: {e}", f.path.display()));
            }
        }
        self.counters.written.fetch_add(whole, Relaxed);
        self.counters.written_bytes.fetch_add(keep as u64, Relaxed);
        self.counters.write_failed.fetch_add(f.buf_packets - whole, Relaxed);
        f.buf.clear();
        f.buf_packets = 0;
        f.written += keep as u64;
        f.unindexed.push_back((f.written, whole));
        settle(&f.file, f.durable, f.written.saturating_sub(f.durable));
        f.durable = f.written;
        match index_durable(&mut f) {
            Ok(()) => self.closed(f),
            Err(e) => {
                self.fail(format!("{}: {e}", index_path(&f.path).display()));
                self.end_at_index(f);
            }
        }
    }

    /// Ends a file whose index could not be appended: the index is cut back
    /// to its last whole block and the data to what that block covers; the
    /// packets past it are counted lost instead of written.
    fn end_at_index(&mut self, mut f: OpenFile) {
        let _ = f.index.set_len(f.index_len);
        match f.file.set_len(f.indexed) {
            Ok(()) => {
                let mut lost = f.buf_packets;
                let mut lost_bytes = 0;
                let mut start = f.indexed;
                for (end, packets) in f.unindexed.drain(..) {
                    lost += packets;
                    lost_bytes += end - start;
                    start = end;
                }
                self.counters.written.fetch_sub(lost - f.buf_packets, Relaxed);
                self.counters.written_bytes.fetch_sub(lost_bytes, Relaxed);
                self.counters.write_failed.fetch_add(lost, Relaxed);
            }
            Err(e) => {
                self.counters.write_failed.fetch_add(f.buf_packets, Relaxed);
                self.fail(format!("{}: cannot cut the records its index misses: {e}", f.path.display()));
            }
        }
        f.buf.clear();
        f.buf_packets = 0;
        f.pending.clear();
        self.closed(f);
    }

    /// Hands a file that is done with to the compactor.
    fn closed(&mut self, f: OpenFile) {
        if f.index.sync_data().is_ok() {
            self.compactor.closed(f.path);
        }
    }

    fn close(&mut self) {
        self.flush(true);
        if let Some(f) = self.open.take() {
            self.closed(f);
        }
    }
}

/// Writes as much of `buf` as goes: the bytes written, and the error that
/// stopped it short.
fn write_some(file: &mut File, buf: &[u8]) -> (usize, Option<io::Error>) {
    let mut n = 0;
    while n < buf.len() {
        match file.write(&buf[n..]) {
            Ok(0) => return (n, Some(io::ErrorKind::WriteZero.into())),
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (n, Some(e)),
        }
    }
    (n, None)
}

/// The bytes and count of the whole pcap records at the start of `buf`
/// (records as [`Writer::write_batch`] lays them out).
fn whole_records(buf: &[u8]) -> (usize, u64) {
    let (mut at, mut n) = (0usize, 0u64);
    while at + 16 <= buf.len() {
        let cap = u32::from_le_bytes(buf[at + 8..at + 12].try_into().unwrap_or_default()) as usize;
        if at + 16 + cap > buf.len() {
            break;
        }
        at += 16 + cap;
        n += 1;
    }
    (at, n)
}

/// Appends the index entries of the records now on disk. On an error the
/// file may end inside the block; the caller cuts it back to `index_len`.
fn index_durable(f: &mut OpenFile) -> io::Result<()> {
    while let Some(&(uid, ts, start, end)) = f.pending.front() {
        if end > f.durable {
            break;
        }
        f.block.add(uid, ts, start);
        f.pending.pop_front();
    }
    if !f.block.is_empty() {
        let bytes = f.block.encode(f.durable);
        f.index.write_all(&bytes)?;
        f.index_len += bytes.len() as u64;
    }
    // Records up to `durable` without a uid need no entry: covered too.
    f.indexed = f.durable;
    while f.unindexed.front().is_some_and(|&(end, _)| end <= f.indexed) {
        f.unindexed.pop_front();
    }
    Ok(())
}

/// Starts writeback of a range without waiting for it.
fn start_writeback(file: &File, from: u64, len: u64) {
    // SAFETY: a plain syscall on an open descriptor; errors only mean the
    // filesystem does not support it (the data is still written).
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), from as i64, len as i64, libc::SYNC_FILE_RANGE_WRITE);
    }
}

/// Waits until a range is on disk, then drops it from the page cache.
fn settle(file: &File, from: u64, len: u64) {
    if len == 0 {
        return;
    }
    let fd = file.as_raw_fd();
    // SAFETY: as above.
    unsafe {
        libc::sync_file_range(
            fd,
            from as i64,
            len as i64,
            libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER,
        );
        libc::posix_fadvise(fd, from as i64, len as i64, libc::POSIX_FADV_DONTNEED);
    }
}

/// Whether `path` is a pcap file with nanosecond timestamps.
pub(crate) fn is_ns_pcap(header: &[u8]) -> bool {
    header.len() >= 4 && u32::from_le_bytes(header[..4].try_into().unwrap()) == PCAP_NS_MAGIC
}


#[cfg(test)]
mod tests {
    use super::whole_records;

    #[test]
    fn whole_records_stop_before_a_torn_header_or_body() {
        let rec = |cap: u32| {
            let mut r = vec![0u8; 16];
            r[8..12].copy_from_slice(&cap.to_le_bytes());
            r.extend(std::iter::repeat_n(7u8, cap as usize));
            r
        };
        let mut buf = rec(10);
        buf.extend(rec(0));
        buf.extend(rec(100));
        let two = 26 + 16;
        assert_eq!(whole_records(&buf), (buf.len(), 3));
        assert_eq!(whole_records(&buf[..buf.len() - 1]), (two, 2));
        assert_eq!(whole_records(&buf[..two + 15]), (two, 2));
        assert_eq!(whole_records(&buf[..two]), (two, 2));
        assert_eq!(whole_records(&buf[..5]), (0, 0));
    }
}
