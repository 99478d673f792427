//! Test helper: the TCP payload of a shared capture as per-connection,
//! per-direction, in-order byte events, so parser tests run on real traffic
//! without the tracker. It trusts its input (known-good reference files).

use std::collections::HashMap;

use wirelog_decode::{DecodeConfig, Decoded, Decoder, Transport};
use wirelog_source::CaptureReader;

use crate::Dir;

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
    let mut reader = CaptureReader::open(std::path::Path::new(&path(rel))).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let mut dec = Decoder::new(DecodeConfig { verify_checksums: false, ..DecodeConfig::default() });
    // key (client ip, client port, server ip, server port) -> conn index, next seq per dir
    let mut conns: HashMap<(Vec<u8>, u16, Vec<u8>, u16), (usize, [Option<u32>; 2])> = HashMap::new();
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
    out
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
        verify_checksums: false,
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
        verify_checksums: false,
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
