//! The connect-time hook: an eBPF program on the `sock:inet_sock_set_state`
//! tracepoint notes who connected each TCP socket, so a connection over
//! before the resolver asks (a sub-millisecond curl) still has its client's
//! owner.
//!
//! A socket enters SYN_SENT inside `connect()`, in the connecting task
//! (`current` is the owner), but before the kernel picks its source port;
//! the port is known when the socket leaves SYN_SENT (ESTABLISHED, or CLOSE
//! on a refusal), which may happen in any context (the SYN-ACK's softirq).
//! So the program keeps the owner by socket address at the first transition
//! (`pending`) and moves it under the connection's tuple at the second
//! (`owners`), which the resolver reads and deletes. Both maps are LRU:
//! entries nobody asks for (other namespaces, uncaptured traffic) age out.
//!
//! The tracepoint is global; a tuple like 127.0.0.1:40000 -> 127.0.0.1:8080
//! can exist in many network namespaces at once. The program reads the
//! socket's namespace (`sk->__sk_common.skc_net.net->ns.inum`, offsets from
//! the kernel's BTF) into the key, and the resolver asks with its own
//! namespace's inode, so another namespace's connection never answers.
//! Server ends are not recorded here (the accepting socket changes state in
//! softirq context, not in its process); sock_diag and the listener name them.

use std::os::unix::fs::MetadataExt;

use wirelog_ebpf::{Alu, Asm, Attachment, Btf, Cond, Error, Helper, Insn, Map, MapType, ProgType, Program, Reg, Size, Tracepoint};

use crate::Tuple;

const TCP_SYN_SENT: i32 = 2;
const AF_INET: i32 = 2;
const AF_INET6: i32 = 10;

/// Key: netns inode u32, family u16, sport u16, dport u16, 2 bytes zero,
/// saddr [16], daddr [16] (IPv4 in the first 4 bytes, the rest zero).
const KEY_LEN: usize = 44;
/// Value: tgid u32, uid u32, cgroup id u64, comm [16].
const VALUE_LEN: usize = 32;
const PENDING_ENTRIES: u32 = 8192;
const OWNER_ENTRIES: u32 = 32768;

// Stack layout of the program (offsets from the frame pointer r10).
const KEY: i16 = -48;
const VALUE: i16 = -80;
const SOCK: i16 = -88;
const TMP: i16 = -96;

/// Who connected a socket, as the program saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connector {
    pub tgid: u32,
    pub uid: u32,
    /// The cgroup v2 id (the inode of its directory in cgroupfs).
    pub cgroup_id: u64,
    pub comm: String,
}

/// The loaded and attached hook; detached and unloaded on drop.
pub struct ConnectHook {
    owners: Map,
    netns: u32,
    /// "tracefs was not mounted; mounted it at ..." when this load did.
    pub note: Option<String>,
    _pending: Map,
    _prog: Program,
    _attached: Attachment,
}

impl ConnectHook {
    /// Loads the program and attaches it; an error says what the kernel
    /// refused (privilege, no BTF, no tracepoint, the verifier).
    pub fn load() -> Result<ConnectHook, Error> {
        let tp = Tracepoint::find("sock", "inet_sock_set_state")?;
        let btf = Btf::kernel()?;
        let net_off = btf.member_offset("sock_common", "skc_net")? + btf.member_offset("possible_net_t", "net")?;
        let inum_off = btf.member_offset("net", "ns")? + btf.member_offset("ns_common", "inum")?;
        let pending = Map::create(MapType::LruHash, "wl_conn_pending", 8, VALUE_LEN, PENDING_ENTRIES)?;
        let owners = Map::create(MapType::LruHash, "wl_conn_owners", KEY_LEN, VALUE_LEN, OWNER_ENTRIES)?;
        let insns = program(&tp, &pending, &owners, net_off as i32, inum_off as i32)?;
        // bpf_probe_read_kernel is only for GPL-compatible programs.
        let prog = Program::load(ProgType::Tracepoint, "wl_connect", &insns, "GPL")?;
        let attached = tp.attach(&prog)?;
        let netns = own_netns().map_err(|e| Error { what: "reading /proc/self/ns/net".into(), os: e, log: String::new() })?;
        let note = tp.mounted.map(|p| format!("tracefs was not mounted; mounted it at {}", p.display()));
        Ok(ConnectHook { owners, netns, note, _pending: pending, _prog: prog, _attached: attached })
    }

    /// The connector of a local TCP end, removed from the map (each is
    /// asked about once). An IPv4 end is also looked for as the IPv4-mapped
    /// address of a dual-stack socket.
    pub fn take(&self, t: &Tuple) -> Option<Connector> {
        if t.proto != 6 {
            return None;
        }
        let mut v = [0u8; VALUE_LEN];
        let v4 = crate::is_v4(&t.local) && crate::is_v4(&t.remote);
        if v4 && self.take_key(&key(self.netns, AF_INET, t), &mut v) {
            return Some(connector(&v));
        }
        if self.take_key(&key(self.netns, AF_INET6, t), &mut v) {
            return Some(connector(&v));
        }
        None
    }

    fn take_key(&self, k: &[u8; KEY_LEN], v: &mut [u8; VALUE_LEN]) -> bool {
        self.owners.lookup_and_delete(k, v).unwrap_or(false)
    }
}

fn own_netns() -> std::io::Result<u32> {
    Ok(std::fs::metadata("/proc/self/ns/net")?.ino() as u32)
}

fn key(netns: u32, family: i32, t: &Tuple) -> [u8; KEY_LEN] {
    let mut k = [0u8; KEY_LEN];
    k[0..4].copy_from_slice(&netns.to_ne_bytes());
    k[4..6].copy_from_slice(&(family as u16).to_ne_bytes());
    k[6..8].copy_from_slice(&t.local_port.to_ne_bytes());
    k[8..10].copy_from_slice(&t.remote_port.to_ne_bytes());
    if family == AF_INET {
        k[12..16].copy_from_slice(&t.local[12..]);
        k[28..32].copy_from_slice(&t.remote[12..]);
    } else {
        k[12..28].copy_from_slice(&t.local);
        k[28..44].copy_from_slice(&t.remote);
    }
    k
}

fn connector(v: &[u8; VALUE_LEN]) -> Connector {
    let comm = &v[16..32];
    let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    Connector {
        tgid: u32::from_ne_bytes(v[0..4].try_into().unwrap()),
        uid: u32::from_ne_bytes(v[4..8].try_into().unwrap()),
        cgroup_id: u64::from_ne_bytes(v[8..16].try_into().unwrap()),
        comm: String::from_utf8_lossy(&comm[..end]).into_owned(),
    }
}

/// The program, with the tracepoint record's offsets from its format file.
fn program(tp: &Tracepoint, pending: &Map, owners: &Map, net_off: i32, inum_off: i32) -> Result<Vec<Insn>, Error> {
    use Reg::*;
    // Each field of the record this program reads, at this kernel's
    // offset, with the size it must have.
    let field = |name: &str, size: usize| -> Result<i16, Error> {
        let (off, got) = tp.field(name)?;
        if got != size {
            return Err(Error {
                what: format!("inet_sock_set_state field {name} is {got} bytes, expected {size}"),
                os: std::io::Error::from(std::io::ErrorKind::Unsupported),
                log: String::new(),
            });
        }
        Ok(off as i16)
    };
    let (skaddr, oldstate, newstate) = (field("skaddr", 8)?, field("oldstate", 4)?, field("newstate", 4)?);
    let (sport, dport, family, protocol) = (field("sport", 2)?, field("dport", 2)?, field("family", 2)?, field("protocol", 2)?);
    let (saddr, daddr, saddr6, daddr6) = (field("saddr", 4)?, field("daddr", 4)?, field("saddr_v6", 16)?, field("daddr_v6", 16)?);
    // r1 = &stack[off]
    let stack_ptr = |r: Reg, off: i16| [Insn::mov64_reg(r, R10), Insn::alu64_imm(Alu::Add, r, off as i32)];

    let mut a = Asm::new();
    a.push(Insn::mov64_reg(R6, R1))
        .push(Insn::load(Size::H, R1, R6, protocol))
        .jmp_imm(Cond::Ne, R1, 6, "out")
        .push(Insn::load(Size::DW, R7, R6, skaddr))
        .push(Insn::store_reg(Size::DW, R10, SOCK, R7))
        .push(Insn::load(Size::W, R1, R6, newstate))
        .jmp_imm(Cond::Ne, R1, TCP_SYN_SENT, "leaving");
    // Entering SYN_SENT, in connect(): the owner is the current task.
    a.push(Insn::call(Helper::GetCurrentPidTgid))
        .push(Insn::alu64_imm(Alu::Rsh, R0, 32))
        .push(Insn::store_reg(Size::W, R10, VALUE, R0))
        .push(Insn::call(Helper::GetCurrentUidGid))
        .push(Insn::store_reg(Size::W, R10, VALUE + 4, R0))
        .push(Insn::call(Helper::GetCurrentCgroupId))
        .push(Insn::store_reg(Size::DW, R10, VALUE + 8, R0))
        .push_all(stack_ptr(R1, VALUE + 16))
        .push(Insn::mov64_imm(R2, 16))
        .push(Insn::call(Helper::GetCurrentComm))
        .push_all(Insn::load_map_fd(R1, pending.fd()))
        .push_all(stack_ptr(R2, SOCK))
        .push_all(stack_ptr(R3, VALUE))
        .push(Insn::mov64_imm(R4, 0))
        .push(Insn::call(Helper::MapUpdateElem))
        .ja("out");
    // Leaving SYN_SENT: the source port is known; file the owner under the
    // connection's tuple.
    a.label("leaving")
        .push(Insn::load(Size::W, R1, R6, oldstate))
        .jmp_imm(Cond::Ne, R1, TCP_SYN_SENT, "out")
        .push_all(Insn::load_map_fd(R1, pending.fd()))
        .push_all(stack_ptr(R2, SOCK))
        .push(Insn::call(Helper::MapLookupElem))
        .jmp_imm(Cond::Eq, R0, 0, "out")
        .push(Insn::mov64_reg(R8, R0));
    for off in (KEY..0).step_by(8) {
        a.push(Insn::store_imm(Size::DW, R10, off, 0));
    }
    // The socket's network namespace: sk->skc_net, then net->ns.inum.
    a.push_all(stack_ptr(R1, TMP))
        .push(Insn::mov64_imm(R2, 8))
        .push(Insn::mov64_reg(R3, R7))
        .push(Insn::alu64_imm(Alu::Add, R3, net_off))
        .push(Insn::call(Helper::ProbeReadKernel))
        .jmp_imm(Cond::Ne, R0, 0, "forget")
        .push(Insn::load(Size::DW, R3, R10, TMP))
        .jmp_imm(Cond::Eq, R3, 0, "forget")
        .push(Insn::alu64_imm(Alu::Add, R3, inum_off))
        .push_all(stack_ptr(R1, KEY))
        .push(Insn::mov64_imm(R2, 4))
        .push(Insn::call(Helper::ProbeReadKernel))
        .jmp_imm(Cond::Ne, R0, 0, "forget")
        .push(Insn::load(Size::H, R1, R6, sport))
        .jmp_imm(Cond::Eq, R1, 0, "forget")
        .push(Insn::store_reg(Size::H, R10, KEY + 6, R1))
        .push(Insn::load(Size::H, R1, R6, dport))
        .push(Insn::store_reg(Size::H, R10, KEY + 8, R1))
        .push(Insn::load(Size::H, R1, R6, family))
        .push(Insn::store_reg(Size::H, R10, KEY + 4, R1))
        .jmp_imm(Cond::Eq, R1, AF_INET6, "v6")
        .jmp_imm(Cond::Ne, R1, AF_INET, "forget")
        .push(Insn::load(Size::W, R1, R6, saddr))
        .push(Insn::store_reg(Size::W, R10, KEY + 12, R1))
        .push(Insn::load(Size::W, R1, R6, daddr))
        .push(Insn::store_reg(Size::W, R10, KEY + 28, R1))
        .ja("put");
    a.label("v6");
    for i in 0..4 {
        a.push(Insn::load(Size::W, R1, R6, saddr6 + 4 * i))
            .push(Insn::store_reg(Size::W, R10, KEY + 12 + 4 * i, R1))
            .push(Insn::load(Size::W, R1, R6, daddr6 + 4 * i))
            .push(Insn::store_reg(Size::W, R10, KEY + 28 + 4 * i, R1));
    }
    a.label("put")
        .push_all(Insn::load_map_fd(R1, owners.fd()))
        .push_all(stack_ptr(R2, KEY))
        .push(Insn::mov64_reg(R3, R8))
        .push(Insn::mov64_imm(R4, 0))
        .push(Insn::call(Helper::MapUpdateElem))
        .label("forget")
        .push_all(Insn::load_map_fd(R1, pending.fd()))
        .push_all(stack_ptr(R2, SOCK))
        .push(Insn::call(Helper::MapDeleteElem))
        .label("out")
        .push(Insn::mov64_imm(R0, 0))
        .push(Insn::exit());
    a.finish().map_err(|e| Error { what: e.to_string(), os: std::io::Error::from(std::io::ErrorKind::Unsupported), log: String::new() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    /// The hook names this test's own connect(), by tuple, once; skipped
    /// only when not root (CI is root and requires it).
    #[test]
    fn a_connect_is_attributed_to_its_process_by_tuple() {
        if !crate::hook_can_load() {
            return;
        }
        let hook = ConnectHook::load().unwrap_or_else(|e| panic!("{e}"));
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let parts = |a: std::net::SocketAddr| match a {
            std::net::SocketAddr::V4(a) => (crate::v4_mapped(a.ip().octets()), a.port()),
            std::net::SocketAddr::V6(a) => (a.ip().octets(), a.port()),
        };
        let (la, lp) = parts(c.local_addr().unwrap());
        let (ra, rp) = parts(c.peer_addr().unwrap());
        drop(c);
        let t = Tuple { proto: 6, local: la, local_port: lp, remote: ra, remote_port: rp };
        let got = hook.take(&t).expect("the connect was recorded");
        assert_eq!(got.tgid, std::process::id());
        assert_eq!(got.uid, 0);
        let comm = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
        // Each test runs on its own thread, named after the test (comm is
        // the thread's name, cut to 15 bytes).
        assert_eq!(got.comm, comm.trim_end());
        assert!(got.cgroup_id > 0);
        assert!(hook.take(&t).is_none(), "taken once");
        // The server's end was never connect()ed.
        let s = Tuple { proto: 6, local: ra, local_port: rp, remote: la, remote_port: lp };
        assert!(hook.take(&s).is_none());
    }
}
