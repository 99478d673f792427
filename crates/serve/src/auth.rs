//! The token: when set, every request (API, UI, metrics) carries it, as
//! `Authorization: Bearer TOKEN`, `?token=TOKEN` (so a browser can open the
//! UI from a link), or the cookie such a link sets; compared in constant time.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::{ApiError, State as AppState};

pub(crate) async fn check(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    if req.method() != axum::http::Method::GET && req.method() != axum::http::Method::HEAD {
        return ApiError::new(StatusCode::METHOD_NOT_ALLOWED, None, "read-only: only GET")
            .into_response();
    }
    let trusted = req.extensions().get::<crate::conn::Trusted>().cloned();
    let Some(want) = &state.token else {
        trusted.inspect(|t| t.set());
        return next.run(req).await;
    };
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|s| s.trim().as_bytes().to_vec());
    let query = req.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("token="))
            .map(percent_decode)
    });
    let cookie = req
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(COOKIE))
        .and_then(unhex);
    let from_query = bearer.is_none() && query.is_some();
    let given = bearer.or(query).or(cookie);
    match given {
        Some(g) if ct_eq(&g, want) => {
            // Its connection now goes last when the open ones are capped.
            trusted.inspect(|t| t.set());
            let mut r = next.run(req).await;
            if from_query {
                // A link with ?token= opens the UI; its scripts and API calls
                // then carry the token in this cookie.
                let c = format!("{COOKIE}{}; HttpOnly; SameSite=Strict; Path=/", hex(want));
                if let Ok(v) = header::HeaderValue::from_str(&c) {
                    r.headers_mut().insert(header::SET_COOKIE, v);
                }
            }
            r
        }
        _ => {
            let mut r = ApiError::new(
                StatusCode::UNAUTHORIZED,
                Some("token"),
                "a token is required: Authorization: Bearer TOKEN, or ?token=TOKEN",
            )
            .into_response();
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            r
        }
    }
}

const COOKIE: &str = "wirelog_token=";

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Equal in time independent of where the bytes differ (the length of the
/// expected token is not treated as secret).
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u64;
    for (i, y) in b.iter().enumerate() {
        let x = a.get(i).copied().unwrap_or(0);
        diff |= u64::from(x ^ y);
    }
    std::hint::black_box(diff) == 0
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = (b[i] == b'%')
            .then(|| b.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (hex, b[i]) {
            (Some(v), _) => {
                out.push(v);
                i += 3;
                continue;
            }
            (None, b'+') => out.push(b' '),
            (None, c) => out.push(c),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_only_when_equal() {
        assert!(ct_eq(b"secret-token-123", b"secret-token-123"));
        assert!(!ct_eq(b"secret-token-124", b"secret-token-123"));
        assert!(!ct_eq(b"secret-token-12", b"secret-token-123"));
        assert!(!ct_eq(b"secret-token-1234", b"secret-token-123"));
        assert!(!ct_eq(b"", b"x"));
        assert_eq!(percent_decode("a%2Bb+c%"), b"a+b c%");
        assert_eq!(unhex(&hex(b"tok=en;1")), Some(b"tok=en;1".to_vec()));
        assert_eq!(unhex("zz"), None);
    }
}
