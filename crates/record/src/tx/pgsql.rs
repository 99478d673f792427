//! What a PostgreSQL transaction records (filled in by `wirelog_parse::pgsql`).

use std::sync::Arc;

/// One PostgreSQL transaction (the kinds are described in `wirelog_parse::pgsql`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PgsqlTx {
    /// `startup`, `ssl_request`, `query`, `execute`, `parse`, `bind`,
    /// `describe`, `close`, `function_call`, `cancel`, `terminate`, `unknown`
    /// (a response whose request was not seen).
    pub kind: &'static str,
    /// SQL text (redacted when `ParseConfig::redact`, cut to `max_text_bytes`).
    /// Shared: a prepared statement's executions all hold its text.
    pub query: Option<Arc<str>>,
    pub query_truncated: bool,
    /// Shared between the connection's statements of one shape.
    pub fingerprint: Option<Arc<str>>,
    /// Prepared statement name of an Execute (`""` is the unnamed one).
    pub statement: Option<Arc<str>>,
    /// The startup's parameters, shared with the connection's other
    /// transactions.
    pub user: Option<Arc<str>>,
    pub database: Option<Arc<str>>,
    pub application_name: Option<Arc<str>>,
    /// Authentication requested by the server (`startup` only): `ok`,
    /// `cleartext`, `md5`, `sasl`, `gss`, `sspi`, ...; the last one asked.
    pub auth_method: Option<&'static str>,
    /// CommandComplete tag (`SELECT 15`, `INSERT 0 1`); for `ssl_request`
    /// the server's one-byte answer (`N`). Shared between the connection's
    /// transactions with the same tag.
    pub command_tag: Option<Arc<str>>,
    /// Row count from the command tag (its last number), when it has one.
    pub rows: Option<u64>,
    /// DataRow messages received (Packetbeat's `num_rows`, Zeek's `rows`).
    pub num_rows: u64,
    /// Columns of the RowDescription, when there was one.
    pub num_fields: Option<u16>,
    pub error_severity: Option<String>,
    /// SQLSTATE (`23505`).
    pub error_code: Option<String>,
    pub error_message: Option<String>,
}

impl PgsqlTx {
    /// First word of the query, upper case (Packetbeat's `method`), else the kind.
    pub fn method(&self) -> String {
        match self.query.as_deref().and_then(|q| q.split_whitespace().next()) {
            Some(w) => w.trim_end_matches(';').to_ascii_uppercase(),
            None => self.kind.to_ascii_uppercase(),
        }
    }
}

use crate::columns::{Card::*, Column as C, Columns, LogText, Type::*, Unit, Val};
use crate::get;

const ROWS: crate::columns::Type = Count { bits: 64, unit: Unit::Count };

/// PostgreSQL's columns, in pgsql.log's order (ours: Zeek has no such log).
pub static COLUMNS: Columns = Columns {
    columns: &[
        C::new("command", Text, Low, "What the client asked (startup, query, execute, parse, bind, ...).", get!(Pgsql, |r, p| Val::Text(Some(p.kind))))
            .log_as("kind")
            .aliases(&["cmd"])
            .brief(),
        C::new("query", Text, High, "SQL text (redacted when asked, cut to the text limit).", get!(Pgsql, |r, p| Val::Text(p.query.as_deref()))).brief(),
        C::new("fingerprint", Text, Mid, "The statement with its literals replaced.", get!(Pgsql, |r, p| Val::Text(p.fingerprint.as_deref()))).aliases(&["fp"]),
        C::log_only("statement", Text, "Prepared statement name of an Execute.", get!(Pgsql, |r, p| Val::Text(p.statement.as_deref()))),
        C::new("database", Text, Low, "Database of the connection.", get!(Pgsql, |r, p| Val::Text(p.database.as_deref()))).aliases(&["db"]),
        C::new("user", Text, Low, "User of the connection.", get!(Pgsql, |r, p| Val::Text(p.user.as_deref()))),
        C::log_only("application_name", Text, "application_name of the connection.", get!(Pgsql, |r, p| Val::Text(p.application_name.as_deref()))),
        C::new("command_tag", Text, Low, "CommandComplete tag (SELECT 15).", get!(Pgsql, |r, p| Val::Text(p.command_tag.as_deref()))).aliases(&["tag"]),
        C::new("rows", ROWS, Low, "Row count of the command tag.", get!(Pgsql, |r, p| Val::Count(p.rows))).aliases(&["num_rows"]),
        C::new("num_fields", ROWS, Low, "Columns of the row description.", get!(Pgsql, |r, p| Val::Count(p.num_fields.map(u64::from)))),
        C::new("error_severity", Text, Low, "Severity of the error (ERROR, FATAL).", get!(Pgsql, |r, p| Val::Text(p.error_severity.as_deref()))).aliases(&["severity"]),
        C::new("error_code", Text, Low, "SQLSTATE of the error.", get!(Pgsql, |r, p| Val::Text(p.error_code.as_deref()))).brief(),
        C::new("error_message", Text, High, "Error message.", get!(Pgsql, |r, p| Val::Text(p.error_message.as_deref()))).brief(),
    ],
    store_order: &[],
    by: &["fingerprint"],
    shape: &["fingerprint"],
    renamed: &[],
    log_text: LogText::Utf8,
};
