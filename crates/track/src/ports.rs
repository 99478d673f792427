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

// Zeek's `likely_server_ports` is the union of what its default scripts put
// there. Two mechanisms, both read in zeek/zeek:
//  - `redef likely_server_ports += { ... }` in a protocol's main.zeek;
//  - `Analyzer::register_for_ports(tag, server_ports, non_server_ports)`
//    (scripts/base/frameworks/analyzer/main.zeek) and
//    `PacketAnalyzer::register_for_ports` (scripts/base/frameworks/
//    packet-analysis/main.zeek) add their `server_ports` argument to it, so
//    every port a default analyzer registers counts, except the ones passed
//    as non-server ports (DHCP's 68/udp, DHCPv6's 546/udp, DNS-over-QUIC's
//    853/udp and 784/udp).
// Per script (scripts/base/protocols/<name>/main.zeek unless said):
//   dce-rpc     135/tcp
//   dhcp        67/udp, 4011/udp (`server_ports`; 68/udp is `client_ports`)
//   dhcpv6      547/udp (`server_ports`; 546/udp is `client_ports`)
//   dnp3        20000/tcp, 20000/udp
//   dns         53/udp, 53/tcp, 137/udp, 5353/udp, 5355/udp
//   finger      79/tcp
//   ftp         21/tcp, 2811/tcp
//   http        80, 81, 631, 1080, 3128, 8000, 8080, 8888/tcp
//   imap        143/tcp
//   irc         6666, 6667, 6668, 6669/tcp
//   krb         88/tcp, 88/udp
//   ldap        389/tcp, 3268/tcp (`ports_tcp`), 389/udp (`ports_udp`)
//   modbus      502/tcp
//   mqtt        1883/tcp
//   mysql       1434/tcp, 3306/tcp (registered only: a server port through
//               register_for_ports)
//   ntp         123/udp
//   postgresql  5432/tcp
//   quic        443/udp (`quic_ports`)
//   radius      1812/udp
//   rdp         3389/tcp (`rdp_ports`), 3389/udp (`rdpeudp_ports`)
//   redis       6379/tcp
//   sip         5060/udp
//   smb         139/tcp, 445/tcp
//   smtp        25/tcp, 587/tcp
//   snmp        161/udp, 162/udp
//   socks       1080/tcp
//   ssh         22/tcp
//   ssl         443, 563, 585, 614, 636, 989, 990, 992, 993, 995, 5223/tcp
//               (`ssl_ports`), 443/udp (`dtls_ports`)
//   syslog      514/udp (`ports`), 514/tcp (`tcp_ports`), registered only
//   xmpp        5222/tcp, 5269/tcp
//   scripts/base/packet-protocols/{teredo,gtpv1,ayiya,vxlan,geneve}/main.zeek
//               3544/udp, 2152/udp and 2123/udp, 5072/udp, 4789/udp, 6081/udp
// Older Zeek releases (before register_for_ports fed likely_server_ports)
// lack the "registered only" entries; the Zeek scoreboard cases do not
// depend on them. wirelog adds the ports of protocols it parses or that
// commonly speak first from a server (listed below the arrays), since it
// has no Zeek-style analyzer to confirm the responder later.

/// TCP ports of Zeek's `likely_server_ports`, plus wirelog's own.
pub const DEFAULT_TCP_SERVER_PORTS: &[u16] = &[
    21, 22, 23, 25, 53, 79, 80, 81, 88, 110, 111, 135, 139, 143, 179, 389, 443, 445, 465, 502,
    514, 563, 585, 587, 614, 631, 636, 989, 990, 992, 993, 994, 995, 1080, 1433, 1434, 1521,
    1723, 1883, 2049, 2811, 3128, 3268, 3306, 3389, 5060, 5222, 5223, 5269, 5432, 5672, 6379,
    6443, 6666, 6667, 6668, 6669, 7000, 8000, 8080, 8443, 8888, 9042, 9092, 9200, 11211, 20000,
    27017,
];
// wirelog: 23 telnet, 110 POP3, 111 portmap, 179 BGP, 465 SMTPS, 994 IRCS,
// 1433 MSSQL, 1521 Oracle, 1723 PPTP, 2049 NFS, 5060 SIP over TCP, 5672 AMQP,
// 6443 Kubernetes API, 7000, 8443, 9042 Cassandra, 9092 Kafka,
// 9200 Elasticsearch, 11211 memcached, 27017 MongoDB.

/// UDP ports of Zeek's `likely_server_ports`, plus wirelog's own.
pub const DEFAULT_UDP_SERVER_PORTS: &[u16] = &[
    53, 67, 69, 88, 123, 137, 161, 162, 389, 443, 500, 514, 547, 1812, 1813, 2123, 2152, 3389,
    3544, 4011, 4500, 4789, 5060, 5072, 5353, 5355, 6081, 20000,
];
// wirelog: 69 TFTP, 500/4500 IKE, 1813 RADIUS accounting. 68/udp (DHCP
// client) is not a server port, as in Zeek: a reply from 67 to 68 keeps 67
// as the responder.

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
        for p in [67, 123, 161, 514, 547, 1812, 3389, 3544, 4011, 4789, 5060, 5072, 6081, 20000] {
            assert!(u.contains(p), "udp/{p}");
        }
        // Registered only (a server port through register_for_ports).
        assert!(t.contains(1434) && t.contains(3306) && t.contains(514));
        // Client ports Zeek registers as non-server ports.
        for p in [68, 546, 784, 853] {
            assert!(!u.contains(p), "udp/{p}");
        }
    }
}
