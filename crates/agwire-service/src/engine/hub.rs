//! Live fan-out of appended events to the run's followers, in process.
//!
//! The log is the truth; the hub only wakes followers early. A follower
//! subscribes first, then reads the log, then takes live events it has not
//! seen, so nothing falls in between; one that lags behind the hub's buffer
//! reads the log again.
//!
//! A run's channel exists while somebody needs it: the process executing the
//! run (a [`Producer`]) or a follower (a [`Subscription`]) — a follower may
//! subscribe to a run that is still queued, or that executes elsewhere. The
//! last one to leave removes it, so the map holds nothing for runs nobody
//! watches: memory does not grow with the runs served.
//!
//! The channel itself (its [`LIVE_BUFFER`] slots) is made by the first
//! follower, not by the execution: most runs are never followed while they
//! execute (a `202` and a later history read), and an executing run should
//! cost what it holds, not a buffer for readers it does not have. An event
//! published before anybody subscribed is in the log already, which a
//! follower reads after subscribing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use agwire_core::Event;
use tokio::sync::broadcast;

/// One live event: its sequence number in the log, and the event (shared by
/// every follower, never copied per follower).
pub(crate) type Live = (u64, Arc<Event>);

/// How many live events a follower may fall behind before it re-reads the
/// log. Small on purpose: the slots are allocated when the channel is made,
/// and a follower that lags only costs a log read.
const LIVE_BUFFER: usize = 64;

/// A run's channel, made when its first follower subscribes.
type Channel = Arc<OnceLock<broadcast::Sender<Live>>>;

#[derive(Debug, Default)]
struct Entry {
    channel: Channel,
    /// Executions of the run holding the entry (0 or 1 in practice).
    producers: usize,
}

impl Entry {
    fn followers(&self) -> usize {
        self.channel
            .get()
            .map_or(0, broadcast::Sender::receiver_count)
    }
}

/// Live events per run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hub {
    runs: Arc<Mutex<HashMap<String, Entry>>>,
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Follows a run (queued, running here or anywhere else): the
    /// subscription sees every event published after this call.
    pub(crate) fn subscribe(&self, task_id: &str) -> Subscription {
        let rx = self
            .lock()
            .entry(task_id.to_owned())
            .or_default()
            .channel
            .get_or_init(|| broadcast::channel(LIVE_BUFFER).0)
            .subscribe();
        Subscription {
            rx: Some(rx),
            hub: self.clone(),
            task_id: task_id.to_owned(),
        }
    }

    /// The run starts executing on this process: events it publishes reach
    /// the followers until the producer is dropped.
    pub(crate) fn produce(&self, task_id: &str) -> Producer {
        let channel = {
            let mut runs = self.lock();
            let entry = runs.entry(task_id.to_owned()).or_default();
            entry.producers += 1;
            entry.channel.clone()
        };
        Producer {
            channel,
            hub: self.clone(),
            task_id: task_id.to_owned(),
        }
    }

    /// Publishes events of a run not executing here (a cancel that wrote
    /// a queued run's whole log).
    pub(crate) fn publish(&self, task_id: &str, seq: u64, event: Event) {
        let tx = self
            .lock()
            .get(task_id)
            .and_then(|e| e.channel.get().cloned());
        if let Some(tx) = tx {
            // No follower is not an error: the log has it.
            let _ = tx.send((seq, Arc::new(event)));
        }
    }

    /// Whether someone here follows a run that does not execute here (its
    /// events reach this process only through the store's changes).
    pub(crate) fn followed_from_elsewhere(&self, task_id: &str) -> bool {
        self.lock()
            .get(task_id)
            .is_some_and(|e| e.producers == 0 && e.followers() > 0)
    }

    /// Shutdown: every follower's channel closes (they read the log one last
    /// time and end).
    pub(crate) fn close_all(&self) {
        self.lock().clear();
    }

    /// Runs with a live channel now (followed or executing).
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Removes the run's channel when nobody holds it any more.
    fn release(&self, task_id: &str) {
        let mut runs = self.lock();
        if let Some(entry) = runs.get(task_id)
            && entry.producers == 0
            && entry.followers() == 0
        {
            runs.remove(task_id);
        }
    }
}

/// The executing side of a run's channel.
#[derive(Debug)]
pub(crate) struct Producer {
    channel: Channel,
    hub: Hub,
    task_id: String,
}

impl Producer {
    /// Publishes an event already in the log.
    pub(crate) fn publish(&self, seq: u64, event: Event) {
        // Nobody subscribed yet: nothing to wake (the log has it).
        if let Some(tx) = self.channel.get() {
            let _ = tx.send((seq, Arc::new(event)));
        }
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        let mut runs = self.hub.lock();
        let remove = match runs.get_mut(&self.task_id) {
            Some(entry) => {
                entry.producers = entry.producers.saturating_sub(1);
                entry.producers == 0
            }
            None => false,
        };
        // The run ended here: its followers see the channel close after its
        // last event (and read the log once more, which holds the end).
        if remove {
            runs.remove(&self.task_id);
        }
    }
}

/// A follower's side of a run's channel.
#[derive(Debug)]
pub(crate) struct Subscription {
    rx: Option<broadcast::Receiver<Live>>,
    hub: Hub,
    task_id: String,
}

impl Subscription {
    /// The next live event; `Lagged` means "read the log again"; `Closed`
    /// means the run stopped executing here (or the service is stopping).
    pub(crate) async fn recv(&mut self) -> Result<Live, broadcast::error::RecvError> {
        match &mut self.rx {
            Some(rx) => rx.recv().await,
            None => Err(broadcast::error::RecvError::Closed),
        }
    }

    /// A live event already received, if any (no wait).
    pub(crate) fn try_recv(&mut self) -> Option<Live> {
        self.rx.as_mut().and_then(|rx| rx.try_recv().ok())
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        drop(self.rx.take());
        self.hub.release(&self.task_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Event {
        crate::store::run_started("t", "r")
    }

    #[tokio::test]
    async fn a_channel_lives_while_someone_holds_it() {
        let hub = Hub::default();
        let mut early = hub.subscribe("run");
        assert_eq!(hub.len(), 1, "a follower of a queued run keeps a channel");
        let producer = hub.produce("run");
        producer.publish(1, event());
        assert_eq!(early.recv().await.map(|(seq, _)| seq), Ok(1));
        drop(producer);
        assert_eq!(hub.len(), 0, "the run ended: its channel is gone");
        assert!(early.recv().await.is_err(), "followers see it close");
        drop(early);
        let late = hub.subscribe("other");
        drop(late);
        assert_eq!(hub.len(), 0, "the last follower removes the channel");
    }

    #[tokio::test]
    async fn an_execution_makes_no_channel_until_somebody_follows() {
        let hub = Hub::default();
        let producer = hub.produce("run");
        assert!(
            hub.lock()["run"].channel.get().is_none(),
            "no follower: no buffer"
        );
        producer.publish(1, event());
        let mut follower = hub.subscribe("run");
        producer.publish(2, event());
        assert_eq!(
            follower.recv().await.map(|(seq, _)| seq),
            Ok(2),
            "a follower gets what is published after it subscribed"
        );
        drop(producer);
        assert!(follower.recv().await.is_err(), "and sees the run end here");
    }
}
