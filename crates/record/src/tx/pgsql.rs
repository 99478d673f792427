//! What a PostgreSQL transaction records (filled in by `wirelog_parse::pgsql`).

/// One PostgreSQL transaction (the kinds are described in `wirelog_parse::pgsql`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PgsqlTx {
    /// `startup`, `ssl_request`, `query`, `execute`, `parse`, `bind`,
    /// `describe`, `close`, `function_call`, `cancel`, `terminate`, `unknown`
    /// (a response whose request was not seen).
    pub kind: &'static str,
    /// SQL text (redacted when `ParseConfig::redact`, cut to `max_text_bytes`).
    pub query: Option<String>,
    pub query_truncated: bool,
    pub fingerprint: Option<String>,
    /// Prepared statement name of an Execute (`""` is the unnamed one).
    pub statement: Option<String>,
    pub user: Option<String>,
    pub database: Option<String>,
    pub application_name: Option<String>,
    /// Authentication requested by the server (`startup` only): `ok`,
    /// `cleartext`, `md5`, `sasl`, `gss`, `sspi`, ...; the last one asked.
    pub auth_method: Option<&'static str>,
    /// CommandComplete tag (`SELECT 15`, `INSERT 0 1`); for `ssl_request`
    /// the server's one-byte answer (`N`).
    pub command_tag: Option<String>,
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
