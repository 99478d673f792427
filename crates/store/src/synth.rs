//! Deterministic, plausible records for tests and benchmarks (not part of
//! the store's API).
//!
//! Flows: a few thousand hosts picked with Zipf-like skew (a few talk a lot,
//! most rarely), servers with fixed service ports, counters with heavy
//! tails, 5-minute buckets; a share of long-lived flows spans whole buckets.

use std::collections::HashSet;
use std::sync::Arc;

use wirelog_record::{
    community_id_v1, ConnRecord, ConnState, FlowRecord, History, IpAddr16, ProcOwner, Proto, UidGenerator,
};

/// xorshift64*: small, fast, deterministic.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 << 32 {
            // 32 random bits scaled: kept for small n, so that every data set
            // the tests build from a seed stays what it was.
            ((self.next_u64() >> 32) * n) >> 32
        } else {
            // Above 2^32 the product above overflows (it used to, and put
            // every flow's first packet in its bucket's first 4.3 s).
            ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
        }
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Samples ranks 0..n with probability ~ 1/(rank+1)^s.
#[derive(Debug, Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut acc = 0.0;
        for k in 0..n {
            acc += 1.0 / ((k + 1) as f64).powf(s);
            cdf.push(acc);
        }
        for c in cdf.iter_mut() {
            *c /= acc;
        }
        Zipf { cdf }
    }
    pub fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr16 {
    IpAddr16::from_v4([a, b, c, d])
}

/// Service ports by popularity, with their IP protocol.
const PORTS: &[(u16, u8)] = &[
    (443, 6),
    (53, 17),
    (80, 6),
    (3306, 6),
    (5432, 6),
    (6379, 6),
    (22, 6),
    (123, 17),
    (8080, 6),
    (9200, 6),
    (25, 6),
    (993, 6),
    (8443, 6),
    (0, 1),
    (11211, 6),
    (5672, 6),
    (9092, 6),
    (2181, 6),
    (389, 6),
    (636, 6),
];

/// Generator of flow rows.
pub struct FlowGen {
    rng: Rng,
    clients: Vec<IpAddr16>,
    servers: Vec<(IpAddr16, u16, u8)>,
    client_z: Zipf,
    server_z: Zipf,
    ifaces: Vec<Arc<str>>,
    pub bucket_ns: i64,
    pub bucket_len_ns: i64,
}

impl FlowGen {
    /// `hosts` distinct addresses (clients and servers), starting at `start_ns`.
    pub fn new(seed: u64, hosts: usize, start_ns: i64) -> FlowGen {
        let mut rng = Rng::new(seed);
        let nc = (hosts * 2 / 3).max(1);
        let ns = (hosts - nc.min(hosts)).max(1);
        let clients = (0..nc)
            .map(|i| v4(10, 1 + (i / 65536) as u8, (i / 256) as u8, (i % 256) as u8))
            .collect();
        let port_z = Zipf::new(PORTS.len(), 1.2);
        let servers = (0..ns)
            .map(|i| {
                let ip = if i % 10 == 9 {
                    let mut b = [0u8; 16];
                    b[0] = 0x20;
                    b[1] = 0x01;
                    b[2] = 0x0d;
                    b[3] = 0xb8;
                    b[8..16].copy_from_slice(&(rng.next_u64()).to_be_bytes());
                    IpAddr16(b)
                } else if i % 3 == 0 {
                    v4(10, 200, (i / 256) as u8, (i % 256) as u8)
                } else {
                    let x = rng.next_u64();
                    v4(
                        23 + (x % 180) as u8,
                        (x >> 8) as u8,
                        (x >> 16) as u8,
                        (x >> 24) as u8,
                    )
                };
                let (port, proto) = PORTS[port_z.sample(&mut rng)];
                (ip, port, proto)
            })
            .collect();
        FlowGen {
            rng,
            clients,
            servers,
            client_z: Zipf::new(nc, 1.1),
            server_z: Zipf::new(ns, 1.1),
            ifaces: vec![Arc::from("eth0"), Arc::from("eth1")],
            bucket_ns: start_ns - start_ns.rem_euclid(300_000_000_000),
            bucket_len_ns: 300_000_000_000,
        }
    }

    fn heavy_f(&mut self, scale: f64, cap: f64) -> f64 {
        // Pareto with alpha 1.2, capped.
        let u = 1.0 - self.rng.unit();
        (scale / u.powf(1.0 / 1.2)).min(cap)
    }

    fn heavy(&mut self, scale: f64, cap: f64) -> u64 {
        self.heavy_f(scale, cap) as u64
    }

    /// The rows of one bucket (`n` distinct keys), then moves to the next bucket.
    pub fn bucket(&mut self, n: usize) -> Vec<FlowRecord> {
        let mut keys = HashSet::with_capacity(n);
        let mut out = Vec::with_capacity(n);
        let b = self.bucket_ns;
        let len = self.bucket_len_ns;
        let mut tries = 0;
        while out.len() < n && tries < n * 20 {
            tries += 1;
            let c = self.client_z.sample(&mut self.rng);
            let s = self.server_z.sample(&mut self.rng);
            let iface = (self.rng.below(8) == 0) as usize;
            if !keys.insert((c, s, iface)) {
                continue;
            }
            let (server, port, proto) = self.servers[s];
            let pkts_out = 1 + self.heavy(1.5, 5e6);
            let pkts_in = if proto == 17 && self.rng.below(10) == 0 {
                0
            } else {
                1 + self.heavy(1.5, 5e6)
            };
            let size_out = match port {
                53 => 70,
                123 => 76,
                0 => 84,
                _ => 52 + self.rng.below(400),
            };
            let size_in = match port {
                53 => 130,
                123 => 76,
                0 => 84,
                _ => 52 + self.rng.below(1400),
            };
            let (first, last) = if pkts_out + pkts_in > 50 && self.rng.below(2) == 0 {
                // Long-lived: the whole bucket.
                (
                    b + self.rng.below(2_000_000_000) as i64,
                    b + len - 1 - self.rng.below(2_000_000_000) as i64,
                )
            } else {
                let f = b + self.rng.below(len as u64) as i64;
                let d =
                    (self.heavy_f(0.002, 300.0) * 1e9) as i64 + self.rng.below(50_000_000) as i64;
                (f, (f + d).min(b + len - 1))
            };
            out.push(FlowRecord {
                bucket_ns: b,
                iface: self.ifaces[iface].clone(),
                client: self.clients[c],
                server,
                server_port: port,
                proto,
                bytes_out: pkts_out * size_out,
                pkts_out,
                bytes_in: pkts_in * size_in,
                pkts_in,
                // Capture times in µs (what the store keeps).
                first_ns: first - first.rem_euclid(1000),
                last_ns: last - last.rem_euclid(1000),
                conns: 1 + self.heavy(0.3, 10_000.0) as u32,
            });
        }
        self.bucket_ns += len;
        out
    }
}

/// Connection number `i` of a deterministic sequence: times increase with
/// `i` (`step_ns` apart from `start_ns`), and `orig_pkts == i` identifies it.
pub fn conn(i: u64, start_ns: i64, step_ns: i64, uids: &mut UidGenerator) -> ConnRecord {
    let mut rng = Rng::new(i.wrapping_add(7));
    let orig_h = v4(10, 0, (i >> 8) as u8 % 16, i as u8);
    let resp_h = if i.is_multiple_of(7) {
        let mut b = [0u8; 16];
        b[0] = 0xfd;
        b[15] = (i % 5) as u8;
        IpAddr16(b)
    } else {
        v4(192, 168, 1, (i % 50) as u8)
    };
    let (proto, ip_proto, resp_p) = match i % 10 {
        0..=5 => (Proto::Tcp, 6u8, [443u16, 80, 3306, 5432][(i % 4) as usize]),
        6..=8 => (Proto::Udp, 17, 53),
        _ => (Proto::Icmp, 1, 0),
    };
    let orig_p = if proto == Proto::Icmp {
        8
    } else {
        32768 + (i % 28000) as u16
    };
    let resp_p = if proto == Proto::Icmp { 0 } else { resp_p };
    let zero = i.is_multiple_of(13);
    let mut history = History::new();
    for &c in b"ShADadFf".iter().take(1 + (i % 8) as usize) {
        history.push(c);
    }
    ConnRecord {
        ts_ns: start_ns + i as i64 * step_ns,
        uid: uids.next_uid(),
        orig_h,
        orig_p,
        resp_h,
        resp_p,
        proto,
        service: match resp_p {
            443 => Some("ssl"),
            80 => Some("http"),
            53 => Some("dns"),
            3306 => Some("mysql"),
            _ => None,
        },
        duration_ns: (!zero).then(|| rng.below(30_000_000) as i64 * 1000),
        orig_bytes: (!zero).then(|| rng.below(100_000)),
        resp_bytes: (!zero).then(|| rng.below(1_000_000)),
        conn_state: ConnState::ALL[(i % 13) as usize],
        local_orig: true,
        local_resp: !i.is_multiple_of(3),
        missed_bytes: if i.is_multiple_of(50) { 1460 } else { 0 },
        history,
        orig_pkts: i,
        orig_ip_bytes: 40 * i + 60,
        resp_pkts: i % 100,
        resp_ip_bytes: rng.below(2_000_000),
        ip_proto,
        community_id: community_id_v1(&orig_h, &resp_h, ip_proto, orig_p, resp_p),
        vlan: i.is_multiple_of(4).then_some(100 + (i % 3) as u16),
        inner_vlan: i.is_multiple_of(8).then_some(7),
        empty_tcp_skipped: false,
        orig_proc: None,
        resp_proc: None,
    }
}

/// The kinds of [`service`]s, in service order.
pub const SERVICE_KINDS: [crate::Kind; 6] = [
    crate::Kind::Http,
    crate::Kind::Mysql,
    crate::Kind::Pgsql,
    crate::Kind::Redis,
    crate::Kind::Dns,
    crate::Kind::Tls,
];

/// Service k of a store of many services (the map at scale): its address,
/// port, Zeek service name and owner.
pub struct Service {
    pub addr: IpAddr16,
    pub port: u16,
    pub name: &'static str,
    pub owner: Arc<ProcOwner>,
}

/// Service k sits at 172.16.(k / 50).(k % 50 + 1) (so 50 services a /24)
/// on the port of the kind `SERVICE_KINDS[k % 6]` (HTTP 80, MySQL 3306,
/// PostgreSQL 5432, Redis 6379, DNS 53, TLS 443), owned by a process named
/// after it (`nginx`, `mysqld`, ...), every third one in a container, as
/// `capture --processes` records them.
pub fn service(k: u64) -> Service {
    let kind = k as usize % SERVICE_KINDS.len();
    let (port, name, proc) = [
        (80, "http", "nginx"),
        (3306, "mysql", "mysqld"),
        (5432, "postgresql", "postgres"),
        (6379, "redis", "redis-server"),
        (53, "dns", "unbound"),
        (443, "ssl", "haproxy"),
    ][kind];
    Service {
        addr: IpAddr16::from_v4([172, 16, (k / 50) as u8, (k % 50) as u8 + 1]),
        port,
        name,
        owner: Arc::new(ProcOwner {
            pid: 1000 + k as u32,
            name: proc.to_string(),
            exe: format!("/usr/sbin/{proc}"),
            user: "svc".to_string(),
            container: if k.is_multiple_of(3) { format!("docker:svc{k:04}") } else { String::new() },
            ..ProcOwner::default()
        }),
    }
}

/// Connection `c` sent to [`service`] `k` instead.
pub fn to_service(mut c: ConnRecord, k: u64) -> ConnRecord {
    let s = service(k);
    c.resp_h = s.addr;
    c.resp_p = s.port;
    (c.proto, c.ip_proto) = if s.port == 53 { (Proto::Udp, 17) } else { (Proto::Tcp, 6) };
    c.service = Some(s.name);
    c.resp_proc = Some(s.owner);
    c.community_id = community_id_v1(&c.orig_h, &c.resp_h, c.ip_proto, c.orig_p, c.resp_p);
    c
}

/// Transactions of `kind` (numbered from `first`) sent to the [`service`]s
/// of that kind among `services` in turn: `k`, `k + 6`, `k + 12`, ...
pub fn tx_to_services(kind: crate::Kind, rows: &mut [crate::TxRow], first: u64, services: u64) -> Result<(), String> {
    let n = SERVICE_KINDS.len() as u64;
    let Some(k) = SERVICE_KINDS.iter().position(|x| *x == kind) else {
        return Err(format!("no {} services", kind.as_str()));
    };
    let of_kind = (services + (n - 1 - k as u64)) / n;
    if of_kind == 0 {
        return Err(format!("{services} services leave no {} service", kind.as_str()));
    }
    for (j, r) in rows.iter_mut().enumerate() {
        r.server = service(k as u64 + n * ((first + j as u64) % of_kind)).addr;
    }
    Ok(())
}

/// Deterministic transactions of a transaction kind: `n` rows from
/// `start_ns`, `step_ns` apart, a few clients and servers, Zipf-ish skew
/// over a handful of hosts/statements/commands/names, about 5 % errors, a few
/// without a response, latencies from 50 µs to ~2 s with a heavy tail.
pub fn tx_rows(
    kind: crate::Kind,
    n: u64,
    start_ns: i64,
    step_ns: i64,
    seed: u64,
) -> Vec<crate::TxRow> {
    use crate::{Cell, Kind, TxRow};
    let mut rng = Rng::new(seed);
    let mut uids = UidGenerator::new(seed);
    let s = |v: &str| Cell::Str(Some(v.to_string()));
    let (port, transport) = match kind {
        Kind::Http => (80u16, 6u8),
        Kind::Mysql => (3306, 6),
        Kind::Pgsql => (5432, 6),
        Kind::Redis => (6379, 6),
        Kind::Tls => (443, 6),
        Kind::Dns => (53, 17),
        _ => (kind.protocol().map_or(1, |p| p.default_ports()[0]), 6),
    };
    (0..n)
        .map(|i| {
            // Skewed choice among k: low indices often.
            let mut pick = |k: u64| {
                let u = rng.unit();
                ((u * u * u) * k as f64) as u64
            };
            let which = pick(6);
            let r = rng.below(1000);
            let status = if r < 50 {
                "error"
            } else if r < 70 {
                "no_response"
            } else {
                "ok"
            };
            let answered = status != "no_response";
            // Latency: 50 µs .. ~2 s, heavy-tailed, depending on the statement.
            let lat = (50_000.0
                * (1.0 + which as f64)
                * (1.0 / (1.0 - rng.unit() * 0.999)).powf(1.2)) as i64;
            let latency_ns = answered.then_some(lat);
            let req = 40 + rng.below(400);
            let resp = answered.then(|| 20 + rng.below(20_000));
            let mut extra = match kind {
                Kind::Http => {
                    let code = match status {
                        "error" => Some(if r.is_multiple_of(2) { 500 } else { 503 }),
                        "ok" => Some(if r.is_multiple_of(7) { 404 } else { 200 }),
                        _ => None,
                    };
                    vec![
                        s(["GET", "POST", "GET", "PUT", "GET", "DELETE"][which as usize]),
                        s([
                            "api.example.com",
                            "www.example.com",
                            "cdn.example.com",
                            "auth.example.com",
                            "img.example.com",
                            "example.org",
                        ][(i % 6) as usize]),
                        s(&format!("/v1/items/{}", which * 10 + i % 3)),
                        s("1.1"),
                        if i % 4 == 0 {
                            Cell::Str(None)
                        } else {
                            s("curl/8.5.0")
                        },
                        Cell::U64(code),
                        Cell::Str(code.map(|c| if c == 200 { "OK" } else { "Error" }.to_string())),
                        Cell::U64(Some(req / 2)),
                        Cell::U64(resp.map(|r| r / 2)),
                        // HTTP/2's stream_id, end_state, h2_error, promised_by:
                        // these rows are HTTP/1.1.
                        Cell::U64(None),
                        Cell::Str(None),
                        Cell::Str(None),
                        Cell::U64(None),
                    ]
                }
                Kind::Mysql => {
                    let fp = [
                        "SELECT * FROM t WHERE id = ?",
                        "INSERT INTO t VALUES (?)",
                        "UPDATE t SET a = ? WHERE id = ?",
                        "SELECT count(*) FROM u",
                        "DELETE FROM t WHERE id = ?",
                        "COMMIT",
                    ][which as usize];
                    let err = status == "error";
                    vec![
                        s("COM_QUERY"),
                        s(&fp.replace('?', &(i % 97).to_string())),
                        s(fp),
                        s("shop"),
                        s(if i % 3 == 0 { "app" } else { "report" }),
                        Cell::U64((!err && answered).then_some(i % 3)),
                        Cell::U64((which == 1 && !err).then_some(i)),
                        Cell::U64((which == 0 && !err).then_some(i % 50)),
                        Cell::U64((which == 0 && !err).then_some(4)),
                        Cell::U64(err.then_some(1062)),
                        Cell::Str(err.then(|| "23000".to_string())),
                        Cell::Str(err.then(|| "Duplicate entry".to_string())),
                    ]
                }
                Kind::Pgsql => {
                    let fp = [
                        "SELECT * FROM t WHERE id = $1",
                        "INSERT INTO t VALUES ($1)",
                        "UPDATE t SET a = $1",
                        "SELECT now()",
                        "BEGIN",
                        "COMMIT",
                    ][which as usize];
                    let err = status == "error";
                    vec![
                        s("Query"),
                        s(fp),
                        s(fp),
                        s("shop"),
                        s("app"),
                        Cell::Str((!err && answered).then(|| format!("SELECT {}", i % 9))),
                        Cell::U64((!err && answered).then_some(i % 9)),
                        Cell::U64((!err && answered).then_some(3)),
                        Cell::Str(err.then(|| "ERROR".to_string())),
                        Cell::Str(err.then(|| "23505".to_string())),
                        Cell::Str(err.then(|| "duplicate key value".to_string())),
                    ]
                }
                Kind::Redis => {
                    let cmd = ["GET", "SET", "HGETALL", "INCR", "DEL", "EXPIRE"][which as usize];
                    vec![
                        s(cmd),
                        s(&format!("key:{}", i % 31)),
                        Cell::Str(
                            answered.then(|| {
                                if status == "error" { "error" } else { "bulk" }.to_string()
                            }),
                        ),
                        Cell::Str(answered.then(|| "value".to_string())),
                    ]
                }
                Kind::Tls => {
                    let names = [
                        "api.example.com",
                        "www.example.com",
                        "cdn.example.com",
                        "auth.example.com",
                        "img.example.com",
                        "example.org",
                    ];
                    let name = names[which as usize];
                    let tls13 = which % 2 == 0;
                    let ok = status == "ok";
                    let fp = format!("{:064x}", which + 1);
                    vec![
                        Cell::Str(answered.then(|| if tls13 { "TLSv13" } else { "TLSv12" }.to_string())),
                        Cell::Str(answered.then(|| {
                            if tls13 { "TLS_AES_128_GCM_SHA256" } else { "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" }
                                .to_string()
                        })),
                        Cell::Str(answered.then(|| "x25519".to_string())),
                        if i % 5 == 0 { Cell::Str(None) } else { s(name) },
                        Cell::Bool(i % 11 == 0),
                        Cell::Str((status == "error").then(|| "handshake_failure".to_string())),
                        Cell::Str(ok.then(|| if i % 2 == 0 { "h2" } else { "http/1.1" }.to_string())),
                        Cell::Bool(ok),
                        s(if tls13 { "CsiI" } else { "CsxknGIti" }),
                        Cell::Str((answered && !tls13).then(|| fp.clone())),
                        Cell::Str((answered && !tls13).then(String::new)),
                        Cell::Str((answered && !tls13).then(|| format!("CN={name}"))),
                        Cell::Str((answered && !tls13).then(|| "CN=Example CA,O=Example,C=US".to_string())),
                        Cell::U64((answered && !tls13).then_some(1_700_000_000 + which * 86_400 * 30)),
                        s(["t13d1516h2_8daaf6152771_b0da82dd1658", "t12d1209h1_d34a8e72043a_b39be8c56a14"]
                            [(which % 2) as usize]),
                        s(&format!("{:032x}", which + 7)),
                        Cell::Str(answered.then(|| format!("{:032x}", which + 9))),
                        s(if tls13 { "772,771" } else { "" }),
                        s("h2,http/1.1"),
                    ]
                }
                // A protocol without its own values here: one value a
                // column, from its declared type.
                _ if kind != Kind::Dns => crate::schema::tx_columns(kind)
                    .iter()
                    // The columns of every kind come below.
                    .take(crate::schema::tx_columns(kind).len() - wirelog_record::columns::EVERY_TX.len())
                    .map(|c| match c.col_type() {
                        crate::schema::ColType::Str => s(&format!("{}-{which}", c.name)),
                        crate::schema::ColType::Bool => Cell::Bool(i % 2 == 0),
                        crate::schema::ColType::DurUs => Cell::Dur(latency_ns),
                        _ => Cell::U64(Some(which)),
                    })
                    .collect(),
                _ => {
                    let (qt, qn) = [
                        (1u64, "A"),
                        (28, "AAAA"),
                        (1, "A"),
                        (5, "CNAME"),
                        (15, "MX"),
                        (16, "TXT"),
                    ][which as usize];
                    let rc = (status == "error").then_some(3u64);
                    vec![
                        s([
                            "example.com",
                            "api.example.com",
                            "wirelog.invalid",
                            "a.b.c.example.net",
                            "mail.example.org",
                            "x.example.com",
                        ][(i % 6) as usize]),
                        Cell::U64(Some(qt)),
                        s(qn),
                        Cell::U64(Some(1)),
                        Cell::U64(answered.then(|| rc.unwrap_or(0))),
                        Cell::Str(answered.then(|| {
                            if rc.is_some() { "NXDOMAIN" } else { "NOERROR" }.to_string()
                        })),
                        Cell::U64(Some(i % 65536)),
                        Cell::Str(
                            (answered && rc.is_none())
                                .then(|| "93.184.216.34,93.184.216.35".to_string()),
                        ),
                        Cell::Str((answered && rc.is_none()).then(|| "300,300".to_string())),
                        Cell::Bool(i % 5 == 0),
                        Cell::Bool(false),
                        Cell::Bool(true),
                        Cell::Bool(answered),
                    ]
                }
            };
            // The columns of every kind (`columns::EVERY_TX`): parsed from packets.
            extra.push(Cell::Str(Some(wirelog_record::TxSource::Packets.as_str().to_string())));
            let client = IpAddr16::from_v4([10, 0, (i % 3) as u8, (i % 40) as u8 + 1]);
            let server = if i % 9 == 0 {
                let mut b = [0u8; 16];
                b[..2].copy_from_slice(&[0x20, 0x01]);
                b[15] = which as u8;
                IpAddr16(b)
            } else {
                IpAddr16::from_v4([192, 168, 1, which as u8 + 1])
            };
            TxRow {
                ts_ns: start_ns + i as i64 * step_ns,
                uid: uids.next_uid().as_str().to_string(),
                client,
                client_port: 30_000 + (i % 30_000) as u16,
                server,
                server_port: port,
                transport,
                status,
                request_bytes: Some(req),
                response_bytes: resp,
                latency_ns,
                first_byte_latency_ns: latency_ns.map(|l| l / 2),
                sample_weight: 1,
                extra,
                orig_proc: None,
                resp_proc: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_spans_ranges_wider_than_32_bits() {
        let mut rng = Rng::new(3);
        let n = 300_000_000_000u64; // a 5-minute bucket in ns
        let xs: Vec<u64> = (0..10_000).map(|_| rng.below(n)).collect();
        assert!(xs.iter().all(|&x| x < n));
        // Uniform: each tenth of the range gets about a tenth of the draws.
        for tenth in 0..10 {
            let k = xs.iter().filter(|&&x| x / (n / 10) == tenth).count();
            assert!((800..1200).contains(&k), "tenth {tenth}: {k} of 10000");
        }
    }
}
