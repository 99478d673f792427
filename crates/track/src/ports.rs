//! Ports where a server is likely to listen, for guessing the originator of
//! a connection whose first packet was not a SYN (Zeek's likely_server_ports).

/// A set of ports as a bitmap (8 KiB): membership is one load.
#[derive(Clone)]
pub struct PortSet {
    bits: Box<[u64; 1024]>,
}

impl PortSet {
    pub fn empty() -> Self {
        PortSet {
            bits: Box::new([0; 1024]),
        }
    }

    pub fn from_ports(ports: &[u16]) -> Self {
        let mut s = Self::empty();
        for &p in ports {
            s.insert(p);
        }
        s
    }

    pub fn insert(&mut self, p: u16) {
        self.bits[(p >> 6) as usize] |= 1 << (p & 63);
    }

    #[inline]
    pub fn contains(&self, p: u16) -> bool {
        self.bits[(p >> 6) as usize] & (1 << (p & 63)) != 0
    }
}

// Zeek's `likely_server_ports` is the union of what its default scripts add
// with `redef likely_server_ports += { ... }` (read in zeek/zeek):
//   scripts/base/protocols/dce-rpc/main.zeek   135/tcp
//   scripts/base/protocols/dhcp/main.zeek      67/udp (68/udp is registered
//                                              for the analyzer, not as a server port)
//   scripts/base/protocols/dnp3/main.zeek      20000/tcp, 20000/udp
//   scripts/base/protocols/dns/main.zeek       53/udp, 53/tcp, 137/udp, 5353/udp, 5355/udp
//   scripts/base/protocols/finger/main.zeek    79/tcp
//   scripts/base/protocols/ftp/main.zeek       21/tcp, 2811/tcp
//   scripts/base/protocols/http/main.zeek      80, 81, 631, 1080, 3128, 8000, 8080, 8888/tcp
//   scripts/base/protocols/imap/main.zeek      143/tcp
//   scripts/base/protocols/irc/main.zeek       6666-6669/tcp
//   scripts/base/protocols/krb/main.zeek       88/tcp, 88/udp
//   scripts/base/protocols/ldap/main.zeek      389/tcp, 3268/tcp, 389/udp
//   scripts/base/protocols/modbus/main.zeek    502/tcp
//   scripts/base/protocols/mqtt/main.zeek      1883/tcp
//   scripts/base/protocols/ntp/main.zeek       123/udp
//   scripts/base/protocols/quic/main.zeek      443/udp
//   scripts/base/protocols/radius/main.zeek    1812/udp
//   scripts/base/protocols/rdp/main.zeek       3389/tcp, 3389/udp
//   scripts/base/protocols/sip/main.zeek       5060/udp
//   scripts/base/protocols/smb/main.zeek       139/tcp, 445/tcp
//   scripts/base/protocols/smtp/main.zeek      25/tcp, 587/tcp
//   scripts/base/protocols/snmp/main.zeek      161/udp, 162/udp
//   scripts/base/protocols/socks/main.zeek     1080/tcp
//   scripts/base/protocols/ssh/main.zeek       22/tcp
//   scripts/base/protocols/ssl/main.zeek       443, 563, 585, 614, 636, 989, 990, 992,
//                                              993, 995, 5223/tcp; DTLS 443/udp
//   scripts/base/protocols/syslog/main.zeek    514/udp (and 514/tcp in newer releases)
//   scripts/base/protocols/xmpp/main.zeek      5222/tcp, 5269/tcp
//   scripts/base/frameworks/tunnels/main.zeek and
//   scripts/base/packet-protocols/*/main.zeek  AYIYA 5072/udp, Teredo 3544/udp,
//                                              GTPv1 2123, 2152/udp, VXLAN 4789/udp,
//                                              Geneve 6081/udp
// Some scripts register analyzer ports without adding them here (MySQL's
// 1434 and 3306, for one). wirelog adds the ports of the protocols it parses
// or that commonly speak first from a server (marked "wirelog" below), since
// it has no Zeek-style analyzer to confirm the responder later.

/// TCP ports of Zeek's `likely_server_ports`, plus wirelog's own.
pub const DEFAULT_TCP_SERVER_PORTS: &[u16] = &[
    21, 22, 23, 25, 53, 79, 80, 81, 88, 110, 111, 135, 139, 143, 179, 389, 443, 445, 465, 502,
    514, 563, 585, 587, 614, 631, 636, 989, 990, 992, 993, 994, 995, 1080, 1433, 1521, 1723,
    1883, 2049, 2811, 3128, 3268, 3306, 3389, 5060, 5222, 5223, 5269, 5432, 5672, 6379, 6443,
    6666, 6667, 6668, 6669, 7000, 8000, 8080, 8443, 8888, 9042, 9092, 9200, 11211, 20000, 27017,
];
// wirelog: 23 telnet, 110 POP3, 111 portmap, 179 BGP, 465 SMTPS, 994 IRCS,
// 1433 MSSQL, 1521 Oracle, 1723 PPTP, 2049 NFS, 3306 MySQL, 5060 SIP/TCP,
// 5432 PostgreSQL, 5672 AMQP, 6379 Redis, 6443 Kubernetes API, 7000, 8443,
// 9042 Cassandra, 9092 Kafka, 9200 Elasticsearch, 11211 memcached, 27017 MongoDB.

/// UDP ports of Zeek's `likely_server_ports`, plus wirelog's own.
pub const DEFAULT_UDP_SERVER_PORTS: &[u16] = &[
    53, 67, 68, 69, 88, 123, 137, 161, 162, 389, 443, 500, 514, 1812, 1813, 2123, 2152, 3389,
    3544, 4500, 4789, 5060, 5072, 5353, 5355, 6081, 20000,
];
// wirelog: 68 DHCP client (replies to it are from the server), 69 TFTP,
// 500/4500 IKE, 1813 RADIUS accounting.

impl PortSet {
    /// Parses a server-port list for one protocol: `default`, `none`, or a
    /// comma-separated list of `PORT`, `tcp/PORT`, `udp/PORT` or `LOW-HIGH`
    /// (a bare port applies to both protocols). Returns (tcp, udp).
    pub fn parse_list(spec: &str) -> Result<(PortSet, PortSet), String> {
        if matches!(spec.trim(), "none" | "") {
            return Ok((PortSet::empty(), PortSet::empty()));
        }
        let (mut tcp, mut udp) = (PortSet::empty(), PortSet::empty());
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            // `default` in a list extends the defaults: `default,tcp/13001`.
            if item == "default" {
                DEFAULT_TCP_SERVER_PORTS.iter().for_each(|&p| tcp.insert(p));
                DEFAULT_UDP_SERVER_PORTS.iter().for_each(|&p| udp.insert(p));
                continue;
            }
            if item == "none" {
                return Err("'none' cannot be combined with other ports".to_string());
            }
            let (proto, range) = match item.split_once('/') {
                Some((p, r)) => (Some(p), r),
                None => (None, item),
            };
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (a, b),
                None => (range, range),
            };
            let parse = |s: &str| {
                s.trim()
                    .parse::<u16>()
                    .map_err(|_| format!("'{item}': '{s}' is not a port number"))
            };
            let (lo, hi) = (parse(lo)?, parse(hi)?);
            if lo > hi {
                return Err(format!("'{item}': empty port range"));
            }
            for p in lo..=hi {
                match proto {
                    Some("tcp") => tcp.insert(p),
                    Some("udp") => udp.insert(p),
                    None => {
                        tcp.insert(p);
                        udp.insert(p);
                    }
                    Some(other) => {
                        return Err(format!(
                            "'{item}': unknown protocol '{other}' (use tcp or udp)"
                        ))
                    }
                }
            }
        }
        Ok((tcp, udp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_lists() {
        let (t, u) = PortSet::parse_list("tcp/80, udp/53, 6666-6669, 8080").unwrap();
        assert!(t.contains(80) && !u.contains(80));
        assert!(u.contains(53) && !t.contains(53));
        assert!(t.contains(6668) && u.contains(6668) && t.contains(8080));
        assert!(!t.contains(81));
        let (t, u) = PortSet::parse_list("none").unwrap();
        assert!(!t.contains(80) && !u.contains(53));
        assert!(PortSet::parse_list("sctp/5").is_err());
        assert!(PortSet::parse_list("99999").is_err());
        assert!(PortSet::parse_list("default").unwrap().0.contains(443));
        let (t, u) = PortSet::parse_list("default,tcp/13001").unwrap();
        assert!(t.contains(13001) && t.contains(443) && u.contains(53) && !u.contains(13001));
        assert!(PortSet::parse_list("default,none").is_err());
        // Zeek's registrations, a few from each script family.
        let (t, u) = PortSet::parse_list("default").unwrap();
        for p in [79, 135, 502, 1883, 2811, 3268, 3389, 5222, 20000] {
            assert!(t.contains(p), "tcp/{p}");
        }
        for p in [67, 123, 161, 514, 1812, 3389, 3544, 4789, 5060, 5072, 6081, 20000] {
            assert!(u.contains(p), "udp/{p}");
        }
    }
}
