//! `wirelog-bench conns --kind tcp|tcp-synack|udp|other [--conns N] [--clients K]`:
//! resident memory per open connection and per flow, and the packet cost at
//! that many connections.
//!
//! N synthetic connections are opened, one packet each, 1 us apart (so no
//! timer ends any of them): a SYN (tcp; `tcp-synack`: a SYN and the server's
//! SYN-ACK 500 ns later, a connection whose TCP state the tracker holds in
//! full, where a lone SYN's takes none), a 32-byte datagram (udp), or an ESP
//! packet (other: no connection, a flow only). The N connections come from K
//! client addresses (default N), all to one server port, so the flows number
//! K: `--clients 1000` isolates the connection table, `--kind other` the
//! flow table. Resident memory (VmRSS) and heap bytes are read after the
//! probe is made and again with all N open; the differences divided by N
//! are what one connection (or flow) costs, as an operator sees it. Then a
//! second packet for every connection, in a scattered order, times the
//! lookup of existing connections at that table size (CPU ns per packet).
//!
//! With `--write FILE` the N first packets are written to a pcap file
//! instead, for `wirelog read` (BENCHMARKS.md, "Memory budget").

use wirelog_packet::{LinkType, Packet};
use wirelog_probe::{ChecksumMode, Probe, ProbeConfig, TrackerConfig};
use wirelog_record::Batch;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Tcp,
    /// A SYN and its SYN-ACK: a TCP connection past its first packet, whose
    /// endpoint state is in the tracker's slab (a lone SYN's is not).
    TcpSynAck,
    Udp,
    Other,
}

impl Kind {
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "tcp" => Some(Kind::Tcp),
            "tcp-synack" => Some(Kind::TcpSynAck),
            "udp" => Some(Kind::Udp),
            "other" => Some(Kind::Other),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Tcp => "tcp",
            Kind::TcpSynAck => "tcp-synack",
            Kind::Udp => "udp",
            Kind::Other => "other",
        }
    }
}

fn status_kb(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Connection `i`'s packet (LINKTYPE_IPV4, checksums zero: read as `-C`);
/// `reply`: the server's SYN-ACK to it (`tcp-synack`).
fn build(buf: &mut Vec<u8>, kind: Kind, i: usize, clients: usize, reply: bool) {
    let client = (i % clients) as u32;
    let nth = (i / clients) as u32;
    let src = (0x0a00_0000u32 | client).to_be_bytes();
    let dst = [192, 168, 0, 1];
    // Above every default server port, so no connection is flipped.
    let sport = (20_001 + nth % 45_000) as u16;
    let (src, dst) = if reply { (dst, src) } else { (src, dst) };
    let (proto, l4): (u8, &[u8]) = match kind {
        Kind::Tcp | Kind::TcpSynAck => (6, &[0u8; 20]),
        Kind::Udp => (17, &[0u8; 40]),
        Kind::Other => (50, &[0u8; 8]),
    };
    let total = 20 + l4.len();
    buf.clear();
    buf.extend_from_slice(&[0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0x40, 0, 64, proto, 0, 0]);
    buf.extend_from_slice(&src);
    buf.extend_from_slice(&dst);
    buf.extend_from_slice(l4);
    let l4 = &mut buf[20..];
    match kind {
        Kind::Tcp | Kind::TcpSynAck => {
            let isn = (i as u32).wrapping_mul(2_654_435_761);
            let (sp, dp) = if reply { (443, sport) } else { (sport, 443) };
            l4[0..2].copy_from_slice(&sp.to_be_bytes());
            l4[2..4].copy_from_slice(&dp.to_be_bytes());
            if reply {
                l4[4..8].copy_from_slice(&isn.rotate_left(7).to_be_bytes());
                l4[8..12].copy_from_slice(&isn.wrapping_add(1).to_be_bytes());
            } else {
                l4[4..8].copy_from_slice(&isn.to_be_bytes());
            }
            l4[12] = 0x50;
            l4[13] = if reply { 0x12 } else { 0x02 }; // SYN-ACK, SYN
            l4[14] = 0xff;
            l4[15] = 0xff;
        }
        Kind::Udp => {
            l4[0..2].copy_from_slice(&sport.to_be_bytes());
            l4[2..4].copy_from_slice(&5000u16.to_be_bytes());
            l4[4..6].copy_from_slice(&40u16.to_be_bytes());
        }
        Kind::Other => {}
    }
}

/// A bucket boundary (multiple of 300 s): no flow rotation inside the run.
const T0: i64 = 1_700_000_100 * 1_000_000_000;

pub fn run(kind: Kind, conns: usize, clients: usize, write: Option<&std::path::Path>) -> Result<(), String> {
    let clients = clients.clamp(1, conns);
    if conns.div_ceil(clients) > 45_000 {
        return Err("conns: more than 45,000 connections per client address".into());
    }
    if let Some(path) = write {
        return write_capture(kind, conns, clients, path);
    }
    let t0 = T0;
    let mut probe = Probe::new(ProbeConfig {
        checksums: ChecksumMode::Ignore,
        track: TrackerConfig {
            uid_seed: Some(1),
            max_connections: conns.max(1 << 20),
            max_flows: conns.max(1 << 20),
            ..TrackerConfig::default()
        },
        ..ProbeConfig::default()
    });
    let mut buf = Vec::with_capacity(128);
    build(&mut buf, kind, 0, clients, false);
    let rss0 = status_kb("VmRSS:");
    let heap0 = crate::live_heap_bytes();
    let cpu0 = crate::thread_cpu_ns();
    for i in 0..conns {
        build(&mut buf, kind, i, clients, false);
        let _ = probe.packet(&Packet::new(LinkType::IPV4, t0 + i as i64 * 1000, &buf));
        if kind == Kind::TcpSynAck {
            build(&mut buf, kind, i, clients, true);
            let _ = probe.packet(&Packet::new(LinkType::IPV4, t0 + i as i64 * 1000 + 500, &buf));
        }
    }
    let open_cpu = crate::thread_cpu_ns() - cpu0;
    let rss1 = status_kb("VmRSS:");
    let hwm = status_kb("VmHWM:");
    let heap1 = crate::live_heap_bytes();
    let open = probe.active_connections();
    // Second packets in a scattered order (a stride coprime with N): every
    // lookup lands on a different part of the table, as with many busy
    // connections; nothing is created.
    let stride = (conns / 2 + 1..).find(|s| gcd(*s, conns) == 1).unwrap_or(1);
    let t1 = t0 + conns as i64 * 1000;
    let cpu1 = crate::thread_cpu_ns();
    let mut j = 0usize;
    for i in 0..conns {
        build(&mut buf, kind, j, clients, false);
        let _ = probe.packet(&Packet::new(LinkType::IPV4, t1 + i as i64 * 1000, &buf));
        j = (j + stride) % conns;
    }
    let hit_cpu = crate::thread_cpu_ns() - cpu1;
    let created = probe.track_stats().connections;
    probe.finish();
    let mut batch = Batch::default();
    probe.drain(&mut batch);
    let n = conns as f64;
    println!(
        "kind={} conns={} clients={} open_connections={} created={} flows={} rss_before_mb={:.1} rss_open_mb={:.1} peak_rss_mb={:.1} rss_bytes_per_conn={:.1} heap_bytes_per_conn={:.1} table_bytes_per_connection={} table_bytes_per_flow={} cpu_ns_per_new={:.1} cpu_ns_per_hit={:.1} records={}",
        kind.name(),
        conns,
        clients,
        open,
        created,
        batch.flows.len(),
        rss0 as f64 / 1024.0,
        rss1 as f64 / 1024.0,
        hwm as f64 / 1024.0,
        (rss1 as f64 - rss0 as f64) * 1024.0 / n,
        (heap1 as f64 - heap0 as f64) / n,
        probe.tracker().bytes_per_connection(),
        probe.tracker().bytes_per_flow(),
        open_cpu as f64 / n,
        hit_cpu as f64 / n,
        batch.conns.len(),
    );
    Ok(())
}

/// The packets that open the connections, as a pcap file.
fn write_capture(kind: Kind, conns: usize, clients: usize, path: &std::path::Path) -> Result<(), String> {
    let mut c = crate::Corpus { data: Vec::new(), pkts: Vec::with_capacity(conns) };
    let mut buf = Vec::with_capacity(128);
    let replies: &[bool] = if kind == Kind::TcpSynAck { &[false, true] } else { &[false] };
    for i in 0..conns {
        for &reply in replies {
            build(&mut buf, kind, i, clients, reply);
            c.pkts.push(crate::Rec {
                ts: T0 + i as i64 * 1000 + i64::from(reply) * 500,
                off: c.data.len(),
                len: buf.len() as u32,
                wire_len: buf.len() as u32,
                linktype: LinkType::IPV4,
            });
            c.data.extend_from_slice(&buf);
        }
    }
    crate::write_pcap(&c, path)?;
    eprintln!("wrote {} packets to {}", c.pkts.len(), path.display());
    Ok(())
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
