//! Delivery: each process claims due messages from the outbox (leased, so
//! two processes never send one at once and a dead one's lease runs out),
//! posts them signed, and records the outcome — delivered on a 2xx, else
//! retried on the configured schedule (by default the Standard Webhooks
//! one: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h — about a day) and then
//! given up.

use std::sync::Arc;
use std::time::Duration;

use agwire_store::WebhookMessage;
use tokio_util::sync::CancellationToken;

use super::{Webhooks, address};
use crate::engine::now_ms;
use crate::metrics::Metrics;
use crate::store::Store;

/// How often the outbox is looked at.
const POLL: Duration = Duration::from_millis(500);
/// Messages taken per look (and sent at once); after a full batch the next
/// look is at once.
const BATCH: u32 = 16;
/// How long delivered (or given up) messages stay in the outbox: a day to
/// look into, then they go.
const KEPT: Duration = Duration::from_secs(24 * 3600);
/// How often the outbox is pruned, and most messages deleted at once.
const PRUNE_EVERY: Duration = Duration::from_secs(60);
const PRUNE_BATCH: u32 = 1000;

/// Delivers the outbox's messages until stopped.
#[derive(Clone)]
pub struct Deliverer {
    webhooks: Webhooks,
    client: reqwest::Client,
    store: Arc<dyn Store>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Deliverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliverer")
            .field("webhooks", &self.webhooks)
            .finish_non_exhaustive()
    }
}

impl Deliverer {
    pub(crate) fn new(
        webhooks: Webhooks,
        store: Arc<dyn Store>,
        metrics: Arc<Metrics>,
    ) -> Result<Self, crate::error::Error> {
        let mut client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(webhooks.timeout.min(Duration::from_secs(5)))
            .timeout(webhooks.timeout)
            .user_agent(concat!("agwire/", env!("CARGO_PKG_VERSION")));
        if !webhooks.allow_private {
            client = client.dns_resolver(Arc::new(address::PublicOnly));
        }
        let client = client
            .build()
            .map_err(|e| crate::error::Error::Config(format!("webhook client: {e}")))?;
        Ok(Self {
            webhooks,
            client,
            store,
            metrics,
        })
    }

    /// Looks at the outbox every [`POLL`], and prunes it every
    /// [`PRUNE_EVERY`], until `stop`.
    pub(crate) async fn run(self, stop: CancellationToken) {
        let mut poll = tokio::time::interval(POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut prune = tokio::time::interval(PRUNE_EVERY);
        prune.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Longer than an attempt can take (its timeout), with room for
        // recording its outcome: a claim never runs out under a live
        // delivery, so two processes never send one message at once.
        let lease = self.webhooks.timeout * 2 + Duration::from_secs(5);
        let lease = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
        // A full batch says more may be due: the next is taken at once, so
        // delivery keeps pace with run ends instead of BATCH per POLL.
        let mut full = false;
        loop {
            if !full {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = prune.tick() => {
                        self.prune().await;
                        continue;
                    }
                    _ = poll.tick() => {}
                }
            } else if stop.is_cancelled() {
                return;
            } else if futures_util::FutureExt::now_or_never(prune.tick()).is_some() {
                self.prune().await;
            }
            let due = match self.store.claim_webhooks(now_ms(), lease, BATCH).await {
                Ok(due) => due,
                Err(error) => {
                    tracing::error!(%error, "could not read the webhook outbox");
                    full = false;
                    continue;
                }
            };
            full = due.len() == BATCH as usize;
            let sends = due.into_iter().map(|message| self.deliver(message));
            futures_util::future::join_all(sends).await;
        }
    }

    /// Deletes the messages done with for longer than [`KEPT`].
    async fn prune(&self) {
        let before = now_ms().saturating_sub(i64::try_from(KEPT.as_millis()).unwrap_or(i64::MAX));
        match self.store.prune_webhooks(before, PRUNE_BATCH).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(n, "pruned delivered webhook messages"),
            Err(error) => tracing::warn!(%error, "could not prune the webhook outbox"),
        }
    }

    /// One attempt at `message`, its outcome recorded.
    async fn deliver(&self, message: WebhookMessage) {
        let failure = self.send(&message).await.err();
        let now = now_ms();
        let recorded = match &failure {
            None => {
                self.metrics.webhook_delivered();
                self.store.webhook_delivered(&message.id, now).await
            }
            Some(why) => {
                let retry = self
                    .webhooks
                    .retry_after
                    .get(
                        usize::try_from(message.attempts)
                            .unwrap_or(usize::MAX)
                            .saturating_sub(1),
                    )
                    .map(|wait| {
                        now.saturating_add(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX))
                    });
                match retry {
                    Some(_) => self.metrics.webhook_failed(),
                    None => self.metrics.webhook_given_up(),
                }
                tracing::warn!(
                    id = message.id,
                    attempts = message.attempts,
                    error = why,
                    given_up = retry.is_none(),
                    "webhook delivery failed"
                );
                self.store
                    .webhook_failed(&message.id, why, retry, now)
                    .await
            }
        };
        if let Err(error) = recorded {
            // The lease runs out and the message goes again: at least once.
            tracing::error!(%error, id = message.id, "could not record a webhook delivery");
        }
    }

    /// Posts `message` signed; `Err` says why it did not count as delivered.
    async fn send(&self, message: &WebhookMessage) -> Result<(), String> {
        if !self.webhooks.allow_private
            && let Some(ip) = address::literal(&self.webhooks.url)
            && !address::public(ip)
        {
            return Err(format!("{ip} is not a public address"));
        }
        let timestamp = now_ms() / 1000;
        let signature = self
            .webhooks
            .signer
            .sign(&message.id, timestamp, &message.payload);
        let response = self
            .client
            .post(self.webhooks.url.clone())
            .header("content-type", "application/json")
            .header("webhook-id", &message.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(message.payload.clone())
            .send()
            .await
            .map_err(|e| {
                let mut why = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(inner) = source {
                    why = format!("{why}: {inner}");
                    source = inner.source();
                }
                why
            })?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("HTTP {}", status.as_u16()))
        }
    }
}
