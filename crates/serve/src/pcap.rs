//! `/api/pcap?uid=`: one connection's kept packets as a pcap download,
//! found through the indexes beside the pcap files (`--pcap-dir`), as
//! `wirelog pcap --where 'uid = ...'` finds them.
//!
//! The indexes are read first, so a connection without packets is a 404
//! with a reason and a download has its exact length; the packets are then
//! copied on a blocking thread into a bounded channel the response body
//! drains, so a large connection never sits in memory whole.

use std::collections::HashSet;
use std::io::{self, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Query, State as AxState};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use wirelog_pcapdir::extract::Window;
use wirelog_query::{parse_query, KeyValue};
use wirelog_store::Kind;

use crate::api::{run_by, ApiError, Params, State};

/// Chunks (of up to the extraction's 1 MiB writes) in flight to the client.
const CHUNKS_IN_FLIGHT: usize = 4;

pub(crate) async fn download(
    AxState(state): AxState<Arc<State>>,
    Query(raw): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let p = Params::new(raw, &["uid"])?;
    let uid = p.uid()?.to_string();
    let Some(dir) = state.opts.pcap_dir.clone() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            None,
            "this server keeps no packets (start it with --pcap-dir DIR)",
        ));
    };
    let window = conn_window(&state, &uid).await;
    let uids: HashSet<String> = HashSet::from([uid.clone()]);
    let plan = {
        let _permit = state.gate().acquire().await.map_err(|_| {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, None, "the server is stopping")
        })?;
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || wirelog_pcapdir::extract::plan(&dir, &uids, window))
            .await
            .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, None, "the extraction failed"))?
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, None, format!("pcap: {e}")))?
    };
    if plan.packets() == 0 {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            Some("uid"),
            format!(
                "no packets of connection {uid} in {} (not kept, or deleted by the ring)",
                dir.display()
            ),
        ));
    }
    let len = plan.bytes();
    let (tx, rx) = mpsc::channel(CHUNKS_IN_FLIGHT);
    tokio::task::spawn_blocking(move || {
        let mut w = ChannelWriter { tx };
        if let Err(e) = plan.write(&mut w) {
            // The body ends with an error: the client sees a cut download,
            // never a short file passed off as whole.
            let _ = w.tx.blocking_send(Err(e));
        }
    });
    Ok((
        [
            (header::CONTENT_TYPE, "application/vnd.tcpdump.pcap".to_string()),
            (header::CONTENT_LENGTH, len.to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"wirelog-{uid}.pcap\"")),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
        Body::from_stream(Chunks(rx)),
    )
        .into_response())
}

/// When the connection had packets, from its record (start, and end when
/// it has a duration): files outside are not searched. A connection still
/// open (or not in the store) has no record yet, and every file is searched.
async fn conn_window(state: &Arc<State>, uid: &str) -> Window {
    let Ok(spec) = parse_query(Kind::Conns, Some(&format!("uid = \"{uid}\"")), Some("ts,duration"), None, Some(1), None)
    else {
        return Window::default();
    };
    let deadline = Instant::now() + state.opts.limits.timeout;
    let Ok(t) = run_by(state, spec, deadline).await else { return Window::default() };
    let Some(row) = t.rows.first() else { return Window::default() };
    match (row.key.first(), row.key.get(1)) {
        (Some(KeyValue::Int(ts)), Some(KeyValue::Int(d))) => Window { from_ns: Some(*ts), to_ns: Some(ts.saturating_add(*d)) },
        (Some(KeyValue::Int(ts)), _) => Window { from_ns: Some(*ts), to_ns: None },
        _ => Window::default(),
    }
}

/// The extraction's output, handed to the response body chunk by chunk.
struct ChannelWriter {
    tx: mpsc::Sender<io::Result<Vec<u8>>>,
}

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tx
            .blocking_send(Ok(buf.to_vec()))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The receiving end as the `Stream` a streamed body is made from.
struct Chunks(mpsc::Receiver<io::Result<Vec<u8>>>);

impl futures_core::Stream for Chunks {
    type Item = io::Result<Vec<u8>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}
