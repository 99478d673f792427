use super::bson::build::{doc, V};
use super::*;
use crate::testutil::{parse_pcap, stress, tcp_events};
use crate::Protocol;

fn mongo(t: &Transaction) -> &MongodbTx {
    match &t.detail {
        Detail::Mongodb(m) => m,
        other => panic!("not mongodb: {other:?}"),
    }
}

/// A message: header, then `body`.
fn message(id: u32, response_to: u32, op: u32, body: &[u8]) -> Vec<u8> {
    let mut m = ((16 + body.len()) as u32).to_le_bytes().to_vec();
    m.extend_from_slice(&id.to_le_bytes());
    m.extend_from_slice(&response_to.to_le_bytes());
    m.extend_from_slice(&op.to_le_bytes());
    m.extend_from_slice(body);
    m
}

/// An OP_MSG with `flags`, a body section and document sequences.
fn op_msg(id: u32, response_to: u32, flags: u32, body: &[u8], seqs: &[(&str, Vec<Vec<u8>>)]) -> Vec<u8> {
    let mut b = flags.to_le_bytes().to_vec();
    b.push(0);
    b.extend_from_slice(body);
    for (ident, docs) in seqs {
        b.push(1);
        let size = 4 + ident.len() + 1 + docs.iter().map(Vec::len).sum::<usize>();
        b.extend_from_slice(&(size as u32).to_le_bytes());
        b.extend_from_slice(ident.as_bytes());
        b.push(0);
        for d in docs {
            b.extend_from_slice(d);
        }
    }
    if flags & 1 != 0 {
        // The slot, then the CRC-32C of everything before it.
        b.extend_from_slice(&[0; 4]);
        let mut m = message(id, response_to, OP_MSG, &b);
        let n = m.len() - 4;
        let crc = crate::checksum::crc32c(&m[..n]);
        m[n..].copy_from_slice(&crc.to_le_bytes());
        return m;
    }
    message(id, response_to, OP_MSG, &b)
}

/// `m` wrapped in an OP_COMPRESSED with compressor `id` (`packed`: its
/// body after the header, compressed).
fn op_compressed(m: &[u8], id: u8, packed: &[u8]) -> Vec<u8> {
    let mut b = m[12..16].to_vec();
    b.extend_from_slice(&((m.len() - 16) as u32).to_le_bytes());
    b.push(id);
    b.extend_from_slice(packed);
    message(u32_at(m, 4).unwrap(), u32_at(m, 8).unwrap(), OP_COMPRESSED, &b)
}

/// A Snappy block of `data` in literals of at most 60 bytes and, when it
/// repeats, one copy (snappy's format_description.txt: the length varint,
/// tag 0 literals with the length in the tag, tag 2 copies with 2-byte
/// offsets).
fn snappy(data: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    let mut n = data.len();
    while n >= 0x80 {
        b.push((n as u8) | 0x80);
        n >>= 7;
    }
    b.push(n as u8);
    let half = data.len() / 2;
    let (lits, copy) = if data.len() >= 8 && data[..half] == data[half..2 * half] { (&data[..half], Some(half)) } else { (data, None) };
    for c in lits.chunks(60) {
        b.push(((c.len() - 1) as u8) << 2);
        b.extend_from_slice(c);
    }
    if let Some(len) = copy {
        // Copies of at most 64 bytes each, from `len` back.
        let mut left = len;
        while left > 0 {
            let k = left.min(64);
            b.push((((k - 1) as u8) << 2) | 2);
            b.extend_from_slice(&(len as u16).to_le_bytes());
            left -= k;
        }
    }
    b.extend_from_slice(&data[2 * half..]);
    if data.len() % 2 == 1 && copy.is_some() {
        // The odd last byte as one more literal.
        b.pop();
        b.push(0);
        b.push(data[data.len() - 1]);
    }
    b
}

fn run(steps: &[(Dir, Vec<u8>)]) -> (Vec<Transaction>, ParseStats) {
    let mut p = MongodbParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    for (i, (dir, b)) in steps.iter().enumerate() {
        p.data(*dir, i as i64 * 1000, b, &mut out);
    }
    p.finish(1_000_000, &mut out);
    (out, p.stats())
}

#[test]
fn op_msg_find_pairs_by_id_with_its_reply() {
    let find = doc(&[
        ("find", V::Str("users")),
        ("filter", V::Doc(vec![("age", V::Doc(vec![("$gt", V::I32(30))])), ("name", V::Str("alice"))])),
        ("lsid", V::Doc(vec![("id", V::I64(1))])),
        ("$db", V::Str("app")),
    ]);
    let reply = doc(&[
        ("cursor", V::Doc(vec![("firstBatch", V::Arr(vec![V::Doc(vec![("a", V::I32(1))]), V::Doc(vec![("a", V::I32(2))])])), ("id", V::I64(77)), ("ns", V::Str("app.users"))])),
        ("ok", V::F64(1.0)),
    ]);
    let req = op_msg(5, 0, 0, &find, &[]);
    let resp = op_msg(900, 5, 0, &reply, &[]);
    let (out, stats) = run(&[(Dir::ToServer, req.clone()), (Dir::ToClient, resp.clone())]);
    assert_eq!(out.len(), 1, "{out:?}");
    let t = &out[0];
    assert_eq!(t.status, TxStatus::Ok);
    assert_eq!(t.request.unwrap().bytes, req.len() as u64);
    assert_eq!(t.response.unwrap().bytes, resp.len() as u64);
    let m = mongo(t);
    assert_eq!(m.op, "msg");
    assert_eq!(m.command.as_deref(), Some("find"));
    assert_eq!(m.database.as_deref(), Some("app"));
    assert_eq!(m.collection.as_deref(), Some("users"));
    assert_eq!(m.fingerprint.as_deref(), Some("{age: {$gt: ?}, name: ?}"));
    assert_eq!(m.docs_returned, Some(2));
    assert_eq!(m.cursor_id, Some(77));
    assert_eq!(stats, ParseStats::default());
}

#[test]
fn replies_pair_by_id_not_by_order_and_get_more_names_its_cursor() {
    let a = op_msg(1, 0, 0, &doc(&[("find", V::Str("c")), ("$db", V::Str("d"))]), &[]);
    let b = op_msg(2, 0, 0, &doc(&[("getMore", V::I64(77)), ("collection", V::Str("c")), ("$db", V::Str("d"))]), &[]);
    let rb = op_msg(11, 2, 0, &doc(&[("cursor", V::Doc(vec![("nextBatch", V::Arr(vec![V::I32(1)])), ("id", V::I64(0))])), ("ok", V::I32(1))]), &[]);
    let ra = op_msg(12, 1, 0, &doc(&[("ok", V::F64(0.0)), ("errmsg", V::Str("boom")), ("code", V::I32(2)), ("codeName", V::Str("BadValue"))]), &[]);
    let (out, _) = run(&[(Dir::ToServer, a), (Dir::ToServer, b), (Dir::ToClient, rb), (Dir::ToClient, ra)]);
    assert_eq!(out.len(), 2);
    let gm = mongo(&out[0]);
    assert_eq!(gm.command.as_deref(), Some("getMore"));
    assert_eq!(gm.collection.as_deref(), Some("c"));
    assert_eq!(gm.cursor_id, Some(77), "the cursor it continues, though its reply says 0 (exhausted)");
    assert_eq!(gm.docs_returned, Some(1));
    assert_eq!(out[0].status, TxStatus::Ok);
    let f = mongo(&out[1]);
    assert_eq!(out[1].status, TxStatus::Error);
    assert_eq!(f.error_code, Some(2));
    assert_eq!(f.error_message.as_deref(), Some("boom"));
}

#[test]
fn document_sequences_checksums_and_more_to_come() {
    // insert with its documents in a kind-1 section, checksum present,
    // moreToCome: no reply comes, the transaction goes out at once.
    let body = doc(&[("insert", V::Str("c")), ("ordered", V::Bool(true)), ("$db", V::Str("d"))]);
    let docs = vec![doc(&[("_id", V::I32(1))]), doc(&[("_id", V::I32(2))])];
    let m = op_msg(3, 0, 0b11, &body, &[("documents", docs)]);
    let mut p = MongodbParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    p.data(Dir::ToServer, 1, &m, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].status, TxStatus::NoResponse);
    let t = mongo(&out[0]);
    assert!(t.more_to_come);
    assert_eq!(t.command.as_deref(), Some("insert"));
    // delete with its statements in a sequence: the first `q`'s shape.
    let body = doc(&[("delete", V::Str("c")), ("$db", V::Str("d"))]);
    let stmts = vec![doc(&[("q", V::Doc(vec![("x", V::Doc(vec![("$in", V::Arr(vec![V::I32(1), V::I32(2)]))]))])), ("limit", V::I32(1))])];
    let m = op_msg(4, 0, 1, &body, &[("deletes", stmts)]);
    let r = op_msg(5, 4, 0, &doc(&[("n", V::I32(1)), ("writeErrors", V::Arr(vec![V::Doc(vec![("index", V::I32(0)), ("code", V::I32(11000)), ("errmsg", V::Str("E11000 dup"))])])), ("ok", V::F64(1.0))]), &[]);
    p.data(Dir::ToServer, 2, &m, &mut out);
    p.data(Dir::ToClient, 3, &r, &mut out);
    assert_eq!(out.len(), 2);
    let t = mongo(&out[1]);
    assert_eq!(t.fingerprint.as_deref(), Some("{x: {$in: [?]}}"));
    assert_eq!(out[1].status, TxStatus::Error, "a write error is an error, as in Packetbeat");
    assert_eq!((t.error_code, t.n), (Some(11000), Some(1)));
    assert_eq!(p.stats(), ParseStats::default());
}

#[test]
fn any_chunking_gives_the_same_result() {
    let q = op_msg(9, 0, 0, &doc(&[("count", V::Str("c")), ("query", V::Doc(vec![("a", V::Str("x"))])), ("$db", V::Str("d"))]), &[]);
    let r = op_msg(10, 9, 0, &doc(&[("n", V::I32(4)), ("ok", V::F64(1.0))]), &[]);
    let (whole, _) = run(&[(Dir::ToServer, q.clone()), (Dir::ToClient, r.clone())]);
    for cut in 1..q.len() {
        let mut p = MongodbParser::new(&ParseConfig::default());
        let mut out = Vec::new();
        p.data(Dir::ToServer, 0, &q[..cut], &mut out);
        p.data(Dir::ToServer, 0, &q[cut..], &mut out);
        for ch in r.chunks(3) {
            p.data(Dir::ToClient, 1000, ch, &mut out);
        }
        p.finish(1_000_000, &mut out);
        assert_eq!(out, whole, "cut at {cut}");
    }
    assert_eq!(mongo(&whole[0]).n, Some(4));
    assert_eq!(mongo(&whole[0]).fingerprint.as_deref(), Some("{a: ?}"));
}

#[test]
fn bad_lengths_lose_framing_until_a_plausible_header() {
    let good = op_msg(1, 0, 0, &doc(&[("ping", V::I32(1)), ("$db", V::Str("admin"))]), &[]);
    let mut p = MongodbParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    p.data(Dir::ToServer, 0, &[3, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0xdd, 7, 0, 0, 9, 9], &mut out);
    assert_eq!(p.stats().unparsed_bytes, 18);
    p.data(Dir::ToServer, 1, b"more junk", &mut out);
    p.data(Dir::ToServer, 2, &good, &mut out);
    p.finish(3, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(mongo(&out[0]).command.as_deref(), Some("ping"));
    assert_eq!(p.stats().resyncs, 1);
    // An unknown opcode with a plausible length is skipped by its length.
    let odd = message(1, 0, 2269, &[0; 77]);
    let (out, stats) = run(&[(Dir::ToServer, odd.clone()), (Dir::ToServer, odd), (Dir::ToServer, good)]);
    assert_eq!(out.len(), 1);
    assert_eq!(stats.malformed, 2);
    assert_eq!(stats.unparsed_bytes, 0);
}

#[test]
fn a_large_reply_is_read_from_its_first_part() {
    // A firstBatch beyond what is kept: the count is unset, not short;
    // the reply still pairs and is not an error.
    let item = V::Doc(vec![("pad", V::Str("x"))]);
    let _ = item;
    let big: Vec<V<'_>> = (0..40_000).map(|_| V::Doc(vec![("pad", V::Str("0123456789"))])).collect();
    let reply = doc(&[("cursor", V::Doc(vec![("firstBatch", V::Arr(big)), ("id", V::I64(5))])), ("ok", V::F64(1.0))]);
    assert!(reply.len() > 256 * 1024);
    let q = op_msg(1, 0, 0, &doc(&[("find", V::Str("c")), ("$db", V::Str("d"))]), &[]);
    let r = op_msg(2, 1, 0, &reply, &[]);
    let (out, stats) = run(&[(Dir::ToServer, q), (Dir::ToClient, r.clone())]);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].status, TxStatus::Ok);
    assert_eq!(out[0].response.unwrap().bytes, r.len() as u64);
    assert_eq!(mongo(&out[0]).docs_returned, None);
    assert_eq!(stats.unparsed_bytes, 0);
}

#[test]
fn probe_knows_a_client_message() {
    use crate::detect::Probe;
    let m = op_msg(1, 0, 0, &doc(&[("hello", V::I32(1)), ("$db", V::Str("admin"))]), &[]);
    assert_eq!(probe(Dir::ToServer, &m), Probe::Certain);
    assert_eq!(probe(Dir::ToClient, &m), Probe::NotForUs);
    let mut bad = m.clone();
    bad[12] = 0x99;
    assert_eq!(probe(Dir::ToServer, &bad), Probe::NotForUs);
    let mut bad = m.clone();
    bad[8] = 1; // a request answers nothing
    assert_eq!(probe(Dir::ToServer, &bad), Probe::NotForUs);
    assert_eq!(probe(Dir::ToServer, b"GET / HTTP/1.1\r\n\r\n"), Probe::NotForUs);
    // Detection runs it before MySQL's probe.
    assert_eq!(crate::detect::by_content(Dir::ToServer, &m), crate::detect::Detected::Protocol(Protocol::Mongodb));
}

/// Packetbeat's captures (shared/testdata/packetbeat2): the legacy
/// protocol (OP_QUERY/OP_REPLY) and OP_MSG.
#[test]
fn packetbeat_captures() {
    let cfg = ParseConfig::default();
    let one = parse_pcap("packetbeat2/pcaps/mongo_one_row.pcap", &[27017], Protocol::Mongodb, &cfg);
    let t = &one[0][0];
    assert_eq!((t.request.unwrap().bytes, t.response.unwrap().bytes), (50, 514));
    let m = mongo(t);
    assert_eq!((m.op, m.command.as_deref(), m.database.as_deref(), m.collection.as_deref()), ("query", Some("find"), Some("test"), Some("restaurants")));
    assert_eq!(m.docs_returned, Some(1));

    let more = parse_pcap("packetbeat2/pcaps/mongodb_more_rows.pcap", &[27017], Protocol::Mongodb, &cfg);
    assert_eq!(more[0].len(), 1);
    assert_eq!(more[0][0].response.unwrap().bytes, 46171);
    assert_eq!(mongo(&more[0][0]).docs_returned, Some(101));

    let ins = parse_pcap("packetbeat2/pcaps/mongodb_inserts.pcap", &[27017], Protocol::Mongodb, &cfg);
    let cmds: Vec<_> = ins[0].iter().map(|t| mongo(t).command.clone().unwrap_or_default()).collect();
    assert_eq!(cmds[1], "insert", "{cmds:?}");
    assert!(ins[0].iter().all(|t| t.status == TxStatus::Ok), "{:?}", ins[0]);

    let opmsg = parse_pcap("packetbeat2/pcaps/mongodb_op_msg_opcode.pcap", &[9991], Protocol::Mongodb, &cfg);
    let all: Vec<&Transaction> = opmsg.iter().flatten().collect();
    assert_eq!(all.len(), 101, "101 OP_MSG requests, each answered");
    assert!(all.iter().all(|t| t.response.is_some() && mongo(t).op == "msg"));
    // The heartbeats of a replica set member that is not configured: the
    // server answers `ok: 0`, code 93 (InvalidReplicaSetConfig).
    let failed: Vec<_> = all.iter().filter(|t| t.status == TxStatus::Error).collect();
    assert!(!failed.is_empty());
    for t in &failed {
        let m = mongo(t);
        assert_eq!((m.command.as_deref(), m.error_code), (Some("replSetHeartbeat"), Some(93)), "{t:?}");
    }
    eprintln!("op_msg capture: {} transactions, {} failed heartbeats", all.len(), failed.len());

    let evs = tcp_events("packetbeat2/pcaps/mongodb_invalid_opcode_2269.pcap", &[27017]);
    let p = crate::testutil::stats_of(&evs, || Box::new(MongodbParser::new(&cfg)));
    assert_eq!(p.malformed, 3, "one message of opcode 2269 on each of 3 connections");
}

#[test]
fn damaged_captures_never_panic() {
    for (f, port) in [("mongodb_inserts.pcap", 27017), ("mongodb_create_collection.pcap", 27017), ("mongo_one_row.pcap", 27017)] {
        let evs = tcp_events(&format!("packetbeat2/pcaps/{f}"), &[port]);
        stress(&evs, || Box::new(MongodbParser::new(&ParseConfig { max_header_bytes: 64, ..ParseConfig::default() })));
    }
}

#[test]
fn fuzzed_scripts_never_panic() {
    let mut rng = crate::testutil::Rng(0x5eed);
    let seed = op_msg(1, 0, 0, &doc(&[("find", V::Str("c")), ("filter", V::Doc(vec![("a", V::I32(1))]))]), &[]);
    for _ in 0..3000 {
        let mut script = Vec::new();
        for _ in 0..rng.below(12) {
            let n = rng.below(32);
            script.push(((n as u8) << 3) | (rng.below(8) as u8));
            for _ in 0..n + 1 {
                let b = if rng.below(3) == 0 { rng.next() as u8 } else { seed[rng.below(seed.len())] };
                script.push(b);
            }
        }
        fuzz(&script);
    }
}

#[test]
fn a_checksum_that_does_not_match_is_counted() {
    let body = doc(&[("ping", V::I32(1)), ("$db", V::Str("admin"))]);
    let good = op_msg(7, 0, 1, &body, &[]);
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 1] ^= 0x40;
    let reply = op_msg(8, 7, 1, &doc(&[("ok", V::F64(1.0))]), &[]);
    let (out, stats) = run(&[(Dir::ToServer, good), (Dir::ToClient, reply.clone())]);
    assert_eq!((out.len(), out[0].status, stats.malformed), (1, TxStatus::Ok, 0));
    let (out, stats) = run(&[(Dir::ToServer, bad), (Dir::ToClient, reply)]);
    assert_eq!(out.len(), 1, "the message is still read");
    assert_eq!((out[0].status, mongo(&out[0]).command.as_deref()), (TxStatus::Ok, Some("ping")));
    assert_eq!(stats.malformed, 1);
}

#[test]
fn compressed_messages_are_read_as_the_message_they_wrap() {
    let find = doc(&[("find", V::Str("items")), ("filter", V::Doc(vec![("sku", V::Str("abcabcabc"))])), ("$db", V::Str("shop"))]);
    let req = op_msg(10, 0, 0, &find, &[]);
    let batch: Vec<V> = (0..3).map(|i| V::Doc(vec![("_id", V::I32(i)), ("sku", V::Str("abcabcabc"))])).collect();
    let cursor = V::Doc(vec![("firstBatch", V::Arr(batch)), ("id", V::I64(0)), ("ns", V::Str("shop.items"))]);
    let rep = op_msg(11, 10, 1, &doc(&[("cursor", cursor), ("ok", V::F64(1.0))]), &[]);
    type Pack = (u8, &'static str, fn(&[u8]) -> Vec<u8>);
    let packs: [Pack; 4] = [
        (0, "noop", |b| b.to_vec()),
        (1, "snappy", snappy),
        (2, "zlib", |b| miniz_oxide::deflate::compress_to_vec_zlib(b, 6)),
        (3, "zstd", |b| zstd::bulk::compress(b, 3).unwrap()),
    ];
    for (id, name, pack) in packs {
        let creq = op_compressed(&req, id, &pack(&req[16..]));
        let crep = op_compressed(&rep, id, &pack(&rep[16..]));
        // Compressed both ways, or only the reply (the server may compress
        // replies to plain requests).
        for (a, b) in [(creq.clone(), crep.clone()), (req.clone(), crep.clone())] {
            let (out, stats) = run(&[(Dir::ToServer, a.clone()), (Dir::ToClient, b.clone())]);
            assert_eq!(stats, ParseStats::default(), "{name}");
            assert_eq!(out.len(), 1, "{name}");
            let t = mongo(&out[0]);
            assert_eq!((t.op, t.command.as_deref(), t.collection.as_deref()), ("msg", Some("find"), Some("items")), "{name}");
            assert_eq!((t.fingerprint.as_deref(), t.docs_returned, t.compressor), (Some("{sku: ?}"), Some(3), Some(name)), "{name}");
            assert_eq!(out[0].request.unwrap().bytes, a.len() as u64, "bytes on the wire, compressed");
            assert_eq!(out[0].response.unwrap().bytes, b.len() as u64);
        }
    }
    // A body that does not decompress to its size, an id the specification
    // reserves: left compressed, counted.
    let mut broken = op_compressed(&req, 2, &miniz_oxide::deflate::compress_to_vec_zlib(&req[16..], 6));
    let n = broken.len();
    broken[n - 6] ^= 0xff;
    let reserved = op_compressed(&req, 9, &req[16..]);
    for (m, name) in [(broken, "zlib"), (reserved, "reserved")] {
        let (out, stats) = run(&[(Dir::ToServer, m)]);
        assert_eq!(stats.malformed, 1, "{name}");
        let t = mongo(&out[0]);
        assert_eq!((t.op, t.compressor, out[0].status), ("compressed", Some(name), TxStatus::NoResponse));
    }
    // Larger than the parser keeps: flagged, not counted.
    let mut p = MongodbParser::new(&ParseConfig::default());
    let big = vec![b'x'; p.keep + 1];
    let bigdoc = doc(&[("insert", V::Str("items")), ("pad", V::Str(std::str::from_utf8(&big).unwrap())), ("$db", V::Str("shop"))]);
    let bigmsg = op_msg(12, 0, 2, &bigdoc, &[]);
    let m = op_compressed(&bigmsg, 3, &zstd::bulk::compress(&bigmsg[16..], 3).unwrap());
    let mut out = Vec::new();
    p.data(Dir::ToServer, 1, &m, &mut out);
    // Its flags are compressed with it: it waits for a reply.
    p.finish(2, &mut out);
    assert_eq!((mongo(&out[0]).op, mongo(&out[0]).compressor, p.stats().malformed), ("compressed", Some("zstd"), 0));
}

#[test]
fn an_exhaust_stream_is_one_transaction_per_reply() {
    // getMore with exhaustAllowed; three replies, moreToCome on the first
    // two, each answering the one before it.
    let gm = doc(&[("getMore", V::I64(77)), ("collection", V::Str("items")), ("$db", V::Str("shop"))]);
    let req = op_msg(20, 0, 1 << 16, &gm, &[]);
    let batch = |n: i32, id: i64| {
        let docs = (0..n).map(|i| V::Doc(vec![("_id", V::I32(i))])).collect();
        doc(&[("cursor", V::Doc(vec![("nextBatch", V::Arr(docs)), ("id", V::I64(id))])), ("ok", V::F64(1.0))])
    };
    let r1 = op_msg(30, 20, 2, &batch(4, 77), &[]);
    let r2 = op_msg(31, 30, 2, &batch(4, 77), &[]);
    let r3 = op_msg(32, 31, 0, &batch(2, 0), &[]);
    let (out, stats) = run(&[(Dir::ToServer, req.clone()), (Dir::ToClient, r1), (Dir::ToClient, r2.clone()), (Dir::ToClient, r3)]);
    assert_eq!(stats, ParseStats::default());
    assert_eq!(out.len(), 3, "{out:#?}");
    let docs: Vec<_> = out.iter().map(|t| mongo(t).docs_returned).collect();
    assert_eq!(docs, [Some(4), Some(4), Some(2)]);
    for (i, t) in out.iter().enumerate() {
        let m = mongo(t);
        assert_eq!((t.status, m.command.as_deref(), m.collection.as_deref(), m.cursor_id, m.exhaust), (TxStatus::Ok, Some("getMore"), Some("items"), Some(77), true), "{i}");
    }
    assert_eq!(out[0].request.unwrap().bytes, req.len() as u64);
    // The later replies: no request bytes, timed from the reply before.
    for (i, t) in out[1..].iter().enumerate() {
        let rq = t.request.unwrap();
        assert_eq!(rq.bytes, 0);
        assert_eq!(rq.first_ns, out[i].response.unwrap().last_ns);
    }
    // The stream cut after its second reply: the batch promised and not
    // seen is a request without a reply.
    let (out, _) = run(&[(Dir::ToServer, req), (Dir::ToClient, op_msg(30, 20, 2, &batch(4, 77), &[])), (Dir::ToClient, r2)]);
    assert_eq!(out.iter().map(|t| t.status).collect::<Vec<_>>(), [TxStatus::Ok, TxStatus::Ok, TxStatus::NoResponse]);
    // A plain reply is not exhaust.
    let (out, _) = run(&[(Dir::ToServer, op_msg(40, 0, 0, &gm, &[])), (Dir::ToClient, op_msg(41, 40, 0, &batch(1, 0), &[]))]);
    assert!(!mongo(&out[0]).exhaust);
}
