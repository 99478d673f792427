//! The files of a `read` kept out of sight until the run is whole.
//!
//! A `read` into the store writes its Parquet files under
//! `<dir>/.staging/<run>/` (the same `<kind>/date=../hour=../` tree as the
//! store's own), where no reader, compaction or retention looks. At the end
//! of the run, once every other sink is done (ClickHouse: each batch in the
//! server or fsynced in its spool), the run is committed:
//!
//! 1. `COMMIT` is written in the run's directory (temporary, fsync, rename,
//!    fsync): the captures to record, in `ingested.tsv`'s form. From here
//!    on the run counts as done, whatever happens next; so every directory
//!    of the run is fsynced first, once each (its files were fsynced as
//!    they were written; its directories were not, as they were made or
//!    given a file: a run without `COMMIT` is removed whole);
//! 2. every file is renamed into its partition (the partitions, and the
//!    directories new ones were made in, fsynced once each);
//! 3. the captures are added to `ingested.tsv`;
//! 4. the run's directory is removed.
//!
//! A process killed before step 1 leaves a run without `COMMIT`: the next
//! writer of the store (it holds the store's lock, so the run's writer is
//! dead) removes it, and the capture, never recorded, can be read again to
//! give exactly one run's rows. Killed after step 1, the next writer
//! finishes steps 2 to 4, each of which can be done twice without harm, and
//! so does a `read` before it looks at the list ([`recover_unlocked`]: the
//! capture it then refuses is whole in the store); meanwhile
//! [`crate::read_ingests`] already counts the committed captures.

use std::path::{Path, PathBuf};

use crate::error::StoreError;
use crate::fsutil::{create_below_unsynced, is_data_file, list_dir, sync_dir};
use crate::ingest::{append_ingests, read_list, write_list, Ingest};

/// Directory of the runs being written, inside the store.
pub(crate) const STAGING_DIR: &str = ".staging";
/// A run's commit record.
const COMMIT: &str = "COMMIT";

/// The directory a run named `tag` writes to.
pub(crate) fn run_dir(store: &Path, tag: &str) -> PathBuf {
    store.join(STAGING_DIR).join(tag)
}

/// A run name is a file name of its own: letters, digits, `-` and `_`.
pub(crate) fn valid_tag(tag: &str) -> bool {
    !tag.is_empty() && tag.len() <= 64 && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The data files of a run, each with where it goes in the store.
fn staged_files(store: &Path, run: &Path) -> Result<Vec<(PathBuf, PathBuf)>, StoreError> {
    let mut out = Vec::new();
    for (kname, kpath) in list_dir(run)? {
        if crate::Kind::from_name(&kname).is_none() || !kpath.is_dir() {
            continue;
        }
        for (dname, dpath) in list_dir(&kpath)? {
            for (hname, hpath) in list_dir(&dpath)? {
                for (fname, fpath) in list_dir(&hpath)? {
                    if is_data_file(&fname) {
                        let dst = store.join(&kname).join(&dname).join(&hname).join(&fname);
                        out.push((fpath, dst));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Commits the run in `run` (see the module's steps), recording `ingests`;
/// returns the number of files it moved into the store.
/// Nothing to record (a run that lost rows, or `close` without captures):
/// no commit record, the files just go in, so a disk too full for one more
/// file (what made the run lose rows) does not keep them out of sight. A
/// commit record that cannot be written is said, and the files go in
/// unrecorded. Returns the files moved and whether the ingests are recorded.
/// `dirs`: the run's directories whose entries its writer changed (made in,
/// or given a file), each once, from the writer (`write_hours`), which made
/// every one of them: the ones step 1 fsyncs, with no walk of the tree.
pub(crate) fn commit(
    store: &Path,
    run: &Path,
    dirs: &[PathBuf],
    ingests: &[Ingest],
) -> Result<(usize, bool), StoreError> {
    let mut recorded = false;
    if !ingests.is_empty() {
        sync_run(dirs)?;
        match write_list(&run.join(format!(".{COMMIT}.tmp")), &run.join(COMMIT), ingests) {
            Ok(()) => recorded = true,
            Err(e) => eprintln!(
                "wirelog: warning: {e}: the run's files go into the store without recording its captures"
            ),
        }
    }
    Ok((finish(store, run)?, recorded))
}

/// Makes the run's tree durable before its commit record: each directory
/// of `dirs` fsynced once, the last made first (the run's own entry in the
/// staging directory was made durable when it was created). The order is
/// not what keeps the guarantee: every one is fsynced before `COMMIT` is
/// written, and a crash before that leaves a run that is removed whole.
fn sync_run(dirs: &[PathBuf]) -> Result<(), StoreError> {
    for d in dirs.iter().rev() {
        sync_dir(d)?;
    }
    Ok(())
}

/// Steps 2 to 4 of a committed run.
fn finish(store: &Path, run: &Path) -> Result<usize, StoreError> {
    let files = staged_files(store, run)?;
    // The partitions given files and the directories new partitions were
    // made in: each fsynced once, after every move and before the list
    // and the run's removal (until then `COMMIT` has every move redone).
    let mut dirs: Vec<PathBuf> = Vec::new();
    for (src, dst) in &files {
        let parent = dst.parent().expect("a partition directory");
        // Walked from the store's root without following a link, so a
        // partition planted as a link is refused before anything moves.
        create_below_unsynced(store, parent, &mut dirs)?;
        std::fs::rename(src, dst).map_err(|e| StoreError::io(dst, "move a committed file into", e))?;
        if !dirs.iter().any(|d| d == parent) {
            dirs.push(parent.to_path_buf());
        }
    }
    for d in &dirs {
        sync_dir(d)?;
    }
    append_ingests(store, &read_list(&run.join(COMMIT))?)?;
    remove_run(run)?;
    Ok(files.len())
}

fn remove_run(run: &Path) -> Result<(), StoreError> {
    std::fs::remove_dir_all(run).map_err(|e| StoreError::io(run, "remove", e))?;
    if let Some(parent) = run.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

/// What [`recover`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// Runs that had committed, finished now.
    pub finished: usize,
    /// Runs that never committed (killed), and their files, removed.
    pub removed: usize,
    pub removed_files: usize,
}

impl Recovered {
    /// What a user is told when runs were removed (`None`: nothing to say).
    pub fn note(&self, store: &Path) -> Option<String> {
        (self.removed > 0).then(|| {
            format!(
                "wirelog: store {}: removed {} files of {} unfinished read(s) (killed before the end); \
                 their captures were not recorded and can be read again",
                store.display(),
                self.removed_files,
                self.removed
            )
        })
    }
}

/// Finishes and removes what earlier runs left in the staging of `store`
/// when no process writes to it (its writer lock is free); `None` when one
/// does (it did the same when it opened the store). `read` calls it before
/// it looks at the list of ingests: a run killed after its commit record
/// is then whole in the store, not only listed.
pub fn recover_unlocked(store: &Path) -> Result<Option<Recovered>, StoreError> {
    if !store.join(STAGING_DIR).is_dir() {
        return Ok(Some(Recovered::default()));
    }
    match crate::fsutil::DirLock::try_lock(&store.join(crate::writer::LOCK_FILE))? {
        Some(_lock) => recover(store).map(Some),
        None => Ok(None),
    }
}

/// Finishes the committed runs of a store and removes the others. Only for
/// the holder of the store's writer lock (no run is being written then).
pub(crate) fn recover(store: &Path) -> Result<Recovered, StoreError> {
    let mut r = Recovered::default();
    for (name, run) in list_dir(&store.join(STAGING_DIR))? {
        if !run.is_dir() || name.starts_with('.') {
            continue;
        }
        if run.join(COMMIT).is_file() {
            finish(store, &run)?;
            r.finished += 1;
        } else {
            r.removed_files += staged_files(store, &run)?.len();
            remove_run(&run)?;
            r.removed += 1;
        }
    }
    Ok(r)
}

/// The captures of runs committed but not finished.
pub(crate) fn committed_ingests(store: &Path) -> Result<Vec<Ingest>, StoreError> {
    let mut out = Vec::new();
    for (_, run) in list_dir(&store.join(STAGING_DIR))? {
        out.extend(read_list(&run.join(COMMIT))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::tests::ingest;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wirelog-staging-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A run with one data file of conns in one hour.
    fn staged(store: &Path, tag: &str) -> PathBuf {
        let run = run_dir(store, tag);
        let part = run.join("conns/date=2023-11-14/hour=22");
        std::fs::create_dir_all(&part).unwrap();
        std::fs::write(part.join("part-1-0.parquet"), b"rows").unwrap();
        std::fs::write(part.join(".part-2-0.parquet.tmp"), b"half").unwrap();
        run
    }

    #[test]
    fn an_unfinished_run_is_removed_and_a_committed_one_finished() {
        let d = tmpdir("recover");
        let killed = staged(&d, "aa");
        let committed = staged(&d, "bb");
        std::fs::rename(
            committed.join("conns/date=2023-11-14/hour=22/part-1-0.parquet"),
            committed.join("conns/date=2023-11-14/hour=22/part-1-1.parquet"),
        )
        .unwrap();
        // Killed right after step 1 of "bb": its capture counts already.
        write_list(&committed.join(".c.tmp"), &committed.join(COMMIT), &[ingest("9-ff")]).unwrap();
        assert_eq!(crate::read_ingests(&d).unwrap(), vec![ingest("9-ff")]);
        let r = recover(&d).unwrap();
        assert_eq!(r, Recovered { finished: 1, removed: 1, removed_files: 1 });
        assert!(!killed.exists() && !committed.exists());
        let part = d.join("conns/date=2023-11-14/hour=22");
        let names: Vec<String> = list_dir(&part).unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["part-1-1.parquet"], "only the committed run's file is in the store");
        assert_eq!(crate::read_ingests(&d).unwrap(), vec![ingest("9-ff")], "recorded once");
        // Finishing twice (killed during step 4) records nothing twice.
        let again = staged(&d, "cc");
        commit(&d, &again, std::slice::from_ref(&again), &[ingest("9-ff")]).unwrap();
        assert_eq!(crate::read_ingests(&d).unwrap(), vec![ingest("9-ff")]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_run_is_recovered_without_a_writer_only_while_none_holds_the_lock() {
        let d = tmpdir("unlocked");
        let run = staged(&d, "dd");
        write_list(&run.join(".c.tmp"), &run.join(COMMIT), &[ingest("7-aa")]).unwrap();
        let held = crate::fsutil::DirLock::try_lock(&d.join(crate::writer::LOCK_FILE)).unwrap().unwrap();
        assert_eq!(recover_unlocked(&d).unwrap(), None, "a writer holds the store");
        assert!(run.exists());
        drop(held);
        assert_eq!(recover_unlocked(&d).unwrap(), Some(Recovered { finished: 1, removed: 0, removed_files: 0 }));
        assert!(d.join("conns/date=2023-11-14/hour=22/part-1-0.parquet").is_file());
        assert_eq!(read_list(&d.join(crate::ingest::INGESTED_FILE)).unwrap(), vec![ingest("7-aa")]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
