//! What a MySQL command records (filled in by `wirelog_parse::mysql`).

use std::sync::Arc;

use crate::columns::TextList;

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
    /// COM_STMT_EXECUTE parameter values as text (`?` each when redacting),
    /// held joined as the store keeps them.
    pub params: TextList,
    /// The connection's database, user and server version when the
    /// command was sent (see [`MysqlSession`]); none when none is known.
    pub session: Option<Arc<MysqlSession>>,
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

/// What a MySQL connection's commands share: the current database, the
/// user of its login and the server's version. The parser holds one and
/// each command's record takes a reference to it, one reference count
/// taken a statement (three when the record held each text on its own);
/// a change (a login, `USE`, COM_CHANGE_USER) makes a new one when
/// records still hold the old.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MysqlSession {
    /// Current database.
    pub database: Option<Arc<str>>,
    pub user: Option<Arc<str>>,
    pub server_version: Option<Arc<str>>,
}

impl MysqlTx {
    /// Current database when the command was sent.
    pub fn database(&self) -> Option<&str> {
        self.session.as_deref()?.database.as_deref()
    }

    /// User of the connection's login (or of its COM_CHANGE_USER).
    pub fn user(&self) -> Option<&str> {
        self.session.as_deref()?.user.as_deref()
    }

    /// The server's version from its greeting.
    pub fn server_version(&self) -> Option<&str> {
        self.session.as_deref()?.server_version.as_deref()
    }

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

use crate::columns::{Card::*, Column as C, Columns, Item, LogText, Type::*, Unit, Val};
use crate::{get, TxStatus};

const NUM: crate::columns::Type = Count { bits: 64, unit: Unit::Plain };
const ROWS: crate::columns::Type = Count { bits: 64, unit: Unit::Count };

/// MySQL's columns, in mysql.log's order (Zeek's, then ours).
pub static COLUMNS: Columns = Columns {
    columns: &[
        C::new("command", Text, Low, "Command (query, stmt_execute, init_db, login).", get!(Mysql, |r, m| Val::Text(Some(m.command))))
            .log_as("cmd")
            .aliases(&["cmd"])
            .brief(),
        C::new("query", Text, High, "SQL text, or the command's argument (redacted when asked, cut to the text limit).", get!(Mysql, |r, m| Val::Text(m.query.as_deref())))
            .log_as("arg")
            .brief(),
        C::new("fingerprint", Text, Mid, "The statement with its literals replaced (pt-query-digest's fingerprint).", get!(Mysql, |r, m| Val::Text(m.fingerprint.as_deref()))).aliases(&["fp"]),
        C::new("database", Text, Low, "Current database.", get!(Mysql, |r, m| Val::Text(m.database()))).aliases(&["db"]),
        C::new("user", Text, Low, "User of the connection's login.", get!(Mysql, |r, m| Val::Text(m.user()))),
        C::log_only("success", Bool, "The server answered OK (unset without an answer).", |r| Val::Bool(match r.tx.status {
            TxStatus::Ok => Some(true),
            TxStatus::Error => Some(false),
            _ => None,
        })),
        C::new("rows", ROWS, Low, "Rows of the result set(s).", get!(Mysql, |r, m| Val::Count(m.num_rows))).aliases(&["num_rows"]),
        C::new("affected_rows", ROWS, Low, "Rows the statement changed.", get!(Mysql, |r, m| Val::Count(m.affected_rows))),
        C::new("insert_id", NUM, High, "Last insert id.", get!(Mysql, |r, m| Val::Count(m.insert_id))),
        C::new("num_fields", ROWS, Low, "Columns of the (last) result set or prepared statement.", get!(Mysql, |r, m| Val::Count(m.num_fields))),
        C::new("error_code", NUM, Low, "Error number.", get!(Mysql, |r, m| Val::Count(m.error_code.map(u64::from)))).brief(),
        C::new("sql_state", Text, Low, "SQLSTATE of the error.", get!(Mysql, |r, m| Val::Text(m.sql_state.as_deref()))),
        C::new("error_message", Text, High, "Error message.", get!(Mysql, |r, m| Val::Text(m.error_message.as_deref())))
            .log_as("response")
            .brief(),
        C::log_only("params", List(Item::Text), "Parameter values of an executed prepared statement (`?` when redacting).", get!(Mysql, |r, m| Val::joined(r, &m.params))),
    ],
    store_order: &["command", "query", "fingerprint", "database", "user", "affected_rows", "insert_id", "rows", "num_fields", "error_code", "sql_state", "error_message"],
    // Zeek's and PostgreSQL's name for the same count.
    by: &["fingerprint"],
    shape: &["fingerprint"],
    renamed: &[("num_rows", "rows")],
    log_text: LogText::Utf8,
};
