//! What a Memcached command records (filled in by `wirelog_parse::memcached`):
//! the text protocol's commands (`get`, `set`, `delete`, `incr`, ...) and the
//! binary protocol's opcodes, one transaction per request and its response.

/// One command and its response.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemcachedTx {
    /// Command name, lower case (`get`, `gets`, `set`, `cas`, `delete`,
    /// `incr`, `touch`, `version`, ...; `unknown` for another word).
    pub command: &'static str,
    /// The first key, cut to `max_text_bytes`.
    pub key: Option<String>,
    /// How many keys the command names (a `get` may name many).
    pub keys: u32,
    /// What the server answered: `hit` (every key found), `partial_hit`,
    /// `miss`, `stored`, `not_stored`, `exists`, `not_found`, `deleted`,
    /// `touched`, `value` (incr/decr's new value), `ok`, `version`,
    /// `stats`, `error`, `client_error`, `server_error`, `other`.
    pub result: Option<&'static str>,
    /// Values a retrieval returned.
    pub hits: Option<u32>,
    /// Data bytes: what a storage command sent, or what a retrieval got
    /// back (the values, without their framing).
    pub value_bytes: Option<u64>,
    /// The command asked for no reply (`noreply`).
    pub noreply: bool,
    /// The text of a `CLIENT_ERROR` or `SERVER_ERROR`; in the binary
    /// protocol, the status's name when it is an error.
    pub error_message: Option<String>,
    /// `text` or `binary`.
    pub protocol: &'static str,
    /// The binary protocol's opcode by its name in the protocol's
    /// definition (`Get`, `GetK`, `SetQ`, `Increment`, `Stat`, ...).
    pub opcode: Option<&'static str>,
}

use crate::columns::{Card::*, Column as C, Columns, LogText, Type::*, Unit, Val};
use crate::get;

/// Memcached's columns, in memcached.log's order (ours: Zeek has no such
/// log).
pub static COLUMNS: Columns = Columns {
    columns: &[
        C::new("command", Text, Low, "Command name, lower case (get, set, delete, incr, ...).", get!(Memcached, |r, m| Val::Text(Some(m.command))))
            .aliases(&["cmd"])
            .brief(),
        C::new("key", Text, High, "The first key.", get!(Memcached, |r, m| Val::Text(m.key.as_deref()))).brief(),
        C::new("keys", Count { bits: 64, unit: Unit::Count }, Low, "Keys the command names.", get!(Memcached, |r, m| Val::Count(Some(m.keys as u64)))),
        C::new("result", Text, Low, "What the server answered (hit, miss, stored, not_stored, not_found, deleted, error, ...).", get!(Memcached, |r, m| Val::Text(m.result)))
            .brief(),
        C::new("hits", Count { bits: 64, unit: Unit::Count }, Low, "Values a retrieval returned.", get!(Memcached, |r, m| Val::Count(m.hits.map(u64::from)))),
        C::new("value_bytes", Count { bits: 64, unit: Unit::Bytes }, Low, "Data bytes stored or returned (without framing).", get!(Memcached, |r, m| Val::Count(m.value_bytes))),
        C::new("noreply", Bool, Low, "The command asked for no reply.", get!(Memcached, |r, m| Val::Bool(Some(m.noreply)))),
        C::new("error_message", Text, High, "Text of a CLIENT_ERROR or SERVER_ERROR (binary: the error status).", get!(Memcached, |r, m| Val::Text(m.error_message.as_deref()))),
        C::new("protocol", Text, Low, "text or binary.", get!(Memcached, |r, m| Val::text(m.protocol))),
        C::new("opcode", Text, Low, "Binary opcode by name (Get, GetK, SetQ, Increment, ...).", get!(Memcached, |r, m| Val::Text(m.opcode))),
    ],
    store_order: &[],
    by: &["command", "result"],
    shape: &["command", "result"],
    renamed: &[],
    log_text: LogText::Utf8,
};
