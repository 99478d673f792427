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
    /// HTTP/2: the stream's id (`None` for HTTP/1.x).
    pub stream_id: Option<u32>,
    /// HTTP/2: how the stream ended (`complete`, `reset_by_client`,
    /// `reset_by_server`, `refused`, `goaway`, `no_response`, `incomplete`);
    /// empty for HTTP/1.x.
    pub end_state: &'static str,
    /// HTTP/2: the error code of the RST_STREAM or GOAWAY that ended the
    /// stream (`CANCEL`, `REFUSED_STREAM`, ...), empty when none.
    pub h2_error: &'static str,
    /// HTTP/2 server push: the stream whose PUSH_PROMISE announced this one.
    pub promised_by: Option<u32>,
}

use crate::columns::{Card::*, Column as C, Columns, Item, LogText, Type::*, Unit, Val};
use crate::{get, item};

const U16: crate::columns::Type = Count { bits: 16, unit: Unit::Plain };
const BYTES: crate::columns::Type = Count { bits: 64, unit: Unit::Bytes };

fn header(h: &[(String, String)], i: usize, s: &mut String) {
    let (k, v) = &h[i];
    s.push_str(k);
    s.push_str(": ");
    s.push_str(v);
}

/// HTTP's columns, in http.log's order (Zeek's, then ours).
pub static COLUMNS: Columns = Columns {
    columns: &[
        C::new("method", Text, Low, "Request method (GET, POST).", get!(Http, |r, h| Val::text(&h.method))).brief(),
        C::new("host", Text, Low, "Host header.", get!(Http, |r, h| Val::text(&h.host))).brief(),
        C::new("uri", Text, High, "Request target as sent (query values `?` when redacting), cut to the text limit.", get!(Http, |r, h| Val::text(&h.uri)))
            .aliases(&["url", "path"])
            .brief(),
        C::log_only("referrer", Text, "Referer header.", get!(Http, |r, h| Val::text(&h.referrer))),
        C::new("version", Text, Low, "HTTP version (1.0, 1.1, 2).", get!(Http, |r, h| Val::text(&h.version))),
        C::new("user_agent", Text, Low, "User-Agent header.", get!(Http, |r, h| Val::text(&h.user_agent))).aliases(&["ua"]),
        C::new("request_body_len", BYTES, Low, "Request body bytes seen (without chunk framing).", get!(Http, |r, h| Val::Count(r.tx.request.map(|_| h.request_body_len)))),
        C::new("response_body_len", BYTES, Low, "Response body bytes seen (without chunk framing).", get!(Http, |r, h| Val::Count(r.tx.response.map(|_| h.response_body_len)))),
        C::new("status_code", U16, Low, "Response status code.", get!(Http, |r, h| Val::Count((h.status_code != 0).then_some(h.status_code as u64))))
            .aliases(&["code"])
            .brief(),
        C::new("reason", Text, Low, "Response reason phrase.", get!(Http, |r, h| Val::text(&h.reason))).log_as("status_msg"),
        C::log_only("info_code", U16, "Last interim (1xx) status before the final response.", get!(Http, |r, h| Val::Count((h.info_code != 0).then_some(h.info_code as u64)))),
        C::log_only("forwarded_for", Text, "First address of X-Forwarded-For (or X-Real-IP).", get!(Http, |r, h| Val::text(&h.forwarded_for))),
        C::log_only("request_content_type", Text, "Request Content-Type.", get!(Http, |r, h| Val::text(&h.request_content_type))),
        C::log_only("response_content_type", Text, "Response Content-Type.", get!(Http, |r, h| Val::text(&h.response_content_type))),
        C::log_only("request_missed_bytes", BYTES, "Request body bytes lost in capture gaps.", get!(Http, |r, h| Val::Count(Some(h.request_missing_bytes)))),
        C::log_only("response_missed_bytes", BYTES, "Response body bytes lost in capture gaps.", get!(Http, |r, h| Val::Count(Some(h.response_missing_bytes)))),
        // Request and response headers apart: a name can be in both.
        C::log_only("headers", List(Item::Text), "Request headers kept by name (`name: value`).", get!(Http, |r, h| Val::list(r, h.headers.len(), item!(Http, |h, i, s| header(&h.headers, i, s))))),
        C::log_only("response_headers", List(Item::Text), "Response headers kept by the same names.", get!(Http, |r, h| Val::list(r, h.response_headers.len(), item!(Http, |h, i, s| header(&h.response_headers, i, s))))),
        C::new("stream_id", Count { bits: 64, unit: Unit::Plain }, High, "HTTP/2 stream id (unset for HTTP/1.x).", get!(Http, |r, h| Val::Count(h.stream_id.map(u64::from)))),
        C::new("end_state", Text, Low, "HTTP/2: how the stream ended (complete, reset_by_client, reset_by_server, refused, goaway, no_response, incomplete).", get!(Http, |r, h| Val::text(h.end_state))),
        C::new("h2_error", Text, Low, "HTTP/2: error code of the RST_STREAM or GOAWAY that ended the stream (CANCEL, REFUSED_STREAM, ...).", get!(Http, |r, h| Val::text(h.h2_error))),
        C::new("promised_by", Count { bits: 64, unit: Unit::Plain }, High, "HTTP/2 server push: the stream whose PUSH_PROMISE announced this response (unset when not pushed).", get!(Http, |r, h| Val::Count(h.promised_by.map(u64::from)))),
    ],
    store_order: &["method", "host", "uri", "version", "user_agent", "status_code", "reason", "request_body_len", "response_body_len", "stream_id", "end_state", "h2_error", "promised_by"],
    by: &["host"],
    shape: &["host", "uri"],
    renamed: &[],
    log_text: LogText::Utf8,
};
