//! Memcached made here, checked against what the server answered: a real
//! `memcached` in a network namespace, a Python client sending a script of
//! text-protocol commands (storage, retrieval with hits and misses, delete,
//! incr/decr, touch, noreply, an unknown command) and printing each answer;
//! tcpdump captures the loopback, `wirelog read` makes memcached.log and a
//! store, and each record agrees with the answer the client printed. The
//! same server answers a second client in the binary protocol (memcached's
//! `-B auto` tells them apart by the first byte).

mod common;

use std::path::Path;
use std::time::Duration;

use common::live::text;
use common::lo::{needs, settle, LoNs, Proc};

/// The client: each command sent alone, its answer read whole and printed as
/// one line (`<command>\t<answer lines joined by |>`); `noreply` commands
/// print nothing to wait for.
const CLIENT: &str = r#"
import socket, sys
s = socket.create_connection(("127.0.0.1", 11211))
f = s.makefile("rb")
def ask(cmd, data=None, multi=False, reply=True):
    s.sendall(cmd + b"\r\n" + (data + b"\r\n" if data is not None else b""))
    if not reply:
        print(cmd.decode() + "\t"); return
    lines = []
    while True:
        l = f.readline().rstrip(b"\r\n")
        lines.append(l.decode())
        if l.startswith(b"VALUE "):
            n = int(l.split()[3]); f.read(n + 2); continue
        if not multi or l in (b"END",) or l.endswith(b"ERROR"):
            break
    print(cmd.decode() + "\t" + "|".join(lines))
ask(b"set alpha 0 0 5", b"hello")
ask(b"add alpha 0 0 3", b"xyz")
ask(b"get alpha", multi=True)
ask(b"get nothing", multi=True)
ask(b"set beta 5 0 11", b"hello world")
ask(b"gets alpha beta gamma", multi=True)
ask(b"append alpha 0 0 1", b"!")
ask(b"set n 0 0 2", b"10")
ask(b"incr n 5")
ask(b"decr n 100")
ask(b"touch alpha 100")
ask(b"delete beta")
ask(b"delete beta")
ask(b"set quiet 0 0 1 noreply", b"q", reply=False)
ask(b"get quiet", multi=True)
ask(b"frobnicate x")
ask(b"version")
"#;

/// memcached in `ns` on 127.0.0.1:11211 (TCP) with `flags`, root naming its
/// user, its output in `dir`; returns once it accepts connections.
fn memcached(ns: &LoNs, dir: &Path, flags: &[&str]) -> Proc {
    let args: Vec<&str> = ["memcached", "-u", "root", "-l", "127.0.0.1", "-p", "11211"].into_iter().chain(flags.iter().copied()).collect();
    let log = dir.join("memcached.log.txt");
    let mut server = ns.spawn("memcached", &args, &log);
    server.wait_ready(Duration::from_secs(20), &log, || ns.accepts(11211));
    server
}

#[test]
fn records_match_what_the_server_answered() {
    if !needs("memcached tests (network namespaces)", &["memcached", "python3", "tcpdump"]) {
        return;
    }
    let dir = common::scratch("memcached_live", "live");
    let ns = LoNs::new("mc");
    let pcap = dir.join("memcached.pcap");
    let tcpdump = ns.tcpdump(&pcap, &["tcp", "port", "11211"]);
    // -U 0: no UDP; -m 16: 16 MiB of cache; root must name a user.
    let _server = memcached(&ns, &dir, &["-U", "0", "-m", "16"]);
    let o = ns.cmd(&["python3", "-c", CLIENT]).output().unwrap();
    assert!(o.status.success(), "client: {}", text(&o));
    settle(&pcap);
    tcpdump.interrupt();
    let answers: Vec<(String, String)> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let (c, a) = l.split_once('\t').unwrap();
            (c.to_string(), a.to_string())
        })
        .collect();
    assert_eq!(answers.len(), 17, "{answers:?}");

    let logs = dir.join("logs");
    let store = dir.join("store");
    common::read_pcap(&pcap, &logs, Some(&store), &["--quiet"]);
    let rows = common::read_log(&logs.join("memcached.log"));
    // The probe's connection (the readiness check) has no command; the client's 17 have.
    assert_eq!(rows.len(), answers.len(), "{rows:#?}");

    // What each answer means, as the client printed it.
    let expect = |answer: &str, command: &str| -> (&'static str, &'static str) {
        let first = answer.split('|').next().unwrap_or("");
        match first {
            "STORED" => ("stored", "ok"),
            "NOT_STORED" => ("not_stored", "ok"),
            "DELETED" => ("deleted", "ok"),
            "NOT_FOUND" => ("not_found", "ok"),
            "TOUCHED" => ("touched", "ok"),
            "END" => ("miss", "ok"),
            "ERROR" => ("error", "error"),
            "" if command.ends_with("noreply") => ("-", "no_response"),
            f if f.starts_with("VERSION") => ("version", "ok"),
            f if f.starts_with("VALUE") => {
                let hits = answer.split('|').filter(|l| l.starts_with("VALUE")).count();
                let keys = command.split(' ').count() - 1;
                (if hits == keys { "hit" } else { "partial_hit" }, "ok")
            }
            f if f.chars().all(|c| c.is_ascii_digit()) => ("value", "ok"),
            f => panic!("answer {f}"),
        }
    };
    for ((command, answer), r) in answers.iter().zip(&rows) {
        let word = command.split(' ').next().unwrap();
        assert_eq!(r["command"], if word == "frobnicate" { "unknown" } else { word }, "{command}: {r:?}");
        let (result, status) = expect(answer, command);
        assert_eq!((r["result"].as_str(), r["status"].as_str()), (result, status), "{command} -> {answer}: {r:?}");
        let key = command.split(' ').nth(1).unwrap_or("-");
        if word != "version" && word != "frobnicate" {
            assert_eq!(r["key"], key, "{command}: {r:?}");
        }
        if status == "ok" {
            assert_ne!(r["latency"], "-", "{command}: {r:?}");
        }
        // Value bytes: the data sent, or the values returned.
        if word == "set" || word == "append" {
            assert_eq!(r["value_bytes"], command.split(' ').nth(4).unwrap(), "{command}: {r:?}");
        }
    }
    let by = |c: &str| rows.iter().find(|r| r["command"] == c).unwrap();
    let gets = by("gets");
    assert_eq!((gets["keys"].as_str(), gets["hits"].as_str(), gets["value_bytes"].as_str()), ("3", "2", "16"), "{gets:?}");
    let quiet = rows.iter().find(|r| r["key"] == "quiet" && r["command"] == "set").unwrap();
    assert_eq!(quiet["noreply"], "T");

    // The store holds the same, under the same column names.
    let csv = common::query_csv(&store, "memcached", &["--by", "command,result", "--top", "100"]);
    assert!(csv.lines().next().unwrap().starts_with("command,result,"), "{csv}");
    for line in ["get,hit,", "get,miss,", "delete,deleted,", "delete,not_found,", "incr,value,", "unknown,error,"] {
        assert!(csv.lines().any(|l| l.starts_with(line)), "{line} in\n{csv}");
    }
}

/// The binary client: each request alone (or a run of quiet ones ended by
/// a NoOp), printing `<opcode>\t<status of its response, or quiet>` per
/// request, the way the server answered.
const BINARY_CLIENT: &str = r#"
import socket, struct
s = socket.create_connection(("127.0.0.1", 11211))
f = s.makefile("rb")
opaque = [0]
def msg(op, key=b"", extras=b"", value=b""):
    opaque[0] += 1
    return struct.pack(">BBHBBHII8x", 0x80, op, len(key), len(extras), 0, 0, len(extras) + len(key) + len(value), opaque[0]) + extras + key + value
def read():
    h = f.read(24)
    magic, op, klen, elen, _, status, blen, op_id = struct.unpack(">BBHBBHII8x", h)
    body = f.read(blen)
    return op, status, op_id, body[elen:elen + klen]
def ask(name, m, multi=False):
    s.sendall(m)
    op, status, _, key = read()
    while multi and key:
        op, status, _, key = read()
    print("%s\t%d" % (name, status))
store = struct.pack(">II", 0, 0)
ask("Set", msg(0x01, b"alpha", store, b"hello"))
ask("GetK", msg(0x0c, b"alpha"))
ask("Get", msg(0x00, b"nothing"))
ask("Add", msg(0x02, b"alpha", store, b"xyz"))
ask("Set", msg(0x01, b"n", store, b"10"))
ask("Increment", msg(0x05, b"n", struct.pack(">QQI", 5, 0, 0)))
ask("Delete", msg(0x04, b"nothing"))
# Quiet requests then a NoOp: only what has something to say answers.
s.sendall(msg(0x11, b"quiet", store, b"q") + msg(0x0d, b"missing") + msg(0x0d, b"quiet"))
noop = msg(0x0a)
s.sendall(noop)
answered = {}
while True:
    op, status, op_id, key = read()
    if op == 0x0a:
        break
    answered[op_id] = status
for i, name in ((opaque[0] - 3, "SetQ"), (opaque[0] - 2, "GetKQ"), (opaque[0] - 1, "GetKQ")):
    print("%s\t%s" % (name, answered.get(i, "quiet")))
print("NoOp\t0")
ask("Stat", msg(0x10), multi=True)
ask("Version", msg(0x0b))
ask("Unknown", msg(0x7f))
"#;

#[test]
fn binary_records_match_what_the_server_answered() {
    if !needs("memcached tests (network namespaces)", &["memcached", "python3", "tcpdump"]) {
        return;
    }
    let dir = common::scratch("memcached_live", "bin");
    let ns = LoNs::new("mb");
    let pcap = dir.join("memcached.pcap");
    let tcpdump = ns.tcpdump(&pcap, &["tcp", "port", "11211"]);
    let _server = memcached(&ns, &dir, &["-U", "0", "-m", "16", "-B", "auto"]);
    let o = ns.cmd(&["timeout", "30", "python3", "-c", BINARY_CLIENT]).output().unwrap();
    assert!(o.status.success(), "client: {}", text(&o));
    settle(&pcap);
    tcpdump.interrupt();
    let answers: Vec<(String, String)> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let (c, a) = l.split_once('\t').unwrap();
            (c.to_string(), a.to_string())
        })
        .collect();
    assert_eq!(answers.len(), 14, "{answers:?}");

    let logs = dir.join("logs");
    common::read_pcap(&pcap, &logs, None, &[]);
    let rows = common::read_log(&logs.join("memcached.log"));
    assert_eq!(rows.len(), answers.len(), "{rows:#?}");
    for ((opcode, answer), r) in answers.iter().zip(&rows) {
        assert_eq!((r["protocol"].as_str(), r["opcode"].as_str()), ("binary", opcode.as_str()), "{r:?}");
        // The status the server sent, as wirelog's result and status.
        let (result, status) = match (opcode.as_str(), answer.as_str()) {
            ("SetQ", "quiet") => ("stored", "ok"),
            ("GetKQ", "quiet") => ("miss", "ok"),
            ("GetKQ" | "GetK", "0") => ("hit", "ok"),
            ("Set" | "SetQ", "0") => ("stored", "ok"),
            ("Get", "1") => ("miss", "ok"),
            ("Add", "2") => ("exists", "ok"),
            ("Increment", "0") => ("value", "ok"),
            ("Delete", "1") => ("not_found", "ok"),
            ("NoOp", "0") => ("ok", "ok"),
            ("Stat", "0") => ("stats", "ok"),
            ("Version", "0") => ("version", "ok"),
            ("Unknown", "129") => ("error", "error"),
            other => panic!("answer {other:?}"),
        };
        assert_eq!((r["result"].as_str(), r["status"].as_str()), (result, status), "{opcode} -> {answer}: {r:?}");
        if answer == "quiet" {
            assert_eq!((r["response_bytes"].as_str(), r["noreply"].as_str()), ("-", "T"), "answered by silence: {r:?}");
        }
    }
    let first = &rows[0];
    assert_eq!((first["key"].as_str(), first["value_bytes"].as_str()), ("alpha", "5"), "{first:?}");
    assert_eq!(rows[1]["value_bytes"], "5", "the value GetK returned");
}

/// Memcached over UDP: each request a datagram with the 8-byte frame header
/// (request id, sequence, total, reserved). Three gets go out before any
/// answer is read, one of a 5000-byte value that memcached answers in
/// several datagrams; a noreply set gets none. The client prints each
/// request id, its command and the answer it reassembled.
const UDP_CLIENT: &str = r#"
import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.connect(("127.0.0.1", 11211))
def send(rid, cmd, data=None):
    s.send(struct.pack(">HHHH", rid, 0, 1, 0) + cmd + b"\r\n" + (data + b"\r\n" if data is not None else b""))
def answers(n):
    got = {}
    while len([r for r in got.values() if len(r[1]) == r[0]]) < n:
        d = s.recv(65536)
        rid, seq, total, _ = struct.unpack(">HHHH", d[:8])
        got.setdefault(rid, (total, {}))[1][seq] = d[8:]
    return {rid: b"".join(parts[i] for i in range(total)) for rid, (total, parts) in got.items()}
cmds = {}
def show(rid, answer):
    first = answer.split(b"\r\n")[0].decode()
    print("%d\t%s\t%s\t%d" % (rid, cmds[rid].decode(), first, len(answer)))
cmds[1] = b"set small 0 0 5"; send(1, cmds[1], b"hello"); show(1, answers(1)[1])
big = b"x" * 5000
cmds[2] = b"set big 0 0 5000"; send(2, cmds[2], big); show(2, answers(1)[2])
cmds[3] = b"set quiet 0 0 1 noreply"; send(3, cmds[3], b"q"); print("3\tset quiet 0 0 1 noreply\t\t0")
for rid, key in ((4, b"big"), (5, b"small"), (6, b"nothing")):
    cmds[rid] = b"get " + key; send(rid, cmds[rid])
a = answers(3)
for rid in (4, 5, 6):
    show(rid, a[rid])
cmds[7] = b"delete small"; send(7, cmds[7]); show(7, answers(1)[7])
"#;

#[test]
fn udp_records_match_what_the_server_answered() {
    if !needs("memcached tests (network namespaces)", &["memcached", "python3", "tcpdump"]) {
        return;
    }
    let dir = common::scratch("memcached_live", "udp");
    let ns = LoNs::new("mu");
    let pcap = dir.join("memcached.pcap");
    let tcpdump = ns.tcpdump(&pcap, &["udp", "port", "11211"]);
    // -U 11211: UDP on; TCP stays on 11211 for the readiness probe.
    let _server = memcached(&ns, &dir, &["-U", "11211", "-m", "16"]);
    let o = ns.cmd(&["timeout", "30", "python3", "-c", UDP_CLIENT]).output().unwrap();
    assert!(o.status.success(), "client: {}", text(&o));
    settle(&pcap);
    tcpdump.interrupt();
    let answers: Vec<Vec<String>> = String::from_utf8_lossy(&o.stdout).lines().map(|l| l.split('\t').map(String::from).collect()).collect();
    assert_eq!(answers.len(), 7, "{answers:?}");

    let logs = dir.join("logs");
    common::read_pcap(&pcap, &logs, None, &[]);
    let rows = common::read_log(&logs.join("memcached.log"));
    assert_eq!(rows.len(), answers.len(), "{rows:#?}");
    for a in &answers {
        let (command, first, len) = (&a[1], a[2].as_str(), &a[3]);
        let key = command.split(' ').nth(1).unwrap();
        let word = command.split(' ').next().unwrap();
        let r = rows.iter().find(|r| r["key"] == key && r["command"] == word).unwrap_or_else(|| panic!("{command}: {rows:#?}"));
        let (result, status) = match first {
            "STORED" => ("stored", "ok"),
            "DELETED" => ("deleted", "ok"),
            "END" => ("miss", "ok"),
            "" => ("-", "no_response"),
            f if f.starts_with("VALUE") => ("hit", "ok"),
            f => panic!("answer {f}"),
        };
        assert_eq!((r["result"].as_str(), r["status"].as_str(), r["protocol"].as_str()), (result, status, "text"), "{command} -> {first}: {r:?}");
        if status == "ok" && !first.is_empty() {
            // The answer's bytes (every datagram's, after its 8-byte header).
            assert_eq!(&r["response_bytes"], len, "{command}: {r:?}");
        }
    }
    let big = rows.iter().find(|r| r["key"] == "big" && r["command"] == "get").unwrap();
    assert_eq!(big["value_bytes"], "5000", "{big:?}");
    let conns = common::read_log(&logs.join("conn.log"));
    assert!(conns.iter().all(|c| c["proto"] == "udp" && c["service"] == "memcached"), "{conns:?}");
}
