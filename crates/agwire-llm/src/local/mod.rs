//! A GGUF model run in-process on the CPU by llama.cpp, through the
//! `llama-cpp-2` crate (llama.cpp built from its vendored source).
//!
//! The model is loaded once. One engine thread (`local/engine.rs`) runs
//! every call as a sequence of one context and advances them together, one
//! forward pass per step (continuous batching); calls join in arrival order
//! from a bounded queue, and a call whose caller drops the stream (a
//! cancelled run) leaves at the next step.
//!
//! Router answers and tool calls are decoded under grammars made from
//! their JSON Schemas (`local/grammar.rs`), so even a small model's answer always
//! parses and validates; free text is sampled freely.

mod answer;
mod engine;
pub mod fetch;
mod grammar;
mod sampling;

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::task::{Context, Poll};

use futures_core::Stream;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::token::LlamaToken;
use tokio::sync::mpsc as tokio_mpsc;

use crate::chat::{BoxFuture, ChatEvent, ChatModel, ChatRequest, ChatStream};
use crate::error::Error;
use answer::Calls;
use grammar::Grammar;

/// How a local model runs.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// The GGUF file.
    pub path: PathBuf,
    /// Calls that generate at once, as sequences of one batch (a short
    /// call — the router's — may run beside them); the others wait in order.
    pub parallel: usize,
    /// CPU threads of the engine (it runs every call).
    pub threads: usize,
    /// Tokens of context per call (prompt and answer), at most the
    /// model's trained context. The KV cache holds `parallel + 1` of them
    /// (one for short calls).
    pub context: u32,
    /// Answer length when the request sets none.
    pub max_tokens: u32,
    /// Calls that may wait for a sequence; one more is refused at once
    /// with [`Error::Busy`].
    pub queue: usize,
}

impl LocalConfig {
    /// `path` with defaults: four calls at once on every core, 4,096
    /// tokens of context each, 64 waiting.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            path: path.into(),
            parallel: 4,
            threads: cores,
            context: 4096,
            max_tokens: 1024,
            queue: 64,
        }
    }
}

/// llama.cpp's process-wide state: initialised once, never freed.
fn backend() -> Result<&'static LlamaBackend, Error> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // llama.cpp's own log lines go to tracing (debug), not stderr.
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::Local(format!("llama.cpp: {e}")))
}

/// What the model has done since it loaded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocalStats {
    /// Calls that generated (or were cancelled while generating).
    pub calls: u64,
    /// Prompt tokens of those calls.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// Calls whose caller left before the answer ended.
    pub cancelled: u64,
    /// Prompt tokens not computed again: a call's prefix already held by a
    /// sequence (its own last call's, or another's).
    pub cached_tokens: u64,
    /// The most calls one forward pass advanced.
    pub most_at_once: u64,
    /// Calls refused because the queue was full.
    pub refused: u64,
}

/// One sequence of the engine's context, as llama.cpp counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SequenceState {
    /// A call runs on it.
    pub busy: bool,
    /// KV cells it holds (a finished call's stay as a prefix cache; a
    /// cancelled call's are freed).
    pub cells: u32,
}

#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    cancelled: AtomicU64,
    cached_tokens: AtomicU64,
    most_at_once: AtomicU64,
    refused: AtomicU64,
}

/// What the callers and the engine thread share.
#[derive(Debug)]
struct Shared {
    counters: Counters,
    /// Calls sent and not yet started.
    queued: AtomicUsize,
    /// The sequences after the last step that changed them.
    sequences: tokio::sync::watch::Sender<Vec<SequenceState>>,
    /// The model is being dropped: the engine ends every call now.
    unloading: std::sync::atomic::AtomicBool,
}

/// One call, waiting or running.
struct Job {
    prompt: Vec<LlamaToken>,
    calls: Calls,
    grammar: Option<Grammar>,
    max_tokens: u32,
    /// `None`: greedy.
    temperature: Option<f32>,
    seed: u32,
    events: tokio_mpsc::Sender<Result<ChatEvent, Error>>,
}

/// A GGUF model running in this process.
pub struct LocalModel {
    name: String,
    model: Arc<LlamaModel>,
    template: LlamaChatTemplate,
    config: LocalConfig,
    /// Calls in arrival order, to the engine.
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    /// The engine thread, woken when there is something for it.
    engine: std::thread::Thread,
    /// Joined on drop: llama.cpp's globals are torn down at process exit,
    /// and a forward pass still running then crashes the process.
    running: Option<std::thread::JoinHandle<()>>,
    seeds: AtomicU32,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl LocalModel {
    /// Loads the model and starts its engine (blocking: call it from a
    /// blocking context or before the runtime is busy).
    pub fn load(config: LocalConfig) -> Result<Self, Error> {
        let backend = backend()?;
        if !config.path.is_file() {
            return Err(Error::Local(format!(
                "no model file at {}",
                config.path.display()
            )));
        }
        let model = LlamaModel::load_from_file(backend, &config.path, &LlamaModelParams::default())
            .map_err(|e| Error::Local(format!("{}: {e}", config.path.display())))?;
        let template = match model.chat_template(None) {
            Ok(template) => template,
            Err(e) => {
                tracing::warn!(error = %e, "the model has no chat template; using ChatML");
                LlamaChatTemplate::new("chatml").map_err(|e| Error::Local(e.to_string()))?
            }
        };
        let model = Arc::new(model);
        let mut config = config;
        config.parallel = config.parallel.clamp(1, 63);
        config.threads = config.threads.max(1);
        config.context = config.context.clamp(256, model.n_ctx_train().max(256));
        let (jobs, queue) = mpsc::channel::<Job>();
        let shared = Arc::new(Shared {
            counters: Counters::default(),
            queued: AtomicUsize::new(0),
            sequences: tokio::sync::watch::Sender::new(Vec::new()),
            unloading: std::sync::atomic::AtomicBool::new(false),
        });
        let (ready, made) = mpsc::channel::<Result<(), Error>>();
        let engine = {
            let model = model.clone();
            let config = config.clone();
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("agwire-llm".into())
                .spawn(move || match engine::Engine::new(&model, &config, shared) {
                    Ok(engine) => {
                        let _ = ready.send(Ok(()));
                        engine.run(&queue);
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                    }
                })
                .map_err(|e| Error::Local(format!("cannot start the model thread: {e}")))?
        };
        made.recv()
            .map_err(|_| Error::Local("the model thread died while starting".into()))??;
        let name = format!(
            "local:{}",
            config
                .path
                .file_stem()
                .map_or_else(|| "model".into(), |s| s.to_string_lossy())
        );
        tracing::info!(model = %config.path.display(), parallel = config.parallel, threads = config.threads, context = config.context, queue = config.queue, "local model loaded");
        Ok(Self {
            name,
            model,
            template,
            config,
            jobs: Mutex::new(Some(jobs)),
            engine: engine.thread().clone(),
            running: Some(engine),
            seeds: AtomicU32::new(0x5eed),
            shared,
        })
    }

    /// What it has done so far.
    pub fn stats(&self) -> LocalStats {
        let c = &self.shared.counters;
        LocalStats {
            calls: c.calls.load(Ordering::Relaxed),
            prompt_tokens: c.prompt_tokens.load(Ordering::Relaxed),
            completion_tokens: c.completion_tokens.load(Ordering::Relaxed),
            cancelled: c.cancelled.load(Ordering::Relaxed),
            cached_tokens: c.cached_tokens.load(Ordering::Relaxed),
            most_at_once: c.most_at_once.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
        }
    }

    /// The engine's sequences after its last step: `parallel` and one
    /// kept for short calls.
    pub fn sequences(&self) -> Vec<SequenceState> {
        self.shared.sequences.borrow().clone()
    }

    /// The sequences as they change, step by step (to wait for a state
    /// without polling).
    pub fn watch_sequences(&self) -> tokio::sync::watch::Receiver<Vec<SequenceState>> {
        self.shared.sequences.subscribe()
    }

    /// The settings it runs with (after clamping to the model).
    pub fn config(&self) -> &LocalConfig {
        &self.config
    }

    /// The file it runs.
    pub fn path(&self) -> &Path {
        &self.config.path
    }

    /// The prompt the chat template makes of `request`.
    fn prompt(&self, request: &ChatRequest, calls: Calls) -> Result<String, Error> {
        let messages = answer::messages(request, calls)
            .into_iter()
            .map(|(role, content)| LlamaChatMessage::new(role, content))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Error::Local(format!("a message cannot be given to the model: {e}")))?;
        match self
            .model
            .apply_chat_template(&self.template, &messages, true)
        {
            Ok(prompt) => Ok(prompt),
            // A template llama.cpp does not know: ChatML, which most
            // instruction-tuned GGUFs understand.
            Err(_) => {
                let chatml =
                    LlamaChatTemplate::new("chatml").map_err(|e| Error::Local(e.to_string()))?;
                self.model
                    .apply_chat_template(&chatml, &messages, true)
                    .map_err(|e| Error::Local(format!("chat template: {e}")))
            }
        }
    }
}

impl Drop for LocalModel {
    fn drop(&mut self) {
        // Calls still streaming end with an error rather than hold the
        // drop for up to their `max_tokens`; the engine ends between two
        // forward passes, and is waited for.
        self.shared.unloading.store(true, Ordering::Release);
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.take();
        }
        self.engine.unpark();
        if let Some(running) = self.running.take() {
            let _ = running.join();
        }
    }
}

impl ChatModel for LocalModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn info(&self) -> crate::ModelInfo {
        let mut info = crate::ModelInfo::from_name(&self.name);
        // In-process: no server; llama.cpp does the work.
        info.provider = "llama.cpp".to_owned();
        info
    }

    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatStream, Error>> {
        Box::pin(async move {
            let calls = Calls::of(&request);
            let grammar = grammar::of(&request, calls)?;
            let text = self.prompt(&request, calls)?;
            let prompt = self.model.vocab().tokenize(text.as_bytes(), true, true);
            let room = self.config.context as usize;
            if prompt.is_empty() || prompt.len() >= room {
                return Err(Error::Local(format!(
                    "the conversation is {} tokens; the model's context holds {room}",
                    prompt.len()
                )));
            }
            let limit = self.config.queue;
            let waiting = self.shared.queued.fetch_add(1, Ordering::Relaxed);
            if waiting >= limit {
                self.shared.queued.fetch_sub(1, Ordering::Relaxed);
                self.shared.counters.refused.fetch_add(1, Ordering::Relaxed);
                return Err(Error::Busy { waiting, limit });
            }
            // Small: the engine runs at most this far ahead of a reader
            // before it pauses that reader's sequence.
            let (events, receiver) = tokio_mpsc::channel(16);
            let job = Job {
                prompt,
                calls,
                grammar,
                max_tokens: request.max_tokens.unwrap_or(self.config.max_tokens).max(1),
                temperature: match request.temperature {
                    Some(t) if t <= 0.0 => None,
                    Some(t) => Some(t),
                    None => Some(0.7),
                },
                seed: self.seeds.fetch_add(1, Ordering::Relaxed),
                events,
            };
            let sent = self
                .jobs
                .lock()
                .ok()
                .and_then(|jobs| jobs.as_ref().map(|jobs| jobs.send(job).is_ok()));
            if sent != Some(true) {
                self.shared.queued.fetch_sub(1, Ordering::Relaxed);
                return Err(Error::Local("the model is shut down".into()));
            }
            self.engine.unpark();
            Ok(Box::pin(Answers {
                receiver,
                engine: self.engine.clone(),
            }) as ChatStream)
        })
    }
}

/// A call's events as they come. Taking one wakes the engine (it may have
/// paused this sequence for a reader that fell behind); dropping the
/// stream cancels the call at the engine's next step.
struct Answers {
    receiver: tokio_mpsc::Receiver<Result<ChatEvent, Error>>,
    engine: std::thread::Thread,
}

impl Stream for Answers {
    type Item = Result<ChatEvent, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.receiver.poll_recv(cx);
        if let Poll::Ready(Some(_)) = &polled {
            self.engine.unpark();
        }
        polled
    }
}

impl Drop for Answers {
    fn drop(&mut self) {
        // Closed before the engine is woken, so it sees the call is gone.
        self.receiver.close();
        self.engine.unpark();
    }
}
