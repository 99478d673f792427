//! Compaction: the small files of a closed hour partition merged into one.
//!
//! The scheme, chosen so that readers never see a row twice or miss one:
//!
//! 1. The merged rows are written to `.compact-<nanos>-<seq>.tmp`, fsynced,
//!    renamed to `compact-<nanos>-<seq>.parquet`, and the directory fsynced.
//!    The merged file's footer lists the names of the files it replaces
//!    (key `wirelog.replaces`, one name a line).
//! 2. The replaced files are then deleted.
//!
//! Between 1 and 2 both exist: wirelog's readers skip every file that a file
//! of the same partition lists as replaced, and re-list a partition when a
//! new merged file appeared while they were opening it. A crash before the
//! rename leaves only a hidden temporary (removed by `Store::open`); after
//! it, the originals are deleted by `Store::open` or the next compaction.
//! Tools that glob the directory (DuckDB, ClickHouse, pandas) may count the
//! rows of a partition twice during the moment between 1 and 2.
//!
//! One compaction at a time per data directory (`<dir>/.compact.lock`).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use parquet::file::reader::FileReader;

use crate::batch::{Batch, Column, Kind};
use crate::encode::{
    opt_i32, opt_i64, req_bool, req_i32, req_i64, req_ip, strings, PqValues, RowSource,
};
use crate::error::StoreError;
use crate::flow_time;
use crate::fsutil::{is_data_file, list_dir, remove_file_if_exists, sync_dir, DirLock};
use crate::layout::{kind_dir, list_partitions, parse_partition_path};
use crate::reader::{read_all, snapshot, REPLACES_KEY};
use crate::retention::now_ns;
use crate::schema::{self, ColType};
use crate::time::NS_PER_US;
use crate::writer::{write_partitioned, FileFormat};

/// How compaction picks and writes files.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// Files with fewer rows than this are "small" and get merged.
    pub small_file_rows: u64,
    /// At most this many rows are merged into one file (bounds memory:
    /// roughly 100 bytes per flow row, 300 per connection while merging).
    pub max_merge_rows: u64,
    pub zstd_level: i32,
    pub row_group_rows: usize,
    pub sync: bool,
    /// A running capture's live records: its files still left out by a
    /// query (marked above what every open query has from the store) are
    /// not merged (see [`crate::live`]).
    pub live: Option<Arc<crate::live::LiveRecords>>,
}

impl Default for CompactOptions {
    fn default() -> Self {
        CompactOptions {
            small_file_rows: 512 * 1024,
            max_merge_rows: 4 << 20,
            zstd_level: 3,
            row_group_rows: 1 << 20,
            sync: true,
            live: None,
        }
    }
}

/// What a compaction did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactReport {
    pub partitions: u64,
    /// Small files merged away.
    pub files_merged: u64,
    /// Merged files written.
    pub files_written: u64,
    pub rows: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Replaced files left behind by an interrupted compaction, removed now.
    pub leftovers_removed: u64,
    /// Files that could not be read and were left alone (not merged).
    pub unreadable: u64,
    /// What went wrong, one line per file or partition.
    pub errors: Vec<String>,
}

impl CompactReport {
    fn add(&mut self, o: &CompactReport) {
        self.partitions += o.partitions;
        self.files_merged += o.files_merged;
        self.files_written += o.files_written;
        self.rows += o.rows;
        self.bytes_before += o.bytes_before;
        self.bytes_after += o.bytes_after;
        self.leftovers_removed += o.leftovers_removed;
        self.unreadable += o.unreadable;
        self.errors.extend(o.errors.iter().cloned());
        // Keep the latest hundred.
        let excess = self.errors.len().saturating_sub(100);
        self.errors.drain(..excess);
    }
}

fn data_dir_of(partition: &Path) -> Option<PathBuf> {
    Some(partition.parent()?.parent()?.parent()?.to_path_buf())
}

/// Merges the small files of one hour partition (`<dir>/<kind>/date=../hour=..`).
/// Safe while a `Store` writes (new files are left alone) and while readers scan.
pub fn compact_partition(path: &Path, opts: &CompactOptions) -> Result<CompactReport, StoreError> {
    let part = parse_partition_path(path).ok_or_else(|| {
        StoreError::Invalid(format!("{} is not a partition directory", path.display()))
    })?;
    let data_dir = data_dir_of(path).unwrap_or_default();
    let _lock = DirLock::lock(&data_dir.join(".compact.lock"))?;
    compact_locked(path, part.kind, opts)
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

fn compact_locked(
    pdir: &Path,
    kind: Kind,
    opts: &CompactOptions,
) -> Result<CompactReport, StoreError> {
    let mut report = CompactReport {
        partitions: 1,
        ..Default::default()
    };
    let mut replaced = 0;
    let mut corrupt = Vec::new();
    let files = snapshot(pdir, &mut replaced, &mut corrupt)?;
    for (path, what) in &corrupt {
        report.unreadable += 1;
        report.errors.push(format!(
            "store: left unreadable file {} alone: {what}",
            path.display()
        ));
    }
    // Leftovers of an interrupted compaction.
    let mut removed_any = false;
    for f in &files {
        for name in &f.replaces {
            if remove_file_if_exists(&pdir.join(name))? {
                report.leftovers_removed += 1;
                removed_any = true;
            }
        }
    }
    if removed_any {
        sync_dir(pdir)?;
    }
    // Small files, oldest name first, in groups of bounded size. Corrupt
    // files are never merged (nor deleted): they stay for inspection.
    let mergeable = opts.live.as_ref().map(|l| (l.run(), l.mergeable_upto(kind)));
    let mut small: Vec<_> = files
        .iter()
        .filter(|f| {
            (f.reader.metadata().file_metadata().num_rows().max(0) as u64) < opts.small_file_rows
        })
        .filter(|f| match (&f.live, mergeable) {
            (Some((run, n)), Some((ours, upto))) => run != ours || *n <= upto,
            _ => true,
        })
        .collect();
    small.sort_by(|a, b| a.name.cmp(&b.name));
    let mut groups: Vec<Vec<&crate::reader::OpenFile>> = Vec::new();
    let mut cur: Vec<&crate::reader::OpenFile> = Vec::new();
    let mut cur_rows = 0u64;
    for f in small {
        let n = f.reader.metadata().file_metadata().num_rows().max(0) as u64;
        if !cur.is_empty() && cur_rows + n > opts.max_merge_rows {
            groups.push(std::mem::take(&mut cur));
            cur_rows = 0;
        }
        cur.push(f);
        cur_rows += n;
    }
    groups.push(cur);
    let fmt = FileFormat::new(kind, opts.zstd_level, opts.row_group_rows, opts.sync)?;
    let data_dir = data_dir_of(pdir).unwrap_or_default();
    for group in groups.into_iter().filter(|g| g.len() >= 2) {
        // Files that fail to read are left alone (and reported), the rest merged.
        let mut batches = Vec::new();
        let mut group_ok = Vec::with_capacity(group.len());
        for f in group {
            match read_all(std::slice::from_ref(f), kind) {
                Ok(b) => {
                    batches.extend(b);
                    group_ok.push(f);
                }
                Err(e) => {
                    report.unreadable += 1;
                    report
                        .errors
                        .push(format!("store: left unreadable file alone: {e}"));
                }
            }
        }
        let group = group_ok;
        if group.len() < 2 {
            continue;
        }
        let merged = match MergedRows::new(kind, batches) {
            Ok(m) if kind == Kind::X509 => m.fold_certificates(),
            Ok(m) => m,
            Err(what) => return Err(StoreError::corrupt(pdir, what)),
        };
        let names: Vec<&str> = group.iter().map(|f| f.name.as_str()).collect();
        let kv = [(REPLACES_KEY.to_string(), names.join("\n"))];
        // All rows of a partition fall in its hour, so this writes one file
        // (a foreign row in another hour would go to its own partition).
        let written = write_partitioned(&data_dir, "compact", &merged, &fmt, &kv)?;
        report.files_written += written.len() as u64;
        report.bytes_after += written.iter().map(|w| w.bytes).sum::<u64>();
        report.rows += merged.len() as u64;
        for f in &group {
            report.bytes_before += file_len(&f.path);
            remove_file_if_exists(&f.path)?;
            report.files_merged += 1;
        }
        if opts.sync {
            sync_dir(pdir)?;
        }
    }
    Ok(report)
}

/// Rows read back from files, concatenated column by column (schema order).
struct MergedRows {
    kind: Kind,
    cols: Vec<Column>,
}

impl MergedRows {
    fn new(kind: Kind, batches: Vec<Batch>) -> Result<MergedRows, &'static str> {
        let mut cols: Vec<Column> = Vec::new();
        for b in batches {
            if cols.is_empty() {
                cols = b.columns.into_iter().map(|(_, c)| c).collect();
            } else {
                for (a, (_, c)) in cols.iter_mut().zip(b.columns) {
                    if !a.append(c) {
                        return Err("files of one kind with different column types");
                    }
                }
            }
        }
        Ok(MergedRows { kind, cols })
    }

    fn col(&self, name: &str) -> &Column {
        &self.cols[schema::col_index(self.kind, name).expect("known column")]
    }

    /// Certificates: the rows of one (fingerprint, role, host_cert) in the
    /// hour (one per flush or run that saw it, see [`crate::x509`]) become
    /// one, the first seen, with their handshakes summed.
    fn fold_certificates(self) -> MergedRows {
        let (Column::Str(fp), Column::Str(role), Column::Bool(host), Column::I64(ts), Column::U64(hs)) = (
            self.col("fingerprint"),
            self.col("role"),
            self.col("host_cert"),
            self.col("ts"),
            self.col("handshakes"),
        ) else {
            unreachable!("x509 columns as the schema types them")
        };
        let mut slot: HashMap<(&str, &str, bool), usize> = HashMap::new();
        let mut keep: Vec<usize> = Vec::new();
        let mut sums: Vec<u64> = Vec::new();
        for r in 0..self.len() {
            match slot.entry((&fp[r], &role[r], host[r])) {
                Entry::Occupied(e) => {
                    let k = *e.get();
                    sums[k] += hs[r];
                    if ts[r] < ts[keep[k]] {
                        keep[k] = r;
                    }
                }
                Entry::Vacant(e) => {
                    e.insert(keep.len());
                    keep.push(r);
                    sums.push(hs[r]);
                }
            }
        }
        let at = schema::col_index(Kind::X509, "handshakes").expect("known column");
        let cols = self
            .cols
            .iter()
            .enumerate()
            .map(|(i, c)| if i == at { Column::U64(sums.clone()) } else { c.select(&keep) })
            .collect();
        MergedRows { kind: self.kind, cols }
    }
}

fn i64s(c: &Column) -> &[i64] {
    match c {
        Column::I64(v) => v,
        _ => unreachable!(),
    }
}
fn ips(c: &Column) -> &[[u8; 16]] {
    match c {
        Column::Ip(v) => v,
        _ => unreachable!(),
    }
}

impl RowSource for MergedRows {
    fn kind(&self) -> Kind {
        self.kind
    }
    fn len(&self) -> usize {
        self.cols.first().map_or(0, Column::len)
    }
    fn time_ns(&self, row: usize) -> i64 {
        i64s(self.col(schema::time_column(self.kind)))[row]
    }
    fn sort_rows(&self, rows: &mut [u32]) {
        match self.kind {
            Kind::Flows => {
                let bucket = i64s(self.col("bucket"));
                let client = ips(self.col("client"));
                let server = ips(self.col("server"));
                let (Column::U16(port), Column::U8(proto), Column::Str(iface)) = (
                    self.col("server_port"),
                    self.col("proto"),
                    self.col("iface"),
                ) else {
                    unreachable!()
                };
                // The writer's order (see FlowBuf::sort_rows).
                rows.sort_unstable_by(|&a, &b| {
                    let (a, b) = (a as usize, b as usize);
                    (
                        bucket[a], &server[a], port[a], proto[a], &client[a], &iface[a],
                    )
                        .cmp(&(
                            bucket[b], &server[b], port[b], proto[b], &client[b], &iface[b],
                        ))
                });
            }
            _ => {
                // Connections and transactions: by ts, stably.
                let ts = i64s(self.col("ts"));
                rows.sort_by_key(|&r| ts[r as usize]);
            }
        }
    }
    fn values(&self, col: usize, rows: &[u32]) -> PqValues {
        // The rows hold the kind's scan columns; files may keep some
        // differently (flows' first/last as second offsets).
        let spec = &schema::file_columns(self.kind)[col];
        if self.kind == Kind::Flows {
            let times = || {
                (
                    i64s(self.col("bucket")),
                    i64s(self.col("first")),
                    i64s(self.col("last")),
                )
            };
            match spec.name {
                flow_time::FIRST_OFFSET => {
                    let (b, f, _) = times();
                    return req_i32(rows, |r| flow_time::first_offset_s(b[r], f[r]) as i32);
                }
                flow_time::DURATION => {
                    let (b, f, l) = times();
                    return req_i32(rows, |r| flow_time::duration_s(b[r], f[r], l[r]) as i32);
                }
                _ => {}
            }
        }
        let col = schema::col_index(self.kind, spec.name).expect("file columns are scan columns");
        let us = |ns: i64| ns.div_euclid(NS_PER_US);
        match (spec.ty, &self.cols[col]) {
            (ColType::TimeUs, Column::I64(v)) => req_i64(rows, |r| us(v[r])),
            (ColType::DurUs, Column::OptI64(v)) => opt_i64(rows, |r| v[r].map(us)),
            (ColType::U8, Column::U8(v)) => req_i32(rows, |r| v[r] as i32),
            (ColType::U16, Column::U16(v)) => req_i32(rows, |r| v[r] as i32),
            (ColType::U16, Column::OptU64(v)) => opt_i32(rows, |r| v[r].map(|x| x as i32)),
            (ColType::U32, Column::U32(v)) => req_i32(rows, |r| v[r] as i32),
            (ColType::U64, Column::U64(v)) => req_i64(rows, |r| v[r] as i64),
            (ColType::U64, Column::OptU64(v)) => opt_i64(rows, |r| v[r].map(|x| x as i64)),
            (ColType::Ip, Column::Ip(v)) => req_ip(rows, |r| v[r]),
            (ColType::Str, Column::Str(v)) => strings(rows, spec.optional, |r| {
                let s = v[r].as_bytes();
                (!spec.optional || !s.is_empty()).then_some(s)
            }),
            (ColType::Bool, Column::Bool(v)) => req_bool(rows, |r| v[r]),
            (ty, c) => unreachable!("column {} of type {ty:?} read as {c:?}", spec.name),
        }
    }
}

/// Cleans up after a crash (called by `Store::open`, which holds the writer
/// lock): removes partitions that were being deleted, writers' temporary
/// files and, when no compaction is running, compaction temporaries and
/// files a published merged file replaces.
pub(crate) fn recover(dir: &Path) -> Result<(), StoreError> {
    let compact_lock = DirLock::try_lock(&dir.join(".compact.lock"))?;
    for kind in Kind::ALL {
        let kdir = kind_dir(dir, kind);
        for (dname, dpath) in list_dir(&kdir)? {
            if !dpath.is_dir() {
                continue;
            }
            if dname.starts_with(".del-") {
                std::fs::remove_dir_all(&dpath).map_err(|e| StoreError::io(&dpath, "remove", e))?;
                continue;
            }
            for (hname, hpath) in list_dir(&dpath)? {
                if hname.starts_with(".del-") {
                    std::fs::remove_dir_all(&hpath)
                        .map_err(|e| StoreError::io(&hpath, "remove", e))?;
                }
            }
        }
        for p in list_partitions(dir, kind)? {
            let mut changed = false;
            let entries = list_dir(&p.path)?;
            for (name, path) in &entries {
                let is_tmp = name.starts_with('.') && name.ends_with(".tmp");
                if is_tmp && (name.starts_with(".part-") || compact_lock.is_some()) {
                    changed |= remove_file_if_exists(path)?;
                }
            }
            if compact_lock.is_some() {
                for (name, path) in &entries {
                    if !(name.starts_with("compact-") && is_data_file(name)) {
                        continue;
                    }
                    // A merged file that cannot be read replaces nothing.
                    let Ok(f) = std::fs::File::open(path) else {
                        continue;
                    };
                    let Ok(r) = parquet::file::serialized_reader::SerializedFileReader::new(f)
                    else {
                        continue;
                    };
                    let replaces: Vec<String> = r
                        .metadata()
                        .file_metadata()
                        .key_value_metadata()
                        .and_then(|kv| kv.iter().find(|k| k.key == REPLACES_KEY))
                        .and_then(|k| k.value.clone())
                        .map(|v| v.lines().map(str::to_string).collect())
                        .unwrap_or_default();
                    for old in replaces.iter().filter(|n| is_data_file(n)) {
                        changed |= remove_file_if_exists(&p.path.join(old))?;
                    }
                }
            }
            if changed {
                sync_dir(&p.path)?;
            }
        }
    }
    Ok(())
}

// ---- background compactor ----------------------------------------------------------

/// When and how the background compactor works.
#[derive(Debug, Clone)]
pub struct CompactorOptions {
    /// Time between passes.
    pub interval: Duration,
    /// An hour partition is compacted once it ended this long ago.
    pub settle: Duration,
    pub compact: CompactOptions,
}

impl Default for CompactorOptions {
    fn default() -> Self {
        CompactorOptions {
            interval: Duration::from_secs(60),
            settle: Duration::from_secs(300),
            compact: CompactOptions::default(),
        }
    }
}

/// What the background compactor has done so far.
#[derive(Debug, Clone, Default)]
pub struct CompactorStatus {
    pub passes: u64,
    pub totals: CompactReport,
    /// The last error of a pass, if any (passes continue after errors).
    pub last_error: Option<String>,
}

/// One compaction pass over a data directory: every closed partition (ended
/// `settle` ago) that has two or more small files. `seen` remembers the file
/// names of partitions found with nothing to do, so they are not reopened
/// until they change.
pub fn compact_closed_partitions(
    dir: &Path,
    now_ns: i64,
    settle: Duration,
    opts: &CompactOptions,
    seen: &mut HashMap<PathBuf, Vec<String>>,
) -> Result<CompactReport, StoreError> {
    let mut total = CompactReport::default();
    let settle_ns = settle.as_nanos().min(i64::MAX as u128) as i64;
    let Some(_lock) = DirLock::try_lock(&dir.join(".compact.lock"))? else {
        return Ok(total); // another compactor is at work
    };
    for kind in Kind::ALL {
        for p in list_partitions(dir, kind)? {
            if p.end_ns().saturating_add(settle_ns) > now_ns {
                continue;
            }
            let names: Vec<String> = list_dir(&p.path)?
                .into_iter()
                .map(|(n, _)| n)
                .filter(|n| is_data_file(n))
                .collect();
            if names.len() < 2 || seen.get(&p.path) == Some(&names) {
                continue;
            }
            // One bad partition must not stop the others.
            match compact_locked(&p.path, kind, opts) {
                Ok(r) => total.add(&r),
                Err(e) => {
                    total.errors.push(e.to_string());
                    continue;
                }
            }
            let after: Vec<String> = list_dir(&p.path)?
                .into_iter()
                .map(|(n, _)| n)
                .filter(|n| is_data_file(n))
                .collect();
            seen.insert(p.path.clone(), after);
        }
    }
    Ok(total)
}

/// Compacts closed partitions in a background thread (at low priority),
/// never blocking the writer: it only adds merged files and removes the
/// small files they replace.
pub struct Compactor {
    shared: Arc<(Mutex<(bool, CompactorStatus)>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

impl Compactor {
    pub fn start(dir: PathBuf, opts: CompactorOptions) -> Compactor {
        let shared = Arc::new((
            Mutex::new((false, CompactorStatus::default())),
            Condvar::new(),
        ));
        let sh = shared.clone();
        let handle = std::thread::Builder::new()
            .name("wirelog-compact".into())
            .spawn(move || {
                lower_thread_priority();
                let mut seen = HashMap::new();
                loop {
                    let r = compact_closed_partitions(
                        &dir,
                        now_ns(),
                        opts.settle,
                        &opts.compact,
                        &mut seen,
                    );
                    let (lock, cv) = &*sh;
                    let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
                    g.1.passes += 1;
                    match r {
                        Ok(r) => {
                            if let Some(e) = r.errors.last() {
                                g.1.last_error = Some(e.clone());
                            }
                            g.1.totals.add(&r);
                        }
                        Err(e) => g.1.last_error = Some(e.to_string()),
                    }
                    cv.notify_all();
                    if g.0 {
                        return;
                    }
                    let (g2, _) = cv
                        .wait_timeout(g, opts.interval)
                        .unwrap_or_else(|e| e.into_inner());
                    if g2.0 {
                        return;
                    }
                }
            })
            .expect("spawn compactor thread");
        Compactor {
            shared,
            handle: Some(handle),
        }
    }

    /// What it has done so far.
    pub fn status(&self) -> CompactorStatus {
        self.shared
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .clone()
    }

    /// Waits until at least `passes` passes are complete (for tests and shutdown).
    pub fn wait_passes(&self, passes: u64, timeout: Duration) -> CompactorStatus {
        let (lock, cv) = &*self.shared;
        let g = lock.lock().unwrap_or_else(|e| e.into_inner());
        let (g, _) = cv
            .wait_timeout_while(g, timeout, |s| s.1.passes < passes)
            .unwrap_or_else(|e| e.into_inner());
        g.1.clone()
    }

    /// Stops the thread (after the pass in progress) and returns its status.
    pub fn stop(mut self) -> CompactorStatus {
        self.shutdown();
        self.status()
    }

    fn shutdown(&mut self) {
        {
            let (lock, cv) = &*self.shared;
            lock.lock().unwrap_or_else(|e| e.into_inner()).0 = true;
            cv.notify_all();
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Compactor {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn lower_thread_priority() {
    // SAFETY: plain syscalls on the calling thread (Linux: nice is per thread).
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}
