//! `Accept-Encoding: gzip`: JSON answers and the UI's files are compressed
//! when the client asks (a page of 10 k records is several MB of JSON and
//! shrinks about tenfold). Streamed downloads (`/api/pcap`) and small
//! bodies go as they are.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::io::Write;

/// Below this a gzip header and the CPU are not worth it.
const MIN_BYTES: usize = 1024;
/// Bodies are whole strings already; this only guards `to_bytes`.
const MAX_BYTES: usize = 512 << 20;

/// True when `Accept-Encoding` lists gzip with a non-zero quality.
pub(crate) fn accepts_gzip(value: &str) -> bool {
    value.split(',').any(|part| {
        let mut it = part.split(';');
        let coding = it.next().unwrap_or("").trim();
        let q = it
            .find_map(|p| p.trim().strip_prefix("q="))
            .and_then(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        (coding.eq_ignore_ascii_case("gzip") || coding == "*") && q > 0.0
    })
}

fn compressible(r: &Response) -> bool {
    let ty = r
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    r.headers().get(header::CONTENT_ENCODING).is_none()
        && (ty.starts_with("application/json") || ty.starts_with("text/"))
}

pub(crate) async fn layer(req: Request, next: Next) -> Response {
    let wants = req
        .headers()
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(accepts_gzip);
    let resp = next.run(req).await;
    if !wants || !compressible(&resp) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            return crate::api::ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                None,
                format!("cannot read the answer to compress it: {e}"),
            )
            .into_response()
        }
    };
    parts
        .headers
        .append(header::VARY, HeaderValue::from_static("accept-encoding"));
    if bytes.len() < MIN_BYTES {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 4),
        flate2::Compression::fast(),
    );
    // Writing to a Vec cannot fail.
    let gz = enc.write_all(&bytes).and_then(|_| enc.finish());
    match gz {
        Ok(gz) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            parts
                .headers
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            Response::from_parts(parts, Body::from(gz))
        }
        Err(_) => Response::from_parts(parts, Body::from(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::accepts_gzip;

    #[test]
    fn gzip_when_listed_with_a_quality() {
        assert!(accepts_gzip("gzip"));
        assert!(accepts_gzip("gzip, deflate, br"));
        assert!(accepts_gzip("br;q=1.0, GZIP;q=0.5"));
        assert!(accepts_gzip("*"));
        assert!(!accepts_gzip("gzip;q=0"));
        assert!(!accepts_gzip("deflate, br"));
        assert!(!accepts_gzip(""));
        assert!(!accepts_gzip("identity"));
    }
}
