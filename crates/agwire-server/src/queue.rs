//! The bounded queue between a run and what consumes its events: its
//! response body, or a service's writer ([`crate::run_detached`]).
//!
//! A tokio `mpsc` channel allocates its first block of 32 slots when it is
//! created (32 × 208 bytes for `Event`) and keeps it for the life of the
//! run. This queue holds its events in a `VecDeque` that is allocated on
//! the first event and released when the run goes idle (its consumer has
//! nothing to take and waits): a run that waits — for a model, a tool, a
//! slow client — holds no slots at all.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use agwire_core::Event;

#[derive(Debug)]
struct State {
    events: VecDeque<Event>,
    capacity: usize,
    /// The receiver is gone (or closed): sends fail.
    closed: bool,
    /// The sender is gone: once empty, the stream is over.
    finished: bool,
    rx: Option<Waker>,
    tx: Option<Waker>,
}

#[derive(Debug)]
struct Shared(Mutex<State>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; a poisoned one is still consistent.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The run's end: sends wait while `capacity` events are queued.
#[derive(Debug)]
pub struct EventSender(Arc<Shared>);

/// The body's end.
#[derive(Debug)]
pub struct EventReceiver(Arc<Shared>);

/// A queue of `capacity` (≥ 1) events (and the one a waiting sender
/// queued; see [`EventSender::send`]).
pub fn event_queue(capacity: usize) -> (EventSender, EventReceiver) {
    let shared = Arc::new(Shared(Mutex::new(State {
        events: VecDeque::new(),
        capacity: capacity.max(1),
        closed: false,
        finished: false,
        rx: None,
        tx: None,
    })));
    (EventSender(shared.clone()), EventReceiver(shared))
}

/// The receiver is gone.
#[derive(Debug)]
pub struct Closed;

impl EventSender {
    /// Queues `event` at once (unless the receiver is gone) and gives the
    /// wait for room: it resolves when the queue holds no more than its
    /// capacity, so a sender that awaits each send keeps at most
    /// `capacity + 1` events queued. `Err` when the receiver is gone.
    ///
    /// Why queue first: the future a sender awaits then holds no event —
    /// it is a few words, not an `Event` per nested call — and an agent's
    /// future, held for its whole run, is as large as the largest thing it
    /// awaits.
    pub fn send(&self, event: Event) -> Room<'_> {
        let mut state = self.0.lock();
        let refused = state.closed;
        if !refused {
            state.events.push_back(event);
            if let Some(waker) = state.rx.take() {
                drop(state);
                waker.wake();
            }
        }
        Room {
            shared: &self.0,
            refused,
        }
    }
}

/// The wait for room after a send ([`EventSender::send`]).
#[derive(Debug)]
#[must_use = "the event is queued; awaiting this waits for room (and learns whether the receiver is gone)"]
pub struct Room<'a> {
    shared: &'a Shared,
    refused: bool,
}

impl std::future::Future for Room<'_> {
    type Output = Result<(), Closed>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.refused {
            return Poll::Ready(Err(Closed));
        }
        let mut state = self.shared.lock();
        if state.closed {
            return Poll::Ready(Err(Closed));
        }
        if state.events.len() > state.capacity {
            state.tx = Some(cx.waker().clone());
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for EventSender {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.finished = true;
        if let Some(waker) = state.rx.take() {
            drop(state);
            waker.wake();
        }
    }
}

impl EventReceiver {
    /// Moves queued events to `f`, in order, until it returns false (the
    /// event it was given is taken all the same).
    /// `Ready(true)` when events were taken, `Ready(false)` when the sender
    /// is gone and nothing is left, `Pending` otherwise.
    pub(crate) fn poll_drain(
        &mut self,
        cx: &mut Context<'_>,
        mut f: impl FnMut(Event) -> bool,
    ) -> Poll<bool> {
        let mut state = self.0.lock();
        if state.events.is_empty() {
            if state.finished {
                return Poll::Ready(false);
            }
            state.rx = Some(cx.waker().clone());
            return Poll::Pending;
        }
        while let Some(event) = state.events.pop_front() {
            if !f(event) {
                break;
            }
        }
        if let Some(waker) = state.tx.take() {
            drop(state);
            waker.wake();
        }
        Poll::Ready(true)
    }

    /// Waits for events and moves up to `limit` of them to the end of
    /// `into`, in order: how many (0 once the sender is gone and nothing is
    /// left). Waiting with nothing queued frees the queue's storage first:
    /// a run that waits holds no slots.
    pub async fn recv_many(&mut self, into: &mut Vec<Event>, limit: usize) -> usize {
        let mut taken = 0;
        std::future::poll_fn(|cx| {
            let drained = self.poll_drain(cx, |event| {
                into.push(event);
                taken += 1;
                taken < limit
            });
            if drained.is_pending() {
                self.release_if_empty();
            }
            drained
        })
        .await;
        taken
    }

    /// Frees the queue's storage if it holds nothing: for a stream that has
    /// gone idle. (Not after every drain: a busy stream would allocate its
    /// slots again for every burst.)
    pub(crate) fn release_if_empty(&mut self) {
        let mut state = self.0.lock();
        if state.events.is_empty() && state.events.capacity() > 0 {
            state.events = VecDeque::new();
        }
    }

    /// Refuses further events and drops the queued ones.
    pub(crate) fn close(&mut self) {
        let mut state = self.0.lock();
        state.closed = true;
        state.events = VecDeque::new();
        if let Some(waker) = state.tx.take() {
            drop(state);
            waker.wake();
        }
    }
}

impl Drop for EventReceiver {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agwire_core::StepStartedEvent;

    fn step(name: &str) -> Event {
        Event::StepStarted(StepStartedEvent::new(name))
    }

    #[tokio::test]
    async fn bounded_in_order_and_closed_both_ways() {
        let (tx, mut rx) = event_queue(2);
        let sender = tokio::spawn(async move {
            for i in 0..5 {
                tx.send(step(&i.to_string())).await.unwrap();
            }
        });
        let mut got = Vec::new();
        loop {
            let more = std::future::poll_fn(|cx| {
                rx.poll_drain(cx, |e| {
                    got.push(e);
                    true
                })
            })
            .await;
            assert!(rx.0.lock().events.len() <= 3, "capacity + 1 at most");
            if !more {
                break;
            }
        }
        sender.await.unwrap();
        let names: Vec<_> = got
            .iter()
            .map(|e| match e {
                Event::StepStarted(s) => s.step_name.clone(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(names, ["0", "1", "2", "3", "4"]);

        let (tx, rx) = event_queue(1);
        drop(rx);
        assert!(tx.send(step("x")).await.is_err());
    }

    #[tokio::test]
    async fn recv_many_takes_at_most_its_limit_and_a_waiting_queue_holds_no_slots() {
        let (tx, mut rx) = event_queue(8);
        for name in ["a", "b", "c"] {
            tx.send(step(name)).await.unwrap();
        }
        let mut got = Vec::new();
        assert_eq!(rx.recv_many(&mut got, 2).await, 2);
        assert_eq!(rx.recv_many(&mut got, 2).await, 1);
        assert_eq!(got.len(), 3);
        assert!(rx.0.lock().events.capacity() > 0);
        let waiting = tokio::spawn(async move {
            let mut more = Vec::new();
            let n = rx.recv_many(&mut more, 8).await;
            (n, rx)
        });
        // Poll for it with a deadline: the receiver parks with nothing queued.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while tx.0.lock().events.capacity() > 0 {
            assert!(std::time::Instant::now() < deadline, "storage never freed");
            tokio::task::yield_now().await;
        }
        drop(tx);
        let (n, _rx) = waiting.await.unwrap();
        assert_eq!(n, 0, "the sender is gone and nothing is left");
    }

    #[tokio::test]
    async fn a_full_queue_wakes_its_sender_when_closed() {
        let (tx, mut rx) = event_queue(1);
        tx.send(step("a")).await.unwrap();
        let blocked = tokio::spawn(async move { tx.send(step("b")).await.is_err() });
        tokio::task::yield_now().await;
        rx.close();
        assert!(blocked.await.unwrap());
    }
}
