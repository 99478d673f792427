//! AMQP 0-9-1 made here, checked against what the broker answered: a real
//! RabbitMQ (Debian's `rabbitmq-server`, started once for this test binary
//! in a network namespace, bounded wait) and a `pika` client that declares,
//! binds, publishes in confirm mode (one message unroutable and returned),
//! gets, consumes and acknowledges, asks for a queue that does not exist
//! (the broker closes the channel, 404), deletes and closes, printing each
//! method and the outcome it saw; tcpdump captures the loopback, `wirelog
//! read` makes amqp.log and a store, and each line the client printed is
//! one record with the same outcome.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::live::text;
use common::lo::{have, settle, LoNs, Reap};

/// The client: one line per exchange it saw (`<method>\t<queue or routing
/// key or ->\t<ok|error>`).
const CLIENT: &str = r#"
import pika, sys
def say(m, k, s): print("%s\t%s\t%s" % (m, k or "-", s)); sys.stdout.flush()
c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", 5672))
ch = c.channel()
ch.exchange_declare("logs", exchange_type="fanout", durable=True); say("exchange.declare", "logs", "ok")
q = ch.queue_declare("", exclusive=True).method.queue; say("queue.declare", q, "ok")
ch.queue_bind(q, "logs"); say("queue.bind", q, "ok")
ch.basic_qos(prefetch_count=10); say("basic.qos", None, "ok")
ch.confirm_delivery(); say("confirm.select", None, "ok")
for i in range(3):
    ch.basic_publish("logs", "", b"m%d" % i * 100, pika.BasicProperties(content_type="text/plain")); say("basic.publish", "", "ok")
try:
    ch.basic_publish("", "nowhere", b"lost", mandatory=True)
except pika.exceptions.UnroutableError:
    say("basic.publish", "nowhere", "ok"); say("basic.return", "nowhere", "error")
got = 0
while True:
    m, props, body = ch.basic_get(q, auto_ack=True)
    if m is None:
        say("basic.get", q, "ok"); break
    got += 1; say("basic.get", q, "ok")
ch.basic_publish("logs", "", b"again", pika.BasicProperties(content_type="text/plain")); say("basic.publish", "", "ok")
for m, props, body in ch.consume(q, inactivity_timeout=2):
    if m is None: break
    say("basic.deliver", "", "ok")
    ch.basic_ack(m.delivery_tag); say("basic.ack", None, "ok")
ch.cancel(); say("basic.cancel", None, "ok")
try:
    ch.queue_declare("nosuch", passive=True)
except pika.exceptions.ChannelClosedByBroker as e:
    say("queue.declare", "nosuch", "error"); say("channel.close", None, "error" if e.reply_code >= 300 else "ok")
ch = c.channel()
ch.queue_delete(q); say("queue.delete", q, "ok")
ch.exchange_delete("logs"); say("exchange.delete", None, "ok")
c.close(); say("channel.close", None, "ok"); say("connection.close", None, "ok")
"#;

#[test]
fn records_match_what_the_broker_answered() {
    let pika = Command::new("python3").args(["-c", "import pika"]).output().is_ok_and(|o| o.status.success());
    if !(have("tcpdump") && pika && Path::new("/usr/lib/rabbitmq/bin/rabbitmq-server").exists() && common::live::is_root()) {
        common::live::skip("needs root, rabbitmq-server, python3 with pika and tcpdump");
        return;
    }
    let started = std::time::Instant::now();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("amqp-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for d in ["mnesia", "log"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    std::fs::write(dir.join("plugins"), "[].\n").unwrap();
    std::fs::write(dir.join("rabbitmq.conf"), "loopback_users = none\n").unwrap();
    let ns = LoNs::new("amqp");
    let _reap = Reap(&ns);
    let pcap = dir.join("amqp.pcap");
    let tcpdump = ns.tcpdump(&pcap, &["tcp", "port", "5672"]);
    // The broker as this user, its files in the test's directory, one
    // scheduler, listening on loopback only.
    let d = dir.to_str().unwrap();
    let env = format!(
        "export HOME={d} RABBITMQ_NODENAME=rabbit@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT=5672 \
         RABBITMQ_MNESIA_BASE={d}/mnesia RABBITMQ_LOG_BASE={d}/log RABBITMQ_ENABLED_PLUGINS_FILE={d}/plugins \
         RABBITMQ_CONFIG_FILE={d}/rabbitmq RABBITMQ_PID_FILE={d}/pid RABBITMQ_FEATURE_FLAGS_FILE={d}/ff \
         ERL_EPMD_ADDRESS=127.0.0.1 RABBITMQ_LOGS=- RABBITMQ_SERVER_ERL_ARGS='+S 1:1'; exec /usr/lib/rabbitmq/bin/rabbitmq-server"
    );
    let log = dir.join("rabbitmq.log.txt");
    let mut server = ns.spawn("rabbitmq-server", &["bash", "-c", &env], &log);
    server.wait_ready(Duration::from_secs(60), &log, || ns.accepts(5672));
    let up = started.elapsed();
    let o = ns.cmd(&["timeout", "60", "python3", "-c", CLIENT]).output().unwrap();
    assert!(o.status.success(), "client: {}", text(&o));
    settle(&pcap);
    tcpdump.interrupt();
    let seen: Vec<Vec<String>> = String::from_utf8_lossy(&o.stdout).lines().map(|l| l.split('\t').map(String::from).collect()).collect();

    let logs = dir.join("logs");
    let store = dir.join("store");
    common::read_pcap(&pcap, &logs, Some(&store), &["--quiet"]);
    let rows = common::read_log(&logs.join("amqp.log"));
    let mut used = vec![false; rows.len()];
    for line in &seen {
        let (method, key, status) = (line[0].as_str(), line[1].as_str(), line[2].as_str());
        let at = (0..rows.len())
            .find(|&i| {
                let r = &rows[i];
                !used[i] && r["method"] == method && (key == "-" || r["queue"] == key || r["exchange"] == key || r["routing_key"] == key || (key.is_empty() && r["routing_key"] == "(empty)"))
            })
            .unwrap_or_else(|| panic!("{line:?} not in\n{rows:#?}"));
        used[at] = true;
        let r = &rows[at];
        if status != "-" {
            assert_eq!(r["status"], status, "{line:?}: {r:?}");
        }
        match method {
            "basic.publish" => assert_eq!(r["answer"], "basic.ack", "confirmed: {r:?}"),
            "basic.deliver" | "basic.return" => assert_eq!(r["from_server"], "T", "{r:?}"),
            "channel.close" if status == "error" => assert_eq!((r["from_server"].as_str(), r["reply_code"].as_str()), ("T", "404"), "{r:?}"),
            "queue.declare" if key == "nosuch" => assert_eq!((r["flags"].as_str(), r["answer"].as_str(), r["reply_code"].as_str()), ("passive", "channel.close", "404"), "{r:?}"),
            _ => {}
        }
        if method == "basic.publish" && key.is_empty() {
            assert_eq!(r["exchange"], "logs", "{r:?}");
            assert_eq!(r["content_type"], "text/plain", "{r:?}");
            assert_ne!(r["latency"], "-", "{r:?}");
        }
    }
    // Nothing the client did twice: the records of the methods it named
    // are exactly its lines.
    for r in rows.iter().zip(&used).filter(|(_, u)| !**u).map(|(r, _)| r) {
        assert!(!seen.iter().any(|l| l[0] == r["method"]), "a record the client did not see: {r:?}");
    }
    // Gets: as many get-ok as messages, then one get-empty.
    let answers: Vec<_> = rows.iter().filter(|r| r["method"] == "basic.get").map(|r| r["answer"].as_str()).collect();
    assert_eq!(answers, ["basic.get-ok", "basic.get-ok", "basic.get-ok", "basic.get-empty"]);
    let bodies: Vec<_> = rows.iter().filter(|r| r["method"] == "basic.get" && r["answer"] == "basic.get-ok").map(|r| r["body_bytes"].as_str()).collect();
    assert_eq!(bodies, ["200", "200", "200"]);
    // The connection's set-up is recorded too.
    for m in ["connection.start", "connection.tune", "connection.open", "channel.open"] {
        assert!(rows.iter().any(|r| r["method"] == m && r["status"] == "ok"), "{m} in {rows:#?}");
    }

    // The store, the query's default grouping, conn.log's service.
    let csv = common::query_csv(&store, "amqp", &["--top", "100"]);
    assert!(csv.lines().next().unwrap().starts_with("method,exchange,queue,"), "{csv}");
    assert!(csv.lines().any(|l| l.starts_with("basic.publish,logs,,4,0,")), "{csv}");
    let conns = common::read_log(&logs.join("conn.log"));
    assert!(conns.iter().any(|c| c["service"] == "amqp"), "{conns:#?}");
    // tshark's AMQP dissector on the same capture: as many basic.publish
    // methods as publish records.
    if have("tshark") {
        let t = Command::new("tshark").args(["-r", pcap.to_str().unwrap(), "-Y", "amqp.method.class == 60 && amqp.method.method == 40", "-T", "fields", "-e", "frame.number"]).output().unwrap();
        assert!(t.status.success(), "{}", text(&t));
        let theirs = String::from_utf8_lossy(&t.stdout).lines().count();
        let ours = rows.iter().filter(|r| r["method"] == "basic.publish").count();
        assert_eq!(ours, theirs, "publishes: wirelog vs tshark");
    }
    println!("amqp live test: {:.1} s (broker up after {:.1} s)", started.elapsed().as_secs_f64(), up.as_secs_f64());
}
