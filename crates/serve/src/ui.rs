//! The web UI: plain HTML, CSS and JavaScript modules under `ui/`, embedded
//! at compile time (no build step, no network needed).

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::api::ApiError;

const ASSETS: &[(&str, &str, &str)] = &[
    ("app.js", "text/javascript", include_str!("../ui/app.js")),
    (
        "charts.js",
        "text/javascript",
        include_str!("../ui/charts.js"),
    ),
    ("style.css", "text/css", include_str!("../ui/style.css")),
];

const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'";

pub(crate) async fn index() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CSP),
        ],
        include_str!("../ui/index.html"),
    )
        .into_response()
}

pub(crate) async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.0 == file) {
        Some((_, ty, body)) => (
            [
                (header::CONTENT_TYPE, *ty),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            *body,
        )
            .into_response(),
        None => ApiError::new(StatusCode::NOT_FOUND, None, format!("no UI file '{file}'"))
            .into_response(),
    }
}
