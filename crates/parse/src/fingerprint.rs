//! SQL fingerprints (pt-query-digest style): placeholder until it lands.

/// The query's shape: literals replaced by `?`, whitespace collapsed, lower case.
pub fn fingerprint(sql: &str) -> String {
    sql.to_string()
}
