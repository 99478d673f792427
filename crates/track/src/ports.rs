//! Ports where a server is likely to listen, for guessing the originator of
//! a connection whose first packet was not a SYN (Zeek's likely_server_ports).

/// A set of ports as a bitmap (8 KiB): membership is one load.
#[derive(Clone)]
pub struct PortSet {
    bits: Box<[u64; 1024]>,
}

impl PortSet {
    pub fn empty() -> Self {
        PortSet { bits: Box::new([0; 1024]) }
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

/// TCP ports Zeek's default scripts register analyzers for.
pub const DEFAULT_TCP_SERVER_PORTS: &[u16] = &[
    21, 22, 23, 25, 53, 80, 81, 88, 110, 111, 135, 139, 143, 179, 389, 443, 445, 465, 502, 563, 585, 587, 614, 631,
    636, 989, 990, 992, 993, 994, 995, 1080, 1433, 1521, 1723, 1883, 2049, 2811, 3128, 3268, 3306, 3389, 5060, 5222,
    5223, 5269, 5432, 5672, 6379, 6443, 6666, 6667, 6668, 6669, 7000, 8000, 8080, 8443, 8888, 9042, 9092, 9200, 11211,
    20000, 27017,
];

/// UDP ports Zeek's default scripts register analyzers for.
pub const DEFAULT_UDP_SERVER_PORTS: &[u16] = &[
    53, 67, 68, 69, 88, 123, 137, 161, 162, 389, 443, 500, 514, 1812, 1813, 2123, 2152, 3544, 4500, 4789, 5060,
    5353, 5355, 6081,
];

impl PortSet {
    /// Parses a server-port list for one protocol: `default`, `none`, or a
    /// comma-separated list of `PORT`, `tcp/PORT`, `udp/PORT` or `LOW-HIGH`
    /// (a bare port applies to both protocols). Returns (tcp, udp).
    pub fn parse_list(spec: &str) -> Result<(PortSet, PortSet), String> {
        match spec.trim() {
            "default" => return Ok((PortSet::from_ports(DEFAULT_TCP_SERVER_PORTS), PortSet::from_ports(DEFAULT_UDP_SERVER_PORTS))),
            "none" | "" => return Ok((PortSet::empty(), PortSet::empty())),
            _ => {}
        }
        let (mut tcp, mut udp) = (PortSet::empty(), PortSet::empty());
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (proto, range) = match item.split_once('/') {
                Some((p, r)) => (Some(p), r),
                None => (None, item),
            };
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (a, b),
                None => (range, range),
            };
            let parse = |s: &str| s.trim().parse::<u16>().map_err(|_| format!("'{item}': '{s}' is not a port number"));
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
                    Some(other) => return Err(format!("'{item}': unknown protocol '{other}' (use tcp or udp)")),
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
    }
}
