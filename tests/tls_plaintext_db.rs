//! `capture --tls-plaintext` on databases: PostgreSQL (libpq's
//! `sslmode=require`), MariaDB with TLS and Redis with TLS, servers and
//! clients the system's, linked to its OpenSSL (Debian 12: `postgres`,
//! libpq, `mariadbd`, the `mariadb` client, `redis-server` and `redis-cli`
//! all link libssl.so.3). The same workload runs
//! once in the clear and once over TLS inside one capture; the clear run's
//! records come from the packets, the TLS run's from the TLS library, and
//! the two are equal field by field, times, uids, client ports and
//! processes aside. A client killed in the middle of a result costs no crash:
//! its query is a record that says its answer was cut.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::live::{count_before, is_root, skip, tls_plaintext_stats as tls_stats, LiveCapture};
use common::lo::{needs, LoNs, Proc, Reap};

type Row = HashMap<String, String>;

fn requirements(progs: &[&str]) -> bool {
    needs("tls-plaintext tests (eBPF, namespaces)", progs)
}

/// A self-signed certificate and key in `dir`: `cert.pem`, `key.pem`.
fn certificate(dir: &Path) {
    common::tls::self_signed(dir, "/CN=localhost", 1, &[]);
}

fn capture(ns: &LoNs, logs: &Path) -> LiveCapture {
    capture_of(ns, logs, None)
}

/// A capture with `--tls-plaintext`, following the processes `limit`
/// names (PID|COMM|CGROUP) or every one.
fn capture_of(ns: &LoNs, logs: &Path, limit: Option<&str>) -> LiveCapture {
    let flags: Vec<&str> = ["--tls-plaintext"].into_iter().chain(limit).collect();
    LiveCapture::lo_logs(&ns.name, logs, &flags)
}

/// Fields that differ between two runs of one workload by nature (the
/// server's port too: Redis serves TLS on a port of its own).
fn varies(field: &str) -> bool {
    matches!(field, "ts" | "uid" | "id.orig_p" | "id.resp_p" | "latency" | "first_byte_latency" | "source")
        || ["orig_", "resp_"].iter().any(|p| {
            field.strip_prefix(p).is_some_and(|f| matches!(f, "pid" | "proc" | "exe" | "user" | "container" | "pod"))
        })
}

/// The log's rows of this capture's connections to `ports`, by connection
/// (uid), each connection's in time order.
fn by_conn(logs: &Path, log: &str, ports: &[u16]) -> HashMap<String, Vec<Row>> {
    let conns = common::read_log(&logs.join("conn.log"));
    let mut out: HashMap<String, Vec<Row>> = HashMap::new();
    for r in common::read_log(&logs.join(log)) {
        // The probes see every process of the host: only the connections
        // this namespace's capture saw (their uid is the packet path's).
        if ports.iter().any(|p| r["id.resp_p"] == p.to_string()) && conns.iter().any(|c| c["uid"] == r["uid"]) {
            out.entry(r["uid"].clone()).or_default().push(r);
        }
    }
    for v in out.values_mut() {
        v.sort_by(|a, b| a["ts"].parse::<f64>().unwrap().total_cmp(&b["ts"].parse::<f64>().unwrap()));
    }
    out
}

/// The clear connection's records (from packets) and the TLS one's (from
/// the library), equal field by field; the TLS one's carry the client's
/// (None: the client's calls are not followed, none named) and server's
/// processes, and conn.log names both services. The workload's connections
/// are those with a field starting with `marker`.
#[allow(clippy::too_many_arguments)]
fn assert_same(logs: &Path, log: &str, ports: &[u16], marker: &str, client: Option<&str>, server: &str, service: &str, err: &str) -> usize {
    let conns = by_conn(logs, log, ports);
    let pick = |source: &str| -> &Vec<Row> {
        let v: Vec<&Vec<Row>> = conns
            .values()
            // The workload's connection (others may follow it).
            .filter(|v| v.iter().all(|r| r["source"] == source) && v.iter().any(|r| r.values().any(|f| f.starts_with(marker))))
            .collect();
        assert_eq!(v.len(), 1, "one {source} connection in {log}: {conns:#?}\n{err}");
        v[0]
    };
    let (clear, tls) = (pick("packets"), pick("tls-library"));
    assert_eq!(clear.len(), tls.len(), "clear: {clear:#?}\nTLS: {tls:#?}\n{err}");
    for (a, b) in clear.iter().zip(tls) {
        for (k, v) in a {
            if !varies(k) {
                assert_eq!(v, &b[k], "{log} field {k}: clear {a:?}\nTLS {b:?}");
            }
        }
        assert_eq!(b["orig_proc"], client.unwrap_or("-"), "{b:?}");
        assert_eq!(b["resp_proc"], server, "{b:?}");
    }
    let uid = &tls[0]["uid"];
    let c = common::read_log(&logs.join("conn.log")).into_iter().find(|c| &c["uid"] == uid).expect("the TLS connection in conn.log");
    assert_eq!(c["service"], service, "{c:?}");
    assert!(common::read_log(&logs.join("ssl.log")).iter().any(|s| &s["uid"] == uid), "no ssl.log row for {uid}");
    tls.len()
}

const PG_WORK: &str = "\
create table t (id int primary key, name text);
insert into t values (1, 'one'), (2, 'two'), (3, 'three');
select * from t order by id;
update t set name = 'zwei' where id = 2;
select count(*) from t;
select * from nosuch;
select g, repeat('x', 20) from generate_series(1, 5000) g;
drop table t;
";

struct Postgres {
    ns: LoNs,
    dir: PathBuf,
    _server: Proc,
}

const PG_PORT: u16 = 5432;

fn postgres() -> Postgres {
    let bin = Path::new("/usr/lib/postgresql/15/bin");
    let dir = common::scratch("tls_plaintext_db", "pg");
    let data = dir.join("data");
    // postgres refuses to run as root: its files are the postgres user's.
    let chown = |p: &Path| assert!(Command::new("chown").args(["-R", "postgres:postgres"]).arg(p).status().unwrap().success());
    chown(&dir);
    let out = Command::new("setpriv")
        .args(["--reuid", "postgres", "--regid", "postgres", "--init-groups"])
        .arg(bin.join("initdb"))
        .args(["-U", "postgres", "-A", "trust", "-D"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
    certificate(&data);
    chown(&data);
    std::fs::set_permissions(data.join("key.pem"), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let ns = LoNs::new("tpg");
    let (d, s) = (data.to_str().unwrap(), dir.to_str().unwrap());
    let cert = format!("ssl_cert_file={d}/cert.pem");
    let key = format!("ssl_key_file={d}/key.pem");
    let pg = bin.join("postgres");
    let log = dir.join("postgres.out");
    let mut server = ns.spawn(
        "postgres",
        &["setpriv", "--reuid", "postgres", "--regid", "postgres", "--init-groups", pg.to_str().unwrap(), "-D", d, "-k", s]
            .into_iter()
            .chain(["-h", "127.0.0.1", "-p", "5432", "-c", "ssl=on", "-c", &cert, "-c", &key, "-c", "fsync=off"])
            .collect::<Vec<_>>(),
        &log,
    );
    server.wait_ready(Duration::from_secs(60), &log, || {
        ns.cmd(&["/usr/lib/postgresql/15/bin/pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432"]).status().is_ok_and(|s| s.success())
    });
    Postgres { ns, dir, _server: server }
}

fn psql(pg: &Postgres, sslmode: &str, script: &str) -> String {
    let f = pg.dir.join(format!("work-{sslmode}.sql"));
    std::fs::write(&f, script).unwrap();
    let conn = format!("host=127.0.0.1 port={PG_PORT} user=postgres dbname=postgres sslmode={sslmode}");
    let out = pg.ns.cmd(&["/usr/lib/postgresql/15/bin/psql", &conn, "-X", "-q", "-f", f.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "psql {sslmode}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// psql's workload in the clear and with `sslmode=require`: pgsql.log has
/// the same records for both, the TLS run's from libpq's and the
/// backend's SSL_read/SSL_write (a 5,000-row result in many TLS records).
#[test]
fn postgresql_with_sslmode_require_logs_what_it_logs_in_the_clear() {
    if !requirements(&["openssl", "setpriv"]) || !Path::new("/usr/lib/postgresql/15/bin/postgres").exists() {
        if is_root() {
            skip("PostgreSQL 15 (postgresql-15) is not installed");
        }
        return;
    }
    let t0 = Instant::now();
    let pg = postgres();
    let _reap = Reap(&pg.ns);
    let logs = pg.dir.join("logs");
    let cap = capture(&pg.ns, &logs);
    let clear = psql(&pg, "disable", PG_WORK);
    let tls = psql(&pg, "require", PG_WORK);
    assert_eq!(clear, tls);
    std::thread::sleep(Duration::from_millis(700));
    let err = cap.stop();
    let n = assert_same(&logs, "pgsql.log", &[PG_PORT], "create table t ", Some("psql"), "postgres", "postgresql,ssl", &err);
    // startup, 8 statements, terminate.
    assert_eq!(n, 10, "{err}");
    let rows = by_conn(&logs, "pgsql.log", &[PG_PORT]);
    let big = rows.values().flatten().find(|r| r["source"] == "tls-library" && r["query"].contains("generate_series")).unwrap();
    assert_eq!(big["rows"], "5000", "{big:?}");
    let stats = tls_stats(&err);
    assert_eq!(count_before(stats, " ring records lost"), 0, "{stats}");
    eprintln!("{stats}\npostgresql: {n} records equal in the clear and over TLS; {:.1} s", t0.elapsed().as_secs_f64());
}

const MY_WORK: &str = "\
create table t (id int primary key, name text);
insert into t values (1, 'one'), (2, 'two'), (3, 'three');
select * from t order by id;
update t set name = 'zwei' where id = 2;
select count(*) from t;
select * from nosuch;
select seq, repeat('x', 20) from seq_1_to_5000;
drop table t;
";

struct Mariadb {
    ns: LoNs,
    dir: PathBuf,
    server: Proc,
}

const MY_PORT: u16 = 3306;

fn mariadb() -> Mariadb {
    mariadb_in("mariadb")
}

/// The server with its files in scratch directory `tag` (tests of this
/// binary run at once, each with its own).
fn mariadb_in(tag: &str) -> Mariadb {
    let dir = common::scratch("tls_plaintext_db", tag);
    let data = dir.join("data");
    // A temporary directory of its own: mariadbd deletes the temporary
    // tables it finds in its tmpdir when it starts, another server's too
    // (mariadb-install-db failed with "Error on delete of
    // '/tmp/#sql-temptable-...'" when two started at once).
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = Command::new("mariadb-install-db")
        .args(["--no-defaults", "--user=root", "--auth-root-authentication-method=socket"])
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--tmpdir={}", tmp.display()))
        .output()
        .expect("run mariadb-install-db");
    assert!(out.status.success(), "mariadb-install-db: {}", String::from_utf8_lossy(&out.stderr));
    certificate(&dir);
    let ns = LoNs::new("tmy");
    let d = dir.display();
    let args = [
        format!("--datadir={}", data.display()),
        format!("--socket={d}/mysql.sock"),
        format!("--pid-file={d}/mysql.pid"),
        format!("--log-error={d}/mysql.err"),
        format!("--ssl-cert={d}/cert.pem"),
        format!("--ssl-key={d}/key.pem"),
        format!("--tmpdir={}", tmp.display()),
    ];
    let mut argv = vec!["mariadbd", "--no-defaults", "--user=root", "--port=3306", "--bind-address=127.0.0.1", "--skip-name-resolve"];
    argv.extend(["--skip-log-bin", "--innodb-buffer-pool-size=32M", "--innodb-flush-log-at-trx-commit=2"]);
    argv.extend(args.iter().map(String::as_str));
    let mut server = ns.spawn("mariadbd", &argv, &dir.join("mariadbd.out"));
    let socket = format!("--socket={d}/mysql.sock");
    server.wait_ready(Duration::from_secs(60), &dir.join("mysql.err"), || {
        ns.cmd(&["mariadb-admin", "--no-defaults", "-uroot", &socket, "ping"]).output().is_ok_and(|o| o.status.success())
    });
    ns.run(&["mariadb", "--no-defaults", "-uroot", &socket, "-e", "CREATE DATABASE w; CREATE USER 'w'@'%' IDENTIFIED BY 'w'; GRANT ALL ON w.* TO 'w'@'%';"]);
    Mariadb { ns, dir, server }
}

/// The `mariadb` client over TCP, `tls` or not; its output. `-f`: the
/// statement that fails does not end the script.
fn mariadb_client(db: &Mariadb, tls: bool, script: &str) -> String {
    let f = db.dir.join(format!("work-{tls}.sql"));
    std::fs::write(&f, script).unwrap();
    let ssl: &[&str] = if tls { &["--ssl", "--ssl-verify-server-cert=0"] } else { &["--skip-ssl"] };
    let mut args = vec!["sh", "-c", "exec mariadb --no-defaults -h127.0.0.1 -P3306 -uw -pw -f \"$@\" w < \"$0\"", f.to_str().unwrap()];
    args.extend(ssl);
    let out = db.ns.cmd(&args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The mariadb client's workload in the clear and over TLS: mysql.log has
/// the same records for both, the login too (user and database, from the
/// handshake response that opens the TLS plaintext).
#[test]
fn mariadb_with_tls_logs_what_it_logs_in_the_clear() {
    if !requirements(&["openssl", "mariadbd", "mariadb-install-db", "mariadb", "mariadb-admin"]) {
        return;
    }
    let t0 = Instant::now();
    let db = mariadb();
    let _reap = Reap(&db.ns);
    let logs = db.dir.join("logs");
    let cap = capture(&db.ns, &logs);
    let clear = mariadb_client(&db, false, MY_WORK);
    let tls = mariadb_client(&db, true, MY_WORK);
    assert_eq!(clear, tls);
    assert!(clear.contains("5000"), "{clear}");
    // A client killed in the middle of a long result, then one more.
    let killed = killed_client(&db);
    let after = mariadb_client(&db, true, "select 'after';\n");
    assert!(after.contains("after"), "{after}");
    std::thread::sleep(Duration::from_millis(700));
    let err = cap.stop();
    let n = assert_same(&logs, "mysql.log", &[MY_PORT], "create table t ", Some("mariadb"), "mariadbd", "mysql,ssl", &err);
    // login, 8 statements, quit.
    assert_eq!(n, 10, "{err}");
    let rows = by_conn(&logs, "mysql.log", &[MY_PORT]);
    let tls_rows: Vec<&Row> = rows.values().flatten().filter(|r| r["source"] == "tls-library").collect();
    let login = tls_rows.iter().find(|r| r["cmd"] == "login").expect("the login over TLS");
    assert_eq!((login["user"].as_str(), login["database"].as_str()), ("w", "w"), "{login:?}");
    assert!(tls_rows.iter().all(|r| r["resp_pid"] == db.server.pid().to_string()));
    let big = tls_rows.iter().find(|r| r["arg"].contains("seq_1_to_5000")).unwrap();
    assert_eq!(big["rows"], "5000", "{big:?}");
    // The killed client's query: a record that says its answer was cut,
    // with the bytes the client had read; the capture went on (the query
    // after it is there, and the capture ended cleanly: `stop`).
    let cut = tls_rows.iter().find(|r| r["arg"].contains(KILLED)).unwrap_or_else(|| panic!("the killed client's query: {tls_rows:#?}\n{err}"));
    assert_eq!(cut["orig_pid"], killed.to_string(), "{cut:?}");
    assert_eq!(cut["status"], "partial", "{cut:?}");
    assert!(cut["response_bytes"].parse::<u64>().is_ok_and(|b| b > 0), "{cut:?}");
    assert!(tls_rows.iter().any(|r| r["arg"] == "select 'after'"), "{tls_rows:#?}");
    let stats = tls_stats(&err);
    assert_eq!(count_before(stats, " ring records lost"), 0, "{stats}");
    eprintln!("{stats}\ncut: {cut:?}\nmariadb: {n} records equal in the clear and over TLS; {:.1} s", t0.elapsed().as_secs_f64());
}

/// `--tls-plaintext mariadbd`, the probe on the database server: only the
/// server's calls are followed, and mariadbd reads each packet's 4-byte
/// header apart from its body (two SSL_read calls), the TLS login's too.
/// mysql.log has the records the clear run's packets give, login (user
/// and database) included; the server's view has the server's latency
/// (`varies`), and the client's process is not named (not followed).
#[test]
fn mariadb_with_tls_seen_from_the_server_alone_logs_what_it_logs_in_the_clear() {
    if !requirements(&["openssl", "mariadbd", "mariadb-install-db", "mariadb", "mariadb-admin"]) {
        return;
    }
    let t0 = Instant::now();
    let db = mariadb_in("mariadb-server");
    let _reap = Reap(&db.ns);
    let logs = db.dir.join("logs");
    let cap = capture_of(&db.ns, &logs, Some("mariadbd"));
    let clear = mariadb_client(&db, false, MY_WORK);
    let tls = mariadb_client(&db, true, MY_WORK);
    assert_eq!(clear, tls);
    assert!(clear.contains("5000"), "{clear}");
    std::thread::sleep(Duration::from_millis(700));
    let err = cap.stop();
    let n = assert_same(&logs, "mysql.log", &[MY_PORT], "create table t ", None, "mariadbd", "mysql,ssl", &err);
    // login, 8 statements, quit.
    assert_eq!(n, 10, "{err}");
    let rows = by_conn(&logs, "mysql.log", &[MY_PORT]);
    let tls_rows: Vec<&Row> = rows.values().flatten().filter(|r| r["source"] == "tls-library").collect();
    let login = tls_rows.iter().find(|r| r["cmd"] == "login").expect("the login over TLS");
    assert_eq!((login["user"].as_str(), login["database"].as_str()), ("w", "w"), "{login:?}");
    assert!(tls_rows.iter().all(|r| r["resp_pid"] == db.server.pid().to_string()), "{tls_rows:#?}");
    let stats = tls_stats(&err);
    assert_eq!(count_before(stats, " ring records lost"), 0, "{stats}");
    eprintln!("{stats}\nmariadb, server only: {n} records equal in the clear and over TLS; {:.1} s", t0.elapsed().as_secs_f64());
}

/// The table of the query whose client is killed (the client strips
/// comments: no marker there).
const KILLED: &str = "seq_1_to_10000000";

/// A TLS client asking for a result far longer than it will read: killed
/// (SIGKILL) once it has read some of it. Its pid.
fn killed_client(db: &Mariadb) -> u32 {
    let q = format!("select seq, repeat('x', 1000) from {KILLED}");
    let mut c = db
        .ns
        .cmd(&["mariadb", "--no-defaults", "-h127.0.0.1", "-P3306", "-uw", "-pw", "--ssl", "--ssl-verify-server-cert=0", "--quick", "-e", &q, "w"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = c.stdout.take().unwrap();
    // Some of the result has arrived.
    let mut buf = vec![0u8; 1 << 20];
    std::io::Read::read_exact(&mut out, &mut buf).unwrap();
    let pid = c.id();
    c.kill().unwrap();
    c.wait().unwrap();
    pid
}

/// redis-cli's workload: strings, a counter, a list, a hash, a missing key,
/// an error (INCR on text) and a 12,000-byte value (under the 16 KiB an
/// event carries: a longer SET is cut and its record differs, see README
/// "Inside TLS").
fn redis_work() -> String {
    let big = "x".repeat(12_000);
    format!(
        "SET wl:marker start\nSET k1 hello\nGET k1\nINCR counter\nINCR k1\nLPUSH l a b c\nLRANGE l 0 -1\n\
         HSET h f v\nHGETALL h\nGET nosuch\nSET big {big}\nGET big\nDEL k1 l h counter big wl:marker\n"
    )
}

const REDIS_PORT: u16 = 6379;
const REDIS_TLS_PORT: u16 = 6380;

/// redis-cli's workload in the clear (port 6379) and over TLS (`--tls`,
/// port 6380) against one redis-server: redis.log has the same records
/// for both, the TLS run's from redis-cli's and the server's
/// SSL_read/SSL_write.
#[test]
fn redis_with_tls_logs_what_it_logs_in_the_clear() {
    if !requirements(&["openssl", "redis-server", "redis-cli"]) {
        return;
    }
    let t0 = Instant::now();
    let dir = common::scratch("tls_plaintext_db", "redis");
    certificate(&dir);
    let ns = LoNs::new("trd");
    let _reap = Reap(&ns);
    let d = dir.display().to_string();
    let (cert, key) = (format!("{d}/cert.pem"), format!("{d}/key.pem"));
    let mut server = ns.spawn(
        "redis-server",
        &["redis-server", "--bind", "127.0.0.1", "--port", "6379", "--tls-port", "6380", "--tls-cert-file", &cert, "--tls-key-file", &key]
            .into_iter()
            .chain(["--tls-ca-cert-file", &cert, "--tls-auth-clients", "no", "--save", "", "--appendonly", "no", "--dir", &d])
            .collect::<Vec<_>>(),
        &dir.join("redis.out"),
    );
    server.wait_ready(Duration::from_secs(20), &dir.join("redis.out"), || {
        ns.cmd(&["redis-cli", "-h", "127.0.0.1", "-p", "6379", "ping"]).output().is_ok_and(|o| o.stdout.starts_with(b"PONG"))
    });
    let logs = dir.join("logs");
    let cap = capture(&ns, &logs);
    let work = dir.join("work.txt");
    std::fs::write(&work, redis_work()).unwrap();
    let cli = |tls: &[&str], port: u16| -> String {
        let script = "exec redis-cli -h 127.0.0.1 \"$@\" < \"$0\"";
        let mut args = vec!["sh", "-c", script, work.to_str().unwrap()];
        let port = port.to_string();
        args.extend(tls);
        args.extend(["-p", port.as_str()]);
        let out = ns.cmd(&args).output().unwrap();
        assert!(out.status.success(), "redis-cli {tls:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let clear = cli(&[], REDIS_PORT);
    let tls = cli(&["--tls", "--insecure"], REDIS_TLS_PORT);
    assert_eq!(clear, tls);
    assert!(clear.contains("ERR value is not an integer"), "{clear}");
    std::thread::sleep(Duration::from_millis(700));
    let err = cap.stop();
    let n = assert_same(&logs, "redis.log", &[REDIS_PORT, REDIS_TLS_PORT], "wl:marker", Some("redis-cli"), "redis-server", "ssl,redis", &err);
    // redis-cli's COMMAND DOCS at connect (its reply, a few hundred KB,
    // longer than an event carries), then the workload's 13 commands.
    assert_eq!(n, 14, "{err}");
    let rows = by_conn(&logs, "redis.log", &[REDIS_TLS_PORT]);
    let tls_rows: Vec<&Row> = rows.values().flatten().filter(|r| r["source"] == "tls-library").collect();
    assert!(tls_rows.iter().all(|r| r["resp_pid"] == server.pid().to_string()), "{tls_rows:#?}");
    let big = tls_rows.iter().find(|r| r["cmd"] == "GET" && r["key"] == "big").expect("GET big over TLS");
    assert_eq!(big["reply_len"], "12000", "{big:?}");
    let stats = tls_stats(&err);
    assert_eq!(count_before(stats, " ring records lost"), 0, "{stats}");
    eprintln!("{stats}\nredis: {n} records equal in the clear and over TLS; {:.1} s", t0.elapsed().as_secs_f64());
}

/// `capture --socket-data` on plaintext MariaDB: the mariadb client's
/// workload seen by two captures at once, the packet path's alone and one
/// with --socket-data; mysql.log is the same in both, field by field
/// (times, uids and latencies aside), the second's from the socket system
/// calls (source=socket, the client's and mariadbd's processes), with no
/// packet-path copy of any statement.
#[test]
fn mariadb_from_the_socket_logs_what_the_packets_log() {
    if !requirements(&["mariadbd", "mariadb-install-db", "mariadb", "mariadb-admin", "openssl"]) {
        return;
    }
    let t0 = Instant::now();
    let db = mariadb_in("mariadb-socket");
    let _reap = Reap(&db.ns);
    let pair = common::socket_pair::Pair::start(&db.ns, &db.dir);
    let out = mariadb_client(&db, false, MY_WORK);
    assert!(out.contains("5000"), "{out}");
    std::thread::sleep(Duration::from_millis(700));
    let logs = (pair.packet_logs.clone(), pair.socket_logs.clone());
    let err = pair.stop();
    let rows = common::socket_pair::assert_same((&logs.0, &logs.1), "mysql.log", MY_PORT, &["mariadb"], "mariadbd", &err);
    // login, 8 statements, quit.
    assert_eq!(rows.len(), 10, "{rows:#?}\n{err}");
    let big = rows.iter().find(|r| r["arg"].contains("seq_1_to_5000")).unwrap();
    assert_eq!(big["rows"], "5000", "{big:?}");
    assert!(rows.iter().all(|r| r["resp_pid"] == db.server.pid().to_string()));
    let s = common::socket_pair::stats(&err);
    assert_eq!(count_before(s, " packet-path transactions left for the socket's"), 10, "{s}");
    assert_eq!(count_before(s, " ring records lost"), 0, "{s}");
    eprintln!("{s}\nmariadb: {} records equal from packets and from the socket; {:.1} s", rows.len(), t0.elapsed().as_secs_f64());
}
