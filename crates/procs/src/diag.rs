//! A `NETLINK_SOCK_DIAG` client: the inode and uid of the socket behind an
//! exact TCP/UDP tuple, asked of the kernel in batches.
//!
//! Each request names one socket (`inet_diag_req_v2` without `NLM_F_DUMP`),
//! so the kernel does one hash lookup per tuple instead of walking every
//! socket; a batch is one `send` of many requests, answered in order.
//! For TCP the kernel's lookup falls back to the listening socket when no
//! connection matches (a connection already gone still names its server).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::Tuple;

const NETLINK_SOCK_DIAG: i32 = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_HDR: usize = 16;
/// `inet_diag_req_v2`: family, protocol, ext, pad, states, then the 48-byte
/// `inet_diag_sockid`.
const REQ_LEN: usize = 8 + 48;
/// `inet_diag_msg`: family, state, timer, retrans, sockid (48), expires,
/// rqueue, wqueue, uid, inode.
const MSG_LEN: usize = 72;
const TCP_LISTEN: u8 = 10;
const TCP_TIME_WAIT: u8 = 6;

/// Requests per `send`: bounded so the replies fit the receive buffer.
pub const BATCH: usize = 256;

/// What the kernel said about one tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A socket of this exact connection.
    Socket { inode: u64, uid: u32 },
    /// No connection; the listening socket of the local port.
    Listener { inode: u64, uid: u32 },
    /// Gone (no socket, or a TIME_WAIT remnant without an owner).
    Gone,
}

pub struct SockDiag {
    fd: OwnedFd,
    req: Vec<u8>,
    buf: Vec<u8>,
    /// Requests sent and replies parsed, for the resolver's statistics.
    pub requests: u64,
}

impl SockDiag {
    /// Opens the netlink socket in the caller's network namespace (the one
    /// whose sockets are asked about).
    pub fn open() -> io::Result<SockDiag> {
        // SAFETY: plain socket(2); the fd is owned below.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, NETLINK_SOCK_DIAG) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let size: libc::c_int = 1 << 20;
        // A kernel that never answers must not hang the resolver.
        let timeout = libc::timeval { tv_sec: 1, tv_usec: 0 };
        // SAFETY: setsockopt with values of the types the options take;
        // failure only leaves the defaults.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                &size as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as u32,
            );
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &timeout as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as u32,
            );
        }
        Ok(SockDiag { fd, req: Vec::with_capacity(BATCH * (NLMSG_HDR + REQ_LEN)), buf: vec![0; 1 << 16], requests: 0 })
    }

    /// Answers for `tuples` (local end first), in order; at most [`BATCH`]
    /// per call.
    pub fn query(&mut self, tuples: &[Tuple], out: &mut Vec<Answer>) -> io::Result<()> {
        out.clear();
        if tuples.is_empty() {
            return Ok(());
        }
        assert!(tuples.len() <= BATCH);
        self.req.clear();
        for (seq, t) in tuples.iter().enumerate() {
            push_request(&mut self.req, seq as u32 + 1, t);
        }
        out.resize(tuples.len(), Answer::Gone);
        self.requests += tuples.len() as u64;
        // SAFETY: the buffer is valid for its length; the kernel address is zeroed (pid 0).
        let sent = unsafe {
            let mut sa: libc::sockaddr_nl = std::mem::zeroed();
            sa.nl_family = libc::AF_NETLINK as u16;
            libc::sendto(
                self.fd.as_raw_fd(),
                self.req.as_ptr() as *const libc::c_void,
                self.req.len(),
                0,
                &sa as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut answered = 0;
        while answered < tuples.len() {
            // SAFETY: recv into our buffer.
            let n = unsafe {
                libc::recv(self.fd.as_raw_fd(), self.buf.as_mut_ptr() as *mut libc::c_void, self.buf.len(), 0)
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let mut msgs = &self.buf[..n as usize];
            while msgs.len() >= NLMSG_HDR {
                let len = u32::from_ne_bytes(msgs[0..4].try_into().unwrap()) as usize;
                if len < NLMSG_HDR || len > msgs.len() {
                    break;
                }
                let ty = u16::from_ne_bytes(msgs[4..6].try_into().unwrap());
                let seq = u32::from_ne_bytes(msgs[8..12].try_into().unwrap()) as usize;
                let body = &msgs[NLMSG_HDR..len];
                if (1..=tuples.len()).contains(&seq) {
                    match ty {
                        SOCK_DIAG_BY_FAMILY if body.len() >= MSG_LEN => {
                            out[seq - 1] = answer(body);
                            answered += 1;
                        }
                        NLMSG_ERROR | NLMSG_DONE => answered += 1,
                        _ => {}
                    }
                }
                let next = ((len + 3) & !3).min(msgs.len());
                msgs = &msgs[next..];
            }
        }
        Ok(())
    }
}

fn answer(m: &[u8]) -> Answer {
    let state = m[1];
    let uid = u32::from_ne_bytes(m[64..68].try_into().unwrap());
    let inode = u32::from_ne_bytes(m[68..72].try_into().unwrap()) as u64;
    if inode == 0 || state == TCP_TIME_WAIT {
        return Answer::Gone;
    }
    if state == TCP_LISTEN {
        Answer::Listener { inode, uid }
    } else {
        Answer::Socket { inode, uid }
    }
}

fn push_request(buf: &mut Vec<u8>, seq: u32, t: &Tuple) {
    let v4 = crate::is_v4(&t.local) && crate::is_v4(&t.remote);
    let len = (NLMSG_HDR + REQ_LEN) as u32;
    buf.extend_from_slice(&len.to_ne_bytes());
    buf.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    buf.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    buf.extend_from_slice(&seq.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes());
    buf.push(if v4 { libc::AF_INET as u8 } else { libc::AF_INET6 as u8 });
    buf.push(t.proto);
    buf.push(0); // no extensions
    buf.push(0);
    buf.extend_from_slice(&u32::MAX.to_ne_bytes()); // every state
    // inet_diag_sockid: ports and addresses in network order. The kernel's
    // UDP lookup reads the id as a packet arriving (source = the remote
    // end), its TCP lookup as the socket's own (source = the local end).
    let (first, first_port, second, second_port) = if t.proto == 17 {
        (&t.remote, t.remote_port, &t.local, t.local_port)
    } else {
        (&t.local, t.local_port, &t.remote, t.remote_port)
    };
    buf.extend_from_slice(&first_port.to_be_bytes());
    buf.extend_from_slice(&second_port.to_be_bytes());
    for a in [first, second] {
        if v4 {
            buf.extend_from_slice(&a[12..16]);
            buf.extend_from_slice(&[0; 12]);
        } else {
            buf.extend_from_slice(a);
        }
    }
    buf.extend_from_slice(&0u32.to_ne_bytes()); // any interface
    buf.extend_from_slice(&[0xff; 8]); // INET_DIAG_NOCOOKIE
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream, UdpSocket};
    use std::os::unix::fs::MetadataExt;

    fn inode_of(fd: i32) -> u64 {
        let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        let s = target.to_str().unwrap();
        s.trim_start_matches("socket:[").trim_end_matches(']').parse().unwrap()
    }

    fn v4(a: std::net::SocketAddr) -> ([u8; 16], u16) {
        match a {
            std::net::SocketAddr::V4(a) => (crate::v4_mapped(a.ip().octets()), a.port()),
            std::net::SocketAddr::V6(a) => (a.ip().octets(), a.port()),
        }
    }

    #[test]
    fn finds_both_ends_of_a_loopback_connection_and_the_listener() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let (ca, cp) = v4(c.local_addr().unwrap());
        let (sa, sp) = v4(s.local_addr().unwrap());
        let uid = std::fs::metadata("/proc/self").unwrap().uid();
        let mut d = SockDiag::open().unwrap();
        let tuples = [
            Tuple { proto: 6, local: ca, local_port: cp, remote: sa, remote_port: sp },
            Tuple { proto: 6, local: sa, local_port: sp, remote: ca, remote_port: cp },
            // A client port that never connected: the listener answers.
            Tuple { proto: 6, local: sa, local_port: sp, remote: ca, remote_port: 1 },
            Tuple { proto: 6, local: ca, local_port: 1, remote: sa, remote_port: 2 },
        ];
        let mut out = Vec::new();
        d.query(&tuples, &mut out).unwrap();
        assert_eq!(out[0], Answer::Socket { inode: inode_of(c.as_raw_fd()), uid });
        assert_eq!(out[1], Answer::Socket { inode: inode_of(s.as_raw_fd()), uid });
        assert_eq!(out[2], Answer::Listener { inode: inode_of(l.as_raw_fd()), uid });
        assert_eq!(out[3], Answer::Gone);
    }

    #[test]
    fn finds_udp_sockets_connected_or_not() {
        let srv = UdpSocket::bind("127.0.0.1:0").unwrap();
        let cli = UdpSocket::bind("127.0.0.1:0").unwrap();
        cli.connect(srv.local_addr().unwrap()).unwrap();
        let (ca, cp) = v4(cli.local_addr().unwrap());
        let (sa, sp) = v4(srv.local_addr().unwrap());
        let mut d = SockDiag::open().unwrap();
        let mut out = Vec::new();
        d.query(
            &[
                Tuple { proto: 17, local: ca, local_port: cp, remote: sa, remote_port: sp },
                Tuple { proto: 17, local: sa, local_port: sp, remote: ca, remote_port: cp },
            ],
            &mut out,
        )
        .unwrap();
        assert!(matches!(out[0], Answer::Socket { inode, .. } if inode == inode_of(cli.as_raw_fd())));
        assert!(matches!(out[1], Answer::Socket { inode, .. } if inode == inode_of(srv.as_raw_fd())));
    }

    #[test]
    fn finds_ipv6_connections() {
        let Ok(l) = TcpListener::bind("[::1]:0") else {
            return; // no IPv6 on this host
        };
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (ca, cp) = v4(c.local_addr().unwrap());
        let (sa, sp) = v4(l.local_addr().unwrap());
        let mut d = SockDiag::open().unwrap();
        let mut out = Vec::new();
        d.query(&[Tuple { proto: 6, local: ca, local_port: cp, remote: sa, remote_port: sp }], &mut out).unwrap();
        assert!(matches!(out[0], Answer::Socket { inode, .. } if inode == inode_of(c.as_raw_fd())));
    }
}
