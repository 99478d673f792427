//! SIGINT/SIGTERM as something poll() can wait on: the handler sets a flag
//! and makes an eventfd readable, so sleeping workers wake at once and an
//! idle probe needs no periodic wakeup to notice a signal.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::{CaptureError, ErrorKind};

static STOP_FD: AtomicI32 = AtomicI32::new(-1);
static STOPPED: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
    trigger_raw();
}

fn trigger_raw() {
    STOPPED.store(true, Ordering::SeqCst);
    let fd = STOP_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let one: u64 = 1;
        // SAFETY: write(2) is async-signal-safe; fd is our eventfd.
        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    }
}

/// The process-wide stop switch.
#[derive(Debug, Clone, Copy)]
pub struct Stop {
    fd: RawFd,
}

impl Stop {
    /// Creates the eventfd and installs the SIGINT/SIGTERM handlers (once).
    pub fn install() -> Result<Stop, CaptureError> {
        let fd = STOP_FD.load(Ordering::SeqCst);
        if fd >= 0 {
            return Ok(Stop { fd });
        }
        // SAFETY: plain syscalls; the handler only touches atomics and write(2).
        unsafe {
            let fd = libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK);
            if fd < 0 {
                return Err(CaptureError::last_os(ErrorKind::Io, "eventfd"));
            }
            STOP_FD.store(fd, Ordering::SeqCst);
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            for sig in [libc::SIGINT, libc::SIGTERM] {
                if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                    return Err(CaptureError::last_os(ErrorKind::Io, "sigaction"));
                }
            }
            Ok(Stop { fd })
        }
    }

    /// Readable (POLLIN) once stop was requested; stays readable.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    pub fn is_set(&self) -> bool {
        STOPPED.load(Ordering::SeqCst)
    }

    /// Requests a stop (end of --duration, or a fatal error in a thread).
    pub fn trigger(&self) {
        trigger_raw();
    }

    /// The signal that requested the stop, if one did.
    pub fn signal(&self) -> Option<i32> {
        match SIGNAL.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    /// Sleeps until a stop is requested or `timeout_ms` passes (-1: no
    /// limit). Returns true when stopping.
    pub fn wait(&self, timeout_ms: i32) -> Result<bool, CaptureError> {
        if self.is_set() {
            return Ok(true);
        }
        let mut pfd = [libc::pollfd { fd: self.fd, events: libc::POLLIN, revents: 0 }];
        crate::ring::poll(&mut pfd, timeout_ms)?;
        Ok(self.is_set())
    }
}

/// CPU time (user + system) the whole process used so far, in nanoseconds.
pub fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigger_wakes_a_waiter() {
        let stop = Stop::install().unwrap();
        assert!(!stop.wait(10).unwrap());
        let t = std::thread::spawn(move || stop.wait(-1).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(20));
        stop.trigger();
        assert!(t.join().unwrap());
        assert!(stop.is_set());
        assert_eq!(stop.signal(), None);
    }
}
