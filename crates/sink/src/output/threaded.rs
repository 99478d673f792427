//! A sink on a thread of its own, for sinks whose writes are heavy (the
//! store's Parquet encoding and compression): the output thread hands it
//! each batch, shared, and goes on with the other sinks, so it keeps up with
//! the packet path while the encoding runs on another core.
//!
//! The queue to the thread is bounded. When it is full the output thread
//! does not wait: it keeps the batch in a list of its own and goes on with
//! the other sinks (the logs stay current), moving what it kept into the
//! queue as room appears, at every batch and every tick. It waits only when
//! the sink is more than [`MAX_PENDING_RECORDS`] records behind, and counts
//! each such wait; nothing is dropped. Past that bound, offline, `read` is
//! held back; live, a capture worker keeps its records while the output
//! queue is full and goes on reading its ring (see `Output`). Whichever
//! thread lets go of a batch last gives it back for reuse
//! ([`crate::output::give_back`]).

use std::collections::VecDeque;
use std::io;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use wirelog_record::Batch;

use crate::output::{give_back, serve};
use crate::{Sink, SinkEnd, Space};

/// Batches queued for the sink's thread: enough to ride out one flush of
/// the store's smaller buffers without stalling the output thread.
const QUEUE_DEPTH: usize = 8;

/// Records the output thread keeps for the sink beyond its queue before it
/// waits for it: as many as a capture worker holds for the output thread
/// (`wirelog_counters::MAX_HELD_RECORDS`), so a slow store flush is
/// ridden out twice over before anything upstream waits.
pub const MAX_PENDING_RECORDS: usize = 262_144;

/// What the sink's thread gives back: the sink (for its commit) and how
/// its run and close went.
type Ended = (Box<dyn Sink>, io::Result<SinkEnd>);

pub(crate) struct SinkThread {
    name: String,
    tx: Option<SyncSender<Arc<Batch>>>,
    handle: Option<JoinHandle<Ended>>,
    /// The sink, back from its thread once that ended (for the commit).
    sink: Option<Box<dyn Sink>>,
    /// The sink's space state as of its last write or tick.
    space: Arc<Mutex<Space>>,
    /// The thread's end, once joined (a failed write ends it early).
    ended: Option<io::Result<SinkEnd>>,
    /// Batches the queue had no room for, oldest first, and their records.
    pending: VecDeque<Arc<Batch>>,
    pending_records: usize,
    /// [`MAX_PENDING_RECORDS`] (smaller in tests).
    max_pending: usize,
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
                (sink, run.and(end))
            })
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start the {name} thread: {e}")))?;
        Ok(SinkThread {
            name,
            tx: Some(tx),
            handle: Some(handle),
            sink: None,
            space,
            ended: None,
            pending: VecDeque::new(),
            pending_records: 0,
            max_pending: MAX_PENDING_RECORDS,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Queues a batch for the sink, or keeps it while the queue is full.
    /// True when it had to wait (the sink was more than
    /// [`MAX_PENDING_RECORDS`] behind). When the thread already stopped, its
    /// error is the result.
    pub(crate) fn write(&mut self, batch: &Arc<Batch>) -> io::Result<bool> {
        self.pending_records += batch.records();
        self.pending.push_back(batch.clone());
        self.pump()
    }

    /// Moves kept batches into the queue while it has room; waits for room
    /// only while more than [`MAX_PENDING_RECORDS`] are kept. True when it
    /// waited.
    pub(crate) fn pump(&mut self) -> io::Result<bool> {
        let mut waited = false;
        while let Some(batch) = self.pending.pop_front() {
            let records = batch.records();
            let Some(tx) = self.tx.as_ref() else { return Err(self.stopped()) };
            let sent = if self.pending_records > self.max_pending {
                waited = true;
                tx.send(batch).map_err(|_| ())
            } else {
                match tx.try_send(batch) {
                    Ok(()) => Ok(()),
                    Err(TrySendError::Full(batch)) => {
                        self.pending.push_front(batch);
                        return Ok(waited);
                    }
                    Err(TrySendError::Disconnected(_)) => Err(()),
                }
            };
            if sent.is_err() {
                return Err(self.stopped());
            }
            self.pending_records -= records;
        }
        Ok(waited)
    }

    /// Why the thread is gone: its own error, or that it stopped.
    fn stopped(&mut self) -> io::Error {
        self.pending.clear();
        self.pending_records = 0;
        match self.join() {
            Err(e) => e,
            Ok(_) => io::Error::other(format!("the {} thread stopped", self.name)),
        }
    }

    pub(crate) fn space(&self) -> Space {
        self.space.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Lets the sink write what is queued and kept, and close; its end.
    pub(crate) fn close(&mut self) -> io::Result<SinkEnd> {
        while let Some(batch) = self.pending.pop_front() {
            let sent = self.tx.as_ref().is_some_and(|tx| tx.send(batch).is_ok());
            if !sent {
                return Err(self.stopped());
            }
        }
        self.pending_records = 0;
        self.join()
    }

    fn join(&mut self) -> io::Result<SinkEnd> {
        drop(self.tx.take());
        if let Some(h) = self.handle.take() {
            let end = match h.join() {
                Ok((sink, end)) => {
                    self.sink = Some(sink);
                    end
                }
                Err(_) => Err(io::Error::other(format!("the {} thread panicked", self.name))),
            };
            self.ended = Some(end);
        }
        match &self.ended {
            Some(Ok(end)) => Ok(end.clone()),
            Some(Err(e)) => Err(io::Error::new(e.kind(), e.to_string())),
            None => Err(io::Error::other(format!("the {} thread already stopped", self.name))),
        }
    }
}

impl SinkThread {
    /// The sink's commit, on the calling thread, once the sink's own thread
    /// ended (see [`Sink::commit`]).
    pub(crate) fn commit(&mut self, complete: bool) -> io::Result<()> {
        let _ = self.join();
        match self.sink.as_mut() {
            Some(s) => s.commit(complete),
            None => Err(io::Error::other(format!("the {} thread panicked", self.name))),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    /// A sink whose writes wait for a token (a store whose flush stalls),
    /// noting each batch's first flow's `conns` to check the order.
    struct Stalled {
        tokens: Receiver<()>,
        order: Arc<Mutex<Vec<u32>>>,
        /// Writes begun.
        entered: Arc<AtomicU64>,
    }

    impl Sink for Stalled {
        fn name(&self) -> &str {
            "store"
        }
        fn write(&mut self, batch: &Batch) -> io::Result<()> {
            self.entered.fetch_add(1, Ordering::Relaxed);
            let _ = self.tokens.recv();
            self.order.lock().unwrap().push(batch.flows[0].conns);
            Ok(())
        }
        fn tick(&mut self, _: Instant) -> io::Result<()> {
            Ok(())
        }
        fn close(&mut self) -> io::Result<SinkEnd> {
            Ok(SinkEnd::default())
        }
    }

    /// A batch of 3 flows, numbered `n`.
    fn batch(n: u32) -> Arc<Batch> {
        let mut b = crate::output::tests::batch_of(3);
        b.flows.iter_mut().for_each(|f| f.conns = n);
        Arc::new(b)
    }

    #[test]
    fn a_stalled_sink_thread_is_waited_for_only_past_the_records_kept_for_it() {
        let (open, tokens) = mpsc::channel();
        let order = Arc::new(Mutex::new(Vec::new()));
        let (recycle, _recycled) = mpsc::sync_channel(64);
        let entered = Arc::new(AtomicU64::new(0));
        let sink = Box::new(Stalled { tokens, order: order.clone(), entered: entered.clone() });
        let mut t = SinkThread::start(sink, Duration::from_secs(1), recycle).unwrap();
        t.max_pending = 30;
        // The thread stalls on its first batch; the queue fills, then the
        // output thread keeps batches itself, without waiting, up to 30 records.
        let started = Instant::now();
        assert!(!t.write(&batch(0)).unwrap());
        while entered.load(Ordering::Relaxed) == 0 {
            assert!(started.elapsed() < Duration::from_secs(5), "the thread never took a batch");
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut n = 1;
        while n < QUEUE_DEPTH as u32 + 1 + 10 {
            assert!(!t.write(&batch(n)).unwrap(), "batch {n} waited");
            n += 1;
        }
        assert_eq!(t.pending_records, 30, "10 batches kept beyond the queue");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(order.lock().unwrap().is_empty(), "the sink is still stalled");
        // One more is past the bound: the output thread waits, until the
        // store resumes, and says it waited.
        let resume = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(open);
        });
        let waited_from = Instant::now();
        assert!(t.write(&batch(n)).unwrap(), "the wait past the bound is reported");
        assert!(waited_from.elapsed() >= Duration::from_millis(150), "it did wait for the store");
        n += 1;
        resume.join().unwrap();
        // Kept batches go out at the next tick's pump or at the close, in order.
        t.pump().unwrap();
        t.close().unwrap();
        assert_eq!(*order.lock().unwrap(), (0..n).collect::<Vec<_>>(), "every batch, in order");
    }
}
