//! Profiles: each user's settings.

use async_trait::async_trait;

use crate::error::Error;

/// Profiles.
#[async_trait]
pub trait ProfileStore: Send + Sync {
    /// A user's profile settings (`{}` for a user who never set any).
    async fn settings(
        &self,
        user: &str,
    ) -> Result<serde_json::Map<String, serde_json::Value>, Error>;

    /// Replaces a user's profile settings.
    async fn set_settings(
        &self,
        user: &str,
        settings: &serde_json::Map<String, serde_json::Value>,
        now_ms: i64,
    ) -> Result<(), Error>;
}
