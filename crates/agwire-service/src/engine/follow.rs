//! Following a run: its log from a given event on, then its live events,
//! until its terminal event — for whoever streams it.

use std::sync::Arc;
use std::time::Duration;

use agwire_core::Event;
use tokio::sync::broadcast;

use super::Engine;
use super::hub::Subscription;
use crate::store::Store;

/// How long a follower of a run in a shared database waits on live events
/// before it checks the log itself (a safety net: a change from another
/// replica can be lost with its connection). In an embedded database every
/// event passes through this process's hub, and followers only wait.
pub(super) const FOLLOW_RECHECK: Duration = Duration::from_secs(15);

impl Engine {
    /// The run's events numbered above `after`, then its live ones, until
    /// its terminal event (or the drain).
    ///
    /// Subscribe first, then backfill from the log, then live events not
    /// yet sent; a lagging follower re-reads the log. A run that is still
    /// queued (or executes elsewhere) is waited for. The stream is polled by
    /// whoever reads it (a response body, on its connection's task): an idle
    /// follower costs no task and no channel of its own, and one that leaves
    /// simply drops it.
    pub fn follow(
        &self,
        task_id: String,
        after: u64,
    ) -> impl futures_core::Stream<Item = (u64, Arc<Event>)> + Send + 'static {
        self.follow_with(task_id, after, None)
    }

    /// The events of a run this process started with its accept, from its
    /// first, for the caller that accepted it: `from_start` was subscribed
    /// before the execution was spawned, so every event comes live and the
    /// log is read only after a gap (a lag, an end that wrote `RUN_STARTED`
    /// itself) — no read of the log or the status to begin with.
    pub(crate) fn follow_from_start(
        &self,
        task_id: String,
        from_start: FromStart,
    ) -> impl futures_core::Stream<Item = (u64, Arc<Event>)> + Send + 'static {
        self.follow_with(task_id, 0, Some(from_start.0))
    }

    fn follow_with(
        &self,
        task_id: String,
        after: u64,
        from_start: Option<Subscription>,
    ) -> impl futures_core::Stream<Item = (u64, Arc<Event>)> + Send + 'static {
        let store = self.store.clone();
        let hub = self.hub.clone();
        let recheck = self.recheck;
        let stop = self.stop.clone();
        async_stream::stream! {
            // Subscribed before anything of the run was published: the first
            // read of the log (and of its status) would find nothing.
            let mut skip_read = from_start.is_some();
            let mut live = match from_start {
                Some(subscription) => subscription,
                None => hub.subscribe(&task_id),
            };
            let mut last = after;
            loop {
                if !std::mem::take(&mut skip_read) {
                    let Some(events) = read_log(&*store, &task_id, last).await else {
                        return;
                    };
                    for (seq, event) in events {
                        last = seq;
                        let terminal = is_terminal(&event);
                        yield (seq, Arc::new(event));
                        if terminal {
                            return;
                        }
                    }
                    // The log does not end the run (yet): is it still to come?
                    let active = match store.run_status(&task_id).await {
                        Ok(Some(status)) => status.is_active(),
                        Ok(None) => false,
                        Err(error) => {
                            tracing::error!(%error, "could not read a run's status");
                            return;
                        }
                    };
                    if !active || stop.is_cancelled() {
                        // What was published since this follower subscribed
                        // is here even when the log is gone by now (its thread
                        // deleted right after the end).
                        while let Some((seq, event)) = live.try_recv() {
                            if !is_next(last, seq) {
                                continue;
                            }
                            last = seq;
                            let terminal = is_terminal(&event);
                            yield (seq, event);
                            if terminal {
                                return;
                            }
                        }
                        // Its end was written with its status: one last read
                        // has it.
                        for (seq, event) in read_log(&*store, &task_id, last).await.unwrap_or_default() {
                            let terminal = is_terminal(&event);
                            yield (seq, Arc::new(event));
                            if terminal {
                                return;
                            }
                        }
                        return;
                    }
                }
                loop {
                    let received = match recheck {
                        None => live.recv().await,
                        Some(period) => match tokio::time::timeout(period, live.recv()).await {
                            Ok(received) => received,
                            // Quiet for a while: the log says whether it
                            // moved on.
                            Err(_) => break,
                        },
                    };
                    match received {
                        // Only the next event goes out as it comes; after a
                        // gap (an end that wrote `RUN_STARTED` too, a relay
                        // that missed a change) the log fills it in.
                        Ok((seq, _)) if is_past_next(last, seq) => break,
                        Ok((seq, event)) if is_next(last, seq) => {
                            last = seq;
                            let terminal = is_terminal(&event);
                            yield (seq, event);
                            if terminal {
                                return;
                            }
                        }
                        Ok(_) => {}
                        Err(broadcast::error::RecvError::Lagged(_)) => break,
                        Err(broadcast::error::RecvError::Closed) => {
                            // The run stopped executing here, or the service
                            // stops: the log tells which.
                            live = hub.subscribe(&task_id);
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// A follower's subscription to a run made before the run's execution was
/// spawned (see [`Engine::follow_from_start`]).
#[derive(Debug)]
pub(crate) struct FromStart(pub(super) Subscription);

/// The run's log after `last`; `None` (logged) when it cannot be read.
async fn read_log(store: &dyn Store, task_id: &str, last: u64) -> Option<Vec<(u64, Event)>> {
    match store.events_after(task_id, last).await {
        Ok(events) => Some(events),
        Err(error) => {
            tracing::error!(%error, "could not read a run's log");
            None
        }
    }
}

/// Whether `seq` is the event right after `last`. `last` starts as the
/// number a reader resumes after, any `u64` (`u64::MAX` included): after
/// that one no event can come.
fn is_next(last: u64, seq: u64) -> bool {
    last.checked_add(1) == Some(seq)
}

/// Whether `seq` leaves a gap after `last` (see [`is_next`]).
fn is_past_next(last: u64, seq: u64) -> bool {
    last.checked_add(1).is_some_and(|next| seq > next)
}

pub(super) fn is_terminal(event: &Event) -> bool {
    matches!(event, Event::RunFinished(_) | Event::RunError(_))
}
