//! Where the captures that wrote a store kept their packets: `<dir>/pcap_dirs.txt`
//! lists, one absolute path a line, every `--pcap-dir` a `read` or `capture`
//! writing this store used, so `wirelog pcap` finds the packets of the
//! records without being told (`--pcap-dir` there only overrides).
//!
//! Written by the store's writer under its lock, replaced atomically
//! (temporary, fsync, rename) like `ingested.tsv`; a path is added once.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::fsutil::publish;
use crate::StoreError;

/// Name of the list inside the store directory.
pub const PCAP_DIRS_FILE: &str = "pcap_dirs.txt";

/// The packet directories recorded for the store `dir`, first recorded
/// first (none when the store or its list does not exist).
pub fn read_pcap_dirs(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let path = dir.join(PCAP_DIRS_FILE);
    let Some(text) = crate::fsutil::read_own_file(&path)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let p = PathBuf::from(line);
        if !p.is_absolute() {
            return Err(StoreError::corrupt(&path, format!("line {}: {line:?} is not an absolute path", n + 1)));
        }
        out.push(p);
    }
    Ok(out)
}

/// Adds `pcap_dir` (absolute) to the list of the store `dir` unless it is
/// there already. Called by the store's writer, which holds the lock.
pub(crate) fn record_pcap_dir(dir: &Path, pcap_dir: &Path) -> Result<(), StoreError> {
    let dst = dir.join(PCAP_DIRS_FILE);
    if !pcap_dir.is_absolute() {
        let e = std::io::Error::other(format!("{} is not an absolute path", pcap_dir.display()));
        return Err(StoreError::io(&dst, "record the packet directory in", e));
    }
    let Some(line) = pcap_dir.to_str().filter(|s| !s.contains('\n')) else {
        // Not representable on one line: not recorded, `wirelog pcap` is
        // then told with --pcap-dir (as before this list existed).
        let e = std::io::Error::other(format!("{:?} is not UTF-8 or holds a newline", pcap_dir));
        return Err(StoreError::io(&dst, "record the packet directory in", e));
    };
    let mut all = read_pcap_dirs(dir)?;
    if all.iter().any(|p| p == pcap_dir) {
        return Ok(());
    }
    all.push(PathBuf::from(line));
    let mut text = String::new();
    for p in &all {
        text.push_str(&p.to_string_lossy());
        text.push('\n');
    }
    let tmp = dir.join(format!(".{PCAP_DIRS_FILE}.tmp"));
    let mut f = crate::fsutil::create_temp(&tmp)?;
    f.write_all(text.as_bytes()).map_err(|e| StoreError::io(&tmp, "write", e))?;
    publish(&f, &tmp, &dst, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wirelog-pcapdirs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn recorded_once_in_order() {
        let d = tmpdir("order");
        assert!(read_pcap_dirs(&d).unwrap().is_empty());
        record_pcap_dir(&d, Path::new("/var/lib/a")).unwrap();
        record_pcap_dir(&d, Path::new("/var/lib/b")).unwrap();
        record_pcap_dir(&d, Path::new("/var/lib/a")).unwrap();
        assert_eq!(read_pcap_dirs(&d).unwrap(), vec![PathBuf::from("/var/lib/a"), PathBuf::from("/var/lib/b")]);
        assert!(record_pcap_dir(&d, Path::new("relative")).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_relative_line_is_named() {
        let d = tmpdir("bad");
        std::fs::write(d.join(PCAP_DIRS_FILE), "/ok\nnot/absolute\n").unwrap();
        let e = read_pcap_dirs(&d).unwrap_err().to_string();
        assert!(e.contains(PCAP_DIRS_FILE) && e.contains("line 2"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
