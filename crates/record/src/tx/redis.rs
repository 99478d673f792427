//! What a Redis command records (filled in by `wirelog_parse::redis`).

/// One command and its reply.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RedisTx {
    /// Command name, upper case (`GET`, `CLIENT`).
    pub command: String,
    /// First argument (usually the key), as Zeek's `cmd.key`.
    pub key: Option<String>,
    /// The arguments after the command name, space-separated, cut to
    /// `max_text_bytes`. With `ParseConfig::redact` every argument but the
    /// first is `?`; AUTH's and HELLO's arguments are always `?`.
    pub args: String,
    pub args_truncated: bool,
    /// Number of arguments after the command name.
    pub num_args: u64,
    /// `simple`, `error`, `integer`, `bulk`, `array`, `null`, `double`,
    /// `boolean`, `blob_error`, `verbatim`, `bignum`, `map`, `set`, `push`.
    pub reply_type: Option<&'static str>,
    /// Simple string, error message, integer, double, boolean, big number as
    /// text; for bulk and verbatim strings their start (not when redacting).
    pub reply: Option<String>,
    /// Bulk length (-1 for null), or number of elements of an aggregate.
    pub reply_len: Option<i64>,
}
