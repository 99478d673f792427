//! MongoDB made here, checked against what the client saw: FerretDB (the
//! MongoDB wire protocol over its SQLite backend, built by scripts/test.sh
//! from its Go module, found through WIRELOG_FERRETDB or on PATH) in a
//! network namespace, a pymongo client running a script of operations
//! (inserts, a find whose cursor needs getMores, an aggregate, an update, a
//! delete, a duplicate-key insert, an unknown command, a find_one) and
//! printing what each returned; tcpdump captures the loopback, `wirelog
//! read` makes mongodb.log and a store, and each operation's record agrees
//! with what the client printed.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::lo::{have, settle, wait_for, LoNs};

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Each operation prints `<command>\t<ok|error>\t<number the client saw>`
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
    if let Ok(p) = std::env::var("WIRELOG_FERRETDB") {
        return Some(PathBuf::from(p));
    }
    have("ferretdb").then(|| PathBuf::from("ferretdb"))
}

#[test]
fn records_match_what_the_client_saw() {
    let python_ok = Command::new("python3").args(["-c", "import pymongo"]).output().is_ok_and(|o| o.status.success());
    let Some(ferret) = ferretdb() else {
        common::live::skip("needs FerretDB (scripts/test.sh builds it and sets WIRELOG_FERRETDB)");
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
    wait_for("ferretdb", Duration::from_secs(30), || {
        ns.cmd(&["python3", "-c", "import socket; socket.create_connection(('127.0.0.1', 27017)).close()"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let o = ns.cmd(&["timeout", "60", "python3", "-c", CLIENT]).output().unwrap();
    let server_log = std::fs::read_to_string(dir.join("ferretdb.log.txt")).unwrap_or_default();
    assert!(o.status.success(), "client: {}\nserver: {server_log}", text(&o));
    settle(&pcap);
    tcpdump.interrupt();
    let seen: Vec<Vec<String>> = String::from_utf8_lossy(&o.stdout).lines().map(|l| l.split('\t').map(str::to_string).collect()).collect();
    assert_eq!(seen.len(), 8, "{seen:?}");

    let logs = dir.join("logs");
    let store = dir.join("store");
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog")).args(["read", "--logs"]).arg(&logs).arg("--store").arg(&store).arg(&pcap).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
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
    let q = Command::new(env!("CARGO_BIN_EXE_wirelog")).args(["query", "mongodb", "--store"]).arg(&store).args(["--top", "100", "--format", "csv"]).output().unwrap();
    assert!(q.status.success(), "{}", text(&q));
    let csv = String::from_utf8_lossy(&q.stdout);
    assert!(csv.lines().next().unwrap().starts_with("command,collection,fingerprint,"), "{csv}");
    for line in ["getMore,items,,", "find,items,{qty: {$gt: ?}},", "delete,items,{qty: {$lt: ?}},"] {
        assert!(csv.lines().any(|l| l.starts_with(line)), "{line} in\n{csv}");
    }
}
