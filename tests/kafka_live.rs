//! Kafka made here, checked against what the broker answered: one Kafka
//! broker in KRaft mode (Apache Kafka's jars from Maven Central, fetched by
//! scripts/test.sh into `$WIRELOG_KAFKA_LIBS`; a 256 MiB heap; started once
//! for this test binary in a network namespace, bounded wait) and a
//! kafka-python client that creates a topic, produces with acks all and
//! acks 0, asks for a topic that does not exist, consumes in a group and
//! commits; tcpdump captures the loopback, `wirelog read` makes kafka.log
//! and a store. tshark's Kafka dissector lists every request in the
//! capture (API key, version, correlation id) and the error codes of the
//! responses: each request is one record with the same API, version and
//! correlation id, answered, with the outcome tshark read; the records and
//! messages produced and consumed are the client's.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::live::text;
use common::lo::{have, settle, LoNs, Reap};

/// The client: admin, producers (acks all, acks 0) and a consumer in a
/// group; it prints how many messages it consumed.
const CLIENT: &str = r#"
import sys
from kafka import KafkaProducer, KafkaConsumer, KafkaAdminClient
from kafka.admin import NewTopic

a = KafkaAdminClient(bootstrap_servers="127.0.0.1:9092", client_id="wl-admin")
a.create_topics([NewTopic("orders", 2, 1)])
a.close()
p = KafkaProducer(bootstrap_servers="127.0.0.1:9092", client_id="wl-producer", acks="all", linger_ms=0)
for i in range(6):
    p.send("orders", b"order-%d" % i, partition=i % 2).get(timeout=10)
p.close()
q = KafkaProducer(bootstrap_servers="127.0.0.1:9092", client_id="wl-fire", acks=0, linger_ms=0)
for i in range(3):
    q.send("orders", b"fire-%d" % i, partition=0)
q.flush(); q.close()
c = KafkaConsumer("orders", bootstrap_servers="127.0.0.1:9092", client_id="wl-consumer", group_id="g1",
                  auto_offset_reset="earliest", consumer_timeout_ms=3000, fetch_max_wait_ms=300)
n = sum(1 for _ in c)
c.commit(); c.close()
print("consumed\t%d" % n, file=sys.stderr)
"#;

const SERVER_PROPERTIES: &str = "process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:9093
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
advertised.listeners=PLAINTEXT://127.0.0.1:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
";

#[test]
fn records_match_what_the_broker_answered() {
    let libs = PathBuf::from(std::env::var("WIRELOG_KAFKA_LIBS").unwrap_or_else(|_| format!("{}/.cache/wirelog/kafka-4.1.1/lib", std::env::var("HOME").unwrap_or_default())));
    let client = Command::new("python3").args(["-c", "import kafka"]).output().is_ok_and(|o| o.status.success());
    if !(have("tcpdump") && have("tshark") && have("java") && client && libs.join("kafka_2.13-4.1.1.jar").exists() && common::live::is_root()) {
        common::live::skip("needs root, java, tshark, Kafka's jars in $WIRELOG_KAFKA_LIBS (scripts/test.sh), kafka-python and tcpdump");
        return;
    }
    let started = std::time::Instant::now();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("kafka-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let props = dir.join("server.properties");
    std::fs::write(&props, format!("{SERVER_PROPERTIES}log.dirs={}\n", dir.join("data").display())).unwrap();
    let cp = format!("{}/*", libs.display());
    let fmt = Command::new("java")
        .args(["-Xmx128m", "-cp", &cp, "kafka.tools.StorageTool", "format", "-t", "q1Sh-9_ISia_zwGINzRvyQ", "-c"])
        .arg(&props)
        .output()
        .unwrap();
    assert!(fmt.status.success(), "format: {}", text(&fmt));
    let ns = LoNs::new("kafka");
    let _reap = Reap(&ns);
    let pcap = dir.join("kafka.pcap");
    let tcpdump = ns.tcpdump(&pcap, &["tcp", "port", "9092"]);
    let log = dir.join("kafka.log.txt");
    let mut server = ns.spawn(
        "kafka",
        &["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", &cp, "kafka.Kafka", props.to_str().unwrap()],
        &log,
    );
    server.wait_ready(Duration::from_secs(60), &log, || std::fs::read_to_string(&log).unwrap_or_default().contains("Kafka Server started"));
    let up = started.elapsed();
    let o = ns.cmd(&["timeout", "90", "python3", "-c", CLIENT]).output().unwrap();
    assert!(o.status.success(), "client: {}", text(&o));
    assert!(text(&o).contains("consumed\t9"), "{}", text(&o));
    settle(&pcap);
    tcpdump.interrupt();

    let logs = dir.join("logs");
    let store = dir.join("store");
    common::read_pcap(&pcap, &logs, Some(&store), &["--quiet"]);
    let rows = common::read_log(&logs.join("kafka.log"));
    // tshark's requests (to the broker's port) and the responses' error
    // codes by correlation id and connection (client port).
    let t = Command::new("tshark")
        .args(["-r", pcap.to_str().unwrap(), "-Y", "kafka && tcp.dstport == 9092", "-T", "fields", "-e", "tcp.srcport", "-e", "kafka.request_key", "-e", "kafka.api_version", "-e", "kafka.correlation_id"])
        .output()
        .unwrap();
    assert!(t.status.success(), "{}", text(&t));
    let requests: Vec<Vec<String>> = String::from_utf8_lossy(&t.stdout).lines().map(|l| l.split('\t').map(String::from).collect()).filter(|l: &Vec<String>| l.len() == 4 && !l[1].is_empty()).collect();
    let t = Command::new("tshark")
        .args(["-r", pcap.to_str().unwrap(), "-Y", "kafka && tcp.srcport == 9092", "-T", "fields", "-e", "tcp.dstport", "-e", "kafka.correlation_id", "-e", "kafka.error"])
        .output()
        .unwrap();
    let responses: Vec<Vec<String>> = String::from_utf8_lossy(&t.stdout).lines().map(|l| l.split('\t').map(String::from).collect()).collect();
    // The requests whose version tshark 4.0's dissector does not know: it
    // flags them with its expert info `kafka.unsupported_api_version`
    // (epan/dissectors/packet-kafka.c, `ei_kafka_unsupported_api_version`)
    // and reads their responses with an older layout, so the error codes it
    // prints there are other fields (Metadata v13's came out as
    // "0,3216,1,0,-32768"): no reference for those outcomes.
    let t = Command::new("tshark")
        .args(["-r", pcap.to_str().unwrap(), "-Y", "kafka.unsupported_api_version && tcp.dstport == 9092", "-T", "fields", "-e", "tcp.srcport", "-e", "kafka.correlation_id"])
        .output()
        .unwrap();
    assert!(t.status.success(), "{}", text(&t));
    let unknown_version: Vec<(String, String)> = String::from_utf8_lossy(&t.stdout).lines().filter_map(|l| l.split_once('\t')).map(|(p, c)| (p.to_string(), c.to_string())).collect();
    let mut outcomes_compared = 0;
    assert!(requests.len() > 20, "{requests:?}");
    assert_eq!(rows.len(), requests.len(), "records vs tshark's requests:\n{rows:#?}\n{requests:?}");
    let mut used = vec![false; rows.len()];
    for q in &requests {
        let (port, key, version, corr) = (&q[0], &q[1], &q[2], &q[3]);
        let at = (0..rows.len())
            .find(|&i| !used[i] && rows[i]["id.orig_p"] == *port && rows[i]["correlation_id"] == *corr && rows[i]["api_key"] == *key)
            .unwrap_or_else(|| panic!("{q:?} not in\n{rows:#?}"));
        used[at] = true;
        let r = &rows[at];
        assert_eq!(r["api_version"], *version, "{q:?}: {r:?}");
        let answer = responses.iter().find(|a| a[0] == *port && a[1] == *corr);
        match answer {
            None => {
                assert_eq!((r["api"].as_str(), r["acks"].as_str(), r["status"].as_str()), ("produce", "0", "ok"), "no response: {r:?}");
            }
            Some(a) => {
                // tshark 4.0's dissector predates some versions the broker
                // speaks (Metadata v13, CreateTopics v7) and reads other
                // fields there as error codes (-9702, -3061); Kafka's codes
                // are -1 to 133 (the protocol guide's table).
                let errors: Vec<i64> = a.get(2).map(|e| e.split(',').filter_map(|x| x.parse().ok()).filter(|x| *x != 0 && (-1..=133).contains(x)).collect()).unwrap_or_default();
                let status = if errors.is_empty() { "ok" } else { "error" };
                // The outcome of the APIs whose responses are read, where
                // tshark reads them too (not OffsetFetch v8+'s groups, not
                // FindCoordinator v4+'s coordinators, which tshark 4.0 does
                // not dissect: its COORDINATOR_NOT_AVAILABLE while the
                // offsets topic is made is checked below); the others are
                // paired only.
                if ["0", "1", "2", "3", "8", "11", "12", "14", "18"].contains(&key.as_str()) && !unknown_version.contains(&(port.clone(), corr.clone())) {
                    assert_eq!(r["status"], status, "{q:?} answered {a:?}: {r:?}");
                    outcomes_compared += 1;
                }
                assert_ne!(r["latency"], "-", "{r:?}");
            }
        }
    }
    println!("kafka: {outcomes_compared} outcomes compared with tshark's; {} requests of versions tshark does not know: {unknown_version:?}", unknown_version.len());
    // kafka-python, against a 4.1 broker, speaks versions newer than tshark 4.0's
    // table for most APIs (45 of 51 requests in a run on 2026-11-29): only
    // the others have a reading of tshark's to compare with.
    assert!(outcomes_compared > 0, "no outcome had tshark's reading to compare with ({} requests)", requests.len());
    // The consumer asked for its coordinator until the broker had one: the
    // last answer for the group is a success.
    let coord: Vec<_> = rows.iter().filter(|r| r["api"] == "find_coordinator" && r["group"] == "g1").map(|r| (r["status"].as_str(), r["error"].as_str())).collect();
    assert_eq!(coord.last(), Some(&("ok", "-")), "{coord:?}");
    assert!(coord.iter().all(|c| *c == ("ok", "-") || *c == ("error", "COORDINATOR_NOT_AVAILABLE")), "{coord:?}");
    let sum = |api: &str, col: &str| -> u64 { rows.iter().filter(|r| r["api"] == api).filter_map(|r| r[col].parse::<u64>().ok()).sum() };
    assert_eq!(sum("produce", "records"), 9);
    assert_eq!(sum("fetch", "records"), 9);
    let acks: Vec<_> = rows.iter().filter(|r| r["api"] == "produce").map(|r| r["acks"].as_str()).collect();
    assert_eq!(acks.iter().filter(|a| **a == "-1").count(), 6);
    // The acks-0 producer's three messages (it may batch them), sent
    // without a response.
    assert!(acks.contains(&"0"));
    let fire: u64 = rows.iter().filter(|r| r["acks"] == "0").map(|r| r["records"].parse::<u64>().unwrap()).sum();
    assert_eq!(fire, 3);
    assert!(rows.iter().filter(|r| r["api"] == "fetch").all(|r| r["max_wait_ms"] == "300"), "{rows:#?}");

    // The store and the query's default grouping (api, topic).
    let csv = common::query_csv(&store, "kafka", &["--top", "100"]);
    assert!(csv.lines().next().unwrap().starts_with("api,topic,"), "{csv}");
    assert!(csv.lines().any(|l| l.starts_with("produce,orders,") && l.split(',').nth(3) == Some("0")), "{csv}");
    println!("kafka live test: {:.1} s (broker up after {:.1} s)", started.elapsed().as_secs_f64(), up.as_secs_f64());
}
