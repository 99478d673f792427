//! Where a log's lines go: standard output, or a [`LogFile`] in the log
//! directory that keeps whole lines when its disk is full; and what the log
//! sinks share about those files (space, retries, what was dropped).

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use wirelog_safefs::Dir;

use crate::{LogFile, LogFormat, SinkEnd, Space};
use crate::logs::tx::{LINES_HANDED_AT, LINE_ROOM};

/// Bytes of lines one log file keeps in memory while its disk is full;
/// beyond, lines are dropped and counted.
const LOG_PENDING: usize = 8 << 20;

/// Standard output, or a log file that keeps whole lines on a full disk.
pub enum LogOut {
    Stdout(BufWriter<io::Stdout>),
    File(LogFile),
}

impl LogOut {
    pub fn stdout() -> LogOut {
        LogOut::Stdout(BufWriter::with_capacity(1 << 16, io::stdout()))
    }

    pub fn file(&self) -> Option<&LogFile> {
        match self {
            LogOut::File(f) => Some(f),
            LogOut::Stdout(_) => None,
        }
    }

    pub fn file_mut(&mut self) -> Option<&mut LogFile> {
        match self {
            LogOut::File(f) => Some(f),
            LogOut::Stdout(_) => None,
        }
    }
}

impl Write for LogOut {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            LogOut::Stdout(w) => w.write(b),
            LogOut::File(f) => f.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            LogOut::Stdout(w) => w.flush(),
            LogOut::File(f) => f.flush(),
        }
    }
}

/// An output that takes lines collected in a buffer (whole lines only).
pub trait TakeLines: Write {
    /// Writes the lines `b` holds and leaves it empty; it may give `b`'s
    /// buffer a new owner and `b` another (empty) one instead of copying.
    fn take_lines(&mut self, b: &mut Vec<u8>) -> io::Result<()> {
        let r = self.write_all(b);
        b.clear();
        r
    }

    /// Hands the lines `b` collected over (a log file takes the buffer
    /// itself when it holds nothing: no copy) and keeps room in `b` for the
    /// next: what the conn.log and transaction log writers do every
    /// [`LINES_HANDED_AT`] bytes and when they flush.
    fn hand_over(&mut self, b: &mut Vec<u8>) -> io::Result<()> {
        let r = self.take_lines(b);
        b.reserve(LINES_HANDED_AT + LINE_ROOM);
        r
    }
}

impl TakeLines for Vec<u8> {}

impl TakeLines for LogOut {
    fn take_lines(&mut self, b: &mut Vec<u8>) -> io::Result<()> {
        match self {
            LogOut::File(f) => f.take_lines(b),
            LogOut::Stdout(w) => {
                let r = w.write_all(b);
                b.clear();
                r
            }
        }
    }
}

/// The log directory (opened once, without following a link: see
/// wirelog-safefs): where log files are created, in which format, and the
/// free space they leave on its disk.
#[derive(Debug, Clone)]
pub struct LogDir {
    dir: Arc<Dir>,
    pub format: LogFormat,
    /// Writing pauses while the file system has less than this available.
    pub min_free: u64,
}

impl LogDir {
    /// Opens the log directory `path`, creating it (and its missing parents)
    /// when needed.
    pub fn create_dir(path: &Path, format: LogFormat, min_free: u64) -> io::Result<LogDir> {
        Ok(LogDir { dir: Arc::new(Dir::create(path)?), format, min_free })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The log `name` in the directory: an earlier file of that name is
    /// removed now, the new one appears with its header (see [`LogFile`]).
    pub fn create(&self, name: &str) -> io::Result<LogOut> {
        Ok(LogOut::File(LogFile::create(self.dir.clone(), name, LOG_PENDING, self.min_free)?))
    }

    /// Removes a log an earlier run left, before this run writes anything:
    /// logs that appear only when there is something to log would otherwise
    /// read as this run's.
    pub fn remove_stale(&self, name: &str) -> io::Result<()> {
        self.dir.remove_file(name).map(|_| ())
    }
}

/// The disk-space state of a sink's log files: the lines dropped, and the
/// first file that waits for space, named.
pub(crate) fn space<'a>(files: impl IntoIterator<Item = &'a LogOut>) -> Space {
    let mut s = Space::default();
    for f in files.into_iter().filter_map(LogOut::file) {
        s.dropped += f.stats().dropped;
        if f.waiting() && s.waiting.is_none() {
            s.waiting = Some(
                f.stats()
                    .last_error
                    .clone()
                    .unwrap_or_else(|| format!("{}: free space below --min-free", f.path().display())),
            );
        }
    }
    s
}

/// At close, after the last flush: what still waits for space is given up,
/// counted per file.
pub(crate) fn abandon<'a>(files: impl IntoIterator<Item = &'a mut LogOut>) -> SinkEnd {
    let mut end = SinkEnd::default();
    for f in files.into_iter().filter_map(LogOut::file_mut) {
        let name = f.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let st = f.abandon_pending();
        end.space_failures += st.space_failures;
        end.pauses += st.pauses;
        if st.dropped > 0 {
            end.dropped.push((name, st.dropped));
        }
    }
    end
}

/// A writer of one log with one record type per batch field, as a sink:
/// `log_sink!(ConnLogWriter, "conn.log", conns)` writes each batch's
/// `conns`, flushes on every tick, and at close writes the `#close` line and
/// counts what still waited for space.
macro_rules! log_sink {
    ($writer:ident, $name:literal, $records:ident) => {
        impl $crate::Sink for $writer<$crate::LogOut> {
            fn name(&self) -> &str {
                $name
            }

            fn write(&mut self, batch: &wirelog_record::Batch) -> std::io::Result<()> {
                batch.$records.iter().try_for_each(|r| $writer::write(self, r))
            }

            fn tick(&mut self, _now: std::time::Instant) -> std::io::Result<()> {
                self.flush()
            }

            fn space(&self) -> $crate::Space {
                $crate::logs::out::space([&self.out])
            }

            fn close(&mut self) -> std::io::Result<$crate::SinkEnd> {
                self.finish()?;
                Ok($crate::logs::out::abandon([&mut self.out]))
            }
        }
    };
}
pub(crate) use log_sink;
