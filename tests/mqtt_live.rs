//! MQTT made here, checked against what the broker answered: a real
//! Mosquitto in a network namespace, a Python client (raw sockets, MQTT
//! 3.1.1 and 5) that connects, subscribes, publishes with QoS 0, 1 and 2
//! (and gets its own messages delivered back), pings, unsubscribes,
//! disconnects, and is refused once (an unknown protocol level), printing
//! every answer it saw; tcpdump captures the loopback, `wirelog read` makes
//! mqtt.log and a store, and each record agrees with what the client
//! printed.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::live::text;
use common::lo::{have, settle, wait_for, LoNs};

/// The client: one line per exchange it started (`<type>\t<topic>\t<code>`,
/// `-` for none) and per message delivered to it (`deliver\t<topic>\t<qos>`).
const CLIENT: &str = r#"
import socket, struct, sys
def vbi(n):
    out = b""
    while True:
        b = n % 128; n //= 128
        out += bytes([b | (0x80 if n else 0)])
        if not n: return out
def s16(s): return struct.pack(">H", len(s)) + s
def pkt(t, flags, body): return bytes([t << 4 | flags]) + vbi(len(body)) + body
class Client:
    def __init__(self, level):
        self.level = level
        self.s = socket.create_connection(("127.0.0.1", 1883))
        self.f = self.s.makefile("rb")
    def props(self, p=b""): return vbi(len(p)) + p if self.level >= 5 else b""
    def read(self):
        h = self.f.read(1)
        if not h: return None, None, b""
        n = 0; mul = 1
        while True:
            b = self.f.read(1)[0]; n += (b & 127) * mul; mul *= 128
            if b < 128: break
        return h[0] >> 4, h[0] & 15, self.f.read(n)
    def expect(self, want):
        """Reads until a packet of type `want`, answering deliveries."""
        while True:
            t, fl, body = self.read()
            if t is None: return None
            if t == 3:
                qos = (fl >> 1) & 3
                tl = struct.unpack(">H", body[:2])[0]
                topic = body[2:2 + tl].decode()
                print("deliver\t%s\t%d" % (topic, qos))
                if qos:
                    pid = body[2 + tl:4 + tl]
                    self.s.sendall(pkt(4 if qos == 1 else 5, 0, pid))
                continue
            if t == 6:  # PUBREL of a delivered QoS 2 message
                self.s.sendall(pkt(7, 0, body[:2])); continue
            if t == want: return body
            raise SystemExit("unexpected packet %d waiting for %d" % (t, want))
    def code(self, body, at):
        return body[at] if len(body) > at else 0
    def connect(self, cid):
        self.s.sendall(pkt(1, 0, s16(b"MQTT") + bytes([self.level, 2]) + struct.pack(">H", 60) + self.props() + s16(cid)))
        b = self.expect(2)
        print("connect\t-\t%d" % (b[1] if b else 255))
        return b is not None and b[1] == 0
    def subscribe(self, pid, topic, qos):
        self.s.sendall(pkt(8, 2, struct.pack(">H", pid) + self.props() + s16(topic) + bytes([qos])))
        b = self.expect(9)
        codes = b[2 + (1 if self.level >= 5 else 0):]
        print("subscribe\t%s\t%d" % (topic.decode(), codes[0]))
    def unsubscribe(self, pid, topic):
        self.s.sendall(pkt(10, 2, struct.pack(">H", pid) + self.props() + s16(topic)))
        b = self.expect(11)
        code = b[3] if self.level >= 5 else None
        print("unsubscribe\t%s\t%s" % (topic.decode(), "-" if code is None else code))
    def publish(self, topic, qos, pid, payload, props=b""):
        vh = s16(topic) + (struct.pack(">H", pid) if qos else b"") + self.props(props)
        self.s.sendall(pkt(3, qos << 1, vh + payload))
        if qos == 0:
            print("publish\t%s\t-" % topic.decode()); return
        if qos == 1:
            b = self.expect(4)
            code = self.code(b, 2) if self.level >= 5 else "-"
        else:
            b = self.expect(5)
            self.s.sendall(pkt(6, 2, b[:2]))
            b = self.expect(7)
            code = self.code(b, 2) if self.level >= 5 else "-"
        print("publish\t%s\t%s" % (topic.decode(), code))
    def ping(self):
        self.s.sendall(pkt(12, 0, b""))
        self.expect(13)
        print("pingreq\t-\t-")
    def disconnect(self):
        self.s.sendall(pkt(14, 0, b"\x00\x00" if self.level >= 5 else b""))
        print("disconnect\t-\t%s" % ("0" if self.level >= 5 else "-"))
        self.s.close()

c = Client(4)
c.connect(b"sub-311")
c.subscribe(1, b"t/#", 2)
c.publish(b"t/a", 0, 0, b"zero")
c.publish(b"t/b", 1, 2, b"one" * 100)
c.publish(b"t/c", 2, 3, b"two" * 2000)
c.ping()
c.unsubscribe(4, b"t/#")
c.publish(b"t/d", 1, 5, b"nobody")
c.disconnect()

c = Client(5)
c.connect(b"client-v5")
c.subscribe(1, b"v5/#", 1)
c.publish(b"v5/x", 1, 7, b"hello", props=b"\x03" + s16(b"text/plain"))
c.publish(b"v5/y", 2, 8, b"world")
c.ping()
c.disconnect()

c = Client(6)
c.connect(b"too-new")
"#;

#[test]
fn records_match_what_the_broker_answered() {
    if !(have("mosquitto") && have("python3") && have("tcpdump") && common::live::is_root()) {
        common::live::skip("needs root, mosquitto, python3 and tcpdump");
        return;
    }
    let started = std::time::Instant::now();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mqtt-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("mosquitto.conf");
    // One plain listener on loopback, anonymous clients, nothing kept.
    std::fs::write(&conf, "listener 1883 127.0.0.1\nallow_anonymous true\npersistence false\n").unwrap();
    let ns = LoNs::new("mq");
    let pcap = dir.join("mqtt.pcap");
    let tcpdump = ns.tcpdump(&pcap, &["tcp", "port", "1883"]);
    let _server = ns.spawn("mosquitto", &["mosquitto", "-c", conf.to_str().unwrap()], &dir.join("mosquitto.log.txt"));
    wait_for("mosquitto", Duration::from_secs(20), || ns.accepts(1883));
    let o = ns.cmd(&["timeout", "60", "python3", "-c", CLIENT]).output().unwrap();
    assert!(o.status.success(), "client: {}", text(&o));
    settle(&pcap);
    tcpdump.interrupt();
    let seen: Vec<Vec<String>> = String::from_utf8_lossy(&o.stdout).lines().map(|l| l.split('\t').map(String::from).collect()).collect();

    let logs = dir.join("logs");
    let store = dir.join("store");
    common::read_pcap(&pcap, &logs, Some(&store), &["--quiet"]);
    let rows = common::read_log(&logs.join("mqtt.log"));
    // Every exchange the client started, and every delivery, once.
    assert_eq!(rows.len(), seen.len(), "client saw:\n{seen:#?}\nlog:\n{rows:#?}");
    let mut levels = Vec::new();
    // Each line takes the first record of its kind not taken yet (the
    // sessions ran one after the other, so their records come in order).
    let mut used = vec![false; rows.len()];
    for line in &seen {
        let (kind, topic, code) = (line[0].as_str(), line[1].as_str(), line[2].as_str());
        let (ty, from_server) = if kind == "deliver" { ("publish", "T") } else { (kind, "F") };
        let at = (0..rows.len())
            .find(|&i| {
                let r = &rows[i];
                !used[i] && r["packet_type"] == ty && r["from_server"] == from_server && (topic == "-" || r["topic"] == topic)
            })
            .unwrap_or_else(|| panic!("{line:?} not in\n{rows:#?}"));
        used[at] = true;
        let r = &rows[at];
        match kind {
            "deliver" => {
                assert_eq!(r["qos"], code, "{line:?}: {r:?}");
                assert_eq!(r["status"], "ok", "{line:?}: {r:?}");
            }
            "connect" => {
                levels.push(r["version"].clone());
                let code: u8 = code.parse().unwrap();
                assert_eq!(r["reason_code"], code.to_string(), "{line:?}: {r:?}");
                assert_eq!(r["status"], if code == 0 { "ok" } else { "error" }, "{line:?}: {r:?}");
            }
            _ => {
                if code != "-" {
                    let c: u8 = code.parse().unwrap();
                    assert_eq!(r["reason_code"], code, "{line:?}: {r:?}");
                    assert_eq!(r["status"], if c < 0x80 { "ok" } else { "error" }, "{line:?}: {r:?}");
                } else {
                    assert_eq!(r["status"], "ok", "{line:?}: {r:?}");
                }
            }
        }
        if kind == "publish" {
            let payload: usize = match topic {
                "t/a" => 4,
                "t/b" => 300,
                "t/c" => 6000,
                "t/d" => 6,
                _ => 5,
            };
            assert_eq!(r["payload_bytes"], payload.to_string(), "{line:?}: {r:?}");
            if r["qos"] != "0" {
                assert_ne!(r["latency"], "-", "{line:?}: {r:?}");
            }
        }
    }
    assert_eq!(levels, ["4", "5", "6"]);
    let clients: Vec<_> = rows.iter().filter(|r| r["packet_type"] == "connect").map(|r| r["client_id"].as_str()).collect();
    assert_eq!(clients, ["sub-311", "client-v5", "too-new"]);
    // Delivered messages: t/a (QoS 0), t/b (1), t/c (2 granted), v5/x (1), v5/y (1).
    let delivered = rows.iter().filter(|r| r["from_server"] == "T").count();
    assert_eq!(delivered, 5, "{rows:#?}");

    // The store holds the same, under the same names; conn.log names the service.
    let csv = common::query_csv(&store, "mqtt", &["--top", "100"]);
    assert!(csv.lines().next().unwrap().starts_with("packet_type,topic,"), "{csv}");
    for line in ["publish,t/c,2,0,", "subscribe,t/#,1,0,", "connect,,3,1,", "pingreq,,2,0,"] {
        assert!(csv.lines().any(|l| l.starts_with(line)), "{line} in\n{csv}");
    }
    let conns = common::read_log(&logs.join("conn.log"));
    assert!(conns.iter().filter(|c| c["service"] == "mqtt").count() >= 3, "{conns:#?}");
    // tshark's MQTT dissector, a second reader of the same capture: as
    // many PUBLISH packets as publish records, and the same topics.
    if have("tshark") {
        let t = Command::new("tshark")
            .args(["-r", pcap.to_str().unwrap(), "-Y", "mqtt.msgtype == 3", "-T", "fields", "-e", "mqtt.topic"])
            .output()
            .unwrap();
        assert!(t.status.success(), "{}", text(&t));
        let mut theirs: Vec<String> = String::from_utf8_lossy(&t.stdout).lines().flat_map(|l| l.split(',').map(String::from).collect::<Vec<_>>()).collect();
        let mut ours: Vec<String> = rows.iter().filter(|r| r["packet_type"] == "publish").map(|r| r["topic"].clone()).collect();
        theirs.sort();
        ours.sort();
        assert_eq!(ours, theirs, "publish topics: wirelog vs tshark");
    }
    println!("mqtt live test: {:.1} s", started.elapsed().as_secs_f64());
}
