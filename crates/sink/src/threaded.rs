//! A sink on a thread of its own, for sinks whose writes are heavy (the
//! store's Parquet encoding and compression): the output thread hands it
//! each batch, shared, and goes on with the other sinks, so it keeps up with
//! the packet path while the encoding runs on another core.
//!
//! The queue to the thread is bounded. When it is full the output thread
//! waits: nothing is dropped. Offline that holds `read` back; live, a
//! capture worker keeps its records while the output queue is full and goes
//! on reading its ring (see `Output`). Whichever thread lets go of a batch
//! last gives it back for reuse ([`crate::output::give_back`]).

use std::io;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use wirelog_record::Batch;

use crate::output::{give_back, serve};
use crate::{Sink, SinkEnd, Space};

/// Batches queued for the sink's thread: enough to ride out one flush of
/// the store's smaller buffers without stalling the output thread.
const QUEUE_DEPTH: usize = 8;

pub(crate) struct SinkThread {
    name: String,
    tx: Option<SyncSender<Arc<Batch>>>,
    handle: Option<JoinHandle<io::Result<SinkEnd>>>,
    /// The sink's space state as of its last write or tick.
    space: Arc<Mutex<Space>>,
    /// The thread's end, once joined (a failed write ends it early).
    ended: Option<io::Result<SinkEnd>>,
}

impl SinkThread {
    /// Starts `sink`'s thread; it ticks the sink every `tick` and gives
    /// batches it held last back on `recycle`.
    pub(crate) fn start(
        mut sink: Box<dyn Sink>,
        tick: Duration,
        recycle: SyncSender<Batch>,
    ) -> io::Result<SinkThread> {
        let name = sink.name().to_string();
        let space = Arc::new(Mutex::new(sink.space()));
        let (tx, rx) = mpsc::sync_channel::<Arc<Batch>>(QUEUE_DEPTH);
        let published = space.clone();
        let handle = std::thread::Builder::new()
            .name(format!("wirelog-{name}"))
            .spawn(move || {
                let run = feed(&mut sink, &rx, tick, &recycle, &published);
                // A write that failed ends the run, but the sink still closes
                // (the store flushes what it holds); the first failure wins.
                let end = sink.close();
                run.and(end)
            })
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start the {name} thread: {e}")))?;
        Ok(SinkThread { name, tx: Some(tx), handle: Some(handle), space, ended: None })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Queues a batch for the sink; waits while the queue is full. When the
    /// thread already stopped, its error is the result.
    pub(crate) fn write(&mut self, batch: &Arc<Batch>) -> io::Result<()> {
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(batch.clone()).is_ok());
        if sent {
            return Ok(());
        }
        match self.join() {
            Err(e) => Err(e),
            Ok(_) => Err(io::Error::other(format!("the {} thread stopped", self.name))),
        }
    }

    pub(crate) fn space(&self) -> Space {
        self.space.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Lets the sink write what is queued and close; its end.
    pub(crate) fn close(&mut self) -> io::Result<SinkEnd> {
        self.join()
    }

    fn join(&mut self) -> io::Result<SinkEnd> {
        drop(self.tx.take());
        if let Some(h) = self.handle.take() {
            let end = h
                .join()
                .unwrap_or_else(|_| Err(io::Error::other(format!("the {} thread panicked", self.name))));
            self.ended = Some(end);
        }
        match &self.ended {
            Some(Ok(end)) => Ok(end.clone()),
            Some(Err(e)) => Err(io::Error::new(e.kind(), e.to_string())),
            None => Err(io::Error::other(format!("the {} thread already stopped", self.name))),
        }
    }
}

impl Drop for SinkThread {
    fn drop(&mut self) {
        let _ = self.join();
    }
}

/// The thread's loop: every batch to the sink, in order, and a tick about
/// every `tick`, until the output stage lets go of the queue.
fn feed(
    sink: &mut Box<dyn Sink>,
    rx: &Receiver<Arc<Batch>>,
    tick: Duration,
    recycle: &SyncSender<Batch>,
    space: &Mutex<Space>,
) -> io::Result<()> {
    let write = |s: &mut Box<dyn Sink>, batch: Arc<Batch>| {
        s.write(&batch)?;
        if let Some(batch) = Arc::into_inner(batch) {
            give_back(batch, recycle);
        }
        Ok(())
    };
    let publish = |s: &mut Box<dyn Sink>| {
        if let Ok(mut sp) = space.lock() {
            *sp = s.space();
        }
    };
    serve(rx, tick, sink, write, |s, now| s.tick(now), publish)
}
