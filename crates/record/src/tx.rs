//! Transaction records: one request and its response, parsed from a
//! connection, tagged with the connection's uid and endpoints.

use wirelog_decode::IpAddr16;
use wirelog_parse::{Protocol, Transaction};

use crate::{Proto, Uid};

#[derive(Debug, Clone)]
pub struct TxRecord {
    /// The uid of the connection (the same as in its conn record).
    pub uid: Uid,
    /// Client (the connection's originator) and server.
    pub orig_h: IpAddr16,
    pub orig_p: u16,
    pub resp_h: IpAddr16,
    pub resp_p: u16,
    pub transport: Proto,
    pub protocol: Protocol,
    pub tx: Transaction,
    /// The processes behind the client and server ends (see `ConnRecord`).
    pub orig_proc: crate::Proc,
    pub resp_proc: crate::Proc,
}
