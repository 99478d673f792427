//! What a gRPC call records (filled in by `wirelog_parse::http2`): one call
//! per HTTP/2 stream whose request content type is `application/grpc*`.

use std::sync::Arc;

/// One call: its method, what each side sent, and how it ended.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GrpcTx {
    /// From `:path` = `/<service>/<method>` (the package is part of the
    /// service: `wirelog.test.Probe`).
    pub service: Arc<str>,
    pub method: Arc<str>,
    /// `:authority`.
    pub authority: Arc<str>,
    pub stream_id: u32,
    /// The response's `:status` (0 when none came).
    pub http_status: u16,
    /// `grpc-status` from the trailers (or a Trailers-Only response).
    pub grpc_status: Option<u32>,
    /// `grpc-message`, percent-decoded (RFC 3986 escapes, as gRPC's
    /// PROTOCOL-HTTP2 spec says), cut to `max_text_bytes`.
    pub grpc_message: Option<String>,
    /// The response was Trailers-Only (grpc-status in its only HEADERS).
    pub trailers_only: bool,
    /// Length-prefixed messages sent by the client and by the server.
    pub request_messages: u32,
    pub response_messages: u32,
    /// Their payload bytes (without the 5-byte prefixes).
    pub request_message_bytes: u64,
    pub response_message_bytes: u64,
    /// A message had its compressed flag set.
    pub compressed: bool,
    /// `grpc-timeout` in nanoseconds.
    pub timeout_ns: Option<i64>,
    /// `unary` (at most one message each way), `client_streaming`,
    /// `server_streaming` or `bidi_streaming`, from the message counts seen.
    pub call_type: &'static str,
    pub content_type: Arc<str>,
    pub user_agent: Arc<str>,
    /// How the stream ended (as HTTP/2's `end_state`).
    pub end_state: &'static str,
    /// The RST_STREAM or GOAWAY error code that ended it, empty when none.
    pub h2_error: &'static str,
}

/// The name of a gRPC status code (grpc/doc/statuscodes.md), empty past 16.
pub fn status_name(code: u32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "",
    }
}

use crate::columns::{Card::*, Column as C, Columns, LogText, Type::*, Unit, Val};
use crate::get;

const N: crate::columns::Type = Count { bits: 64, unit: Unit::Count };
const BYTES: crate::columns::Type = Count { bits: 64, unit: Unit::Bytes };

/// gRPC's columns, in grpc.log's order (ours: Zeek has no such log).
pub static COLUMNS: Columns = Columns {
    columns: &[
        C::new("service", Text, Low, "Service, with its package (from :path).", get!(Grpc, |r, g| Val::text(&g.service))).brief(),
        C::new("method", Text, Low, "Method (from :path).", get!(Grpc, |r, g| Val::text(&g.method))).brief(),
        C::new("authority", Text, Low, ":authority of the request.", get!(Grpc, |r, g| Val::text(&g.authority))),
        C::new("stream_id", Count { bits: 64, unit: Unit::Plain }, High, "HTTP/2 stream id.", get!(Grpc, |r, g| Val::Count(Some(g.stream_id as u64)))),
        C::new("http_status", Count { bits: 16, unit: Unit::Plain }, Low, "The response's :status.", get!(Grpc, |r, g| Val::Count((g.http_status != 0).then_some(g.http_status as u64)))),
        C::new("grpc_status", Count { bits: 64, unit: Unit::Plain }, Low, "grpc-status (0 = OK).", get!(Grpc, |r, g| Val::Count(g.grpc_status.map(u64::from)))).fits(16).brief(),
        C::new("grpc_status_name", Text, Low, "Name of grpc-status (OK, NOT_FOUND, ...).", get!(Grpc, |r, g| Val::Text(g.grpc_status.map(status_name).filter(|s| !s.is_empty())))).brief(),
        C::new("grpc_message", Text, High, "grpc-message, percent-decoded.", get!(Grpc, |r, g| Val::Text(g.grpc_message.as_deref()))),
        C::new("trailers_only", Bool, Low, "The response was Trailers-Only (status without messages).", get!(Grpc, |r, g| Val::Bool(Some(g.trailers_only)))),
        C::new("call_type", Text, Low, "unary, client_streaming, server_streaming or bidi_streaming (from the messages seen).", get!(Grpc, |r, g| Val::text(g.call_type))),
        C::new("request_messages", N, Low, "Messages the client sent.", get!(Grpc, |r, g| Val::Count(Some(g.request_messages as u64)))),
        C::new("response_messages", N, Low, "Messages the server sent.", get!(Grpc, |r, g| Val::Count(Some(g.response_messages as u64)))),
        C::new("request_message_bytes", BYTES, Low, "Bytes of the client's messages (without their 5-byte prefixes).", get!(Grpc, |r, g| Val::Count(Some(g.request_message_bytes)))),
        C::new("response_message_bytes", BYTES, Low, "Bytes of the server's messages (without their 5-byte prefixes).", get!(Grpc, |r, g| Val::Count(Some(g.response_message_bytes)))),
        C::new("compressed", Bool, Low, "A message had its compressed flag set.", get!(Grpc, |r, g| Val::Bool(Some(g.compressed)))),
        C::new("timeout", Interval, Low, "The deadline the client gave (grpc-timeout).", get!(Grpc, |r, g| Val::Interval(g.timeout_ns))),
        C::new("content_type", Text, Low, "Request Content-Type (application/grpc, application/grpc+proto, ...).", get!(Grpc, |r, g| Val::text(&g.content_type))),
        C::new("user_agent", Text, Low, "User-Agent of the client.", get!(Grpc, |r, g| Val::text(&g.user_agent))).aliases(&["ua"]),
        C::new("end_state", Text, Low, "How the stream ended (complete, reset_by_client, reset_by_server, refused, goaway, no_response, incomplete).", get!(Grpc, |r, g| Val::text(g.end_state))),
        C::new("h2_error", Text, Low, "Error code of the RST_STREAM or GOAWAY that ended the stream.", get!(Grpc, |r, g| Val::text(g.h2_error))),
    ],
    store_order: &[],
    by: &["service", "method"],
    shape: &["service", "method"],
    renamed: &[],
    log_text: LogText::Utf8,
};

#[cfg(test)]
mod tests {
    #[test]
    fn status_names() {
        assert_eq!(super::status_name(0), "OK");
        assert_eq!(super::status_name(13), "INTERNAL");
        assert_eq!(super::status_name(16), "UNAUTHENTICATED");
        assert_eq!(super::status_name(17), "");
    }
}
