use super::*;
use crate::testutil::{run_parser, tcp_events};

fn ct(t: &Transaction) -> &CassandraTx {
    match &t.detail {
        Detail::Cassandra(c) => c,
        _ => panic!("not cassandra"),
    }
}

fn run(rel: &str) -> Vec<Transaction> {
    let ev = tcp_events(&format!("packetbeat2/pcaps/cassandra/v4/{rel}"), &[9042]);
    run_parser(&ev, || Box::new(CassandraParser::new(&ParseConfig::default()))).into_iter().flatten().collect()
}

/// Requests and responses of each reference capture, as tshark's CQL
/// dissector counts them (`tshark -d tcp.port==9042,cql -Y cql -T fields
/// -E occurrence=a -e cql.direction -e cql.opcode`): every request is paired
/// by its stream id with a response, nothing is left over.
#[test]
fn reference_captures_pair_every_request_by_stream() {
    for (pcap, ops) in [
        ("cassandra_create_keyspace.pcap", &[("QUERY", 4)][..]),
        ("cassandra_create_table.pcap", &[("QUERY", 8)]),
        ("cassandra_insert.pcap", &[("QUERY", 1)]),
        ("cassandra_select.pcap", &[("QUERY", 1)]),
        ("cassandra_mixed_frame.pcap", &[("OPTIONS", 2), ("STARTUP", 2), ("REGISTER", 1), ("QUERY", 12)]),
        ("cassandra_compressed.pcap", &[("STARTUP", 2), ("REGISTER", 1), ("QUERY", 17)]),
    ] {
        let txs = run(pcap);
        let total: usize = ops.iter().map(|o| o.1).sum();
        assert_eq!(txs.len(), total, "{pcap}: {txs:#?}");
        for (op, n) in ops {
            assert_eq!(txs.iter().filter(|t| ct(t).op == *op).count(), *n, "{pcap} {op}");
        }
        for t in &txs {
            assert_eq!(t.status, TxStatus::Ok, "{pcap}: {t:#?}");
            assert!(t.request.is_some() && t.response.is_some());
            assert_eq!(ct(t).version, 4);
        }
    }
}

#[test]
fn packetbeats_create_keyspace_facts() {
    let txs = run("cassandra_create_keyspace.pcap");
    let t = &txs[0];
    let c = ct(t);
    assert_eq!(c.query.as_deref(), Some("CREATE KEYSPACE mykeyspace WITH REPLICATION = { 'class' : 'SimpleStrategy', 'replication_factor' : 1 };"));
    assert_eq!(c.fingerprint.as_deref(), Some("create keyspace mykeyspace with replication = { ? : ?, ? : ? };"));
    assert_eq!((c.op, c.response_op, c.stream, c.consistency), ("QUERY", Some("RESULT"), Some(20), Some("ONE")));
    assert_eq!((c.result, c.change.as_deref(), c.keyspace.as_deref()), (Some("schema_change"), Some("CREATED KEYSPACE"), Some("mykeyspace")));
    // Frame sizes with their 9-byte header (Packetbeat's client/server bytes).
    assert_eq!((t.request.unwrap().bytes, t.response.unwrap().bytes), (133, 44));
    // Packetbeat: event.duration 62453000 ns.
    assert_eq!(t.latency_ns(), Some(62_453_000));
    // The later selects, by stream, with tshark's cql.result.rows.row_count
    // (streams 22 and 21 are answered in one segment, 22 first).
    let rows: Vec<_> = txs.iter().map(|t| (ct(t).stream, ct(t).rows)).collect();
    assert_eq!(rows, [(Some(20), None), (Some(22), Some(1)), (Some(21), Some(0)), (Some(23), Some(1))]);
}

#[test]
fn select_and_insert_results() {
    let s = &run("cassandra_select.pcap")[0];
    let c = ct(s);
    assert_eq!((c.query.as_deref(), c.stream, c.result, c.rows, c.columns), (Some("SELECT * FROM users;"), Some(253), Some("rows"), Some(1), Some(3)));
    assert_eq!((c.keyspace.as_deref(), c.table.as_deref()), (Some("mykeyspace"), Some("users")));
    assert_eq!((s.request.unwrap().bytes, s.response.unwrap().bytes), (9 + 41, 9 + 89));
    let i = &run("cassandra_insert.pcap")[0];
    assert_eq!((ct(i).result, ct(i).stream, ct(i).fingerprint.as_deref()), (Some("void"), Some(252), Some("insert into users (user_id, fname, lname) values(?+);")));
}

/// The snappy-compressed capture: bodies decompressed (tshark reads the
/// same statements), and each response paired by stream id: the query on
/// stream 0 with the response on stream 0 (system.local, 1 row; tshark's
/// row count), not with the stream-64 response that arrives first.
#[test]
fn snappy_frames_are_read_and_paired_by_stream() {
    let txs = run("cassandra_compressed.pcap");
    assert!(txs.iter().all(|t| ct(t).compression == Some("snappy") || ct(t).op == "STARTUP"), "{txs:#?}");
    let local = txs.iter().find(|t| ct(t).query.as_deref() == Some("SELECT * FROM system.local WHERE key='local'")).unwrap();
    let c = ct(local);
    assert_eq!((c.stream, c.rows, c.keyspace.as_deref(), c.table.as_deref()), (Some(0), Some(1), Some("system"), Some("local")));
    assert_eq!(c.compression, Some("snappy"));
    let peers = txs.iter().find(|t| ct(t).query.as_deref() == Some("SELECT * FROM system.peers")).unwrap();
    assert_eq!((ct(peers).stream, ct(peers).rows, ct(peers).table.as_deref()), (Some(64), Some(0), Some("peers")));
    // The STARTUP is never compressed (2.2); its READY is.
    let st = txs.iter().find(|t| ct(t).op == "STARTUP").unwrap();
    assert_eq!((ct(st).response_op, ct(st).compression), (Some("READY"), Some("snappy")));
}

fn frame_bytes(version: u8, flags: u8, stream: i16, op: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![version, flags];
    v.extend_from_slice(&stream.to_be_bytes());
    v.push(op);
    v.extend_from_slice(&(body.len() as u32).to_be_bytes());
    v.extend_from_slice(body);
    v
}

fn long_string(s: &str) -> Vec<u8> {
    [&(s.len() as u32).to_be_bytes()[..], s.as_bytes()].concat()
}

fn string(s: &[u8]) -> Vec<u8> {
    [&(s.len() as u16).to_be_bytes()[..], s].concat()
}

#[test]
fn prepare_execute_batch_error_event_and_redaction() {
    let cfg = ParseConfig { redact: true, ..ParseConfig::default() };
    let mut p = CassandraParser::new(&cfg);
    let mut out = Vec::new();
    let q = "SELECT * FROM ks.t WHERE id = 'secret'";
    p.data(Dir::ToServer, 1, &frame_bytes(4, 0, 5, 0x09, &long_string(q)), &mut out);
    // RESULT prepared: kind 4, id "ab", then metadata (not read).
    let body = [&4u32.to_be_bytes()[..], &string(b"ab"), &[0; 8]].concat();
    p.data(Dir::ToClient, 2, &frame_bytes(0x84, 0, 5, 0x08, &body), &mut out);
    // EXECUTE of "ab" at QUORUM, and a BATCH (unlogged, 2 statements),
    // both sent before either answer; answered out of order.
    let exec = [&string(b"ab")[..], &4u16.to_be_bytes(), &[0]].concat();
    let batch = [&[1u8][..], &2u16.to_be_bytes(), &[0], &long_string("INSERT INTO t (a) VALUES (1)"), &0u16.to_be_bytes(), &[1], &string(b"ab"), &1u16.to_be_bytes(), &3u32.to_be_bytes(), b"xyz", &6u16.to_be_bytes(), &[0]].concat();
    let both = [frame_bytes(4, 0, 6, 0x0A, &exec), frame_bytes(4, 0, 7, 0x0D, &batch)].concat();
    // Split across calls at every third byte.
    for (i, c) in both.chunks(3).enumerate() {
        p.data(Dir::ToServer, 3 + i as i64, c, &mut out);
    }
    let err = [&0x2200u32.to_be_bytes()[..], &string(b"unconfigured table t")].concat();
    p.data(Dir::ToClient, 100, &frame_bytes(0x84, 0, 7, 0x00, &err), &mut out);
    p.data(Dir::ToClient, 101, &frame_bytes(0x84, 0, 6, 0x08, &1u32.to_be_bytes()), &mut out);
    // A server push on stream -1, and a response nobody asked for.
    let ev = [string(b"SCHEMA_CHANGE"), string(b"CREATED"), string(b"TABLE"), string(b"ks"), string(b"t2")].concat();
    p.data(Dir::ToClient, 102, &frame_bytes(0x84, 0, -1, 0x0C, &ev), &mut out);
    p.data(Dir::ToClient, 103, &frame_bytes(0x84, 0, 9, 0x08, &1u32.to_be_bytes()), &mut out);
    p.finish(104, &mut out);
    assert_eq!(out.len(), 5, "{out:#?}");
    let prep = ct(&out[0]);
    assert_eq!((prep.op, prep.result, prep.query.as_deref()), ("PREPARE", Some("prepared"), Some("SELECT * FROM ks.t WHERE id = ?")));
    assert_eq!(prep.fingerprint.as_deref(), Some("select * from ks.t where id = ?"));
    let (b, e) = (&out[1], &out[2]);
    assert_eq!((ct(b).op, b.status, ct(b).error, ct(b).error_code), ("BATCH", TxStatus::Error, Some("Invalid"), Some(0x2200)));
    assert_eq!((ct(b).batch_type, ct(b).batch_statements, ct(b).consistency), (Some("unlogged"), Some(2), Some("LOCAL_QUORUM")));
    assert_eq!((ct(b).query.as_deref(), ct(b).error_message.as_deref()), (Some("INSERT INTO t (a) VALUES (?)"), Some("unconfigured table t")));
    assert_eq!((ct(e).op, e.status, ct(e).consistency, ct(e).result), ("EXECUTE", TxStatus::Ok, Some("QUORUM"), Some("void")));
    assert_eq!(ct(e).query, prep.query, "an EXECUTE is named by its PREPARE");
    assert_eq!((e.request.unwrap().first_ns, e.response.unwrap().last_ns), (3, 101));
    let push = &out[3];
    assert_eq!((ct(push).op, ct(push).stream, push.status, push.request), ("EVENT", None, TxStatus::Ok, None));
    assert_eq!((ct(push).change.as_deref(), ct(push).table.as_deref()), (Some("SCHEMA_CHANGE CREATED TABLE"), Some("t2")));
    assert_eq!(out[4].status, TxStatus::NoRequest);
    assert_eq!(p.stats().malformed, 1);
}

/// Protocol v5: after READY, frames inside segments (uncompressed: a 6-byte
/// header, payload, CRC32), one segment carrying two frames and one frame
/// cut across two segments; and v4 with lz4 bodies.
#[test]
fn v5_segments_and_lz4_bodies() {
    let mut p = CassandraParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    let startup = [&1u16.to_be_bytes()[..], &string(b"CQL_VERSION"), &string(b"3.0.0")].concat();
    let st = frame_bytes(5, 0, 0, 0x01, &startup);
    assert_eq!(probe(Dir::ToServer, &st), crate::detect::Probe::Certain);
    p.data(Dir::ToServer, 1, &st, &mut out);
    p.data(Dir::ToClient, 2, &frame_bytes(0x85, 0, 0, 0x02, &[]), &mut out);
    let seg = |payload: &[u8], self_contained: bool| segment(payload, self_contained, None);
    let q1 = frame_bytes(5, 0, 1, 0x07, &[long_string("SELECT 1"), vec![0, 1], vec![0, 0, 0, 0]].concat());
    let q2 = frame_bytes(5, 0, 2, 0x07, &[long_string("SELECT 2"), vec![0, 1], vec![0, 0, 0, 0]].concat());
    let (a, b) = q2.split_at(10);
    let wire = [seg(&[q1.clone(), a.to_vec()].concat(), false), seg(b, false)].concat();
    p.data(Dir::ToServer, 3, &wire[..7], &mut out);
    p.data(Dir::ToServer, 4, &wire[7..], &mut out);
    let r = [frame_bytes(0x85, 0, 2, 0x08, &1u32.to_be_bytes()), frame_bytes(0x85, 0, 1, 0x08, &1u32.to_be_bytes())].concat();
    p.data(Dir::ToClient, 5, &seg(&r, true), &mut out);
    assert_eq!(out.len(), 3, "{out:#?}");
    assert_eq!((ct(&out[1]).query.as_deref(), ct(&out[2]).query.as_deref()), (Some("SELECT 2"), Some("SELECT 1")));
    assert!(out.iter().all(|t| t.status == TxStatus::Ok && ct(t).version == 5));
    assert_eq!(p.stats().malformed, 0, "the segments' CRCs agree");

    // v4, lz4: the body is an [int] length and an LZ4 block (all literals).
    let mut p = CassandraParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    let startup = [&2u16.to_be_bytes()[..], &string(b"CQL_VERSION"), &string(b"3.0.0"), &string(b"COMPRESSION"), &string(b"lz4")].concat();
    p.data(Dir::ToServer, 1, &frame_bytes(4, 0, 0, 0x01, &startup), &mut out);
    p.data(Dir::ToClient, 2, &frame_bytes(0x84, 0, 0, 0x02, &[]), &mut out);
    let raw = [long_string("SELECT now() FROM system.local"), vec![0, 6], vec![0]].concat();
    let mut block = vec![0xf0, (raw.len() - 15) as u8];
    block.extend_from_slice(&raw);
    let body = [&(raw.len() as u32).to_be_bytes()[..], &block].concat();
    p.data(Dir::ToServer, 3, &frame_bytes(4, 1, 3, 0x07, &body), &mut out);
    p.data(Dir::ToClient, 4, &frame_bytes(0x84, 1, 3, 0x08, &[0, 0, 0, 0, 0xf0, 0, 0, 0, 0, 1]), &mut out);
    let q = ct(&out[1]);
    assert_eq!((q.query.as_deref(), q.consistency, q.compression, q.result), (Some("SELECT now() FROM system.local"), Some("LOCAL_QUORUM"), Some("lz4"), Some("void")), "{out:#?}");
}

/// A v5 segment (v5 spec, 2.1, 2.2) carrying `payload`: uncompressed (a
/// 6-byte header), or with lz4 (`ulen`: the uncompressed length, an 8-byte
/// header), the CRC24 of the header's length bytes after them, the
/// payload's CRC32 after it.
fn segment(payload: &[u8], self_contained: bool, ulen: Option<usize>) -> Vec<u8> {
    let (mut h, n) = match ulen {
        None => ((payload.len() as u64 | (u64::from(self_contained) << 17)).to_le_bytes()[..3].to_vec(), 3),
        Some(u) => ((payload.len() as u64 | ((u as u64) << 17) | (u64::from(self_contained) << 34)).to_le_bytes()[..5].to_vec(), 5),
    };
    let crc24 = crate::checksum::cassandra_crc24(&h[..n]);
    h.extend_from_slice(&crc24.to_le_bytes()[..3]);
    [&h[..], payload, &crate::checksum::cassandra_crc32(payload).to_le_bytes()].concat()
}

/// An LZ4 block of `raw`: one sequence of literals (lz4's
/// doc/lz4_Block_format.md: a token of 15 and the length's extension bytes).
fn lz4_literals(raw: &[u8]) -> Vec<u8> {
    let mut b = vec![0xf0];
    let mut n = raw.len() - 15;
    while n >= 255 {
        b.push(255);
        n -= 255;
    }
    b.push(n as u8);
    b.extend_from_slice(raw);
    b
}

/// Protocol v5 with lz4: compressed segments (and one sent as is, its
/// uncompressed length 0) carry the frames; CRC mismatches are counted.
#[test]
fn v5_lz4_segments_and_their_crcs() {
    let mut p = CassandraParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    let startup = [&2u16.to_be_bytes()[..], &string(b"CQL_VERSION"), &string(b"3.0.0"), &string(b"COMPRESSION"), &string(b"lz4")].concat();
    p.data(Dir::ToServer, 1, &frame_bytes(5, 0, 0, 0x01, &startup), &mut out);
    p.data(Dir::ToClient, 2, &frame_bytes(0x85, 0, 0, 0x02, &[]), &mut out);
    let q1 = frame_bytes(5, 0, 1, 0x07, &[long_string("SELECT * FROM ks.t WHERE k = 1"), vec![0, 1], vec![0, 0, 0, 0]].concat());
    let q2 = frame_bytes(5, 0, 2, 0x07, &[long_string("SELECT * FROM ks.t WHERE k = 2"), vec![0, 1], vec![0, 0, 0, 0]].concat());
    p.data(Dir::ToServer, 3, &segment(&lz4_literals(&q1), true, Some(q1.len())), &mut out);
    // Sent as is (uncompressed length 0, v5 spec 2.2).
    p.data(Dir::ToServer, 4, &segment(&q2, true, Some(0)), &mut out);
    let r = [frame_bytes(0x85, 0, 2, 0x08, &1u32.to_be_bytes()), frame_bytes(0x85, 0, 1, 0x08, &1u32.to_be_bytes())].concat();
    p.data(Dir::ToClient, 5, &segment(&lz4_literals(&r), true, Some(r.len())), &mut out);
    assert_eq!(out.len(), 3, "{out:#?}");
    let qs: Vec<_> = out[1..].iter().map(|t| (ct(t).query.as_deref(), ct(t).compression, t.status)).collect();
    assert_eq!(qs, [(Some("SELECT * FROM ks.t WHERE k = 2"), Some("lz4"), TxStatus::Ok), (Some("SELECT * FROM ks.t WHERE k = 1"), Some("lz4"), TxStatus::Ok)]);
    assert_eq!(p.stats().malformed, 0);
    // A flipped bit in a header's CRC24, then in a payload: each counted
    // once, the frames still read.
    let q3 = frame_bytes(5, 0, 3, 0x07, &[long_string("SELECT 3"), vec![0, 1], vec![0, 0, 0, 0]].concat());
    let mut bad = segment(&lz4_literals(&q3), true, Some(q3.len()));
    bad[6] ^= 1;
    p.data(Dir::ToServer, 6, &bad, &mut out);
    assert_eq!(p.stats().malformed, 1);
    let q4 = frame_bytes(5, 0, 4, 0x07, &[long_string("SELECT 4"), vec![0, 1], vec![0, 0, 0, 0]].concat());
    let mut bad = segment(&q4, true, Some(0));
    let n = bad.len();
    bad[n - 1] ^= 0x80;
    p.data(Dir::ToServer, 7, &bad, &mut out);
    assert_eq!(p.stats().malformed, 2);
    p.finish(8, &mut out);
    let cut: Vec<_> = out[3..].iter().map(|t| ct(t).query.as_deref()).collect();
    assert_eq!(cut, [Some("SELECT 3"), Some("SELECT 4")]);
}

#[test]
fn not_cql_and_fresh() {
    assert_eq!(probe(Dir::ToServer, &[4, 0, 0, 0, 5, 0, 0, 0, 0]), crate::detect::Probe::Certain);
    assert_eq!(probe(Dir::ToServer, &[4, 0, 0, 0, 5, 0, 0, 0, 1]), crate::detect::Probe::NotForUs);
    assert_eq!(probe(Dir::ToServer, b"GET / HTTP/1.1\r\n"), crate::detect::Probe::NotForUs);
    assert_eq!(probe(Dir::ToClient, &[4, 0, 0, 0, 5, 0, 0, 0, 0]), crate::detect::Probe::NotForUs);
    let mut p = CassandraParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    p.data(Dir::ToServer, 1, b"GET / HTTP/1.1\r\n\r\n", &mut out);
    assert!(out.is_empty());
    assert_eq!(p.stats().unparsed_bytes, 18);
}

/// Every cut of the reference captures (prefixes, truncated segments) and
/// mutated frames: counted, never a panic.
#[test]
fn cut_and_mutated_input_never_panics() {
    for f in ["cassandra_insert.pcap", "cassandra_select.pcap", "cassandra_create_keyspace.pcap", "cassandra_compressed.pcap"] {
        let ev = tcp_events(&format!("packetbeat2/pcaps/cassandra/v4/{f}"), &[9042]);
        crate::testutil::stress(&ev, || Box::new(CassandraParser::new(&ParseConfig { max_header_bytes: 64, ..ParseConfig::default() })));
    }
    let mut rng = crate::testutil::Rng(0xca55);
    let startup = [&2u16.to_be_bytes()[..], &string(b"CQL_VERSION"), &string(b"3.0.0"), &string(b"COMPRESSION"), &string(b"snappy")].concat();
    let seeds = [
        frame_bytes(5, 0, 0, 0x01, &startup),
        frame_bytes(0x85, 0, 0, 0x02, &[]),
        frame_bytes(4, 1, 3, 0x07, &[9, 0x20, b'S', b'E', 0x01, 1]),
        frame_bytes(0x84, 0x0f, 3, 0x08, &[0; 40]),
        frame_bytes(0x84, 0, 3, 0x08, &[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0x30, 0, 1, b'k']),
    ];
    for _ in 0..3000 {
        let mut script = Vec::new();
        for _ in 0..rng.below(12) {
            let seed = &seeds[rng.below(seeds.len())];
            let n = rng.below(32);
            script.push(((n as u8) << 3) | (rng.below(8) as u8));
            for _ in 0..n + 1 {
                let b = if rng.below(4) == 0 { rng.next() as u8 } else { seed[rng.below(seed.len())] };
                script.push(b);
            }
        }
        let mut p = CassandraParser::new(&ParseConfig { max_header_bytes: 64, max_text_bytes: 8, transaction_timeout_ns: 3, ..ParseConfig::default() });
        let mut out = Vec::new();
        for (i, s) in script.chunks(7).enumerate() {
            let dir = if s[0] & 1 == 0 { Dir::ToServer } else { Dir::ToClient };
            if s[0] & 6 == 6 {
                p.gap(dir, i as i64, u64::from(s[0] >> 3), &mut out);
            } else {
                p.data(dir, i as i64, s, &mut out);
            }
            p.expire(i as i64, &mut out);
        }
        p.finish(0, &mut out);
    }
}

/// Memory an open connection holds: the parser's size and its heap after
/// each reference capture (printed; `--nocapture` shows it). Bounded: no
/// idle connection keeps a buffer grown by one large body.
#[test]
fn memory_per_connection() {
    for f in ["cassandra_mixed_frame.pcap", "cassandra_compressed.pcap"] {
        let ev = tcp_events(&format!("packetbeat2/pcaps/cassandra/v4/{f}"), &[9042]);
        let mut parsers: Vec<CassandraParser> = Vec::new();
        let mut out = Vec::new();
        for e in &ev {
            if let crate::testutil::Ev::Data { conn, dir, ts_ns, data } = e {
                while parsers.len() <= *conn {
                    parsers.push(CassandraParser::new(&ParseConfig::default()));
                }
                parsers[*conn].data(*dir, *ts_ns, data, &mut out);
            }
        }
        for (i, p) in parsers.iter().enumerate() {
            let held = p.held_bytes();
            println!("{f} connection {i}: {} B parser + {held} B heap", std::mem::size_of::<CassandraParser>());
            assert!(held <= 2 * MAX_KEPT_SCRATCH + 4096, "{f} {i}: {held}");
        }
    }
}
