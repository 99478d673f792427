use std::path::Path;

use wirelog_source::CaptureReader;

use super::*;

fn sample() -> CaptureReader {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/sample.pcap.gz");
    CaptureReader::open(&p).expect("samples/sample.pcap.gz")
}

fn config() -> ProbeConfig {
    ProbeConfig {
        track: TrackerConfig { uid_seed: Some(7), app: Some(AppConfig::default()), ..TrackerConfig::default() },
        ..ProbeConfig::default()
    }
}

/// Everything a batch holds, as text (records carry no equality of their own).
fn dump(b: &Batch) -> Vec<String> {
    let mut v: Vec<String> = b.conns.iter().map(|r| format!("{r:?}")).collect();
    v.extend(b.flows.iter().map(|f| format!("{f:?}")));
    v.extend(b.txs.iter().map(|t| format!("{t:?}")));
    v.sort();
    v
}

/// The probe makes exactly what its decoder and tracker make when driven by
/// hand (the loop `read` had before), on a real capture, draining as it goes.
#[test]
fn same_records_as_decoder_and_tracker_by_hand() {
    let cfg = config();
    let mut probe = Probe::new(cfg.clone());
    let mut got = Batch::default();
    let mut r = sample();
    let mut n = 0u64;
    let mut skipped = 0u64;
    while let Some(p) = r.next_packet() {
        n += 1;
        skipped += probe.packet(&p).is_err() as u64;
        if n.is_multiple_of(100) {
            probe.drain(&mut got);
        }
    }
    while !probe.finish_some(10) {
        probe.drain(&mut got);
    }
    probe.drain(&mut got);

    let mut decoder = Decoder::new(DecodeConfig { checksums: cfg.checksums, ..DecodeConfig::default() });
    let mut tracker = Tracker::new(cfg.track);
    let mut r = sample();
    while let Some(p) = r.next_packet() {
        if let Decoded::Ip(ip) = decoder.decode(p.linktype, p.ts_ns, p.data) {
            tracker.packet(p.ts_ns, p.if_id, &ip);
        }
    }
    tracker.finish();
    let mut want = Batch::default();
    want.conns.extend(tracker.take_records());
    want.flows.extend(tracker.take_flows());
    want.txs.extend(tracker.take_transactions());

    assert!(n > 100 && !want.conns.is_empty() && !want.txs.is_empty(), "the sample has traffic");
    assert_eq!(dump(&got), dump(&want));
    assert_eq!(probe.decode_stats(), decoder.stats());
    assert_eq!(probe.decode_stats().packets(), n);
    assert_eq!(probe.decode_stats().packets() - probe.decode_stats().decoded, skipped);
    assert_eq!(probe.track_stats().connections, tracker.stats().connections);
    assert_eq!(probe.active_connections(), 0);
}

/// A TCP connection's endpoint state (in the tracker's slab) lives exactly
/// as long as the connection: freed when it ends, is evicted or is replaced
/// by a reused port, so the slab never holds more than the table.
#[test]
fn tcp_state_is_freed_with_its_connection() {
    let mut cfg = config();
    cfg.track.max_connections = 16; // the table's floor: evictions on the sample
    let mut probe = Probe::new(cfg);
    let mut r = sample();
    let mut peak = 0;
    while let Some(p) = r.next_packet() {
        let _ = probe.packet(&p);
        let held = probe.tracker().tcp_states();
        assert!(held <= probe.active_connections(), "{held} TCP states for {} connections", probe.active_connections());
        peak = peak.max(held);
    }
    assert!(peak > 0 && probe.track_stats().evicted > 0, "peak {peak}, evicted {}", probe.track_stats().evicted);
    probe.finish();
    assert_eq!((probe.active_connections(), probe.tracker().tcp_states()), (0, 0));
}

/// A batch is appended to; an empty one is swapped with the probe's own
/// vectors, so records are never copied and allocations circulate.
#[test]
fn drain_appends_and_batches_are_reused() {
    let mut whole = Probe::new(config());
    let mut r = sample();
    while let Some(p) = r.next_packet() {
        let _ = whole.packet(&p);
    }
    whole.finish();
    let mut all = Batch::default();
    whole.drain(&mut all);

    // Drained in two steps into the same batch: the second appends.
    let mut probe = Probe::new(config());
    let mut r = sample();
    let mut b = Batch::default();
    let mut n = 0;
    while let Some(p) = r.next_packet() {
        let _ = probe.packet(&p);
        n += 1;
        if n % 50 == 0 {
            probe.drain(&mut b);
        }
    }
    let count = |b: &Batch| b.conns.len() + b.flows.len() + b.txs.len();
    let first = count(&b);
    probe.finish();
    probe.drain(&mut b);
    assert!(first > 0 && count(&b) > first, "{first} then {}", count(&b));
    assert_eq!(dump(&b), dump(&all));
    probe.drain(&mut b);
    assert_eq!(dump(&b), dump(&all), "a second drain adds nothing");

    // The batch's vector goes to the probe and comes back on the next drain.
    let p = b.conns.as_ptr();
    b.clear();
    probe.drain(&mut b);
    assert!(b.is_empty());
    b.clear();
    probe.drain(&mut b);
    assert_eq!(b.conns.as_ptr(), p);
}

/// A raw IPv4 UDP datagram from 10.0.0.1:1234 to 10.0.0.2:53.
const UDP: [u8; 30] = [
    0x45, 0, 0, 30, 0, 1, 0, 0, 64, 17, 0x66, 0xcc, 10, 0, 0, 1, 10, 0, 0, 2, //
    0x04, 0xd2, 0, 53, 0, 10, 0, 0, b'h', b'i',
];

/// [`UDP`] between other ports (its UDP checksum is 0: not computed).
fn udp(sport: u16, dport: u16) -> [u8; 30] {
    let mut u = UDP;
    u[20..22].copy_from_slice(&sport.to_be_bytes());
    u[22..24].copy_from_slice(&dport.to_be_bytes());
    u
}

/// Live `any`: interfaces are named the first time one of their packets is
/// tracked, once each; ids given names up front keep them; the packet's
/// offloaded VLAN reaches the record.
#[test]
fn interfaces_named_once_and_offloaded_vlan_kept() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    fn namer(id: u32) -> String {
        CALLS.fetch_add(1, Ordering::Relaxed);
        format!("eth{id}")
    }
    let mut probe = Probe::new(ProbeConfig { checksums: ChecksumMode::Ignore, ..config() });
    probe.name_interfaces_with(namer);
    let t0 = 1_700_000_000_000_000_000i64;
    for (i, id) in [3u32, 3, 5, 3, 5, 5].into_iter().enumerate() {
        let bytes = udp(1000 + id as u16, 53);
        let p = Packet { if_id: id, vlan_tci: Some(42), ..Packet::new(LinkType::RAW, t0 + i as i64, &bytes) };
        assert_eq!(probe.packet(&p), Ok(()));
    }
    // Not IP: skipped with its reason, and never named.
    let junk = Packet { if_id: 9, ..Packet::new(LinkType::RAW, t0, &[0x10; 20]) };
    assert_eq!(probe.packet(&junk), Err(SkipReason::Malformed));
    assert_eq!(CALLS.load(Ordering::Relaxed), 2);
    probe.finish();
    let mut b = Batch::default();
    probe.drain(&mut b);
    let mut ifaces: Vec<&str> = b.flows.iter().map(|f| &*f.iface).collect();
    ifaces.sort();
    assert_eq!(ifaces, ["eth3", "eth5"]);
    assert_eq!(b.conns.len(), 2, "one connection per interface");
    assert!(b.conns.iter().all(|c| (c.vlan, c.inner_vlan) == (Some(42), None)));

    let mut probe = Probe::new(config());
    probe.set_iface_name(1, "lo");
    let (a, b) = (udp(1001, 53), udp(1002, 53));
    let _ = probe.packet(&Packet { if_id: 1, ..Packet::new(LinkType::RAW, t0, &a) });
    let _ = probe.packet(&Packet { if_id: 2, ..Packet::new(LinkType::RAW, t0, &b) });
    probe.finish();
    let mut b = Batch::default();
    probe.drain(&mut b);
    let mut ifaces: Vec<&str> = b.flows.iter().map(|f| &*f.iface).collect();
    ifaces.sort();
    assert_eq!(ifaces, ["if2", "lo"]);
}

/// `-i any` ids are the kernel's ifindexes, which pass 65,535 on hosts that
/// made and removed many interfaces: 65,536 and 65,537 are interfaces of
/// their own, not 0 and 1 again. A flow is keyed by client, server, port
/// and interface (not the client's port), so one client's connections on
/// these four interfaces are four flows, each under its own name.
#[test]
fn interface_ids_above_u16_stay_apart() {
    fn namer(id: u32) -> String {
        format!("veth{id}")
    }
    let t0 = 1_700_000_000_000_000_000i64;
    let ids = [1u32, 65_537, 0, 65_536];
    let mut probe = Probe::new(ProbeConfig { checksums: ChecksumMode::Ignore, ..config() });
    probe.name_interfaces_with(namer);
    for (i, id) in ids.into_iter().chain(ids).enumerate() {
        let bytes = udp(1000 + (i % ids.len()) as u16, 53);
        let p = Packet { if_id: id, ..Packet::new(LinkType::RAW, t0 + i as i64, &bytes) };
        assert_eq!(probe.packet(&p), Ok(()));
    }
    probe.finish();
    let mut b = Batch::default();
    probe.drain(&mut b);
    let mut flows: Vec<(String, u64)> = b.flows.iter().map(|f| (f.iface.to_string(), f.pkts_out)).collect();
    flows.sort();
    let want = [("veth0", 2), ("veth1", 2), ("veth65536", 2), ("veth65537", 2)];
    assert_eq!(flows, want.map(|(n, p)| (n.to_string(), p)));
    assert_eq!(b.conns.len(), 4);

    // Names given up front (no namer) stay apart too.
    let mut probe = Probe::new(ProbeConfig { checksums: ChecksumMode::Ignore, ..config() });
    probe.set_iface_name(1, "eth1");
    probe.set_iface_name(65_537, "veth9");
    for (i, id) in [1u32, 65_537].into_iter().enumerate() {
        let bytes = udp(1000 + i as u16, 53);
        let _ = probe.packet(&Packet { if_id: id, ..Packet::new(LinkType::RAW, t0, &bytes) });
    }
    probe.finish();
    let mut b = Batch::default();
    probe.drain(&mut b);
    let mut names: Vec<String> = b.flows.iter().map(|f| f.iface.to_string()).collect();
    names.sort();
    assert_eq!(names, ["eth1", "veth9"]);
}

/// Timers run on `advance` without packets: a UDP flow ends after its
/// inactivity timeout (a minute).
#[test]
fn advance_runs_timers() {
    let mut probe = Probe::new(config());
    let t0 = 1_700_000_000_000_000_000i64;
    let u = udp(1234, 9999);
    assert_eq!(probe.packet(&Packet::new(LinkType::RAW, t0, &u)), Ok(()));
    assert_eq!(probe.active_connections(), 1);
    probe.advance(t0 + 30_000_000_000);
    assert_eq!(probe.active_connections(), 1);
    probe.advance(t0 + 600_000_000_000);
    assert_eq!(probe.active_connections(), 0);
    let mut b = Batch::default();
    probe.drain(&mut b);
    assert_eq!(b.conns.len(), 1);
}

/// `--cpu-budget` step 1 on a real capture: with 1 in 4 connections parsed,
/// a connection's transactions are all there or none are, each parsed one
/// weighs 4, the others are counted, and conn records are all still written.
#[test]
fn sampling_parses_whole_connections_and_weighs_them() {
    let run = |n: u32| {
        let mut probe = Probe::new(config());
        probe.set_sampling(n);
        let mut b = Batch::default();
        let mut r = sample();
        while let Some(p) = r.next_packet() {
            let _ = probe.packet(&p);
        }
        probe.finish();
        probe.drain(&mut b);
        (b, probe.app_stats().clone())
    };
    let (all, all_stats) = run(1);
    let (some, some_stats) = run(4);
    assert_eq!(all.conns.len(), some.conns.len(), "sampling never drops a connection");
    assert_eq!(all_stats.sampled_out, 0);
    assert!(all.txs.iter().all(|t| t.sample_weight == 1));
    assert!(some.txs.iter().all(|t| t.sample_weight == 4));
    let found = |s: &AppStats| s.connections.iter().sum::<u64>();
    assert_eq!(found(&all_stats), found(&some_stats) + some_stats.sampled_out, "each connection found is parsed or counted");
    assert!(some_stats.sampled_out > 0 && found(&some_stats) > 0, "{some_stats:?}");
    // Per protocol (the loss table's protocol rows): each protocol's found
    // connections are its parsed plus its sampled out.
    assert_eq!(some_stats.sampled_out_by.iter().sum::<u64>(), some_stats.sampled_out);
    for i in 0..all_stats.connections.len() {
        assert_eq!(all_stats.connections[i], some_stats.connections[i] + some_stats.sampled_out_by[i], "protocol {i}");
    }
    // Whole or nothing: a parsed connection has every transaction it has unsampled.
    let per_uid = |b: &Batch| {
        let mut m = std::collections::HashMap::new();
        for t in &b.txs {
            *m.entry((t.orig_h, t.orig_p, t.resp_h, t.resp_p)).or_insert(0u32) += 1;
        }
        m
    };
    let (a, s) = (per_uid(&all), per_uid(&some));
    for (k, n) in &s {
        assert_eq!(a.get(k), Some(n), "{k:?}");
    }
}

/// An IPv4/TCP segment (raw IP link type; checksums are not verified in
/// the test's configuration).
fn segment(src: ([u8; 4], u16), dst: ([u8; 4], u16), flags: u8, seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
    let total = (40 + payload.len()) as u16;
    let mut f = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0];
    f[2..4].copy_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.1.to_be_bytes());
    f.extend_from_slice(&dst.1.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&ack.to_be_bytes());
    f.extend_from_slice(&[5 << 4, flags, 0xff, 0xff, 0, 0, 0, 0]);
    f.extend_from_slice(payload);
    f
}

/// `--cpu-budget` step 1b: eight long Redis connections, 60 PING/PONG
/// each; thinning to 1 in 2 after the 20th round stops the parsing of some
/// of them (counted, per protocol too, in the loss totals) and keeps the
/// others, which carry the stopped ones' weight from then on. A connection
/// is parsed whole or not at all from that point: a kept one has all 60
/// transactions, a stopped one exactly the 20 before the draw (none
/// invented: the PING whose PONG was not parsed is not written as
/// unanswered); the sum of the weights estimates the 480 within what the
/// hand-over of a round can miss; conn records are all still written.
/// Thinning to 1 in 64 keeps the floor: one connection still parsed,
/// standing for all eight.
#[test]
fn thinning_stops_whole_connections_and_weighs_the_kept() {
    let run = |k: u32| {
        let mut cfg = config();
        cfg.checksums = wirelog_decode::ChecksumMode::Ignore;
        let mut probe = Probe::new(cfg);
        let server = ([10, 9, 0, 1], 6379);
        let client = |c: u16| ([10, 9, 1, c as u8], 40_000 + c);
        let mut t = 1_700_000_000_000_000_000i64;
        let mut feed = |probe: &mut Probe, f: Vec<u8>| {
            t += 1_000_000;
            let _ = probe.packet(&Packet::new(LinkType::RAW, t, &f));
        };
        const SYN: u8 = 0x02;
        const ACK: u8 = 0x10;
        const PSH: u8 = 0x08;
        const FIN: u8 = 0x01;
        let (ping, pong) = (b"PING\r\n", b"+PONG\r\n");
        for c in 0..8 {
            feed(&mut probe, segment(client(c), server, SYN, 100, 0, b""));
            feed(&mut probe, segment(server, client(c), SYN | ACK, 500, 101, b""));
            feed(&mut probe, segment(client(c), server, ACK, 101, 501, b""));
        }
        for round in 0..60u32 {
            if round == 20 {
                probe.set_thinning(k);
            }
            for c in 0..8 {
                let (cs, ss) = (101 + round * ping.len() as u32, 501 + round * pong.len() as u32);
                feed(&mut probe, segment(client(c), server, PSH | ACK, cs, ss, ping));
                feed(&mut probe, segment(server, client(c), PSH | ACK, ss, cs + ping.len() as u32, pong));
            }
        }
        for c in 0..8 {
            let (cs, ss) = (101 + 60 * ping.len() as u32, 501 + 60 * pong.len() as u32);
            feed(&mut probe, segment(client(c), server, FIN | ACK, cs, ss, b""));
            feed(&mut probe, segment(server, client(c), FIN | ACK, ss, cs + 1, b""));
            feed(&mut probe, segment(client(c), server, ACK, cs + 1, ss + 1, b""));
        }
        probe.finish();
        let mut b = Batch::default();
        probe.drain(&mut b);
        let mut totals: wirelog_record::LossTotals = Default::default();
        probe.loss_totals(&mut totals);
        (b, probe.app_stats().clone(), totals)
    };
    let (all, all_stats, _) = run(1);
    assert_eq!((all.conns.len(), all.txs.len()), (8, 480), "the traffic parses");
    assert!(all.txs.iter().all(|t| t.sample_weight == 1));
    assert_eq!(all_stats.parse_stopped, 0);
    let (some, some_stats, totals) = run(2);
    assert_eq!(some.conns.len(), 8, "thinning never drops a connection");
    assert!(some.conns.iter().all(|c| c.service.is_some()), "stopped connections keep their service");
    let stopped = some_stats.parse_stopped;
    assert!(stopped > 0 && stopped < 8, "{stopped} of 8 stopped (the draw is seeded)");
    assert_eq!(some_stats.parse_stopped_by.iter().sum::<u64>(), stopped);
    let rows: u64 = totals[1..].iter().map(|r| r.get(wirelog_record::LossCount::ParseStopped)).sum();
    assert_eq!(rows, stopped, "the loss table's protocol rows");
    assert_eq!((all_stats.parsing, some_stats.parsing), (0, 0), "every parser ended");
    assert_eq!(all_stats.connections, some_stats.connections, "step 1b stops, it does not skip");
    assert_eq!(some_stats.gave_up, 0, "a stopped connection is no parser that gave up");
    let mut per_conn = std::collections::BTreeMap::new();
    for t in &some.txs {
        let e = per_conn.entry(t.orig_p).or_insert((0u32, 0u32, 0u32));
        e.0 += 1;
        e.1 += (t.sample_weight == 1) as u32;
        e.2 += (t.sample_weight > 1) as u32;
    }
    assert_eq!(per_conn.len(), 8);
    // What was parsed before the draw at the 21st PING: the 20 earlier
    // transactions, less the last one if its PONG waits for the PING's
    // acknowledgement to be handed to the parser.
    let before = per_conn.values().map(|(n, _, _)| *n).min().unwrap();
    assert!((19..=20).contains(&before), "{before}");
    let (mut kept, mut cut) = (0, 0);
    for (port, (n, w1, _)) in &per_conn {
        if *n == 60 {
            assert!(*w1 >= before, "{port}: kept, so parsed whole, weighing 1 before the draw");
            kept += 1;
        } else {
            assert_eq!((*n, *w1), (before, before), "{port}: stopped at the draw, nothing after it");
            cut += 1;
        }
    }
    assert_eq!((kept, cut), (8 - stopped, stopped));
    // The weights: every transaction before the draw weighs 1; after it the
    // kept connections' add up to the eight connections, but for the round
    // in which each stopped connection's weight is handed over (at most
    // one transaction of each missing, or counted twice).
    let estimate: u64 = some.txs.iter().map(|t| t.sample_weight as u64).sum();
    println!("1 in 2: {stopped} of 8 stopped, estimate {estimate} of 480");
    assert!(estimate.abs_diff(480) <= stopped, "estimate {estimate}, {stopped} stopped");
    let max_w = some.txs.iter().map(|t| t.sample_weight).max().unwrap();
    assert!(max_w > 1 && max_w <= 1 + stopped as u32, "{max_w}");
    // The floor: 1 in 64 would stop all eight but for the last one.
    let (few, few_stats, _) = run(64);
    let left = 8 - few_stats.parse_stopped;
    assert!(left >= 1, "the floor keeps one parsed");
    let estimate: u64 = few.txs.iter().map(|t| t.sample_weight as u64).sum();
    println!("1 in 64: {left} of 8 left, estimate {estimate} of 480");
    assert!(estimate.abs_diff(480) <= few_stats.parse_stopped, "estimate {estimate}");
}

/// A MySQL connection captured from the server's greeting on, with no
/// SYN (the capture started after the handshake), on a port that is no
/// MySQL port: partial for Zeek, whose MySQL analyzer reads nothing of it
/// (MySQL.cc:53), however the analyzer was attached. Found by content (the
/// greeting from the originator flips the roles) or by `--ports`, the
/// transactions are parsed and conn.log names no service; the same
/// exchange after a whole handshake is `mysql` both ways.
#[test]
fn partial_mysql_gets_no_service_by_port_or_by_content() {
    const SYN: u8 = 0x02;
    const ACK: u8 = 0x10;
    const PSH: u8 = 0x08;
    fn mysql_packet(seq: u8, body: &[u8]) -> Vec<u8> {
        let mut p = (body.len() as u32).to_le_bytes()[..3].to_vec();
        p.push(seq);
        p.extend_from_slice(body);
        p
    }
    // Handshake v10 (MySQL's protocol docs, Protocol::HandshakeV10).
    let mut g = vec![0x0a];
    g.extend_from_slice(b"5.5.5-10.11.6-MariaDB\0");
    g.extend_from_slice(&[8, 0, 0, 0]);
    g.extend_from_slice(&[0x41; 8]);
    g.push(0);
    g.extend_from_slice(&[0xfe, 0xf7, 0x2d, 0x02, 0x00, 0xff, 0x81, 0x15]);
    g.extend_from_slice(&[0; 10]);
    g.extend_from_slice(&[0x42; 12]);
    g.push(0);
    g.extend_from_slice(b"mysql_native_password\0");
    let greeting = mysql_packet(0, &g);
    let caps: u32 = 0x1 | 0x4 | 0x200 | 0x2000 | 0x8000 | 0x80000;
    let mut login = caps.to_le_bytes().to_vec();
    login.extend_from_slice(&(1u32 << 24).to_le_bytes());
    login.push(33);
    login.extend_from_slice(&[0; 23]);
    login.extend_from_slice(b"wl\0\0mysql_native_password\0");
    let login = mysql_packet(1, &login);
    let ok = mysql_packet(2, &[0, 0, 0, 2, 0, 0, 0]);
    let ping = mysql_packet(0, &[0x0e]);
    let pong = mysql_packet(1, &[0, 0, 0, 2, 0, 0, 0]);
    let run = |by_port: bool, handshake: bool| {
        let mut cfg = config();
        cfg.checksums = wirelog_decode::ChecksumMode::Ignore;
        if by_port {
            let app = cfg.track.app.as_mut().unwrap();
            app.ports.set(wirelog_record::Protocol::Mysql, &[13306]);
            cfg.track.tcp_server_ports.insert(13306);
        }
        let mut probe = Probe::new(cfg);
        let (server, client) = (([10, 9, 0, 1], 13306), ([10, 9, 1, 1], 40_000));
        let mut t = 1_700_000_000_000_000_000i64;
        let mut feed = |f: Vec<u8>| {
            t += 1_000_000;
            let _ = probe.packet(&Packet::new(LinkType::RAW, t, &f));
        };
        let (mut cs, mut ss) = (100u32, 500u32);
        if handshake {
            feed(segment(client, server, SYN, cs - 1, 0, b""));
            feed(segment(server, client, SYN | ACK, ss - 1, cs, b""));
            feed(segment(client, server, ACK, cs, ss, b""));
        }
        for (from_server, m) in [(true, &greeting), (false, &login), (true, &ok), (false, &ping), (true, &pong)] {
            if from_server {
                feed(segment(server, client, PSH | ACK, ss, cs, m));
                ss += m.len() as u32;
            } else {
                feed(segment(client, server, PSH | ACK, cs, ss, m));
                cs += m.len() as u32;
            }
        }
        feed(segment(client, server, ACK, cs, ss, b""));
        probe.finish();
        let mut b = Batch::default();
        probe.drain(&mut b);
        assert_eq!(b.conns.len(), 1, "{:?}", b.conns);
        assert_eq!(b.conns[0].resp_p, 13306, "the server is the responder");
        assert_eq!(b.txs.len(), 2, "login and ping parsed: {:?}", b.txs);
        b.conns[0].service
    };
    for by_port in [false, true] {
        assert_eq!(run(by_port, false), None, "partial, by port {by_port}");
        assert_eq!(run(by_port, true), Some("mysql"), "whole, by port {by_port}");
    }
}

/// `--memory` with parsing on (`wirelog_track::SharedMemory`): while the
/// stream buffers hold nothing, the flow table holds what it holds without
/// parsing (its share of the whole budget: no flow bucket written early),
/// and the buffers' limit is lowered by what it borrowed; once the buffers
/// hold bytes, its limit comes down to what the rest of the budget gives
/// it, never below its share of the budget less the buffers' whole share.
/// The connection table borrows nothing: its limit is its own capacity
/// throughout (here sized to its share of the whole budget, so the
/// connections fit without eviction).
#[test]
fn tables_borrow_the_stream_buffers_unused_share() {
    let (per_conn, per_flow) = (Tracker::table_bytes_per_connection(), Tracker::table_bytes_per_flow());
    let memory = 800 * per_conn;
    let stream = memory / 2;
    let shares = |bytes: usize| (bytes / 4 * 3 / per_conn, bytes / 4 / per_flow);
    let ((max_c, max_f), (min_c, min_f)) = (shares(memory), shares(memory - stream));
    let mut cfg = config();
    cfg.checksums = wirelog_decode::ChecksumMode::Ignore;
    cfg.track.max_connections = max_c;
    cfg.track.max_flows = max_f;
    cfg.track.app.as_mut().unwrap().total_buffer_bytes = stream;
    cfg.track.shared_memory = Some(wirelog_track::SharedMemory { bytes: memory, min_flows: min_f });
    let mut probe = Probe::new(cfg);
    let mut t = 1_700_000_000_000_000_000i64;
    let mut b = Batch::default();
    // UDP connections (and flows) to a port nothing parses: more than the
    // connection table's share without the buffers' (300), fewer than with
    // (600), which is its capacity here, and than the flow table's (its
    // share of the whole budget, 493 with a TCP state of 52 bytes): 396.
    let n = (min_c + max_c.min(max_f)) / 2;
    assert!(min_c < n && n < max_c && n < max_f, "{min_c} {max_c} {max_f}");
    for c in 0..n {
        let mut u = udp(1024 + c as u16, 5000);
        u[14] = (c >> 8) as u8;
        u[15] = c as u8;
        t += 1_000;
        assert_eq!(probe.packet(&Packet::new(LinkType::RAW, t, &u)), Ok(()));
        if c % 100 == 99 {
            probe.drain(&mut b);
        }
    }
    probe.drain(&mut b);
    assert_eq!((probe.active_connections(), probe.track_stats().evicted), (n, 0));
    assert_eq!(probe.tracker().flows_emitted_early(), 0);
    let lent = n.saturating_sub(min_f) * per_flow;
    assert_eq!(probe.tracker().memory_shares(), (max_c, max_f, stream - lent, 0));

    // A parsed connection (Redis) whose client's bytes after a hole are
    // buffered: the flow table's limit comes down by the buffered bytes'
    // worth, the connection table's stays.
    let server = ([10, 9, 0, 1], 6379);
    let client = ([10, 9, 1, 1], 40_000);
    let mut feed = |probe: &mut Probe, f: Vec<u8>| {
        t += 1_000;
        let _ = probe.packet(&Packet::new(LinkType::RAW, t, &f));
    };
    feed(&mut probe, segment(client, server, 0x02, 100, 0, b""));
    feed(&mut probe, segment(server, client, 0x12, 500, 101, b""));
    feed(&mut probe, segment(client, server, 0x10, 101, 501, b""));
    let held = 20_000;
    let mut seq = 101 + 1_000;
    let chunk = [b'x'; 1_000];
    while probe.tracker().memory_shares().3 < held {
        let before = probe.tracker().memory_shares().3;
        feed(&mut probe, segment(client, server, 0x18, seq, 501, &chunk));
        assert!(probe.tracker().memory_shares().3 > before, "bytes after the hole are buffered");
        seq += 1_000;
    }
    probe.drain(&mut b);
    let (c, f, _, used) = probe.tracker().memory_shares();
    let (_, want_f) = shares(memory - used);
    assert!(want_f < max_f, "{want_f}");
    assert_eq!((c, f), (max_c, want_f.max(min_f)));
}
