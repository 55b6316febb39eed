//! Group commit, written once for every backend: the calls queued while a
//! group commits go to the database together in the next one — one
//! transaction, one commit — and each caller is answered after the commit
//! that holds its call, never before (a `202` still means the run is
//! durable).
//!
//! Why: a run's writes are many short calls, and alone each would pay a
//! round trip (PostgreSQL) or a thread hand-off (SQLite), a statement and a
//! commit (a WAL flush) of its own; at thousands of calls a second those,
//! not the work, set the rate.
//!
//! What differs between backends is only how a group is written, so that is
//! the one thing a backend gives: a [`Commit`]. The loop — take the first
//! call, let the callers ready with it queue theirs, then whatever else is
//! queued up to the group's size, let the backend arrange the group, commit
//! it, and when the database undid the whole group (a deadlock, one call's
//! value it refused) commit each call on its own so that only a bad one
//! fails — is here.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::error::Error;

/// How a backend writes a group of calls. Each call carries its own answer
/// channel: the backend answers it once the call's fate is known.
pub(super) trait Commit: Send + Sync + 'static {
    /// One queued call, with where its answer goes.
    type Call: Send + 'static;
    /// Why a whole group failed.
    type Failure: Send;

    /// Orders a group before it is written, and moves into `later` the
    /// calls that must wait for the next group (e.g. a second write of one
    /// run). By default the group is written in arrival order.
    fn arrange(&self, group: &mut Vec<Self::Call>, later: &mut Vec<Self::Call>) {
        let _ = (group, later);
    }

    /// Writes `group` in one transaction and answers each call it takes out
    /// of it. On `Err`, the calls left in `group` were not answered: they go
    /// again one by one if the failure [`undid`](Commit::undone) the whole
    /// group, else each gets the failure.
    fn together(
        &self,
        group: &mut Vec<Self::Call>,
    ) -> impl Future<Output = Result<(), Self::Failure>> + Send;

    /// Writes one call in a transaction of its own, and answers it.
    fn alone(&self, call: Self::Call) -> impl Future<Output = ()> + Send;

    /// Whether `failure` wrote nothing of the group (the database rolled it
    /// back), so each call may safely be written again.
    fn undone(&self, failure: &Self::Failure) -> bool;

    /// Answers `call` with `failure`: the group may have committed or not,
    /// so it is never written again.
    fn fail(&self, call: Self::Call, failure: &Self::Failure);
}

/// How a group commit is sized and started.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shape {
    /// Most calls one group takes.
    pub(super) max_group: usize,
    /// Most groups written side by side. A lane that finds a group being
    /// written waits for it to commit before it writes what arrived
    /// meanwhile, so under load the calls gather into few large groups (a
    /// commit each, not one per call); it goes on without waiting only when
    /// that group takes longer than a commit usually does (it waits for a
    /// lock another replica holds, say), so one slow group never holds up
    /// the rest.
    pub(super) lanes: usize,
    /// What writing a group is taken to take until one has been timed.
    pub(super) first_guess: Duration,
    /// Calls queued before a caller waits to queue more.
    pub(super) queue: usize,
}

/// The handle callers queue their calls on; the loops end when every
/// handle is gone or `stop` is cancelled.
pub(super) struct GroupCommit<C: Commit> {
    calls: mpsc::Sender<C::Call>,
}

impl<C: Commit> Clone for GroupCommit<C> {
    fn clone(&self) -> Self {
        Self {
            calls: self.calls.clone(),
        }
    }
}

impl<C: Commit> std::fmt::Debug for GroupCommit<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit")
            .field(
                "queued",
                &(self.calls.max_capacity() - self.calls.capacity()),
            )
            .finish()
    }
}

impl<C: Commit> GroupCommit<C> {
    /// Starts `shape.lanes` loops on the current tokio runtime.
    pub(super) fn spawn(commit: C, shape: Shape, stop: CancellationToken) -> Self {
        let (handle, lanes) = Self::new(commit, shape, stop, true);
        for lane in lanes {
            tokio::spawn(lane.run());
        }
        handle
    }

    /// Starts one loop on a thread of its own named `name`, for a backend
    /// whose writes block (SQLite: the thread owns the connection).
    pub(super) fn spawn_thread(commit: C, shape: Shape, name: &str) -> Result<Self, Error> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| Error::Internal(format!("could not start {name}: {e}")))?;
        let shape = Shape { lanes: 1, ..shape };
        let (handle, lanes) = Self::new(commit, shape, CancellationToken::new(), false);
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                for lane in lanes {
                    runtime.block_on(lane.run());
                }
            })
            .map_err(|e| Error::Internal(format!("could not start {name}: {e}")))?;
        Ok(handle)
    }

    fn new(commit: C, shape: Shape, stop: CancellationToken, gather: bool) -> (Self, Vec<Lane<C>>) {
        let (calls, queue) = mpsc::channel(shape.queue.max(1));
        let shared = Arc::new(Shared {
            commit,
            queue: Mutex::new(queue),
            max_group: shape.max_group.max(1),
            stop,
            writing: AtomicUsize::new(0),
            written: Notify::new(),
            usual_us: AtomicU64::new(
                u64::try_from(shape.first_guess.as_micros()).unwrap_or(u64::MAX),
            ),
            gather,
        });
        let lanes = (0..shape.lanes.max(1))
            .map(|_| Lane {
                shared: shared.clone(),
            })
            .collect();
        (Self { calls }, lanes)
    }

    /// Calls queued and not yet taken by a lane.
    #[cfg(test)]
    fn queued(&self) -> usize {
        self.calls.max_capacity() - self.calls.capacity()
    }

    /// Queues `call` for the next group (waits while the queue is full).
    pub(super) async fn queue(&self, call: C::Call) -> Result<(), Error> {
        self.calls.send(call).await.map_err(|_| Error::ShuttingDown)
    }
}

/// What every lane of one group commit shares.
struct Shared<C: Commit> {
    commit: C,
    queue: Mutex<mpsc::Receiver<C::Call>>,
    max_group: usize,
    stop: CancellationToken,
    /// Lanes writing a group now.
    writing: AtomicUsize,
    /// Woken each time a lane's group is written.
    written: Notify,
    /// How long writing a group usually takes: a moving average (µs).
    usual_us: AtomicU64,
    /// Whether the lanes run on their callers' runtime, so that callers
    /// made ready with the first can queue before a group closes (see
    /// `Lane::take`). Not on a thread of its own, where nothing else runs.
    gather: bool,
}

impl<C: Commit> Shared<C> {
    /// Writes `group`: together, or call by call when the database undid
    /// it; timed, and the lanes waiting for it woken.
    async fn write(&self, group: &mut Vec<C::Call>) {
        self.writing.fetch_add(1, Ordering::SeqCst);
        let started = Instant::now();
        if let Err(failure) = self.commit.together(group).await {
            if self.commit.undone(&failure) {
                for call in group.drain(..) {
                    self.commit.alone(call).await;
                }
            } else {
                for call in group.drain(..) {
                    self.commit.fail(call, &failure);
                }
            }
        }
        let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let usual = self.usual_us.load(Ordering::Relaxed);
        self.usual_us.store(
            (usual.saturating_mul(7).saturating_add(took)) / 8,
            Ordering::Relaxed,
        );
        self.writing.fetch_sub(1, Ordering::SeqCst);
        self.written.notify_waiters();
    }
}

/// One loop taking groups off the queue.
struct Lane<C: Commit> {
    shared: Arc<Shared<C>>,
}

impl<C: Commit> Lane<C> {
    async fn run(self) {
        let shared = &*self.shared;
        let mut group: Vec<C::Call> = Vec::with_capacity(shared.max_group);
        let mut later: Vec<C::Call> = Vec::new();
        loop {
            if !self.take(&mut group, &mut later).await {
                return;
            }
            shared.commit.arrange(&mut group, &mut later);
            if group.is_empty() {
                continue;
            }
            shared.write(&mut group).await;
            // (A backend that answered every call has drained the group;
            // one that kept a call answers it when the call is dropped.)
            group.clear();
        }
    }

    /// The next group: the calls held back last time and whatever is
    /// queued, waiting for a first call when there are none. `false` when
    /// the loop is over.
    async fn take(&self, group: &mut Vec<C::Call>, later: &mut Vec<C::Call>) -> bool {
        let shared = &*self.shared;
        // One lane takes calls at a time; the others wait their turn here.
        let mut queue = shared.queue.lock().await;
        if later.is_empty() {
            let count = tokio::select! {
                () = shared.stop.cancelled() => return false,
                count = queue.recv_many(group, shared.max_group) => count,
            };
            if count == 0 {
                return false;
            }
            if shared.gather {
                // The first caller's queueing woke this lane, and tokio
                // runs a task a running one woke straight after it (its
                // LIFO slot): before the other callers the same tick made
                // ready (requests that arrived together, runs that wrote
                // together) have queued theirs. Yielding lets them queue
                // first, so the group holds them all rather than the first
                // alone — a round trip and a commit shared by all instead
                // of one per call at low load (issue 47: a replica's CPU
                // per run at half the connections). Bounded: the lane runs
                // again once the runtime's ready tasks have run, or sooner
                // at its next poll of I/O; with no other task ready it
                // loses nothing.
                tokio::task::yield_now().await;
            }
            // Another lane's group is being written: what arrives until it
            // commits joins this one (see `Shape::lanes`).
            let written = shared.written.notified();
            tokio::pin!(written);
            written.as_mut().enable();
            if shared.writing.load(Ordering::SeqCst) > 0 {
                let usual = Duration::from_micros(shared.usual_us.load(Ordering::Relaxed));
                tokio::select! {
                    () = written => {}
                    () = tokio::time::sleep(usual) => {}
                    () = shared.stop.cancelled() => {}
                }
            }
        } else {
            group.append(later);
        }
        while group.len() < shared.max_group
            && let Ok(call) = queue.try_recv()
        {
            group.push(call);
        }
        true
    }
}

#[cfg(test)]
mod tests;
