//! A small eBPF loader, written here on `libc` alone: `bpf(2)` maps and
//! programs ([`Map`], [`Program`], the verifier's log in a refusal's
//! [`Error`]), an assembler for the instruction set ([`Asm`], [`Insn`]) so
//! programs are Rust source assembled at run time (no clang, no object
//! files), attachment to tracepoints ([`Tracepoint`]), uprobes
//! ([`attach_uprobe`], with [`ElfSymbols`] to find a function's file
//! offset) and sockets ([`attach_socket_filter`]), the BPF ring buffer read
//! from user space ([`RingBuf`]), and kernel struct offsets from BTF ([`Btf`]).
//!
//! ```no_run
//! use wirelog_ebpf::{Asm, Insn, Reg, Program, ProgType};
//! let mut a = Asm::new();
//! a.push(Insn::mov64_imm(Reg::R0, 0)).push(Insn::exit());
//! let prog = Program::load(ProgType::SocketFilter, "drop_all", &a.finish().unwrap(), "GPL").unwrap();
//! ```
//!
//! Instructions are encoded for little-endian hosts (the register nibbles
//! swap on big-endian ones).

mod attach;
mod btf;
pub mod cbpf;
mod elf;
mod insn;
mod ringbuf;
mod sys;

pub use attach::{attach_socket_filter, attach_uprobe, parse_format, Attachment, Tracepoint};
pub use btf::Btf;
pub use elf::ElfSymbols;
pub use ringbuf::RingBuf;
pub use insn::{Alu, Asm, AsmError, Cond, Helper, Insn, Reg, Size, PSEUDO_MAP_FD};
pub use sys::{possible_cpus, Map, MapType, ProgType, Program};

use std::io;

/// What the kernel refused, with what was being done and, for a program,
/// the verifier's log.
#[derive(Debug)]
pub struct Error {
    pub what: String,
    pub os: io::Error,
    pub log: String,
}

impl Error {
    fn sys(what: String, os: io::Error) -> Error {
        Error { what, os, log: String::new() }
    }

    fn other(what: String) -> Error {
        Error { what, os: io::Error::from(io::ErrorKind::Unsupported), log: String::new() }
    }

    /// The kernel said no for lack of privilege (no CAP_BPF/CAP_PERFMON,
    /// unprivileged eBPF disabled, lockdown).
    pub fn is_permission(&self) -> bool {
        matches!(self.os.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) && self.log.is_empty()
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.os.kind() == io::ErrorKind::Unsupported && self.os.raw_os_error().is_none() {
            write!(f, "{}", self.what)?;
        } else {
            write!(f, "{}: {}", self.what, self.os)?;
        }
        if !self.log.is_empty() {
            // The verifier's last lines say why.
            let tail: Vec<&str> = self.log.lines().rev().take(12).collect();
            write!(f, "\nverifier log (last lines):")?;
            for l in tail.iter().rev() {
                write!(f, "\n  {l}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// For tests that load programs (here and in the crates that write them):
/// true as root; otherwise says the test is skipped, and fails it under
/// WIRELOG_REQUIRE_ALL_TESTS=1 (CI runs as root and must run them).
#[doc(hidden)]
pub fn tests_can_load() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    let required = std::env::var("WIRELOG_REQUIRE_ALL_TESTS").is_ok_and(|v| v == "1");
    assert!(!required, "WIRELOG_REQUIRE_ALL_TESTS=1 but eBPF tests need root");
    eprintln!("SKIPPED: loading eBPF programs needs root");
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use Reg::*;

    fn can_load() -> bool {
        tests_can_load()
    }

    #[test]
    fn a_trivial_program_loads_and_a_bad_one_returns_the_verifier_log() {
        if !can_load() {
            return;
        }
        let mut a = Asm::new();
        a.push(Insn::mov64_imm(R0, 0)).push(Insn::exit());
        let p = Program::load(ProgType::SocketFilter, "wl_test_ok", &a.finish().unwrap(), "GPL").unwrap();
        assert!(p.fd() >= 0);
        // Reading r0 before it is written is refused by the verifier.
        let mut bad = Asm::new();
        bad.push(Insn::mov64_reg(R1, R0)).push(Insn::exit());
        let e = Program::load(ProgType::SocketFilter, "wl_test_bad", &bad.finish().unwrap(), "GPL").unwrap_err();
        assert!(e.log.contains("R0 !read_ok"), "{e}");
        assert!(e.to_string().contains("verifier log"), "{e}");
    }

    #[test]
    fn maps_store_look_up_walk_and_delete() {
        if !can_load() {
            return;
        }
        let m = Map::create(MapType::Hash, "wl_test_map", 4, 8, 16).unwrap();
        let mut v = [0u8; 8];
        assert!(!m.lookup(&1u32.to_ne_bytes(), &mut v).unwrap());
        m.update(&1u32.to_ne_bytes(), &7u64.to_ne_bytes()).unwrap();
        m.update(&2u32.to_ne_bytes(), &9u64.to_ne_bytes()).unwrap();
        assert!(m.lookup(&1u32.to_ne_bytes(), &mut v).unwrap());
        assert_eq!(u64::from_ne_bytes(v), 7);
        let mut keys = Vec::new();
        let mut k = [0u8; 4];
        let mut prev: Option<[u8; 4]> = None;
        while m.next_key(prev.as_ref().map(|p| &p[..]), &mut k).unwrap() {
            keys.push(u32::from_ne_bytes(k));
            prev = Some(k);
        }
        keys.sort();
        assert_eq!(keys, [1, 2]);
        assert!(m.lookup_and_delete(&2u32.to_ne_bytes(), &mut v).unwrap());
        assert_eq!(u64::from_ne_bytes(v), 9);
        assert!(!m.lookup(&2u32.to_ne_bytes(), &mut v).unwrap());
        assert!(m.delete(&1u32.to_ne_bytes()).unwrap());
        assert!(!m.delete(&1u32.to_ne_bytes()).unwrap());
    }

    /// A program that writes into a map: the map fd load, a helper call and
    /// stack memory, run by the kernel on a socket's packets.
    #[test]
    fn a_socket_filter_counts_packets_into_a_map() {
        if !can_load() {
            return;
        }
        let m = Map::create(MapType::Array, "wl_test_count", 4, 8, 1).unwrap();
        let mut a = Asm::new();
        a.push(Insn::store_imm(Size::W, R10, -4, 0))
            .push_all(Insn::load_map_fd(R1, m.fd()))
            .push(Insn::mov64_reg(R2, R10))
            .push(Insn::alu64_imm(Alu::Add, R2, -4))
            .push(Insn::call(Helper::MapLookupElem))
            .jmp_imm(Cond::Eq, R0, 0, "out")
            .push(Insn::load(Size::DW, R1, R0, 0))
            .push(Insn::alu64_imm(Alu::Add, R1, 1))
            .push(Insn::store_reg(Size::DW, R0, 0, R1))
            .label("out")
            // Keep the whole packet.
            .push(Insn::mov64_imm(R0, -1))
            .push(Insn::exit());
        let p = Program::load(ProgType::SocketFilter, "wl_test_cnt", &a.finish().unwrap(), "GPL").unwrap();
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        attach_socket_filter(std::os::fd::AsRawFd::as_raw_fd(&rx), &p).unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..3 {
            tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        }
        let mut buf = [0u8; 8];
        for _ in 0..3 {
            rx.recv(&mut buf).unwrap();
        }
        let mut v = [0u8; 8];
        assert!(m.lookup(&0u32.to_ne_bytes(), &mut v).unwrap());
        assert_eq!(u64::from_ne_bytes(v), 3);
    }

    #[no_mangle]
    #[inline(never)]
    extern "C" fn wl_uprobe_test_target(x: u64) -> u64 {
        std::hint::black_box(x + 1000)
    }

    /// A program on entry (reads the first argument, `di` in x86-64's
    /// `struct pt_regs`) or return (`ax`), writing (pid_tgid, value) to a
    /// ring buffer.
    fn probe_program(rb: &RingBuf, reg_off: i16) -> Program {
        let mut a = Asm::new();
        a.push(Insn::load(Size::DW, R7, R1, reg_off))
            .push(Insn::call(Helper::GetCurrentPidTgid))
            .push(Insn::store_reg(Size::DW, R10, -16, R0))
            .push(Insn::store_reg(Size::DW, R10, -8, R7))
            .push_all(Insn::load_map_fd(R1, rb.map().fd()))
            .push(Insn::mov64_reg(R2, R10))
            .push(Insn::alu64_imm(Alu::Add, R2, -16))
            .push(Insn::mov64_imm(R3, 16))
            .push(Insn::mov64_imm(R4, 0))
            .push(Insn::call(Helper::RingbufOutput))
            .push(Insn::mov64_imm(R0, 0))
            .push(Insn::exit());
        Program::load(ProgType::Kprobe, "wl_test_uprobe", &a.finish().unwrap(), "GPL").unwrap()
    }

    /// A uprobe and a uretprobe on a function of this very test binary,
    /// each writing to a ring buffer read through its mapped pages.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn uprobes_on_entry_and_return_write_to_a_ring_buffer() {
        if !can_load() {
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let off = ElfSymbols::read(&exe).unwrap().offset("wl_uprobe_test_target").expect("symbol");
        let mut rb = RingBuf::create("wl_test_rb", 1 << 16).unwrap();
        let (entry, ret) = (probe_program(&rb, 112), probe_program(&rb, 80));
        let _a = attach_uprobe(&entry, &exe, off, false).unwrap();
        let _b = attach_uprobe(&ret, &exe, off, true).unwrap();
        for x in 1..=3u64 {
            assert_eq!(wl_uprobe_test_target(x), x + 1000);
        }
        assert!(rb.wait(1000));
        let mut got = Vec::new();
        rb.read(100, |r| {
            assert_eq!(r.len(), 16);
            got.push((u64::from_ne_bytes(r[..8].try_into().unwrap()), u64::from_ne_bytes(r[8..].try_into().unwrap())));
        });
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u64;
        let want_id = ((std::process::id() as u64) << 32) | tid;
        let values: Vec<u64> = got.iter().map(|g| g.1).collect();
        assert_eq!(values, [1, 1001, 2, 1002, 3, 1003], "{got:?}");
        assert!(got.iter().all(|g| g.0 == want_id));
        assert!(!rb.pending());
        // A path that is not there names itself.
        let e = attach_uprobe(&entry, std::path::Path::new("/nonexistent/lib.so"), 0, false).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/lib.so"), "{e}");
    }

    #[test]
    fn a_ring_of_a_bad_size_is_refused_with_its_size() {
        let e = RingBuf::create("wl_test_bad", 3000).err().expect("refused");
        assert!(e.to_string().contains("3000"), "{e}");
    }
}

/// What a uprobe and a uretprobe cost the probed function on this machine
/// (BENCHMARKS.md, "Inside TLS"): `cargo test --release -p wirelog-ebpf
/// uprobe_cost -- --ignored --nocapture`.
#[cfg(all(test, target_arch = "x86_64"))]
mod cost {
    use super::*;
    use std::time::Instant;

    #[no_mangle]
    #[inline(never)]
    extern "C" fn wl_uprobe_cost_target(x: u64) -> u64 {
        std::hint::black_box(x ^ 1)
    }

    fn per_call(n: u64) -> f64 {
        let t = Instant::now();
        for i in 0..n {
            std::hint::black_box(wl_uprobe_cost_target(i));
        }
        t.elapsed().as_nanos() as f64 / n as f64
    }

    #[test]
    #[ignore]
    fn uprobe_cost() {
        if !tests_can_load() {
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let off = ElfSymbols::read(&exe).unwrap().offset("wl_uprobe_cost_target").unwrap();
        let mut a = Asm::new();
        a.push(Insn::mov64_imm(Reg::R0, 0)).push(Insn::exit());
        let p = Program::load(ProgType::Kprobe, "wl_cost", &a.finish().unwrap(), "GPL").unwrap();
        let n = 200_000;
        let bare = per_call(n);
        let entry = attach_uprobe(&p, &exe, off, false).unwrap();
        let with_entry = per_call(n);
        let ret = attach_uprobe(&p, &exe, off, true).unwrap();
        let with_both = per_call(n);
        drop((entry, ret));
        println!("uprobe cost: bare {bare:.0} ns/call, +uprobe {:.0} ns, +uretprobe {:.0} ns", with_entry - bare, with_both - with_entry);
    }
}
