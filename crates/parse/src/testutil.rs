//! Test helper: the TCP payload of a shared capture as per-connection,
//! per-direction, in-order byte events, so parser tests run on real traffic
//! without the tracker. It trusts its input (known-good reference files).

use std::collections::HashMap;

use wirelog_decode::{ChecksumMode, DecodeConfig, Decoded, Decoder, Transport};
use wirelog_source::CaptureReader;

use crate::{Dir, ProtocolParser};

#[derive(Debug, Clone)]
pub enum Ev {
    Data { conn: usize, dir: Dir, ts_ns: i64, data: Vec<u8> },
    Gap { conn: usize, dir: Dir, ts_ns: i64, len: u64 },
}

/// Absolute path of a file under `shared/testdata/`.
pub fn path(rel: &str) -> String {
    format!("{}/../../../shared/testdata/{}", env!("CARGO_MANIFEST_DIR"), rel)
}

/// Events of every TCP connection in `rel` (a path under shared/testdata).
/// The client is the SYN sender, else the side not on `server_ports`.
/// Retransmitted bytes are dropped, holes become `Gap`s; segments are taken
/// in capture order (out-of-order arrival is the reassembler's business).
pub fn tcp_events(rel: &str, server_ports: &[u16]) -> Vec<Ev> {
    tcp_events_with_tuples(rel, server_ports).0
}

/// (client address, client port, server address, server port).
pub type ConnTuple = (String, u16, String, u16);

/// Like [`tcp_events`], also returning each connection's (client address,
/// client port, server address, server port), indexed by `conn`, so results
/// can be matched with other tools' logs by 4-tuple.
pub fn tcp_events_with_tuples(rel: &str, server_ports: &[u16]) -> (Vec<Ev>, Vec<ConnTuple>) {
    // An absolute path is a capture of this repository's (tests/data).
    let file = if rel.starts_with('/') { rel.to_string() } else { path(rel) };
    let mut reader = CaptureReader::open(std::path::Path::new(&file)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let mut dec = Decoder::new(DecodeConfig { checksums: ChecksumMode::Ignore, ..DecodeConfig::default() });
    // key (client ip, client port, server ip, server port) -> conn index, next seq per dir
    // (client, client port, server, server port) -> (index, next seq per direction)
    type Tuple = (Vec<u8>, u16, Vec<u8>, u16);
    let mut conns: HashMap<Tuple, (usize, [Option<u32>; 2])> = HashMap::new();
    let mut out = Vec::new();
    while let Some(p) = reader.next_packet() {
        let ip = match dec.decode(p.linktype, p.ts_ns, p.data) {
            Decoded::Ip(ip) => ip,
            Decoded::Skipped(_) => continue,
        };
        let Transport::Tcp { sport, dport, seq, flags, payload, .. } = ip.transport else { continue };
        let (s, d) = (ip.src.to_std().to_string().into_bytes(), ip.dst.to_std().to_string().into_bytes());
        let syn = flags & 0x02 != 0;
        let ack = flags & 0x10 != 0;
        let fwd = (s.clone(), sport, d.clone(), dport);
        let rev = (d, dport, s, sport);
        let n = conns.len();
        let (key, dir) = if conns.contains_key(&fwd) {
            (fwd, Dir::ToServer)
        } else if conns.contains_key(&rev) {
            (rev, Dir::ToClient)
        } else if (syn && !ack) || (!server_ports.contains(&sport) && server_ports.contains(&dport)) {
            conns.insert(fwd.clone(), (n, [None, None]));
            (fwd, Dir::ToServer)
        } else {
            conns.insert(rev.clone(), (n, [None, None]));
            (rev, Dir::ToClient)
        };
        let (conn, next) = conns.get_mut(&key).unwrap();
        let i = if dir == Dir::ToServer { 0 } else { 1 };
        let data_seq = if syn { seq.wrapping_add(1) } else { seq };
        let expected = *next[i].get_or_insert(data_seq);
        if payload.is_empty() {
            continue;
        }
        let end = data_seq.wrapping_add(payload.len() as u32);
        let ahead = data_seq.wrapping_sub(expected) as i32;
        if ahead > 0 {
            out.push(Ev::Gap { conn: *conn, dir, ts_ns: p.ts_ns, len: ahead as u64 });
            out.push(Ev::Data { conn: *conn, dir, ts_ns: p.ts_ns, data: payload.to_vec() });
        } else {
            let skip = (-ahead) as usize;
            if skip >= payload.len() {
                continue;
            }
            out.push(Ev::Data { conn: *conn, dir, ts_ns: p.ts_ns, data: payload[skip..].to_vec() });
        }
        next[i] = Some(end);
    }
    let mut tuples = vec![(String::new(), 0, String::new(), 0); conns.len()];
    for ((c, cp, s, sp), (i, _)) in conns {
        tuples[i] = (String::from_utf8_lossy(&c).into_owned(), cp, String::from_utf8_lossy(&s).into_owned(), sp);
    }
    (out, tuples)
}

/// Runs one parser per connection over `events` and returns every
/// transaction (per connection, in emission order), after `finish`.
pub fn run_parser(
    events: &[Ev],
    mut make: impl FnMut() -> Box<dyn crate::StreamParser + Send>,
) -> Vec<Vec<crate::Transaction>> {
    let mut parsers: Vec<Box<dyn crate::StreamParser + Send>> = Vec::new();
    let mut txs: Vec<Vec<crate::Transaction>> = Vec::new();
    let mut last_ts = 0;
    for ev in events {
        let conn = match ev {
            Ev::Data { conn, .. } | Ev::Gap { conn, .. } => *conn,
        };
        while parsers.len() <= conn {
            parsers.push(make());
            txs.push(Vec::new());
        }
        match ev {
            Ev::Data { dir, ts_ns, data, .. } => {
                last_ts = *ts_ns;
                parsers[conn].data(*dir, *ts_ns, data, &mut txs[conn]);
            }
            Ev::Gap { dir, ts_ns, len, .. } => parsers[conn].gap(*dir, *ts_ns, *len, &mut txs[conn]),
        }
    }
    for (p, t) in parsers.iter_mut().zip(txs.iter_mut()) {
        p.finish(last_ts, t);
    }
    txs
}

/// One UDP datagram of a shared capture, with its direction relative to the
/// server port (`ToServer` when the destination port is one of `server_ports`).
#[derive(Debug, Clone)]
pub struct Datagram {
    /// Index of the flow (client addr/port, server addr/port) in order of appearance.
    pub flow: usize,
    pub dir: Dir,
    pub ts_ns: i64,
    pub data: Vec<u8>,
}

/// Every UDP datagram of `rel` to or from one of `server_ports` (after IP
/// fragment reassembly by the decoder).
pub fn udp_datagrams(rel: &str, server_ports: &[u16]) -> Vec<Datagram> {
    let mut reader = CaptureReader::open(std::path::Path::new(&path(rel)))
        .unwrap_or_else(|e| panic!("{rel}: {e}"));
    let mut dec = Decoder::new(DecodeConfig {
        checksums: ChecksumMode::Ignore,
        ..DecodeConfig::default()
    });
    let mut flows: HashMap<(String, u16, String, u16), usize> = HashMap::new();
    let mut out = Vec::new();
    while let Some(p) = reader.next_packet() {
        let ip = match dec.decode(p.linktype, p.ts_ns, p.data) {
            Decoded::Ip(ip) => ip,
            Decoded::Skipped(_) => continue,
        };
        let Transport::Udp {
            sport,
            dport,
            payload,
            ..
        } = ip.transport
        else {
            continue;
        };
        let (s, d) = (ip.src.to_std().to_string(), ip.dst.to_std().to_string());
        let (key, dir) = if server_ports.contains(&dport) {
            ((s, sport, d, dport), Dir::ToServer)
        } else if server_ports.contains(&sport) {
            ((d, dport, s, sport), Dir::ToClient)
        } else {
            continue;
        };
        let n = flows.len();
        let flow = *flows.entry(key).or_insert(n);
        out.push(Datagram {
            flow,
            dir,
            ts_ns: p.ts_ns,
            data: payload.to_vec(),
        });
    }
    out
}

/// One TCP segment of a shared capture as seen on the wire (for driving the
/// reassembler): connection index and direction as in [`tcp_events`].
#[derive(Debug, Clone)]
pub struct TcpSeg {
    pub conn: usize,
    pub dir: Dir,
    pub ts_ns: i64,
    pub seq: u32,
    pub flags: crate::stream::SegFlags,
    pub payload: Vec<u8>,
}

/// Every TCP segment of `rel`, in capture order, retransmissions and all.
pub fn tcp_segments(rel: &str, server_ports: &[u16]) -> Vec<TcpSeg> {
    let mut reader = CaptureReader::open(std::path::Path::new(&path(rel)))
        .unwrap_or_else(|e| panic!("{rel}: {e}"));
    let mut dec = Decoder::new(DecodeConfig {
        checksums: ChecksumMode::Ignore,
        ..DecodeConfig::default()
    });
    let mut conns: HashMap<(String, u16, String, u16), usize> = HashMap::new();
    let mut out = Vec::new();
    while let Some(p) = reader.next_packet() {
        let ip = match dec.decode(p.linktype, p.ts_ns, p.data) {
            Decoded::Ip(ip) => ip,
            Decoded::Skipped(_) => continue,
        };
        let Transport::Tcp {
            sport,
            dport,
            seq,
            flags,
            payload,
            ..
        } = ip.transport
        else {
            continue;
        };
        let (s, d) = (ip.src.to_std().to_string(), ip.dst.to_std().to_string());
        let syn = flags & 0x02 != 0;
        let ack = flags & 0x10 != 0;
        let fwd = (s.clone(), sport, d.clone(), dport);
        let rev = (d, dport, s, sport);
        let n = conns.len();
        let (conn, dir) = if let Some(&c) = conns.get(&fwd) {
            (c, Dir::ToServer)
        } else if let Some(&c) = conns.get(&rev) {
            (c, Dir::ToClient)
        } else if (syn && !ack) || (!server_ports.contains(&sport) && server_ports.contains(&dport))
        {
            conns.insert(fwd, n);
            (n, Dir::ToServer)
        } else {
            conns.insert(rev, n);
            (n, Dir::ToClient)
        };
        let flags = crate::stream::SegFlags {
            syn,
            fin: flags & 0x01 != 0,
            rst: flags & 0x04 != 0,
        };
        out.push(TcpSeg {
            conn,
            dir,
            ts_ns: p.ts_ns,
            seq,
            flags,
            payload: payload.to_vec(),
        });
    }
    out
}

// ---- Helpers for the SQL and Redis parser tests (appended). ----

/// Every transaction of `rel` parsed by `proto` with `cfg`, per connection.
pub fn parse_pcap(
    rel: &str,
    ports: &[u16],
    proto: crate::Protocol,
    cfg: &crate::ParseConfig,
) -> Vec<Vec<crate::Transaction>> {
    let evs = tcp_events(rel, ports);
    run_parser(&evs, || Box::new(proto.stream_parser(cfg)))
}

/// A small deterministic PRNG (xorshift64*), so stress tests need no crate.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
}

/// Feeds `events` to fresh parsers in many damaged ways; the test passes if
/// nothing panics. Variants: every prefix of the event list (each event cut
/// at a byte position too, sampled for long streams), random re-chunking,
/// flipped bytes, dropped chunks turned into gaps, expiry in between.
pub fn stress(events: &[Ev], make: impl Fn() -> Box<dyn crate::StreamParser + Send>) {
    let total: usize = events.iter().map(|e| if let Ev::Data { data, .. } = e { data.len() } else { 0 }).sum();
    // Prefixes: cut after k whole events plus j bytes of event k.
    let cuts: Vec<(usize, usize)> = {
        let mut v = Vec::new();
        for (k, e) in events.iter().enumerate() {
            let n = if let Ev::Data { data, .. } = e { data.len() } else { 0 };
            if total <= 4_000 {
                for j in 0..=n {
                    v.push((k, j));
                }
            } else {
                for j in [0, 5, n / 2] {
                    if j <= n {
                        v.push((k, j));
                    }
                }
            }
        }
        v
    };
    for &(k, j) in &cuts {
        let mut evs: Vec<Ev> = events[..k].to_vec();
        if let Ev::Data { conn, dir, ts_ns, data } = &events[k] {
            evs.push(Ev::Data { conn: *conn, dir: *dir, ts_ns: *ts_ns, data: data[..j].to_vec() });
        }
        run_parser(&evs, &make);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Pure noise, and noise after the real stream's first bytes.
    for round in 0..16 {
        let mut evs: Vec<Ev> = if round % 2 == 0 { Vec::new() } else { events.iter().take(2).cloned().collect() };
        for i in 0..40 {
            let dir = if rng.below(2) == 0 { Dir::ToServer } else { Dir::ToClient };
            let n = 1 + rng.below(300);
            let data = (0..n).map(|_| rng.next() as u8).collect();
            evs.push(Ev::Data { conn: 0, dir, ts_ns: i, data });
        }
        run_parser(&evs, &make);
    }
    for round in 0..24 {
        let mut evs = Vec::new();
        for e in events {
            match e {
                Ev::Data { conn, dir, ts_ns, data } => {
                    let mut rest: &[u8] = data;
                    while !rest.is_empty() {
                        let n = 1 + rng.below(rest.len().min(if round % 2 == 0 { 7 } else { 1500 }));
                        let mut piece = rest[..n].to_vec();
                        rest = &rest[n..];
                        match (round % 4, rng.below(20)) {
                            (1, 0) => {
                                let i = rng.below(piece.len());
                                piece[i] ^= 1 << rng.below(8);
                            }
                            (2, 0) => {
                                evs.push(Ev::Gap { conn: *conn, dir: *dir, ts_ns: *ts_ns, len: n as u64 });
                                continue;
                            }
                            (3, 0) => {
                                let i = rng.below(piece.len());
                                piece[i] = rng.next() as u8;
                                piece.truncate(i + 1);
                            }
                            _ => {}
                        }
                        evs.push(Ev::Data { conn: *conn, dir: *dir, ts_ns: *ts_ns, data: piece });
                    }
                }
                g => evs.push(g.clone()),
            }
        }
        // Also drive expiry: a parser per connection, expire at every event.
        let mut ps: Vec<Box<dyn crate::StreamParser + Send>> = Vec::new();
        let mut out = Vec::new();
        for e in &evs {
            let (conn, ts) = match e {
                Ev::Data { conn, ts_ns, .. } | Ev::Gap { conn, ts_ns, .. } => (*conn, *ts_ns),
            };
            while ps.len() <= conn {
                ps.push(make());
            }
            match e {
                Ev::Data { dir, data, .. } => ps[conn].data(*dir, ts, data, &mut out),
                Ev::Gap { dir, len, .. } => ps[conn].gap(*dir, ts, *len, &mut out),
            }
            ps[conn].expire(ts + (rng.below(3) as i64) * 20_000_000_000, &mut out);
            let _ = ps[conn].stats();
        }
        for p in &mut ps {
            p.finish(0, &mut out);
        }
    }
}

/// Like [`run_parser`], also returning the parsers' stats summed.
pub fn stats_of(events: &[Ev], make: impl Fn() -> Box<dyn crate::StreamParser + Send>) -> crate::ParseStats {
    let mut ps: Vec<Box<dyn crate::StreamParser + Send>> = Vec::new();
    let mut out = Vec::new();
    for e in events {
        let conn = match e {
            Ev::Data { conn, .. } | Ev::Gap { conn, .. } => *conn,
        };
        while ps.len() <= conn {
            ps.push(make());
        }
        match e {
            Ev::Data { dir, ts_ns, data, .. } => ps[conn].data(*dir, *ts_ns, data, &mut out),
            Ev::Gap { dir, ts_ns, len, .. } => ps[conn].gap(*dir, *ts_ns, *len, &mut out),
        }
    }
    let mut sum = crate::ParseStats::default();
    for p in &mut ps {
        p.finish(0, &mut out);
        let s = p.stats();
        sum.unparsed_bytes += s.unparsed_bytes;
        sum.gaps += s.gaps;
        sum.resyncs += s.resyncs;
        sum.malformed += s.malformed;
    }
    sum
}

/// Facts checked against a reference (a Packetbeat system test, a Zeek
/// log), counted per capture; every disagreement is listed when it is done.
pub struct Facts {
    name: String,
    checked: u32,
    failed: Vec<String>,
}

impl Facts {
    pub fn new(name: &str) -> Self {
        Facts { name: name.into(), checked: 0, failed: Vec::new() }
    }

    pub fn eq<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, got: T, want: T) {
        self.checked += 1;
        if got != want {
            self.failed.push(format!("{what}: got {got:?}, want {want:?}"));
        }
    }

    pub fn done(self) {
        eprintln!("{}: {} facts checked, {} agree", self.name, self.checked, self.checked - self.failed.len() as u32);
        assert!(self.failed.is_empty(), "{}: {:#?}", self.name, self.failed);
    }
}
