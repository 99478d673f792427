//! The fuzz targets on the stable toolchain: cargo-fuzz (fuzz/) needs
//! nightly, sanitizers and cargo-fuzz itself; this runs the same inputs
//! without them, as a mutation fuzzer with no coverage feedback. Every
//! parser of the protocol table (through `Protocol::stream_parser`, as the
//! tracker makes them), STARTTLS, and the datagram readers (DNS and
//! Memcached over UDP through their fuzz entries) get scripts in the
//! targets' format ([`crate::fuzz_steps`]) seeded from a reference capture
//! (or hand-made messages where the shared data has none) and mutated:
//! bytes flipped or set to edge values, ranges cut, repeated or spliced
//! from another seed. No input may panic; malformed messages are counted.
//!
//! `WIRELOG_FUZZ_SECS` (default 0.3) is each target's time;
//! `cargo test --release -p wirelog-parse --lib fuzz_stable -- --nocapture`
//! prints runs, seconds and malformed counts per target.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use crate::testutil::{tcp_events, Ev, Rng};
use crate::{ConnParser, Dir, ParseConfig, Protocol, ProtocolParser, StreamParser};

/// The script of a capture's first connection (at most 64 KiB of it).
fn script_of(events: &[Ev]) -> Vec<u8> {
    let mut s = Vec::new();
    let first = events.iter().map(|e| match e {
        Ev::Data { conn, .. } | Ev::Gap { conn, .. } => *conn,
    });
    let Some(conn0) = first.min() else { return s };
    for e in events {
        match e {
            Ev::Data { conn, dir, data, .. } if *conn == conn0 => {
                for c in data.chunks(32) {
                    s.push((((c.len() - 1) as u8) << 3) | u8::from(*dir == Dir::ToClient));
                    s.extend_from_slice(c);
                }
            }
            Ev::Gap { conn, dir, len, .. } if *conn == conn0 => s.push((((*len).min(31) as u8) << 3) | 6 | u8::from(*dir == Dir::ToClient)),
            _ => {}
        }
        if s.len() > 64 * 1024 {
            break;
        }
    }
    s
}

/// Hand-made messages as a script: (to the server?, bytes) in order.
fn script_from(msgs: &[(bool, &[u8])]) -> Vec<u8> {
    let mut s = Vec::new();
    for (to_server, m) in msgs {
        for c in m.chunks(32) {
            s.push((((c.len() - 1) as u8) << 3) | u8::from(!to_server));
            s.extend_from_slice(c);
        }
    }
    s
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&seeds[rng.below(seeds.len())]);
    for _ in 0..1 + rng.below(4) {
        let n = out.len();
        match rng.below(7) {
            0 if n > 0 => out[rng.below(n)] ^= 1 << rng.below(8),
            1 if n > 0 => out[rng.below(n)] = [0, 0xff, 0x7f, 0x80, 1][rng.below(5)],
            2 if n > 0 => {
                let a = rng.below(n);
                let b = (a + 1 + rng.below(64)).min(n);
                out.drain(a..b);
            }
            3 if n > 0 => {
                let a = rng.below(n);
                let b = (a + 1 + rng.below(64)).min(n);
                let piece = out[a..b].to_vec();
                let at = rng.below(n);
                out.splice(at..at, piece);
            }
            4 => {
                let other = &seeds[rng.below(seeds.len())];
                if !other.is_empty() {
                    let a = rng.below(other.len());
                    let b = (a + 1 + rng.below(256)).min(other.len());
                    let at = rng.below(n + 1);
                    out.splice(at..at, other[a..b].iter().copied());
                }
            }
            5 if n > 0 => out.truncate(rng.below(n)),
            _ => {
                let at = rng.below(n + 1);
                let junk: Vec<u8> = (0..1 + rng.below(16)).map(|_| rng.next() as u8).collect();
                out.splice(at..at, junk);
            }
        }
    }
}

/// A stream parser over a script; its malformed count.
fn run_stream(mut p: ConnParser, script: &[u8]) -> u64 {
    let mut out = Vec::new();
    crate::fuzz_feed(&mut p, script, &mut out);
    for t in &out {
        if let (Some(a), Some(b)) = (t.request, t.response) {
            assert!(a.first_ns <= a.last_ns && b.first_ns <= b.last_ns, "spans in order");
        }
    }
    p.stats().malformed
}

/// What one target feeds an input to: a stream parser (malformed counted)
/// or a fuzz entry of its own.
enum Feed {
    Stream(Box<dyn Fn(&ParseConfig) -> ConnParser>),
    Entry(fn(&[u8])),
}

struct Target {
    name: &'static str,
    seeds: Vec<Vec<u8>>,
    feed: Feed,
}

fn targets() -> Vec<Target> {
    let cap = |rel: &str, port: u16| script_of(&tcp_events(rel, &[port]));
    let proto = |p: Protocol| Feed::Stream(Box::new(move |cfg| p.stream_parser(cfg)));
    let kafka = format!("{}/../../tests/data/kafka-kraft-4.1.1.pcap", env!("CARGO_MANIFEST_DIR"));
    let mqtt = script_from(&[
        (true, b"\x10\x12\x00\x04MQTT\x04\x02\x00\x3c\x00\x06client"),
        (false, b"\x20\x02\x00\x00"),
        (true, b"\x32\x0d\x00\x05a/b/c\x00\x07hello"),
        (false, b"\x40\x02\x00\x07"),
        (true, b"\x82\x08\x00\x08\x00\x03x/#\x01"),
        (false, b"\x90\x03\x00\x08\x01"),
        (true, b"\xc0\x00"),
        (false, b"\xd0\x00"),
    ]);
    let memcached_udp = {
        let mut s = vec![1u8];
        for (dir, m) in [(0u8, &b"\x00\x01\x00\x00\x00\x01\x00\x00get k\r\n"[..]), (1, b"\x00\x01\x00\x00\x00\x01\x00\x00VALUE k 0 1\r\nx\r\nEND\r\n")] {
            s.push((((m.len() - 1) as u8) << 3) | dir);
            s.extend_from_slice(m);
        }
        s
    };
    let dns_udp = crate::testutil::udp_datagrams("packetbeat/pcaps/dns_google_com.pcap", &[53]).into_iter().map(|d| d.data).collect::<Vec<_>>();
    vec![
        Target { name: "http", seeds: vec![cap("packetbeat/pcaps/http_post.pcap", 8000), cap("packetbeat/pcaps/wsgi_drum.pcap", 8888)], feed: proto(Protocol::Http) },
        Target { name: "mysql", seeds: vec![cap("packetbeat/pcaps/mysql_long.pcap", 3306)], feed: proto(Protocol::Mysql) },
        Target { name: "pgsql", seeds: vec![cap("packetbeat/pcaps/pgsql_extended_query.pcap", 5432)], feed: proto(Protocol::Pgsql) },
        Target { name: "redis", seeds: vec![cap("packetbeat/pcaps/redis_one_transaction.pcap", 6380)], feed: proto(Protocol::Redis) },
        Target { name: "dns (TCP)", seeds: vec![cap("packetbeat/pcaps/dns_tcp_axfr.pcap", 53)], feed: proto(Protocol::Dns) },
        Target { name: "dns (UDP)", seeds: dns_udp, feed: Feed::Entry(crate::dns::fuzz) },
        Target { name: "tls", seeds: vec![cap("tls/tls12_ecdsa/ecdsa-cert.pcap", 443)], feed: proto(Protocol::Tls) },
        Target { name: "starttls (SMTP)", seeds: vec![cap("tls/starttls_smtp/smtp-starttls.pcap", 25)], feed: Feed::Stream(Box::new(|cfg| ConnParser::starttls(crate::starttls::Cleartext::Smtp, cfg))) },
        Target { name: "http2/grpc", seeds: vec![cap("http2/pcaps/grpc_unary_stream_errors.pcap", 50051)], feed: proto(Protocol::Grpc) },
        Target { name: "memcached (TCP)", seeds: vec![cap("packetbeat2/pcaps/memcache/memcache_bin_tcp_counter_ops.pcap", 11211), script_from(&[(true, b"get a b\r\nset k 0 0 2\r\nhi\r\n"), (false, b"VALUE a 0 1\r\nx\r\nEND\r\nSTORED\r\n")])], feed: proto(Protocol::Memcached) },
        Target { name: "memcached (UDP)", seeds: vec![memcached_udp], feed: Feed::Entry(|b| {
            crate::memcached::fuzz(b);
        }) },
        Target { name: "mongodb", seeds: vec![cap("packetbeat2/pcaps/mongodb_more_rows.pcap", 27017), cap("packetbeat2/pcaps/mongodb_op_msg_opcode.pcap", 27017)], feed: proto(Protocol::Mongodb) },
        Target { name: "mqtt", seeds: vec![mqtt], feed: proto(Protocol::Mqtt) },
        Target { name: "amqp", seeds: vec![cap("packetbeat2/pcaps/amqp_publish.pcap", 5672)], feed: proto(Protocol::Amqp) },
        Target { name: "kafka", seeds: vec![cap(&kafka, 9092)], feed: proto(Protocol::Kafka) },
        Target { name: "cassandra", seeds: vec![cap("packetbeat2/pcaps/cassandra/v4/cassandra_mixed_frame.pcap", 9042), cap("packetbeat2/pcaps/cassandra/v4/cassandra_compressed.pcap", 9042)], feed: proto(Protocol::Cassandra) },
    ]
}

#[test]
fn every_parser_takes_mutated_input_without_a_panic() {
    let secs: f64 = std::env::var("WIRELOG_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(0.3);
    // Small limits, as the cargo-fuzz targets use, so the caps are hit.
    let cfgs = [
        ParseConfig { max_header_bytes: 64, max_text_bytes: 8, transaction_timeout_ns: 3, ..ParseConfig::default() },
        ParseConfig { redact: true, transaction_timeout_ns: 50, ..ParseConfig::default() },
    ];
    println!("| target | runs | seconds | runs with malformed input | malformed messages |");
    println!("|---|---:|---:|---:|---:|");
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let mut input = Vec::new();
    for t in targets() {
        assert!(t.seeds.iter().any(|s| !s.is_empty()), "{}: no seed", t.name);
        let start = Instant::now();
        let (mut runs, mut bad_runs, mut malformed) = (0u64, 0u64, 0u64);
        while start.elapsed() < Duration::from_secs_f64(secs) {
            mutate(&mut rng, &t.seeds, &mut input);
            let cfg = &cfgs[(runs % 2) as usize];
            let r = catch_unwind(AssertUnwindSafe(|| match &t.feed {
                Feed::Stream(make) => run_stream(make(cfg), &input),
                Feed::Entry(f) => {
                    f(&input);
                    0
                }
            }));
            match r {
                Ok(m) => {
                    malformed += m;
                    bad_runs += u64::from(m > 0);
                }
                Err(_) => {
                    let path = std::env::temp_dir().join(format!("fuzz-stable-crash-{}.bin", t.name.replace([' ', '/'], "_"))).display().to_string();
                    let _ = std::fs::write(&path, &input);
                    panic!("{}: a panic on the input saved in {path}", t.name);
                }
            }
            runs += 1;
        }
        let m = |v: u64| if matches!(t.feed, Feed::Entry(_)) { "-".to_string() } else { v.to_string() };
        println!("| {} | {runs} | {:.1} | {} | {} |", t.name, start.elapsed().as_secs_f64(), m(bad_runs), m(malformed));
        assert!(runs > 0);
    }
}
