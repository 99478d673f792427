//! Resources checked before they are taken: every numeric option against its
//! valid range, and the memory the capture rings would pin against what the
//! machine has. A wrong size is an error naming the option before any socket
//! opens or any byte is allocated: a ring the kernel accepts unchecked can
//! push the host into the out-of-memory killer, which kills other processes.

use std::time::Duration;

use anyhow::{bail, Result};

/// The share of MemAvailable the capture rings may take without
/// `--force-ring-size` (the rest stays for the tracker, the page cache and
/// every other process on the host).
pub const RING_MEM_SHARE_PCT: u64 = 50;

/// Smallest ring per socket (the kernel needs a few blocks to rotate).
pub const MIN_RING_PER_SOCKET: u64 = 1 << 20;

/// Largest snaplen: what tcpdump and the kernel's frames use.
pub const MAX_SNAPLEN: u32 = 262_144;

/// Most worker threads.
pub const MAX_WORKERS: usize = 256;

/// Bytes of memory the kernel says can be given to a new process without
/// swapping (`MemAvailable` in /proc/meminfo), if known.
pub fn mem_available() -> Option<u64> {
    meminfo_field(&std::fs::read_to_string("/proc/meminfo").ok()?, "MemAvailable:")
}

fn meminfo_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kb: u64 = line[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// Human form of a byte count: `16 MiB`, `1.5 GiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `value` must lie in `min..=max`.
pub fn in_range(option: &str, value: u64, min: u64, max: u64) -> Result<()> {
    if value < min || value > max {
        if value == 0 {
            bail!("{option} 0: must be at least {min}");
        }
        bail!("{option} {value}: must be between {min} and {max}");
    }
    Ok(())
}

/// A size option must lie in `min..=max` bytes.
pub fn size_in_range(option: &str, value: u64, min: u64, max: u64) -> Result<()> {
    if value < min || value > max {
        if value == 0 {
            bail!("{option} 0: must be at least {}", human(min));
        }
        bail!(
            "{option} {}: must be between {} and {}",
            human(value),
            human(min),
            human(max)
        );
    }
    Ok(())
}

/// A duration option must be positive and at most `max`.
pub fn duration_in_range(option: &str, value: Duration, min: Duration, max: Duration) -> Result<()> {
    if value.is_zero() {
        bail!("{option} 0: must be at least {}", show_duration(min));
    }
    if value < min || value > max {
        bail!(
            "{option} {}: must be between {} and {}",
            show_duration(value),
            show_duration(min),
            show_duration(max)
        );
    }
    Ok(())
}

fn show_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1.0 {
        format!("{}ms", d.as_millis())
    } else if s < 3600.0 || s % 3600.0 != 0.0 {
        format!("{s}s")
    } else if s % 86400.0 == 0.0 {
        format!("{}d", s / 86400.0)
    } else {
        format!("{}h", s / 3600.0)
    }
}

/// The memory the capture rings will take, checked against the machine:
/// more than [`RING_MEM_SHARE_PCT`] % of MemAvailable is refused unless
/// `force`. (Packet rings are kernel pages charged to no rlimit: the
/// kernel's packet_set_ring does not account them to RLIMIT_MEMLOCK, so
/// MemAvailable is the limit that matters.)
pub fn check_ring_memory(total: u64, per_socket: u64, sockets: usize, force: bool) -> Result<()> {
    if force {
        return Ok(());
    }
    let Some(avail) = mem_available() else {
        return Ok(());
    };
    let limit = avail / 100 * RING_MEM_SHARE_PCT;
    if total > limit {
        bail!(
            "--ring-size: the capture rings would take {} ({} socket(s) of {}), more than {}% of the \
             memory available ({} of {}); use a smaller --ring-size, or --force-ring-size to take it anyway",
            human(total),
            sockets,
            human(per_socket),
            RING_MEM_SHARE_PCT,
            human(limit),
            human(avail)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo() {
        let t = "MemTotal:       24000000 kB\nMemFree:         1000 kB\nMemAvailable:    2048 kB\n";
        assert_eq!(meminfo_field(t, "MemAvailable:"), Some(2048 * 1024));
        assert_eq!(meminfo_field(t, "Nope:"), None);
        assert!(mem_available().is_some_and(|m| m > 0));
    }

    #[test]
    fn ranges() {
        assert!(in_range("--workers", 0, 1, 256).unwrap_err().to_string().contains("--workers 0"));
        assert!(in_range("--workers", 300, 1, 256).is_err());
        assert!(in_range("--workers", 2, 1, 256).is_ok());
        assert_eq!(human(16 << 20), "16 MiB");
        assert_eq!(human(1 << 40), "1 TiB");
        assert_eq!(human(3 << 29), "1.5 GiB");
        let e = duration_in_range("--tcp-timeout", Duration::ZERO, Duration::from_secs(1), Duration::from_secs(86400));
        assert_eq!(e.unwrap_err().to_string(), "--tcp-timeout 0: must be at least 1s");
    }

    #[test]
    fn absurd_ring_refused() {
        let e = check_ring_memory(1 << 50, 1 << 50, 1, false).unwrap_err().to_string();
        assert!(e.contains("--force-ring-size") && e.contains("1024 TiB"), "{e}");
        assert!(check_ring_memory(1 << 50, 1 << 50, 1, true).is_ok());
        assert!(check_ring_memory(1 << 20, 1 << 20, 1, false).is_ok());
    }
}
