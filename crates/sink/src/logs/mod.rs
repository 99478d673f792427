//! The log sinks: Zeek-style TSV/JSON writers for conn.log (`zeek`),
//! flows.log (`flows`), the transaction logs (`tx`: one file per protocol,
//! its fields from the protocol's declared columns), ssl.log's escaping and
//! x509.log (`tls`), the process columns they share (`procs`), the line
//! composed in place at a cursor (`line`, the transaction logs'), and the files
//! they write (`out`, `file`: whole lines when the disk fills); `validate`,
//! Zeek's validate-certs policy (ssl.log's `validation_status`, OpenSSL's
//! chain validation on the output thread) over `libcrypto`, the few
//! functions of the system's libcrypto.so.3 it calls, loaded at run time;
//! `ocsp`, Zeek's validate-ocsp policy (ssl.log's `ocsp_status`, the
//! stapled OCSP response checked over the same libcrypto).
//! functions of the system's libcrypto.so.3 it calls, loaded at run time;
//! `sct`, Zeek's validate-sct policy (ssl.log's `valid_ct_logs`,
//! `valid_ct_operators`: SCT signatures checked against the CT log list,
//! with validate-certs) over `libcrypto_ct`.

pub mod file;
pub mod flows;
pub mod libcrypto;
pub(crate) mod line;
pub mod ocsp;
pub mod libcrypto_ct;
pub mod out;
pub(crate) mod procs;
pub mod sct;
pub mod tls;
pub mod tx;
pub mod validate;
pub mod zeek;
