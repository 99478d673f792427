//! Where programs run: kernel tracepoints (through a perf event), uprobes
//! on a function of an executable or library file (a perf event of the
//! uprobe PMU), and sockets (`SO_ATTACH_BPF`).

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use crate::sys::Program;
use crate::Error;

/// Where tracefs is looked for; the first is where it is mounted when absent.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// A tracepoint's id and the layout of its record (the program's context).
#[derive(Debug, Clone)]
pub struct Tracepoint {
    pub id: u64,
    /// field name -> (offset, size), from the `format` file.
    pub fields: HashMap<String, (usize, usize)>,
    /// Set when this call mounted tracefs (it was absent), for the caller
    /// to say so.
    pub mounted: Option<PathBuf>,
}

impl Tracepoint {
    /// Reads `events/CATEGORY/NAME/{id,format}`, mounting tracefs at
    /// /sys/kernel/tracing first when no tracefs is mounted (a fresh boot, or
    /// the private /sys of `ip netns exec`).
    pub fn find(category: &str, name: &str) -> Result<Tracepoint, Error> {
        let rel = format!("events/{category}/{name}");
        let mut mounted = None;
        let dir = match TRACEFS.iter().map(|t| Path::new(t).join(&rel)).find(|d| d.join("id").exists()) {
            Some(d) => d,
            None => {
                mount_tracefs(Path::new(TRACEFS[0]))?;
                mounted = Some(PathBuf::from(TRACEFS[0]));
                Path::new(TRACEFS[0]).join(&rel)
            }
        };
        let read = |f: &str| {
            std::fs::read_to_string(dir.join(f)).map_err(|e| Error::sys(format!("reading {}", dir.join(f).display()), e))
        };
        let id = read("id")?
            .trim()
            .parse()
            .map_err(|_| Error::other(format!("{}: not a tracepoint id", dir.join("id").display())))?;
        let fields = parse_format(&read("format")?);
        Ok(Tracepoint { id, fields, mounted })
    }

    /// Offset and size of a field; an error names the tracepoint's field
    /// when this kernel's record has no such field.
    pub fn field(&self, name: &str) -> Result<(usize, usize), Error> {
        self.fields.get(name).copied().ok_or_else(|| Error::other(format!("tracepoint {} has no field {name}", self.id)))
    }

    /// Runs `prog` on every hit of this tracepoint until the returned value
    /// is dropped. One perf event is enough: the kernel keeps a tracepoint's
    /// programs with the tracepoint, not per event, and runs them on every
    /// CPU (a second event with the same program is refused, EEXIST).
    pub fn attach(&self, prog: &Program) -> Result<Attachment, Error> {
        let cpu = online_cpus().first().copied().unwrap_or(0);
        let fd = perf_event_open_tracepoint(self.id, cpu).map_err(|e| Error::sys(format!("perf_event_open on cpu {cpu}"), e))?;
        // SAFETY: ioctls on a perf event fd we own, with a program fd argument.
        unsafe {
            if libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_SET_BPF, prog.fd()) != 0 {
                return Err(Error::sys("attaching the program to the tracepoint".into(), io::Error::last_os_error()));
            }
            if libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_ENABLE, 0) != 0 {
                return Err(Error::sys("enabling the tracepoint".into(), io::Error::last_os_error()));
            }
        }
        Ok(Attachment { _event: fd })
    }
}

/// Where the uprobe PMU is described: its perf event type, and which
/// config bit makes a probe a return probe.
const UPROBE_PMU: &str = "/sys/bus/event_source/devices/uprobe";

/// A uprobe (on entry) or uretprobe (on return) of the function at `offset`
/// in the file `path`: it fires in every process that maps the file (the
/// kernel keys uprobes by inode), until the returned value is dropped.
/// `prog` must be a [`crate::ProgType::Kprobe`] program. A kernel without
/// the uprobe PMU (CONFIG_UPROBE_EVENTS unset) is a clear error.
pub fn attach_uprobe(prog: &Program, path: &Path, offset: u64, ret: bool) -> Result<Attachment, Error> {
    let read = |f: &str| {
        let p = Path::new(UPROBE_PMU).join(f);
        std::fs::read_to_string(&p).map_err(|e| Error::sys(format!("this kernel has no uprobes (reading {})", p.display()), e))
    };
    let kind: u32 = read("type")?
        .trim()
        .parse()
        .map_err(|_| Error::other(format!("{UPROBE_PMU}/type: not a number")))?;
    let mut config = 0u64;
    if ret {
        // "config:0": the bit that asks for a return probe.
        let f = read("format/retprobe")?;
        let bit: u32 = f
            .trim()
            .strip_prefix("config:")
            .and_then(|b| b.parse().ok())
            .filter(|b| *b < 64)
            .ok_or_else(|| Error::other(format!("{UPROBE_PMU}/format/retprobe: unexpected {:?}", f.trim())))?;
        config = 1 << bit;
    }
    let cpath = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::other(format!("{}: a path with a NUL byte", path.display())))?;
    let mut a = PerfEventAttr {
        kind,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config,
        sample_period: 1,
        // disabled (bit 0): enabled after the program is set.
        flags: 1,
        wakeup_events: 1,
        config1: cpath.as_ptr() as u64,
        config2: offset,
        ..Default::default()
    };
    // SAFETY: perf_event_open(2) with an attr of the size it states, whose
    // config1 points at a NUL-terminated path alive for the call. pid -1
    // with cpu 0 is a system-wide probe: the kernel runs the program on the
    // probe's hits in every task, whatever their CPU (as libbpf does).
    let fd = unsafe {
        libc::syscall(libc::SYS_perf_event_open, &mut a as *mut PerfEventAttr, -1i32, 0i32, -1i32, PERF_FLAG_FD_CLOEXEC)
    };
    let what = || format!("{} at {}+{offset:#x}", if ret { "uretprobe" } else { "uprobe" }, path.display());
    if fd < 0 {
        return Err(Error::sys(format!("perf_event_open for a {}", what()), io::Error::last_os_error()));
    }
    // SAFETY: a fresh descriptor the kernel just gave us.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    // SAFETY: ioctls on a perf event fd we own, with a program fd argument.
    unsafe {
        if libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_SET_BPF, prog.fd()) != 0 {
            return Err(Error::sys(format!("attaching the program to the {}", what()), io::Error::last_os_error()));
        }
        if libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_ENABLE, 0) != 0 {
            return Err(Error::sys(format!("enabling the {}", what()), io::Error::last_os_error()));
        }
    }
    Ok(Attachment { _event: fd })
}

/// A program attached to a tracepoint or uprobe; detached on drop.
#[derive(Debug)]
pub struct Attachment {
    _event: OwnedFd,
}

/// `field:TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;` lines; arrays are named
/// without their brackets.
pub fn parse_format(text: &str) -> HashMap<String, (usize, usize)> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let mut decl = None;
        let (mut off, mut size) = (None, None);
        for part in line.trim().split(';') {
            let part = part.trim();
            if let Some(d) = part.strip_prefix("field:") {
                decl = Some(d);
            } else if let Some(v) = part.strip_prefix("offset:") {
                off = v.parse::<usize>().ok();
            } else if let Some(v) = part.strip_prefix("size:") {
                size = v.parse::<usize>().ok();
            }
        }
        if let (Some(d), Some(o), Some(s)) = (decl, off, size) {
            let last = d.rsplit([' ', '*']).next().unwrap_or(d);
            let name = last.split('[').next().unwrap_or(last);
            out.insert(name.to_string(), (o, s));
        }
    }
    out
}

fn mount_tracefs(at: &Path) -> Result<(), Error> {
    let target = std::ffi::CString::new(at.as_os_str().as_encoded_bytes()).expect("a path without NUL");
    // SAFETY: mount(2) with NUL-terminated strings and no data.
    let r = unsafe {
        libc::mount(c"tracefs".as_ptr(), target.as_ptr(), c"tracefs".as_ptr(), 0, std::ptr::null())
    };
    if r != 0 {
        return Err(Error::sys(format!("no tracefs mounted, and mounting it at {} failed", at.display()), io::Error::last_os_error()));
    }
    Ok(())
}

/// CPUs listed in /sys/devices/system/cpu/online ("0-3,6").
fn online_cpus() -> Vec<i32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut cpus = Vec::new();
    for r in text.trim().split(',').filter(|r| !r.is_empty()) {
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
            cpus.extend(a..=b);
        }
    }
    if cpus.is_empty() {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as i32;
        cpus.extend(0..n);
    }
    cpus
}

const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_SAMPLE_RAW: u64 = 1 << 10;
// _IOW('$', 8, u32) and _IO('$', 0)
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// The head of `struct perf_event_attr` (PERF_ATTR_SIZE_VER1, 72 bytes;
/// the kernel accepts any known size).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// disabled, inherit, pinned, ... bits.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    /// `kprobe_func`/`uprobe_path` for probes.
    config1: u64,
    /// `kprobe_addr`/`probe_offset` for probes (PERF_ATTR_SIZE_VER1).
    config2: u64,
}

fn perf_event_open_tracepoint(id: u64, cpu: i32) -> io::Result<OwnedFd> {
    let mut a = PerfEventAttr {
        kind: PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: id,
        sample_period: 1,
        sample_type: PERF_SAMPLE_RAW,
        // disabled (bit 0): enabled after the program is set.
        flags: 1,
        wakeup_events: 1,
        ..Default::default()
    };
    // SAFETY: perf_event_open(2) with an attr of the size it states;
    // pid -1 with a cpu: every task on that cpu.
    let fd = unsafe {
        libc::syscall(libc::SYS_perf_event_open, &mut a as *mut PerfEventAttr, -1i32, cpu, -1i32, PERF_FLAG_FD_CLOEXEC)
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor the kernel just gave us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Runs a socket-filter program on every packet `socket` receives
/// (`SO_ATTACH_BPF`); the socket keeps it until closed or replaced.
pub fn attach_socket_filter(socket: RawFd, prog: &Program) -> io::Result<()> {
    let fd: libc::c_int = prog.fd();
    // SAFETY: setsockopt with an int option value.
    let r = unsafe {
        libc::setsockopt(
            socket,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_BPF,
            &fd as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as u32,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_fields_are_read_with_offsets_and_sizes() {
        let text = "name: inet_sock_set_state\nID: 2287\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\n\
            \tfield:const void * skaddr;\toffset:8;\tsize:8;\tsigned:0;\n\
            \tfield:int oldstate;\toffset:16;\tsize:4;\tsigned:1;\n\
            \tfield:__u8 saddr_v6[16];\toffset:40;\tsize:16;\tsigned:0;\n\nprint fmt: \"x\"\n";
        let f = parse_format(text);
        assert_eq!(f["common_type"], (0, 2));
        assert_eq!(f["skaddr"], (8, 8));
        assert_eq!(f["oldstate"], (16, 4));
        assert_eq!(f["saddr_v6"], (40, 16));
        assert_eq!(f.len(), 4);
    }
}
