//! What a Redis command records (filled in by `wirelog_parse::redis`).

use std::sync::Arc;

use crate::SmallText;

/// One command and its reply.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RedisTx {
    /// Command name, upper case (`GET`, `CLIENT`); shared between the
    /// connection's commands of one name.
    pub command: Arc<str>,
    /// First argument (usually the key), as Zeek's `cmd.key`.
    pub key: Option<SmallText>,
    /// The arguments after the command name, space-separated, cut to
    /// `max_text_bytes`. With `ParseConfig::redact` every argument but the
    /// first is `?`; AUTH's and HELLO's arguments are always `?`.
    pub args: SmallText,
    pub args_truncated: bool,
    /// Number of arguments after the command name.
    pub num_args: u64,
    /// `simple`, `error`, `integer`, `bulk`, `array`, `null`, `double`,
    /// `boolean`, `blob_error`, `verbatim`, `bignum`, `map`, `set`, `push`.
    pub reply_type: Option<&'static str>,
    /// Simple string, error message, integer, double, boolean, big number as
    /// text; for bulk and verbatim strings their start (not when redacting).
    /// A repeated simple reply (`OK`) is shared between the connection's
    /// commands.
    pub reply: Option<SmallText>,
    /// Bulk length (-1 for null), or number of elements of an aggregate.
    pub reply_len: Option<i64>,
}

use crate::columns::{Card::*, Column as C, Columns, LogText, Type::*, Unit, Val};
use crate::get;

/// Redis's columns, in redis.log's order.
pub static COLUMNS: Columns = Columns {
    columns: &[
        C::new("command", Text, Low, "Command name, upper case.", get!(Redis, |r, x| Val::text(&x.command)))
            .log_as("cmd")
            .aliases(&["cmd"])
            .brief(),
        C::log_only("key", Text, "First argument (usually the key).", get!(Redis, |r, x| Val::Text(x.key.as_deref()))),
        C::new("args", Text, High, "Arguments after the command, space-separated (redacted when asked).", get!(Redis, |r, x| Val::text(&x.args))).brief(),
        C::log_only("num_args", Count { bits: 64, unit: Unit::Count }, "Number of arguments.", get!(Redis, |r, x| Val::Count(Some(x.num_args)))),
        C::new("reply_type", Text, Low, "Reply type (simple, error, integer, bulk, array, ...).", get!(Redis, |r, x| Val::Text(x.reply_type))).brief(),
        C::new("reply", Text, High, "Reply as text (a bulk string's start).", get!(Redis, |r, x| Val::Text(x.reply.as_deref()))),
        C::log_only("reply_len", Count { bits: 64, unit: Unit::Count }, "Bulk length, or elements of an aggregate.", get!(Redis, |r, x| Val::Count(x.reply_len.and_then(|l| u64::try_from(l).ok())))),
    ],
    store_order: &[],
    by: &["command"],
    shape: &["command"],
    renamed: &[],
    log_text: LogText::Utf8,
};
