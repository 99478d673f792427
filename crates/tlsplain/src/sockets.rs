//! Which end of a connection a process is: the server when its local port
//! listens in its network namespace (`/proc/PID/net/tcp` and `tcp6`, read
//! through a process of that namespace, st 0A), the client when the
//! remote port does. When neither can be read (the process is gone), the
//! end on an ephemeral port (`/proc/sys/net/ipv4/ip_local_port_range`) is
//! the client, else the lower port is the server's.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use crate::programs::Sock;

/// A namespace's listening ports are read again, when neither port of a
/// socket is among them, at most this often: a listener opened a moment
/// after the last read is seen at once, and a namespace's sockets whose
/// ports never listen (a listener closed after its accept) cost at most a
/// hundred reads a second.
const REREAD: Duration = Duration::from_millis(10);

pub struct Roles {
    listening: HashMap<u32, (Vec<u16>, Instant)>,
    ephemeral: (u16, u16),
    pub reads: u64,
}

impl Default for Roles {
    fn default() -> Self {
        let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|t| {
                let mut it = t.split_whitespace().map(|v| v.parse::<u16>());
                Some((it.next()?.ok()?, it.next()?.ok()?))
            })
            .unwrap_or((32768, 60999));
        Roles { listening: HashMap::new(), ephemeral, reads: 0 }
    }
}

impl Roles {
    /// True when process `pid`'s end of `s` is the server's.
    pub fn server(&mut self, pid: u32, s: &Sock) -> bool {
        for attempt in 0..2 {
            if let Some((ports, _)) = self.listening.get(&s.netns) {
                if ports.binary_search(&s.local_port).is_ok() {
                    return true;
                }
                if ports.binary_search(&s.remote_port).is_ok() {
                    return false;
                }
            }
            let stale = self.listening.get(&s.netns).is_none_or(|(_, at)| at.elapsed() >= REREAD);
            if attempt == 1 || !stale || !self.read(pid, s.netns) {
                break;
            }
        }
        let eph = |p: u16| p >= self.ephemeral.0 && p <= self.ephemeral.1;
        match (eph(s.local_port), eph(s.remote_port)) {
            (true, false) => false,
            (false, true) => true,
            _ => s.local_port < s.remote_port,
        }
    }

    /// Reads the listening ports of `pid`'s namespace, when it is `netns`.
    fn read(&mut self, pid: u32, netns: u32) -> bool {
        match std::fs::metadata(format!("/proc/{pid}/ns/net")) {
            Ok(m) if m.ino() as u32 == netns => {}
            _ => return false,
        }
        let mut listening = Vec::new();
        for file in ["tcp", "tcp6"] {
            if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{file}")) {
                self.reads += 1;
                listening_ports(&text, &mut listening);
            }
        }
        listening.sort_unstable();
        listening.dedup();
        self.listening.insert(netns, (listening, Instant::now()));
        true
    }
}

/// `sl local_address rem_address st ...`: the local ports of the sockets
/// in state 0A (LISTEN).
fn listening_ports(text: &str, out: &mut Vec<u16>) {
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 4 && f[3] == "0A" {
            if let Some(p) = f[1].rsplit_once(':').and_then(|(_, p)| u16::from_str_radix(p, 16).ok()) {
                out.push(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_ports_are_read_from_proc_net_lines() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0 100 0 0 10 0\n\
           1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 2222 1 0 20 4 30 10 -1\n\
           2: 00000000000000000000000001000000:01BB 00000000000000000000000000000000:0000 0A 0:0 0:0 0 0 0 3333 1\n";
        let mut ports = Vec::new();
        listening_ports(text, &mut ports);
        assert_eq!(ports, [8080, 443]);
    }

    #[test]
    fn a_listening_port_makes_the_server_and_ephemeral_ports_decide_otherwise() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let me = std::process::id();
        let netns = std::fs::metadata("/proc/self/ns/net").unwrap().ino() as u32;
        let (lp, cp) = (l.local_addr().unwrap().port(), c.local_addr().unwrap().port());
        let sock = |local_port, remote_port| Sock { netns, local: [0; 16], local_port, remote: [0; 16], remote_port };
        let mut r = Roles::default();
        assert!(r.server(me, &sock(lp, cp)));
        assert!(!r.server(me, &sock(cp, lp)));
        // A namespace nobody can be asked about: the ports decide.
        let mut r = Roles { ephemeral: (32768, 60999), ..Roles::default() };
        let gone = |local_port, remote_port| Sock { netns: 1, ..sock(local_port, remote_port) };
        assert!(r.server(u32::MAX, &gone(443, 40000)));
        assert!(!r.server(u32::MAX, &gone(40000, 8443)));
        assert!(r.server(u32::MAX, &gone(80, 8080)));
    }
}
