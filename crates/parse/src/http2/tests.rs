//! HTTP/2 against the shared references: the HPACK decoder against every
//! story of `shared/testdata/hpack` (wire bytes and expected headers from
//! several encoders), and the parser against the captures of
//! `shared/testdata/http2` with tshark's per-stream reading of them.

use std::collections::HashMap;

use serde_json::Value;

use super::hpack::{Decoder, Field};
use crate::testutil::{path, run_parser, tcp_events, Ev};
use crate::{Detail, Dir, ParseConfig, Protocol, ProtocolParser, StreamParser, Transaction};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn json(rel: &str) -> Value {
    let p = path(rel);
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))).unwrap()
}

/// Every case of every story of every encoder's folder decodes to its
/// expected header list, one decoder per story (the table carries over).
#[test]
fn hpack_vectors() {
    let mut cases = 0;
    for folder in ["nghttp2", "nghttp2-change-table-size", "go-hpack", "python-hpack", "haskell-http2-linear"] {
        let dir = path(&format!("hpack/{folder}"));
        let mut stories: Vec<_> = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir}: {e}")).map(|e| e.unwrap().path()).collect();
        stories.sort();
        assert!(stories.len() >= 31, "{folder}");
        for story in stories {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&story).unwrap()).unwrap();
            let mut d = Decoder::new();
            for case in v["cases"].as_array().unwrap() {
                if let Some(n) = case["header_table_size"].as_u64() {
                    d.set_limit(n as u32);
                }
                let mut got = Vec::new();
                d.decode(&hex(case["wire"].as_str().unwrap()), &mut |f| match f {
                    Field::Known { name, value } => got.push((String::from_utf8(name.to_vec()).unwrap(), String::from_utf8(value.to_vec()).unwrap())),
                    Field::Unknown => panic!("unknown field in a story decoded from its start"),
                })
                .unwrap_or_else(|e| panic!("{}: case {}: {e:?}", story.display(), case["seqno"]));
                let want: Vec<(String, String)> = case["headers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| {
                        let (k, v) = h.as_object().unwrap().iter().next().unwrap();
                        (k.clone(), v.as_str().unwrap().to_string())
                    })
                    .collect();
                assert_eq!(got, want, "{}: case {}", story.display(), case["seqno"]);
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 4 * 3384 + 3267);
}

/// A story decoded from a later case on (a decoder that joined late): each
/// field is either exactly the expected one or unknown, never another.
#[test]
fn hpack_joined_late_never_misreports() {
    let mut total = (0, 0);
    for folder in ["nghttp2", "python-hpack", "haskell-http2-linear"] {
        for story in [0, 7, 21, 30] {
            let v = json(&format!("hpack/{folder}/story_{story:02}.json"));
            let cases = v["cases"].as_array().unwrap();
            for start in [1, 5, 20] {
                if start >= cases.len() {
                    continue;
                }
                let mut d = Decoder::mid_stream();
                let (mut known, mut unknown) = (0, 0);
                for case in &cases[start..] {
                    let want: Vec<(String, String)> = case["headers"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|h| {
                            let (k, v) = h.as_object().unwrap().iter().next().unwrap();
                            (k.clone(), v.as_str().unwrap().to_string())
                        })
                        .collect();
                    let mut i = 0;
                    d.decode(&hex(case["wire"].as_str().unwrap()), &mut |f| {
                        match f {
                            Field::Known { name, value } => {
                                assert_eq!((name, value), (want[i].0.as_bytes(), want[i].1.as_bytes()), "{folder} story {story} from {start}: case {}", case["seqno"]);
                                known += 1;
                            }
                            Field::Unknown => unknown += 1,
                        }
                        i += 1;
                    })
                    .unwrap();
                    assert_eq!(i, want.len());
                }
                assert!(known > 0, "{folder} story {story} from {start}: {known} known, {unknown} unknown");
                total.0 += known;
                total.1 += unknown;
            }
        }
    }
    // Most fields come back once the entries in use were seen inserted.
    assert!(total.0 > 4 * total.1, "{total:?}");
}

/// Our transactions of a capture keyed by (connection, stream id).
fn ours(events: &[Ev]) -> HashMap<(usize, u64), Transaction> {
    let cfg = ParseConfig::default();
    let txs = run_parser(events, || Box::new(Protocol::Http.stream_parser(&cfg)));
    let mut m = HashMap::new();
    for (conn, list) in txs.into_iter().enumerate() {
        for t in list {
            let id = match &t.detail {
                Detail::Http(h) => h.stream_id.expect("an HTTP/2 stream") as u64,
                Detail::Grpc(g) => g.stream_id as u64,
                d => panic!("not HTTP/2: {d:?}"),
            };
            assert!(m.insert((conn, id), t).is_none(), "stream {conn}/{id} twice");
        }
    }
    m
}

/// Every stream tshark found, with the same method, path, status, gRPC
/// status and message, DATA bytes per direction, message counts and
/// first-byte latency; and no stream tshark did not find.
fn check_capture(name: &str) -> usize {
    let exp = json(&format!("http2/expected/{name}.json"));
    let port = exp["server_port"].as_u64().unwrap() as u16;
    let events = tcp_events(&format!("http2/pcaps/{name}.pcap"), &[port]);
    let got = ours(&events);
    let want = exp["transactions"].as_array().unwrap();
    assert_eq!(want.len() as u64, exp["transaction_count"].as_u64().unwrap());
    assert_eq!(got.len(), want.len(), "{name}: streams found");
    for w in want {
        let key = (w["conn"].as_u64().unwrap() as usize, w["stream_id"].as_u64().unwrap());
        let t = got.get(&key).unwrap_or_else(|| panic!("{name}: stream {key:?} not found"));
        let lat_us = t.first_byte_latency_ns().map(|ns| ns / 1000);
        assert_eq!(lat_us, w["latency_us"].as_i64(), "{name} {key:?}: latency");
        assert_eq!(w["end_state"], "complete");
        match &t.detail {
            Detail::Http(h) => {
                assert!(w["grpc_status"].is_null(), "{name} {key:?}: a gRPC call read as HTTP");
                assert_eq!(&*h.method, w["method"].as_str().unwrap(), "{name} {key:?}");
                assert_eq!(&*h.uri, w["path"].as_str().unwrap(), "{name} {key:?}");
                assert_eq!(&*h.host, w["authority"].as_str().unwrap(), "{name} {key:?}");
                assert_eq!(h.status_code as u64, w["status"].as_u64().unwrap(), "{name} {key:?}");
                assert_eq!(h.request_body_len, w["request_data_bytes"].as_u64().unwrap(), "{name} {key:?}");
                assert_eq!(h.response_body_len, w["response_data_bytes"].as_u64().unwrap(), "{name} {key:?}");
                assert_eq!(&*h.version, "2");
                assert_eq!(h.end_state, "complete", "{name} {key:?}");
                assert_eq!(t.status, if h.status_code >= 400 { crate::TxStatus::Error } else { crate::TxStatus::Ok });
            }
            Detail::Grpc(g) => {
                let path = w["path"].as_str().unwrap();
                assert_eq!(format!("/{}/{}", g.service, g.method), path, "{name} {key:?}");
                assert_eq!(g.http_status as u64, w["status"].as_u64().unwrap());
                assert_eq!(g.grpc_status.map(u64::from), w["grpc_status"].as_u64(), "{name} {key:?}");
                assert_eq!(g.grpc_message.as_deref(), w["grpc_message_decoded"].as_str(), "{name} {key:?}");
                assert_eq!(g.trailers_only, w["grpc_trailers_only"].as_bool().unwrap(), "{name} {key:?}");
                let (rq, rs) = (&w["grpc_request_messages"], &w["grpc_response_messages"]);
                assert_eq!(g.request_messages as u64, rq["count"].as_u64().unwrap(), "{name} {key:?}");
                assert_eq!(g.response_messages as u64, rs["count"].as_u64().unwrap(), "{name} {key:?}");
                assert_eq!(g.request_message_bytes + 5 * g.request_messages as u64, w["request_data_bytes"].as_u64().unwrap());
                assert_eq!(g.response_message_bytes + 5 * g.response_messages as u64, w["response_data_bytes"].as_u64().unwrap());
                assert_eq!(g.end_state, "complete");
                let ok = g.grpc_status == Some(0);
                assert_eq!(t.status, if ok { crate::TxStatus::Ok } else { crate::TxStatus::Error });
            }
            d => panic!("{d:?}"),
        }
    }
    got.len()
}

#[test]
fn nghttp_files() {
    assert_eq!(check_capture("h2c_nghttp_files"), 7);
}

#[test]
fn h2load() {
    assert_eq!(check_capture("h2c_h2load"), 200);
}

#[test]
fn nginx_prior_knowledge() {
    assert_eq!(check_capture("h2c_nginx_prior_knowledge"), 10);
}

#[test]
fn grpc_calls() {
    assert_eq!(check_capture("grpc_unary_stream_errors"), 50);
}

/// Each connection of the captures joined late (its first `cut` byte
/// events dropped, for every cut up to 12): every header reported belongs
/// to the stream tshark saw it on; what cannot be known stays empty.
#[test]
fn joined_late_attributes_nothing_wrongly() {
    for name in ["h2c_nghttp_files", "h2c_nginx_prior_knowledge", "grpc_unary_stream_errors", "h2c_h2load"] {
        let exp = json(&format!("http2/expected/{name}.json"));
        let port = exp["server_port"].as_u64().unwrap() as u16;
        let events = tcp_events(&format!("http2/pcaps/{name}.pcap"), &[port]);
        let want: HashMap<(usize, u64), &Value> = exp["transactions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| ((w["conn"].as_u64().unwrap() as usize, w["stream_id"].as_u64().unwrap()), w))
            .collect();
        let mut recovered = 0;
        for cut in 1..=12 {
            // Drop the first `cut` events of every connection.
            let mut seen: HashMap<usize, usize> = HashMap::new();
            let late: Vec<Ev> = events
                .iter()
                .filter(|e| {
                    let (Ev::Data { conn, .. } | Ev::Gap { conn, .. }) = e;
                    let n = seen.entry(*conn).or_default();
                    *n += 1;
                    *n > cut
                })
                .cloned()
                .collect();
            let cfg = ParseConfig::default();
            // Begun late, the tracker has no preface to go by: the port's parser.
            let txs = run_parser(&late, || Box::new(Protocol::Grpc.stream_parser(&cfg)));
            for (conn, list) in txs.into_iter().enumerate() {
                for t in list {
                    let (id, method, path, status) = match &t.detail {
                        Detail::Http(h) => (h.stream_id.unwrap() as u64, h.method.to_string(), h.uri.to_string(), h.status_code as u64),
                        Detail::Grpc(g) => (g.stream_id as u64, "POST".to_string(), format!("/{}/{}", g.service, g.method), g.http_status as u64),
                        d => panic!("{d:?}"),
                    };
                    let w = want.get(&(conn, id)).unwrap_or_else(|| panic!("{name} cut {cut}: stream {conn}/{id} does not exist"));
                    if !method.is_empty() && path != "//" {
                        assert_eq!(method, w["method"].as_str().unwrap(), "{name} cut {cut} {conn}/{id}");
                    }
                    if !path.is_empty() && path != "//" {
                        assert_eq!(path, w["path"].as_str().unwrap(), "{name} cut {cut} {conn}/{id}");
                        recovered += 1;
                    }
                    if status != 0 {
                        assert_eq!(status, w["status"].as_u64().unwrap(), "{name} cut {cut} {conn}/{id}");
                    }
                }
            }
        }
        assert!(recovered > 0, "{name}: nothing recovered");
    }
}

/// A connection's bytes cut into chunks of every size after its first
/// segment (which holds the preface, as the hand-over from HTTP/1 needs its
/// first 4 bytes in one piece): the same transactions whatever the cut.
#[test]
fn any_split_gives_the_same_stream() {
    let events = tcp_events("http2/pcaps/h2c_nghttp_files.pcap", &[8080]);
    let first: Vec<&Ev> = events.iter().filter(|e| matches!(e, Ev::Data { conn: 0, .. })).collect();
    let whole = |chunk: usize| {
        let cfg = ParseConfig::default();
        let mut p = Protocol::Http.stream_parser(&cfg);
        let mut out = Vec::new();
        for (i, e) in first.iter().enumerate() {
            let Ev::Data { dir, ts_ns, data, .. } = e else { unreachable!() };
            for c in data.chunks(if i == 0 { data.len() } else { chunk }) {
                p.data(*dir, *ts_ns, c, &mut out);
            }
        }
        p.finish(0, &mut out);
        let mut v: Vec<String> = out.iter().map(|t| format!("{:?}", t.detail)).collect();
        v.sort();
        v
    };
    let reference = whole(1 << 20);
    assert_eq!(reference.len(), 5);
    for chunk in [1, 2, 3, 7, 9, 10, 100] {
        assert_eq!(whole(chunk), reference, "chunks of {chunk}");
    }
}

/// Streams that end otherwise: reset by either side (with the code), a
/// refused stream, streams cut by GOAWAY, a request with no response.
#[test]
fn end_states() {
    fn frame(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend_from_slice(&[ty, flags]);
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }
    // GET / (static 2, 6, 4) with :authority a (literal, indexed name 1).
    let get = [0x82, 0x86, 0x84, 0x01, 0x01, b'a'];
    let cfg = ParseConfig::default();
    let mut p = Protocol::Http.stream_parser(&cfg);
    let mut out = Vec::new();
    let mut c = super::PREFACE.to_vec();
    c.extend(frame(4, 0, 0, &[]));
    for id in [1, 3, 5, 7, 9, 11] {
        c.extend(frame(1, 0x5, id, &get));
    }
    p.data(Dir::ToServer, 1, &c, &mut out);
    let mut s = frame(4, 0, 0, &[]);
    // 1: a 200 then reset by the client (CANCEL); 3: reset by the server
    // (INTERNAL_ERROR); 5: refused; 7: complete 404; GOAWAY(last 7) cuts 9 and 11.
    s.extend(frame(1, 0x4, 1, &[0x88]));
    s.extend(frame(1, 0x5, 7, &[0x8d]));
    s.extend(frame(3, 0, 3, &2u32.to_be_bytes()));
    s.extend(frame(3, 0, 5, &7u32.to_be_bytes()));
    let mut ga = 7u32.to_be_bytes().to_vec();
    ga.extend_from_slice(&0u32.to_be_bytes());
    s.extend(frame(7, 0, 0, &ga));
    p.data(Dir::ToClient, 2, &s, &mut out);
    p.data(Dir::ToServer, 3, &frame(3, 0, 1, &8u32.to_be_bytes()), &mut out);
    p.finish(4, &mut out);
    let states: HashMap<u32, (&str, &str, u16)> = out
        .iter()
        .map(|t| match &t.detail {
            Detail::Http(h) => (h.stream_id.unwrap(), (h.end_state, h.h2_error, h.status_code)),
            d => panic!("{d:?}"),
        })
        .collect();
    assert_eq!(states[&1], ("reset_by_client", "CANCEL", 200));
    assert_eq!(states[&3], ("reset_by_server", "INTERNAL_ERROR", 0));
    assert_eq!(states[&5], ("refused", "REFUSED_STREAM", 0));
    assert_eq!(states[&7], ("complete", "", 404));
    assert_eq!(states[&9], ("goaway", "NO_ERROR", 0));
    assert_eq!(states[&11], ("goaway", "NO_ERROR", 0));
    assert_eq!(out.len(), 6);
    assert_eq!(p.service(Protocol::Http), "http2");
}

/// Malformed frames, an index past the table, a reused stream id, an
/// oversized header block: counted, no panic, parsing goes on.
#[test]
fn bad_input_is_counted() {
    fn frame(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend_from_slice(&[ty, flags]);
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }
    let cfg = ParseConfig { max_header_bytes: 1024, ..ParseConfig::default() };
    let mut p = Protocol::Grpc.stream_parser(&cfg);
    let mut out = Vec::new();
    let mut c = super::PREFACE.to_vec();
    c.extend(frame(1, 0x5, 1, &[0xff, 0x7f])); // index 188: past the table
    c.extend(frame(1, 0x5, 1, &[0x82, 0x86, 0x84])); // stream 1 again
    c.extend(frame(1, 0x5, 3, &vec![0x82; 5000])); // oversized block
    c.extend(frame(1, 0x5, 5, &[0x82, 0x86, 0x84])); // a good one after
    p.data(Dir::ToServer, 1, &c, &mut out);
    p.data(Dir::ToClient, 2, &frame(1, 0x5, 5, &[0x88]), &mut out);
    p.finish(3, &mut out);
    assert!(p.stats().malformed >= 3, "{:?}", p.stats());
    let five = out.iter().find(|t| matches!(&t.detail, Detail::Http(h) if h.stream_id == Some(5))).expect("stream 5");
    let Detail::Http(h) = &five.detail else { unreachable!() };
    assert_eq!((&*h.method, &*h.uri, h.status_code, h.end_state), ("GET", "/", 200, "complete"));
    // RST_STREAM and GOAWAY shorter than their fixed part, a SETTINGS not
    // a multiple of 6, a PUSH_PROMISE without its id.
    let mut short = super::PREFACE.to_vec();
    short.extend(frame(3, 0, 1, &[0, 0]));
    short.extend(frame(7, 0, 0, &[0, 0, 0, 1]));
    short.extend(frame(4, 0, 0, &[0, 1, 0]));
    short.extend(frame(5, 4, 1, &[0, 0]));
    let mut p = Protocol::Grpc.stream_parser(&cfg);
    p.data(Dir::ToServer, 1, &short, &mut out);
    p.data(Dir::ToClient, 1, &short[24..], &mut out);
    assert!(p.stats().malformed >= 2, "{:?}", p.stats());
    for seed in 0..64u8 {
        let junk: Vec<u8> = (0..2000u32).map(|i| (i.wrapping_mul(2654435761) >> (seed % 24)) as u8 ^ seed).collect();
        super::fuzz(&junk);
    }
}

/// Parser CPU per transaction (no decoding, tracking or sinks: the events
/// are the captures' in-order bytes, read once before timing), HTTP/2
/// streams and gRPC calls beside HTTP/1 requests, and what one open HTTP/2
/// connection holds. Run by hand:
/// `cargo test --release -p wirelog-parse http2::tests::parse_cost -- --ignored --nocapture`.
#[test]
#[ignore]
fn parse_cost() {
    let cfg = ParseConfig::default();
    let cases: [(&str, &str, &[u16], Protocol); 3] = [
        ("HTTP/2 streams (h2load)", "http2/pcaps/h2c_h2load.pcap", &[8080], Protocol::Http),
        ("gRPC calls", "http2/pcaps/grpc_unary_stream_errors.pcap", &[50051], Protocol::Grpc),
        ("HTTP/1.1 requests (packetbeat http_post)", "packetbeat/pcaps/http_post.pcap", &[80, 8080], Protocol::Http),
    ];
    for (what, rel, ports, proto) in cases {
        let events = tcp_events(rel, ports);
        let reps = 2000;
        let mut n = 0;
        let t = std::time::Instant::now();
        for _ in 0..reps {
            n = run_parser(&events, || Box::new(proto.stream_parser(&cfg))).iter().map(Vec::len).sum::<usize>();
        }
        let ns = t.elapsed().as_nanos() as f64 / (reps * n) as f64;
        println!("{what}: {n} transactions, {ns:.0} ns per transaction");
    }
    // One gRPC connection after its first call: what it keeps while open.
    let events = tcp_events("http2/pcaps/grpc_unary_stream_errors.pcap", &[50051]);
    let mut p = super::Http2Parser::new(&cfg);
    let mut out = Vec::new();
    for e in events.iter().take(8) {
        if let Ev::Data { dir, ts_ns, data, .. } = e {
            p.data(*dir, *ts_ns, data, &mut out);
        }
    }
    println!("open HTTP/2 connection: {} B parser + {} B held (HPACK tables, buffers)", std::mem::size_of::<super::Http2Parser>(), p.memory());
}

/// HTTP/1.1 `Upgrade: h2c` answered by 101 (RFC 7540 §3.2): the request
/// becomes stream 1, answered in HTTP/2 right after the 101 in the same
/// segment; later streams follow the client's preface. Whatever the split.
#[test]
fn upgrade_from_http1() {
    fn frame(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend_from_slice(&[ty, flags]);
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }
    let req = b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n".to_vec();
    let mut resp = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n".to_vec();
    resp.extend(frame(4, 0, 0, &[]));
    resp.extend(frame(1, 0x4, 1, &[0x88]));
    resp.extend(frame(0, 0x1, 1, b"hello"));
    let mut client = super::PREFACE.to_vec();
    client.extend(frame(4, 0, 0, &[]));
    client.extend(frame(4, 1, 0, &[]));
    client.extend(frame(1, 0x5, 3, &[0x82, 0x86, 0x85])); // GET /index.html
    let resp2 = frame(1, 0x5, 3, &[0x8d]); // 404
    for cut in [1, 10, 60, resp.len() - 3, resp.len()] {
        let cfg = ParseConfig::default();
        let mut p = Protocol::Http.stream_parser(&cfg);
        let mut out = Vec::new();
        p.data(Dir::ToServer, 1_000, &req, &mut out);
        p.data(Dir::ToClient, 2_000, &resp[..cut], &mut out);
        p.data(Dir::ToClient, 2_500, &resp[cut..], &mut out);
        p.data(Dir::ToServer, 3_000, &client, &mut out);
        p.data(Dir::ToClient, 4_000, &resp2, &mut out);
        p.finish(5_000, &mut out);
        assert_eq!(out.len(), 2, "cut {cut}: {out:?}");
        let Detail::Http(one) = &out[0].detail else { panic!() };
        assert_eq!((&*one.method, &*one.uri, &*one.host, one.status_code, one.info_code), ("GET", "/a", "x", 200, 101), "cut {cut}");
        assert_eq!((one.stream_id, one.response_body_len, one.end_state, &*one.version), (Some(1), 5, "complete", "2"), "cut {cut}");
        assert_eq!(out[0].request.unwrap().first_ns, 1_000);
        let Detail::Http(three) = &out[1].detail else { panic!() };
        assert_eq!((three.stream_id, &*three.uri, three.status_code), (Some(3), "/index.html", 404), "cut {cut}");
        assert_eq!(p.service(Protocol::Http), "http2");
        assert_eq!(p.stats().malformed, 0, "cut {cut}");
    }
}

/// A gRPC call ended by RST_STREAM (either side) or cut by GOAWAY before a
/// grpc-status is an error (its client saw CANCELLED, DEADLINE_EXCEEDED,
/// UNAVAILABLE...); one cut only by the end of the capture is not.
#[test]
fn grpc_calls_reset_without_status_are_errors() {
    fn frame(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend_from_slice(&[ty, flags]);
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }
    // POST (3), http (6), :path (name 4) "/p.S/M", content-type (name 31,
    // 4-bit prefix: 15 + 16) "application/grpc".
    let mut call = vec![0x83, 0x86, 0x04, 6];
    call.extend_from_slice(b"/p.S/M");
    call.extend_from_slice(&[0x0f, 0x10, 16]);
    call.extend_from_slice(b"application/grpc");
    let cfg = ParseConfig::default();
    let mut p = Protocol::Http.stream_parser(&cfg);
    let mut out = Vec::new();
    let mut c = super::PREFACE.to_vec();
    c.extend(frame(4, 0, 0, &[]));
    for id in [1, 3, 5, 7] {
        c.extend(frame(1, 0x4, id, &call));
        c.extend(frame(0, 0x1, id, &[0, 0, 0, 0, 0]));
    }
    c.extend(frame(3, 0, 1, &8u32.to_be_bytes())); // the client cancels 1
    p.data(Dir::ToServer, 1, &c, &mut out);
    let mut s = frame(4, 0, 0, &[]);
    s.extend(frame(3, 0, 3, &2u32.to_be_bytes())); // the server resets 3
    let mut ga = 5u32.to_be_bytes().to_vec(); // GOAWAY(last 5) cuts 7
    ga.extend_from_slice(&0u32.to_be_bytes());
    s.extend(frame(7, 0, 0, &ga));
    p.data(Dir::ToClient, 2, &s, &mut out);
    p.finish(3, &mut out);
    let got: HashMap<u32, (&str, crate::TxStatus)> = out
        .iter()
        .map(|t| match &t.detail {
            Detail::Grpc(g) => (g.stream_id, (g.end_state, t.status)),
            d => panic!("{d:?}"),
        })
        .collect();
    assert_eq!(got[&1], ("reset_by_client", crate::TxStatus::Error));
    assert_eq!(got[&3], ("reset_by_server", crate::TxStatus::Error));
    assert_eq!(got[&7], ("goaway", crate::TxStatus::Error));
    assert_eq!(got[&5], ("no_response", crate::TxStatus::NoResponse));
    assert_eq!(out.len(), 4);
}

/// Random frames (any type, flags, stream and short payload, both
/// directions, gaps between) never panic, and streams stay bounded.
#[test]
fn random_frames_never_panic() {
    let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15);
    let cfg = ParseConfig { max_header_bytes: 1024, ..ParseConfig::default() };
    for _ in 0..3000 {
        let mut p = Protocol::Grpc.stream_parser(&cfg);
        let mut out = Vec::new();
        if !next().is_multiple_of(4) {
            p.data(Dir::ToServer, 0, super::PREFACE, &mut out);
        }
        for i in 0..40 {
            let r = next();
            let len = (r % 24) as usize;
            let mut f = (len as u32).to_be_bytes()[1..].to_vec();
            f.push((r >> 8) as u8 % 11);
            f.push((r >> 16) as u8);
            f.extend_from_slice(&(((r >> 24) as u32) % 9).to_be_bytes());
            f.extend((0..len).map(|_| next() as u8));
            let dir = if r >> 60 & 1 == 0 { Dir::ToServer } else { Dir::ToClient };
            if r >> 56 & 15 == 0 {
                p.gap(dir, i, (r >> 40) % 30, &mut out);
            }
            let cut = (r >> 32) as usize % (f.len() + 1);
            p.data(dir, i, &f[..cut], &mut out);
            p.data(dir, i, &f[cut..], &mut out);
            if i % 10 == 0 {
                p.expire(i * 3_000_000_000, &mut out);
            }
        }
        p.finish(200, &mut out);
    }
}
