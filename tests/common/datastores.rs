//! Captures of issue 33's six protocols from real clients and servers
//! (tests/datastores_done.rs and tests/clickhouse.rs read them).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Packetbeat's second set (MongoDB, Memcached text/binary/UDP, AMQP,
/// Cassandra), Kafka 4.1.1's (tests/data), and MQTT's made into `dir` by
/// bench/gen_wire.py (read them with -C: its checksums are 0).
pub fn datastore_captures(dir: &Path) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pb2 = root.join("../shared/testdata/packetbeat2/pcaps");
    let mqtt = dir.join("mqtt.pcap");
    let o = Command::new("python3").arg(root.join("bench/gen_wire.py")).args(["mqtt", "60"]).arg(&mqtt).output().unwrap();
    assert!(o.status.success(), "gen_wire.py: {}", String::from_utf8_lossy(&o.stderr));
    vec![
        pb2.join("mongodb_more_rows.pcap"),
        pb2.join("mongodb_op_msg_opcode.pcap"),
        pb2.join("memcache/memcache_bin_tcp_counter_ops.pcap"),
        pb2.join("memcache/memcache_text_tcp_single_load_store.pcap"),
        pb2.join("memcache/memcache_text_udp_multi_store.pcap"),
        pb2.join("amqp_publish.pcap"),
        pb2.join("cassandra/v4/cassandra_create_keyspace.pcap"),
        pb2.join("cassandra/v4/cassandra_select.pcap"),
        root.join("tests/data/kafka-kraft-4.1.1.pcap"),
        mqtt,
    ]
}

