//! Inside TLS, from the TLS library (`capture --tls-plaintext`): the
//! plaintext processes hand OpenSSL's `SSL_read`/`SSL_write` (and their
//! `_ex` forms), read by eBPF programs on uprobes of the library file
//! (`programs`), placed on their TCP connection through the process's
//! descriptor (`sockets`), parsed by the packet path's parsers
//! (`streams`), and joined with the packet path's connection on the output
//! thread (`join`), so their records carry that connection's uid.
//!
//! Threads: [`Capturer::load`] (privileged) makes the maps, loads the
//! programs and attaches them to the system's libssl files and to those the
//! running processes map (`libs`); [`Capturer::spawn`] starts the one
//! reader thread (`wirelog-tls`), which takes the ring buffer's events,
//! scans /proc for new processes and library files twice a second, and
//! hands each round's transactions to the caller's `emit` (the binary
//! sends them to the output stage). No packet worker is involved.
//!
//! The socket as a source (`capture --socket-data`, `socket`): programs on
//! the socket system calls' tracepoints write events of the same layout to
//! the same ring, read by the same thread into streams of their own
//! (source `socket`), whose connections are claimed (`claims`) so that the
//! join keeps one source of transactions per connection.

mod claims;
mod join;
mod libs;
mod programs;
mod socket;
mod sockets;
mod streams;

pub use claims::Claims;
pub use join::{Join, JoinStats};
pub use libs::Limit;
pub use programs::{DATA_CAP, HDR};

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wirelog_ebpf::{attach_uprobe, Attachment, ElfSymbols, Error, Program, Tracepoint};
use wirelog_parse::ParseConfig;
use wirelog_record::{TxRecord, TxSource};

use programs::{Event, Maps};

/// The default ring buffer: 8 MiB (about 500 events of the largest size,
/// many more of small messages).
pub const DEFAULT_RING: usize = 8 << 20;
/// Library files and processes are looked for this often.
const SCAN_EVERY: Duration = Duration::from_millis(500);
/// How often the reader looks at the ring (the programs do not wake it):
/// at 8 MiB, a ring fills in this time only above 800 MB/s of plaintext.
const POLL_MS: i32 = 10;
/// Events read per round before the thread looks at the clock.
const EVENTS_PER_ROUND: usize = 4096;

#[derive(Debug, Clone)]
pub struct Config {
    /// `--tls-plaintext`: the TLS library's probes (without: the socket's
    /// programs only).
    pub tls_library: bool,
    /// Only these processes (`--tls-plaintext PID|COMM|CGROUP`).
    pub limit: Option<Limit>,
    /// `--socket-data [PID|COMM|CGROUP]`: the socket system calls' events,
    /// of these processes only with a limit.
    pub socket: Option<Option<Limit>>,
    /// The ring buffer's size in bytes (a power of two, pages).
    pub ring_size: usize,
    pub parse: ParseConfig,
}

/// Counters of the reader thread, readable while it runs.
#[derive(Debug, Default)]
pub struct Stats {
    pub events: AtomicU64,
    pub bytes: AtomicU64,
    /// Events placed on no connection: their call made no socket system
    /// call and their `SSL` was not seen on one before, or their fd is not
    /// a TCP/IP socket (TLS over a pipe, a UNIX socket, a file).
    pub unplaced_events: AtomicU64,
    pub unplaced_bytes: AtomicU64,
    pub no_fd: AtomicU64,
    pub not_socket: AtomicU64,
    /// Of those, events of a socket already closed by a reset (its local
    /// port taken back) whose `SSL` was not seen before.
    pub closed_socket: AtomicU64,
    /// Events of a second process or `SSL` on an end already followed
    /// (one view per end is parsed).
    pub other_end_events: AtomicU64,
    /// Transactions of a server's view left out because the client's view
    /// of the same connection was parsed (both ends on this host).
    pub server_view_txs: AtomicU64,
    pub conns: AtomicU64,
    pub conns_over_limit: AtomicU64,
    pub parsed_conns: AtomicU64,
    pub undetected_conns: AtomicU64,
    /// Gaps given to parsers (lost ring records, truncated events, out of
    /// order events) and their bytes.
    pub gaps: AtomicU64,
    pub gap_bytes: AtomicU64,
    pub truncated: AtomicU64,
    pub out_of_order: AtomicU64,
    /// Ring records the kernel could not write (full) and their bytes.
    pub ring_lost: AtomicU64,
    pub ring_lost_bytes: AtomicU64,
    pub transactions: AtomicU64,
    /// Library files probed, and those that could not be.
    pub files: AtomicU64,
    pub files_refused: AtomicU64,
    /// CPU time of the reader thread, ns.
    pub cpu_ns: AtomicU64,
    /// The bytes an event carries at most: 0 for the TLS library's
    /// ([`DATA_CAP`]), else the socket's.
    pub cap: AtomicU64,
}

impl Stats {
    fn add(&self, c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = |a: &AtomicU64| a.load(Relaxed);
        if g(&self.files) + g(&self.files_refused) > 0 {
            write!(f, "{} library files probed ({} refused); ", g(&self.files), g(&self.files_refused))?;
        }
        write!(
            f,
            "{} events ({} bytes), {} transactions; {} connections ({} parsed, {} not recognised, {} over the limit); \
             {} events of a second process on an end; {} server-side transactions left for the client's; {} events on no connection ({} bytes: {} without a socket call, {} not on a TCP/IP socket, {} on a socket reset before its first event); \
             gaps: {} ({} bytes; {} ring records lost ({} bytes), {} events cut at {} bytes, {} out of order); reader CPU {:.3} s",
            g(&self.events),
            g(&self.bytes),
            g(&self.transactions),
            g(&self.conns),
            g(&self.parsed_conns),
            g(&self.undetected_conns),
            g(&self.conns_over_limit),
            g(&self.other_end_events),
            g(&self.server_view_txs),
            g(&self.unplaced_events),
            g(&self.unplaced_bytes),
            g(&self.no_fd),
            g(&self.not_socket),
            g(&self.closed_socket),
            g(&self.gaps),
            g(&self.gap_bytes),
            g(&self.ring_lost),
            g(&self.ring_lost_bytes),
            g(&self.truncated),
            if g(&self.cap) == 0 { DATA_CAP as u64 } else { g(&self.cap) },
            g(&self.out_of_order),
            g(&self.cpu_ns) as f64 / 1e9
        )
    }
}

/// The programs of the library functions, attached per file.
struct Probes {
    entry: Program,
    entry_ex: Program,
    ret: [Program; 4],
}

/// Loaded and attached; the reader thread not yet started.
pub struct Capturer {
    maps: Maps,
    /// `--tls-plaintext`'s library programs and system-call programs.
    probes: Option<Probes>,
    _fd_progs: Vec<(Program, Attachment)>,
    /// `--socket-data`'s programs, its limit and its counters.
    socket: Option<socket::SocketPrograms>,
    socket_stats: Arc<Stats>,
    claims: Arc<Claims>,
    attached: Vec<Attachment>,
    scanner: libs::Scanner,
    cfg: Config,
    stats: Arc<Stats>,
    /// Lines to print once the capture started (files that could not be
    /// probed, tracefs mounted).
    pub notes: Vec<String>,
}

impl Capturer {
    /// Makes the maps, loads the programs, attaches the system-call
    /// programs and the library probes to every libssl file on the
    /// system's library path and mapped by a running process. Needs
    /// CAP_BPF + CAP_PERFMON (or root); the error says what was refused.
    pub fn load(cfg: Config) -> Result<Capturer, Error> {
        let maps = Maps::create(cfg.ring_size, cfg.limit.is_some())?;
        let offsets = programs::Offsets::from_kernel()?;
        let mut notes = Vec::new();
        let socket = match &cfg.socket {
            None => None,
            Some(limit) => {
                let netns = std::fs::metadata("/proc/self/ns/net").map(|m| std::os::unix::fs::MetadataExt::ino(&m) as u32).map_err(|e| Error {
                    what: "--socket-data: reading /proc/self/ns/net (the capture's network namespace)".into(),
                    os: e,
                    log: String::new(),
                })?;
                let p = socket::SocketPrograms::load(&maps, limit.is_some(), &offsets, netns)?;
                if let Some(m) = &p.mounted {
                    notes.push(format!("wirelog: socket-data: tracefs was not mounted; mounted it at {}", m.display()));
                }
                Some(p)
            }
        };
        let mut c = Capturer {
            maps,
            probes: None,
            _fd_progs: Vec::new(),
            socket,
            socket_stats: Arc::new(Stats { cap: AtomicU64::new(socket::SOCKET_CAP as u64), ..Stats::default() }),
            claims: Arc::default(),
            attached: Vec::new(),
            scanner: libs::Scanner::default(),
            cfg,
            stats: Arc::default(),
            notes,
        };
        if c.cfg.tls_library {
            c.load_tls(&offsets)?;
        } else if c.socket_limited() {
            // Processes named by the socket's limit are watched from now.
            let found = c.scanner.round();
            c.watch(&found.new_pids);
        }
        Ok(c)
    }

    /// `--tls-plaintext`: the library probes' programs, the system-call
    /// programs that note their fds, and the probes on every libssl file
    /// of the system and of the running processes.
    fn load_tls(&mut self, offsets: &programs::Offsets) -> Result<(), Error> {
        let maps = &self.maps;
        let probes = Probes {
            entry: programs::entry(maps, false)?,
            entry_ex: programs::entry(maps, true)?,
            // In `programs::ret_index` order.
            ret: [
                programs::ret(maps, programs::DIR_READ, false)?,
                programs::ret(maps, programs::DIR_WRITE, false)?,
                programs::ret(maps, programs::DIR_READ, true)?,
                programs::ret(maps, programs::DIR_WRITE, true)?,
            ],
        };
        let mut fd_progs = Vec::new();
        for sc in programs::FD_SYSCALLS {
            let tp = Tracepoint::find("syscalls", &format!("sys_enter_{sc}"))?;
            if let Some(m) = &tp.mounted {
                self.notes.push(format!("wirelog: tls-plaintext: tracefs was not mounted; mounted it at {}", m.display()));
            }
            let p = programs::syscall(maps, &tp, offsets)?;
            let a = tp.attach(&p)?;
            fd_progs.push((p, a));
        }
        self.probes = Some(probes);
        self._fd_progs = fd_progs;
        let c = self;
        let mut files = libs::system_files();
        let found = c.scanner.round();
        c.watch(&found.new_pids);
        for f in found.files {
            if !files.iter().any(|(i, _)| *i == f.0) {
                files.push(f);
            }
        }
        for (id, path) in files {
            if let Err(e) = c.probe_file(id, &path) {
                c.notes.push(format!("wirelog: tls-plaintext: {} not probed: {e}", libs::shown(&path)));
            }
        }
        if c.scanner.files.is_empty() {
            c.notes.push("wirelog: tls-plaintext: no libssl file found yet; processes are watched for one".into());
        }
        Ok(())
    }

    /// The library files probed, as shown to users.
    pub fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = self.scanner.files.values().map(|p| libs::shown(p)).collect();
        v.sort();
        v
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// `--socket-data`: the reader's claims on the connections its socket
    /// streams parse, for the join (`Join::with_socket_claims`).
    pub fn claims(&self) -> Arc<Claims> {
        self.claims.clone()
    }

    fn probe_file(&mut self, id: libs::FileId, path: &std::path::Path) -> Result<(), Error> {
        let Some(probes) = &self.probes else { return Ok(()) };
        let syms = ElfSymbols::read(path)?;
        let mut n = 0;
        let mut attached = Vec::new();
        for (name, dir, ex) in programs::FUNCTIONS {
            let Some(off) = syms.offset(name) else { continue };
            let entry = if ex { &probes.entry_ex } else { &probes.entry };
            attached.push(attach_uprobe(entry, path, off, false)?);
            attached.push(attach_uprobe(&probes.ret[programs::ret_index(dir, ex)], path, off, true)?);
            n += 1;
        }
        if n == 0 {
            return Err(Error {
                what: "it has none of SSL_read, SSL_write, SSL_read_ex, SSL_write_ex, gnutls_record_recv, gnutls_record_send".into(),
                os: std::io::Error::from(std::io::ErrorKind::NotFound),
                log: String::new(),
            });
        }
        self.attached.extend(attached);
        self.scanner.files.insert(id, PathBuf::from(path));
        self.stats.add(&self.stats.files, 1);
        Ok(())
    }

    fn watch(&self, pids: &[u32]) {
        if let Some(l) = &self.cfg.limit {
            for &p in pids {
                if l.matches(p) {
                    self.maps.watch(p);
                }
            }
        }
        if let (Some(Some(l)), Some(s)) = (&self.cfg.socket, &self.socket) {
            for &p in pids {
                if l.matches(p) {
                    s.maps.watch(p);
                }
            }
        }
    }

    /// Starts the reader thread, which hands each round's transactions to
    /// `emit` until `stop` is set, then finishes every connection. It
    /// inherits the calling thread's credentials: call it from a thread
    /// allowed to read other users' /proc/PID/fd.
    pub fn spawn(
        self,
        stop: Arc<AtomicBool>,
        mut emit: impl FnMut(&mut Vec<TxRecord>) + Send + 'static,
    ) -> std::io::Result<Running> {
        let stats = self.stats.clone();
        let socket_stats = self.socket.is_some().then(|| self.socket_stats.clone());
        let handle = std::thread::Builder::new().name("wirelog-tls".into()).spawn(move || {
            let mut c = self;
            c.run(&stop, &mut emit);
        })?;
        Ok(Running { handle, stats, socket_stats })
    }

    fn run(&mut self, stop: &AtomicBool, emit: &mut dyn FnMut(&mut Vec<TxRecord>)) {
        let mut streams = streams::Streams::new(self.cfg.parse.clone());
        let mut socket_streams = streams::Streams::sockets(self.cfg.parse.clone(), self.claims.clone());
        let mut out = Vec::new();
        let mut next_scan = Instant::now() + SCAN_EVERY;
        let mut malformed = 0u64;
        let stats = self.stats.clone();
        let socket_stats = self.socket_stats.clone();
        loop {
            let stopping = stop.load(Relaxed);
            // The programs never wake this thread (see `programs::ret`): it
            // looks every POLL_MS.
            self.maps.ring.wait(if stopping { 0 } else { POLL_MS });
            // Events of calls that returned before this are committed by
            // the time the ring is read (the join's watermark, `claims`).
            let read_from = wall_ns();
            // Everything committed before the stop is read.
            loop {
                let n = self.maps.ring.read(EVENTS_PER_ROUND, |r| match Event::parse(r) {
                    Some(ev) if ev.socket => socket_streams.event(&ev, &socket_stats),
                    Some(ev) => streams.event(&ev, &stats),
                    None => malformed += 1,
                });
                if n < EVENTS_PER_ROUND {
                    break;
                }
            }
            self.claims.set_watermark(read_from);
            streams.flush_clients(&mut out, &stats);
            socket_streams.flush_clients(&mut out, &socket_stats);
            let now = Instant::now();
            if now >= next_scan || stopping {
                next_scan = now + SCAN_EVERY;
                streams.tick(wall_ns(), &mut out, &stats);
                socket_streams.tick(wall_ns(), &mut out, &socket_stats);
                // One ring: its losses are both sources'.
                let (lost, lost_bytes) = self.maps.lost();
                let cpu = thread_cpu_ns();
                for s in [&stats, &socket_stats] {
                    s.ring_lost.store(lost, Relaxed);
                    s.ring_lost_bytes.store(lost_bytes, Relaxed);
                    s.cpu_ns.store(cpu, Relaxed);
                }
                if !stopping {
                    self.scan();
                }
            }
            if stopping {
                streams.finish(wall_ns(), &mut out, &stats);
                socket_streams.finish(wall_ns(), &mut out, &socket_stats);
            }
            let from_socket = out.iter().filter(|t| t.source == TxSource::Socket).count() as u64;
            stats.add(&stats.transactions, out.len() as u64 - from_socket);
            socket_stats.add(&socket_stats.transactions, from_socket);
            emit(&mut out);
            out.clear();
            if stopping {
                break;
            }
        }
        if malformed > 0 {
            eprintln!("wirelog: tls-plaintext: {malformed} ring records too short for their header (not ours?)");
        }
    }

    /// New processes (watched when a limit names them) and library files
    /// (probed; without the privilege any more, counted).
    /// `--socket-data` with a process limit (new processes are looked for).
    fn socket_limited(&self) -> bool {
        matches!(self.cfg.socket, Some(Some(_)))
    }

    fn scan(&mut self) {
        if self.probes.is_none() && !self.socket_limited() {
            // Nothing to look for: no library to probe, no process to match.
            return;
        }
        let found = self.scanner.round();
        self.watch(&found.new_pids);
        if self.probes.is_none() {
            return;
        }
        for (id, path) in found.files {
            if self.probe_file(id, &path).is_err() {
                self.stats.add(&self.stats.files_refused, 1);
                // Not tried again.
                self.scanner.files.insert(id, path);
            }
        }
    }
}

/// The reader thread, running.
pub struct Running {
    handle: JoinHandle<()>,
    stats: Arc<Stats>,
    socket_stats: Option<Arc<Stats>>,
}

impl Running {
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// `--socket-data`'s counters (its own streams; the ring is shared).
    pub fn socket_stats(&self) -> Option<Arc<Stats>> {
        self.socket_stats.clone()
    }

    /// Waits for the thread (its stop flag set) to finish its connections.
    pub fn join(self) -> Arc<Stats> {
        let _ = self.handle.join();
        self.stats
    }
}

fn wall_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::sync::Mutex;
    use wirelog_record::{Detail, TxSource};

    fn have(cmd: &str) -> bool {
        Command::new("sh").arg("-c").arg(format!("command -v {cmd}")).stdout(Stdio::null()).status().is_ok_and(|s| s.success())
    }

    /// The programs pass the verifier and attach to the system's libssl;
    /// an HTTPS request between two OpenSSL programs (Python's ssl module
    /// and curl) comes out as one HTTP transaction, with the right
    /// roles, sizes and processes, from both processes' events.
    #[test]
    fn an_https_request_between_two_openssl_programs_is_one_transaction() {
        if !wirelog_ebpf::tests_can_load() {
            return;
        }
        if !have("openssl") || !have("curl") {
            eprintln!("SKIPPED: needs openssl and curl");
            return;
        }
        let dir = std::env::temp_dir().join(format!("wl-tlsplain-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
            .args(["-subj", "/CN=localhost", "-keyout"])
            .arg(dir.join("k.pem"))
            .arg("-out")
            .arg(dir.join("c.pem"))
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success());
        let cfg = Config { tls_library: true, limit: None, socket: None, ring_size: 1 << 20, parse: ParseConfig::default() };
        let c = Capturer::load(cfg).unwrap_or_else(|e| panic!("{e}"));
        assert!(!c.files().is_empty(), "no libssl probed: {:?}", c.notes);
        let got: Arc<Mutex<Vec<TxRecord>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let sink = got.clone();
        let running = c.spawn(stop.clone(), move |txs| sink.lock().unwrap().append(txs)).unwrap();
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        // Python's ssl module (SSL_read_ex/SSL_write_ex on the same libssl).
        let script = format!(
            "import http.server, ssl\n\
             class H(http.server.BaseHTTPRequestHandler):\n\
             \x20   protocol_version = 'HTTP/1.1'\n\
             \x20   def do_GET(self):\n\
             \x20       b = b'x' * 3000\n\
             \x20       self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)\n\
             \x20   def log_message(self, *a): pass\n\
             s = http.server.HTTPServer(('127.0.0.1', {port}), H)\n\
             c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain('{cert}', '{key}')\n\
             s.socket = c.wrap_socket(s.socket, server_side=True)\n\
             s.serve_forever()\n",
            cert = dir.join("c.pem").display(),
            key = dir.join("k.pem").display()
        );
        let mut server = Command::new("python3").arg("-c").arg(script).stdout(Stdio::null()).spawn().unwrap();
        let url = format!("https://127.0.0.1:{port}/hello");
        let mut body = None;
        for _ in 0..50 {
            let o = Command::new("curl").args(["-sk", "--http1.1", "-o", "-", "-w", "\n%{size_download}", &url]).output().unwrap();
            if o.status.success() {
                body = Some(String::from_utf8_lossy(&o.stdout).into_owned());
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let body = body.expect("the server answers");
        let size: u64 = body.rsplit('\n').next().unwrap().parse().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Relaxed);
        let stats = running.join();
        let _ = server.kill();
        let _ = server.wait();
        let _ = std::fs::remove_dir_all(&dir);
        let txs = got.lock().unwrap();
        let http: Vec<_> = txs.iter().filter(|t| matches!(t.tx.detail, Detail::Http(_))).collect();
        assert_eq!(http.len(), 1, "{txs:#?}\n{stats}");
        let t = http[0];
        let Detail::Http(h) = &t.tx.detail else { unreachable!() };
        assert_eq!(&*h.method, "GET");
        assert_eq!(&*h.uri, "/hello");
        assert_eq!(h.status_code, 200, "{t:#?}\n{stats}");
        assert_eq!(h.response_body_len, size, "{h:?}");
        assert_eq!(t.source, TxSource::TlsLibrary);
        assert_eq!(t.resp_p, port);
        assert_eq!(t.orig_proc.as_ref().map(|o| o.name.as_str()), Some("curl"), "{t:#?}\n{stats}");
        assert_eq!(t.resp_proc.as_ref().map(|o| o.name.as_str()), Some("python3"), "{stats}");
    }
}
