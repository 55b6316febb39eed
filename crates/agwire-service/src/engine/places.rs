//! Places among `max_concurrent`: each run executing here holds one, and so
//! does each accept in flight that will start its run here if it can, and
//! each run the dispatcher's claim in flight may take. The dispatcher claims
//! runnable runs only into places it holds; when it finds none, the next
//! place given back wakes it.
//!
//! Why a claim holds its places for its round trip rather than counting
//! the free ones: an accept that took one meanwhile and started its run
//! would execute beside every run the claim brought back — two runs at
//! once with `max_concurrent = 1` (seen on PostgreSQL, where a claim is
//! three round trips).
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

    /// Places for the dispatcher's claim: up to `most` of the free ones of
    /// `max`, held until the claimed runs execute (each takes a place of its
    /// own first). When none is free, the next place given back wakes it.
    pub(super) fn hold_claim(self: &Arc<Self>, max: usize, most: usize) -> ClaimPlaces {
        let mut held = self.take(max, most);
        if held == 0 {
            self.starved.store(true, Ordering::SeqCst);
            // Looked at again: a place given back since the look above did
            // not see the flag, and woke nobody.
            held = self.take(max, most);
        }
        ClaimPlaces {
            places: self.clone(),
            held,
            max,
        }
    }

    /// Takes up to `most` free places of `max` for a claim; how many.
    fn take(&self, max: usize, most: usize) -> usize {
        let wanted = self.free(max).min(most);
        if wanted == 0 {
            return 0;
        }
        let starting = self.starting.fetch_add(wanted, Ordering::SeqCst) + wanted;
        // An accept took a place between the look and the taking: what is
        // over `max` is given back (and that accept may have been refused
        // meanwhile: its run then waits for this dispatcher, which it wakes).
        let over = (self.executing.load(Ordering::SeqCst) + starting)
            .saturating_sub(max)
            .min(wanted);
        if over > 0 {
            self.starting.fetch_sub(over, Ordering::SeqCst);
        }
        wanted - over
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

/// The places a claim in flight holds (given back when dropped: by then
/// each run it brought executes, holding a place of its own).
pub(super) struct ClaimPlaces {
    places: Arc<Places>,
    held: usize,
    max: usize,
}

impl ClaimPlaces {
    /// How many runs the claim may take.
    pub(super) fn count(&self) -> usize {
        self.held
    }
}

impl Drop for ClaimPlaces {
    fn drop(&mut self) {
        if self.held > 0 {
            self.places.starting.fetch_sub(self.held, Ordering::SeqCst);
            self.places.given_back(self.max);
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

    fn starved(places: &Places) -> bool {
        places.starved.load(Ordering::SeqCst)
    }

    /// The dispatcher that found no place is woken by the next one given
    /// back, by an execution or by an accept, and only then.
    #[test]
    fn a_place_given_back_wakes_a_dispatcher_that_found_none() {
        let wake = Arc::new(Notify::new());
        let places = Arc::new(Places::new(wake));
        places.execution_started();
        assert_eq!(places.hold_claim(2, 64).count(), 1);
        // Room: the end of an execution wakes nobody.
        places.execution_ended(2);
        assert!(!starved(&places));
        places.execution_started();
        let held = places.hold_start(2);
        assert!(held.is_some());
        assert!(places.hold_start(2).is_none(), "no third place of two");
        assert_eq!(places.hold_claim(2, 64).count(), 0);
        drop(held);
        assert!(!starved(&places), "the accept's place woke it");
        assert_eq!(places.hold_claim(2, 64).count(), 1);
        places.execution_started();
        assert_eq!(places.hold_claim(2, 64).count(), 0);
        places.execution_ended(2);
        assert!(!starved(&places), "the execution's place woke it");
        assert_eq!(places.free(2), 1);
        // Full: an accept refused a place does not wake it; the end of an
        // execution, once a place is free, does.
        places.execution_started();
        assert_eq!(places.hold_claim(2, 64).count(), 0);
        assert!(places.hold_start(2).is_none());
        assert!(starved(&places), "woken with no place free");
        places.execution_ended(2);
        assert!(!starved(&places));
    }

    /// A claim in flight and an accept in flight never hold one place
    /// both: whichever holds it first keeps it from the other until the
    /// run it brings executes.
    #[test]
    fn a_claim_and_an_accept_never_share_a_place() {
        let places = Arc::new(Places::new(Arc::new(Notify::new())));
        let claim = places.hold_claim(1, 64);
        assert_eq!(claim.count(), 1);
        assert!(
            places.hold_start(1).is_none(),
            "an accept started its run in the place a claim in flight holds"
        );
        // The claim brought a run: it executes, then the claim lets go.
        places.execution_started();
        drop(claim);
        assert_eq!(places.free(1), 0);
        assert!(places.hold_start(1).is_none());
        places.execution_ended(1);

        let accept = places.hold_start(1);
        assert!(accept.is_some());
        assert_eq!(
            places.hold_claim(1, 64).count(),
            0,
            "a claim took the place an accept in flight holds"
        );
        // The accept's run did not start here: its place wakes the
        // dispatcher, which then finds it.
        drop(accept);
        assert!(!starved(&places));
        assert_eq!(places.hold_claim(1, 64).count(), 1);
        // A claim that brought nothing gives every place back.
        assert_eq!(places.free(1), 1);
        // And at most `most` of many.
        let claim = places.hold_claim(10, 4);
        assert_eq!((claim.count(), places.free(10)), (4, 6));
    }
}
