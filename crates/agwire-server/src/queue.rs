//! The bounded queue between a run and its response body.
//!
//! A tokio `mpsc` channel allocates its first block of 32 slots when it is
//! created (32 × 208 bytes for `Event`) and keeps it for the life of the
//! stream. This queue holds its events in a `VecDeque` that is allocated on
//! the first event and released when the stream goes idle (the body has
//! nothing to send and waits): an idle stream holds no slots at all.

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
pub(crate) struct Sender(Arc<Shared>);

/// The body's end.
#[derive(Debug)]
pub(crate) struct Receiver(Arc<Shared>);

/// A queue of at most `capacity` (≥ 1) events.
pub(crate) fn queue(capacity: usize) -> (Sender, Receiver) {
    let shared = Arc::new(Shared(Mutex::new(State {
        events: VecDeque::new(),
        capacity: capacity.max(1),
        closed: false,
        finished: false,
        rx: None,
        tx: None,
    })));
    (Sender(shared.clone()), Receiver(shared))
}

/// The receiver is gone; the event comes back.
#[derive(Debug)]
pub(crate) struct Closed;

impl Sender {
    /// Queues `event`, waiting while the queue is full.
    pub(crate) async fn send(&self, event: Event) -> Result<(), Closed> {
        let mut event = Some(event);
        std::future::poll_fn(|cx| {
            let mut state = self.0.lock();
            if state.closed {
                return Poll::Ready(Err(Closed));
            }
            if state.events.len() >= state.capacity {
                state.tx = Some(cx.waker().clone());
                return Poll::Pending;
            }
            if let Some(event) = event.take() {
                state.events.push_back(event);
            }
            if let Some(waker) = state.rx.take() {
                drop(state);
                waker.wake();
            }
            Poll::Ready(Ok(()))
        })
        .await
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.finished = true;
        if let Some(waker) = state.rx.take() {
            drop(state);
            waker.wake();
        }
    }
}

impl Receiver {
    /// Moves every queued event to `f`, in order, until it returns false.
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

impl Drop for Receiver {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agwire_core::{BaseEvent, StepStartedEvent};

    fn step(name: &str) -> Event {
        Event::StepStarted(StepStartedEvent {
            step_name: name.into(),
            subagent_run_id: None,
            base: BaseEvent::default(),
        })
    }

    #[tokio::test]
    async fn bounded_in_order_and_closed_both_ways() {
        let (tx, mut rx) = queue(2);
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
            assert!(rx.0.lock().events.len() <= 2);
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

        let (tx, rx) = queue(1);
        drop(rx);
        assert!(tx.send(step("x")).await.is_err());
    }

    #[tokio::test]
    async fn a_full_queue_wakes_its_sender_when_closed() {
        let (tx, mut rx) = queue(1);
        tx.send(step("a")).await.unwrap();
        let blocked = tokio::spawn(async move { tx.send(step("b")).await.is_err() });
        tokio::task::yield_now().await;
        rx.close();
        assert!(blocked.await.unwrap());
    }
}
