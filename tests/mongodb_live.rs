//! MongoDB made here, checked against what the client saw, two ways:
//!
//! - always: `tests/mongodb_wire.py`, a test-only server and client that
//!   speak the wire protocol themselves (OP_MSG with document sequences,
//!   checksums (one wrong) and moreToCome; an exhaust getMore; OP_COMPRESSED
//!   with snappy, zlib, zstd and noop; the legacy OP_QUERY/OP_REPLY), in a
//!   network namespace, the capture also read by tshark's mongo dissector;
//! - when `WIRELOG_FERRETDB` names a FerretDB binary: FerretDB (the MongoDB
//!   wire protocol over its SQLite backend) driven by pymongo. scripts/test.sh
//!   builds it from its Go module by default (WIRELOG_BUILD_FERRETDB=0 skips
//!   it: about 2 minutes of CPU with an empty Go build cache).
//!
//! tcpdump captures the loopback, `wirelog read` makes mongodb.log and a
//! store, and each operation's record agrees with what the client printed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::live::text;
use common::lo::{have, settle, wait_for, LoNs};

/// pymongo's script: each operation prints `<command>\t<ok|error>\t<number the client saw>`
/// (documents inserted, found, counted, matched or deleted; the error code).
const CLIENT: &str = r#"
import pymongo
from pymongo.errors import DuplicateKeyError, OperationFailure
c = pymongo.MongoClient("mongodb://127.0.0.1:27017/?directConnection=true",
                        serverSelectionTimeoutMS=20000, retryWrites=False, retryReads=False)
col = c["shop"]["items"]
def out(*a):
    print("\t".join(str(x) for x in a), flush=True)
r = col.insert_many([{"_id": i, "sku": "s%d" % i, "qty": i * 10} for i in range(25)])
out("insert", "ok", len(r.inserted_ids))
docs = list(col.find({"qty": {"$gt": 100}}).batch_size(5))
out("find", "ok", len(docs))
out("aggregate", "ok", col.count_documents({"sku": "s3"}))
out("update", "ok", col.update_one({"_id": 3}, {"$set": {"qty": 1}}).matched_count)
out("delete", "ok", col.delete_many({"qty": {"$lt": 50}}).deleted_count)
try:
    col.insert_one({"_id": 7})
    out("insert", "ok", 1)
except DuplicateKeyError as e:
    out("insert", "error", e.code)
try:
    c["shop"].command("nosuchcommand")
    out("nosuchcommand", "ok", 0)
except OperationFailure as e:
    out("nosuchcommand", "error", e.code)
out("find", "ok", 1 if col.find_one({"_id": 12}) else 0)
c.close()
"#;

fn ferretdb() -> Option<PathBuf> {
    std::env::var("WIRELOG_FERRETDB").ok().map(PathBuf::from)
}

#[test]
fn records_match_what_the_client_saw() {
    let python_ok = Command::new("python3").args(["-c", "import pymongo"]).output().is_ok_and(|o| o.status.success());
    let Some(ferret) = ferretdb() else {
        // Not built (see the top): the wire test below always runs.
        eprintln!("NOT RUN: no FerretDB (WIRELOG_FERRETDB unset: scripts/test.sh did not build it, or WIRELOG_BUILD_FERRETDB=0); the raw wire test covers the protocol");
        return;
    };
    if !(python_ok && have("tcpdump") && common::live::is_root()) {
        common::live::skip("needs root, python3 with pymongo, and tcpdump");
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mongodb-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let ns = LoNs::new("mg");
    let pcap = dir.join("mongodb.pcap");
    let tcpdump = ns.tcpdump(&pcap, &["tcp", "port", "27017"]);
    let sqlite = format!("file:{}/", dir.join("data").display());
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let _server = ns.spawn(
        "ferretdb",
        &[
            ferret.to_str().unwrap(),
            "--handler=sqlite",
            &format!("--sqlite-url={sqlite}"),
            &format!("--state-dir={}", state.display()),
            "--listen-addr=127.0.0.1:27017",
            "--telemetry=disable",
            "--debug-addr=-",
        ],
        &dir.join("ferretdb.log.txt"),
    );
    wait_for("ferretdb", Duration::from_secs(30), || ns.accepts(27017));
    let o = ns.cmd(&["timeout", "60", "python3", "-c", CLIENT]).output().unwrap();
    let server_log = std::fs::read_to_string(dir.join("ferretdb.log.txt")).unwrap_or_default();
    assert!(o.status.success(), "client: {}\nserver: {server_log}", text(&o));
    settle(&pcap);
    tcpdump.interrupt();
    let seen: Vec<Vec<String>> = String::from_utf8_lossy(&o.stdout).lines().map(|l| l.split('\t').map(str::to_string).collect()).collect();
    assert_eq!(seen.len(), 8, "{seen:?}");

    let logs = dir.join("logs");
    let store = dir.join("store");
    let out = common::read_pcap(&pcap, &logs, Some(&store), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("malformed"), "{err}");
    let rows = common::read_log(&logs.join("mongodb.log"));
    // The driver's own commands (hello, endSessions, ...) are records too;
    // the script's operations are these, in order.
    let ops = ["insert", "find", "getMore", "aggregate", "update", "delete", "nosuchcommand"];
    let mine: Vec<_> = rows.iter().filter(|r| ops.contains(&r["command"].as_str())).collect();
    let cmds: Vec<&str> = mine.iter().map(|r| r["command"].as_str()).collect();
    // find with batches of 5 over 14 documents: find (5), getMore (5), getMore (4).
    assert_eq!(cmds, ["insert", "find", "getMore", "getMore", "aggregate", "update", "delete", "insert", "nosuchcommand", "find"], "{rows:#?}");
    for r in &rows {
        assert!(r["status"] == "ok" || r["status"] == "error", "every request answered: {r:?}");
    }
    for r in &mine {
        assert_eq!(r["database"], "shop", "{r:?}");
    }
    let ins = mine[0];
    assert_eq!((ins["status"].as_str(), ins["collection"].as_str(), ins["n"].as_str()), ("ok", "items", seen[0][2].as_str()), "{ins:?}");
    let (find, gm1, gm2) = (mine[1], mine[2], mine[3]);
    assert_eq!(find["fingerprint"], "{qty: {$gt: ?}}", "{find:?}");
    let returned: u64 = [find, gm1, gm2].iter().map(|r| r["docs_returned"].parse::<u64>().unwrap()).sum();
    assert_eq!(returned.to_string(), seen[1][2], "{find:?} {gm1:?} {gm2:?}");
    assert_eq!(find["docs_returned"], "5");
    assert_ne!(find["cursor_id"], "0", "{find:?}");
    assert_eq!((gm1["cursor_id"].as_str(), gm2["cursor_id"].as_str()), (find["cursor_id"].as_str(), find["cursor_id"].as_str()), "getMore tied to its find");
    let agg = mine[4];
    assert!(agg["fingerprint"].starts_with("[{$match: {sku: ?}}"), "{agg:?}");
    let upd = mine[5];
    assert_eq!((upd["status"].as_str(), upd["n"].as_str(), upd["fingerprint"].as_str()), ("ok", seen[3][2].as_str(), "{_id: ?}"), "{upd:?}");
    let del = mine[6];
    assert_eq!((del["status"].as_str(), del["n"].as_str(), del["fingerprint"].as_str()), ("ok", seen[4][2].as_str(), "{qty: {$lt: ?}}"), "{del:?}");
    let dup = mine[7];
    assert_eq!((dup["status"].as_str(), dup["error_code"].as_str()), ("error", seen[5][2].as_str()), "{dup:?}");
    let unknown = mine[8];
    assert_eq!((unknown["status"].as_str(), unknown["error_code"].as_str()), ("error", seen[6][2].as_str()), "{unknown:?}");
    let one = mine[9];
    assert_eq!((one["status"].as_str(), one["docs_returned"].as_str(), one["fingerprint"].as_str()), ("ok", seen[7][2].as_str(), "{_id: ?}"), "{one:?}");
    let conns = common::read_log(&logs.join("conn.log"));
    assert!(conns.iter().any(|c| c["service"] == "mongodb"), "{conns:?}");

    // The store holds the same; queries group by command, collection and
    // the filter's shape by default.
    let csv = common::query_csv(&store, "mongodb", &["--top", "100"]);
    assert!(csv.lines().next().unwrap().starts_with("command,collection,fingerprint,"), "{csv}");
    for line in ["getMore,items,,", "find,items,{qty: {$gt: ?}},", "delete,items,{qty: {$lt: ?}},"] {
        assert!(csv.lines().any(|l| l.starts_with(line)), "{line} in\n{csv}");
    }
}

/// The test-only peers of tests/mongodb_wire.py: every request the client
/// made is one record, in order, with the status and numbers it saw.
#[test]
fn raw_wire_records_match_what_the_client_saw() {
    if !(have("python3") && have("tcpdump") && common::live::is_root()) {
        common::live::skip("needs root, python3 and tcpdump");
        return;
    }
    let wire = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mongodb_wire.py");
    let wire = wire.to_str().unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mongodb-wire-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ns = LoNs::new("mw");
    let pcap = dir.join("mongodb.pcap");
    let tcpdump = ns.tcpdump(&pcap, &["tcp", "port", "27017"]);
    let _server = ns.spawn("mongodb_wire.py", &["python3", wire, "server", "27017"], &dir.join("server.log.txt"));
    wait_for("mongodb_wire.py server", Duration::from_secs(20), || ns.accepts(27017));
    let o = ns.cmd(&["timeout", "60", "python3", wire, "client", "27017"]).output().unwrap();
    assert!(o.status.success(), "client: {}\nserver: {}", text(&o), std::fs::read_to_string(dir.join("server.log.txt")).unwrap_or_default());
    settle(&pcap);
    tcpdump.interrupt();
    let seen: Vec<Vec<String>> = String::from_utf8_lossy(&o.stdout).lines().map(|l| l.split('\t').map(str::to_string).collect()).collect();
    assert_eq!(seen.len(), 20, "{seen:?}");

    let logs = dir.join("logs");
    let store = dir.join("store");
    let out = common::read_pcap(&pcap, &logs, Some(&store), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("parsers: 1 malformed"), "the one checksum sent wrong, and nothing else: {err}");
    let rows = common::read_log(&logs.join("mongodb.log"));
    assert_eq!(rows.len(), seen.len(), "one record per request, and per reply of the exhaust stream: {rows:#?}");
    for (want, r) in seen.iter().zip(&rows) {
        let (cmd, status, num) = (&want[0], &want[1], &want[2]);
        assert_eq!((&r["command"], &r["status"]), (cmd, status), "{want:?}: {r:?}");
        let field = match (cmd.as_str(), status.as_str()) {
            (_, "error") => "error_code",
            ("find" | "getMore", _) => "docs_returned",
            ("insert" | "delete", "ok") => "n",
            _ => continue,
        };
        assert_eq!(&r[field], num, "{want:?}: {field} of {r:?}");
        if status == "ok" {
            assert_ne!(r["latency"], "-", "{r:?}");
        }
    }
    let at = |i: usize| &rows[i];
    assert_eq!((at(0)["op"].as_str(), at(0)["database"].as_str()), ("query", "admin"));
    assert_eq!((at(1)["op"].as_str(), at(1)["database"].as_str(), at(1)["collection"].as_str()), ("msg", "shop", "items"));
    assert_eq!(at(2)["fingerprint"], "{qty: {$gt: ?}}");
    assert_ne!(at(2)["cursor_id"], "0");
    assert_eq!((at(3)["cursor_id"].as_str(), at(4)["cursor_id"].as_str()), (at(2)["cursor_id"].as_str(), at(2)["cursor_id"].as_str()), "getMores tied to their find");
    assert_eq!(at(5)["fingerprint"], "{qty: {$lt: ?}}", "the delete sent with a checksum slot and a document sequence");
    assert_eq!(at(8)["more_to_come"], "T");
    assert_eq!((at(9)["op"].as_str(), at(9)["collection"].as_str(), at(9)["fingerprint"].as_str()), ("query", "items", "{_id: ?}"));
    // The exhaust stream: the find, then three replies to one getMore, all
    // with the find's cursor; the later two have no request bytes.
    assert_eq!(at(11)["exhaust"], "F");
    for i in 12..15 {
        assert_eq!((at(i)["exhaust"].as_str(), at(i)["cursor_id"].as_str()), ("T", at(11)["cursor_id"].as_str()), "{:?}", at(i));
    }
    assert_ne!(at(12)["request_bytes"], "0");
    assert_eq!((at(13)["request_bytes"].as_str(), at(14)["request_bytes"].as_str()), ("0", "0"));
    // Compressed both ways, read as the OP_MSG they wrap.
    for (i, tshark) in seen.iter().enumerate().take(19).skip(15) {
        let r = at(i);
        assert_eq!((r["op"].as_str(), r["compressor"].as_str(), r["fingerprint"].as_str()), ("msg", tshark[3].as_str(), "{_id: ?}"), "{r:?}");
    }
    assert!(rows[..15].iter().chain(&rows[19..]).all(|r| r["compressor"] == "-"));
    // tshark's mongo dissector reads the same capture: the eight compressed
    // messages carry the compressors ours name; it decompresses the snappy,
    // zlib and noop ones (tshark 4.0 has no zstd for MongoDB: it flags id 3
    // as unsupported) and finds `find` first in each request's body; it
    // sees moreToCome on the two exhaust replies that have it.
    if have("tshark") {
        let t = Command::new("tshark")
            .args(["-r"])
            .arg(&pcap)
            .args(["-d", "tcp.port==27017,mongo", "-Y", "mongo", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=;"])
            .args(["-e", "tcp.srcport", "-e", "mongo.compression.compressor", "-e", "mongo.element.name", "-e", "mongo.msg.flags.moretocome", "-e", "mongo.compression.unsupported_compressed"])
            .output()
            .unwrap();
        assert!(t.status.success(), "{}", text(&t));
        let tsv = String::from_utf8_lossy(&t.stdout);
        let (mut comps, mut more_replies, mut compressed_cmds) = (Vec::new(), 0, Vec::new());
        for line in tsv.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            let list = |i: usize| f.get(i).map(|x| x.split(';').filter(|v| !v.is_empty()).collect::<Vec<_>>()).unwrap_or_default();
            let unsupported = f.get(4).is_some_and(|u| !u.is_empty());
            assert!(!unsupported || list(1) == ["3"], "tshark could not decompress: {line}");
            comps.extend(list(1));
            if f[0] == "27017" {
                more_replies += list(3).iter().filter(|v| **v == "1" || **v == "True").count();
            } else if !list(1).is_empty() && !unsupported {
                compressed_cmds.push(list(2).first().copied().unwrap_or_default());
            }
        }
        comps.sort();
        assert_eq!(comps, ["0", "0", "1", "1", "2", "2", "3", "3"], "{tsv}");
        assert_eq!(compressed_cmds, ["find"; 3], "{tsv}");
        assert_eq!(more_replies, 2, "{tsv}");
    }
    let conns = common::read_log(&logs.join("conn.log"));
    assert!(conns.iter().any(|c| c["service"] == "mongodb"), "{conns:?}");

    // The store holds the same; queries group by command, collection and
    // the filter's shape by default.
    let csv = common::query_csv(&store, "mongodb", &["--top", "100"]);
    assert!(csv.lines().next().unwrap().starts_with("command,collection,fingerprint,"), "{csv}");
    for line in ["getMore,items,", "find,items,{qty: {$gt: ?}},", "delete,items,{qty: {$lt: ?}},", "nosuchcommand,"] {
        assert!(csv.lines().any(|l| l.starts_with(line)), "{line} in\n{csv}");
    }
}
