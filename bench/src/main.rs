//! wirelog's benchmark tools.
//!
//! `wirelog-bench pipeline [--copies N] [--snap B] [--reps R] [--parse] PCAP...`
//!   Loads real packets into memory, then times decode + connection tracking
//!   over them (checksums not verified, as `wirelog read -C`), conn records
//!   built and dropped. With `--copies N` every packet is replayed N times with
//!   its addresses rewritten per copy, interleaved, so N times as many
//!   connections are open at once. With `--parse`, application parsing is on
//!   (stream reassembly, HTTP/MySQL/PostgreSQL/Redis/DNS parsers), as in
//!   `wirelog read`. Prints one `key=value` line per run.
//!
//! `wirelog-bench scale --copies N [--snap B] [--sequential] IN.pcap OUT.pcap`
//!   Writes the same scaled corpus as a pcap file, for tools that read files.
//!   With `--sequential` copy k follows copy k-1 in time instead (its packets
//!   shifted by k times the capture's span plus a second), as hours of
//!   traffic would; it is streamed, never held in memory, and OUT may be `-`
//!   (stdout).
//!
//! `wirelog-bench filter EXPR [--copies N] [--reps R] PCAP...`
//!   Times the `read -f` filter alone (libpcap's program run by our classic
//!   BPF interpreter) over packets in memory.
//!
//! `wirelog-bench streams --conns N [--rounds R]`
//!   Memory with N parsed HTTP connections open at once and after they end
//!   (see `streams`).
//!
//! `wirelog-bench conns --kind tcp|tcp-synack|udp|other [--conns N] [--clients K] [--write FILE]`
//!   Resident memory per open connection (or flow) with N open, and the
//!   packet cost at that table size; or those packets as a pcap file (see `conns`).
//!
//! `wirelog-bench serve-store [--conns N] [--tx N] [--hours H] [--services S] --out DIR`
//!   A store of synthetic connections and transactions over the last H hours
//!   for the UI's benchmark, `bench/serve_latency.py` (see `serve_store`).
//!
//! `wirelog-bench store --rows N --out DIR PCAP...`
//!   Builds a store of at least N flow rows for query benchmarks: the flows of
//!   the real capture (5-minute buckets), copied with their addresses rewritten
//!   per copy and spread over the 288 buckets of a day, written with the store.

mod conns;
mod serve_store;
mod streams;

/// Counts live heap bytes, so `streams` can tell memory held from memory the
/// allocator merely kept (RSS), and allocation calls, so `pipeline` can say
/// what each transaction costs the allocator. Relaxed atomics per allocation:
/// nothing on the measured packet paths allocates per packet.
struct CountingAlloc;

static LIVE_BYTES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static ALLOC_CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts sizes.
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        ALLOC_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        LIVE_BYTES.fetch_add(l.size(), std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc`, passed on unchanged.
        unsafe { std::alloc::System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        LIVE_BYTES.fetch_sub(l.size(), std::sync::atomic::Ordering::Relaxed);
        // SAFETY: `p` came from `alloc`/`realloc` above, that is from `System`, with layout `l`.
        unsafe { std::alloc::System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, new: usize) -> *mut u8 {
        ALLOC_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        LIVE_BYTES.fetch_add(new, std::sync::atomic::Ordering::Relaxed);
        LIVE_BYTES.fetch_sub(l.size(), std::sync::atomic::Ordering::Relaxed);
        // SAFETY: as `dealloc`; the new size is the caller's, passed on unchanged.
        unsafe { std::alloc::System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Heap bytes currently allocated by this process.
pub fn live_heap_bytes() -> usize {
    LIVE_BYTES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Allocation and reallocation calls so far.
pub fn alloc_calls() -> usize {
    ALLOC_CALLS.load(std::sync::atomic::Ordering::Relaxed)
}

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use wirelog_decode::{ChecksumMode, DecodeConfig, Decoded, Decoder};
use wirelog_packet::{LinkType, Packet};
use wirelog_probe::{AppConfig, Probe, ProbeConfig, TrackerConfig};
use wirelog_record::Batch;
use wirelog_source::CaptureReader;

struct Rec {
    ts: i64,
    off: usize,
    len: u32,
    wire_len: u32,
    linktype: LinkType,
}

/// Packets held contiguously in memory, as a capture ring would hold them.
struct Corpus {
    data: Vec<u8>,
    pkts: Vec<Rec>,
}

impl Corpus {
    fn load(paths: &[PathBuf], snap: usize) -> Result<Corpus, String> {
        let mut c = Corpus {
            data: Vec::new(),
            pkts: Vec::new(),
        };
        for p in paths {
            let mut r = CaptureReader::open(p).map_err(|e| e.to_string())?;
            while let Some(pkt) = r.next_packet() {
                let n = pkt.data.len().min(snap);
                c.pkts.push(Rec {
                    ts: pkt.ts_ns,
                    off: c.data.len(),
                    len: n as u32,
                    wire_len: pkt.wire_len,
                    linktype: pkt.linktype,
                });
                c.data.extend_from_slice(&pkt.data[..n]);
            }
            for prob in r.problems() {
                eprintln!(
                    "{}: {} at byte {}: {}",
                    p.display(),
                    prob.kind.as_str(),
                    prob.first_offset,
                    prob.detail
                );
            }
        }
        Ok(c)
    }

    /// Every packet `copies` times (copy k right after copy k-1, same timestamp),
    /// addresses rewritten so that copy k's connections are distinct from the others'.
    fn scaled(&self, copies: usize) -> Corpus {
        let mut out = Corpus {
            data: Vec::with_capacity(self.data.len() * copies),
            pkts: Vec::with_capacity(self.pkts.len() * copies),
        };
        out.huge_pages();
        for r in &self.pkts {
            let bytes = &self.data[r.off..r.off + r.len as usize];
            let ip_at = ip_offset(r.linktype, bytes);
            for k in 0..copies {
                let off = out.data.len();
                out.data.extend_from_slice(bytes);
                if let Some(at) = ip_at {
                    rewrite_addresses(&mut out.data[off..], at, k as u16);
                }
                out.pkts.push(Rec {
                    ts: r.ts,
                    off,
                    len: r.len,
                    wire_len: r.wire_len,
                    linktype: r.linktype,
                });
            }
        }
        out
    }

    /// Backs the packet bytes with transparent huge pages: a capture ring is a
    /// few large blocks, not 4 KiB pages scattered over the address space.
    fn huge_pages(&mut self) {
        const HUGE: usize = 2 << 20;
        let start = self.data.as_mut_ptr() as usize;
        let end = start + self.data.capacity();
        let aligned = (start + HUGE - 1) & !(HUGE - 1);
        if end > aligned + HUGE {
            // SAFETY: advice on memory this Vec owns (aligned interior); the kernel may ignore it.
            unsafe {
                libc::madvise(
                    aligned as *mut libc::c_void,
                    (end - aligned) & !(HUGE - 1),
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }

    fn bytes(&self, r: &Rec) -> &[u8] {
        &self.data[r.off..r.off + r.len as usize]
    }

    #[inline]
    fn packet(&self, r: &Rec) -> Packet<'_> {
        Packet { wire_len: r.wire_len, ..Packet::new(r.linktype, r.ts, self.bytes(r)) }
    }
}

/// A probe as `wirelog read -C` makes one, with uids seeded.
fn probe(track: TrackerConfig) -> Probe {
    Probe::new(ProbeConfig {
        checksums: ChecksumMode::Ignore,
        track: TrackerConfig { uid_seed: Some(1), ..track },
        ..ProbeConfig::default()
    })
}

/// Offset of the IP header for the link types the shared captures use.
fn ip_offset(lt: LinkType, d: &[u8]) -> Option<usize> {
    let mut at = match lt {
        LinkType::ETHERNET => 12,
        LinkType::LINUX_SLL => 14,
        LinkType::LINUX_SLL2 => return Some(20),
        LinkType::RAW | LinkType::IPV4 | LinkType::IPV6 => return Some(0),
        LinkType::NULL | LinkType::LOOP => return Some(4),
        _ => return None,
    };
    // Walk 802.1Q/802.1ad tags to the EtherType.
    loop {
        let et = u16::from_be_bytes([*d.get(at)?, *d.get(at + 1)?]);
        match et {
            0x8100 | 0x88a8 | 0x9100 => at += 4,
            0x0800 | 0x86dd => return Some(at + 2),
            _ => return None,
        }
    }
}

/// XORs the copy number into the middle of both addresses: the mapping is the
/// same for source and destination, so both directions of a connection stay
/// one connection, and the first octet (loopback/private ranges) is kept.
fn rewrite_addresses(pkt: &mut [u8], at: usize, k: u16) {
    let kb = k.to_be_bytes();
    let Some(&v) = pkt.get(at) else { return };
    let (src, dst, w) = match v >> 4 {
        4 => (at + 12 + 1, at + 16 + 1, 2),
        6 => (at + 8 + 10, at + 24 + 10, 2),
        _ => return,
    };
    if pkt.len() < dst + w {
        return;
    }
    for i in 0..w {
        pkt[src + i] ^= kb[i];
        pkt[dst + i] ^= kb[i];
    }
}

// Packet bytes are fetched before the table stage reads their tuple (SLOT_AHEAD).
const PREFETCH_AHEAD: usize = 24;

#[inline]
fn prefetch(d: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    unsafe {
        // SAFETY: a prefetch is a hint and never faults.
        std::arch::x86_64::_mm_prefetch(d.as_ptr() as *const i8, std::arch::x86_64::_MM_HINT_T0);
        std::arch::x86_64::_mm_prefetch(
            d.as_ptr().wrapping_add(64) as *const i8,
            std::arch::x86_64::_MM_HINT_T0,
        );
    }
}

/// CPU time of this thread: unlike wall time it does not count the time
/// other processes on a busy machine take the core away.
fn thread_cpu_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
    }
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

fn max_rss_mb() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// Decoding alone, to split the pipeline's cost between its stages.
fn run_decode_only(c: &Corpus) -> String {
    let mut decoder = Decoder::new(DecodeConfig {
        checksums: ChecksumMode::Ignore,
        ..DecodeConfig::default()
    });
    let mut sum = 0u64;
    let cpu0 = thread_cpu_ns();
    for (i, r) in c.pkts.iter().enumerate() {
        if let Some(ahead) = c.pkts.get(i + PREFETCH_AHEAD) {
            prefetch(&c.data[ahead.off..]);
        }
        if let Decoded::Ip(ip) = decoder.packet(&c.packet(r)) {
            sum = sum.wrapping_add(ip.ip_len as u64);
        }
    }
    let cpu = (thread_cpu_ns() - cpu0) as f64;
    format!(
        "stage=decode packets={} cpu_ns_per_packet={:.1} checksum={}",
        c.pkts.len(),
        cpu / c.pkts.len() as f64,
        sum
    )
}

/// `read -f`: the file filter alone over packets in memory.
fn run_filter(c: &Corpus, f: &mut wirelog_capture::filter::FileFilter) -> String {
    let mut matched = 0u64;
    let cpu0 = thread_cpu_ns();
    for r in &c.pkts {
        matched += f.matches(r.linktype.0, c.bytes(r), r.wire_len) as u64;
    }
    let cpu = (thread_cpu_ns() - cpu0) as f64;
    format!(
        "stage=filter expr={:?} packets={} matched={} cpu_ns_per_packet={:.1}",
        f.expression(),
        c.pkts.len(),
        matched,
        cpu / c.pkts.len() as f64
    )
}

const SLOT_AHEAD: usize = 16;
const ENTRY_AHEAD: usize = 8;

fn run_pipeline(c: &Corpus, max_connections: usize, prefetch_table: bool, parse: bool) -> String {
    let mut probe = probe(TrackerConfig {
        max_connections,
        app: parse.then(AppConfig::default),
        ..TrackerConfig::default()
    });
    // Records are drained into one reused batch, counted and dropped.
    let mut batch = Batch::default();
    let mut records = 0u64;
    let mut transactions = 0u64;
    // Hashes of the packets SLOT_AHEAD ahead, so the entry stage reuses them.
    let mut hashes = [u64::MAX; 32];
    let allocs0 = alloc_calls();
    let cpu0 = thread_cpu_ns();
    let t0 = Instant::now();
    for (i, r) in c.pkts.iter().enumerate() {
        // Packet headers are cold in memory (as in a capture ring): ask for the
        // headers a few packets ahead while this one is processed.
        if let Some(ahead) = c.pkts.get(i + PREFETCH_AHEAD) {
            prefetch(&c.data[ahead.off..]);
        }
        if prefetch_table {
            // Two-stage table prefetch: the slot SLOT_AHEAD packets ahead, the
            // entry of the slot fetched ENTRY_AHEAD packets ago.
            if let Some(ahead) = c.pkts.get(i + SLOT_AHEAD) {
                hashes[(i + SLOT_AHEAD) % 32] = probe.prefetch_slot(&c.packet(ahead)).unwrap_or(u64::MAX);
            }
            let h = hashes[(i + ENTRY_AHEAD) % 32];
            if h != u64::MAX {
                probe.prefetch_entry(h);
            }
        }
        let _ = probe.packet(&c.packet(r));
        if i & 4095 == 0 {
            probe.drain(&mut batch);
            records += batch.conns.len() as u64;
            transactions += batch.txs.len() as u64;
            batch.clear();
        }
    }
    probe.finish();
    probe.drain(&mut batch);
    records += batch.conns.len() as u64;
    transactions += batch.txs.len() as u64;
    let flows = batch.flows.len();
    batch.clear();
    let wall = t0.elapsed().as_nanos() as f64;
    let cpu = (thread_cpu_ns() - cpu0) as f64;
    let allocs = alloc_calls() - allocs0;
    let n = c.pkts.len() as f64;
    let st = probe.track_stats();
    let tracker = probe.tracker();
    format!(
        "packets={} ns_per_packet={:.1} cpu_ns_per_packet={:.1} wall_s={:.3} connections={} records={} peak_connections={} evicted={} bytes_per_connection={} flows={} bytes_per_flow={} max_rss_mb={:.0} parse={} transactions={} stream_buffer_after={} allocs={} allocs_per_transaction={:.2}",
        c.pkts.len(),
        wall / n,
        cpu / n,
        wall / 1e9,
        st.connections,
        records,
        st.peak_connections,
        st.evicted,
        tracker.bytes_per_connection(),
        flows,
        tracker.bytes_per_flow(),
        max_rss_mb(),
        parse,
        transactions,
        tracker.stream_buffer_bytes(),
        allocs,
        allocs as f64 / transactions.max(1) as f64
    )
}

/// The real flows of `c`, replicated to `rows` rows (see the module docs).
///
/// With `unique_clients`, every row's client address also gets its own value
/// in the three low bytes (for group-bys over millions of distinct pairs).
fn build_store(c: &Corpus, rows: usize, out: &Path, unique_clients: bool) -> Result<(), String> {
    const BUCKET: i64 = 300_000_000_000;
    let mut probe = probe(TrackerConfig { flow_interval_ns: BUCKET, ..TrackerConfig::default() });
    for r in &c.pkts {
        let _ = probe.packet(&c.packet(r));
    }
    probe.finish();
    let mut batch = Batch::default();
    probe.drain(&mut batch);
    let base = batch.flows;
    if base.is_empty() {
        return Err("the capture has no flows".into());
    }
    let day0 = base[0].bucket_ns.div_euclid(86_400_000_000_000) * 86_400_000_000_000;
    let mut store = wirelog_store::Store::open(
        out,
        wirelog_store::StoreOptions {
            sync: false,
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let mut written = 0usize;
    let mut batch = Vec::with_capacity(base.len());
    let mut k: u32 = 0;
    while written < rows {
        batch.clear();
        // Copy k: addresses rewritten (middle bytes XOR k, as `scale` does) and
        // moved to bucket k % 288 of the day.
        let kb = ((k / 288) as u16).to_be_bytes();
        let shift = (k % 288) as i64 * BUCKET;
        for f in &base {
            let mut g = f.clone();
            for a in [&mut g.client, &mut g.server] {
                let at = if a.is_v4() { 13 } else { 10 };
                a.0[at] ^= kb[0];
                a.0[at + 1] ^= kb[1];
            }
            g.bucket_ns = day0 + shift;
            g.first_ns = g.bucket_ns + (f.first_ns - f.bucket_ns).clamp(0, BUCKET - 1);
            g.last_ns = g.bucket_ns + (f.last_ns - f.bucket_ns).clamp(0, BUCKET - 1);
            if unique_clients {
                let n = ((written + batch.len()) as u32).to_be_bytes();
                g.client.0[13..16].copy_from_slice(&n[1..4]);
            }
            batch.push(g);
        }
        store.append_flows(&batch).map_err(|e| e.to_string())?;
        written += batch.len();
        k += 1;
    }
    store.close().map_err(|e| e.to_string())?;
    println!(
        "rows={} copies={} base_flows={} write_s={:.1} dir={}",
        written,
        k,
        base.len(),
        t0.elapsed().as_secs_f64(),
        out.display()
    );
    Ok(())
}

/// The pcap header `write_pcap` writes, as bytes.
fn pcap_header(lt: LinkType) -> Vec<u8> {
    let mut h = Vec::with_capacity(24);
    // Nanosecond pcap, little endian.
    h.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&4u16.to_le_bytes());
    h.extend_from_slice(&[0u8; 8]);
    h.extend_from_slice(&262_144u32.to_le_bytes());
    h.extend_from_slice(&lt.0.to_le_bytes());
    h
}

/// `scale --sequential`: copy k of `c`, addresses rewritten as `scaled` does,
/// shifted by k times (span + 1 s), streamed to `out` (`-`: stdout).
fn write_pcap_sequential(c: &Corpus, copies: usize, out: &Path) -> Result<(), String> {
    let lt = c.pkts.first().map(|r| r.linktype).unwrap_or(LinkType::ETHERNET);
    if c.pkts.iter().any(|r| r.linktype != lt) {
        return Err("input mixes link types; a pcap file holds one".into());
    }
    let dest: Box<dyn Write> = if out.as_os_str() == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(std::fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?)
    };
    let mut w = BufWriter::with_capacity(1 << 20, dest);
    let io = |e: std::io::Error| format!("{}: {e}", out.display());
    w.write_all(&pcap_header(lt)).map_err(io)?;
    let first = c.pkts.iter().map(|r| r.ts).min().unwrap_or(0);
    let last = c.pkts.iter().map(|r| r.ts).max().unwrap_or(0);
    let step = last - first + 1_000_000_000;
    let mut pkt = Vec::new();
    for k in 0..copies {
        for r in &c.pkts {
            pkt.clear();
            pkt.extend_from_slice(c.bytes(r));
            if let Some(at) = ip_offset(r.linktype, &pkt) {
                rewrite_addresses(&mut pkt, at, k as u16);
            }
            let ts = r.ts + k as i64 * step;
            let (secs, nanos) = (ts.div_euclid(1_000_000_000) as u32, ts.rem_euclid(1_000_000_000) as u32);
            for v in [secs, nanos, r.len, r.wire_len] {
                w.write_all(&v.to_le_bytes()).map_err(io)?;
            }
            w.write_all(&pkt).map_err(io)?;
        }
    }
    w.flush().map_err(io)
}

fn write_pcap(c: &Corpus, out: &Path) -> Result<(), String> {
    let lt = c
        .pkts
        .first()
        .map(|r| r.linktype)
        .unwrap_or(LinkType::ETHERNET);
    if c.pkts.iter().any(|r| r.linktype != lt) {
        return Err("input mixes link types; a pcap file holds one".into());
    }
    let f = std::fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let io = |e: std::io::Error| format!("{}: {e}", out.display());
    w.write_all(&pcap_header(lt)).map_err(io)?;
    for r in &c.pkts {
        let secs = r.ts.div_euclid(1_000_000_000) as u32;
        let nanos = r.ts.rem_euclid(1_000_000_000) as u32;
        for v in [secs, nanos, r.len, r.wire_len] {
            w.write_all(&v.to_le_bytes()).map_err(io)?;
        }
        w.write_all(c.bytes(r)).map_err(io)?;
    }
    w.flush().map_err(io)
}

struct Opts {
    sequential: bool,
    unique_clients: bool,
    rows: usize,
    out: Option<PathBuf>,
    decode_only: bool,
    prefetch: bool,
    parse: bool,
    copies: usize,
    snap: usize,
    reps: usize,
    files: Vec<PathBuf>,
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        sequential: false,
        unique_clients: false,
        rows: 0,
        out: None,
        decode_only: false,
        prefetch: false,
        parse: false,
        copies: 1,
        snap: usize::MAX,
        reps: 3,
        files: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = |name: &str| -> Result<usize, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or(format!("{name} needs a number"))
        };
        match a.as_str() {
            "--copies" => o.copies = num("--copies")?.max(1),
            "--snap" => o.snap = num("--snap")?.max(64),
            "--reps" => o.reps = num("--reps")?.max(1),
            "--decode-only" => o.decode_only = true,
            "--rows" => o.rows = num("--rows")?,
            "--unique-clients" => o.unique_clients = true,
            "--sequential" => o.sequential = true,
            "--out" => o.out = Some(PathBuf::from(it.next().ok_or("--out needs a directory")?)),
            // Off by default, like `wirelog read`: it pays off only with very many
            // connections (6% at 1 M) and costs 20+ ns/packet with few.
            "--prefetch" => o.prefetch = true,
            // Application parsing (reassembly + parsers), as `wirelog read` does by default.
            "--parse" => o.parse = true,
            s if s.starts_with("--") => return Err(format!("unknown option {s}")),
            f => o.files.push(PathBuf::from(f)),
        }
    }
    if o.files.is_empty() {
        return Err("no capture given".into());
    }
    Ok(o)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: wirelog-bench pipeline [--copies N] [--snap BYTES] [--reps R] [--decode-only] [--prefetch] [--parse] PCAP...\n       wirelog-bench scale --copies N [--snap BYTES] [--sequential] IN.pcap OUT.pcap\n       wirelog-bench filter EXPR [--copies N] [--reps R] PCAP...\n       wirelog-bench store --rows N --out DIR [--unique-clients] PCAP...\n       wirelog-bench streams [--conns N] [--rounds R] [--no-parse]\n       wirelog-bench conns --kind tcp|tcp-synack|udp|other [--conns N] [--clients K] [--write FILE]\n       wirelog-bench serve-store [--conns N] [--tx N] [--hours H] [--services S] --out DIR";
    let result = match args.first().map(String::as_str) {
        Some("pipeline") => parse(&args[1..]).and_then(|o| {
            let base = Corpus::load(&o.files, o.snap)?;
            // Always copy once, into huge-page backed memory.
            let c = base.scaled(o.copies);
            eprintln!(
                "loaded {} packets ({} MB) x{}",
                c.pkts.len(),
                c.data.len() >> 20,
                o.copies
            );
            let max = (1usize << 20).max(c.pkts.len().min(8 << 20));
            for _ in 0..o.reps {
                if o.decode_only {
                    println!("{}", run_decode_only(&c));
                } else {
                    println!(
                        "{} table_prefetch={}",
                        run_pipeline(&c, max, o.prefetch, o.parse),
                        o.prefetch
                    );
                }
            }
            Ok(())
        }),
        Some("filter") if args.len() > 2 => parse(&args[2..]).and_then(|o| {
            let c = Corpus::load(&o.files, o.snap)?.scaled(o.copies);
            let mut f = wirelog_capture::filter::FileFilter::new(&args[1]).map_err(|e| e.to_string())?;
            for _ in 0..o.reps {
                println!("{}", run_filter(&c, &mut f));
            }
            Ok(())
        }),
        Some("streams") => {
            let mut conns = 100_000usize;
            let mut rounds = 3usize;
            let mut parse = true;
            let mut it = args[1..].iter();
            let mut bad = None;
            while let Some(a) = it.next() {
                if a == "--no-parse" {
                    parse = false;
                    continue;
                }
                let v = it.next().and_then(|v| v.parse().ok());
                match (a.as_str(), v) {
                    ("--conns", Some(n)) => conns = n,
                    ("--rounds", Some(n)) => rounds = n,
                    _ => bad = Some(format!("streams: bad option {a}")),
                }
            }
            match bad {
                Some(e) => Err(e),
                None => streams::run(conns.max(1), rounds.max(1), parse),
            }
        }
        Some("conns") => {
            let mut kind = None;
            let mut conns = 1_000_000usize;
            let mut clients = usize::MAX;
            let mut write = None;
            let mut bad = None;
            let mut it = args[1..].iter();
            while let Some(a) = it.next() {
                let v = it.next();
                match (a.as_str(), v) {
                    ("--kind", Some(k)) => kind = conns::Kind::parse(k),
                    ("--conns", Some(n)) => conns = n.parse().unwrap_or(0),
                    ("--clients", Some(n)) => clients = n.parse().unwrap_or(0),
                    ("--write", Some(f)) => write = Some(PathBuf::from(f)),
                    _ => bad = Some(format!("conns: bad option {a}")),
                }
            }
            match (bad, kind) {
                (Some(e), _) => Err(e),
                (None, None) => Err("conns: --kind tcp, tcp-synack, udp or other".into()),
                (None, Some(_)) if conns == 0 || clients == 0 => Err("conns: --conns and --clients take a positive number".into()),
                (None, Some(k)) => conns::run(k, conns, clients, write.as_deref()),
            }
        }
        Some("store") => parse(&args[1..]).and_then(|o| {
            let out = o.out.clone().ok_or("store needs --out DIR")?;
            build_store(
                &Corpus::load(&o.files, usize::MAX)?,
                o.rows.max(1),
                &out,
                o.unique_clients,
            )
        }),
        Some("serve-store") => {
            let mut it = args[1..].iter();
            let (mut conns, mut txs, mut hours, mut services, mut out) = (10_000_000u64, 5_000_000u64, 24u64, None, None);
            let mut bad = None;
            while let Some(a) = it.next() {
                let v = it.next();
                let num = |v: Option<&String>| v.and_then(|s| s.parse::<u64>().ok());
                match a.as_str() {
                    "--conns" => conns = num(v).unwrap_or_else(|| { bad = Some("--conns N"); 0 }),
                    "--tx" => txs = num(v).unwrap_or_else(|| { bad = Some("--tx N"); 0 }),
                    "--hours" => hours = num(v).unwrap_or_else(|| { bad = Some("--hours H"); 0 }),
                    "--services" => services = Some(num(v).unwrap_or_else(|| { bad = Some("--services S"); 0 })),
                    "--out" => out = v.map(PathBuf::from),
                    _ => bad = Some("serve-store [--conns N] [--tx N] [--hours H] [--services S] --out DIR"),
                }
            }
            match (bad, out) {
                (Some(b), _) => Err(format!("serve-store: expected {b}")),
                (None, None) => Err("serve-store needs --out DIR".into()),
                (None, Some(out)) => serve_store::build(conns, txs, hours, services, &out),
            }
        }
        Some("scale") => parse(&args[1..]).and_then(|o| {
            if o.files.len() != 2 {
                return Err("scale needs IN.pcap OUT.pcap".into());
            }
            let base = Corpus::load(&o.files[..1], o.snap)?;
            if o.sequential {
                write_pcap_sequential(&base, o.copies, &o.files[1])?;
                eprintln!("wrote {} packets to {}", base.pkts.len() * o.copies, o.files[1].display());
                return Ok(());
            }
            let c = base.scaled(o.copies);
            write_pcap(&c, &o.files[1])?;
            eprintln!("wrote {} packets to {}", c.pkts.len(), o.files[1].display());
            Ok(())
        }),
        _ => Err(usage.to_string()),
    };
    if let Err(e) = result {
        eprintln!("wirelog-bench: {e}");
        std::process::exit(2);
    }
}
