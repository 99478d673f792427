//! What a MongoDB operation records (filled in by `wirelog_parse::mongodb`):
//! one transaction per request message (OP_MSG, or a legacy OP_QUERY,
//! OP_INSERT, OP_UPDATE, OP_DELETE, OP_GET_MORE, OP_KILL_CURSORS) and the
//! reply that answers it (`responseTo` = its `requestID`).

/// One MongoDB request and its reply.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MongodbTx {
    /// The wire opcode of the request: `msg`, `query`, `insert`, `update`,
    /// `delete`, `get_more`, `kill_cursors` (an OP_COMPRESSED message is
    /// read as the message it wraps: see `compressor`), `compressed` (an
    /// OP_COMPRESSED not decompressed: cut by the capture, larger than the
    /// parser keeps, or broken), `reply` (a reply whose request was
    /// not seen), `unknown`.
    pub op: &'static str,
    /// The command: the first key of an OP_MSG body or of an OP_QUERY to
    /// `<db>.$cmd` (`find`, `insert`, `getMore`, `hello`, ...), as the
    /// client spelled it; `find` for a legacy OP_QUERY on a collection, the
    /// operation's name for the other legacy opcodes.
    pub command: Option<String>,
    /// The database (`$db` of an OP_MSG; the part of a legacy full
    /// collection name before the first `.`).
    pub database: Option<String>,
    /// The collection the command names (the command's value when it is a
    /// string, `collection` for `getMore`).
    pub collection: Option<String>,
    /// The filter's shape: its keys and operators with every literal
    /// replaced by `?` (`{name: ?, age: {$gt: ?}}`); for `aggregate` the
    /// pipeline's stages, for `update`/`delete` the first statement's `q`.
    pub fingerprint: Option<String>,
    /// The reply's error code (`code` of a failed command, of its first
    /// write error or of its write concern error).
    pub error_code: Option<u64>,
    /// The reply's error text (`errmsg`, `$err`, a write error's `errmsg`).
    pub error_message: Option<String>,
    /// Documents the reply returned: `cursor.firstBatch`/`nextBatch`'s
    /// length, or a legacy OP_REPLY's `numberReturned`.
    pub docs_returned: Option<u64>,
    /// Documents the command affected or counted (the reply's `n`).
    pub n: Option<u64>,
    /// The cursor: the one a `find`/`aggregate` reply opened (0 when it is
    /// exhausted), or the one a `getMore`/OP_GET_MORE continues; it ties a
    /// `getMore` to the `find` that opened it.
    pub cursor_id: Option<u64>,
    /// The request asked for no reply (OP_MSG `moreToCome`, unacknowledged
    /// writes, the legacy write opcodes).
    pub more_to_come: bool,
    /// The compressor of the OP_COMPRESSED the request or its reply came
    /// in (`noop`, `snappy`, `zlib`, `zstd`; `reserved` for an id the
    /// specification does not assign), the request's when both were.
    pub compressor: Option<&'static str>,
    /// One of several replies to one request (OP_MSG `exhaustAllowed`,
    /// replies with `moreToCome`): the first is paired with the request;
    /// each later one is a transaction of its own with the request's
    /// command, collection and filter, no request bytes, and its latency
    /// counted from the reply before it.
    pub exhaust: bool,
}

use crate::columns::{Card::*, Column as C, Columns, LogText, Type::*, Unit, Val};
use crate::get;

/// MongoDB's columns, in mongodb.log's order (ours: Zeek has no such log).
pub static COLUMNS: Columns = Columns {
    columns: &[
        C::new("op", Text, Low, "Wire opcode of the request (msg, query, insert, update, delete, get_more, kill_cursors, compressed).", get!(Mongodb, |r, m| Val::Text(Some(m.op)))),
        C::new("command", Text, Low, "Command name (find, insert, getMore, aggregate, hello, ...).", get!(Mongodb, |r, m| Val::Text(m.command.as_deref())))
            .aliases(&["cmd", "method"])
            .brief(),
        C::new("database", Text, Low, "Database.", get!(Mongodb, |r, m| Val::Text(m.database.as_deref()))).aliases(&["db"]),
        C::new("collection", Text, Mid, "Collection the command names.", get!(Mongodb, |r, m| Val::Text(m.collection.as_deref())))
            .aliases(&["coll"])
            .brief(),
        C::new("fingerprint", Text, Mid, "The filter's shape, every literal replaced by ?.", get!(Mongodb, |r, m| Val::Text(m.fingerprint.as_deref())))
            .aliases(&["fp"])
            .brief(),
        C::new("error_code", Count { bits: 64, unit: Unit::Plain }, Low, "Error code of a failed command or write.", get!(Mongodb, |r, m| Val::Count(m.error_code))),
        C::new("error_message", Text, High, "Error text (errmsg, $err).", get!(Mongodb, |r, m| Val::Text(m.error_message.as_deref()))),
        C::new("docs_returned", Count { bits: 64, unit: Unit::Count }, Low, "Documents the reply returned (a cursor's batch, numberReturned).", get!(Mongodb, |r, m| Val::Count(m.docs_returned)))
            .brief(),
        C::new("n", Count { bits: 64, unit: Unit::Count }, Low, "Documents the command affected or counted (the reply's n).", get!(Mongodb, |r, m| Val::Count(m.n))),
        C::new("cursor_id", Count { bits: 64, unit: Unit::Plain }, High, "Cursor a find opened or a getMore continues.", get!(Mongodb, |r, m| Val::Count(m.cursor_id))),
        C::new("more_to_come", Bool, Low, "The request asked for no reply.", get!(Mongodb, |r, m| Val::Bool(Some(m.more_to_come)))),
        C::new("compressor", Text, Low, "Compressor of the OP_COMPRESSED around the request or its reply (snappy, zlib, zstd, noop).", get!(Mongodb, |r, m| Val::Text(m.compressor))),
        C::new("exhaust", Bool, Low, "A reply of an exhaust stream (several replies to one request, moreToCome).", get!(Mongodb, |r, m| Val::Bool(Some(m.exhaust)))),
    ],
    store_order: &[],
    by: &["command", "collection", "fingerprint"],
    shape: &["command", "collection", "fingerprint"],
    renamed: &[],
    log_text: LogText::Utf8,
};
