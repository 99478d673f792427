//! Cassandra against tshark's CQL dissector (epan/dissectors/packet-cql.c),
//! the second reference beside Packetbeat's asserts (tests/packetbeat2.rs):
//! on each of Packetbeat's Cassandra captures (shared/testdata/packetbeat2),
//! every CQL frame tshark reads, keyed by (client port, stream id, opcode),
//! is a request or a response of exactly one cassandra.log record, and the
//! row counts of the rows results are the same. tshark decompresses the
//! snappy capture's frames as wirelog does.
//!
//! Skipped (loudly) without tshark unless WIRELOG_REQUIRE_ALL_TESTS=1.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn pcaps() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/packetbeat2/pcaps/cassandra/v4")
}

/// Opcode names (native_protocol_v4.spec 2.4).
fn op(n: &str) -> &'static str {
    match n.parse::<u8>().unwrap_or(255) {
        0 => "ERROR",
        1 => "STARTUP",
        2 => "READY",
        3 => "AUTHENTICATE",
        5 => "OPTIONS",
        6 => "SUPPORTED",
        7 => "QUERY",
        8 => "RESULT",
        9 => "PREPARE",
        10 => "EXECUTE",
        11 => "REGISTER",
        12 => "EVENT",
        13 => "BATCH",
        _ => "other",
    }
}

type Frames = BTreeMap<(String, String, &'static str), usize>;

/// tshark's frames: (client port, stream, opcode) counted, per direction,
/// and the rows results' row counts.
fn tshark(pcap: &Path) -> (Frames, Frames, Vec<String>) {
    let out = Command::new("tshark")
        .args(["-r"])
        .arg(pcap)
        .args(["-d", "tcp.port==9042,cql", "-Y", "cql", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|"])
        .args(["-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "cql.direction", "-e", "cql.stream", "-e", "cql.opcode", "-e", "cql.result.rows.row_count"])
        .output()
        .expect("run tshark");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (mut req, mut resp, mut rows) = (Frames::new(), Frames::new(), Vec::new());
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let (dirs, streams, ops) = (f[2].split('|'), f[3].split('|').collect::<Vec<_>>(), f[4].split('|').collect::<Vec<_>>());
        for (i, d) in dirs.enumerate() {
            let (table, client) = if d == "0x00" { (&mut req, f[0]) } else { (&mut resp, f[1]) };
            *table.entry((client.to_string(), streams[i].to_string(), op(ops[i]))).or_default() += 1;
        }
        rows.extend(f[5].split('|').filter(|s| !s.is_empty()).map(String::from));
    }
    rows.sort();
    (req, resp, rows)
}

#[test]
fn cassandra_log_agrees_with_tshark() {
    if !Command::new("tshark").arg("-v").output().is_ok_and(|o| o.status.success()) {
        common::live::skip("tshark is missing");
        return;
    }
    let mut checked = 0;
    for pcap in ["cassandra_create_keyspace.pcap", "cassandra_create_table.pcap", "cassandra_insert.pcap", "cassandra_select.pcap", "cassandra_mixed_frame.pcap", "cassandra_compressed.pcap"] {
        let path = pcaps().join(pcap);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cql-tshark-{}-{pcap}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let o = Command::new(env!("CARGO_BIN_EXE_wirelog")).args(["read", "--no-store", "--quiet", "-C", "--logs"]).arg(&dir).arg(&path).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let log = common::read_log(&dir.join("cassandra.log"));
        let (mut req, mut resp, mut rows) = (Frames::new(), Frames::new(), Vec::new());
        for r in &log {
            assert_eq!(r["status"], "ok", "{pcap}: {r:?}");
            let key = |o: &str| (r["id.orig_p"].clone(), r["stream"].clone(), op_name(o));
            *req.entry(key(&r["op"])).or_default() += 1;
            *resp.entry(key(&r["response_op"])).or_default() += 1;
            if r["result"] == "rows" {
                rows.push(r["rows"].clone());
            }
        }
        rows.sort();
        let (t_req, t_resp, t_rows) = tshark(&path);
        assert_eq!(req, t_req, "{pcap}: requests");
        assert_eq!(resp, t_resp, "{pcap}: responses");
        assert_eq!(rows, t_rows, "{pcap}: row counts");
        checked += log.len();
        let _ = std::fs::remove_dir_all(&dir);
    }
    // The captures' request frames, as tshark counts them.
    assert_eq!(checked, 4 + 8 + 1 + 1 + 17 + 20);
}

/// The log's opcode name as the table's `&'static str`.
fn op_name(s: &str) -> &'static str {
    (0..=13u8).map(|n| op(&n.to_string())).find(|n| *n == s).unwrap_or("other")
}
