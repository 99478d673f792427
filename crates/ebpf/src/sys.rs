//! The `bpf(2)` commands the loader uses, each with its own `#[repr(C)]`
//! prefix of `union bpf_attr` (the kernel zero-extends a shorter one).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::insn::Insn;
use crate::Error;

const BPF_MAP_CREATE: u32 = 0;
const BPF_MAP_LOOKUP_ELEM: u32 = 1;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_MAP_DELETE_ELEM: u32 = 3;
const BPF_MAP_GET_NEXT_KEY: u32 = 4;
const BPF_PROG_LOAD: u32 = 5;
const BPF_PROG_TEST_RUN: u32 = 10;
const BPF_MAP_LOOKUP_AND_DELETE_ELEM: u32 = 21;

/// Map types (`enum bpf_map_type`) the project uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum MapType {
    Hash = 1,
    Array = 2,
    /// One value per CPU (a program's scratch space larger than its stack).
    PerCpuArray = 6,
    LruHash = 9,
    /// `BPF_MAP_TYPE_RINGBUF`: read through [`crate::RingBuf`].
    RingBuf = 27,
}

/// Program types (`enum bpf_prog_type`) the project uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ProgType {
    SocketFilter = 1,
    /// Programs on kprobes and uprobes (`BPF_PROG_TYPE_KPROBE`): the context is
    /// the probed task's `struct pt_regs`.
    Kprobe = 2,
    Tracepoint = 5,
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    /// `value`, or `next_key` for GET_NEXT_KEY.
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

fn bpf<T>(cmd: u32, attr: &mut T) -> io::Result<i64> {
    // SAFETY: `attr` is a live, initialized prefix of `union bpf_attr` of
    // the size passed; the pointers inside it point at live buffers.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>() as u32) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r)
}

/// Object names are 15 bytes and a NUL; longer ones are cut.
fn name16(name: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    for (d, s) in n.iter_mut().zip(name.bytes().filter(|b| b.is_ascii_alphanumeric() || *b == b'_').take(15)) {
        *d = s;
    }
    n
}

/// A kernel map, closed on drop.
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    pub key_size: usize,
    pub value_size: usize,
}

impl Map {
    pub fn create(kind: MapType, name: &str, key_size: usize, value_size: usize, max_entries: u32) -> Result<Map, Error> {
        let mut a = MapCreateAttr {
            map_type: kind as u32,
            key_size: key_size as u32,
            value_size: value_size as u32,
            max_entries,
            map_name: name16(name),
            ..Default::default()
        };
        let fd = bpf(BPF_MAP_CREATE, &mut a).map_err(|e| Error::sys(format!("creating map {name}"), e))?;
        // SAFETY: a fresh descriptor the kernel just gave us.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        Ok(Map { fd, key_size, value_size })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn elem(&self, cmd: u32, key: &[u8], value: *mut u8, flags: u64) -> io::Result<()> {
        assert_eq!(key.len(), self.key_size, "key of the map's size");
        let mut a = MapElemAttr {
            map_fd: self.fd() as u32,
            key: key.as_ptr() as u64,
            value: value as u64,
            flags,
            ..Default::default()
        };
        bpf(cmd, &mut a).map(|_| ())
    }

    /// The value of `key` into `value`; false when there is none.
    pub fn lookup(&self, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
        assert_eq!(value.len(), self.value_size, "value of the map's size");
        absent_is_false(self.elem(BPF_MAP_LOOKUP_ELEM, key, value.as_mut_ptr(), 0))
    }

    /// The values of `key` in a per-CPU map, one per possible CPU, each
    /// padded to 8 bytes, into `values`; false when there is none.
    pub fn lookup_percpu(&self, key: &[u8], values: &mut [u8]) -> io::Result<bool> {
        assert_eq!(values.len(), self.value_size.next_multiple_of(8) * possible_cpus(), "one value per possible CPU");
        absent_is_false(self.elem(BPF_MAP_LOOKUP_ELEM, key, values.as_mut_ptr(), 0))
    }

    /// Like [`Map::lookup`], removing the entry in the same call.
    pub fn lookup_and_delete(&self, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
        assert_eq!(value.len(), self.value_size, "value of the map's size");
        absent_is_false(self.elem(BPF_MAP_LOOKUP_AND_DELETE_ELEM, key, value.as_mut_ptr(), 0))
    }

    /// Inserts or replaces (`BPF_ANY`).
    pub fn update(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
        assert_eq!(value.len(), self.value_size, "value of the map's size");
        self.elem(BPF_MAP_UPDATE_ELEM, key, value.as_ptr() as *mut u8, 0)
    }

    /// False when there was no such key.
    pub fn delete(&self, key: &[u8]) -> io::Result<bool> {
        absent_is_false(self.elem(BPF_MAP_DELETE_ELEM, key, std::ptr::null_mut(), 0))
    }

    /// The key after `key` (the first one for `None`), for walking a map;
    /// false at the end.
    pub fn next_key(&self, key: Option<&[u8]>, next: &mut [u8]) -> io::Result<bool> {
        assert_eq!(next.len(), self.key_size, "key of the map's size");
        let mut a = MapElemAttr {
            map_fd: self.fd() as u32,
            key: key.map_or(0, |k| k.as_ptr() as u64),
            value: next.as_mut_ptr() as u64,
            ..Default::default()
        };
        absent_is_false(bpf(BPF_MAP_GET_NEXT_KEY, &mut a).map(|_| ()))
    }
}

/// CPUs the kernel may bring up (`/sys/devices/system/cpu/possible`, as
/// "0-63"): how many values a per-CPU map's lookup returns.
pub fn possible_cpus() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
        let mut max = None;
        for r in text.trim().split(',').filter(|r| !r.is_empty()) {
            let last = r.rsplit('-').next().unwrap_or(r);
            if let Ok(n) = last.parse::<usize>() {
                max = Some(max.map_or(n, |m: usize| m.max(n)));
            }
        }
        // SAFETY: sysconf has no preconditions.
        max.map_or_else(|| unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as usize, |m| m + 1)
    })
}

fn absent_is_false(r: io::Result<()>) -> io::Result<bool> {
    match r {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A loaded program, unloaded when its last user (this fd, an attachment)
/// goes.
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
}

/// Verifier log size asked for when a load fails.
const LOG_SIZE: usize = 1 << 20;

impl Program {
    /// Loads `insns`. The kernel only lets programs that declare a
    /// GPL-compatible `license` call some helpers (`bpf_probe_read_kernel`).
    /// A refused program's error carries the verifier's log.
    pub fn load(kind: ProgType, name: &str, insns: &[Insn], license: &str) -> Result<Program, Error> {
        let license = std::ffi::CString::new(license).expect("a license without NUL");
        let attempt = |log: Option<&mut Vec<u8>>| {
            let (log_level, log_size, log_buf) = match log {
                Some(l) => (1, l.len() as u32, l.as_mut_ptr() as u64),
                None => (0, 0, 0),
            };
            let mut a = ProgLoadAttr {
                prog_type: kind as u32,
                insn_cnt: insns.len() as u32,
                insns: insns.as_ptr() as u64,
                license: license.as_ptr() as u64,
                log_level,
                log_size,
                log_buf,
                prog_name: name16(name),
                ..Default::default()
            };
            bpf(BPF_PROG_LOAD, &mut a)
        };
        let fd = match attempt(None) {
            Ok(fd) => fd,
            Err(e) => {
                // Again with the verifier's log, which is what explains a
                // refusal (EACCES/EINVAL); EPERM needs no log.
                let mut log = vec![0u8; LOG_SIZE];
                let again = if e.raw_os_error() == Some(libc::EPERM) { Err(e) } else { attempt(Some(&mut log)) };
                match again {
                    Ok(fd) => fd,
                    Err(e) => {
                        let end = log.iter().position(|&b| b == 0).unwrap_or(0);
                        let text = String::from_utf8_lossy(&log[..end]).trim_end().to_string();
                        return Err(Error { what: format!("loading program {name}"), os: e, log: text });
                    }
                }
            }
        };
        // SAFETY: a fresh descriptor the kernel just gave us.
        Ok(Program { fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) } })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Runs the program once on `frame` (`BPF_PROG_TEST_RUN`) and returns
    /// its value. A socket filter sees the frame from its network header
    /// on (the kernel takes the 14 bytes of Ethernet header off).
    pub fn test_run(&self, frame: &[u8]) -> io::Result<u32> {
        let mut a = TestRunAttr {
            prog_fd: self.fd() as u32,
            data_size_in: frame.len() as u32,
            data_in: frame.as_ptr() as u64,
            repeat: 1,
            ..Default::default()
        };
        bpf(BPF_PROG_TEST_RUN, &mut a)?;
        Ok(a.retval)
    }
}

/// The `test` member of `union bpf_attr`, up to `duration`.
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
}
