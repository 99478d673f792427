//! Errors: `QueryError` for what a user typed (points at a column of it),
//! `SchemaError` for a batch that does not match the schema (small and `Copy`,
//! since it can come from the per-batch path).

use std::fmt;

/// A bad query argument. `column` is 1-based and counts characters of
/// `input`, the text of the flag named by `flag`; `Display` prints the input
/// with a caret under that column:
///
/// ```text
/// error in --where at column 16: expected a condition after 'and', found end of input
///   dport = 443 and
///                  ^
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError {
    /// Which argument: `--where`, `--by`, `--sort`, `--every`, `--from`, ...
    pub flag: &'static str,
    /// The argument as given.
    pub input: String,
    /// 1-based character column of the offending token (`len + 1` at the end).
    pub column: usize,
    /// What would have been accepted at that column, e.g. "a port number (0-65535)".
    pub expected: String,
    /// The whole explanation, e.g. "expected a value after '=', found end of input".
    pub message: String,
}

impl QueryError {
    pub(crate) fn new(
        flag: &'static str,
        input: &str,
        column: usize,
        expected: impl Into<String>,
        found: &str,
    ) -> Self {
        let expected = expected.into();
        let message = format!("expected {expected}, found {found}");
        QueryError { flag, input: input.to_string(), column, expected, message }
    }

    /// An error whose message is not of the "expected X, found Y" shape.
    pub(crate) fn custom(
        flag: &'static str,
        input: &str,
        column: usize,
        expected: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        QueryError { flag, input: input.to_string(), column, expected: expected.into(), message: message.into() }
    }
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "error in {} at column {}: {}", self.flag, self.column, self.message)?;
        // Tabs and newlines would break the caret's alignment.
        let shown: String = self.input.chars().map(|c| if c.is_whitespace() { ' ' } else { c }).collect();
        writeln!(f, "  {shown}")?;
        write!(f, "  {:>width$}", "^", width = self.column.max(1))
    }
}

impl std::error::Error for QueryError {}

/// What is wrong with a batch column the query needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaProblem {
    /// The batch has no column of that name.
    Missing,
    /// The column's variant cannot hold the field's values.
    WrongType,
    /// The column's length differs from the batch's row count.
    Length,
    /// The batch holds another record kind than the query.
    WrongKind,
}

/// A batch that does not fit the query's schema: a bug between the store and
/// the query engine, reported instead of a panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaError {
    pub column: &'static str,
    pub problem: SchemaProblem,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.problem {
            SchemaProblem::Missing => "is missing from the batch",
            SchemaProblem::WrongType => "has a type the query cannot read",
            SchemaProblem::Length => "has a length different from the batch's",
            SchemaProblem::WrongKind => "belongs to a batch of another record kind",
        };
        write!(f, "column '{}' {what}", self.column)
    }
}

impl std::error::Error for SchemaError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caret_under_column() {
        let e = QueryError::new("--where", "dport = 443 and", 16, "a condition after 'and'", "end of input");
        assert_eq!(
            e.to_string(),
            "error in --where at column 16: expected a condition after 'and', found end of input\n  dport = 443 and\n                 ^"
        );
        let e = QueryError::new("--where", "x", 1, "a field name", "'x'");
        assert_eq!(e.to_string(), "error in --where at column 1: expected a field name, found 'x'\n  x\n  ^");
    }
}
