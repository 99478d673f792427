//! `wirelog capture --processes`: real servers (nginx, dnsmasq, a Python
//! HTTP server) and clients (curl, Python) started by the test in a network
//! namespace of its own, captured on its loopback (both ends local). Each
//! connection's ends must name the pid and program the test started, and
//! agree with what `ss -tnpH` printed while the connections were open.
//!
//! Needs root, `ip netns`, nginx, dnsmasq, curl, ss and python3.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::live::{skip, LiveCapture, BIN};
use common::lo::{needs, LoNs};
use common::read_log;

type Row = HashMap<String, String>;

fn requirements(progs: &[&str]) -> bool {
    needs("process attribution tests (network namespaces, /proc of every process)", progs)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wirelog-procs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Children of `pid` (nginx's workers).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        if after.split(' ').nth(1).and_then(|s| s.parse::<u32>().ok()) == Some(pid) {
            out.push(p);
        }
    }
    out
}

/// A threaded HTTP server answering each request after 300 ms (so its
/// clients' sockets live long enough to be asked about) and a client that
/// keeps its connections and DNS socket open a while.
const PY_SERVER: &str = r#"
import socket, sys, threading, time
def serve(c):
    data = b""
    while b"\r\n\r\n" not in data:
        d = c.recv(4096)
        if not d:
            break
        data += d
    time.sleep(0.3)
    c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
    c.close()
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", int(sys.argv[1])))
l.listen(64)
while True:
    c, _ = l.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

const PY_CLIENT: &str = r#"
import socket, struct, sys, time
web, nginx, dns = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for port in (web, nginx, web):
    s = socket.create_connection(("127.0.0.1", port))
    time.sleep(0.3)
    s.sendall(b"GET / HTTP/1.0\r\nHost: t\r\n\r\n")
    while s.recv(4096):
        pass
    s.close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.connect(("127.0.0.1", dns))
q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0) + b"\x04test\x07example\x00" + struct.pack(">HH", 1, 1)
u.send(q)
u.settimeout(5)
u.recv(512)
time.sleep(0.3)
u.close()
"#;

fn nginx_conf(dir: &Path, port: u16) -> String {
    let d = dir.display();
    format!(
        "worker_processes 2;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/nginx.err;\nevents {{ worker_connections 1024; }}\n\
         http {{\n access_log off;\n client_body_temp_path {d}/body;\n proxy_temp_path {d}/proxy;\n fastcgi_temp_path {d}/fcgi;\n \
         uwsgi_temp_path {d}/uwsgi;\n scgi_temp_path {d}/scgi;\n server {{\n  listen 127.0.0.1:{port};\n  \
         location / {{ return 200 \"ok\\n\"; }}\n }}\n}}\n"
    )
}

/// Sockets `ss -tnpH` / `ss -unpH` lists, sampled while the run goes on:
/// (local, peer) -> (program, pids).
type SsView = HashMap<(String, String), (String, BTreeSet<u32>)>;

fn sample_ss(ns: &str, view: &Mutex<SsView>) {
    for flag in ["-tnpH", "-unpH"] {
        let Ok(out) = Command::new("ip").args(["netns", "exec", ns, "ss", flag]).output() else {
            return;
        };
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 6 {
                continue;
            }
            let users = f[5..].join(" ");
            let Some(start) = users.find("((\"") else { continue };
            let name: String = users[start + 3..].chars().take_while(|&c| c != '"').collect();
            let pids: BTreeSet<u32> = users
                .split("pid=")
                .skip(1)
                .filter_map(|p| p.split(',').next()?.parse().ok())
                .collect();
            let mut v = view.lock().unwrap();
            let e = v.entry((f[3].to_string(), f[4].to_string())).or_insert((name, BTreeSet::new()));
            e.1.extend(pids);
        }
    }
}

fn capture_args(dir: &Path) -> Vec<std::ffi::OsString> {
    let logs = dir.join("logs");
    let store = dir.join("store");
    ["--processes", "--stats-interval", "0", "--logs"]
        .iter()
        .map(|s| OsStr::new(s).to_os_string())
        .chain([logs.into_os_string(), "--store".into(), store.into_os_string()])
        .collect()
}

fn end(r: &Row, side: &str) -> (Option<u32>, String) {
    (r[&format!("{side}_pid")].parse().ok(), r[&format!("{side}_proc")].clone())
}

/// nginx, dnsmasq and a Python server; curl and a Python client: every
/// connection's ends name the process the test started, and what `ss -p`
/// saw during the run.
#[test]
fn servers_and_clients_are_named_by_pid_and_program() {
    if !requirements(&["nginx", "dnsmasq", "curl", "ss", "python3"]) {
        return;
    }
    let dir = tmp("named");
    let ns = LoNs::new("pn");
    let (web, ngx, dns) = (8081u16, 8080u16, 5353u16);
    std::fs::write(dir.join("server.py"), PY_SERVER).unwrap();
    std::fs::write(dir.join("client.py"), PY_CLIENT).unwrap();
    std::fs::write(dir.join("nginx.conf"), nginx_conf(&dir, ngx)).unwrap();
    let (nginx_log, py_log, dnsmasq_log) = (dir.join("nginx.out"), dir.join("py.out"), dir.join("dnsmasq.out"));
    let mut nginx = ns.spawn("nginx", &["nginx", "-c", dir.join("nginx.conf").to_str().unwrap()], &nginx_log);
    let mut py = ns.spawn("python server", &["python3", dir.join("server.py").to_str().unwrap(), &web.to_string()], &py_log);
    let mut dnsmasq = ns.spawn(
        "dnsmasq",
        &[
            "dnsmasq",
            "--keep-in-foreground",
            "--no-hosts",
            "--no-resolv",
            "--conf-file=/dev/null",
            "--listen-address=127.0.0.1",
            "--bind-interfaces",
            &format!("--port={dns}"),
            "--address=/test.example/10.1.2.3",
            "--user=root",
            &format!("--pid-file={}", dir.join("dnsmasq.pid").display()),
        ],
        &dnsmasq_log,
    );
    ns.wait_listening(&mut nginx, &nginx_log, ngx, false);
    ns.wait_listening(&mut py, &py_log, web, false);
    ns.wait_listening(&mut dnsmasq, &dnsmasq_log, dns, true);
    let mut nginx_pids: BTreeSet<u32> = children(nginx.pid()).into_iter().collect();
    nginx_pids.insert(nginx.pid());

    let cap = LiveCapture::start(&ns.name, "lo", &capture_args(&dir).iter().map(|s| s.as_os_str()).collect::<Vec<_>>());
    let view = Arc::new(Mutex::new(SsView::new()));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (view, done, n) = (view.clone(), done.clone(), ns.name.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                sample_ss(&n, &view);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    // Clients, each with a pid the test knows.
    let mut curls: Vec<u32> = Vec::new();
    for _ in 0..3 {
        let mut c = ns
            .cmd(&["curl", "-s", "-o", "/dev/null", &format!("http://127.0.0.1:{web}/")])
            .spawn()
            .unwrap();
        curls.push(c.id());
        assert!(c.wait().unwrap().success());
    }
    let mut client = ns
        .cmd(&["python3", dir.join("client.py").to_str().unwrap(), &web.to_string(), &ngx.to_string(), &dns.to_string()])
        .spawn()
        .unwrap();
    let client_pid = client.id();
    assert!(client.wait().unwrap().success(), "the python client failed");
    std::thread::sleep(Duration::from_millis(300));
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let err = cap.stop();
    let py_pid = py.pid();
    drop((nginx, py));
    let dnsmasq_pid = dnsmasq.pid();
    drop(dnsmasq);

    let rows: Vec<Row> = read_log(&dir.join("logs/conn.log"));
    let mut checked = 0;
    for r in &rows {
        let (rport, proto) = (r["id.resp_p"].parse::<u16>().unwrap(), r["proto"].as_str());
        let (resp_pid, resp_proc) = end(r, "resp");
        let (orig_pid, orig_proc) = end(r, "orig");
        let who = format!("{} {}:{} -> {rport}", proto, r["id.orig_h"], r["id.orig_p"]);
        match (proto, rport) {
            ("tcp", p) if p == web => {
                assert_eq!((resp_pid, resp_proc.as_str()), (Some(py_pid), "python3"), "{who}: {err}");
            }
            ("tcp", p) if p == ngx => {
                assert_eq!(resp_proc, "nginx", "{who}");
                assert!(nginx_pids.contains(&resp_pid.unwrap()), "{who}: {resp_pid:?} not in {nginx_pids:?}");
            }
            ("udp", p) if p == dns => {
                assert_eq!((resp_pid, resp_proc.as_str()), (Some(dnsmasq_pid), "dnsmasq"), "{who}");
            }
            _ => continue,
        }
        // Every client here is the test's own: curl (three runs) or the
        // Python client.
        let client_ok = match orig_proc.as_str() {
            "curl" => curls.contains(&orig_pid.unwrap()),
            "python3" => orig_pid == Some(client_pid),
            _ => false,
        };
        assert!(client_ok, "{who}: client end named {orig_proc} {orig_pid:?}, curls {curls:?}, client {client_pid}");
        // And what ss saw, for both ends of the connection when it saw them.
        let v = view.lock().unwrap();
        for (local, peer, pid, name) in [
            (format!("{}:{}", r["id.orig_h"], r["id.orig_p"]), format!("{}:{}", r["id.resp_h"], rport), orig_pid, &orig_proc),
            (format!("{}:{}", r["id.resp_h"], rport), format!("{}:{}", r["id.orig_h"], r["id.orig_p"]), resp_pid, &resp_proc),
        ] {
            if let Some((ss_name, ss_pids)) = v.get(&(local.clone(), peer.clone())) {
                assert_eq!(ss_name, name, "{who}: ss says {ss_name} {ss_pids:?} for {local}");
                assert!(ss_pids.contains(&pid.unwrap()), "{who}: ss says {ss_pids:?} for {local}, we {pid:?}");
                checked += 1;
            }
        }
    }
    let conns = |port: u16| rows.iter().filter(|r| r["id.resp_p"] == port.to_string()).count();
    assert_eq!(conns(web), 5, "3 curl + 2 python connections to the python server");
    assert_eq!(conns(ngx), 1);
    assert_eq!(conns(dns), 1);
    assert!(checked >= 6, "only {checked} connection ends were seen by ss too");
    println!("processes: {} connections, every end named right; {checked} ends confirmed by ss -p", rows.len());

    // The store holds the same owners, on connections and on every
    // transaction kind, and queries filter and group by them.
    let store = dir.join("store");
    let by_owner = |kind: &str, filter: &str| -> HashMap<String, u64> {
        let out = Command::new(BIN)
            .args(["query", kind, "--store", store.to_str().unwrap(), "--where", filter])
            .args(["--by", "orig_proc", "--format", "csv", "--top", "0"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        text.lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                Some((f[0].to_string(), f[1].parse().ok()?))
            })
            .collect()
    };
    let counts = |pairs: &[(&str, u64)]| pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect::<HashMap<_, _>>();
    assert_eq!(by_owner("conns", "resp_proc = \"python3\""), counts(&[("curl", 3), ("python3", 2)]));
    // nginx answered the Python client's one request; the Python server
    // answered curl's three and the Python client's two.
    assert_eq!(by_owner("http", "resp_proc = \"nginx\""), counts(&[("python3", 1)]));
    assert_eq!(by_owner("http", "resp_proc = \"python3\""), counts(&[("curl", 3), ("python3", 2)]));
    assert_eq!(by_owner("dns", "resp_proc = \"dnsmasq\" and resp_pid > 0"), counts(&[("python3", 1)]));

    // The UI's service map names the programs behind its nodes.
    let srv = common::serve::start(&["serve", "--store", store.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    let (status, body) = common::serve::get(srv.addr, "/api/map");
    assert_eq!(status, 200, "{body}");
    let map: serde_json::Value = serde_json::from_str(&body).unwrap();
    let nodes = map["nodes"].as_array().unwrap();
    let procs = |pick: &dyn Fn(&serde_json::Value) -> bool| -> BTreeSet<String> {
        nodes
            .iter()
            .filter(|n| pick(n))
            .flat_map(|n| n["procs"].as_array().unwrap().iter().map(|p| p["proc"].as_str().unwrap().to_string()))
            .collect()
    };
    let service = |port: u16| move |n: &serde_json::Value| n["kind"] == "service" && n["id"].as_str().unwrap().ends_with(&format!(":{port}"));
    let set = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(procs(&service(web)), set(&["python3"]), "{body}");
    assert_eq!(procs(&service(ngx)), set(&["nginx"]), "{body}");
    assert_eq!(procs(&service(dns)), set(&["dnsmasq"]), "{body}");
    assert_eq!(procs(&|n| n["kind"] == "host"), set(&["curl", "python3"]), "{body}");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// 2,000 curl runs against nginx, each connection well under a millisecond:
/// the share of ends attributed is printed. nginx's end is always found
/// (through its listening socket when the connection is gone); curl's
/// socket is gone before the resolver asks, so its end is named by the eBPF
/// connect hook, which noted curl's pid at connect() (the suite runs as
/// root, so the hook loads; without it, the client share is about 1%).
#[test]
fn short_curl_connections_attribution_share() {
    if !requirements(&["nginx", "curl", "ss"]) {
        return;
    }
    let dir = tmp("short");
    let ns = LoNs::new("ps");
    let port = 8080u16;
    std::fs::write(dir.join("nginx.conf"), nginx_conf(&dir, port)).unwrap();
    let nginx_log = dir.join("nginx.out");
    let mut nginx = ns.spawn("nginx", &["nginx", "-c", dir.join("nginx.conf").to_str().unwrap()], &nginx_log);
    ns.wait_listening(&mut nginx, &nginx_log, port, false);
    let cap = LiveCapture::start(&ns.name, "lo", &capture_args(&dir).iter().map(|s| s.as_os_str()).collect::<Vec<_>>());
    let n = 2000;
    let t = Instant::now();
    let status = ns
        .cmd(&["sh", "-c", &format!("i=0; while [ $i -lt {n} ]; do curl -s -o /dev/null http://127.0.0.1:{port}/ || exit 1; i=$((i+1)); done")])
        .status()
        .unwrap();
    assert!(status.success());
    let secs = t.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(300));
    let err = cap.stop();
    drop(nginx);
    let rows: Vec<Row> = read_log(&dir.join("logs/conn.log"))
        .into_iter()
        .filter(|r| r["id.resp_p"] == port.to_string())
        .collect();
    assert_eq!(rows.len(), n, "conn.log has every curl connection");
    let resp = rows.iter().filter(|r| r["resp_proc"] == "nginx").count();
    let orig = rows.iter().filter(|r| r["orig_proc"] == "curl").count();
    let wrong = rows.iter().filter(|r| !matches!(r["orig_proc"].as_str(), "curl" | "-")).count();
    let pct = |k: usize| 100.0 * k as f64 / n as f64;
    println!(
        "processes: {n} curl connections in {secs:.1} s: server end (nginx) attributed {:.1}%, client end (curl) {:.1}%, \
         both {:.1}%\n{}",
        pct(resp),
        pct(orig),
        pct(rows.iter().filter(|r| r["resp_proc"] == "nginx" && r["orig_proc"] == "curl").count()),
        err.lines().rev().find(|l| l.starts_with("wirelog: processes:")).unwrap_or("")
    );
    // Never a wrong name: an end is curl's or unknown.
    assert_eq!(wrong, 0, "client ends named after another program");
    assert!(pct(resp) >= 99.0, "nginx's end attributed for {:.1}% only", pct(resp));
    assert!(pct(orig) >= 99.0, "curl's end attributed for {:.1}% only: {err}", pct(orig));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A process in a cgroup the test creates is reported with that cgroup.
#[test]
fn a_cgroup_made_by_the_test_names_the_process() {
    if !requirements(&["python3"]) {
        return;
    }
    // cgroup v2, mounted alone or beside v1 (hybrid).
    let root = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.join("cgroup.procs").exists() && p.join("cgroup.subtree_control").exists());
    let Some(root) = root else {
        skip("no cgroup v2 hierarchy to create a cgroup in");
        return;
    };
    let name = format!("wltest-{}", std::process::id());
    let cg = root.join(&name);
    let _ = std::fs::remove_dir(&cg);
    std::fs::create_dir(&cg).unwrap();
    struct Rmdir(PathBuf);
    impl Drop for Rmdir {
        fn drop(&mut self) {
            // Its processes are gone by now (killed before this runs).
            for _ in 0..50 {
                if std::fs::remove_dir(&self.0).is_ok() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    let dir = tmp("cgroup");
    let ns = LoNs::new("pc");
    let port = 8082u16;
    std::fs::write(dir.join("server.py"), PY_SERVER).unwrap();
    let py_log = dir.join("py.out");
    let mut server = ns.spawn("python server", &["python3", dir.join("server.py").to_str().unwrap(), &port.to_string()], &py_log);
    let _rm = Rmdir(cg.clone());
    std::fs::write(cg.join("cgroup.procs"), server.pid().to_string()).unwrap();
    ns.wait_listening(&mut server, &py_log, port, false);
    let cap = LiveCapture::start(&ns.name, "lo", &capture_args(&dir).iter().map(|s| s.as_os_str()).collect::<Vec<_>>());
    let out = ns
        .cmd(&["python3", "-c", &format!("import socket,time\ns=socket.create_connection(('127.0.0.1',{port}))\ntime.sleep(0.3)\ns.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\nwhile s.recv(99): pass")])
        .status()
        .unwrap();
    assert!(out.success());
    std::thread::sleep(Duration::from_millis(300));
    cap.stop();
    let server_pid = server.pid();
    drop(server);
    let rows: Vec<Row> = read_log(&dir.join("logs/conn.log"));
    let r = rows.iter().find(|r| r["id.resp_p"] == port.to_string()).expect("the connection");
    assert_eq!(r["resp_pid"], server_pid.to_string());
    assert_eq!(r["resp_container"], format!("/{name}"), "the server's cgroup");
    assert_ne!(r["orig_container"], format!("/{name}"), "the client is not in it");
    println!("processes: pid {server_pid} in cgroup /{name} reported as {}", r["resp_container"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A kernel that refuses the eBPF connect hook (here: capture started
/// without CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN in its bounding set) gets
/// one line saying why, and the sock_diag path still names both ends of a
/// connection that lives long enough to be asked about.
#[test]
fn a_refused_ebpf_hook_falls_back_with_one_message() {
    if !requirements(&["python3", "setpriv"]) {
        return;
    }
    let dir = tmp("refused");
    let ns = LoNs::new("pr");
    let port = 8083u16;
    std::fs::write(dir.join("server.py"), PY_SERVER).unwrap();
    let logs = dir.join("logs");
    // Capture first: both programs are then new to the resolver's /proc
    // index, which reads a new process's sockets when one is missing.
    let mut cap = ns
        .cmd(&["setpriv", "--bounding-set=-bpf,-perfmon,-sys_admin", "--", BIN, "capture", "-i", "lo", "--processes"])
        .args(["--no-store", "--stats-interval", "0", "--duration", "4s", "--logs"])
        .arg(&logs)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let py_log = dir.join("py.out");
    let mut server = ns.spawn("python server", &["python3", dir.join("server.py").to_str().unwrap(), &port.to_string()], &py_log);
    ns.wait_listening(&mut server, &py_log, port, false);
    let client = ns
        .cmd(&["python3", "-c", &format!("import socket,time\ns=socket.create_connection(('127.0.0.1',{port}))\ntime.sleep(0.3)\ns.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\nwhile s.recv(99): pass")])
        .status()
        .unwrap();
    assert!(client.success());
    let mut err = String::new();
    std::io::Read::read_to_string(cap.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(cap.wait().unwrap().success(), "{err}");
    drop(server);
    let refused: Vec<&str> = err.lines().filter(|l| l.contains("eBPF connect hook was refused")).collect();
    assert_eq!(refused.len(), 1, "one message: {err}");
    assert!(refused[0].contains("Operation not permitted"), "it says why: {}", refused[0]);
    assert!(err.lines().any(|l| l.starts_with("wirelog: processes:") && l.ends_with("eBPF connect hook refused")), "{err}");
    let rows: Vec<Row> = read_log(&logs.join("conn.log"));
    let r = rows.iter().find(|r| r["id.resp_p"] == port.to_string()).expect("the connection");
    assert_eq!((r["orig_proc"].as_str(), r["resp_proc"].as_str()), ("python3", "python3"), "{err}");
    println!("processes: {}", refused[0]);
    let _ = std::fs::remove_dir_all(&dir);
}
