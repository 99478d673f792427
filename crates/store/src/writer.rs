//! The writer: records buffered as columns, flushed to one new file per
//! partition touched.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wirelog_record::{LossRecord,
    CommunityId, ConnRecord, ConnState, FlowRecord, History, Proc, Proto, TxRecord, Uid,
};

use crate::batch::Kind;
use crate::encode::{
    self, opt_i32, opt_i64, owner_values, req_bool, req_i32, req_i64, req_ip, strings, PqValues,
    RowSource,
};
use crate::error::StoreError;
use crate::flow_time;
use crate::fsutil::{create_dirs_durable, DirLock};
use crate::layout::{list_partitions, partition_path};
use crate::retention::{self, RetentionReport};
use crate::schema;
use crate::time::{hour_of, NS_PER_US};
use crate::tx::{self, TxBuf, TxRow};
use crate::tx_record::tx_kind;
use crate::loss::LossRows;
use crate::x509::CertRows;

/// How the store writes and what it keeps.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Delete hour partitions that ended more than this long ago.
    pub retain_age: Option<Duration>,
    /// Delete the oldest hour partitions while the store is larger than this.
    pub retain_bytes: Option<u64>,
    /// Flush a kind when this many rows are buffered.
    pub flush_rows: usize,
    /// Flush a kind when its buffer holds about this many bytes.
    pub flush_bytes: usize,
    /// As a sink ([`crate::StoreSink`]): write every buffer out at least
    /// this often (a crash loses at most this much).
    pub flush_interval: Duration,
    /// Rows per Parquet row group (at most).
    pub row_group_rows: usize,
    /// zstd level of the files' address columns; every other column is
    /// compressed at level 1 when this is higher (`pqfile::FAST_LEVEL`:
    /// about as small on those columns, in less time).
    pub zstd_level: i32,
    /// fsync files and directories (turn off only in tests and benchmarks).
    pub sync: bool,
    /// How often `flush` applies retention on its own (when a limit is set).
    pub retention_interval: Duration,
    /// Free space to leave on the file system: below it, retention (when a
    /// limit is set) deletes the oldest partitions, and otherwise writing
    /// pauses, rows staying buffered (0: no floor).
    pub min_free_bytes: u64,
    /// Where the run writing the store keeps packets (`--pcap-dir`, an
    /// absolute path): recorded in the store when it opens (see
    /// [`crate::pcap_dirs`]).
    pub pcap_dir: Option<std::path::PathBuf>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            retain_age: None,
            retain_bytes: None,
            flush_rows: 1 << 20,
            flush_bytes: 64 << 20,
            flush_interval: Duration::from_secs(300),
            row_group_rows: 1 << 20,
            // Level 3. Level 1 was as small on mysql_text's columns in
            // about 30% less time, but a conns/flows file of 40,000 client
            // addresses grew a third (the address column 121.4 kB -> 161.3
            // kB), past the +10% the store allows itself, and the 1 MB disk
            // of tests/full_disk.rs then had no room for the loss table.
            // The other columns are written at level 1 whatever this is
            // (`pqfile::FAST_LEVEL`).
            zstd_level: 3,
            sync: true,
            retention_interval: Duration::from_secs(60),
            min_free_bytes: 0,
            pcap_dir: None,
        }
    }
}

/// Counters of what a store wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteStats {
    pub files: u64,
    pub rows: u64,
    pub bytes: u64,
    /// Retention passes run by `flush` that failed, and the last failure
    /// (a failed retention pass never fails the flush: the rows are written).
    pub retention_errors: u64,
    pub last_retention_error: Option<String>,
    /// Rows dropped per kind (in [`Kind::ALL`] order): the disk stayed full
    /// while a kind's buffer was at its bound (twice the flush size), or at
    /// close.
    pub dropped: [u64; Kind::ALL.len()],
    /// Flushes that failed for lack of space (ENOSPC, EDQUOT) and were kept
    /// for a retry, and the last such error.
    pub space_failures: u64,
    pub last_space_error: Option<String>,
    /// Flushes put off because free space was below `min_free_bytes`.
    pub pauses: u64,
    /// Partitions (and their bytes) deleted to keep `min_free_bytes`.
    pub freed_partitions: u64,
    pub freed_bytes: u64,
}

impl WriteStats {
    /// All rows dropped.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }
}

// ---- buffers ----------------------------------------------------------------

#[derive(Default)]
pub(crate) struct FlowBuf {
    bucket: Vec<i64>,
    iface: Vec<u32>,
    ifaces: Vec<Arc<str>>,
    iface_ids: HashMap<Arc<str>, u32>,
    client: Vec<[u8; 16]>,
    server: Vec<[u8; 16]>,
    server_port: Vec<u16>,
    proto: Vec<u8>,
    bytes_out: Vec<u64>,
    pkts_out: Vec<u64>,
    bytes_in: Vec<u64>,
    pkts_in: Vec<u64>,
    first: Vec<i64>,
    last: Vec<i64>,
    conns: Vec<u32>,
}

const FLOW_ROW_BYTES: usize = 8 + 4 + 16 + 16 + 2 + 1 + 4 * 8 + 8 + 8 + 4;

impl FlowBuf {
    pub(crate) fn push(&mut self, r: &FlowRecord) {
        let id = match self.iface_ids.get(&r.iface) {
            Some(&id) => id,
            None => {
                let id = self.ifaces.len() as u32;
                self.ifaces.push(r.iface.clone());
                self.iface_ids.insert(r.iface.clone(), id);
                id
            }
        };
        self.bucket.push(r.bucket_ns);
        self.iface.push(id);
        self.client.push(r.client.0);
        self.server.push(r.server.0);
        self.server_port.push(r.server_port);
        self.proto.push(r.proto);
        self.bytes_out.push(r.bytes_out);
        self.pkts_out.push(r.pkts_out);
        self.bytes_in.push(r.bytes_in);
        self.pkts_in.push(r.pkts_in);
        self.first.push(r.first_ns);
        self.last.push(r.last_ns);
        self.conns.push(r.conns);
    }

    pub(crate) fn clear(&mut self) {
        let ifaces = std::mem::take(&mut self.ifaces);
        let ids = std::mem::take(&mut self.iface_ids);
        macro_rules! clear { ($($f:ident),*) => { $(self.$f.clear();)* } }
        clear!(
            bucket,
            iface,
            client,
            server,
            server_port,
            proto,
            bytes_out,
            pkts_out,
            bytes_in,
            pkts_in,
            first,
            last,
            conns
        );
        // Interface names stay interned while few (they repeat across flushes).
        if ifaces.len() <= 1024 {
            self.ifaces = ifaces;
            self.iface_ids = ids;
        }
    }
}

fn us(ns: i64) -> i64 {
    ns.div_euclid(NS_PER_US)
}

impl RowSource for FlowBuf {
    fn kind(&self) -> Kind {
        Kind::Flows
    }
    fn len(&self) -> usize {
        self.bucket.len()
    }
    fn time_ns(&self, row: usize) -> i64 {
        self.bucket[row]
    }
    fn sort_rows(&self, rows: &mut [u32]) {
        // Server side first: a bucket's rows of one service sit together,
        // so server, port and proto repeat in runs (see FLOWS_FILE).
        rows.sort_unstable_by(|&a, &b| {
            let (a, b) = (a as usize, b as usize);
            self.bucket[a]
                .cmp(&self.bucket[b])
                .then_with(|| self.server[a].cmp(&self.server[b]))
                .then_with(|| self.server_port[a].cmp(&self.server_port[b]))
                .then_with(|| self.proto[a].cmp(&self.proto[b]))
                .then_with(|| self.client[a].cmp(&self.client[b]))
                .then_with(|| {
                    self.ifaces[self.iface[a] as usize].cmp(&self.ifaces[self.iface[b] as usize])
                })
        });
    }
    fn values(&self, col: usize, rows: &[u32]) -> PqValues {
        match schema::FLOWS_FILE[col].name {
            "bucket" => req_i64(rows, |r| us(self.bucket[r])),
            "iface" => strings(rows, false, |r| {
                Some(self.ifaces[self.iface[r] as usize].as_bytes())
            }),
            "client" => req_ip(rows, |r| self.client[r]),
            "server" => req_ip(rows, |r| self.server[r]),
            "server_port" => req_i32(rows, |r| self.server_port[r] as i32),
            "proto" => req_i32(rows, |r| self.proto[r] as i32),
            "bytes_out" => req_i64(rows, |r| self.bytes_out[r] as i64),
            "pkts_out" => req_i64(rows, |r| self.pkts_out[r] as i64),
            "bytes_in" => req_i64(rows, |r| self.bytes_in[r] as i64),
            "pkts_in" => req_i64(rows, |r| self.pkts_in[r] as i64),
            flow_time::FIRST_OFFSET => req_i32(rows, |r| {
                flow_time::first_offset_s(self.bucket[r], self.first[r]) as i32
            }),
            flow_time::DURATION => req_i32(rows, |r| {
                flow_time::duration_s(self.bucket[r], self.first[r], self.last[r]) as i32
            }),
            "conns" => req_i32(rows, |r| self.conns[r] as i32),
            other => unreachable!("flow column {other}"),
        }
    }
}

#[derive(Default)]
pub(crate) struct ConnBuf {
    ts: Vec<i64>,
    uid: Vec<Uid>,
    orig_h: Vec<[u8; 16]>,
    orig_p: Vec<u16>,
    resp_h: Vec<[u8; 16]>,
    resp_p: Vec<u16>,
    proto: Vec<Proto>,
    service: Vec<Option<&'static str>>,
    duration: Vec<Option<i64>>,
    orig_bytes: Vec<Option<u64>>,
    resp_bytes: Vec<Option<u64>>,
    conn_state: Vec<ConnState>,
    local_orig: Vec<bool>,
    local_resp: Vec<bool>,
    missed_bytes: Vec<u64>,
    history: Vec<History>,
    orig_pkts: Vec<u64>,
    orig_ip_bytes: Vec<u64>,
    resp_pkts: Vec<u64>,
    resp_ip_bytes: Vec<u64>,
    ip_proto: Vec<u8>,
    community_id: Vec<CommunityId>,
    vlan: Vec<Option<u16>>,
    inner_vlan: Vec<Option<u16>>,
    empty_tcp_skipped: Vec<bool>,
    orig_proc: Vec<Proc>,
    resp_proc: Vec<Proc>,
}

const CONN_ROW_BYTES: usize = std::mem::size_of::<ConnRecord>();

impl ConnBuf {
    pub(crate) fn push(&mut self, r: &ConnRecord) {
        self.ts.push(r.ts_ns);
        self.uid.push(r.uid);
        self.orig_h.push(r.orig_h.0);
        self.orig_p.push(r.orig_p);
        self.resp_h.push(r.resp_h.0);
        self.resp_p.push(r.resp_p);
        self.proto.push(r.proto);
        self.service.push(r.service);
        self.duration.push(r.duration_ns);
        self.orig_bytes.push(r.orig_bytes);
        self.resp_bytes.push(r.resp_bytes);
        self.conn_state.push(r.conn_state);
        self.local_orig.push(r.local_orig);
        self.local_resp.push(r.local_resp);
        self.missed_bytes.push(r.missed_bytes);
        self.history.push(r.history);
        self.orig_pkts.push(r.orig_pkts);
        self.orig_ip_bytes.push(r.orig_ip_bytes);
        self.resp_pkts.push(r.resp_pkts);
        self.resp_ip_bytes.push(r.resp_ip_bytes);
        self.ip_proto.push(r.ip_proto);
        self.community_id.push(r.community_id);
        self.vlan.push(r.vlan);
        self.inner_vlan.push(r.inner_vlan);
        self.empty_tcp_skipped.push(r.empty_tcp_skipped);
        self.orig_proc.push(r.orig_proc.clone());
        self.resp_proc.push(r.resp_proc.clone());
    }

    pub(crate) fn clear(&mut self) {
        macro_rules! clear { ($($f:ident),*) => { $(self.$f.clear();)* } }
        clear!(
            ts,
            uid,
            orig_h,
            orig_p,
            resp_h,
            resp_p,
            proto,
            service,
            duration,
            orig_bytes,
            resp_bytes,
            conn_state,
            local_orig,
            local_resp,
            missed_bytes,
            history,
            orig_pkts,
            orig_ip_bytes,
            resp_pkts,
            resp_ip_bytes,
            ip_proto,
            community_id,
            vlan,
            inner_vlan,
            empty_tcp_skipped,
            orig_proc,
            resp_proc
        );
    }
}

impl RowSource for ConnBuf {
    fn kind(&self) -> Kind {
        Kind::Conns
    }
    fn len(&self) -> usize {
        self.ts.len()
    }
    fn time_ns(&self, row: usize) -> i64 {
        self.ts[row]
    }
    fn sort_rows(&self, rows: &mut [u32]) {
        // Stable: equal times keep their arrival order.
        rows.sort_by_key(|&r| self.ts[r as usize]);
    }
    fn values(&self, col: usize, rows: &[u32]) -> PqValues {
        match schema::CONNS[col].name {
            "ts" => req_i64(rows, |r| us(self.ts[r])),
            "uid" => strings(rows, false, |r| Some(self.uid[r].as_str().as_bytes())),
            "orig_h" => req_ip(rows, |r| self.orig_h[r]),
            "orig_p" => req_i32(rows, |r| self.orig_p[r] as i32),
            "resp_h" => req_ip(rows, |r| self.resp_h[r]),
            "resp_p" => req_i32(rows, |r| self.resp_p[r] as i32),
            "proto" => strings(rows, false, |r| Some(self.proto[r].as_str().as_bytes())),
            "service" => strings(rows, true, |r| self.service[r].map(str::as_bytes)),
            "duration" => opt_i64(rows, |r| self.duration[r].map(us)),
            "orig_bytes" => opt_i64(rows, |r| self.orig_bytes[r].map(|v| v as i64)),
            "resp_bytes" => opt_i64(rows, |r| self.resp_bytes[r].map(|v| v as i64)),
            "conn_state" => strings(rows, false, |r| {
                Some(self.conn_state[r].as_str().as_bytes())
            }),
            "local_orig" => req_bool(rows, |r| self.local_orig[r]),
            "local_resp" => req_bool(rows, |r| self.local_resp[r]),
            "missed_bytes" => req_i64(rows, |r| self.missed_bytes[r] as i64),
            "history" => strings(rows, false, |r| Some(self.history[r].as_bytes())),
            "orig_pkts" => req_i64(rows, |r| self.orig_pkts[r] as i64),
            "orig_ip_bytes" => req_i64(rows, |r| self.orig_ip_bytes[r] as i64),
            "resp_pkts" => req_i64(rows, |r| self.resp_pkts[r] as i64),
            "resp_ip_bytes" => req_i64(rows, |r| self.resp_ip_bytes[r] as i64),
            "ip_proto" => req_i32(rows, |r| self.ip_proto[r] as i32),
            "community_id" => strings(rows, false, |r| {
                Some(self.community_id[r].as_str().as_bytes())
            }),
            "vlan" => opt_i32(rows, |r| self.vlan[r].map(i32::from)),
            "inner_vlan" => opt_i32(rows, |r| self.inner_vlan[r].map(i32::from)),
            "empty_tcp_skipped" => req_bool(rows, |r| self.empty_tcp_skipped[r]),
            name if name.starts_with("orig_") || name.starts_with("resp_") => {
                owner_values(name, &self.orig_proc, &self.resp_proc, rows)
            }
            other => unreachable!("conn column {other}"),
        }
    }
}

// ---- the store ----------------------------------------------------------------

/// Encoding settings of one kind, shared by flushes and compaction.
#[derive(Clone)]
pub(crate) struct FileFormat {
    pub format: crate::pqfile::Format,
    pub sync: bool,
}

impl FileFormat {
    pub(crate) fn new(
        kind: Kind,
        zstd_level: i32,
        row_group_rows: usize,
        sync: bool,
    ) -> Result<Self, StoreError> {
        Ok(FileFormat {
            format: schema::file_format(kind, zstd_level, row_group_rows)?,
            sync,
        })
    }
}

/// Sorts all rows of `src` into file order and writes one file per hour
/// partition they fall in: all or nothing (compaction relies on it).
pub(crate) fn write_partitioned(
    dir: &Path,
    prefix: &str,
    src: &dyn RowSource,
    fmt: &FileFormat,
    kv: &[(String, String)],
) -> Result<Vec<encode::WrittenFile>, StoreError> {
    let mut rows: Vec<u32> = (0..src.len() as u32).collect();
    src.sort_rows(&mut rows);
    let mut out = Vec::new();
    match write_hours(dir, prefix, src, &rows, fmt, kv, None, None, &mut out) {
        Ok(()) => Ok(out.into_iter().map(|(_, f)| f).collect()),
        Err(e) => {
            // On a failure the files this call already published are removed
            // again, so a retry cannot write rows twice.
            for (_, f) in &out {
                let _ = crate::fsutil::remove_file_if_exists(&f.path);
            }
            Err(e)
        }
    }
}

/// The smallest file a flush short of space still tries: below it, the
/// rest of the rows wait for space (or are dropped and counted).
const MIN_PIECE_ROWS: usize = 1024;

/// Writes `rows` (sorted into file order) as one file per hour partition,
/// pushing each published file with its hour to `out` as it appears.
///
/// With `piece` (a flush), a file that does not fit (ENOSPC, EDQUOT) is
/// tried again as smaller files, halving down to [`MIN_PIECE_ROWS`] rows,
/// so what fits is written and only the rest waits: `piece` holds the rows
/// per file to try first (it grows back, doubling, as files fit). Without
/// it (compaction), one file per hour.
///
/// `staged`: `dir` is a run's staging directory, whose directories are
/// fsynced once each before its commit record (`staging::commit`), none as
/// they are made or given a file: until that record nothing of the run
/// counts, and a run without it is removed whole. Each directory whose
/// entries this changes (made in, or given a file) is added to the list,
/// once, so the commit fsyncs those instead of walking the run's tree.
#[allow(clippy::too_many_arguments)]
fn write_hours(
    dir: &Path,
    prefix: &str,
    src: &dyn RowSource,
    rows: &[u32],
    fmt: &FileFormat,
    kv: &[(String, String)],
    mut piece: Option<&mut usize>,
    mut staged: Option<&mut Vec<PathBuf>>,
    out: &mut Vec<(std::ops::Range<usize>, encode::WrittenFile)>,
) -> Result<(), StoreError> {
    let n = rows.len();
    let mut start = 0;
    while start < n {
        let hour = hour_of(src.time_ns(rows[start] as usize));
        let end = if src.sorted_by_time() {
            // Times never fall along the rows: the hour's end found by
            // bisection, not by a look at each row.
            start + rows[start..].partition_point(|&r| hour_of(src.time_ns(r as usize)) == hour)
        } else {
            let mut end = start + 1;
            while end < n && hour_of(src.time_ns(rows[end] as usize)) == hour {
                end += 1;
            }
            end
        };
        let pdir = partition_path(dir, src.kind(), hour);
        match staged.as_deref_mut() {
            Some(dirs) => {
                crate::fsutil::create_below_unsynced(dir, &pdir, dirs)?;
                // The hour's directory is given files (and, for a file
                // that did not fit, a temporary made and removed).
                if !dirs.contains(&pdir) {
                    dirs.push(pdir.clone());
                }
            }
            None => {
                crate::fsutil::create_below(dir, &pdir)?;
            }
        }
        let hour_end = end;
        while start < hour_end {
            let end = match piece.as_deref() {
                Some(&p) => hour_end.min(start.saturating_add(p.max(MIN_PIECE_ROWS))),
                None => hour_end,
            };
            let written = encode::write_file(&pdir, prefix, src, &rows[start..end], &fmt.format, kv, fmt.sync, staged.is_none());
            match (written, piece.as_deref_mut()) {
                (Ok(f), p) => {
                    out.push((start..end, f));
                    start = end;
                    if let Some(p) = p {
                        *p = p.saturating_mul(2);
                    }
                }
                (Err(e), Some(p)) if e.is_out_of_space() && end - start > MIN_PIECE_ROWS => {
                    *p = ((end - start) / 2).max(MIN_PIECE_ROWS);
                }
                (Err(e), p) => {
                    if let Some(p) = p {
                        *p = MIN_PIECE_ROWS;
                    }
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// The writer's lock in the store directory (flock(2)).
pub(crate) const LOCK_FILE: &str = ".writer.lock";

/// How long a kind whose flush found no space waits before trying again
/// (rows keep being buffered, up to twice the flush size, meanwhile).
const SPACE_RETRY: Duration = Duration::from_secs(1);

/// The writing side of the store. One `Store` per data directory at a time
/// (an flock on `<dir>/.writer.lock` enforces it); any number of readers.
pub struct Store {
    dir: PathBuf,
    opts: StoreOptions,
    flows: FlowBuf,
    conns: ConnBuf,
    flow_fmt: FileFormat,
    conn_fmt: FileFormat,
    /// Certificates of TLS transactions, deduplicated (see [`crate::x509`]).
    x509: CertRows,
    x509_fmt: FileFormat,
    /// The loss table's rows (see [`crate::loss`]).
    loss: LossRows,
    loss_fmt: FileFormat,
    /// The latest minute of the loss rows given: the store's own row of
    /// what it drops at the end goes there.
    loss_minute: Option<i64>,
    /// One buffer and format per transaction kind, in `Kind::TX` order.
    tx: Vec<(TxBuf, FileFormat)>,
    stats: WriteStats,
    last_retention: Option<Instant>,
    /// Per kind ([`Kind::ALL`] order): rows a half-failed flush already
    /// published (by index in the buffer), so a retry writes each row once
    /// and never removes a complete file.
    published: Vec<Vec<bool>>,
    /// Per kind ([`Kind::ALL`] order), while its rows wait for space: no
    /// flush of that kind is tried before this. One deadline per kind, so
    /// one kind's successful write (the loss table's, into the floor's
    /// room) does not end another kind's wait.
    retry_at: Vec<Option<Instant>>,
    /// Rows per file a flush tries first: all of an hour's until a file
    /// does not fit, then fewer (see `write_hours`).
    piece_rows: usize,
    /// Partitions this store wrote to: the free-space floor never deletes
    /// them (it makes room for new rows, not by removing them).
    written_parts: std::collections::HashSet<PathBuf>,
    /// A `read`'s run directory, where its files wait for the commit
    /// (see [`crate::staging`]); `None`: files go straight into the store.
    staging: Option<PathBuf>,
    /// The staged run's directories whose entries its flushes changed, each
    /// once: what its commit fsyncs before the commit record.
    staged_dirs: Vec<PathBuf>,
    /// What the opening found of earlier runs (finished or removed).
    recovered: crate::staging::Recovered,
    /// A capture's records in memory (`capture --listen`): each flushed
    /// file names the records it holds, and a finished flush lets them go
    /// from memory (see [`crate::live`]).
    live: Option<Arc<crate::live::LiveRecords>>,
    /// Per kind ([`Kind::ALL`] order): records given so far, buffered,
    /// written or dropped (the live records number them the same way).
    appended: [u64; Kind::ALL.len()],
    _lock: DirLock,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating it if needed) the data directory for writing, and
    /// cleans up what a crash left: temporary files and partitions that were
    /// being deleted, and small files a finished compaction had replaced.
    pub fn open(dir: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        if opts.flush_rows == 0 || opts.row_group_rows == 0 || opts.flush_bytes == 0 {
            return Err(StoreError::Invalid(
                "flush_rows, flush_bytes and row_group_rows must be > 0".into(),
            ));
        }
        if dir.exists() && !dir.is_dir() {
            return Err(StoreError::io(
                dir,
                "use as data directory",
                std::io::Error::other("not a directory"),
            ));
        }
        create_dirs_durable(dir)?;
        for kind in [Kind::Flows, Kind::Conns] {
            crate::fsutil::create_below(dir, &dir.join(kind.as_str()))?;
        }
        let lock_path = dir.join(LOCK_FILE);
        let lock = DirLock::try_lock(&lock_path)?.ok_or_else(|| {
            StoreError::io(
                dir,
                "open for writing",
                std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    "another wirelog process is writing to this data directory",
                ),
            )
        })?;
        crate::compact::recover(dir)?;
        // The lock is ours: a run left in staging is a dead process's.
        let recovered = crate::staging::recover(dir)?;
        if opts.retain_age.is_some() || opts.retain_bytes.is_some() {
            retention::record_limits(dir, opts.retain_age, opts.retain_bytes)?;
        }
        let tx = Kind::TX
            .iter()
            .map(|&k| {
                let fmt = FileFormat::new(k, opts.zstd_level, opts.row_group_rows, opts.sync)?;
                Ok((TxBuf::new(k), fmt))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(Store {
            tx,
            dir: dir.to_path_buf(),
            flow_fmt: FileFormat::new(
                Kind::Flows,
                opts.zstd_level,
                opts.row_group_rows,
                opts.sync,
            )?,
            conn_fmt: FileFormat::new(
                Kind::Conns,
                opts.zstd_level,
                opts.row_group_rows,
                opts.sync,
            )?,
            x509: CertRows::default(),
            x509_fmt: FileFormat::new(Kind::X509, opts.zstd_level, opts.row_group_rows, opts.sync)?,
            loss: LossRows::default(),
            loss_minute: None,
            loss_fmt: FileFormat::new(Kind::Loss, opts.zstd_level, opts.row_group_rows, opts.sync)?,
            opts,
            flows: FlowBuf::default(),
            conns: ConnBuf::default(),
            stats: WriteStats::default(),
            last_retention: None,
            published: vec![Vec::new(); Kind::ALL.len()],
            retry_at: vec![None; Kind::ALL.len()],
            piece_rows: usize::MAX,
            written_parts: Default::default(),
            staging: None,
            staged_dirs: Vec::new(),
            recovered,
            live: None,
            appended: [0; Kind::ALL.len()],
            _lock: lock,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What opening the store did with the runs earlier processes left in
    /// staging (finished the committed ones, removed the others).
    pub fn recovered(&self) -> &crate::staging::Recovered {
        &self.recovered
    }

    /// Writes this store's files under the run `tag` in staging, out of
    /// sight until [`Store::commit`] (a `read`: see [`crate::staging`]).
    /// Only before anything is written.
    pub fn stage(&mut self, tag: &str) -> Result<(), StoreError> {
        if !crate::staging::valid_tag(tag) {
            return Err(StoreError::Invalid(format!("run name {tag:?}: letters, digits, '-' and '_' only")));
        }
        if self.stats.files > 0 || Kind::ALL.iter().any(|&k| self.unwritten(k) > 0) {
            return Err(StoreError::Invalid("a run is staged before anything is written".into()));
        }
        let run = crate::staging::run_dir(&self.dir, tag);
        if run.exists() {
            std::fs::remove_dir_all(&run).map_err(|e| StoreError::io(&run, "remove", e))?;
        }
        // Walked from the store's root: a planted `.staging` link is refused.
        crate::fsutil::create_below(&self.dir, &run)?;
        self.staging = Some(run);
        Ok(())
    }

    /// Hands the store a running capture's live records (before anything
    /// is written): every flush then says which records it holds, so a
    /// query reads each record once, from a file or from memory.
    pub fn set_live(&mut self, live: Arc<crate::live::LiveRecords>) {
        self.live = Some(live);
    }

    pub fn options(&self) -> &StoreOptions {
        &self.opts
    }

    /// What this store has written so far.
    pub fn stats(&self) -> &WriteStats {
        &self.stats
    }

    /// Rows buffered and not yet flushed (flows, conns).
    pub fn buffered(&self) -> (usize, usize) {
        (self.flows.len(), self.conns.len())
    }

    /// Transaction rows of `kind` buffered and not yet flushed.
    pub fn buffered_tx(&self, kind: Kind) -> usize {
        tx_slot(kind).map_or(0, |i| self.tx[i].0.len())
    }

    fn flow_limit(&self) -> usize {
        self.opts
            .flush_rows
            .min((self.opts.flush_bytes / FLOW_ROW_BYTES).max(1))
    }

    fn conn_limit(&self) -> usize {
        self.opts
            .flush_rows
            .min((self.opts.flush_bytes / CONN_ROW_BYTES).max(1))
    }

    /// Buffers connections; writes them out when the buffer is full.
    pub fn append_conns(&mut self, recs: &[ConnRecord]) -> Result<(), StoreError> {
        let limit = self.conn_limit();
        for r in recs {
            // Counted one by one: a flush inside the loop marks its files
            // with the records given up to it.
            self.appended[kind_slot(Kind::Conns)] += 1;
            if self.conns.len() >= 2 * limit {
                self.stats.dropped[kind_slot(Kind::Conns)] += 1;
                continue;
            }
            self.conns.push(r);
            if self.conns.len() >= limit {
                self.flush_full(Kind::Conns)?;
            }
        }
        Ok(())
    }

    /// Buffers transactions of `kind` (one of [`Kind::TX`]); writes them out
    /// when the buffer is full. Every row is checked first: when one does not
    /// fit the kind (a wrong number or type of `extra` cells, see
    /// [`crate::schema::tx_columns`]) the call fails with
    /// [`StoreError::BadRow`] naming the kind and the column, and buffers
    /// none of `rows`.
    pub fn append_tx(&mut self, kind: Kind, rows: &[TxRow]) -> Result<(), StoreError> {
        for r in rows {
            tx::check(kind, r)?;
        }
        let Some(i) = tx_slot(kind) else {
            return Ok(()); // no rows (check rejects every row of other kinds)
        };
        let limit = self.opts.flush_rows;
        for r in rows {
            self.appended[kind_slot(kind)] += 1;
            let buf = &self.tx[i].0;
            if buf.len() >= 2 * limit || buf.bytes >= 2 * self.opts.flush_bytes {
                self.stats.dropped[kind_slot(kind)] += 1;
                continue;
            }
            self.tx[i].0.push(r);
            let buf = &self.tx[i].0;
            if buf.len() >= limit || buf.bytes >= self.opts.flush_bytes {
                self.flush_full(kind)?;
            }
        }
        Ok(())
    }

    /// Buffers transaction records, each in its protocol's kind, as
    /// [`Store::append_tx`] would buffer their [`TxRow::from_record`] rows
    /// (the rows are not built: their text is copied once, into the buffer);
    /// the certificates of TLS records go to [`Kind::X509`], one row per
    /// certificate, role and hour in each flush (see [`crate::x509`]).
    pub fn append_tx_records(&mut self, recs: &[TxRecord]) -> Result<(), StoreError> {
        let limit = self.opts.flush_rows;
        for r in recs {
            if r.protocol == wirelog_record::Protocol::Tls {
                self.append_certs(r)?;
            }
            let kind = tx_kind(r.protocol);
            self.appended[kind_slot(kind)] += 1;
            let i = tx_slot(kind).expect("every protocol has a transaction kind");
            let buf = &self.tx[i].0;
            if buf.len() >= 2 * limit || buf.bytes >= 2 * self.opts.flush_bytes {
                self.stats.dropped[kind_slot(kind)] += 1;
                continue;
            }
            self.tx[i].0.push_record(r);
            let buf = &self.tx[i].0;
            if buf.len() >= limit || buf.bytes >= self.opts.flush_bytes {
                self.flush_full(kind)?;
            }
        }
        Ok(())
    }

    /// Buffers the certificates of a TLS record.
    fn append_certs(&mut self, r: &TxRecord) -> Result<(), StoreError> {
        let limit = self.opts.flush_rows;
        if self.x509.len() >= 2 * limit || self.x509.bytes() >= 2 * self.opts.flush_bytes {
            self.stats.dropped[kind_slot(Kind::X509)] += 1;
            return Ok(());
        }
        self.x509.push_record(r);
        if self.x509.len() >= limit || self.x509.bytes() >= self.opts.flush_bytes {
            self.flush_full(Kind::X509)?;
        }
        Ok(())
    }

    /// Buffers loss rows (a few per minute and source: written at each
    /// flush, never held back for a free-space floor, see `flush_or_wait`).
    pub fn append_losses(&mut self, recs: &[LossRecord]) -> Result<(), StoreError> {
        let limit = self.opts.flush_rows;
        for r in recs {
            self.appended[kind_slot(Kind::Loss)] += 1;
            self.loss_minute = Some(self.loss_minute.map_or(r.ts_ns, |m| m.max(r.ts_ns)));
            if self.loss.rows.len() >= 2 * limit {
                self.stats.dropped[kind_slot(Kind::Loss)] += 1;
                continue;
            }
            self.loss.rows.push(r.clone());
            if self.loss.rows.len() >= limit {
                self.flush_full(Kind::Loss)?;
            }
        }
        Ok(())
    }

    /// Buffers flows; writes them out when the buffer is full.
    pub fn append_flows(&mut self, recs: &[FlowRecord]) -> Result<(), StoreError> {
        let limit = self.flow_limit();
        for r in recs {
            self.appended[kind_slot(Kind::Flows)] += 1;
            if self.flows.len() >= 2 * limit {
                self.stats.dropped[kind_slot(Kind::Flows)] += 1;
                continue;
            }
            self.flows.push(r);
            if self.flows.len() >= limit {
                self.flush_full(Kind::Flows)?;
            }
        }
        Ok(())
    }

    /// A full buffer: flushed, unless the disk is full, in which case the
    /// rows stay buffered (up to the bound) until the next try.
    fn flush_full(&mut self, kind: Kind) -> Result<(), StoreError> {
        if self.retry_at[kind_slot(kind)].is_some_and(|t| Instant::now() < t) {
            return Ok(());
        }
        self.flush_or_wait(kind)
    }

    /// Flushes `kind`; lack of space is not an error but a wait (counted).
    fn flush_or_wait(&mut self, kind: Kind) -> Result<(), StoreError> {
        if self.unwritten(kind) == 0 {
            self.retry_at[kind_slot(kind)] = None;
            if self.published[kind_slot(kind)].is_empty() {
                // Nothing buffered: what was given is written or dropped.
                if let Some(l) = self.live.as_ref().filter(|l| l.covers(kind)) {
                    l.committed(kind, self.appended[kind_slot(kind)]);
                }
            }
            return Ok(());
        }
        // The loss table is written into the room the floor keeps: a few
        // KB an hour that say what the floor made the store drop.
        let slot = kind_slot(kind);
        if kind != Kind::Loss && !self.make_room() {
            self.stats.pauses += 1;
            self.retry_at[slot] = Some(Instant::now() + SPACE_RETRY);
            return Ok(());
        }
        match self.flush_kind(kind) {
            Ok(()) => {
                self.retry_at[slot] = None;
                Ok(())
            }
            Err(e) if e.is_out_of_space() => {
                self.stats.space_failures += 1;
                self.stats.last_space_error = Some(e.to_string());
                self.retry_at[slot] = Some(Instant::now() + SPACE_RETRY);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Keeps `min_free_bytes` free: when below it, deletes the oldest
    /// partitions if a retention limit is set (the operator allowed the
    /// store to delete data); false when there is still too little space.
    fn make_room(&mut self) -> bool {
        let floor = self.opts.min_free_bytes;
        if floor == 0 {
            return true;
        }
        let free = || crate::fsutil::disk_space(&self.dir).map(|d| d.available).unwrap_or(u64::MAX);
        if free() >= floor {
            return true;
        }
        if self.opts.retain_age.is_none() && self.opts.retain_bytes.is_none() {
            return false;
        }
        let Ok(mut parts) = Kind::ALL
            .iter()
            .map(|&k| list_partitions(&self.dir, k))
            .collect::<Result<Vec<_>, _>>()
            .map(|v| v.into_iter().flatten().collect::<Vec<_>>())
        else {
            return false;
        };
        parts.sort_by_key(|p| (p.hour, Kind::ALL.iter().position(|&k| k == p.kind)));
        for p in parts.iter().filter(|p| !self.written_parts.contains(&p.path)) {
            if free() >= floor {
                break;
            }
            let bytes = retention::dir_bytes(&p.path).unwrap_or(0);
            match retention::delete_partition(p) {
                Ok(()) => {
                    self.stats.freed_partitions += 1;
                    self.stats.freed_bytes += bytes;
                }
                Err(e) => {
                    self.stats.retention_errors += 1;
                    self.stats.last_retention_error = Some(e.to_string());
                    break;
                }
            }
        }
        free() >= floor
    }

    fn flush_kind(&mut self, kind: Kind) -> Result<(), StoreError> {
        let slot = kind_slot(kind);
        let (src, fmt): (&dyn RowSource, &FileFormat) = match kind {
            Kind::Flows => (&self.flows, &self.flow_fmt),
            Kind::Conns => (&self.conns, &self.conn_fmt),
            Kind::X509 => (&self.x509, &self.x509_fmt),
            Kind::Loss => (&self.loss, &self.loss_fmt),
            _ => {
                let (b, f) = &self.tx[tx_slot(kind).expect("a transaction kind")];
                (b, f)
            }
        };
        // Every record given so far is in this flush's files, in earlier
        // files or dropped: the files say so, for the live records.
        let upto = self.appended[slot];
        let live = self.live.as_ref().filter(|l| l.covers(kind));
        if src.len() == 0 {
            if let Some(l) = live {
                l.committed(kind, upto);
            }
            return Ok(());
        }
        let kv: Vec<(String, String)> = live
            .map(|l| (crate::reader::LIVE_KEY.to_string(), format!("{}:{upto}", l.run())))
            .into_iter()
            .collect();
        let done = &self.published[slot];
        let mut rows: Vec<u32> = if done.is_empty() {
            // No file of this buffer published yet (every flush but the
            // retry of a failed one): every row, none looked up (the filter
            // below grew its vector from nothing, ~60 instructions a row).
            (0..src.len() as u32).collect()
        } else {
            (0..src.len() as u32)
                .filter(|&r| !done.get(r as usize).copied().unwrap_or(false))
                .collect()
        };
        src.sort_rows(&mut rows);
        let mut out = Vec::new();
        let root = self.staging.as_deref().unwrap_or(&self.dir);
        let staged = self.staging.is_some().then_some(&mut self.staged_dirs);
        let result = write_hours(root, "part", src, &rows, fmt, &kv, Some(&mut self.piece_rows), staged, &mut out);
        for (_, f) in &out {
            if let Some(dir) = f.path.parent() {
                // The partition it is (or, staged, will be) in.
                let rel = dir.strip_prefix(root).unwrap_or(dir);
                self.written_parts.insert(self.dir.join(rel));
            }
            self.stats.files += 1;
            self.stats.rows += f.rows;
            self.stats.bytes += f.bytes;
        }
        if let Err(e) = result {
            // The files already published are complete and stay; their rows
            // are marked so a retry writes only the rest.
            let len = src.len();
            let done = &mut self.published[slot];
            done.resize(len, false);
            for (range, _) in &out {
                for &r in &rows[range.clone()] {
                    done[r as usize] = true;
                }
            }
            if let Some(i) = tx_slot(kind) {
                // Marked by their places: a late row no longer moves among them.
                self.tx[i].0.pin_rows();
            }
            return Err(e);
        }
        // Everything fitted: the next flush tries whole hours again.
        self.piece_rows = usize::MAX;
        self.published[slot].clear();
        if let Some(l) = self.live.as_ref().filter(|l| l.covers(kind)) {
            l.committed(kind, upto);
        }
        match kind {
            Kind::Flows => self.flows.clear(),
            Kind::Conns => self.conns.clear(),
            Kind::X509 => self.x509.clear(),
            Kind::Loss => self.loss.rows.clear(),
            _ => self.tx[tx_slot(kind).expect("a transaction kind")]
                .0
                .clear(),
        }
        Ok(())
    }

    /// Rows of `kind` buffered and not in any file yet.
    fn unwritten(&self, kind: Kind) -> usize {
        let len = match kind {
            Kind::Flows => self.flows.len(),
            Kind::Conns => self.conns.len(),
            Kind::X509 => self.x509.len(),
            Kind::Loss => self.loss.rows.len(),
            _ => self.buffered_tx(kind),
        };
        len - self.published[kind_slot(kind)].iter().filter(|d| **d).count()
    }

    /// Tries now to write what waits for space (the output calls it every
    /// second or so while [`Store::waiting`]).
    pub fn retry(&mut self) -> Result<(), StoreError> {
        let now = Instant::now();
        for kind in Kind::ALL {
            let slot = kind_slot(kind);
            let waited = match self.retry_at[slot] {
                Some(t) if now < t => continue,
                Some(_) => true,
                None => false,
            };
            let full = match kind {
                Kind::Flows => self.flows.len() >= self.flow_limit(),
                Kind::Conns => self.conns.len() >= self.conn_limit(),
                Kind::X509 => self.x509.len() >= self.opts.flush_rows,
                Kind::Loss => self.loss.rows.len() >= self.opts.flush_rows,
                _ => self.buffered_tx(kind) >= self.opts.flush_rows,
            };
            if waited || full || !self.published[slot].is_empty() {
                self.flush_or_wait(kind)?;
                // Still no space: the kinds after it would find none either.
                if self.retry_at[slot].is_some() {
                    break;
                }
            }
        }
        Ok(())
    }

    /// True while rows wait for space (a flush failed or was paused).
    pub fn waiting(&self) -> bool {
        self.retry_at.iter().any(Option::is_some)
    }

    /// Writes every buffered row to new files (one per kind and hour
    /// partition), durably; then applies retention if it is due.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        self.retry_at.fill(None);
        for kind in Kind::ALL {
            self.flush_or_wait(kind)?;
        }
        if self.opts.retain_age.is_some() || self.opts.retain_bytes.is_some() {
            let due = self
                .last_retention
                .is_none_or(|t| t.elapsed() >= self.opts.retention_interval);
            if due {
                if let Err(e) = self.enforce_retention(retention::now_ns()) {
                    self.stats.retention_errors += 1;
                    self.stats.last_retention_error = Some(e.to_string());
                }
            }
        }
        Ok(())
    }

    /// Flushes every buffered row; rows that still find no space are
    /// dropped and counted in [`WriteStats::dropped`]. The store stays open
    /// (and staged files staged) for [`Store::commit`].
    pub fn finish(&mut self) -> Result<WriteStats, StoreError> {
        self.flush()?;
        // What stays unwritten now is dropped: the loss table says so
        // first (the output stage's rows said what was dropped before).
        let lost: u64 = Kind::ALL.iter().filter(|&&k| k != Kind::Loss).map(|&k| self.unwritten(k) as u64).sum();
        if lost > 0 {
            let mut counts = wirelog_record::LossCounts::default();
            counts.set(wirelog_record::LossCount::RecordsDropped, lost);
            let ts_ns = self.loss_minute.unwrap_or_else(|| wirelog_record::loss::minute_of(retention::now_ns()));
            let row = LossRecord { ts_ns, source: wirelog_record::loss::SINKS_SOURCE.to_string(), protocol: None, counts };
            self.append_losses(&[row])?;
            self.flush_or_wait(Kind::Loss)?;
        }
        for kind in Kind::ALL {
            let n = self.unwritten(kind);
            self.stats.dropped[kind_slot(kind)] += n as u64;
            self.published[kind_slot(kind)].clear();
            match kind {
                Kind::Flows => self.flows.clear(),
                Kind::Conns => self.conns.clear(),
                Kind::X509 => self.x509.clear(),
                Kind::Loss => self.loss.rows.clear(),
                _ => self.tx[tx_slot(kind).expect("a transaction kind")].0.clear(),
            }
        }
        Ok(self.stats.clone())
    }

    /// Ends the run after [`Store::finish`]: a staged run's files go into
    /// the store, and the captures read are recorded in the store's list of
    /// ingests (see [`crate::ingest`]) when `ingests` is given and every
    /// row reached a file (a capture whose rows were dropped is not whole
    /// in the store, and recording it would refuse the read that could
    /// complete it). Returns whether it recorded them.
    pub fn commit(&mut self, ingests: Option<&[crate::ingest::Ingest]>) -> Result<bool, StoreError> {
        self.finish()?;
        let record = ingests.filter(|_| self.stats.dropped_total() == 0).unwrap_or(&[]);
        let recorded = match self.staging.take() {
            Some(run) => {
                let dirs = std::mem::take(&mut self.staged_dirs);
                crate::staging::commit(&self.dir, &run, &dirs, record)?.1
            }
            None => {
                crate::ingest::append_ingests(&self.dir, record)?;
                true
            }
        };
        Ok(recorded && ingests.is_some() && self.stats.dropped_total() == 0)
    }

    /// Flushes and releases the directory (a staged run goes into the
    /// store, recording no capture). Rows that still find no space are
    /// dropped and counted in [`WriteStats::dropped`].
    pub fn close(mut self) -> Result<WriteStats, StoreError> {
        self.commit(None)?;
        Ok(self.stats.clone())
    }

    /// Deletes whole hour partitions that ended before `now_ns - retain_age`,
    /// then the oldest partitions while the store is larger than `retain_bytes`.
    pub fn enforce_retention(&mut self, now_ns: i64) -> Result<RetentionReport, StoreError> {
        self.last_retention = Some(Instant::now());
        retention::enforce_retention(
            &self.dir,
            now_ns,
            self.opts.retain_age,
            self.opts.retain_bytes,
        )
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // Best effort for a store dropped without close (errors cannot be
        // reported here: call close() to see them).
        if self.flows.len() > 0 {
            let _ = self.flush_kind(Kind::Flows);
        }
        if self.conns.len() > 0 {
            let _ = self.flush_kind(Kind::Conns);
        }
        if !self.x509.is_empty() {
            let _ = self.flush_kind(Kind::X509);
        }
        if !self.loss.rows.is_empty() {
            let _ = self.flush_kind(Kind::Loss);
        }
        for kind in Kind::TX {
            if self.buffered_tx(kind) > 0 {
                let _ = self.flush_kind(kind);
            }
        }
    }
}

/// Where a kind's counters sit in per-kind arrays ([`Kind::ALL`] order).
fn kind_slot(kind: Kind) -> usize {
    Kind::ALL.iter().position(|&k| k == kind).expect("every kind is in Kind::ALL")
}

/// Where a transaction kind's buffer sits in `Store::tx`.
fn tx_slot(kind: Kind) -> Option<usize> {
    Kind::TX.iter().position(|&k| k == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every directory of `dir`'s tree, `dir` included.
    fn tree_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
        out.push(dir.to_path_buf());
        for (_, path) in crate::fsutil::list_dir(dir).unwrap() {
            if path.is_dir() {
                tree_dirs(&path, out);
            }
        }
    }

    #[test]
    fn a_staged_run_hands_its_commit_every_directory_of_its_tree_once() {
        const HOUR_NS: i64 = 3_600_000_000_000;
        let d = std::env::temp_dir().join(format!("wirelog-writer-staged-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let mut store = Store::open(&d, StoreOptions::default()).unwrap();
        store.stage("run-1").unwrap();
        let mut uids = wirelog_record::UidGenerator::new(1);
        let t0 = 1_700_000_000_000_000_000;
        // Two flushes of two kinds, each over two hours, the second's first
        // hour the first's last: directories made, and given files again.
        for round in 0..2 {
            let start = t0 + round * HOUR_NS;
            let conns: Vec<_> = (0..40).map(|i| crate::synth::conn(i, start, HOUR_NS / 20, &mut uids)).collect();
            store.append_conns(&conns).unwrap();
            store.flush().unwrap();
        }
        let flows = crate::synth::FlowGen::new(3, 8, t0 + 5 * HOUR_NS).bucket(50);
        store.append_flows(&flows).unwrap();
        store.flush().unwrap();
        let run = store.staging.clone().unwrap();
        let mut tree = Vec::new();
        tree_dirs(&run, &mut tree);
        tree.sort();
        let mut listed = store.staged_dirs.clone();
        let n = listed.len();
        listed.sort();
        listed.dedup();
        assert_eq!(listed.len(), n, "each directory listed once");
        assert_eq!(listed, tree, "the list is the run's tree");
        let is_hour = |p: &&PathBuf| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("hour="));
        let hours = tree.iter().filter(is_hour).count();
        assert!(hours >= 4, "three hours of conns and one of flows at least, got {hours}: {tree:?}");
        let ingest = crate::ingest::tests::ingest("9-ff");
        assert!(store.commit(Some(std::slice::from_ref(&ingest))).unwrap(), "committed, its capture recorded");
        assert!(!run.exists(), "the run went into the store");
        assert!(store.staged_dirs.is_empty());
        assert_eq!(crate::read_ingests(&d).unwrap(), vec![ingest]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
