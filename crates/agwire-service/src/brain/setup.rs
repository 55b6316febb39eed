//! A claimed run's setup: what the service knows about it that its agent
//! needs besides its input, read from the store when it starts.

use std::sync::Arc;

use serde_json::Value;

use super::RunSetup;
use super::agents::{JobRuntime, RuntimeConfig};
use crate::error::Error;
use crate::run::RuntimeMode;
use crate::store::{Briefing, Claimed, Store};

impl RunSetup {
    /// What `run`'s agent needs besides its input: the user's settings
    /// (time zone, locale), the thread's latest messages (with the user's
    /// images inline), and the agents it may use (chat: the catalogue,
    /// shared; automation: its job's).
    pub(crate) async fn prepare(
        store: &Arc<dyn Store>,
        catalogue: &Arc<RuntimeConfig>,
        run: &Claimed,
    ) -> Result<Self, Error> {
        let (user, input, mode) = (run.user_id.as_str(), &run.input, run.mode);
        // Read with the claim where the backend could; else now.
        let briefing = match &run.briefing {
            Some(briefing) => std::borrow::Cow::Borrowed(briefing),
            None => std::borrow::Cow::Owned(
                Briefing::read(
                    &**store,
                    user,
                    &input.thread_id,
                    mode == Some(RuntimeMode::Automation),
                )
                .await?,
            ),
        };
        let settings: serde_json::Map<String, Value> = match &briefing.settings {
            Some(text) => serde_json::from_str(text)?,
            None => serde_json::Map::new(),
        };
        let clock = crate::clock::RunClock::resolve(
            run.options.client_time.as_ref(),
            settings.get("timezone").and_then(Value::as_str),
            jiff::Timestamp::now(),
        );
        let locale = settings
            .get("locale")
            .and_then(Value::as_str)
            .unwrap_or("en")
            .to_owned();
        // Sized to the history exactly: it is held while the run starts.
        let mut history = Vec::with_capacity(briefing.history.len());
        for body in &briefing.history {
            history.push(serde_json::from_str(body)?);
        }
        let history = crate::attachments::inline_images(&**store, user, history).await?;
        let runtime = match mode {
            Some(RuntimeMode::Automation) => {
                let job_runtime: JobRuntime = match &briefing.job_config {
                    Some(config) => serde_json::from_str(config)?,
                    // An automation run without a job (posted by hand): the
                    // default agent alone.
                    None => JobRuntime::default(),
                };
                Arc::new(catalogue.for_job(&job_runtime)?)
            }
            _ => catalogue.clone(),
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
