//! Live fan-out of appended events to the run's subscribers, in process.
//!
//! The log is the truth; the hub only wakes subscribers early. A subscriber
//! registers first, then reads the log, then takes live events it has not
//! seen, so nothing falls in between; one that lags behind the hub's buffer
//! reads the log again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agwire_core::Event;
use tokio::sync::broadcast;

/// One run's live channel: `(seq, event)` pairs already in the log.
type Live = broadcast::Sender<(u64, Event)>;

/// Live events per run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hub {
    runs: Arc<Mutex<HashMap<String, Live>>>,
}

/// How many live events a subscriber may fall behind before it re-reads the
/// log.
const LIVE_BUFFER: usize = 1024;

impl Hub {
    fn sender(&self, task_id: &str) -> broadcast::Sender<(u64, Event)> {
        let mut runs = self
            .runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        runs.entry(task_id.to_owned())
            .or_insert_with(|| broadcast::channel(LIVE_BUFFER).0)
            .clone()
    }

    /// Starts following a run; `None` when it is not live (finished, or not
    /// started on this process): the log then holds everything there is.
    pub(crate) fn subscribe(&self, task_id: &str) -> Option<broadcast::Receiver<(u64, Event)>> {
        let runs = self
            .runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        runs.get(task_id).map(broadcast::Sender::subscribe)
    }

    /// Marks a run live (before its first event is appended).
    pub(crate) fn open(&self, task_id: &str) {
        self.sender(task_id);
    }

    /// Publishes an event already in the log.
    pub(crate) fn publish(&self, task_id: &str, seq: u64, event: Event) {
        // No subscriber is not an error: the log has it.
        let _ = self.sender(task_id).send((seq, event));
    }

    /// Shutdown: every subscriber's channel closes (they read the log one
    /// last time and end).
    pub(crate) fn close_all(&self) {
        let mut runs = self
            .runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        runs.clear();
    }

    /// The run ended: subscribers see the channel close after its last event.
    pub(crate) fn close(&self, task_id: &str) {
        let mut runs = self
            .runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        runs.remove(task_id);
    }
}
