//! Places among `max_concurrent`: each run executing here holds one, and so
//! does each accept in flight that will start its run here if it can. The
//! dispatcher claims runnable runs only into free places; when it finds
//! none, the next place given back wakes it.
//!
//! Why a wake-up of its own: on a shared database the store tells every
//! process when a run becomes runnable (accepted and not started, or next on
//! its thread after an end), but not when room frees here. Without this, a
//! process would have to look after every end of every run (a claim: three
//! round trips that find nothing, unless runs wait for room), or wait for
//! the dispatcher's sweep.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// This process's places; `wake` is the dispatcher's.
#[derive(Debug)]
pub(super) struct Places {
    executing: AtomicUsize,
    starting: AtomicUsize,
    /// The dispatcher found no free place and waits for one.
    starved: AtomicBool,
    wake: Arc<Notify>,
}

impl Places {
    pub(super) fn new(wake: Arc<Notify>) -> Self {
        Self {
            executing: AtomicUsize::new(0),
            starting: AtomicUsize::new(0),
            starved: AtomicBool::new(false),
            wake,
        }
    }

    /// Places free of `max`.
    fn free(&self, max: usize) -> usize {
        max.saturating_sub(
            self.executing.load(Ordering::SeqCst) + self.starting.load(Ordering::SeqCst),
        )
    }

    /// Places free of `max` for the dispatcher's claim; when there are none,
    /// the next place given back wakes it.
    pub(super) fn free_for_claim(&self, max: usize) -> usize {
        let free = self.free(max);
        if free > 0 {
            return free;
        }
        self.starved.store(true, Ordering::SeqCst);
        // Looked at again: a place given back since the look above did not
        // see the flag, and woke nobody.
        self.free(max)
    }

    /// A place for a run about to be accepted, if one of `max` is free.
    pub(super) fn hold_start(self: &Arc<Self>, max: usize) -> Option<StartPlace> {
        let held = self.starting.fetch_add(1, Ordering::SeqCst) + 1;
        let place = StartPlace(self.clone(), max);
        (self.executing.load(Ordering::SeqCst) + held <= max).then_some(place)
    }

    /// A run starts executing here (before its task is spawned).
    pub(super) fn execution_started(&self) {
        self.executing.fetch_add(1, Ordering::SeqCst);
    }

    /// A run's execution here ended: its place of `max` is free, and the
    /// dispatcher is woken if it waits for one.
    pub(super) fn execution_ended(&self, max: usize) {
        self.executing.fetch_sub(1, Ordering::SeqCst);
        self.given_back(max);
    }

    /// Wakes the dispatcher if it waits for a place and one of `max` is
    /// free. (When none is, whatever took it gives it back in turn — and a
    /// full process's accepts, each holding a place for an instant, do not
    /// wake it for nothing: measured, 4 % of SQLite's accepts alone.)
    fn given_back(&self, max: usize) {
        if self.free(max) > 0 && self.starved.swap(false, Ordering::SeqCst) {
            self.wake.notify_one();
        }
    }
}

/// A place held by an accept in flight (given back when dropped: by then
/// the run executes, holding a place of its own, or does not start here).
pub(super) struct StartPlace(Arc<Places>, usize);

impl Drop for StartPlace {
    fn drop(&mut self) {
        self.0.starting.fetch_sub(1, Ordering::SeqCst);
        self.0.given_back(self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dispatcher that found no place is woken by the next one given
    /// back, by an execution or by an accept, and only then.
    #[test]
    fn a_place_given_back_wakes_a_dispatcher_that_found_none() {
        let wake = Arc::new(Notify::new());
        let places = Arc::new(Places::new(wake));
        places.execution_started();
        assert_eq!(places.free_for_claim(2), 1);
        // Room: the end of an execution wakes nobody.
        places.execution_ended(2);
        assert!(!places.starved.load(Ordering::SeqCst));
        places.execution_started();
        let held = places.hold_start(2);
        assert!(held.is_some());
        assert!(places.hold_start(2).is_none(), "no third place of two");
        assert_eq!(places.free_for_claim(2), 0);
        drop(held);
        assert!(
            !places.starved.load(Ordering::SeqCst),
            "the accept's place woke it"
        );
        assert_eq!(places.free_for_claim(2), 1);
        places.execution_started();
        assert_eq!(places.free_for_claim(2), 0);
        places.execution_ended(2);
        assert!(
            !places.starved.load(Ordering::SeqCst),
            "the execution's place woke it"
        );
        assert_eq!(places.free(2), 1);
        // Full: an accept refused a place does not wake it; the end of an
        // execution, once a place is free, does.
        places.execution_started();
        assert_eq!(places.free_for_claim(2), 0);
        assert!(places.hold_start(2).is_none());
        assert!(
            places.starved.load(Ordering::SeqCst),
            "woken with no place free"
        );
        places.execution_ended(2);
        assert!(!places.starved.load(Ordering::SeqCst));
    }
}
