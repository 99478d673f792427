//! Keeping packets (`read`/`capture --pcap-dir`): the writer, the keep rule
//! and filter each probe applies; and `wirelog pcap`, which writes the kept
//! packets of the connections a query selects.

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use wirelog_capture::filter::FileFilter;
use wirelog_pcapdir::extract::Window;
use wirelog_pcapdir::{PcapDir, PcapDirConfig, RingLimits};
use wirelog_probe::{KeepCounters, KeepRule, Probe};
use wirelog_query::{parse_query, KeyValue};

use crate::cli::{parse_duration, parse_size, PcapArgs, PcapConns, PcapQueryArgs, QueryKind};
use crate::limits;

/// Batches of up to 256 KiB the writer's queue holds (per directory).
const QUEUE_BATCHES: usize = 64;

impl PcapArgs {
    /// Sizes, bounds and the filter expression, before anything is opened.
    pub fn check(&self) -> Result<()> {
        if self.pcap_dir.is_none() {
            return Ok(());
        }
        limits::size_in_range("--pcap-file-size", self.pcap_file_size, 64 << 10, 1 << 40)?;
        limits::in_range("--pcap-snaplen", self.pcap_snaplen as u64, 16, 262_144)?;
        if let Some(d) = self.pcap_rotate {
            limits::duration_in_range("--pcap-rotate", d, Duration::from_secs(1), Duration::from_secs(366 * 86400))?;
        }
        let ring = self.ring()?;
        if let Some(size) = ring.size {
            if size < 2 * self.pcap_file_size {
                bail!(
                    "--pcap-keep size={}: at least twice --pcap-file-size ({}), or no closed file fits beside the open one",
                    limits::human(size),
                    limits::human(self.pcap_file_size)
                );
            }
        }
        if let Some(f) = &self.pcap_filter {
            FileFilter::new(f).map_err(|e| anyhow!("--pcap-filter: {e}"))?;
        }
        Ok(())
    }

    fn ring(&self) -> Result<RingLimits> {
        match &self.pcap_keep {
            None => Ok(RingLimits::default()),
            Some(s) => RingLimits::parse(s, parse_size, |d| parse_duration(d).map(|d| d.as_nanos() as i64))
                .map_err(|e| anyhow!("--pcap-keep: {e}")),
        }
    }

    /// Tells the store of `cfg` (when there is one) where this run keeps
    /// packets, so `wirelog pcap` needs no `--pcap-dir` (the path made
    /// absolute: the store outlives the working directory).
    pub fn record_in(&self, cfg: &mut crate::output::OutputConfig) -> Result<()> {
        if let (Some(dir), Some((_, opts))) = (&self.pcap_dir, cfg.store.as_mut()) {
            opts.pcap_dir = Some(std::path::absolute(dir).with_context(|| format!("--pcap-dir {}", dir.display()))?);
        }
        Ok(())
    }

    /// Starts the writer if `--pcap-dir` is given.
    pub fn start(&self) -> Result<Option<Keeping>> {
        let Some(dir) = &self.pcap_dir else {
            return Ok(None);
        };
        let pcap = PcapDir::start(PcapDirConfig {
            dir: dir.clone(),
            file_size: self.pcap_file_size,
            rotate_ns: self.pcap_rotate.map(|d| d.as_nanos() as i64),
            ring: self.ring()?,
            snaplen: self.pcap_snaplen,
            queue_batches: QUEUE_BATCHES,
        })?;
        Ok(Some(Keeping {
            pcap,
            dir: dir.clone(),
            rule: KeepRule {
                parsed_only: self.pcap_conns == PcapConns::Parsed,
                cutoff: self.pcap_cutoff.unwrap_or(u64::MAX),
            },
            filter: self.pcap_filter.clone(),
        }))
    }
}

/// A running pcap writer and what each probe keeps.
pub struct Keeping {
    pcap: PcapDir,
    pub dir: PathBuf,
    rule: KeepRule,
    filter: Option<String>,
}

impl Keeping {
    /// Makes `probe` keep packets into this directory; with `wait` (reading
    /// files) the probe waits for the writer rather than dropping packets.
    pub fn attach(&self, probe: &mut Probe, wait: bool) -> Result<()> {
        let filter = match &self.filter {
            Some(e) => {
                let mut f = FileFilter::new(e).map_err(|e| anyhow!("--pcap-filter: {e}"))?;
                Some(Box::new(move |p: &wirelog_probe::Packet<'_>| f.matches(p.linktype.0, p.data, p.wire_len))
                    as wirelog_probe::KeepFilter)
            }
            None => None,
        };
        let sender = if wait { self.pcap.sender().waiting() } else { self.pcap.sender() };
        probe.keep_packets(self.rule, sender, filter);
        Ok(())
    }

    pub fn counters(&self) -> Arc<KeepCounters> {
        self.pcap.counters()
    }

    /// Waits for the writer (every probe must have stopped keeping) and
    /// says what was kept.
    pub fn finish(self) -> PcapEnd {
        let counters = self.pcap.counters();
        let s = self.pcap.finish();
        PcapEnd {
            line: format!("wirelog: {} in {}", counters.text(), self.dir.display()),
            // The writer named the error when it happened; the records are
            // whole, the pcap is not: the run is partial.
            lost: s.first_error.is_some(),
        }
    }
}

/// When the packets of the selected connections were: from the first start
/// to the last end among their records (rows keyed uid, ts, duration); the
/// end is unknown when a record has no duration.
fn conns_window(rows: &[wirelog_query::Row]) -> Window {
    if rows.is_empty() {
        return Window::default();
    }
    let mut w = Window { from_ns: None, to_ns: Some(i64::MIN) };
    for r in rows {
        let (Some(KeyValue::Int(ts)), dur) = (r.key.get(1), r.key.get(2)) else {
            return Window::default();
        };
        w.from_ns = Some(w.from_ns.map_or(*ts, |f| f.min(*ts)));
        w.to_ns = match (w.to_ns, dur) {
            (Some(to), Some(KeyValue::Int(d))) => Some(to.max(ts.saturating_add(*d))),
            _ => None,
        };
    }
    w
}

/// What the pcap writer says at the end of a run.
pub struct PcapEnd {
    pub line: String,
    /// Packets were lost to write errors (a full disk) or the index is
    /// incomplete: shown even with `--quiet`, and the run ends partial.
    pub lost: bool,
}

/// The packet directory the store's writers recorded (see
/// `wirelog_store::pcap_dirs`): the one there is, or an error saying why
/// `--pcap-dir` must be given.
fn recorded_pcap_dir(store: &std::path::Path) -> Result<PathBuf> {
    let dirs = wirelog_store::read_pcap_dirs(store).with_context(|| format!("--store {}", store.display()))?;
    match dirs.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!(
            "--store {}: no run writing this store kept packets (read/capture --pcap-dir); name the directory with --pcap-dir",
            store.display()
        ),
        many => bail!(
            "--store {}: runs writing this store kept packets in {} directories ({}); choose one with --pcap-dir",
            store.display(),
            many.len(),
            many.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// `wirelog pcap`.
pub fn run(args: PcapQueryArgs) -> Result<ExitCode> {
    let QueryKind(kind) = args.kind;
    if kind == wirelog_store::Kind::Flows {
        bail!("flows: flow records name no connection; select with conns or a protocol's transactions");
    }
    let (from, to) = crate::query::time_range(&args.time)?;
    // A connection's record also says when its packets were: conns are
    // grouped by their start and duration too (one row per uid all the same).
    let by = if kind == wirelog_store::Kind::Conns { "uid,ts,duration" } else { "uid" };
    let mut spec =
        parse_query(kind, args.where_.as_deref(), Some(by), None, Some(0), None).map_err(|e| anyhow!("{e}"))?;
    if from.is_some() || to.is_some() {
        spec.time_range = Some((from.unwrap_or(i64::MIN), to.unwrap_or(i64::MAX)));
    }
    let table = crate::query::run_store(&args.store, spec, from, to)?.finish();
    let uids: HashSet<String> = table
        .rows
        .iter()
        .filter_map(|r| match r.key.first() {
            Some(KeyValue::Str(u)) => Some(u.clone()),
            _ => None,
        })
        .collect();
    let pcap_dir = match &args.pcap_dir {
        Some(d) => d.clone(),
        None => recorded_pcap_dir(&args.store)?,
    };
    if !pcap_dir.is_dir() {
        bail!("--pcap-dir {}: no such directory", pcap_dir.display());
    }
    let to_stdout = args.output.as_os_str() == "-";
    let mut out: Box<dyn Write> = if to_stdout {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(
            std::fs::File::create(&args.output).with_context(|| format!("{}: cannot create", args.output.display()))?,
        )
    };
    let window = if kind == wirelog_store::Kind::Conns { conns_window(&table.rows) } else { Window::default() };
    let s = wirelog_pcapdir::extract::extract(&pcap_dir, &uids, window, &mut out)
        .with_context(|| format!("cannot extract from {}", pcap_dir.display()))?;
    out.flush()?;
    for w in &s.warnings {
        eprintln!("wirelog: warning: {w}");
    }
    eprintln!(
        "wirelog: {} records matched, {} connections; {} of them have packets in {}: {} packets from {} files ({} indexes looked up, {} bytes of index read){}",
        table.rows_matched,
        uids.len(),
        s.uids_found,
        pcap_dir.display(),
        s.packets,
        s.files_read,
        s.files_indexed,
        s.index_bytes,
        if to_stdout { String::new() } else { format!(" written to {}", args.output.display()) }
    );
    Ok(if uids.is_empty() || s.packets == 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
