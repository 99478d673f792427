//! Keeping packets (`read --pcap-dir`) and getting them back (`wirelog
//! pcap`), against the input captures, tcpdump and tshark: every packet
//! kept in `all` mode, extraction by uid equal to tcpdump's filter of the
//! connection's tuple, the cutoff keeping exactly the packets it documents,
//! rotation and the ring, and files a SIGKILL leaves behind.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::kept::{kept_files, kept_records, read_index, read_pcap, strip};
use common::{read_log, sample_pcap, scratch, synthetic_pcap};

const BIN: &str = env!("CARGO_BIN_EXE_wirelog");
const ZEEK: &str = "/work/shared/testdata/zeek";
const PACKETBEAT: &str = "/work/shared/testdata/packetbeat/pcaps";

fn wirelog(args: &[&str]) -> std::process::Output {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "wirelog {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn inputs(dir: &Path) -> Vec<PathBuf> {
    vec![
        sample_pcap(dir),
        PathBuf::from(format!("{ZEEK}/http_no_crlf/no_crlf.pcap")),
        PathBuf::from(format!("{ZEEK}/ipv6_frag_dns/ipv6-fragmented-dns.pcap")),
        PathBuf::from(format!("{ZEEK}/vlan_qinq/q-in-q.pcap")),
        PathBuf::from(format!("{ZEEK}/mysql/mysql.pcap")),
        PathBuf::from(format!("{PACKETBEAT}/icmp/icmp6_ping_over_vlan.pcap")),
    ]
}

#[test]
fn all_mode_keeps_every_input_packet() {
    let dir = scratch("pcap_keep", "all");
    for (i, input) in inputs(&dir).iter().enumerate() {
        let pd = dir.join(format!("pd{i}"));
        let out = wirelog(&["read", s(input), "--no-store", "--logs", s(&dir.join(format!("logs{i}"))), "--pcap-dir", s(&pd), "--pcap-file-size", "64K"]);
        let (want, cut) = read_pcap(input);
        assert!(!cut);
        let got = kept_records(&pd);
        assert_eq!(strip(&got), strip(&want), "{}", input.display());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("pcap: {} packets kept, 0 cut, 0 dropped", want.len())), "{err}");
        // tcpdump reads the kept files as the input, byte for byte (-S:
        // sequence numbers absolute, as each file is read on its own).
        let dump = |files: &[PathBuf]| -> String {
            files
                .iter()
                .map(|f| {
                    let o = Command::new("tcpdump").args(["-r", s(f), "-nn", "-S", "-tt", "-xx"]).stderr(Stdio::null()).output().unwrap();
                    assert!(o.status.success(), "tcpdump -r {}", f.display());
                    String::from_utf8_lossy(&o.stdout).into_owned()
                })
                .collect()
        };
        let (kept, orig) = (dump(&kept_files(&pd)), dump(std::slice::from_ref(input)));
        let diff = kept.lines().zip(orig.lines()).find(|(a, b)| a != b);
        assert_eq!(diff, None, "{}", input.display());
        assert_eq!(kept.lines().count(), orig.lines().count(), "{}", input.display());
    }
}

/// A BPF expression for the packets of one connection's tuple.
fn tuple_filter(c: &HashMap<String, String>) -> String {
    format!(
        "{} and host {} and host {} and port {} and port {}",
        c["proto"], c["id.orig_h"], c["id.resp_h"], c["id.orig_p"], c["id.resp_p"]
    )
}

/// The fields of a conn record that do not depend on the uid.
fn conn_fields(c: &HashMap<String, String>) -> Vec<String> {
    ["ts", "id.orig_h", "id.orig_p", "id.resp_h", "id.resp_p", "proto", "service", "duration", "orig_bytes", "resp_bytes", "conn_state", "missed_bytes", "history", "orig_pkts", "orig_ip_bytes", "resp_pkts", "resp_ip_bytes"]
        .iter()
        .map(|f| c.get(*f).cloned().unwrap_or_default())
        .collect()
}

#[test]
fn extraction_by_uid_equals_tcpdump_of_the_tuple_and_reads_back_to_the_same_record() {
    let dir = scratch("pcap_keep", "extract");
    for (n, input) in [sample_pcap(&dir), PathBuf::from(format!("{ZEEK}/http_no_crlf/no_crlf.pcap"))].iter().enumerate() {
        let (store, pd, logs) = (dir.join(format!("store{n}")), dir.join(format!("pd{n}")), dir.join(format!("logs{n}")));
        wirelog(&["read", s(input), "--store", s(&store), "--logs", s(&logs), "--pcap-dir", s(&pd), "--pcap-file-size", "64K"]);
        assert!(kept_files(&pd).len() > 1, "the test wants connections spread over several files");
        let conns = read_log(&logs.join("conn.log"));
        // Connections alone on their tuple (tcpdump's filter cannot tell
        // two connections of one tuple apart), TCP and UDP.
        let mut per_tuple: HashMap<String, usize> = HashMap::new();
        for c in &conns {
            *per_tuple.entry(tuple_filter(c)).or_default() += 1;
        }
        let chosen: Vec<&HashMap<String, String>> = conns
            .iter()
            .filter(|c| (c["proto"] == "tcp" || c["proto"] == "udp") && per_tuple[&tuple_filter(c)] == 1)
            .collect();
        let protos: BTreeSet<&str> = chosen.iter().map(|c| c["proto"].as_str()).collect();
        if n == 0 {
            assert_eq!(protos, BTreeSet::from(["tcp", "udp"]), "sample.pcap has both");
        }
        for c in chosen.iter().take(12) {
            let uid = &c["uid"];
            let out = dir.join(format!("{uid}.pcap"));
            let t = Instant::now();
            wirelog(&["pcap", "--store", s(&store), "--pcap-dir", s(&pd), "--where", &format!("uid = {uid}"), "-o", s(&out)]);
            let took = t.elapsed();
            let expected = dir.join(format!("{uid}.tcpdump.pcap"));
            let st = Command::new("tcpdump")
                .args(["-r", s(input), "-w", s(&expected)])
                .arg(tuple_filter(c))
                .stderr(Stdio::null())
                .status()
                .unwrap();
            assert!(st.success());
            let (got, want) = (read_pcap(&out).0, read_pcap(&expected).0);
            assert!(!want.is_empty());
            assert_eq!(strip(&got), strip(&want), "{uid} ({})", tuple_filter(c));
            assert!(took < Duration::from_secs(5), "extraction took {took:?}");
            // The extracted packets make the same record.
            let back = dir.join(format!("{uid}.logs"));
            wirelog(&["read", s(&out), "--no-store", "--logs", s(&back)]);
            let again = read_log(&back.join("conn.log"));
            assert_eq!(again.len(), 1, "{uid}");
            assert_eq!(conn_fields(&again[0]), conn_fields(c), "{uid}");
        }
    }
}

#[test]
fn a_query_over_transactions_extracts_their_connections() {
    let dir = scratch("pcap_keep", "tx");
    let input = sample_pcap(&dir);
    let (store, pd, logs) = (dir.join("store"), dir.join("pd"), dir.join("logs"));
    wirelog(&["read", s(&input), "--store", s(&store), "--logs", s(&logs), "--pcap-dir", s(&pd)]);
    let http = read_log(&logs.join("http.log"));
    let uids: BTreeSet<&str> = http.iter().map(|r| r["uid"].as_str()).collect();
    assert!(uids.len() > 1);
    let out = dir.join("http.pcap");
    wirelog(&["pcap", "http", "--store", s(&store), "--pcap-dir", s(&pd), "-o", s(&out)]);
    // Exactly the packets of those connections, by the index itself.
    let conns = read_log(&logs.join("conn.log"));
    let want: usize = conns.iter().filter(|c| uids.contains(c["uid"].as_str())).map(|c| {
        c["orig_pkts"].parse::<usize>().unwrap() + c["resp_pkts"].parse::<usize>().unwrap()
    }).sum();
    assert_eq!(read_pcap(&out).0.len(), want);

    // The store recorded where `read --pcap-dir` kept the packets: without
    // --pcap-dir the same file comes out.
    let recorded = std::fs::read_to_string(store.join("pcap_dirs.txt")).unwrap();
    assert_eq!(recorded, format!("{}\n", s(&pd)));
    let again = dir.join("http-again.pcap");
    wirelog(&["pcap", "http", "--store", s(&store), "-o", s(&again)]);
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&out).unwrap());

    // A store no run kept packets for: the error says to name the directory.
    let bare = dir.join("bare");
    wirelog(&["read", s(&input), "--store", s(&bare)]);
    let o = Command::new(BIN).args(["pcap", "--store", s(&bare), "-o", s(&dir.join("x.pcap"))]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("no run writing this store kept packets") && err.contains("--pcap-dir"), "{err}");
}

/// The frames (1-based) `--pcap-cutoff limit` keeps, from tshark's fields:
/// per connection side, packets while fewer than `limit` payload bytes
/// came before, and every packet with SYN, FIN or RST; packets that are
/// neither TCP nor UDP are kept (the captures used hold less than `limit`
/// of them).
fn expected_cutoff(input: &Path, limit: u64) -> BTreeSet<usize> {
    let o = Command::new("tshark")
        .args(["-r", s(input), "-T", "fields", "-E", "occurrence=f", "-e", "frame.number", "-e", "ip.src", "-e", "ipv6.src", "-e", "ip.dst", "-e", "ipv6.dst"])
        .args(["-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "udp.srcport", "-e", "udp.dstport", "-e", "tcp.len", "-e", "udp.length", "-e", "tcp.flags.syn", "-e", "tcp.flags.fin", "-e", "tcp.flags.reset"])
        .args(["-e", "ip.proto", "-e", "ipv6.nxt"])
        .output()
        .unwrap();
    assert!(o.status.success());
    // Payload bytes sent so far, per (from, to, is TCP).
    let mut sent: HashMap<(String, String, bool), u64> = HashMap::new();
    let mut keep = BTreeSet::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let n: usize = f[0].parse().unwrap();
        let src = format!("{}{}", f[1], f[2]);
        let dst = format!("{}{}", f[3], f[4]);
        // The outer header's protocol (an ICMP error quotes a TCP or UDP header).
        let proto = format!("{}{}", f[14], f[15]);
        let tcp = proto == "6";
        let (sp, dp, len) = if tcp {
            (f[5], f[6], f[9].parse::<u64>().unwrap())
        } else if proto == "17" {
            (f[7], f[8], f[10].parse::<u64>().unwrap() - 8)
        } else {
            keep.insert(n);
            continue;
        };
        let state = tcp && [f[11], f[12], f[13]].iter().any(|x| *x == "1" || *x == "True");
        let a = format!("{src}/{sp}");
        let b = format!("{dst}/{dp}");
        let side = sent.entry((a, b, tcp)).or_insert(0);
        if state || *side < limit {
            keep.insert(n);
        }
        *side += len;
    }
    keep
}

#[test]
fn cutoff_keeps_the_first_bytes_of_each_side_and_every_state_change() {
    let dir = scratch("pcap_keep", "cutoff");
    for (input, limit) in [(sample_pcap(&dir), 1024u64), (PathBuf::from(format!("{ZEEK}/http_no_crlf/no_crlf.pcap")), 4096)] {
        let pd = dir.join(format!("pd-{limit}"));
        let out = wirelog(&["read", s(&input), "--no-store", "--logs", s(&dir.join("logs")), "--pcap-dir", s(&pd), "--pcap-cutoff", &limit.to_string()]);
        let all = read_pcap(&input).0;
        let kept = kept_records(&pd);
        // Which input frames were kept (the kept files are in input order).
        let mut frames = BTreeSet::new();
        let mut j = 0;
        for (i, r) in all.iter().enumerate() {
            if j < kept.len() && (kept[j].ts_ns, &kept[j].data) == (r.ts_ns, &r.data) {
                frames.insert(i + 1);
                j += 1;
            }
        }
        assert_eq!(j, kept.len(), "kept packets not in input order");
        let want = expected_cutoff(&input, limit);
        assert_eq!(frames, want, "{}", input.display());
        assert!(want.len() < all.len(), "the cutoff should cut something");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("pcap: {} packets kept, {} cut", want.len(), all.len() - want.len())), "{err}");
    }
}

#[test]
fn rotation_by_size_and_time_and_the_ring_by_count_and_size() {
    let dir = scratch("pcap_keep", "rotate");
    let input = PathBuf::from(format!("{ZEEK}/http_no_crlf/no_crlf.pcap"));
    let all = read_pcap(&input).0;
    // By time: every file within one aligned second, one file per second
    // that has packets.
    let pd = dir.join("time");
    wirelog(&["read", s(&input), "--no-store", "--logs", s(&dir.join("l1")), "--pcap-dir", s(&pd), "--pcap-rotate", "1s"]);
    let seconds: BTreeSet<i64> = all.iter().map(|r| r.ts_ns / 1_000_000_000).collect();
    let files = kept_files(&pd);
    assert_eq!(files.len(), seconds.len());
    for f in &files {
        let secs: BTreeSet<i64> = read_pcap(f).0.iter().map(|r| r.ts_ns / 1_000_000_000).collect();
        assert_eq!(secs.len(), 1, "{}", f.display());
    }
    assert_eq!(strip(&kept_records(&pd)), strip(&all));
    // By size, and a ring of 3 files: the newest 3 stay, each at most the size.
    let pd = dir.join("count");
    wirelog(&["read", s(&input), "--no-store", "--logs", s(&dir.join("l2")), "--pcap-dir", s(&pd), "--pcap-file-size", "64K", "--pcap-keep", "count=3"]);
    let files = kept_files(&pd);
    assert_eq!(files.len(), 3);
    for f in &files {
        assert!(std::fs::metadata(f).unwrap().len() <= 64 << 10);
    }
    let kept = kept_records(&pd);
    assert_eq!(strip(&kept), strip(&all[all.len() - kept.len()..]), "the newest packets stay");
    // A ring of 256K: files and indexes together stay within it.
    let pd = dir.join("size");
    wirelog(&["read", s(&input), "--no-store", "--logs", s(&dir.join("l3")), "--pcap-dir", s(&pd), "--pcap-file-size", "64K", "--pcap-keep", "size=256K"]);
    let total: u64 = std::fs::read_dir(&pd).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    assert!(total <= 256 << 10 && total > 128 << 10, "{total} bytes");
    let kept = kept_records(&pd);
    assert_eq!(strip(&kept), strip(&all[all.len() - kept.len()..]));
}

#[test]
fn sigkill_leaves_every_file_readable_and_the_index_within_the_data() {
    let dir = scratch("pcap_keep", "kill");
    let pcap = dir.join("many.pcap");
    std::fs::write(&pcap, synthetic_pcap(300_000)).unwrap();
    let run = |pd: &Path| {
        Command::new(BIN)
            .args(["read", "-q", "--no-store", "--pcap-file-size", "2M", "--pcap-dir"])
            .arg(pd)
            .arg(&pcap)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let t = Instant::now();
    assert!(run(&dir.join("whole")).wait().unwrap().success());
    let whole = t.elapsed().as_micros() as u64;
    let mut seed = u64::from(std::process::id()) << 16 | 1;
    let mut checked_cut = false;
    for k in 0..6 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let pd = dir.join(format!("kill{k}"));
        let mut child = run(&pd);
        std::thread::sleep(Duration::from_micros(whole / 5 + seed % (whole * 3 / 5)));
        let _ = child.kill();
        let _ = child.wait();
        let files = kept_files(&pd);
        for (i, f) in files.iter().enumerate() {
            let f = f.clone();
            let (recs, cut) = read_pcap(&f);
            checked_cut |= cut;
            // tcpdump prints every whole record, and wirelog reads them (a
            // cut last record is a warning): the open file and a closed one.
            if i == 0 || i + 1 == files.len() {
                let o = Command::new("tcpdump").args(["-r", s(&f), "-nn"]).stderr(Stdio::null()).output().unwrap();
                assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), recs.len(), "tcpdump -r {}", f.display());
                let o = Command::new(BIN).args(["read", "-q", "--no-store", s(&f)]).stdout(Stdio::null()).output().unwrap();
                assert!(o.status.success(), "wirelog read {}: {}", f.display(), String::from_utf8_lossy(&o.stderr));
            }
            // Every offset of the index is a whole record of the file.
            let starts: BTreeSet<u64> = recs.iter().map(|r| r.offset).collect();
            let (ix, _) = read_index(&f.with_extension("idx"));
            for (uid, offs) in ix {
                for o in offs {
                    assert!(starts.contains(&o), "kill {k}: {} indexes {uid} at {o}, not a whole record", f.display());
                }
            }
        }
    }
    eprintln!("a kill cut a record: {checked_cut}");
    // A write cut inside a record (a kill rarely lands inside one `write`):
    // tcpdump and wirelog read the whole records before it, wirelog warns.
    let f = kept_files(&dir.join("whole")).remove(0);
    let cut = dir.join("cut.pcap");
    let bytes = std::fs::read(&f).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let (recs, was_cut) = read_pcap(&cut);
    assert!(was_cut);
    let o = Command::new("tcpdump").args(["-r", s(&cut), "-nn"]).stderr(Stdio::null()).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), recs.len());
    let o = Command::new(BIN).args(["read", "--no-store", "--logs", s(&dir.join("cut-logs")), s(&cut)]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.contains("truncated file"), "{err}");
    assert!(err.contains(&format!("wirelog: {} packets", recs.len())), "{err}");
}

#[test]
fn filter_snaplen_and_parsed_connections() {
    let dir = scratch("pcap_keep", "select");
    let input = sample_pcap(&dir);
    // --pcap-filter and --pcap-snaplen: tcpdump's udp packets, 100 bytes of each.
    let pd = dir.join("udp");
    wirelog(&["read", s(&input), "--no-store", "--logs", s(&dir.join("l1")), "--pcap-dir", s(&pd), "--pcap-filter", "udp", "--pcap-snaplen", "100"]);
    let expected = dir.join("udp.pcap");
    let st = Command::new("tcpdump").args(["-r", s(&input), "-w", s(&expected), "udp"]).stderr(Stdio::null()).status().unwrap();
    assert!(st.success());
    let want: Vec<(i64, u32, Vec<u8>)> =
        read_pcap(&expected).0.into_iter().map(|r| (r.ts_ns, r.orig_len, r.data[..r.data.len().min(100)].to_vec())).collect();
    let got: Vec<(i64, u32, Vec<u8>)> = kept_records(&pd).into_iter().map(|r| (r.ts_ns, r.orig_len, r.data)).collect();
    assert!(!want.is_empty() && want.iter().any(|w| w.2.len() < w.1 as usize), "the snaplen should cut some");
    assert_eq!(got, want);
    // --pcap-conns parsed: only connections with a parser, under their records' uids.
    let pd = dir.join("parsed");
    let logs = dir.join("l2");
    wirelog(&["read", s(&input), "--no-store", "--logs", s(&logs), "--pcap-dir", s(&pd), "--pcap-conns", "parsed"]);
    let parsed: BTreeSet<String> = ["http.log", "mysql.log", "pgsql.log", "redis.log", "dns.log", "ssl.log"]
        .iter()
        .filter(|l| logs.join(l).exists())
        .flat_map(|l| read_log(&logs.join(l)).into_iter().map(|r| r["uid"].clone()))
        .collect();
    let mut indexed = BTreeSet::new();
    let mut offsets = 0;
    for f in kept_files(&pd) {
        for (uid, o) in read_index(&f.with_extension("idx")).0 {
            offsets += o.len();
            indexed.insert(uid);
        }
    }
    assert!(!parsed.is_empty());
    // Every kept packet is indexed (none of no connection): those of the
    // connections that made transactions, and of connections to a parser's
    // port that carried no payload (a parser is chosen by port at the SYN).
    assert_eq!(offsets, kept_records(&pd).len());
    assert!(indexed.is_superset(&parsed));
    let conns = read_log(&logs.join("conn.log"));
    for uid in indexed.difference(&parsed) {
        let c = conns.iter().find(|c| &c["uid"] == uid).unwrap();
        assert!(["80", "8080", "3306", "5432", "6379", "443"].contains(&c["id.resp_p"].as_str()), "{c:?}");
        assert!(["0", "-"].contains(&c["orig_bytes"].as_str()) && ["0", "-"].contains(&c["resp_bytes"].as_str()), "{c:?}");
    }
    // A connection of no parser (the ICMP and UDP probes of sample.pcap) is not kept.
    assert!(conns.iter().any(|c| !indexed.contains(&c["uid"]) && !parsed.contains(&c["uid"])));
}
