//! The output stage's thread: takes batches of records from the packet path
//! and hands them to the sinks, so formatting text and encoding Parquet
//! never stall packet processing (on captures of many short connections
//! that work is as large as tracking itself).
//!
//! The queue between the two is bounded. When the disk cannot keep up,
//! `read` waits ([`Output::send`]); a live capture worker does not: with
//! [`BatchSender::try_send`] it keeps collecting into the batch it got back
//! and goes on reading its ring, and waits only past a bound on what it holds
//! (a worker that stops reading makes the kernel drop packets). Batches come
//! back empty on a second channel so their vectors are reused instead of
//! reallocated.
//!
//! Its parts: the fan-out of each batch to the sinks (`fanout`: counts,
//! owners, the run's summary) and the thread a sink with `own_thread` runs
//! on (`threaded`).

pub mod fanout;
pub mod threaded;

use std::io;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wirelog_record::{Batch, ProcOwners, TxJoin};

use crate::output::fanout::{Fanout, Live, Summary};
use crate::Sink;

/// Batches in flight between the packet path and the writer (per producer
/// about one; live capture has one producer per worker).
const QUEUE_DEPTH: usize = 16;

/// Batches `read` keeps going round (see [`Output::batch`]): one the output
/// thread and the store's thread write (shared), one queued; the tracker
/// fills a vector of its own meanwhile. Past them the
/// packet thread waits for one back instead of making a new one: each new
/// batch is fresh memory that the kernel gives page by page as it is filled
/// (a mysql_text batch's transactions ~1 MB; under load, the writers a few
/// batches behind, ~a quarter of a read's page faults, issue 36).
const IN_FLIGHT: usize = 2;

/// How long [`Output::batch`] waits for a batch back before it makes one
/// more: a writer that fell behind (a flush) holds `read` back by this much
/// a batch at most, as before it made new batches without waiting.
const BATCH_WAIT: Duration = Duration::from_millis(50);

/// How often the sinks are ticked: log lines written are flushed to their
/// files within this long, so `tail -f` on a live probe's logs follows the
/// traffic.
const TICK: Duration = Duration::from_secs(1);

/// A writer thread's loop over `on`: each item of `rx` to `write`, `tick`
/// about every `every`, and `after` once per turn, until the senders let go.
pub(crate) fn serve<T, S: ?Sized>(
    rx: &Receiver<T>,
    every: Duration,
    on: &mut S,
    mut write: impl FnMut(&mut S, T) -> io::Result<()>,
    mut tick: impl FnMut(&mut S, Instant) -> io::Result<()>,
    mut after: impl FnMut(&mut S),
) -> io::Result<()> {
    let mut last_tick = Instant::now();
    loop {
        match rx.recv_timeout(every.saturating_sub(last_tick.elapsed())) {
            Ok(item) => write(on, item)?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        }
        if last_tick.elapsed() >= every {
            last_tick = Instant::now();
            tick(on, last_tick)?;
        }
        after(on);
    }
}

/// A written batch back to the producers, emptied (a full return queue
/// lets it go: producers make a new one).
pub(crate) fn give_back(mut batch: Batch, to: &SyncSender<Batch>) {
    batch.recycle();
    let _ = to.try_send(batch);
}

fn stopped() -> io::Error {
    io::Error::other("the output thread stopped")
}

/// The output stage: its thread, the queue to it, and what it publishes.
pub struct Output {
    live: Arc<Live>,
    tx: Option<SyncSender<Batch>>,
    /// Written batches coming back empty, for any producer to refill.
    recycled: Arc<Mutex<Receiver<Batch>>>,
    handle: Option<JoinHandle<io::Result<Summary>>>,
    /// Records dropped so far for lack of space (for the stats line).
    dropped: Arc<AtomicU64>,
    /// Batches [`Output::batch`] made rather than took back.
    made: usize,
    /// An empty batch [`Output::send`] was given: the next batch (an empty
    /// batch is not sent, and would not come back).
    spare: Option<Batch>,
}

/// A handle for another thread to queue batches (live capture's workers).
#[derive(Clone)]
pub struct BatchSender {
    tx: SyncSender<Batch>,
    recycled: Arc<Mutex<Receiver<Batch>>>,
}

impl BatchSender {
    /// Queues a batch; waits while the writer is behind. Fails only when the
    /// writer stopped (its error is reported by [`Output::finish`]).
    pub fn send(&self, batch: Batch) -> io::Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        self.tx.send(batch).map_err(|_| stopped())
    }

    /// Queues a batch if the writer has room, else gives it back: a capture
    /// worker keeps collecting into it rather than stop reading its rings.
    pub fn try_send(&self, batch: Batch) -> io::Result<Option<Batch>> {
        if batch.is_empty() {
            return Ok(None);
        }
        match self.tx.try_send(batch) {
            Ok(()) => Ok(None),
            Err(TrySendError::Full(b)) => Ok(Some(b)),
            Err(TrySendError::Disconnected(_)) => Err(stopped()),
        }
    }

    /// An empty batch, reusing the vectors of one already written when possible.
    pub fn batch(&self) -> Batch {
        recycled(&self.recycled)
    }

    /// An empty batch back from the writer, waiting up to [`BATCH_WAIT`] for
    /// one (then a new one), as [`Output::batch`] does for `read`: for a
    /// capture worker at exit, which reads no ring any more and ends its
    /// connections faster than the store writes them, so that their records
    /// wait in its table rather than in batches in front of the writer.
    pub fn batch_written(&self) -> Batch {
        self.recycled.lock().ok().and_then(|r| r.recv_timeout(BATCH_WAIT).ok()).unwrap_or_default()
    }
}

/// A batch the writer gave back, or a new one (once per ship: the lock is
/// never contended for long).
fn recycled(r: &Mutex<Receiver<Batch>>) -> Batch {
    r.lock().ok().and_then(|r| r.try_recv().ok()).unwrap_or_default()
}

impl Output {
    /// Starts the thread that hands every batch to `sinks`, in their order
    /// (a sink that waits on a network goes last: at the end the files are
    /// whole before it waits). With `owners` (`capture --processes`) records
    /// get the owners of their local ends first. `live` is where the
    /// counters `/metrics` reads go (the store sink publishes to it too).
    pub fn start(sinks: Vec<Box<dyn Sink>>, owners: Option<Box<dyn ProcOwners>>, live: Arc<Live>) -> io::Result<Output> {
        Output::start_joined(sinks, owners, None, live)
    }

    /// [`Output::start`], with `join` (`capture --tls-plaintext`) given
    /// every batch first, and each tick, to join the TLS library's
    /// transactions with the packet path's connections.
    pub fn start_joined(
        sinks: Vec<Box<dyn Sink>>,
        owners: Option<Box<dyn ProcOwners>>,
        join: Option<Box<dyn TxJoin>>,
        live: Arc<Live>,
    ) -> io::Result<Output> {
        let dropped = Arc::new(AtomicU64::new(0));
        let (tx, rx) = mpsc::sync_channel::<Batch>(QUEUE_DEPTH);
        let (recycle_tx, recycled) = mpsc::sync_channel::<Batch>(QUEUE_DEPTH + 1);
        let mut fanout = Fanout::new(sinks, owners, live.clone(), dropped.clone(), TICK, &recycle_tx)?;
        fanout.set_join(join);
        let handle = std::thread::Builder::new()
            .name("wirelog-output".into())
            .spawn(move || {
                let write = |f: &mut Fanout, batch: Batch| {
                    if let Some(batch) = f.write(batch)? {
                        give_back(batch, &recycle_tx);
                    }
                    Ok(())
                };
                let run = serve(&rx, TICK, &mut fanout, write, Fanout::tick, Fanout::report_space);
                // A sink that failed ends the run, but the others still close
                // (ClickHouse spools what it holds, logs end on whole lines);
                // the first failure is the one reported.
                let closed = fanout.close();
                run.and(closed)
            })
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start the output thread: {e}")))?;
        let recycled = Arc::new(Mutex::new(recycled));
        Ok(Output { live, tx: Some(tx), recycled, handle: Some(handle), dropped, made: 0, spare: None })
    }

    /// What the writer has written so far (for `/metrics`).
    pub fn live(&self) -> Arc<Live> {
        self.live.clone()
    }

    /// Records dropped so far because the disk stayed full (store rows and
    /// log lines), updated as the writer goes.
    pub fn dropped_counter(&self) -> Arc<AtomicU64> {
        self.dropped.clone()
    }

    /// A handle for other threads to queue batches.
    pub fn sender(&self) -> BatchSender {
        BatchSender { tx: self.tx.clone().expect("output running"), recycled: self.recycled.clone() }
    }

    /// An empty batch, reusing the vectors of one already written: once
    /// [`IN_FLIGHT`] batches were made, it waits for one to come back (up to
    /// [`BATCH_WAIT`], then makes one more). For `read`, whose packet thread
    /// can wait; a capture worker takes [`BatchSender::batch`], which never waits.
    pub fn batch(&mut self) -> Batch {
        if let Some(b) = self.spare.take() {
            return b;
        }
        let back = self.recycled.lock().ok().and_then(|r| match r.try_recv() {
            Ok(b) => Some(b),
            Err(_) if self.made >= IN_FLIGHT => r.recv_timeout(BATCH_WAIT).ok(),
            Err(_) => None,
        });
        back.unwrap_or_else(|| {
            self.made += 1;
            Batch::default()
        })
    }

    /// Queues a batch; waits while the writer is [`QUEUE_DEPTH`] batches behind.
    pub fn send(&mut self, batch: Batch) -> io::Result<()> {
        if batch.is_empty() {
            self.spare = Some(batch);
            return Ok(());
        }
        let sent = self.tx.as_ref().map(|tx| tx.send(batch).is_ok()).unwrap_or(false);
        if sent {
            return Ok(());
        }
        // The writer stopped: its error is the one to report.
        Err(self.join().err().unwrap_or_else(stopped))
    }

    /// Writes what is queued, closes every sink, and says what was written.
    pub fn finish(mut self) -> io::Result<Summary> {
        self.join()
    }

    fn join(&mut self) -> io::Result<Summary> {
        drop(self.tx.take());
        match self.handle.take() {
            Some(h) => h.join().map_err(|_| io::Error::other("the output thread panicked"))?,
            None => Err(io::Error::other("the output thread already stopped")),
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if self.handle.is_some() {
            let _ = self.join();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::SinkEnd;
    use std::sync::atomic::Ordering;
    use wirelog_record::FlowRecord;

    /// A sink whose writes wait for a token: a disk that stalls.
    struct Stalled {
        tokens: Receiver<()>,
        written: Arc<AtomicU64>,
    }

    impl Sink for Stalled {
        fn name(&self) -> &str {
            "stalled"
        }
        fn write(&mut self, batch: &Batch) -> io::Result<()> {
            let _ = self.tokens.recv();
            self.written.fetch_add(batch.records() as u64, Ordering::Relaxed);
            Ok(())
        }
        fn tick(&mut self, _: Instant) -> io::Result<()> {
            Ok(())
        }
        fn close(&mut self) -> io::Result<SinkEnd> {
            Ok(SinkEnd::default())
        }
    }

    /// A batch of `n` flows (records for tests of the output stage).
    pub(crate) fn batch_of(n: usize) -> Batch {
        let flow = FlowRecord {
            bucket_ns: 0,
            iface: "lo".into(),
            client: Default::default(),
            server: Default::default(),
            server_port: 3306,
            proto: 6,
            bytes_out: 1,
            pkts_out: 1,
            bytes_in: 0,
            pkts_in: 0,
            first_ns: 0,
            last_ns: 0,
            conns: 1,
        };
        Batch { flows: vec![flow; n], ..Batch::default() }
    }

    /// A sink that counts the records it was given.
    struct Counted(Arc<AtomicU64>);

    impl Sink for Counted {
        fn name(&self) -> &str {
            "counted"
        }
        fn write(&mut self, batch: &Batch) -> io::Result<()> {
            self.0.fetch_add(batch.records() as u64, Ordering::Relaxed);
            Ok(())
        }
        fn tick(&mut self, _: Instant) -> io::Result<()> {
            Ok(())
        }
        fn close(&mut self) -> io::Result<SinkEnd> {
            Ok(SinkEnd::default())
        }
    }

    /// `read`'s batches go round: past `IN_FLIGHT` made, each batch is one
    /// written before, back empty with the room its vectors had; an empty
    /// batch is kept for the next rather than lost.
    #[test]
    fn read_reuses_written_batches_with_their_room() {
        let written = Arc::new(AtomicU64::new(0));
        let mut output = Output::start(vec![Box::new(Counted(written.clone()))], None, Arc::default()).unwrap();
        let mut reused = 0;
        for _ in 0..40 {
            let mut b = output.batch();
            if b.flows.capacity() >= 1_000 {
                reused += 1;
            }
            assert!(b.is_empty());
            b.flows.extend(batch_of(1_000).flows);
            output.send(b).unwrap();
            let empty = output.batch();
            let had = empty.flows.capacity();
            output.send(empty).unwrap();
            let again = output.batch();
            assert_eq!(again.flows.capacity(), had, "an empty batch is the next one");
            output.send(again).unwrap();
        }
        // The writer is never stalled here: batches come back within the
        // wait (a batch made past the bound after it would be one more).
        assert!(output.made <= IN_FLIGHT + 2, "{} batches made", output.made);
        assert!(reused >= 40 - output.made, "{reused} reused of 40");
        output.finish().unwrap();
        assert_eq!(written.load(Ordering::Relaxed), 40_000);
    }

    /// A writer that stalls past the wait holds `read` back for the wait,
    /// not for good: a new batch is made.
    #[test]
    fn read_makes_a_batch_when_none_comes_back_in_time() {
        let (open, tokens) = mpsc::channel();
        let written = Arc::new(AtomicU64::new(0));
        let mut output = Output::start(vec![Box::new(Stalled { tokens, written: written.clone() })], None, Arc::default()).unwrap();
        for _ in 0..IN_FLIGHT + 2 {
            let mut b = output.batch();
            b.flows.extend(batch_of(3).flows);
            output.send(b).unwrap();
        }
        assert_eq!(output.made, IN_FLIGHT + 2);
        drop(open);
        output.finish().unwrap();
        assert_eq!(written.load(Ordering::Relaxed), 3 * (IN_FLIGHT as u64 + 2));
    }

    #[test]
    fn a_stalled_writer_hands_the_batch_back_instead_of_blocking() {
        let (open, tokens) = mpsc::channel();
        let written = Arc::new(AtomicU64::new(0));
        let sink = Stalled { tokens, written: written.clone() };
        let mut output = Output::start(vec![Box::new(sink)], None, Arc::default()).unwrap();
        let sender = output.sender();
        // The writer takes one batch and stalls on it; the queue then fills.
        let mut sent = 0u64;
        let held = loop {
            match sender.try_send(batch_of(3)).unwrap() {
                None => sent += 3,
                Some(back) => break back,
            }
            assert!(sent <= 3 * (QUEUE_DEPTH as u64 + 2), "the queue never filled");
        };
        assert_eq!(held.records(), 3, "the batch comes back whole");
        assert_eq!(written.load(Ordering::Relaxed), 0);
        // The disk comes back: everything queued and held is written.
        drop(open);
        drop(sender);
        output.send(held).unwrap();
        output.send(batch_of(2)).unwrap();
        output.finish().unwrap();
        assert_eq!(written.load(Ordering::Relaxed), sent + 3 + 2);
    }
}
