//! The connection to ClickHouse (the official `clickhouse` crate over its
//! HTTP interface) and blocking helpers for the commands (`init`, `query`).

use std::time::Duration;

use crate::schema::Table;
use crate::spool::Payload;

/// Where ClickHouse is and who we are to it.
#[derive(Debug, Clone)]
pub struct Server {
    /// `http://host:8123` (or https behind a proxy that terminates TLS).
    pub url: String,
    pub user: Option<String>,
    pub password: Option<String>,
    pub database: String,
    /// How long one request may take before it counts as failed.
    pub timeout: Duration,
}

/// An error from ClickHouse or the way to it, as text for messages.
#[derive(Debug, Clone)]
pub struct ChError(pub String);

impl std::fmt::Display for ChError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ChError {}

impl Server {
    /// Checks the URL before anything is started.
    pub fn check(&self) -> Result<(), String> {
        let rest = self
            .url
            .strip_prefix("http://")
            .or_else(|| self.url.strip_prefix("https://"))
            .ok_or_else(|| format!("--clickhouse {}: expected http://HOST:PORT (ClickHouse's HTTP interface)", self.url))?;
        if self.url.starts_with("https://") {
            return Err(format!(
                "--clickhouse {}: https is not built in; put a TLS-terminating proxy in front or use http:// on a trusted network",
                self.url
            ));
        }
        if rest.is_empty() || rest.starts_with('/') || rest.starts_with(':') {
            return Err(format!("--clickhouse {}: no host", self.url));
        }
        if self.database.is_empty() || !self.database.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "--clickhouse-database {:?}: use letters, digits and _ only",
                self.database
            ));
        }
        Ok(())
    }

    pub(crate) fn client(&self) -> clickhouse::Client {
        let mut c = clickhouse::Client::default().with_url(&self.url);
        if let Some(u) = &self.user {
            c = c.with_user(u);
        }
        if let Some(p) = &self.password {
            c = c.with_password(p);
        }
        c
    }

    pub(crate) fn table(&self, t: Table) -> String {
        format!("{}.{}", crate::schema::ident(&self.database), crate::schema::ident(t.name()))
    }
}

/// Sends one batch as `INSERT ... FORMAT RowBinary` with its token.
pub(crate) async fn insert(server: &Server, client: &clickhouse::Client, p: &Payload) -> Result<(), ChError> {
    let sql = format!("INSERT INTO {} FORMAT RowBinary", server.table(p.table));
    let mut ins = client
        .insert_formatted_with(sql)
        .with_timeouts(Some(server.timeout), Some(server.timeout))
        .with_setting("insert_deduplication_token", p.token.clone());
    // Chunks of 1 MiB: each is one compressed block on the wire.
    let mut at = 0;
    while at < p.data.len() {
        let end = (at + (1 << 20)).min(p.data.len());
        ins.send(p.data.slice(at..end)).await.map_err(|e| ChError(e.to_string()))?;
        at = end;
    }
    ins.end().await.map_err(|e| ChError(e.to_string()))
}

/// A current-thread runtime for the blocking helpers and the sender thread.
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

/// Runs statements and returns the text (TabSeparated) of the last one.
pub fn run_sql(server: &Server, statements: &[String]) -> Result<String, ChError> {
    let rt = runtime().map_err(|e| ChError(format!("cannot start the ClickHouse client: {e}")))?;
    let client = server.client().with_compression(clickhouse::Compression::None);
    rt.block_on(async {
        let mut out = String::new();
        for sql in statements {
            let fut = async {
                let mut cursor = client
                    .query(sql)
                    .fetch_bytes("TabSeparated")
                    .map_err(|e| ChError(e.to_string()))?;
                let mut buf = Vec::new();
                while let Some(chunk) = cursor.next().await.map_err(|e| ChError(e.to_string()))? {
                    buf.extend_from_slice(&chunk);
                }
                Ok::<_, ChError>(String::from_utf8_lossy(&buf).into_owned())
            };
            out = tokio::time::timeout(server.timeout, fut)
                .await
                .map_err(|_| ChError(format!("no answer within {:?}", server.timeout)))??;
        }
        Ok(out)
    })
}
