//! The rings' drain on a thread of its own, which does nothing else: it waits on the rings,
//! copies out what the kernel wrote and hands it to the recorder's loop. The loop's other work
//! (the maps snapshots, the spill's writes, the live placement hook, the status line) can take
//! tens to hundreds of milliseconds on a loaded machine; while the drain waited behind it the
//! kernel dropped whatever no longer fitted in a ring. The thread also asks the scheduler to let
//! it run as soon as a ring wakes it (`drain_priority.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use numalens_assemble::raw::PerfEvent;

use crate::sampler::{Sampler, SamplerWatch};

/// The longest the thread waits on the rings before it drains them anyway (a ring below its
/// watermark) and looks for the stop.
const WAIT_MS: i32 = 50;

/// What one turn of the thread took from the rings.
struct Drained {
    events: Vec<PerfEvent>,
    /// Every task of the program has exited, and these were the rings' last records.
    over: bool,
}

/// The running drain, as the recorder's loop holds it.
pub struct RingDrain {
    how: How,
    over: bool,
}

enum How {
    Thread {
        received: Receiver<Drained>,
        stop: Arc<AtomicBool>,
        thread: JoinHandle<Sampler>,
        watch: SamplerWatch,
    },
    /// No thread could be started (or no descriptor duplicated): the loop drains the rings
    /// itself between its other work, as the only way left.
    Here(Sampler),
}

impl RingDrain {
    /// Starts draining `sampler`'s rings on a thread of their own.
    pub fn start(sampler: Sampler) -> RingDrain {
        let how = match sampler.watch() {
            Ok(watch) => spawn(sampler, watch),
            Err(_) => How::Here(sampler),
        };
        RingDrain { how, over: false }
    }

    /// True when the rings are drained on a thread of their own.
    pub fn on_own_thread(&self) -> bool {
        matches!(self.how, How::Thread { .. })
    }

    /// Hands `sink` what the thread drained, waiting up to `timeout` for the first of it. True
    /// once every task of the program has exited and the rings' last records were handed.
    pub fn receive(&mut self, timeout: Duration, mut sink: impl FnMut(PerfEvent)) -> bool {
        let received = match &mut self.how {
            How::Here(sampler) => {
                self.over |= sampler.wait(timeout.as_millis().try_into().unwrap_or(i32::MAX));
                sampler.drain(sink);
                return self.over;
            }
            How::Thread { received, .. } => received,
        };
        let mut next = match received.recv_timeout(timeout) {
            Ok(drained) => Some(drained),
            Err(RecvTimeoutError::Timeout) => None,
            // The thread ended without saying the program did: it panicked.
            Err(RecvTimeoutError::Disconnected) => return true,
        };
        while let Some(drained) = next {
            drained.events.into_iter().for_each(&mut sink);
            self.over |= drained.over;
            next = received.try_recv().ok();
        }
        self.over
    }

    /// True when every task of the program has exited, without waiting.
    pub fn ended(&self) -> bool {
        match &self.how {
            How::Thread { watch, .. } => watch.ended(),
            How::Here(sampler) => sampler.ended(),
        }
    }

    /// The records the kernel dropped so far, when it counts them.
    pub fn lost_counted(&self) -> Option<u64> {
        match &self.how {
            How::Thread { watch, .. } => watch.lost_counted(),
            How::Here(sampler) => sampler.lost().counted,
        }
    }

    /// Stops the thread after a last drain, hands `sink` everything still on its way, and gives
    /// the sampler back (its lost count is final once the program has ended). If the thread
    /// failed, what it handed over still goes to `sink`, and the error says what was lost.
    pub fn finish(self, mut sink: impl FnMut(PerfEvent)) -> Result<Sampler, String> {
        let (received, stop, thread) = match self.how {
            How::Here(mut sampler) => {
                sampler.drain(sink);
                return Ok(sampler);
            }
            How::Thread {
                received,
                stop,
                thread,
                ..
            } => (received, stop, thread),
        };
        stop.store(true, Ordering::Release);
        let joined = thread.join();
        for drained in received.try_iter() {
            drained.events.into_iter().for_each(&mut sink);
        }
        joined.map_err(|_| {
            "the thread draining the sampling rings failed: the samples it had not handed over, \
             and the kernel's count of those it lost, are missing"
                .to_string()
        })
    }
}

/// The thread, or draining here when none can be started.
fn spawn(sampler: Sampler, watch: SamplerWatch) -> How {
    let (send, received) = channel();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    // A refused spawn drops its closure: the sampler goes through a slot it can be taken back
    // from.
    let slot = Arc::new(Mutex::new(Some(sampler)));
    let taken = slot.clone();
    let spawned = std::thread::Builder::new()
        .name("numalens-drain".into())
        .spawn(move || {
            let sampler = taken.lock().ok().and_then(|mut s| s.take());
            let sampler = sampler.expect("the sampler is handed over once");
            drain_until_over(sampler, &send, &stopped)
        });
    match spawned {
        Ok(thread) => How::Thread {
            received,
            stop,
            thread,
            watch,
        },
        Err(_) => {
            let sampler = slot.lock().ok().and_then(|mut s| s.take());
            How::Here(sampler.expect("not taken by a thread that never ran"))
        }
    }
}

/// The thread: waits on the rings, drains them and sends what they held, until every task has
/// exited or the loop says stop; then gives the sampler back.
fn drain_until_over(mut sampler: Sampler, send: &Sender<Drained>, stop: &AtomicBool) -> Sampler {
    let granted = crate::drain_priority::raise();
    let described = granted.describe().into();
    sampler
        .info
        .settings
        .insert("drain_thread".into(), described);
    loop {
        // Read before the wait: a stop set during the wait still gets this turn's drain.
        let stopping = stop.load(Ordering::Acquire);
        let over = sampler.wait(if stopping { 0 } else { WAIT_MS });
        let mut events = Vec::new();
        sampler.drain(|e| events.push(e));
        if !events.is_empty() || over {
            // The loop has stopped listening only once it finishes, which waits for this thread.
            let _ = send.send(Drained { events, over });
        }
        if over || stopping {
            return sampler;
        }
    }
}
