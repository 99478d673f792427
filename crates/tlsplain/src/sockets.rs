//! A process's file descriptor to the TCP connection behind it: the fd's
//! socket inode (`/proc/PID/fd/N` reads `socket:[INODE]`), then that
//! inode's line in the process's own network namespace's
//! `/proc/PID/net/tcp` and `tcp6` (the addresses, the ports, and whether
//! the local port is listening, which makes the process the server).
//! Answers are cached per inode; a file of a namespace is read again only
//! when an inode is not in the last reading.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

/// A TCP connection seen from one process: its end first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Socket {
    /// The network namespace's inode.
    pub netns: u64,
    pub local: [u8; 16],
    pub local_port: u16,
    pub remote: [u8; 16],
    pub remote_port: u16,
    /// The local port listens in that namespace: this end accepted.
    pub server: bool,
}

/// Why a descriptor could not be mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    /// The process or its descriptor is gone.
    Gone,
    /// The descriptor is not a socket (a pipe, a file: TLS over something else).
    NotSocket,
    /// A socket, but not a TCP connection of the process's namespace.
    NotTcp,
}

#[derive(Default)]
pub struct Sockets {
    by_inode: HashMap<u64, Socket>,
    /// Listening ports per namespace, from the last reading.
    listening: HashMap<u64, Vec<u16>>,
    pub reads: u64,
}

impl Sockets {
    /// The socket inode of `fd` in `pid`.
    pub fn inode(pid: u32, fd: i32) -> Result<u64, Miss> {
        let link = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).map_err(|_| Miss::Gone)?;
        let s = link.to_string_lossy();
        s.strip_prefix("socket:[")
            .and_then(|r| r.strip_suffix(']'))
            .and_then(|n| n.parse().ok())
            .ok_or(Miss::NotSocket)
    }

    /// The connection of socket `inode` of process `pid`.
    pub fn resolve(&mut self, pid: u32, inode: u64) -> Result<Socket, Miss> {
        if let Some(s) = self.by_inode.get(&inode) {
            return Ok(*s);
        }
        let netns = std::fs::metadata(format!("/proc/{pid}/ns/net")).map_err(|_| Miss::Gone)?.ino();
        let mut conns = Vec::new();
        let mut listening = Vec::new();
        for (file, v6) in [("tcp", false), ("tcp6", true)] {
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{file}")) else { continue };
            self.reads += 1;
            parse_table(&text, v6, &mut conns, &mut listening);
        }
        if conns.is_empty() && listening.is_empty() && std::fs::metadata(format!("/proc/{pid}")).is_err() {
            return Err(Miss::Gone);
        }
        listening.sort_unstable();
        listening.dedup();
        for (ino, local, lport, remote, rport) in conns {
            let server = listening.binary_search(&lport).is_ok();
            self.by_inode.insert(ino, Socket { netns, local, local_port: lport, remote, remote_port: rport, server });
        }
        self.listening.insert(netns, listening);
        self.by_inode.get(&inode).copied().ok_or(Miss::NotTcp)
    }

    /// Sockets cached.
    pub fn len(&self) -> usize {
        self.by_inode.len()
    }
}

type Row = (u64, [u8; 16], u16, [u8; 16], u16);

/// `sl local_address rem_address st ... uid timeout inode`: established
/// (and closing) connections with an inode, and the listening ports (st 0A).
/// Addresses are the kernel's 32-bit words in host order, printed in hex.
fn parse_table(text: &str, v6: bool, conns: &mut Vec<Row>, listening: &mut Vec<u16>) {
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 {
            continue;
        }
        let (Some((la, lp)), Some((ra, rp))) = (addr(f[1], v6), addr(f[2], v6)) else { continue };
        let Ok(ino) = f[9].parse::<u64>() else { continue };
        match f[3] {
            "0A" => listening.push(lp),
            _ if ino != 0 => conns.push((ino, la, lp, ra, rp)),
            _ => {}
        }
    }
}

/// `0100007F:1F90` or the 32-hex-digit IPv6 form: an address as records
/// hold it (IPv4-mapped for IPv4) and the port.
fn addr(s: &str, v6: bool) -> Option<([u8; 16], u16)> {
    let (a, p) = s.split_once(':')?;
    let port = u16::from_str_radix(p, 16).ok()?;
    let mut out = [0u8; 16];
    let words = if v6 { 4 } else { 1 };
    if a.len() != 8 * words {
        return None;
    }
    let mut bytes = [0u8; 16];
    for w in 0..words {
        let v = u32::from_str_radix(&a[w * 8..w * 8 + 8], 16).ok()?;
        bytes[w * 4..w * 4 + 4].copy_from_slice(&v.to_ne_bytes());
    }
    if v6 {
        out = bytes;
    } else {
        out[10] = 0xff;
        out[11] = 0xff;
        out[12..].copy_from_slice(&bytes[..4]);
    }
    Some((out, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn proc_net_lines_are_read_as_addresses_and_ports() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0 100 0 0 10 0\n\
           1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 2222 1 0 20 4 30 10 -1\n\
           2: 0100007F:C351 0100007F:1F90 06 00000000:00000000 03:00000000 00000000     0        0 0 3 0\n";
        let (mut conns, mut listening) = (Vec::new(), Vec::new());
        parse_table(text, false, &mut conns, &mut listening);
        assert_eq!(listening, [8080]);
        assert_eq!(conns.len(), 1, "TIME_WAIT (inode 0) is not a connection");
        let (ino, l, lp, r, rp) = conns[0];
        assert_eq!((ino, lp, rp), (2222, 50000, 8080));
        assert_eq!(&l[10..], &[0xff, 0xff, 127, 0, 0, 1]);
        assert_eq!(l, r);
        let v6 = "x\n 0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 0:0 0:0 0 0 0 3333 1\n";
        let (mut c6, mut l6) = (Vec::new(), Vec::new());
        parse_table(v6, true, &mut c6, &mut l6);
        assert_eq!(l6, [8080]);
        assert!(addr("zz:1", false).is_none() && addr("0100007F", false).is_none());
    }

    #[test]
    fn a_connected_socket_of_this_process_is_found_with_its_server_end() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        s.read_exact(&mut b).unwrap();
        let me = std::process::id();
        let mut socks = Sockets::default();
        let ci = Sockets::inode(me, c.as_raw_fd()).unwrap();
        let si = Sockets::inode(me, s.as_raw_fd()).unwrap();
        let client = socks.resolve(me, ci).unwrap();
        let server = socks.resolve(me, si).unwrap();
        assert!(!client.server && server.server);
        assert_eq!(client.local_port, c.local_addr().unwrap().port());
        assert_eq!(client.remote_port, l.local_addr().unwrap().port());
        assert_eq!((server.local_port, server.remote_port), (client.remote_port, client.local_port));
        assert_eq!(client.netns, server.netns);
        let f = std::fs::File::open("/proc/self/comm").unwrap();
        assert_eq!(Sockets::inode(me, f.as_raw_fd()), Err(Miss::NotSocket));
        assert_eq!(Sockets::inode(me, 99_999), Err(Miss::Gone));
    }
}
