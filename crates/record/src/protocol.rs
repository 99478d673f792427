//! The protocol table: every application protocol wirelog parses, with the
//! names the rest of the code derives from it (the store's kinds and their
//! directories, the log file names, the query command's kinds, conn.log's
//! `service`) and the ports a connection is expected on.
//!
//! Adding a protocol adds one entry here; its parser (`wirelog_parse`), its
//! detail type ([`crate::Detail`]) and the columns it writes (`wirelog_sink`'s
//! transaction log, `wirelog_store`'s schema) are the other places.

/// Declares [`Protocol`] and its table in one list, so a variant cannot exist
/// without its row.
macro_rules! protocols {
    ($($(#[$doc:meta])* $v:ident { name: $name:literal, service: $service:literal, log: $log:literal, ports: $ports:expr, what: $what:literal $(,)? })*) => {
        /// The protocols parsed; [`Protocol::ALL`] is their order everywhere
        /// (store directories, summaries, query kinds).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Protocol {
            $($(#[$doc])* $v,)*
        }

        impl Protocol {
            pub const ALL: [Protocol; [$(Protocol::$v),*].len()] = [$(Protocol::$v),*];

            /// Short name: the command line's (`wirelog query mysql`), the
            /// store's directory, the log's file stem (`mysql.log`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Protocol::$v => $name,)*
                }
            }

            /// The name Zeek puts in conn.log's `service` field.
            pub const fn service(self) -> &'static str {
                match self {
                    $(Protocol::$v => $service,)*
                }
            }

            /// conn.log's `service` when TLS was found inside the protocol
            /// (MySQL's SSL request, PostgreSQL's SSLRequest): Zeek names
            /// both analyzers, `mysql,ssl`.
            pub const fn service_over_tls(self) -> &'static str {
                match self {
                    $(Protocol::$v => concat!($service, ",ssl"),)*
                }
            }

            /// The stem of its log file (`ssl` for `ssl.log`): Zeek's log
            /// name where Zeek has the log, else the short name.
            pub const fn log(self) -> &'static str {
                match self {
                    $(Protocol::$v => $log,)*
                }
            }

            /// What one transaction is, for people (`wirelog query --help`).
            pub const fn what(self) -> &'static str {
                match self {
                    $(Protocol::$v => $what,)*
                }
            }

            /// Default server ports (TCP; for DNS also UDP).
            pub const fn default_ports(self) -> &'static [u16] {
                match self {
                    $(Protocol::$v => $ports,)*
                }
            }
        }
    };
}

/// The table itself: hands every row to the macro `$m` (by name), which is
/// how [`Protocol`] here and the store's `Kind` are generated from the same
/// rows. A row: `Variant { name, service, log, ports, what }`.
#[macro_export]
macro_rules! protocol_table {
    ($m:ident) => {
        $m! {
            /// HTTP/1.0 and 1.1.
            Http { name: "http", service: "http", log: "http", ports: &[80, 8000, 8080, 8888], what: "HTTP/1.x requests and HTTP/2 streams" }
            /// MySQL and MariaDB.
            Mysql { name: "mysql", service: "mysql", log: "mysql", ports: &[3306], what: "MySQL/MariaDB commands" }
            /// PostgreSQL (frontend/backend protocol v3).
            Pgsql { name: "pgsql", service: "postgresql", log: "pgsql", ports: &[5432], what: "PostgreSQL queries" }
            /// Redis (RESP2 and RESP3).
            Redis { name: "redis", service: "redis", log: "redis", ports: &[6379], what: "Redis commands" }
            /// DNS over UDP and TCP. Ports: Zeek's `DNS::ports`
            /// (base/protocols/dns/main.zeek: 53, 137 NetBIOS name service,
            /// 5353 mDNS, 5355 LLMNR; the same message format).
            Dns { name: "dns", service: "dns", log: "dns", ports: &[53, 137, 5353, 5355], what: "DNS queries" }
            /// TLS (SSL 3.0 to TLS 1.3) handshakes, one per TLS session. Ports:
            /// Zeek's `SSL::ssl_ports` (base/protocols/ssl/main.zeek: 443, 465,
            /// 563, 585, 614, 636, 989, 990, 992, 993, 995, 5223) plus DNS over
            /// TLS (853), IRCS (994), SIP-TLS (5061), WinRM (5986) and 8443.
            Tls { name: "tls", service: "ssl", log: "ssl", ports: &[443, 465, 563, 585, 614, 636, 853, 989, 990, 992, 993, 994, 995, 5061, 5223, 5986, 8443], what: "TLS handshakes" }
            /// Memcached, text and binary protocols (recognised by its port).
            Memcached { name: "memcached", service: "memcached", log: "memcached", ports: &[11211], what: "Memcached commands" }
            /// MongoDB's wire protocol (OP_MSG and the legacy opcodes).
            Mongodb { name: "mongodb", service: "mongodb", log: "mongodb", ports: &[27017], what: "MongoDB operations" }
            /// MQTT 3.1, 3.1.1 and 5 (port, or a CONNECT's first bytes).
            Mqtt { name: "mqtt", service: "mqtt", log: "mqtt", ports: &[1883], what: "MQTT exchanges" }
            /// AMQP 0-9-1 (port, or its protocol header `AMQP\0\0\x09\x01`).
            Amqp { name: "amqp", service: "amqp", log: "amqp", ports: &[5672], what: "AMQP 0-9-1 methods" }
            /// Kafka's wire protocol (recognised by its port).
            Kafka { name: "kafka", service: "kafka", log: "kafka", ports: &[9092], what: "Kafka requests" }
            /// gRPC over HTTP/2 (h2c): one call per stream. Found by the
            /// HTTP/2 preface on any port; 50051 is gRPC's customary port.
            Grpc { name: "grpc", service: "grpc", log: "grpc", ports: &[50051], what: "gRPC calls" }
            /// Cassandra's CQL native protocol v3 to v5 (port, or a client's
            /// first OPTIONS/STARTUP frame).
            Cassandra { name: "cassandra", service: "cassandra", log: "cassandra", ports: &[9042], what: "Cassandra CQL requests" }
        }
    };
}

protocol_table!(protocols);

impl Protocol {
    /// The protocol whose [`Protocol::name`] is `name`.
    pub fn from_name(name: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Its position in [`Protocol::ALL`] (for per-protocol counters).
    pub fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        for (i, p) in Protocol::ALL.into_iter().enumerate() {
            assert_eq!(p.index(), i);
            assert_eq!(Protocol::from_name(p.name()), Some(p));
            assert!(!p.default_ports().is_empty());
        }
        let mut names: Vec<_> = Protocol::ALL.iter().map(|p| p.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Protocol::ALL.len());
        let mut logs: Vec<_> = Protocol::ALL.iter().map(|p| p.log()).collect();
        logs.sort();
        logs.dedup();
        assert_eq!(logs.len(), Protocol::ALL.len());
    }
}
