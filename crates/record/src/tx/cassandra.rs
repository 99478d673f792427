//! What a Cassandra request records (filled in by `wirelog_parse::cassandra`):
//! one transaction per CQL request frame and the response frame that carries
//! its stream id, and one per server-pushed EVENT.

/// One CQL request and its response.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CassandraTx {
    /// The request's opcode as the protocol spec names it (`QUERY`,
    /// `PREPARE`, `EXECUTE`, `BATCH`, `STARTUP`, `OPTIONS`, `REGISTER`,
    /// `AUTH_RESPONSE`); `EVENT` for a server push, the response's opcode
    /// when its request was not seen.
    pub op: &'static str,
    /// The response's opcode (`RESULT`, `ERROR`, `READY`, `SUPPORTED`,
    /// `AUTHENTICATE`, `AUTH_CHALLENGE`, `AUTH_SUCCESS`).
    pub response_op: Option<&'static str>,
    /// Protocol version of the frames (3, 4, 5).
    pub version: u8,
    /// The stream id pairing request and response (none for an EVENT,
    /// whose stream is negative).
    pub stream: Option<u16>,
    /// The statement: a QUERY's or PREPARE's text, the text an EXECUTE's
    /// id was prepared from when the PREPARE was seen on the connection,
    /// a BATCH's first statement (redacted when asked, cut to the text
    /// limit).
    pub query: Option<String>,
    /// The statement with its literals replaced (as for SQL).
    pub fingerprint: Option<String>,
    /// Consistency level of a QUERY, EXECUTE or BATCH (`ONE`, `QUORUM`, ...).
    pub consistency: Option<&'static str>,
    /// A BATCH's type (`logged`, `unlogged`, `counter`).
    pub batch_type: Option<&'static str>,
    /// Statements in a BATCH.
    pub batch_statements: Option<u32>,
    /// The RESULT's kind: `void`, `rows`, `set_keyspace`, `prepared`,
    /// `schema_change`.
    pub result: Option<&'static str>,
    /// Rows a `rows` result returned (this page's).
    pub rows: Option<u64>,
    /// Columns of a `rows` result's metadata.
    pub columns: Option<u32>,
    /// The keyspace a result names (rows metadata's global table spec,
    /// `set_keyspace`, a schema change's keyspace).
    pub keyspace: Option<String>,
    /// The table a result names (rows metadata, a schema change's name).
    pub table: Option<String>,
    /// A schema change: change type and target (`CREATED KEYSPACE`); an
    /// EVENT's type and change (`SCHEMA_CHANGE UPDATED TABLE`,
    /// `TOPOLOGY_CHANGE NEW_NODE`).
    pub change: Option<String>,
    /// The ERROR's code and its name in the spec (`Syntax_error`,
    /// `Unavailable`, ...).
    pub error_code: Option<u32>,
    pub error: Option<&'static str>,
    pub error_message: Option<String>,
    /// Warnings the response carried (its warning flag).
    pub warnings: Option<u32>,
    /// How the frames' bodies were compressed: `lz4` or `snappy` (read),
    /// `yes` (flagged, algorithm unknown: the body was not read); in v5,
    /// `lz4` for every frame of a connection whose segments are lz4.
    pub compression: Option<&'static str>,
}

use crate::columns::{Card::*, Column as C, Columns, LogText, Type::*, Unit, Val};
use crate::get;

const NUM: crate::columns::Type = Count { bits: 64, unit: Unit::Count };

/// Cassandra's columns, in cassandra.log's order (ours: Zeek has no CQL log).
pub static COLUMNS: Columns = Columns {
    columns: &[
        C::new("op", Text, Low, "The request's opcode (QUERY, PREPARE, EXECUTE, BATCH, STARTUP, OPTIONS, REGISTER; EVENT for a server push).", get!(Cassandra, |r, c| Val::Text(Some(c.op))))
            .aliases(&["command", "cmd"])
            .brief(),
        C::new("response_op", Text, Low, "The response's opcode (RESULT, ERROR, READY, SUPPORTED, AUTHENTICATE, ...).", get!(Cassandra, |r, c| Val::Text(c.response_op))),
        C::new("version", Count { bits: 16, unit: Unit::Plain }, Low, "Protocol version of the frames (3, 4, 5).", get!(Cassandra, |r, c| Val::Count(Some(u64::from(c.version))))),
        C::new("stream", Count { bits: 16, unit: Unit::Plain }, High, "Stream id pairing request and response.", get!(Cassandra, |r, c| Val::Count(c.stream.map(u64::from)))),
        C::new("query", Text, High, "The statement (an EXECUTE's prepared text, a BATCH's first; redacted when asked, cut to the text limit).", get!(Cassandra, |r, c| Val::Text(c.query.as_deref()))).brief(),
        C::new("fingerprint", Text, Mid, "The statement with its literals replaced.", get!(Cassandra, |r, c| Val::Text(c.fingerprint.as_deref()))).aliases(&["fp"]),
        C::new("consistency", Text, Low, "Consistency level (ONE, QUORUM, LOCAL_QUORUM, ...).", get!(Cassandra, |r, c| Val::Text(c.consistency))),
        C::new("batch_type", Text, Low, "A BATCH's type (logged, unlogged, counter).", get!(Cassandra, |r, c| Val::Text(c.batch_type))),
        C::new("batch_statements", NUM, Low, "Statements in a BATCH.", get!(Cassandra, |r, c| Val::Count(c.batch_statements.map(u64::from)))),
        C::new("result", Text, Low, "The RESULT's kind (void, rows, set_keyspace, prepared, schema_change).", get!(Cassandra, |r, c| Val::Text(c.result))).brief(),
        C::new("rows", NUM, Low, "Rows a rows result returned.", get!(Cassandra, |r, c| Val::Count(c.rows))).brief(),
        C::new("columns", NUM, Low, "Columns of a rows result.", get!(Cassandra, |r, c| Val::Count(c.columns.map(u64::from)))),
        C::new("keyspace", Text, Low, "Keyspace the result names.", get!(Cassandra, |r, c| Val::Text(c.keyspace.as_deref()))),
        C::new("table", Text, Mid, "Table the result names.", get!(Cassandra, |r, c| Val::Text(c.table.as_deref()))),
        C::new("change", Text, Low, "Schema change (CREATED KEYSPACE) or an EVENT's type and change.", get!(Cassandra, |r, c| Val::Text(c.change.as_deref()))),
        C::new("error_code", Count { bits: 64, unit: Unit::Plain }, Low, "The ERROR's code.", get!(Cassandra, |r, c| Val::Count(c.error_code.map(u64::from)))),
        C::new("error", Text, Low, "The ERROR's name in the spec (Syntax_error, Unavailable, Invalid, ...).", get!(Cassandra, |r, c| Val::Text(c.error))).brief(),
        C::new("error_message", Text, High, "The ERROR's message.", get!(Cassandra, |r, c| Val::Text(c.error_message.as_deref()))),
        C::new("warnings", NUM, Low, "Warnings the response carried.", get!(Cassandra, |r, c| Val::Count(c.warnings.map(u64::from)))),
        C::new("compression", Text, Low, "Compressed frames: lz4 or snappy (read), yes (algorithm unknown, not read).", get!(Cassandra, |r, c| Val::Text(c.compression))),
    ],
    store_order: &[],
    by: &["op", "fingerprint"],
    shape: &["op", "fingerprint"],
    renamed: &[],
    log_text: LogText::Utf8,
};
