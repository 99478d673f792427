//! Command-line flags. Each flag's doc comment is its `--help` text.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum};
use wirelog_sink::LogFormat;
use wirelog_store::{Kind, StoreOptions};
use wirelog_track::{PortSet, TrackerConfig};


use crate::limits;
use crate::output::{MinFree, OutputConfig};

/// Most connections a tracker may be asked to hold (far beyond any memory:
/// a larger count is a typo).
pub const MAX_CONNECTIONS: u64 = 1 << 28;

#[derive(Parser, Debug)]
#[command(
    name = "wirelog",
    version,
    about = "Passive network traffic probe: packets to flows, Zeek-style connections and application transactions",
    long_about = "wirelog reads packet captures or live interfaces and turns packets into flows, \
                  connection records with Zeek conn.log semantics and application transactions \
                  (HTTP, MySQL, PostgreSQL, Redis, DNS, with latency), written as Zeek TSV or JSON \
                  logs and to an embedded Parquet store that `wirelog query` reads."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per run: its size costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Read pcap/pcapng files (optionally gzip-compressed) and log their connections.
    ///
    /// Files are read in order as one stream; `-` reads standard input. Flows,
    /// connections and transactions are written to the store (--store, default
    /// ./wirelog-data); without --logs, conn records are also written to standard output.
    ///
    /// Examples:
    ///   wirelog read samples/sample.pcap.gz
    ///   wirelog read -f 'tcp port 3306' --logs mysql-logs --log-format json samples/sample.pcap.gz
    ///   wirelog read --no-store --logs logs --pcap-dir wirelog-pcap samples/sample.pcap.gz
    ///
    /// Exit codes: 0 success; 1 nothing could be read; 2 error; 3 partial: the
    /// disk stayed full and some records could not be written, or the
    /// ClickHouse spool was full (counted in the summary; everything written
    /// is whole).
    #[command(verbatim_doc_comment)]
    Read(ReadArgs),
    /// Query the flows, connections or application transactions in the store.
    ///
    /// Examples:
    ///   wirelog query flows --last 1h
    ///   wirelog query flows --where 'dport = 443 and sip in 10.0.0.0/8' --by sip,dip
    ///   wirelog query conns --where 'conn_state = REJ' --by dip,dport --top 10
    ///   wirelog query conns --by service --every 5m
    ///   wirelog query mysql --by fingerprint --sort p99_latency --top 10
    ///   wirelog query http --where 'status_code >= 500' --by host,uri
    ///   wirelog query dns --where 'rcode_name != NOERROR and ip = 10.0.0.53'
    ///   wirelog query tls --by server_name,version,ja4
    ///   wirelog query tls --where 'established = false' --by server_name,last_alert
    ///   wirelog query tls --where 'not_valid_after < 1798761600' --by server_name,subject
    ///   wirelog query x509 --expiring 30d --by subject,san_dns,not_valid_after
    ///   wirelog query mysql --where 'resp_proc = "mysqld"' --by orig_proc   (capture --processes)
    ///   wirelog query loss --where 'kernel_drops > 0' --by source   (how complete the data is)
    #[command(verbatim_doc_comment)]
    Query(QueryArgs),
    /// Capture live traffic from network interfaces until SIGINT/SIGTERM (or --duration).
    ///
    /// Examples:
    ///   wirelog capture -i eth0 --logs /var/log/wirelog
    ///   wirelog capture -i any --filter 'not port 22' --workers 2
    ///   wirelog capture -i lo --skip-empty-tcp --duration 5s --no-store --logs /tmp/wl
    ///   wirelog capture -i lo --cpu-budget 5% --duration 3s --no-store --logs wl-logs
    ///
    /// Exit codes: 0 success; 2 error; 3 partial: the disk stayed full and
    /// some records could not be written, or the ClickHouse spool was full
    /// (counted; everything written is whole).
    #[command(verbatim_doc_comment)]
    Capture(CaptureArgs),
    /// Serve the web UI, the HTTP API and Prometheus metrics over a store (or ClickHouse).
    ///
    /// Open http://127.0.0.1:9180/ in a browser. The API answers with the
    /// engine of `wirelog query` (see README, "Web UI and API"); with
    /// --clickhouse, over the fleet's ClickHouse tables instead of the store,
    /// as `wirelog query --clickhouse` (README, "Fleet"). Listening on an
    /// address other than loopback needs --token or --token-file.
    ///
    /// Examples:
    ///   wirelog read samples/sample.pcap.gz && wirelog serve
    ///   wirelog serve --store /var/lib/wirelog --listen 0.0.0.0:9180 --token-file /run/wirelog/token
    ///   wirelog serve --clickhouse http://clickhouse:8123 --probe web-3,web-4
    #[command(verbatim_doc_comment)]
    Serve(ServeArgs),
    /// Show what a store holds: partitions, files, rows and bytes per kind,
    /// time range, the captures ingested and retention; `--check` reads
    /// every file back (exit 1 naming the bad ones).
    Store(StoreArgs),
    /// Write the kept packets (`--pcap-dir`) of the connections a query
    /// selects to one pcap file, in time order, found through the index.
    ///
    /// Examples:
    ///   wirelog pcap --where 'uid = CD66B2rqTQAP1fb2EG' -o one.pcap
    ///   wirelog pcap conns --where 'resp_p = 3306' --last 1h -o mysql.pcap
    ///   wirelog pcap http --where 'status_code >= 400' --last 1h -o errors.pcap
    ///
    /// The directory is the one the store's `read`/`capture --pcap-dir`
    /// recorded; --pcap-dir chooses another.
    #[command(verbatim_doc_comment)]
    Pcap(PcapQueryArgs),
    /// Prepare a ClickHouse database for a fleet of probes (`init`) or send
    /// a spool left by an earlier run (`flush`). See README, "Fleet".
    #[command(subcommand)]
    Clickhouse(ClickhouseCommand),
}

#[derive(Subcommand, Debug)]
pub enum ClickhouseCommand {
    /// Create the database and tables (MergeTree by day, ORDER BY probe and
    /// server, LowCardinality, IPv6, DateTime64, codecs, TTL from --retain)
    /// or upgrade them to this wirelog's schema version; says what it cannot do.
    Init(ClickhouseInitArgs),
    /// Send the batches waiting in a spool directory, in order, and exit.
    Flush(ClickhouseFlushArgs),
}

/// Where ClickHouse is (shared by `clickhouse init`, `flush` and the sink).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "ClickHouse")]
pub struct ClickhouseServerArgs {
    /// ClickHouse's HTTP interface, e.g. http://clickhouse:8123.
    #[arg(long = "clickhouse", value_name = "URL")]
    pub url: Option<String>,

    /// ClickHouse user (default: the server's default user).
    #[arg(long, value_name = "USER")]
    pub clickhouse_user: Option<String>,

    /// Read the ClickHouse password from this file (first line); without
    /// it, the WIRELOG_CLICKHOUSE_PASSWORD environment variable is used.
    #[arg(long, value_name = "FILE")]
    pub clickhouse_password_file: Option<PathBuf>,

    /// The ClickHouse database.
    #[arg(long, value_name = "NAME", default_value = "wirelog")]
    pub clickhouse_database: String,

    /// One ClickHouse request (an insert, a query) taking longer fails (and is retried).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub clickhouse_timeout: Duration,
}

#[derive(Args, Debug)]
pub struct ClickhouseInitArgs {
    #[command(flatten)]
    pub server: ClickhouseServerArgs,

    /// Create ReplicatedMergeTree tables `<table>_local` on every node of
    /// this cluster and Distributed tables over them.
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,

    /// ClickHouse deletes rows older than this (a TTL on every table); on an
    /// existing database the TTL is changed to it.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub retain: Option<Duration>,

    /// Print the statements instead of running them.
    #[arg(long)]
    pub print: bool,
}

#[derive(Args, Debug)]
pub struct ClickhouseFlushArgs {
    #[command(flatten)]
    pub server: ClickhouseServerArgs,

    /// The spool directory to send.
    #[arg(long, value_name = "DIR", required = true)]
    pub spool_dir: PathBuf,

    /// Give up (leaving the rest spooled) after this long.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub wait: Duration,
}

/// The ClickHouse sink of `read` and `capture`.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "ClickHouse")]
pub struct ClickhouseSinkArgs {
    #[command(flatten)]
    pub server: ClickhouseServerArgs,

    /// This probe's name in every row it sends (default: the host name).
    #[arg(long, value_name = "NAME")]
    pub probe_name: Option<String>,

    /// Batches ClickHouse did not take wait here (default: clickhouse-spool
    /// in the store directory, else in the log directory, else
    /// ./wirelog-spool).
    #[arg(long, value_name = "DIR")]
    pub spool_dir: Option<PathBuf>,

    /// Most disk the spool takes; batches beyond are dropped and counted.
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size)]
    pub spool_size: u64,

    /// A table's batch is sent at this many rows...
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub clickhouse_batch_rows: u64,

    /// ...or this many bytes (RowBinary, before compression)...
    #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = parse_size)]
    pub clickhouse_batch_bytes: u64,

    /// ...or when its first row is this old, whichever comes first.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub clickhouse_batch_age: Duration,

    /// At the end of the run, keep retrying what is spooled this long; what
    /// is left waits in the spool for the next run (or `clickhouse flush`).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub clickhouse_drain: Duration,

    /// `capture` sends a health row (CPU, RSS, packets, drops, evictions,
    /// parse quality) this often.
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    pub clickhouse_health_interval: Duration,
}

/// Who may reach the server: `--token`/`--token-file` (shared by `serve`
/// and `capture --listen/--metrics-listen`).
#[derive(Args, Debug, Clone, Default)]
pub struct TokenArgs {
    /// Require this token on every request (header `Authorization: Bearer
    /// TOKEN`, or `?token=TOKEN` in a link); needed to listen on an address
    /// other than loopback. At least 16 characters.
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file", help_heading = "Server")]
    pub token: Option<String>,

    /// Read the token from FILE (its first line), so it is not seen in `ps`.
    #[arg(long, value_name = "FILE", help_heading = "Server")]
    pub token_file: Option<PathBuf>,
}

impl TokenArgs {
    pub fn token(&self) -> anyhow::Result<Option<String>> {
        use anyhow::Context;
        match (&self.token, &self.token_file) {
            (Some(t), _) => Ok(Some(t.clone())),
            (None, Some(f)) => {
                let text = std::fs::read_to_string(f)
                    .with_context(|| format!("--token-file {}: cannot read it", f.display()))?;
                let t = text.lines().next().unwrap_or("").trim().to_string();
                if t.is_empty() {
                    anyhow::bail!("--token-file {}: the first line is empty", f.display());
                }
                Ok(Some(t))
            }
            (None, None) => Ok(None),
        }
    }
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The store directory.
    #[arg(long, value_name = "DIR", default_value = "wirelog-data")]
    pub store: PathBuf,

    /// Answer the API and the UI from ClickHouse (the tables `--clickhouse`
    /// probes write) instead of the store: the same questions translated to
    /// SQL, over the whole fleet unless --probe.
    #[command(flatten)]
    pub clickhouse: ClickhouseServerArgs,

    /// Only the rows of these probes (comma-separated; with --clickhouse).
    #[arg(long, value_name = "NAMES", requires = "url")]
    pub probe: Option<String>,

    /// Address and port to listen on (port 0: any free port, printed on start).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9180", help_heading = "Server")]
    pub listen: std::net::SocketAddr,

    #[command(flatten)]
    pub token: TokenArgs,

    /// Abandon a query (HTTP 503) that runs longer than this.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration, help_heading = "Server")]
    pub query_timeout: Duration,

    /// Most rows one API answer may hold.
    #[arg(long, value_name = "N", default_value_t = 10_000, help_heading = "Server")]
    pub max_rows: usize,

    /// Where `read`/`capture --pcap-dir` keep packets: each connection's
    /// packets become a download (`/api/pcap?uid=`, a link in the UI's
    /// connection view).
    #[arg(long, value_name = "DIR")]
    pub pcap_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct StoreArgs {
    /// The store directory.
    #[arg(long, value_name = "DIR", default_value = "wirelog-data")]
    pub store: PathBuf,

    /// Read every file back whole (every column of every row); exit 1 and
    /// name each file that does not.
    #[arg(long)]
    pub check: bool,
}

/// What to query: flows, connections, or the transactions of a protocol of
/// the protocol table (`wirelog_record::Protocol`), so a new protocol is a
/// query kind without a change here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryKind(pub Kind);

static QUERY_KINDS: [QueryKind; Kind::ALL.len()] = {
    let mut all = [QueryKind(Kind::Flows); Kind::ALL.len()];
    let mut i = 0;
    while i < Kind::ALL.len() {
        all[i] = QueryKind(Kind::ALL[i]);
        i += 1;
    }
    all
};

impl ValueEnum for QueryKind {
    fn value_variants<'a>() -> &'a [Self] {
        &QUERY_KINDS
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self.0.protocol() {
            Some(p) => p.what(),
            None if self.0 == Kind::Flows => "Flow counters per 5-minute bucket (goProbe style)",
            None if self.0 == Kind::X509 => {
                "Certificates TLS handshakes showed (x509.log's columns), one row per certificate, role and hour"
            }
            None if self.0 == Kind::Loss => {
                "What the data lacks, per minute and cause (kernel drops, evictions, gaps, sampling, sinks' drops), and how complete it is"
            }
            None => "Connections (Zeek conn.log)",
        };
        Some(PossibleValue::new(self.0.as_str()).help(help))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// An aligned table with human units (the default on a terminal).
    Table,
    /// Comma-separated values with raw numbers (the default otherwise).
    Csv,
    /// JSON.
    Json,
}

#[derive(Args, Debug)]
pub struct QueryArgs {
    /// What to query.
    #[arg(value_enum)]
    pub kind: QueryKind,

    /// Condition on any field: =, !=, <, >, <=, >=, in (lists, CIDRs), host/net
    /// (either side; for transactions `ip`, since http has a `host` field),
    /// ~ (text contains), and/or/not, parentheses.
    #[arg(long = "where", short = 'w', value_name = "EXPR")]
    pub where_: Option<String>,

    /// Group by these fields (comma-separated), e.g. sip,dip,dport.
    #[arg(long, value_name = "FIELDS")]
    pub by: Option<String>,

    /// Sort by this aggregate or field (descending), e.g. bytes, packets, conns;
    /// for transactions count, errors, p50/p95/p99 (latency_p99, p99_latency), avg.
    #[arg(long, value_name = "FIELD")]
    pub sort: Option<String>,

    /// Show at most N groups (series with --every) [default: 10]; 0 shows
    /// all. When groups are left out, a line on standard error says how many,
    /// in every format.
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,

    #[command(flatten)]
    pub time: TimeRangeArgs,

    /// A time series with one row per interval (1m, 5m, 1h, ...).
    #[arg(long, value_name = "DURATION")]
    pub every: Option<String>,

    /// x509 and tls: only certificates whose not_valid_after is before now +
    /// DURATION (e.g. 30d), already expired ones included; the same as
    /// `--where 'not_valid_after < <Unix seconds>'` added to --where.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub expiring: Option<Duration>,

    /// Output format (default: table on a terminal, csv otherwise).
    #[arg(long, value_enum)]
    pub format: Option<OutputFormat>,

    /// The store directory.
    #[arg(long, value_name = "DIR", default_value = "wirelog-data")]
    pub store: PathBuf,

    /// Ask ClickHouse (the tables `--clickhouse` probes write) instead of the
    /// store: the same query translated to SQL, over the whole fleet unless --probe.
    #[command(flatten)]
    pub clickhouse: ClickhouseServerArgs,

    /// Only the rows of these probes (comma-separated; with --clickhouse).
    #[arg(long, value_name = "NAMES", requires = "url")]
    pub probe: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormatArg {
    /// Zeek's tab-separated log format (readable by zeek-cut).
    Tsv,
    /// One JSON object per line, with Zeek's field names.
    Json,
}

/// `--checksums MODE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ChecksumsArg {
    /// Verify, but use packets whose TCP/UDP checksum was never computed
    /// (offloaded: the field holds the pseudo-header sum, as on loopback and
    /// on a host's own outgoing packets); reject the other bad ones as Zeek does.
    Auto,
    /// Zeek's default: every bad checksum makes its packet unusable.
    Verify,
    /// Use every packet whatever its checksums, like `zeek -C`.
    Ignore,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Input")]
pub struct ChecksumArgs {
    /// How IP/TCP/UDP/ICMP checksums are treated. A packet with a bad checksum
    /// is only counted (history letter C/c), as Zeek does; `auto` tells
    /// offloaded checksums (never computed by the sender) from bad ones.
    /// `--verify-checksums` (older capture flag) is the same as `verify`.
    #[arg(long, value_enum, value_name = "MODE", default_value = "auto")]
    pub checksums: ChecksumsArg,

    /// Same as --checksums ignore (`zeek -C`).
    #[arg(short = 'C', long, conflicts_with_all = ["checksums", "verify_checksums"])]
    pub ignore_checksums: bool,

    /// Hidden alias of --checksums verify, kept for older command lines.
    #[arg(long, hide = true, conflicts_with = "checksums")]
    pub verify_checksums: bool,
}

impl ChecksumArgs {
    pub fn mode(&self) -> wirelog_decode::ChecksumMode {
        use wirelog_decode::ChecksumMode as M;
        if self.ignore_checksums {
            return M::Ignore;
        }
        if self.verify_checksums {
            return M::Verify;
        }
        match self.checksums {
            ChecksumsArg::Auto => M::Auto,
            ChecksumsArg::Verify => M::Verify,
            ChecksumsArg::Ignore => M::Ignore,
        }
    }
}

#[derive(Args, Debug)]
pub struct ReadArgs {
    /// Capture files: pcap or pcapng, plain or gzip-compressed; `-` for stdin.
    #[arg(required = true, value_name = "CAPTURE")]
    pub captures: Vec<PathBuf>,

    /// No progress bar and no summary on stderr (problems are still reported).
    #[arg(short, long)]
    pub quiet: bool,

    /// Only packets matching this tcpdump filter expression (e.g. `port 80`,
    /// `host 10.0.0.1 and tcp`, `vlan 100`), compiled by libpcap for each link
    /// type of the input and run on every packet before it is decoded.
    #[arg(short = 'f', long, value_name = "EXPR", help_heading = "Input")]
    pub filter: Option<String>,

    /// Read captures the store already holds (by content) again, which counts
    /// their traffic twice; without it such a read is refused.
    #[arg(long, help_heading = "Input")]
    pub again: bool,

    #[command(flatten)]
    pub output: OutputArgs,

    /// Accepted for symmetry with `capture`: a capture file holds no process
    /// information, so none is recorded (a note says so).
    #[arg(long)]
    pub processes: bool,

    #[command(flatten)]
    pub probe: ProbeArgs,

    #[command(flatten)]
    pub pcap: PcapArgs,
}

/// What the probe makes of packets: checksums, fragments, tracking and
/// parsing (shared by `read` and `capture`: same flags, same defaults).
#[derive(Args, Debug, Clone)]
pub struct ProbeArgs {
    #[command(flatten)]
    pub checksums: ChecksumArgs,

    /// Incomplete IP fragment series are dropped after this long (packet time).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration, help_heading = "Input")]
    pub frag_timeout: Duration,

    /// Drop TCP segments without payload unless they carry SYN, FIN or RST
    /// (IPv4, and IPv6 without extension headers): in the kernel when
    /// capturing, before decoding when reading. Bytes and states are
    /// unchanged; packet counts and history lack the pure ACKs, which conn
    /// records note in an `empty_tcp_skipped` column.
    #[arg(long, help_heading = "Input")]
    pub skip_empty_tcp: bool,

    #[command(flatten)]
    pub track: TrackArgs,

    #[command(flatten)]
    pub app: AppArgs,
}

impl ProbeArgs {
    /// Rejects counts, sizes and durations out of their range, naming the option.
    pub fn check(&self) -> anyhow::Result<()> {
        limits::duration_in_range("--frag-timeout", self.frag_timeout, Duration::from_millis(1), Duration::from_secs(86400))?;
        self.track.check()?;
        self.app.check()
    }

    /// The probe's settings, built once for every packet stream of the command.
    pub fn config(&self) -> Result<wirelog_probe::ProbeConfig, String> {
        let mut track = self.track.tracker_config(&self.app)?;
        track.empty_tcp_skipped = self.skip_empty_tcp;
        Ok(wirelog_probe::ProbeConfig {
            checksums: self.checksums.mode(),
            frag_timeout_ns: self.frag_timeout.as_nanos() as i64,
            track,
        })
    }
}

/// Where records go (shared by `read` and `capture`).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs {
    /// The store directory (created if missing): flows, connections and
    /// transactions as time-partitioned Parquet files, read by `wirelog query` (and DuckDB, ClickHouse, pandas).
    #[arg(long, value_name = "DIR", default_value = "wirelog-data")]
    pub store: PathBuf,

    /// Do not write the store.
    #[arg(long)]
    pub no_store: bool,

    /// Delete store partitions older than this (e.g. 30d).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub retain: Option<Duration>,

    /// Delete the oldest store partitions while the store is larger than this (e.g. 10G).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub retain_size: Option<u64>,

    /// How often a running store writes its buffers out (default 5m): the
    /// tests cross flushes with it while they read.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, hide = true)]
    pub store_flush: Option<Duration>,

    /// Write conn.log, flows.log and the transaction logs (http.log, dns.log,
    /// mysql.log, pgsql.log, redis.log) into this directory (created if
    /// missing) instead of conn records to stdout.
    #[arg(long, value_name = "DIR")]
    pub logs: Option<PathBuf>,

    /// Format of the logs.
    #[arg(long, value_enum, default_value_t = LogFormatArg::Tsv)]
    pub log_format: LogFormatArg,

    /// Write the log fields Zeek writes with these of its policies loaded
    /// (comma-separated, repeatable; `all` for every one): `ssl-log-ext`
    /// (ssl.log's raw hello fields), `ssl-client-subject-issuer` (Zeek's
    /// SSL::log_include_client_certificate_subject_issuer: ssl.log's
    /// client_subject, client_issuer), `log-certs-base64` (x509.log's
    /// cert), `log-hostcerts-only` (x509.log without the chains' CA
    /// certificates), `certificate-request-info` (ssl.log's
    /// requested_client_certificate_authorities), `validate-certs` (ssl.log's
    /// validation_status), `validate-ocsp` (ssl.log's ocsp_status, the
    /// stapled OCSP response checked; both check against --ca-file),
    /// `validate-sct` (ssl.log's valid_ct_logs, valid_ct_operators; turns on
    /// validate-certs).
    #[arg(long, value_name = "LIST")]
    pub zeek_policy: Vec<String>,

    /// The trust store `--zeek-policy validate-certs` checks server chains
    /// against, and validate-ocsp the stapled OCSP responses' signers: a
    /// file of PEM certificates (default: the system's,
    /// /etc/ssl/certs/ca-certificates.crt; Zeek uses the Mozilla list it
    /// ships).
    #[arg(long, value_name = "PEM")]
    pub ca_file: Option<PathBuf>,

    /// The CT logs `--zeek-policy validate-sct` checks SCTs against,
    /// instead of the list wirelog ships (Zeek's): one log a line, its id
    /// and key (base64), operator and description, tab-separated; `#`
    /// starts a comment line (scripts/gen_ct_logs.py writes it from
    /// Zeek's ct-list.zeek).
    #[arg(long, value_name = "FILE")]
    pub ct_logs: Option<PathBuf>,

    /// Free space to leave on the disks of the store and the logs, a size
    /// (500M) or a percentage of the file system (5%); default 5%, at most
    /// 256M. Below it the store's oldest partitions are deleted when a
    /// retention limit (--retain, --retain-size) is set; otherwise writing
    /// pauses, records waiting in memory up to a bound and beyond it dropped
    /// and counted (exit code 3). `0` turns the floor off.
    #[arg(long, value_name = "SIZE|PCT", value_parser = parse_min_free)]
    pub min_free: Option<MinFree>,

    #[command(flatten)]
    pub clickhouse: ClickhouseSinkArgs,
}

impl OutputArgs {
    /// Rejects sizes and durations out of their range, naming the option.
    pub fn check(&self) -> anyhow::Result<()> {
        if let Some(r) = self.retain {
            limits::duration_in_range("--retain", r, Duration::from_secs(60), Duration::from_secs(100 * 365 * 86400))?;
        }
        if let Some(r) = self.retain_size {
            limits::size_in_range("--retain-size", r, 1 << 20, 1 << 60)?;
        }
        if let Some(f) = self.store_flush {
            limits::duration_in_range("--store-flush", f, Duration::from_secs(1), Duration::from_secs(3600))?;
        }
        let policies = self.zeek_policies()?;
        if let (Some(f), false) = (&self.ca_file, policies.iter().any(|p| matches!(*p, "validate-certs" | "validate-ocsp"))) {
            anyhow::bail!("--ca-file {}: only --zeek-policy validate-certs and validate-ocsp use a trust store", f.display());
        }
        if let (Some(f), false) = (&self.ct_logs, policies.contains(&"validate-sct")) {
            anyhow::bail!("--ct-logs {}: only --zeek-policy validate-sct uses a CT log list", f.display());
        }
        Ok(())
    }

    /// The `--zeek-policy` names, checked against the policies wirelog
    /// writes (a policy it does not is named with the reason).
    pub fn zeek_policies(&self) -> anyhow::Result<Vec<&'static str>> {
        use wirelog_record::columns::{ZEEK_POLICIES, ZEEK_POLICIES_NOT_DONE};
        let mut on = Vec::new();
        for name in self.zeek_policy.iter().flat_map(|l| l.split(',')).map(str::trim).filter(|n| !n.is_empty()) {
            if name == "all" {
                on.extend(ZEEK_POLICIES.iter().map(|(n, _)| *n));
            } else if let Some((n, _)) = ZEEK_POLICIES.iter().find(|(n, _)| *n == name) {
                on.push(*n);
            } else if let Some((_, why)) = ZEEK_POLICIES_NOT_DONE.iter().find(|(n, _)| *n == name) {
                anyhow::bail!("--zeek-policy {name}: not written by wirelog ({why})");
            } else {
                let known: Vec<&str> = ZEEK_POLICIES.iter().map(|(n, _)| *n).collect();
                anyhow::bail!("--zeek-policy {name}: unknown policy (known: {}, all)", known.join(", "));
            }
        }
        // validate-sct.zeek loads validate-certs (line 5).
        if on.contains(&"validate-sct") {
            on.push("validate-certs");
        }
        on.sort_unstable();
        on.dedup();
        Ok(on)
    }

    pub fn config(&self) -> OutputConfig {
        let format = match self.log_format {
            LogFormatArg::Tsv => LogFormat::Tsv,
            LogFormatArg::Json => LogFormat::Json,
        };
        let store = (!self.no_store).then(|| {
            let mut opts = StoreOptions { retain_age: self.retain, retain_bytes: self.retain_size, ..StoreOptions::default() };
            if let Some(f) = self.store_flush {
                opts.flush_interval = f;
            }
            (self.store.clone(), opts)
        });
        OutputConfig {
            logs: self.logs.clone(),
            // Checked by `check` before any config is made.
            zeek_policies: self.zeek_policies().unwrap_or_default(),
            ca_file: self.ca_file.clone(),
            ct_logs: self.ct_logs.clone(),
            format,
            store,
            empty_tcp_note: false,
            processes: None,
            tls_join: None,
            min_free: self.min_free.unwrap_or(MinFree::Auto),
            clickhouse: None,
            run: None,
            records: None,
            sample_weights: false,
        }
    }
}

/// Connection and flow tracking options (shared by `read` and `capture`).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Connection tracking")]
pub struct TrackArgs {
    /// Memory for the tracker's tables (per worker when capturing): the
    /// connection table (3/4 of what --stream-memory leaves), the flow table
    /// (1/4 of the whole) and the out-of-order stream buffers (--stream-memory),
    /// whose unused share the flow table may borrow until they need it. The connection limit derived from it is
    /// printed at start and in the summary.
    #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = parse_size)]
    pub memory: u64,

    /// Most connections tracked at once (per worker when capturing), lowering
    /// the limit --memory gives (default: that limit). When full, the least
    /// recently active of a small sample is ended early (its record is written
    /// and counted as evicted).
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,

    /// Inactivity timeout of TCP connections (Zeek: tcp_inactivity_timeout).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub tcp_timeout: Duration,

    /// Inactivity timeout of UDP flows (Zeek: udp_inactivity_timeout).
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    pub udp_timeout: Duration,

    /// Inactivity timeout of ICMP flows (Zeek: icmp_inactivity_timeout).
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    pub icmp_timeout: Duration,

    /// Count content gaps (missed_bytes) also for connections whose handshake
    /// was not seen (Zeek: report_gaps_for_partial).
    #[arg(long)]
    pub report_gaps_for_partial: bool,

    /// Ports where servers listen, used to pick the originator of a connection
    /// whose first packet is not a SYN (Zeek's likely_server_ports): `default`
    /// (the ports Zeek's default scripts register, and those of wirelog's
    /// parsers), `none`, or a list such as
    /// `tcp/80,udp/53,8000-8080` (a bare port means TCP and UDP);
    /// `default,tcp/13001` extends the defaults. Ports named with --ports
    /// are server ports too.
    #[arg(long, value_name = "LIST", default_value = "default")]
    pub server_ports: String,

    /// UDP DNS flows (port 53, 137, 5353, 5355) end after this long without
    /// packets, like Zeek's dns_session_timeout; 0 disables it.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub dns_timeout: Duration,

    /// Length of the flow time buckets, aligned to the wall clock (flows are
    /// written to DIR/flows.log with --logs).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub flow_interval: Duration,

    /// Seed for connection uids, for reproducible output (default: random).
    #[arg(long, value_name = "N", hide = true)]
    pub seed: Option<u64>,
}

impl TrackArgs {
    /// Rejects counts and durations out of their range, naming the option.
    pub fn check(&self) -> anyhow::Result<()> {
        let (sec, day) = (Duration::from_secs(1), Duration::from_secs(86400));
        if let Some(n) = self.max_connections {
            limits::in_range("--max-connections", n as u64, 1, MAX_CONNECTIONS)?;
        }
        limits::size_in_range("--memory", self.memory, 16 << 20, 1 << 44)?;
        limits::duration_in_range("--tcp-timeout", self.tcp_timeout, sec, 30 * day)?;
        limits::duration_in_range("--udp-timeout", self.udp_timeout, sec, 30 * day)?;
        limits::duration_in_range("--icmp-timeout", self.icmp_timeout, sec, 30 * day)?;
        limits::duration_in_range("--flow-interval", self.flow_interval, sec, day)?;
        if !self.dns_timeout.is_zero() {
            limits::duration_in_range("--dns-timeout", self.dns_timeout, Duration::from_millis(1), day)?;
        }
        Ok(())
    }

    /// How --memory is shared: (connections, flows per bucket, stream bytes).
    /// The flow table's limit is its share of the whole of --memory: the
    /// stream buffers' share is lent to it while the buffers leave it
    /// unused (`wirelog_track::SharedMemory`); [`TrackArgs::lent_budget`]
    /// gives its limit once the buffers hold their whole share. The
    /// connection table's is its share of what the buffers' share leaves:
    /// lent to it too, the peak RSS of `tests/memory_budget.rs` (1 M
    /// connections at --memory 128M) measured 188-225 MiB against its bound
    /// of 192 (146-170 without: BENCHMARKS.md, issue 36, branch gp36).
    pub fn budget(&self, app: &AppArgs) -> Result<(usize, usize, u64), String> {
        let stream = if app.no_parse { 0 } else { app.stream_memory };
        if stream > self.memory / 2 {
            return Err(format!(
                "--stream-memory {} is more than half of --memory {}: raise --memory or lower --stream-memory",
                limits::human(stream),
                limits::human(self.memory)
            ));
        }
        let ((conns, _), (_, flows)) = (self.table_shares(self.memory - stream), self.table_shares(self.memory));
        Ok((conns, flows, stream))
    }

    /// With parsing on: (connections, flows per bucket) while the stream
    /// buffers hold their whole share of --memory.
    pub fn lent_budget(&self, app: &AppArgs) -> Result<Option<(usize, usize)>, String> {
        let (_, _, stream) = self.budget(app)?;
        Ok((stream > 0).then(|| self.table_shares(self.memory - stream)))
    }

    /// The tables' shares of `bytes`: 3/4 connections, 1/4 flows.
    fn table_shares(&self, bytes: u64) -> (usize, usize) {
        let conns = (bytes / 4 * 3 / wirelog_track::Tracker::table_bytes_per_connection() as u64) as usize;
        let flows = (bytes / 4 / wirelog_track::Tracker::table_bytes_per_flow() as u64) as usize;
        let conns = self.max_connections.map_or(conns, |m| m.min(conns)).max(1);
        (conns, flows.max(1024))
    }

    /// The tracker's settings, with the application parsing of `app`.
    pub fn tracker_config(&self, app: &AppArgs) -> Result<TrackerConfig, String> {
        let (max_connections, max_flows, _) = self.budget(app)?;
        let (mut tcp_server_ports, mut udp_server_ports) =
            PortSet::parse_list(&self.server_ports).map_err(|e| format!("--server-ports: {e}"))?;
        // wirelog's parsers register their ports as Zeek's analyzers do
        // (Analyzer::register_for_ports adds an analyzer's ports to
        // likely_server_ports): with `default`, each parsed protocol's
        // default ports orient connections too, TCP (and UDP for DNS).
        let with_default = self.server_ports.split(',').any(|t| t.trim() == "default");
        if with_default && !app.no_parse {
            // A protocol given its ports with --ports registers those instead.
            let named: Vec<wirelog_parse::Protocol> = app.named_ports()?.into_iter().map(|(p, _)| p).collect();
            for proto in wirelog_parse::Protocol::ALL.into_iter().filter(|p| !named.contains(p)) {
                for &p in proto.default_ports() {
                    tcp_server_ports.insert(p);
                    if proto == wirelog_parse::Protocol::Dns {
                        udp_server_ports.insert(p);
                    }
                }
            }
        }
        // A port named for a protocol is where its server listens: it orients
        // connections too (a capture that starts mid-connection, a server
        // that speaks first).
        if !app.no_parse {
            for (proto, ports) in app.named_ports()? {
                for &p in &ports {
                    tcp_server_ports.insert(p);
                    if proto == wirelog_parse::Protocol::Dns {
                        udp_server_ports.insert(p);
                    }
                }
            }
        }
        Ok(TrackerConfig {
            tcp_server_ports,
            udp_server_ports,
            dns_session_timeout_ns: self.dns_timeout.as_nanos() as i64,
            tcp_inactivity_ns: self.tcp_timeout.as_nanos() as i64,
            udp_inactivity_ns: self.udp_timeout.as_nanos() as i64,
            icmp_inactivity_ns: self.icmp_timeout.as_nanos() as i64,
            max_connections,
            max_flows,
            report_gaps_for_partial: self.report_gaps_for_partial,
            uid_seed: self.seed,
            flow_interval_ns: self.flow_interval.as_nanos().max(1_000_000) as i64,
            app: app.config()?,
            shared_memory: self.lent_budget(app)?.map(|(_, min_flows)| wirelog_track::SharedMemory {
                bytes: self.memory as usize,
                min_flows,
            }),
            ..TrackerConfig::default()
        })
    }
}

/// Application parsing options (shared by the commands that track connections).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Application transactions")]
pub struct AppArgs {
    /// Do not parse application protocols (no http.log, dns.log, mysql.log,
    /// pgsql.log, redis.log; conn records keep an empty service).
    #[arg(long)]
    pub no_parse: bool,

    /// Server ports of a protocol, replacing its defaults; repeatable, e.g.
    /// `--ports mysql=3306,3307 --ports http=80,8080`. Defaults: http
    /// 80,8000,8080,8888; mysql 3306; pgsql 5432; redis 6379; dns 53,137,5353,5355;
    /// tls 443,465,563,585,614,636,853,989,990,992,993,994,995,5061,5223,5986,8443
    /// (Zeek's SSL ports and a few more). `tls=25,143` also reads STARTTLS
    /// handshakes after SMTP's or IMAP's plaintext.
    /// These ports are server ports for orientation too.
    #[arg(long, value_name = "PROTO=PORTS")]
    pub ports: Vec<String>,

    /// Recognise protocols only by port, not also by the first bytes of a
    /// connection on other ports (which also recognise a server speaking
    /// first, a MySQL greeting, and swap the connection's roles, history ^).
    #[arg(long)]
    pub no_detect: bool,

    /// Replace literals in SQL and CQL statements, values in HTTP query
    /// strings and Memcached keys by `?` in the logs and the store
    /// (fingerprints are kept either way).
    #[arg(long)]
    pub redact: bool,

    /// Keep this HTTP header (request and response) in http.log; repeatable.
    #[arg(long, value_name = "NAME")]
    pub http_header: Vec<String>,

    /// Most bytes of out-of-order TCP data buffered across all parsed
    /// connections (e.g. 64M); beyond it holes are reported as gaps. The
    /// parsers' state is counted in it too (each parsed connection's slot
    /// and parser, HTTP/2's HPACK tables and streams): a connection it has
    /// no room for is not parsed.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = parse_size)]
    pub stream_memory: u64,
}

impl AppArgs {
    /// Rejects sizes out of their range, naming the option.
    pub fn check(&self) -> anyhow::Result<()> {
        limits::size_in_range("--stream-memory", self.stream_memory, 64 << 10, 1 << 40)
    }

    /// The tracker's application settings, or None with --no-parse.
    pub fn config(&self) -> Result<Option<wirelog_track::AppConfig>, String> {
        if self.no_parse {
            return Ok(None);
        }
        let mut cfg = wirelog_track::AppConfig {
            by_content: !self.no_detect,
            total_buffer_bytes: self.stream_memory as usize,
            ..Default::default()
        };
        cfg.parse.redact = self.redact;
        cfg.parse.http_headers = self.http_header.clone();
        for (proto, ports) in self.named_ports()? {
            cfg.ports.set(proto, &ports);
        }
        Ok(Some(cfg))
    }

    /// The `--ports PROTO=PORTS` lists, parsed.
    pub fn named_ports(&self) -> Result<Vec<(wirelog_parse::Protocol, Vec<u16>)>, String> {
        let mut named = Vec::new();
        for spec in &self.ports {
            let (name, list) = spec.split_once('=').ok_or_else(|| {
                format!("--ports {spec}: expected PROTO=PORTS, e.g. mysql=3306,3307")
            })?;
            let proto = wirelog_parse::Protocol::ALL
                .into_iter()
                .find(|p| p.name() == name.trim())
                .ok_or_else(|| {
                    let known: Vec<&str> = wirelog_parse::Protocol::ALL.iter().map(|p| p.name()).collect();
                    format!("--ports {spec}: unknown protocol {name:?} ({})", known.join(", "))
                })?;
            let mut ports = Vec::new();
            for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                ports.push(
                    p.parse::<u16>()
                        .map_err(|_| format!("--ports {spec}: {p:?} is not a port"))?,
                );
            }
            named.push((proto, ports));
        }
        Ok(named)
    }
}

impl ReadArgs {
    /// Every numeric option in its range, before anything is opened.
    pub fn check(&self) -> anyhow::Result<()> {
        self.output.check()?;
        self.probe.check()?;
        self.pcap.check()
    }
}

impl CaptureArgs {
    /// Every numeric option in its range, before any socket opens (the ring
    /// against the machine's memory is checked once the interfaces are known).
    pub fn check(&self) -> anyhow::Result<()> {
        limits::in_range("--workers", self.workers as u64, 1, limits::MAX_WORKERS as u64)?;
        limits::in_range("--snaplen", self.snaplen as u64, 64, limits::MAX_SNAPLEN as u64)?;
        let min_ring = limits::MIN_RING_PER_SOCKET * self.workers as u64;
        if self.ring_size < min_ring {
            limits::size_in_range("--ring-size", self.ring_size, min_ring, u64::MAX)?;
        }
        if let Some(d) = self.duration {
            limits::duration_in_range("--duration", d, Duration::from_millis(1), Duration::from_secs(100 * 365 * 86400))?;
        }
        if let Some(l) = self.tls_plaintext.as_deref().filter(|l| !l.is_empty()) {
            wirelog_tlsplain::Limit::parse(l).map_err(|e| anyhow::anyhow!(e))?;
        }
        if let Some(l) = self.socket_data.as_deref().filter(|l| !l.is_empty()) {
            wirelog_tlsplain::Limit::parse(l).map_err(|e| anyhow::anyhow!(e.replace("--tls-plaintext", "--socket-data")))?;
        }
        if self.tls_plaintext.is_some() || self.socket_data.is_some() {
            limits::size_in_range("--tls-plaintext-ring", self.tls_plaintext_ring, 4096, 1 << 30)?;
            if !self.tls_plaintext_ring.is_power_of_two() {
                anyhow::bail!("--tls-plaintext-ring {}: not a power of two (the kernel's ring buffer needs one)", self.tls_plaintext_ring);
            }
        }
        if self.kernel_accounting {
            // -f and --skip-empty-tcp are stages of the same socket program
            // (capture::sockprog); counted packets never reach the pcap files.
            if self.pcap.pcap_dir.is_some() {
                anyhow::bail!("--kernel-accounting cannot be combined with --pcap-dir (packets counted in the kernel are not kept)");
            }
        }
        self.output.check()?;
        self.probe.check()?;
        self.pcap.check()?;
        self.serve.check()
    }
}

#[derive(Args, Debug)]
#[group(id = "ebpf_sources", multiple = true, args = ["tls_plaintext", "socket_data"])]
pub struct CaptureArgs {
    /// Read options from FILE, one `option = value` per line (names as the
    /// long options of this command without dashes, flags `= true`, repeatable options
    /// on several lines, `#` comments); options on the command line replace
    /// the file's. See README, "Configuration file".
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Print statistics to stderr this often (0: only on exit).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub stats_interval: Duration,

    /// No statistics on stderr (errors are still reported).
    #[arg(short, long)]
    pub quiet: bool,

    /// Interface to capture on (repeatable); `any` captures all of them.
    #[arg(short = 'i', long = "interface", value_name = "IFACE", required = true, help_heading = "Capture")]
    pub interfaces: Vec<String>,

    /// tcpdump filter expression, compiled by libpcap and run in the kernel.
    #[arg(short = 'f', long, value_name = "EXPR", help_heading = "Capture")]
    pub filter: Option<String>,

    /// Worker threads; packets are spread over them by a flow-symmetric hash.
    #[arg(long, value_name = "N", default_value_t = 1, help_heading = "Capture")]
    pub workers: usize,

    /// Bytes kept of each packet. 256 records every MySQL/MariaDB statement
    /// for the least copying (what the server pays for a capture), giving up
    /// the rows of long result sets and text past the cut (README, "Snap length").
    #[arg(long, value_name = "BYTES", default_value_t = 262_144, help_heading = "Capture")]
    pub snaplen: u32,

    /// Receive ring size per interface, split over the workers (it counts in
    /// the RSS; at least 1 MiB per worker). Rings taking more than half of
    /// the memory available (MemAvailable) are refused.
    #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = parse_size, help_heading = "Capture")]
    pub ring_size: u64,

    /// Take a --ring-size larger than half of the memory available.
    #[arg(long, help_heading = "Capture")]
    pub force_ring_size: bool,

    /// Do not put interfaces in promiscuous mode.
    #[arg(long, help_heading = "Capture")]
    pub no_promisc: bool,

    #[command(flatten)]
    pub output: OutputArgs,

    /// Name the process, user and container behind each local end of every
    /// connection and transaction (an eBPF hook at connect time, then
    /// sock_diag and /proc, off the packet path); adds orig_/resp_ pid, proc,
    /// exe, user, container and pod columns to the logs. The resolving thread
    /// keeps CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH after privileges are
    /// dropped.
    #[arg(long)]
    pub processes: bool,

    /// With --processes: do not load the eBPF connect hook (on the
    /// sock:inet_sock_set_state tracepoint), which names the client of a
    /// connection that ends before its socket can be asked about; without
    /// it, sock_diag and /proc only.
    #[arg(long, requires = "processes")]
    pub no_ebpf: bool,

    /// Read the plaintext of TLS connections where processes hand it to
    /// OpenSSL (eBPF uprobes on SSL_read, SSL_write, SSL_read_ex and
    /// SSL_write_ex of every libssl file the system has or a process maps,
    /// and on the socket system calls those make) and parse it as the
    /// packets' bytes are parsed (HTTP/1, MySQL, PostgreSQL, Redis, ...):
    /// transactions inside TLS with the process of each end and the column
    /// source=tls-library (logs, store, ClickHouse, queries), carrying the uid of the packet path's
    /// connection, whose conn.log service becomes e.g. ssl,http. With a
    /// value, only that process: a pid, a process name, or a cgroup path
    /// (starting with /). Needs CAP_BPF and CAP_PERFMON (or root). README:
    /// "Inside TLS".
    #[arg(long, value_name = "PID|COMM|CGROUP", num_args = 0..=1, default_missing_value = "", help_heading = "Inside TLS")]
    pub tls_plaintext: Option<String>,

    /// With --tls-plaintext or --socket-data (one ring for both): the ring
    /// buffer events come through (a power of two, at least a page). When
    /// it is full, events are lost, counted and reported as gaps on their
    /// connections.
    #[arg(long, value_name = "SIZE", default_value = "8M", value_parser = parse_size, requires = "ebpf_sources", help_heading = "Inside TLS")]
    pub tls_plaintext_ring: u64,

    /// Read what processes send and receive on their TCP sockets, from the
    /// system calls' tracepoints (read, write, recvfrom, sendto, recvmsg,
    /// sendmsg, readv, writev; eBPF), and parse it as the packets' bytes
    /// are parsed: one event per message the application handed over,
    /// however many packets carried it. Sockets of the capture's network
    /// namespace only. Each TCP connection's transactions then come from
    /// one source: the socket's (log column source=socket, with the
    /// process of each end) where it parses the connection, the packets'
    /// elsewhere; conn.log comes from the packets. With a value, only that
    /// process: a pid, a process name, or a cgroup path (starting with /).
    /// Needs CAP_BPF and CAP_PERFMON (or root). README: "Inside TLS".
    #[arg(long, value_name = "PID|COMM|CGROUP", num_args = 0..=1, default_missing_value = "", help_heading = "Inside TLS")]
    pub socket_data: Option<String>,

    /// Count in the kernel what changes no record: an eBPF socket filter on
    /// the capture sockets counts the in-order ACK and PSH|ACK segments of
    /// established IPv4 TCP connections with nothing to parse (ports without
    /// a parser, or --no-parse) in a per-connection map, which the tracker
    /// merges, instead of copying them through the ring. Records stay the
    /// same (README: "Kernel accounting" says the limits). Combines with -f
    /// and --skip-empty-tcp (stages of the same socket program); not with
    /// --pcap-dir. When the kernel refuses the program, says so and
    /// captures without it.
    #[arg(long, help_heading = "Capture")]
    pub kernel_accounting: bool,

    /// What the capture may cost: `5%` of one core, or `0.5` cores, for the
    /// whole process (workers, output thread, the rest). Above it, workers
    /// shed work in this order, each step undone when load falls: (1) parse
    /// 1 in N new connections (N adapting, up to 64; their transactions carry
    /// `sample_weight` N); (2) drop empty TCP segments in the kernel (the
    /// --skip-empty-tcp stage of the socket program, switched on); (3) count
    /// established TCP connections in the kernel (--kernel-accounting's
    /// program, loaded at start and switched on); (4) leave packets to the kernel, which drops what the ring cannot
    /// hold. Held within 5% over any 10 s (README: "CPU budget"). Default:
    /// no budget.
    #[arg(long, value_name = "P", value_parser = parse_cpu_budget, help_heading = "Capture")]
    pub cpu_budget: Option<wirelog_capture::budget::CpuBudget>,

    /// Run as this user once the capture sockets are open (default: nobody
    /// when started as root; `root` keeps root).
    #[arg(long, value_name = "USER", help_heading = "Capture")]
    pub user: Option<String>,

    /// Stop after this long (default: run until SIGINT/SIGTERM).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, help_heading = "Capture")]
    pub duration: Option<Duration>,

    #[command(flatten)]
    pub probe: ProbeArgs,

    #[command(flatten)]
    pub pcap: PcapArgs,

    #[command(flatten)]
    pub serve: CaptureServeArgs,
}

/// Keeping packets (`--pcap-dir`), shared by `read` and `capture`.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Keeping packets")]
pub struct PcapArgs {
    /// Keep packets in nanosecond pcap files in DIR (created if missing),
    /// each with an index of its connections' uids for `wirelog pcap`.
    /// Written on a thread of their own; what it cannot take in time is
    /// dropped from the files (counted), never from the records.
    #[arg(long, value_name = "DIR")]
    pub pcap_dir: Option<PathBuf>,

    /// Start a new file before one grows past SIZE.
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size, requires = "pcap_dir")]
    pub pcap_file_size: u64,

    /// Also start a new file at every multiple of DURATION since the epoch
    /// (packet time; 1h: on the hour).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "pcap_dir")]
    pub pcap_rotate: Option<Duration>,

    /// Delete the oldest files beyond these bounds: count=N (files),
    /// size=SIZE (all files, the open one counted at --pcap-file-size),
    /// age=DURATION (packet time), e.g. count=100,size=50G,age=7d. The open
    /// file is never deleted.
    #[arg(long, value_name = "BOUNDS", requires = "pcap_dir")]
    pub pcap_keep: Option<String>,

    /// Which connections' packets: all (and packets of no connection), or
    /// parsed (connections with a protocol parser, from the packet that
    /// chose the parser on).
    #[arg(long, value_enum, value_name = "WHICH", default_value_t = PcapConns::All, requires = "pcap_dir")]
    pub pcap_conns: PcapConns,

    /// Keep only the first SIZE of payload of each side of a connection
    /// (the packet crossing it whole), plus every packet with SYN, FIN or RST.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, requires = "pcap_dir")]
    pub pcap_cutoff: Option<u64>,

    /// Bytes kept of each packet.
    #[arg(long, value_name = "BYTES", default_value_t = 262_144, requires = "pcap_dir")]
    pub pcap_snaplen: u32,

    /// Keep only packets matching this tcpdump filter expression too.
    #[arg(long, value_name = "EXPR", requires = "pcap_dir")]
    pub pcap_filter: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PcapConns {
    All,
    Parsed,
}

/// The time range of a query over the store (`query`, `pcap`).
#[derive(Args, Debug, Clone)]
pub struct TimeRangeArgs {
    /// Only the last DURATION (e.g. 15m, 24h), relative to now.
    #[arg(long, value_name = "DURATION", conflicts_with_all = ["from", "to"], value_parser = parse_duration)]
    pub last: Option<Duration>,

    /// Start of the time range (RFC 3339, e.g. 2026-11-22T13:00:00Z, or Unix seconds).
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,

    /// End of the time range (exclusive).
    #[arg(long, value_name = "TIME")]
    pub to: Option<String>,
}

#[derive(Args, Debug)]
pub struct PcapQueryArgs {
    /// Which records select the connections: conns (default) or a
    /// protocol's transactions (their connections' packets are written).
    #[arg(value_enum, default_value = "conns")]
    pub kind: QueryKind,

    /// Condition on any field of the records, as `wirelog query --where`.
    #[arg(long = "where", short = 'w', value_name = "EXPR")]
    pub where_: Option<String>,

    #[command(flatten)]
    pub time: TimeRangeArgs,

    /// The store directory.
    #[arg(long, value_name = "DIR", default_value = "wirelog-data")]
    pub store: PathBuf,

    /// The directory `--pcap-dir` wrote (default: the one the store's
    /// `read`/`capture --pcap-dir` recorded in it).
    #[arg(long, value_name = "DIR")]
    pub pcap_dir: Option<PathBuf>,

    /// The pcap file to write (`-`: standard output).
    #[arg(short = 'o', long, value_name = "FILE", required = true)]
    pub output: PathBuf,
}

/// `capture --listen` / `--metrics-listen`: the server of `wirelog serve`
/// inside the running probe, on its own thread and runtime.
#[derive(Args, Debug, Clone, Default)]
pub struct CaptureServeArgs {
    /// Serve the web UI, the API (over this capture's store) and /metrics
    /// with the capture's live counters on ADDR (e.g. 127.0.0.1:9180).
    #[arg(long, value_name = "ADDR", help_heading = "Server")]
    pub listen: Option<std::net::SocketAddr>,

    /// Serve only Prometheus /metrics (the live counters) on ADDR.
    #[arg(long, value_name = "ADDR", help_heading = "Server")]
    pub metrics_listen: Option<std::net::SocketAddr>,

    /// With --listen: memory for the capture's records not yet in the store
    /// (the store flushes every 5 minutes), which the API answers with the
    /// store's, each record once. Past it the oldest are let go (counted,
    /// and said in each answer that lacks them) until the store has them.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = parse_size, requires = "listen", help_heading = "Server")]
    pub live_memory: u64,

    #[command(flatten)]
    pub token: TokenArgs,
}

impl CaptureServeArgs {
    pub fn check(&self) -> anyhow::Result<()> {
        let token = self.token.token()?;
        for (flag, addr) in [("--listen", self.listen), ("--metrics-listen", self.metrics_listen)] {
            if let Some(a) = addr {
                wirelog_serve::check_listen(&a, token.as_deref(), flag).map_err(|e| anyhow::anyhow!(e))?;
            }
        }
        if self.listen.is_some() && self.listen == self.metrics_listen {
            anyhow::bail!("--metrics-listen: the same address as --listen (which serves /metrics too)");
        }
        limits::size_in_range("--live-memory", self.live_memory, 1 << 20, 1 << 40)?;
        if let Some(avail) = limits::mem_available().filter(|&a| self.listen.is_some() && self.live_memory > a / 2) {
            anyhow::bail!(
                "--live-memory {}: more than half of the memory available ({}); give less",
                limits::human(self.live_memory),
                limits::human(avail)
            );
        }
        Ok(())
    }
}

/// Parses `500M`, `10G`, `1T`, `4096` (bytes; K/M/G/T are powers of 1024).
/// `--cpu-budget`: a share of one core (`5%`) or cores (`0.5`).
pub fn parse_cpu_budget(s: &str) -> Result<wirelog_capture::budget::CpuBudget, String> {
    wirelog_capture::budget::CpuBudget::parse(s)
}

pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().trim_end_matches(['B', 'b']);
    let (num, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        Some('T' | 't') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a size (e.g. 500M, 10G)"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("'{s}' is not a size"));
    }
    Ok((v * mult as f64) as u64)
}

/// Parses `--min-free`: a size (`500M`) or a percentage (`5%`).
pub fn parse_min_free(s: &str) -> Result<MinFree, String> {
    match s.trim().strip_suffix('%') {
        Some(p) => {
            let v: f64 = p.trim().parse().map_err(|_| format!("'{s}' is not a percentage (e.g. 5%)"))?;
            if !(0.0..=50.0).contains(&v) {
                return Err(format!("'{s}': the free-space floor must be between 0% and 50%"));
            }
            Ok(MinFree::Percent(v))
        }
        None => parse_size(s).map(MinFree::Bytes),
    }
}

/// Parses `90`, `90s`, `5m`, `1h`, `250ms`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (e.g. 90s, 5m, 1h)"))?;
    let secs = match unit {
        "" | "s" => v,
        "ms" => v / 1000.0,
        "m" => v * 60.0,
        "h" => v * 3600.0,
        "d" => v * 86400.0,
        _ => {
            return Err(format!(
                "'{s}': unknown unit '{unit}' (use ms, s, m, h or d)"
            ))
        }
    };
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(format!("'{s}' is not a duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("x").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("10G").unwrap(), 10 << 30);
        assert_eq!(parse_size("500MB").unwrap(), 500 << 20);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("ten").is_err());
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
