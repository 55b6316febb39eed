//! A claimed run's setup: what the service knows about it that its agent
//! needs besides its input, read from the store when it starts.

use std::sync::Arc;

use serde_json::Value;

use super::RunSetup;
use super::agents::{JobRuntime, RuntimeConfig};
use crate::error::Error;
use crate::run::RuntimeMode;
use crate::store::{Claimed, Store};

impl RunSetup {
    /// What `run`'s agent needs besides its input: the user's settings
    /// (time zone, locale), the thread so far (with the user's images
    /// inline), and the agents it may use (chat: the catalogue; automation:
    /// its job's).
    pub(crate) async fn prepare(
        store: &Arc<dyn Store>,
        catalogue: &Arc<RuntimeConfig>,
        run: &Claimed,
    ) -> Result<Self, Error> {
        let (user, input, mode) = (run.user_id.as_str(), &run.input, run.mode);
        let settings = store.settings(user).await?;
        let clock = crate::clock::RunClock::resolve(
            run.client_time.as_ref(),
            settings.get("timezone").and_then(Value::as_str),
            jiff::Timestamp::now(),
        );
        let locale = settings
            .get("locale")
            .and_then(Value::as_str)
            .unwrap_or("en")
            .to_owned();
        let history = store
            .thread_messages(
                &input.thread_id,
                &["user", "assistant", "tool", "system", "developer"],
            )
            .await?
            .into_iter()
            .map(|stored| stored.message)
            .collect();
        let history = crate::attachments::inline_images(&**store, user, history).await;
        let runtime = match mode {
            Some(RuntimeMode::Automation) => {
                match store.job_of_thread(user, &input.thread_id).await? {
                    Some(job) => {
                        let job_runtime: JobRuntime = serde_json::from_str(&job.config)?;
                        catalogue.for_job(&job_runtime)?
                    }
                    // An automation run without a job (posted by hand): the
                    // default agent alone.
                    None => catalogue.for_job(&JobRuntime::default())?,
                }
            }
            _ => (**catalogue).clone(),
        };
        Ok(Self {
            user: user.to_owned(),
            mode,
            clock,
            locale,
            history,
            runtime,
            store: store.clone(),
        })
    }
}
