//! The model runs are answered by: the local model, the configured
//! OpenAI-compatible provider, or the scripted model.

use std::sync::Arc;
use std::time::Duration;

use agwire_llm::{ChatModel, OpenAiCompatible, OpenAiConfig};

use crate::brain::Brain;
use crate::brain::llm::LlmBrain;
use crate::config::Config;
use crate::error::Error;

/// The LLM pipeline on the local model (`llm.local_model`), on the
/// configured provider (`llm.base_url`), or on the scripted model.
pub(super) async fn brain(config: &Config) -> Result<Arc<dyn Brain>, Error> {
    if let Some(spec) = &config.llm.local_model {
        let model: Arc<dyn ChatModel> = local::model(config, spec).await?;
        return Ok(Arc::new(LlmBrain::new(model.clone(), model)));
    }
    let Some(base_url) = &config.llm.base_url else {
        tracing::warn!("{}", crate::brain::llm::SCRIPTED_NOTE);
        let delay = Duration::from_millis(config.builtin.token_delay_ms);
        let model: Arc<dyn ChatModel> = Arc::new(crate::brain::demo::model(delay));
        return Ok(Arc::new(LlmBrain::new(model.clone(), model)));
    };
    let provider = |model: &str| -> Result<Arc<dyn ChatModel>, Error> {
        let mut llm = OpenAiConfig::new(base_url.clone(), model);
        llm.api_key.clone_from(&config.llm.api_key);
        llm.max_retries = config.llm.max_retries;
        Ok(Arc::new(OpenAiCompatible::new(llm)?))
    };
    let worker = provider(&config.llm.model)?;
    let router = match &config.llm.router_model {
        Some(model) => provider(model)?,
        None => worker.clone(),
    };
    tracing::info!(base_url, model = config.llm.model, "LLM provider");
    Ok(Arc::new(LlmBrain::new(router, worker)))
}

#[cfg(feature = "local-model")]
mod local {
    use std::path::PathBuf;
    use std::sync::Arc;

    use agwire_llm::ChatModel;
    use agwire_llm::local::fetch::{self, HubFile};
    use agwire_llm::local::{LocalConfig, LocalModel};

    use crate::config::Config;
    use crate::error::Error;

    /// The local model: the file, or the hub's file fetched into the data
    /// dir's model cache first; loaded off the async threads.
    pub(super) async fn model(config: &Config, spec: &str) -> Result<Arc<dyn ChatModel>, Error> {
        let path = match HubFile::parse(spec) {
            None => PathBuf::from(spec),
            Some(file) => {
                let file = file?;
                let cache = config.data_dir.join("models");
                let endpoint = config
                    .llm
                    .hub_endpoint
                    .as_deref()
                    .unwrap_or(fetch::DEFAULT_ENDPOINT);
                let token = std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty());
                let name = file.file.clone();
                fetch::fetch(&file, &cache, endpoint, token.as_deref(), |p| {
                    let percent = p.done * 100 / p.total.max(1);
                    tracing::info!(
                        file = name,
                        "downloading the model: {percent}% ({} of {} MB)",
                        p.done >> 20,
                        p.total >> 20
                    );
                })
                .await?
            }
        };
        let mut local = LocalConfig::new(path);
        local.parallel = config.llm.local_parallel;
        // One engine runs every call: it takes every core unless told.
        if let Some(threads) = config.llm.local_threads {
            local.threads = threads;
        }
        local.context = config.llm.local_context;
        local.queue = config.llm.local_queue;
        let model = tokio::task::spawn_blocking(move || LocalModel::load(local))
            .await
            .map_err(|e| Error::Internal(format!("loading the local model: {e}")))??;
        Ok(Arc::new(model))
    }
}

#[cfg(not(feature = "local-model"))]
mod local {
    use std::sync::Arc;

    use agwire_llm::ChatModel;

    use crate::config::Config;
    use crate::error::Error;

    /// Without the `local-model` feature there is no local model to load.
    pub(super) async fn model(_config: &Config, spec: &str) -> Result<Arc<dyn ChatModel>, Error> {
        Err(Error::Config(format!(
            "llm.local_model {spec}: this build has no local model (agwire-service's `local-model` feature)"
        )))
    }
}
