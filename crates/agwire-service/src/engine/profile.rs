//! A user's settings (`timezone`, `locale`, and whatever else the front end
//! keeps), as the profile API reads and changes them.

use serde_json::{Map, Value};

use super::{Engine, now_ms};
use crate::error::Error;

impl Engine {
    /// `user`'s settings (empty when they have none).
    pub(crate) async fn settings(&self, user: &str) -> Result<Map<String, Value>, Error> {
        Ok(self.store.settings(user).await?)
    }

    /// Applies `changes` to `user`'s settings — a `null` clears a setting,
    /// any other value replaces it — and returns the settings now stored.
    pub(crate) async fn change_settings(
        &self,
        user: &str,
        changes: &Map<String, Value>,
    ) -> Result<Map<String, Value>, Error> {
        let mut settings = self.store.settings(user).await?;
        for (key, value) in changes {
            if value.is_null() {
                settings.remove(key);
            } else {
                settings.insert(key.clone(), value.clone());
            }
        }
        self.store.set_settings(user, &settings, now_ms()).await?;
        Ok(settings)
    }

    /// `user`'s time zone setting, UTC when they have none or it is not a
    /// zone.
    pub(crate) async fn time_zone(&self, user: &str) -> Result<jiff::tz::TimeZone, Error> {
        Ok(self
            .store
            .settings(user)
            .await?
            .get("timezone")
            .and_then(Value::as_str)
            .and_then(|name| jiff::tz::TimeZone::get(name).ok())
            .unwrap_or(jiff::tz::TimeZone::UTC))
    }
}

/// A user's counts beside the quotas they are held to, at one moment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UsageNow {
    /// The counts.
    pub(crate) usage: agwire_store::Usage,
    /// The limits (`None`: none).
    pub(crate) quotas: agwire_store::Quotas,
    /// When they were read (ms since the epoch).
    pub(crate) at_ms: i64,
}

impl Engine {
    /// `user`'s counts now, with the service's quotas.
    pub(crate) async fn usage(&self, user: &str) -> Result<UsageNow, Error> {
        let at_ms = now_ms();
        Ok(UsageNow {
            usage: self.store.usage(user, at_ms).await?,
            quotas: self.quotas,
            at_ms,
        })
    }
}
