//! What a MySQL command records (filled in by `wirelog_parse::mysql`).

use std::sync::Arc;

/// One MySQL command and its response.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MysqlTx {
    /// Command name as Zeek's mysql.log writes it (`query`, `stmt_execute`,
    /// `init_db`, `ping`, ... and `login` for the connection handshake).
    pub command: &'static str,
    /// SQL text (COM_QUERY, COM_STMT_PREPARE, and COM_STMT_EXECUTE with the
    /// text of its prepared statement), or the argument of other commands
    /// (database of COM_INIT_DB, table of COM_FIELD_LIST). Redacted when
    /// `ParseConfig::redact`, cut to `max_text_bytes`.
    /// Shared: a prepared statement's executions all hold its text.
    pub query: Option<Arc<str>>,
    /// `query` was cut.
    pub query_truncated: bool,
    /// pt-query-digest fingerprint of the SQL text, shared between the
    /// connection's statements of one shape.
    pub fingerprint: Option<Arc<str>>,
    pub statement_id: Option<u32>,
    /// COM_STMT_EXECUTE parameter values as text (`?` each when redacting).
    pub params: Vec<String>,
    /// Current database when the command was sent. Shared with the
    /// connection's other transactions (these three are per connection).
    pub database: Option<Arc<str>>,
    pub user: Option<Arc<str>>,
    pub server_version: Option<Arc<str>>,
    pub affected_rows: Option<u64>,
    pub insert_id: Option<u64>,
    /// Rows of the result set(s); for COM_STMT_PREPARE none.
    pub num_rows: Option<u64>,
    /// Columns of the (last) result set, or of the prepared statement.
    pub num_fields: Option<u64>,
    pub error_code: Option<u16>,
    pub sql_state: Option<String>,
    pub error_message: Option<String>,
}

impl MysqlTx {
    /// First word of the SQL text, upper case (Packetbeat's `method`), else
    /// the command name upper case.
    pub fn method(&self) -> String {
        match self.query.as_deref().and_then(|q| q.split_whitespace().next()) {
            Some(w) if self.command == "query" || self.command.starts_with("stmt_") => {
                w.trim_end_matches(';').to_ascii_uppercase()
            }
            _ => self.command.to_ascii_uppercase(),
        }
    }
}
