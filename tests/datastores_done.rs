//! Issue 33's "done when" for its six protocols (MongoDB, Memcached, Kafka,
//! AMQP, MQTT, Cassandra), from captures of real clients and servers:
//! Packetbeat's second set (MongoDB, Memcached text and binary, AMQP,
//! Cassandra), Kafka 4.1.1 with kafka-python (tests/data, written by
//! tests/kafka_live.rs), and MQTT 3.1.1 exchanges written by
//! bench/gen_wire.py (the live MQTT test's broker is not started again
//! here). One `read` makes the logs and the store; each kind's transactions
//! are the same number in its log, `wirelog query` (grouped by the kind's
//! default grouping), the UI's records view (`/api/records`, a tab from
//! `/api/schema` and `/api/extent`) and the service map's edges, and
//! conn.log names the service. `--redact` hides Memcached keys and CQL
//! literals; MongoDB's fingerprints hold none either way. ClickHouse: the
//! same captures in tests/clickhouse.rs (`datastores_into_clickhouse_...`,
//! which shares that file's one engine).

mod common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use common::datastores::datastore_captures;
use std::process::Command;

use common::serve::{get, start};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_wirelog");

/// (kind, its default grouping as `wirelog query` prints it).
const KINDS: [(&str, &str); 6] = [
    ("mongodb", "command,collection,fingerprint"),
    ("memcached", "command,result"),
    ("kafka", "api,topic"),
    ("amqp", "method,exchange,queue"),
    ("mqtt", "packet_type,topic"),
    ("cassandra", "op,fingerprint"),
];

fn read(caps: &[PathBuf], logs: &Path, store: Option<&Path>, extra: &[&str]) {
    let mut cmd = Command::new(BIN);
    cmd.args(["read", "-C", "--quiet", "--logs"]).arg(logs).args(extra);
    // No store: none at all (the default `wirelog-data` in the working
    // directory would be the repository's, and a second run would refuse
    // the captures as already read).
    match store {
        Some(s) => cmd.arg("--store").arg(s),
        None => cmd.arg("--no-store"),
    };
    let o = cmd.args(caps).output().unwrap();
    assert!(o.status.success(), "read: {}", String::from_utf8_lossy(&o.stderr));
}

fn api(addr: std::net::SocketAddr, path: &str) -> Value {
    let (status, body) = get(addr, path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

#[test]
fn six_protocols_in_log_store_query_ui_map_and_conn_log() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("datastores-done-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let caps = datastore_captures(&dir);
    for c in &caps {
        assert!(c.exists(), "{}", c.display());
    }
    let (logs, store, redacted) = (dir.join("logs"), dir.join("store"), dir.join("redacted"));
    read(&caps, &logs, Some(&store), &[]);
    read(&caps, &redacted, None, &["--redact"]);
    let conns = common::read_log(&logs.join("conn.log"));
    let srv = start(&["serve", "--store", store.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    let schema = api(srv.addr, "/api/schema");
    let extent = api(srv.addr, "/api/extent");
    let map = api(srv.addr, "/api/map");
    for (kind, by) in KINDS {
        // The log.
        let rows = common::read_log(&logs.join(format!("{kind}.log")));
        assert!(!rows.is_empty(), "{kind}.log is empty");
        let n = rows.len() as u64;
        // conn.log names the service on the connections the records are of.
        let uids: HashSet<&str> = rows.iter().map(|r| r["uid"].as_str()).collect();
        let services: HashSet<&str> = conns.iter().filter(|c| uids.contains(c["uid"].as_str())).map(|c| c["service"].as_str()).collect();
        assert!(!services.is_empty() && services.iter().all(|s| s.split(',').any(|x| x == kind)), "{kind}: conn.log services {services:?}");
        // The store through `wirelog query`, by the kind's default grouping.
        let q = Command::new(BIN).args(["query", kind, "--store"]).arg(&store).args(["--top", "0", "--format", "csv"]).output().unwrap();
        assert!(q.status.success(), "query {kind}: {}", String::from_utf8_lossy(&q.stderr));
        let csv = String::from_utf8_lossy(&q.stdout);
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
        assert!(header.join(",").starts_with(&format!("{by},")), "{kind}: {header:?}");
        let at = header.iter().position(|h| *h == "count").unwrap_or_else(|| panic!("{kind}: no count in {header:?}"));
        // Group values may hold commas (fingerprints): count from the end.
        let from_end = header.len() - at;
        let total: u64 = lines.map(|l| l.split(',').collect::<Vec<_>>()).map(|f| f[f.len() - from_end].parse::<u64>().unwrap()).sum();
        assert_eq!(total, n, "{kind}: query's counts vs the log");
        // The UI: a tab (a transaction kind of the schema with its shape,
        // rows in the extent) and its records view.
        let k = schema["kinds"].as_array().unwrap().iter().find(|k| k["kind"] == kind).unwrap_or_else(|| panic!("{kind} not in /api/schema"));
        assert!(!k["protocol"].is_null() && k["protocol"] != false, "{kind}: {k}");
        let rows_in_extent = extent.as_array().unwrap().iter().find(|e| e["kind"] == kind).map(|e| e["rows"].as_u64().unwrap());
        assert_eq!(rows_in_extent, Some(n), "{kind}: /api/extent");
        let recs = api(srv.addr, &format!("/api/records?kind={kind}&limit=10000"));
        let got = recs.get("rows").or(recs.get("records")).and_then(Value::as_array).map(Vec::len).unwrap_or_else(|| panic!("{kind}: {recs}"));
        assert_eq!(got as u64, n, "{kind}: /api/records");
        // The service map: edges of the protocol carry every transaction.
        let edges: u64 = map["edges"].as_array().unwrap().iter().filter(|e| e["protocol"] == kind).map(|e| e["count"].as_u64().unwrap()).sum();
        assert_eq!(edges, n, "{kind}: /api/map edges");
    }
    // Redaction.
    let plain = common::read_log(&logs.join("memcached.log"));
    let red = common::read_log(&redacted.join("memcached.log"));
    assert_eq!(plain.len(), red.len());
    assert!(plain.iter().any(|r| r["key"] != "-" && r["key"] != "?"), "the capture has keys");
    assert!(red.iter().all(|r| r["key"] == "-" || r["key"] == "?"), "--redact hides every Memcached key");
    let cql = |d: &Path| common::read_log(&d.join("cassandra.log")).into_iter().map(|r| r["query"].clone()).collect::<Vec<_>>();
    assert!(cql(&logs).iter().any(|q| q.contains("SimpleStrategy")));
    assert!(cql(&redacted).iter().all(|q| !q.contains("SimpleStrategy")), "--redact replaces CQL literals");
    let fps = |d: &Path| common::read_log(&d.join("mongodb.log")).into_iter().map(|r| r["fingerprint"].clone()).collect::<Vec<_>>();
    assert_eq!(fps(&logs), fps(&redacted), "MongoDB's fingerprints hold no literal either way");
}
