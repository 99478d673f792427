//! tcpdump filter expressions compiled to classic BPF by libpcap.
//!
//! libpcap is loaded at run time with `dlopen`, only when a filter is used,
//! so wirelog builds without libpcap-dev and runs without libpcap when no
//! filter is given. The program is compiled on a "dead" handle of the
//! socket's link type (DLT_EN10MB for Ethernet-framed sockets, DLT_RAW for
//! cooked ones) and attached with SO_ATTACH_FILTER by [`crate::ring`].
//!
//! Caveat: on a dead handle `vlan N` tests an 802.1Q tag inside the frame,
//! but AF_PACKET hands over frames with the tag already stripped into
//! `tp_vlan_tci` (libpcap emits special code for that only on live handles),
//! so `vlan` expressions do not match offloaded tags.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::{Mutex, OnceLock};

use crate::{CaptureError, ErrorKind, Framing};

/// The Spider filter (keep TCP segments with payload or with SYN, FIN or
/// RST) extended to IPv6, keeping everything that is not TCP.
///
/// - IPv4: `tcp[13] & 7` is FIN|SYN|RST; the payload length is the total
///   length minus both header lengths. Non-first fragments (no TCP header to
///   look at) are kept.
/// - IPv6: only for TCP right after the fixed 40-byte header (next header 6):
///   flags at 40+13, data offset at 40+12, payload = payload length - TCP
///   header. IPv6 with extension headers before TCP (including fragments) is
///   always kept, never dropped: BPF cannot walk the header chain.
/// - Anything else (UDP, ICMP, ARP, ...) is kept.
///
/// Lengths are computed in unsigned 32-bit arithmetic: a header that lies
/// about its length underflows to non-zero and the packet is kept.
pub const SKIP_EMPTY_TCP: &str = "(not tcp) \
     or (ip and ((ip[6:2] & 0x1fff != 0) or (tcp[13] & 0x07 != 0) \
                 or (ip[2:2] - ((ip[0] & 0x0f) << 2) - ((tcp[12] & 0xf0) >> 2) != 0))) \
     or (ip6 and ((ip6[6] != 6) or (ip6[53] & 0x07 != 0) \
                  or (ip6[4:2] - ((ip6[52] & 0xf0) >> 2) != 0)))";

/// A compiled classic BPF program, ready for SO_ATTACH_FILTER.
pub type Program = Vec<libc::sock_filter>;

/// The expression to compile: the user's filter, the skip-empty-TCP filter,
/// both as `(user) and (skip)`, or None for no filter.
pub fn expression(user: Option<&str>, skip_empty_tcp: bool) -> Option<String> {
    let user = user.map(str::trim).filter(|s| !s.is_empty());
    match (user, skip_empty_tcp) {
        (None, false) => None,
        (Some(u), false) => Some(u.to_string()),
        (None, true) => Some(SKIP_EMPTY_TCP.to_string()),
        (Some(u), true) => Some(format!("({u}) and ({SKIP_EMPTY_TCP})")),
    }
}

#[repr(C)]
struct BpfProgram {
    bf_len: c_uint,
    bf_insns: *mut libc::sock_filter,
}

const PCAP_NETMASK_UNKNOWN: u32 = 0xffff_ffff;

type OpenDeadFn = unsafe extern "C" fn(c_int, c_int) -> *mut c_void;
type CompileFn = unsafe extern "C" fn(*mut c_void, *mut BpfProgram, *const c_char, c_int, u32) -> c_int;
type GetErrFn = unsafe extern "C" fn(*mut c_void) -> *mut c_char;
type FreeCodeFn = unsafe extern "C" fn(*mut BpfProgram);
type CloseFn = unsafe extern "C" fn(*mut c_void);

struct Libpcap {
    open_dead: OpenDeadFn,
    compile: CompileFn,
    geterr: GetErrFn,
    freecode: FreeCodeFn,
    close: CloseFn,
}

/// Names tried in order: Debian's runtime package (libpcap0.8), the soname
/// elsewhere, and the development symlink.
const LIBPCAP_NAMES: [&str; 3] = ["libpcap.so.0.8", "libpcap.so.1", "libpcap.so"];

fn libpcap() -> Result<&'static Libpcap, CaptureError> {
    static LIB: OnceLock<Result<Libpcap, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(|m| CaptureError::new(ErrorKind::Filter, m.clone()))
}

fn load() -> Result<Libpcap, String> {
    for name in LIBPCAP_NAMES {
        let cname = CString::new(name).expect("no NUL");
        // SAFETY: dlopen with a valid name; the handle is kept for the life
        // of the process (never dlclose'd), so the symbols stay valid.
        let h = unsafe { libc::dlopen(cname.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            continue;
        }
        let sym = |s: &CStr| -> Result<*mut c_void, String> {
            // SAFETY: h is a valid handle, s a NUL-terminated name.
            let p = unsafe { libc::dlsym(h, s.as_ptr()) };
            if p.is_null() {
                Err(format!("{name} has no symbol {}", s.to_string_lossy()))
            } else {
                Ok(p)
            }
        };
        // SAFETY: the symbols have these C signatures (pcap/pcap.h).
        unsafe {
            return Ok(Libpcap {
                open_dead: std::mem::transmute::<*mut c_void, OpenDeadFn>(sym(c"pcap_open_dead")?),
                compile: std::mem::transmute::<*mut c_void, CompileFn>(sym(c"pcap_compile")?),
                geterr: std::mem::transmute::<*mut c_void, GetErrFn>(sym(c"pcap_geterr")?),
                freecode: std::mem::transmute::<*mut c_void, FreeCodeFn>(sym(c"pcap_freecode")?),
                close: std::mem::transmute::<*mut c_void, CloseFn>(sym(c"pcap_close")?),
            });
        }
    }
    Err(format!("filters need libpcap, which was not found (tried {}); install libpcap0.8", LIBPCAP_NAMES.join(", ")))
}

/// Compiles `expr` for sockets with `framing`, returning the classic BPF
/// program ready for SO_ATTACH_FILTER. Accepting instructions return
/// `snaplen`, which is how the kernel truncates packets.
pub fn compile(expr: &str, framing: Framing, snaplen: u32) -> Result<Vec<libc::sock_filter>, CaptureError> {
    compile_dlt(expr, framing.dlt(), snaplen)
}

/// Compiles `expr` for packets of libpcap data link type `dlt` (DLT_*,
/// not LINKTYPE_*: see [`dlt_of_linktype`]).
pub fn compile_dlt(expr: &str, dlt: i32, snaplen: u32) -> Result<Vec<libc::sock_filter>, CaptureError> {
    // pcap_compile is not thread-safe before libpcap 1.8.
    static COMPILE: Mutex<()> = Mutex::new(());
    let lib = libpcap()?;
    let cexpr = CString::new(expr)
        .map_err(|_| CaptureError::new(ErrorKind::Filter, "filter expression contains a NUL byte"))?;
    let _guard = COMPILE.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: libpcap calls with valid arguments; the handle and program are
    // freed on every path below.
    unsafe {
        let p = (lib.open_dead)(dlt, snaplen.min(i32::MAX as u32) as c_int);
        if p.is_null() {
            return Err(CaptureError::new(ErrorKind::Filter, "pcap_open_dead failed"));
        }
        let mut prog = BpfProgram { bf_len: 0, bf_insns: std::ptr::null_mut() };
        let r = (lib.compile)(p, &mut prog, cexpr.as_ptr(), 1, PCAP_NETMASK_UNKNOWN);
        if r != 0 {
            let msg = CStr::from_ptr((lib.geterr)(p)).to_string_lossy().into_owned();
            (lib.close)(p);
            return Err(CaptureError::new(ErrorKind::Filter, format!("bad filter '{expr}': {msg}")));
        }
        let insns = std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize).to_vec();
        (lib.freecode)(&mut prog);
        (lib.close)(p);
        if insns.is_empty() || insns.len() > u16::MAX as usize {
            return Err(CaptureError::new(ErrorKind::Filter, format!("filter '{expr}': {} instructions", insns.len())));
        }
        Ok(insns)
    }
}

/// The DLT_* value libpcap uses for a file's LINKTYPE_* value: they are the
/// same number except for the few whose DLT differs between systems
/// (libpcap's `linktype_to_dlt`).
pub fn dlt_of_linktype(linktype: u32) -> i32 {
    match linktype {
        // LINKTYPE_ATM_RFC1483, LINKTYPE_RAW: DLT_ATM_RFC1483, DLT_RAW on Linux.
        100 => 11,
        101 => 12,
        other => other.min(i32::MAX as u32) as i32,
    }
}

/// A classic BPF interpreter, as the kernel runs it (no ancillary loads):
/// used by tests to check what a compiled filter keeps.
pub fn run(prog: &[libc::sock_filter], pkt: &[u8]) -> u32 {
    let (mut a, mut x, mut mem) = (0u32, 0u32, [0u32; 16]);
    let load = |off: u32, size: usize| -> Option<u32> {
        let off = off as usize;
        let b = pkt.get(off..off.checked_add(size)?)?;
        Some(b.iter().fold(0u32, |v, &c| (v << 8) | c as u32))
    };
    let mut pc = 0usize;
    while let Some(i) = prog.get(pc) {
        pc += 1;
        let size = match i.code & 0x18 {
            0x00 => 4,
            0x08 => 2,
            _ => 1,
        };
        let src = if i.code & 0x08 != 0 { x } else { i.k };
        match i.code & 0x07 {
            // LD
            0x00 => match i.code & 0xe0 {
                0x00 => a = i.k,
                0x20 => match load(i.k, size) {
                    Some(v) => a = v,
                    None => return 0,
                },
                0x40 => match load(x.wrapping_add(i.k), size) {
                    Some(v) => a = v,
                    None => return 0,
                },
                0x60 => a = mem[(i.k & 15) as usize],
                0x80 => a = pkt.len() as u32,
                _ => return 0,
            },
            // LDX
            0x01 => match i.code & 0xe0 {
                0x00 => x = i.k,
                0x60 => x = mem[(i.k & 15) as usize],
                0x80 => x = pkt.len() as u32,
                0xa0 => match load(i.k, 1) {
                    Some(v) => x = (v & 0xf) << 2,
                    None => return 0,
                },
                _ => return 0,
            },
            0x02 => mem[(i.k & 15) as usize] = a,
            0x03 => mem[(i.k & 15) as usize] = x,
            // ALU
            0x04 => {
                a = match i.code & 0xf0 {
                    0x00 => a.wrapping_add(src),
                    0x10 => a.wrapping_sub(src),
                    0x20 => a.wrapping_mul(src),
                    0x30 if src == 0 => return 0,
                    0x30 => a / src,
                    0x40 => a | src,
                    0x50 => a & src,
                    0x60 => a.checked_shl(src).unwrap_or(0),
                    0x70 => a.checked_shr(src).unwrap_or(0),
                    0x80 => a.wrapping_neg(),
                    0x90 if src == 0 => return 0,
                    0x90 => a % src,
                    0xa0 => a ^ src,
                    _ => return 0,
                }
            }
            // JMP
            0x05 => {
                let op = i.code & 0xf0;
                if op == 0x00 {
                    pc += i.k as usize;
                    continue;
                }
                let taken = match op {
                    0x10 => a == src,
                    0x20 => a > src,
                    0x30 => a >= src,
                    0x40 => a & src != 0,
                    _ => return 0,
                };
                pc += if taken { i.jt } else { i.jf } as usize;
            }
            // RET
            0x06 => {
                return match i.code & 0x18 {
                    0x10 => a,
                    _ => i.k,
                }
            }
            // MISC
            _ => {
                if i.code & 0xf8 == 0 {
                    x = a
                } else {
                    a = x
                }
            }
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth(ethertype: u16, l3: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(l3);
        f
    }

    fn tcp(flags: u8, payload: usize) -> Vec<u8> {
        let mut t = vec![0u8; 20];
        t[0..2].copy_from_slice(&1234u16.to_be_bytes());
        t[2..4].copy_from_slice(&80u16.to_be_bytes());
        t[12] = 5 << 4;
        t[13] = flags;
        t.resize(20 + payload, b'x');
        t
    }

    fn ipv4(proto: u8, frag_off: u16, l4: &[u8]) -> Vec<u8> {
        let mut h = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        h[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        h[6..8].copy_from_slice(&frag_off.to_be_bytes());
        h.extend_from_slice(l4);
        h
    }

    fn ipv6(next: u8, l4: &[u8]) -> Vec<u8> {
        let mut h = vec![0x60, 0, 0, 0, 0, 0, next, 64];
        h[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
        h.extend_from_slice(&[0xfd; 16]);
        h.extend_from_slice(&[0xfe; 16]);
        h.extend_from_slice(l4);
        h
    }

    const ACK: u8 = 0x10;
    const SYN: u8 = 0x02;
    const FIN: u8 = 0x01;
    const RST: u8 = 0x04;

    /// (description, IP packet, kept?)
    fn cases() -> Vec<(&'static str, u16, Vec<u8>, bool)> {
        let mut hbh = vec![6u8, 0, 0, 0, 0, 0, 0, 0];
        hbh.extend_from_slice(&tcp(ACK, 0));
        vec![
            ("v4 empty ACK", 0x0800, ipv4(6, 0, &tcp(ACK, 0)), false),
            ("v4 ACK with payload", 0x0800, ipv4(6, 0, &tcp(ACK, 10)), true),
            ("v4 SYN", 0x0800, ipv4(6, 0, &tcp(SYN, 0)), true),
            ("v4 FIN", 0x0800, ipv4(6, 0, &tcp(FIN | ACK, 0)), true),
            ("v4 RST", 0x0800, ipv4(6, 0, &tcp(RST, 0)), true),
            ("v4 non-first fragment", 0x0800, ipv4(6, 100, &[0u8; 8]), true),
            ("v4 UDP", 0x0800, ipv4(17, 0, &[0u8; 8]), true),
            ("v6 empty ACK", 0x86dd, ipv6(6, &tcp(ACK, 0)), false),
            ("v6 ACK with payload", 0x86dd, ipv6(6, &tcp(ACK, 1)), true),
            ("v6 SYN", 0x86dd, ipv6(6, &tcp(SYN | ACK, 0)), true),
            ("v6 FIN", 0x86dd, ipv6(6, &tcp(FIN, 0)), true),
            ("v6 empty ACK after hop-by-hop header", 0x86dd, ipv6(0, &hbh), true),
            ("v6 UDP", 0x86dd, ipv6(17, &[0u8; 8]), true),
            ("ARP", 0x0806, vec![0u8; 28], true),
        ]
    }

    #[test]
    fn skip_empty_tcp_keeps_what_it_must_on_ethernet_and_cooked() {
        let Ok(eth_prog) = compile(SKIP_EMPTY_TCP, Framing::Ethernet, 65535) else {
            eprintln!("SKIPPED: libpcap not installed");
            return;
        };
        let raw_prog = compile(SKIP_EMPTY_TCP, Framing::Cooked, 65535).unwrap();
        for (what, ethertype, ip, keep) in cases() {
            let got = run(&eth_prog, &eth(ethertype, &ip));
            assert_eq!(got != 0, keep, "Ethernet: {what}");
            if ethertype != 0x0806 {
                assert_eq!(run(&raw_prog, &ip) != 0, keep, "cooked: {what}");
            }
            if keep {
                assert_eq!(got, 65535, "{what}: the snaplen is the accept value");
            }
        }
    }

    #[test]
    fn combined_with_a_user_filter() {
        let expr = expression(Some("port 80"), true).unwrap();
        let Ok(prog) = compile(&expr, Framing::Ethernet, 128) else {
            eprintln!("SKIPPED: libpcap not installed");
            return;
        };
        assert_ne!(run(&prog, &eth(0x0800, &ipv4(6, 0, &tcp(SYN, 0)))), 0);
        assert_eq!(run(&prog, &eth(0x0800, &ipv4(6, 0, &tcp(ACK, 0)))), 0);
        assert_eq!(run(&prog, &eth(0x0800, &ipv4(17, 0, &[0u8; 8]))), 0, "UDP to port 0 is not port 80");
        assert_eq!(expression(Some("  "), false), None);
        assert_eq!(expression(None, false), None);
    }

    #[test]
    fn a_bad_expression_carries_libpcaps_message() {
        match compile("tcp port eighty", Framing::Ethernet, 65535) {
            Err(e) if e.message.contains("libpcap") && e.message.contains("not found") => {
                eprintln!("SKIPPED: libpcap not installed")
            }
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::Filter);
                assert!(e.message.starts_with("bad filter 'tcp port eighty': "), "{e}");
                assert!(e.message.len() > "bad filter 'tcp port eighty': ".len(), "{e}");
            }
            Ok(_) => panic!("compiled a bad expression"),
        }
        // `ether` makes no sense on a cooked (raw IP) socket.
        assert!(compile("ether host 00:11:22:33:44:55", Framing::Cooked, 65535).is_err());
    }

    /// The expressions the translation is checked on (issue 35's list;
    /// libpcap's `tcp[]` is IPv4 only, so "IPv6 TCP with SYN" is written
    /// with `ip6[]`: next header TCP, flags at 40 + 13).
    const EXPRESSIONS: [&str; 5] = ["tcp port 80", "udp or icmp", "vlan", "ip6 and ip6[6] = 6 and ip6[53]&2!=0", SKIP_EMPTY_TCP];

    /// IP packets of every kind the expressions look at: (ethertype, packet).
    fn ip_packets() -> Vec<(u16, Vec<u8>)> {
        let mut port80 = tcp(SYN, 0);
        port80[2..4].copy_from_slice(&8080u16.to_be_bytes());
        port80[0..2].copy_from_slice(&80u16.to_be_bytes());
        let mut out: Vec<(u16, Vec<u8>)> = cases().into_iter().filter(|c| c.1 != 0x0806).map(|(_, e, p, _)| (e, p)).collect();
        out.push((0x0800, ipv4(6, 0, &port80)));
        out.push((0x0800, ipv4(6, 0, &tcp(ACK, 300))));
        out.push((0x0800, ipv4(1, 0, &[8, 0, 0, 0, 0, 1, 0, 1])));
        out.push((0x86dd, ipv6(58, &[128, 0, 0, 0, 0, 1, 0, 1])));
        out.push((0x86dd, ipv6(6, &tcp(SYN, 200))));
        out
    }

    /// The translated program, run by the kernel (`BPF_PROG_TEST_RUN`, which
    /// hands a socket filter the packet from its IP header on), returns
    /// what libpcap's classic program returns in our interpreter, for
    /// programs compiled for raw IP (what a cooked socket runs).
    #[test]
    fn translated_filters_return_what_the_classic_ones_do() {
        if !wirelog_ebpf::tests_can_load() {
            return;
        }
        for expr in EXPRESSIONS {
            let classic = match compile(expr, Framing::Cooked, 96) {
                Ok(c) => c,
                Err(e) if e.message.contains("not found") => {
                    eprintln!("SKIPPED: libpcap not installed");
                    return;
                }
                // No link header on raw IP: nothing to test `vlan` on.
                Err(_) if expr == "vlan" => continue,
                Err(e) => panic!("{e}"),
            };
            let insns = wirelog_ebpf::cbpf::program(&classic).unwrap_or_else(|e| panic!("{expr}: {e}"));
            let p = wirelog_ebpf::Program::load(wirelog_ebpf::ProgType::SocketFilter, "wl_cbpf_eq", &insns, "GPL").unwrap_or_else(|e| panic!("{expr}: {e}: {}", e.log));
            for (ethertype, ip) in ip_packets() {
                let want = run(&classic, &ip);
                let got = p.test_run(&eth(ethertype, &ip)).unwrap();
                assert_eq!(got, want, "{expr} on {ip:02x?}");
            }
        }
    }

    /// Classic program on one socket, its translation on another, the same
    /// frames sent on loopback in a private network namespace: the same
    /// frames are accepted, cut to the same lengths.
    #[test]
    fn translated_filters_accept_the_same_frames_on_a_socket() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            let required = std::env::var("WIRELOG_REQUIRE_ALL_TESTS").is_ok_and(|v| v == "1");
            assert!(!required, "this test needs root (a private network namespace, eBPF)");
            eprintln!("SKIPPED: needs root");
            return;
        }
        if compile("tcp", Framing::Ethernet, 100).is_err() {
            eprintln!("SKIPPED: libpcap not installed");
            return;
        }
        // SAFETY: unshare affects only this test's thread.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0, "unshare(CLONE_NEWNET)");
        crate::testnet::lo_up();
        let mut frames: Vec<Vec<u8>> = ip_packets().into_iter().map(|(e, ip)| eth(e, &ip)).collect();
        // Not IP: ARP, LLDP, an 802.3 frame (STP), and 802.1Q-tagged IPv4.
        frames.push(eth(0x0806, &[0u8; 28]));
        frames.push(eth(0x88cc, &[2, 7, 4, 0, 0, 0, 0, 0, 1, 4, 2, 7, 0x31, 6, 2, 0, 120, 0, 0]));
        let mut stp = eth(0x0026, &[0x42, 0x42, 0x03, 0, 0]);
        stp.resize(60, 0);
        frames.push(stp);
        let mut tagged = vec![0u8; 12];
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x07, 0x08, 0x00]);
        tagged.extend_from_slice(&ipv4(6, 0, &tcp(SYN, 0)));
        frames.push(tagged);
        for f in &mut frames {
            // Addresses: loopback takes any; a broadcast destination.
            f[..6].copy_from_slice(&[0xff; 6]);
        }
        for expr in EXPRESSIONS {
            let classic = compile(expr, Framing::Ethernet, 100).unwrap_or_else(|e| panic!("{e}"));
            let insns = wirelog_ebpf::cbpf::program(&classic).unwrap_or_else(|e| panic!("{expr}: {e}"));
            let prog = wirelog_ebpf::Program::load(wirelog_ebpf::ProgType::SocketFilter, "wl_cbpf_eq", &insns, "GPL").unwrap_or_else(|e| panic!("{expr}: {e}: {}", e.log));
            let a = sockets::Rx::classic(&classic);
            let b = sockets::Rx::ebpf(&prog);
            let tx = sockets::Rx::classic(&[libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: 0 }]);
            for f in &frames {
                tx.send(f);
            }
            let (got_a, got_b) = (a.drain(), b.drain());
            assert_eq!(got_a, got_b, "{expr}: classic vs translated");
            let accepted = got_a.len();
            eprintln!("{expr}: {accepted} of {} copies accepted, lengths {:?}", 2 * frames.len(), got_a.iter().map(|x| x.1).collect::<Vec<_>>());
            // Both copies (outgoing and incoming) of each frame were offered.
            assert!(accepted <= 2 * frames.len(), "{expr}");
            assert!(accepted > 0 || expr == "vlan", "{expr} accepted nothing: the test sends what it matches");
            assert!(got_a.iter().all(|(_, len)| *len <= 100), "{expr}: cut to the snap length");
        }
    }

    mod sockets {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

        /// A packet socket on loopback with a filter attached before bind.
        pub struct Rx(OwnedFd);

        impl Rx {
            fn open(attach: impl FnOnce(i32) -> i32) -> Rx {
                // SAFETY: socket(2); owned right after.
                let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
                assert!(fd >= 0);
                // SAFETY: a fresh descriptor.
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                assert_eq!(attach(fd.as_raw_fd()), 0, "attaching: {}", std::io::Error::last_os_error());
                let a = crate::testnet::loopback_addr();
                let tv = libc::timeval { tv_sec: 0, tv_usec: 200_000 };
                // SAFETY: bind/setsockopt with properly sized arguments.
                unsafe {
                    assert_eq!(libc::bind(fd.as_raw_fd(), (&a as *const libc::sockaddr_ll).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32), 0);
                    libc::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVTIMEO, (&tv as *const libc::timeval).cast(), std::mem::size_of::<libc::timeval>() as u32);
                }
                Rx(fd)
            }

            pub fn classic(prog: &[libc::sock_filter]) -> Rx {
                let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_ptr() as *mut _ };
                // SAFETY: setsockopt with a sock_fprog pointing at live instructions.
                Rx::open(|fd| unsafe {
                    libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, (&fprog as *const libc::sock_fprog).cast(), std::mem::size_of::<libc::sock_fprog>() as u32)
                })
            }

            pub fn ebpf(prog: &wirelog_ebpf::Program) -> Rx {
                Rx::open(|fd| if wirelog_ebpf::attach_socket_filter(fd, prog).is_ok() { 0 } else { -1 })
            }

            pub fn send(&self, f: &[u8]) {
                let a = crate::testnet::loopback_addr();
                // SAFETY: sendto with our frame and address.
                let n = unsafe { libc::sendto(self.0.as_raw_fd(), f.as_ptr().cast(), f.len(), 0, (&a as *const libc::sockaddr_ll).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32) };
                assert_eq!(n, f.len() as isize, "{}", std::io::Error::last_os_error());
            }

            /// What the socket received until quiet: (packet type, bytes).
            pub fn drain(&self) -> Vec<(u8, usize)> {
                let mut out = Vec::new();
                let mut buf = [0u8; 2048];
                for _ in 0..10_000 {
                    // SAFETY: sockaddr_ll is plain data.
                    let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
                    let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
                    // SAFETY: recvfrom into our buffer and address.
                    let n = unsafe { libc::recvfrom(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0, (&mut from as *mut libc::sockaddr_ll).cast(), &mut len) };
                    if n < 0 {
                        break;
                    }
                    out.push((from.sll_pkttype, n as usize));
                }
                out
            }
        }
    }
}
