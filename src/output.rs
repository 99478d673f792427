//! The output stage's wiring: which sinks a run writes to, built from the
//! command line's output options, then handed to `wirelog_sink::Output`
//! (the thread that fans every batch out to them).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use wirelog_procs::Owners;
use wirelog_sink::{ConnLogWriter, FlowLogWriter, Live, LogDir, LogFormat, LogOut, Sink, TxLogs, X509LogWriter};
pub use wirelog_sink::{Batch, BatchSender, Output};
use wirelog_store::{StoreOptions, StoreSink};

/// Exit code of a run that lost records because the disk stayed full
/// (every record that was written is whole; the summary says what is missing).
pub const EXIT_PARTIAL: u8 = 3;

/// The free space to leave on the file systems written to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MinFree {
    /// 5% of the file system, at most 256 MiB.
    Auto,
    Bytes(u64),
    /// Percent of the file system's size.
    Percent(f64),
}

impl MinFree {
    /// The floor in bytes for the file system holding `dir`.
    pub fn bytes_for(self, dir: &Path) -> u64 {
        match self {
            MinFree::Auto => MinFree::Percent(5.0).bytes_for(dir).min(256 << 20),
            MinFree::Bytes(b) => b,
            MinFree::Percent(p) => wirelog_store::disk_space(dir)
                .map(|d| (d.total as f64 * p / 100.0) as u64)
                .unwrap_or(0),
        }
    }
}

/// Where records go.
pub struct OutputConfig {
    /// Directory for conn.log and flows.log; `None` writes conn records to
    /// standard output and no flows log.
    pub logs: Option<PathBuf>,
    pub format: LogFormat,
    /// Store directory and options; `None` writes no store.
    pub store: Option<(PathBuf, StoreOptions)>,
    /// conn.log gets the `empty_tcp_skipped` column (capture --skip-empty-tcp).
    pub empty_tcp_note: bool,
    /// capture --processes: records get their ends' owners from the
    /// resolver, and logs the process columns.
    pub processes: Option<Owners>,
    /// capture --tls-plaintext: the join of the TLS library's transactions
    /// with the packet path's connections; the transaction logs get the
    /// process and `source` columns.
    pub tls_join: Option<Box<dyn wirelog_record::TxJoin>>,
    /// Free space left on the disks of the logs and the store.
    pub min_free: MinFree,
    /// --clickhouse: the ClickHouse sink's settings.
    pub clickhouse: Option<wirelog_clickhouse::Config>,
    /// `read`: the run's name (its input identity). The store's files wait
    /// under it in staging until the run commits (see
    /// `wirelog_store::staging`).
    pub run: Option<String>,
    /// `capture --listen`: the records are also kept in memory until the
    /// store has them, for the API (`wirelog_store::live`).
    pub records: Option<Arc<wirelog_store::LiveRecords>>,
    /// capture --cpu-budget: the transaction logs get the `sample_weight`
    /// column (parse sampling may weigh them).
    pub sample_weights: bool,
    /// `--zeek-policy`: the log fields of these Zeek policies are written.
    pub zeek_policies: Vec<&'static str>,
    /// `--ca-file`: the trust store of the validate-certs and validate-ocsp policies (default
    /// the system's).
    pub ca_file: Option<PathBuf>,
    /// `--ct-logs`: the CT log list of the validate-sct policy (default
    /// the one wirelog ships).
    pub ct_logs: Option<PathBuf>,
}

impl OutputConfig {
    /// Checks the output paths without creating anything: an existing path
    /// where a directory is wanted must be a directory.
    pub fn check(&self) -> Result<()> {
        let not_dir = |opt: &str, dir: &Path| -> Result<()> {
            match std::fs::metadata(dir) {
                Ok(m) if !m.is_dir() => Err(anyhow!("{opt} {}: is a file, not a directory", dir.display())),
                _ => Ok(()),
            }
        };
        if let Some(dir) = &self.logs {
            not_dir("--logs", dir)?;
        }
        if let Some((dir, _)) = &self.store {
            not_dir("--store", dir)?;
        }
        Ok(())
    }
}

/// The output stage of a run, started.
pub struct Started {
    pub output: Output,
    /// The output directories, each with whether the directories below it
    /// are written too (the store's partitions): live capture checks that
    /// the user it becomes can write them.
    pub paths: Vec<(PathBuf, bool)>,
    /// Where capture's statistics loop hands health rows (with --clickhouse).
    pub health: Option<wirelog_clickhouse::HealthSender>,
}

/// Opens every sink (so a bad path is reported before any packet is read)
/// and starts the output thread.
pub fn start(cfg: OutputConfig) -> Result<Started> {
    cfg.check()?;
    let live: Arc<Live> = Arc::default();
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    let mut paths = Vec::new();
    // The store first: its lock is what another process may hold, and a
    // refusal must leave no log behind.
    if let Some((dir, mut opts)) = cfg.store {
        if opts.min_free_bytes == 0 {
            // Made here (as the store would make it) to measure its disk.
            wirelog_safefs::Dir::create(&dir).with_context(|| format!("--store {}", dir.display()))?;
            opts.min_free_bytes = cfg.min_free.bytes_for(&dir);
        }
        let store = match &cfg.records {
            Some(r) => StoreSink::open_live(&dir, opts, live.clone(), r.clone())?,
            None => StoreSink::open(&dir, opts, live.clone(), cfg.run.as_deref())?,
        };
        sinks.push(Box::new(store));
        paths.push((dir, true));
    }
    if let Some(r) = &cfg.records {
        sinks.push(Box::new(wirelog_store::LiveSink::new(r.clone())?));
    }
    let processes = cfg.processes.is_some();
    match &cfg.logs {
        Some(dir) => {
            let mut logs = LogDir::create_dir(dir, cfg.format, 0)
                .with_context(|| format!("cannot create log directory {}", dir.display()))?;
            logs.min_free = cfg.min_free.bytes_for(dir);
            let conn = ConnLogWriter::new(logs.create("conn.log")?, cfg.format)
                .with_empty_tcp_note(cfg.empty_tcp_note)
                .with_processes(processes);
            let flows = FlowLogWriter::new(logs.create("flows.log")?, cfg.format);
            paths.push((dir.clone(), false));
            sinks.push(Box::new(conn));
            sinks.push(Box::new(flows));
            let tls = cfg.tls_join.is_some();
            let validator = match cfg.zeek_policies.contains(&"validate-certs") {
                true => {
                    wirelog_sink::logs::validate::load().map_err(|e| anyhow!("--zeek-policy validate-certs: {e}"))?;
                    let file = cfg.ca_file.clone().unwrap_or_else(|| wirelog_sink::logs::validate::SYSTEM_CA_FILE.into());
                    let v = wirelog_sink::logs::validate::Validator::from_pem_file(&file)
                        .map_err(|e| anyhow!("--zeek-policy validate-certs: trust store (--ca-file) {e}"))?;
                    match cfg.zeek_policies.contains(&"validate-sct") {
                        true => {
                            use wirelog_sink::logs::sct::{CtLogs, SctChecker};
                            let logs = match &cfg.ct_logs {
                                Some(f) => CtLogs::from_file(f).map_err(|e| anyhow!("--zeek-policy validate-sct: CT log list (--ct-logs) {e}"))?,
                                None => CtLogs::builtin(),
                            };
                            let name = cfg.ct_logs.as_ref().map_or("the built-in CT log list".to_string(), |f| f.display().to_string());
                            let checker = SctChecker::new(logs).map_err(|e| anyhow!("--zeek-policy validate-sct: {name}: {e}"))?;
                            Some(v.with_sct(checker))
                        }
                        false => Some(v),
                    }
                }
                false => None,
            };
            let ocsp = match cfg.zeek_policies.contains(&"validate-ocsp") {
                true => {
                    let file = cfg.ca_file.clone().unwrap_or_else(|| wirelog_sink::logs::validate::SYSTEM_CA_FILE.into());
                    let v = wirelog_sink::logs::ocsp::OcspVerifier::from_pem_file(&file)
                        .map_err(|e| anyhow!("--zeek-policy validate-ocsp: trust store (--ca-file) {e}"))?;
                    Some(v)
                }
                false => None,
            };
            sinks.push(Box::new(
                TxLogs::new(logs.clone(), processes || tls)?
                    .with_sources(tls)
                    .with_weights(cfg.sample_weights)
                    .with_policies(&cfg.zeek_policies)
                    .with_validator(validator)
                    .with_ocsp(ocsp),
            ));
            sinks.push(Box::new(X509LogWriter::in_dir(logs)?.with_policies(&cfg.zeek_policies)));
        }
        // Without a log directory: conn.log on standard output, nothing else.
        None => sinks.push(Box::new(
            ConnLogWriter::new(LogOut::stdout(), cfg.format)
                .with_empty_tcp_note(cfg.empty_tcp_note)
                .with_processes(processes),
        )),
    }
    // Last: at the end the logs and the store are whole before it waits
    // for ClickHouse.
    let mut health = None;
    if let Some(c) = cfg.clickhouse {
        paths.push((c.spool_dir.clone(), false));
        let sink = wirelog_clickhouse::ClickHouseSink::start(c)?;
        health = Some(sink.health_sender());
        sinks.push(Box::new(sink));
    }
    let owners = cfg.processes.map(|o| Box::new(o) as Box<dyn wirelog_record::ProcOwners>);
    let output = Output::start_joined(sinks, owners, cfg.tls_join, live).map_err(|e| anyhow!(e))?;
    Ok(Started { output, paths, health })
}

/// Prints the end of a run's summary that the sinks give: their own lines
/// (ClickHouse), what a full disk did, what could not be written. True when
/// records were lost (the run is "partial", exit code 3).
pub fn report(summary: &wirelog_sink::Summary, quiet: bool) -> bool {
    for r in summary.reports().filter(|r| !quiet || r.always) {
        eprintln!("{}", r.text);
    }
    if let Some(t) = summary.space_text() {
        eprintln!("{t}");
    }
    if summary.sink_waits > 0 && !quiet {
        eprintln!(
            "wirelog: the output thread waited {} times for the store's writer (it was more than {} records behind)",
            summary.sink_waits,
            wirelog_sink::MAX_PENDING_RECORDS
        );
    }
    if summary.dropped() > 0 {
        eprintln!(
            "wirelog: {} records could not be written, the disk stayed full: {}",
            summary.dropped(),
            summary.dropped_text()
        );
    }
    summary.partial()
}
