//! Why a capture could not be opened at all.
//!
//! Problems found while reading are not errors (see [`crate::Problem`]); this is
//! only for input that never yields a single packet, so it can afford a `String`.

use std::{fmt, io};

/// What kind of failure an [`OpenError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpenErrorKind {
    /// The file could not be opened, inspected, mapped or read.
    Io,
    /// Zero bytes (after decompression, for gzip).
    Empty,
    /// Neither a pcap nor a pcapng magic (or too short to hold one).
    UnknownFormat,
    /// A pcap magic, but the 24-byte file header is cut short.
    TruncatedHeader,
    /// A pcapng section header whose byte-order magic is wrong.
    BadHeader,
    /// gzip magic, but the stream does not decompress.
    Decompression,
}

/// A capture file that cannot be read. Displays as `"<name>: <what is wrong>"`.
#[derive(Debug)]
pub struct OpenError {
    name: String,
    kind: OpenErrorKind,
    message: String,
    io: Option<io::Error>,
}

impl OpenError {
    pub(crate) fn new(name: &str, kind: OpenErrorKind, message: String) -> OpenError {
        OpenError {
            name: name.to_owned(),
            kind,
            message,
            io: None,
        }
    }

    pub(crate) fn io(name: &str, kind: OpenErrorKind, err: io::Error) -> OpenError {
        OpenError {
            name: name.to_owned(),
            kind,
            message: io_message(&err),
            io: Some(err),
        }
    }

    /// The file name as given to `open` / `from_reader`.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kind(&self) -> OpenErrorKind {
        self.kind
    }

    /// The underlying I/O error, if there was one. Not returned by `source()`:
    /// its text is already part of this error's message and would print twice.
    pub fn io_error(&self) -> Option<&io::Error> {
        self.io.as_ref()
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.message)
    }
}

impl std::error::Error for OpenError {}

/// `io::Error` text without the " (os error 2)" suffix, which means nothing to a user.
pub(crate) fn io_message(e: &io::Error) -> String {
    let s = e.to_string();
    match (e.raw_os_error(), s.rfind(" (os error ")) {
        (Some(_), Some(i)) => s[..i].to_owned(),
        _ => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_and_drops_os_error_code() {
        let e = OpenError::io("x.pcap", OpenErrorKind::Io, io::Error::from_raw_os_error(2));
        assert_eq!(e.to_string(), "x.pcap: No such file or directory");
        assert_eq!(e.kind(), OpenErrorKind::Io);
        assert_eq!(e.io_error().unwrap().kind(), io::ErrorKind::NotFound);
        let e = OpenError::new("c.pcap", OpenErrorKind::Empty, "empty file".into());
        assert_eq!(e.to_string(), "c.pcap: empty file");
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(e);
        assert!(boxed.source().is_none());
    }
}
