//! The process columns of `capture --processes`: an extension of Zeek's
//! logs (added fields after Zeek's own, as a Zeek script's `&log` fields
//! would be), the same in conn.log and every transaction log.

use wirelog_record::Proc;

use crate::logs::tx::{json_str, tsv_text};
use crate::logs::zeek::push_u64;

/// Names and Zeek types, originator's end then responder's.
pub(crate) const FIELDS: &[(&str, &str)] = &[
    ("orig_pid", "count"),
    ("orig_proc", "string"),
    ("orig_exe", "string"),
    ("orig_user", "string"),
    ("orig_container", "string"),
    ("orig_pod", "string"),
    ("resp_pid", "count"),
    ("resp_proc", "string"),
    ("resp_exe", "string"),
    ("resp_user", "string"),
    ("resp_container", "string"),
    ("resp_pod", "string"),
];

/// Appends the columns (each after a tab); `-` for an unknown owner or an
/// empty container or pod.
pub(crate) fn tsv(b: &mut Vec<u8>, orig: &Proc, resp: &Proc) {
    for p in [orig, resp] {
        match p {
            None => b.extend_from_slice(b"\t-\t-\t-\t-\t-\t-"),
            Some(o) => {
                b.push(b'\t');
                push_u64(b, o.pid as u64);
                for s in [&o.name, &o.exe, &o.user, &o.container, &o.pod] {
                    b.push(b'\t');
                    if s.is_empty() {
                        b.push(b'-');
                    } else {
                        tsv_text(b, s, false);
                    }
                }
            }
        }
    }
}

/// Appends `,"orig_pid":…` members for the known owners (unset ones are
/// left out, as JSON logs leave out every unset field).
pub(crate) fn json(b: &mut Vec<u8>, orig: &Proc, resp: &Proc) {
    for (p, names) in [(orig, &FIELDS[..6]), (resp, &FIELDS[6..])] {
        let Some(o) = p else { continue };
        b.extend_from_slice(b",\"");
        b.extend_from_slice(names[0].0.as_bytes());
        b.extend_from_slice(b"\":");
        push_u64(b, o.pid as u64);
        for (s, (name, _)) in [&o.name, &o.exe, &o.user, &o.container, &o.pod].into_iter().zip(&names[1..]) {
            if s.is_empty() {
                continue;
            }
            b.extend_from_slice(b",\"");
            b.extend_from_slice(name.as_bytes());
            b.extend_from_slice(b"\":");
            json_str(b, s);
        }
    }
}
