//! What an HTTP transaction records (filled in by `wirelog_parse::http`).

use std::sync::Arc;

/// The facts kept per HTTP transaction. Texts are shared: the values that
/// repeat between transactions (host, user agent, content types, method,
/// status message, paths) are one allocation held by all of them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HttpTx {
    pub method: Arc<str>,
    /// Request target as sent (query values replaced by `?` when redacting), cut to `max_text_bytes`.
    pub uri: Arc<str>,
    /// `uri` before the `?`, and after it (empty when there is none).
    pub path: Arc<str>,
    pub query: Arc<str>,
    /// True when the URI was longer than `max_text_bytes` and was cut.
    pub uri_truncated: bool,
    /// "1.0", "1.1" (from the request line, else from the status line).
    pub version: Arc<str>,
    pub host: Arc<str>,
    pub user_agent: Arc<str>,
    pub referrer: Arc<str>,
    /// First address of X-Forwarded-For (or X-Forward-For, X-Real-IP), empty if none.
    pub forwarded_for: Arc<str>,
    /// 0 when there was no response.
    pub status_code: u16,
    pub reason: Arc<str>,
    /// Last interim (1xx) status seen before the final response, 0 if none.
    pub info_code: u16,
    /// Header block sizes (start line to blank line inclusive).
    pub request_header_bytes: u64,
    pub response_header_bytes: u64,
    /// Entity bytes (after removing chunk framing) that were seen.
    pub request_body_len: u64,
    pub response_body_len: u64,
    /// Content-Length as declared, if declared.
    pub request_content_length: Option<u64>,
    pub response_content_length: Option<u64>,
    pub request_content_type: Arc<str>,
    pub response_content_type: Arc<str>,
    /// Body bytes lost in capture gaps (the body lengths above exclude them).
    pub request_missing_bytes: u64,
    pub response_missing_bytes: u64,
    /// Request headers kept by name (`ParseConfig::http_headers`), names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Response headers kept by the same names.
    pub response_headers: Vec<(String, String)>,
}
