//! A GGUF model run in-process on the CPU by llama.cpp, through the
//! `llama-cpp-2` crate (llama.cpp built from its vendored source).
//!
//! The model is loaded once and shared. Each of `parallel` slots is a
//! thread with its own context (KV cache); calls queue in arrival order
//! and the next free slot takes the oldest. A slot streams the answer
//! through a bounded channel: when the caller drops the stream (a cancelled
//! run), the slot sees it at the next token and stops.
//!
//! Router answers and tool calls are decoded under grammars made from
//! their JSON Schemas (`local/grammar.rs`), so even a small model's answer always
//! parses and validates; free text is sampled freely.

mod answer;
pub mod fetch;
mod grammar;

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use tokio::sync::mpsc as tokio_mpsc;

use crate::chat::{BoxFuture, ChatEvent, ChatModel, ChatRequest, ChatStream, Usage};
use crate::error::Error;
use answer::{Answer, Calls};
use grammar::Grammar;

/// How a local model runs.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// The GGUF file.
    pub path: PathBuf,
    /// Calls that generate at once (each holds a context of its own);
    /// the others wait in order.
    pub parallel: usize,
    /// CPU threads per generating call.
    pub threads: usize,
    /// Tokens of context per call (prompt and answer), at most the
    /// model's trained context.
    pub context: u32,
    /// Answer length when the request sets none.
    pub max_tokens: u32,
}

impl LocalConfig {
    /// `path` with defaults: one call at a time on every core, 4,096 tokens
    /// of context.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            path: path.into(),
            parallel: 1,
            threads: cores,
            context: 4096,
            max_tokens: 1024,
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
    /// Prompt tokens processed.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// Calls whose caller left before the answer ended.
    pub cancelled: u64,
    /// Prompt tokens not computed again: a call's prefix shared with the
    /// previous call on the same slot.
    pub cached_tokens: u64,
    /// The most calls that generated at the same time (at most the slots).
    pub most_at_once: u64,
}

#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    cancelled: AtomicU64,
    cached_tokens: AtomicU64,
    /// Calls generating now.
    generating: AtomicU64,
    most_at_once: AtomicU64,
}

/// One call waiting for a slot.
struct Job {
    prompt: String,
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
    /// Calls in arrival order; the slots take them.
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    seeds: std::sync::atomic::AtomicU32,
    counters: Arc<Counters>,
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
    /// Loads the model and starts its slots (blocking: call it from a
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
        config.parallel = config.parallel.max(1);
        config.threads = config.threads.max(1);
        config.context = config.context.clamp(256, model.n_ctx_train().max(256));
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let counters = Arc::new(Counters::default());
        for slot in 0..config.parallel {
            // Contexts are made one after the other: llama.cpp's context
            // constructor is not safe to run twice at once on one model.
            let (ready, made) = mpsc::channel::<Result<(), Error>>();
            let model = model.clone();
            let queue = queue.clone();
            let slot_config = config.clone();
            let counters = counters.clone();
            std::thread::Builder::new()
                .name(format!("agwire-llm-{slot}"))
                .spawn(move || run_slot(&model, &slot_config, &queue, &ready, &counters))
                .map_err(|e| Error::Local(format!("cannot start a model thread: {e}")))?;
            made.recv()
                .map_err(|_| Error::Local("a model thread died while starting".into()))??;
        }
        let name = format!(
            "local:{}",
            config
                .path
                .file_stem()
                .map_or_else(|| "model".into(), |s| s.to_string_lossy())
        );
        tracing::info!(model = %config.path.display(), parallel = config.parallel, threads = config.threads, context = config.context, "local model loaded");
        Ok(Self {
            name,
            model,
            template,
            config,
            jobs: Mutex::new(Some(jobs)),
            seeds: std::sync::atomic::AtomicU32::new(0x5eed),
            counters,
        })
    }

    /// What it has done so far.
    pub fn stats(&self) -> LocalStats {
        let c = &self.counters;
        LocalStats {
            calls: c.calls.load(Ordering::Relaxed),
            prompt_tokens: c.prompt_tokens.load(Ordering::Relaxed),
            completion_tokens: c.completion_tokens.load(Ordering::Relaxed),
            cancelled: c.cancelled.load(Ordering::Relaxed),
            cached_tokens: c.cached_tokens.load(Ordering::Relaxed),
            most_at_once: c.most_at_once.load(Ordering::Relaxed),
        }
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
        // Closing the queue ends the slot threads once they are idle.
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.take();
        }
    }
}

impl ChatModel for LocalModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChatStream, Error>> {
        Box::pin(async move {
            let calls = Calls::of(&request);
            let grammar = grammar::of(&request, calls)?;
            let prompt = self.prompt(&request, calls)?;
            // Small: a slot runs at most this far ahead of a reader that left.
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
                seed: self
                    .seeds
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                events,
            };
            let sent = self
                .jobs
                .lock()
                .ok()
                .and_then(|jobs| jobs.as_ref().map(|jobs| jobs.send(job).is_ok()));
            if sent != Some(true) {
                return Err(Error::Local("the model is shut down".into()));
            }
            let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
                receiver.recv().await.map(|event| (event, receiver))
            });
            Ok(Box::pin(stream) as ChatStream)
        })
    }
}

/// A slot: one context, taking calls until the queue closes.
fn run_slot(
    model: &LlamaModel,
    config: &LocalConfig,
    queue: &Mutex<mpsc::Receiver<Job>>,
    ready: &mpsc::Sender<Result<(), Error>>,
    counters: &Counters,
) {
    let threads = i32::try_from(config.threads).unwrap_or(1);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(config.context))
        .with_n_batch(512)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut context = match backend().and_then(|backend| {
        model
            .new_context(backend, params)
            .map_err(|e| Error::Local(format!("context: {e}")))
    }) {
        Ok(context) => {
            let _ = ready.send(Ok(()));
            context
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    // The tokens whose keys and values the context holds, in order: the
    // next call reuses the prefix it shares with them (the same system
    // prompt, the conversation so far) instead of computing it again.
    let mut cached: Vec<LlamaToken> = Vec::new();
    loop {
        // The lock is held only while waiting: the next idle slot takes the
        // oldest call.
        let job = match queue.lock() {
            Ok(queue) => match queue.recv() {
                Ok(job) => job,
                Err(_) => return,
            },
            Err(_) => return,
        };
        if job.events.is_closed() {
            // Cancelled while it waited.
            continue;
        }
        counters.calls.fetch_add(1, Ordering::Relaxed);
        let now = counters.generating.fetch_add(1, Ordering::Relaxed) + 1;
        counters.most_at_once.fetch_max(now, Ordering::Relaxed);
        let done = generate(model, &mut context, &mut cached, &job, counters);
        counters.generating.fetch_sub(1, Ordering::Relaxed);
        if job.events.is_closed() {
            counters.cancelled.fetch_add(1, Ordering::Relaxed);
        }
        if let Err(e) = done {
            // What the context holds is no longer known: start afresh.
            context.clear_kv_cache();
            cached.clear();
            let _ = job.events.blocking_send(Err(e));
        }
    }
}

/// Sends `event`; false when the caller has gone (cancelled).
fn send(job: &Job, event: ChatEvent) -> bool {
    job.events.blocking_send(Ok(event)).is_ok()
}

/// How the next token is chosen: the sampling chain, and the grammar.
///
/// The grammar is checked against the token the chain chose first, and
/// applied to the whole vocabulary only when it refuses it (what llama.cpp's
/// own `common_sampler` does): masking ~50,000 candidates at every step
/// would cost more than the model's forward pass on a small model.
struct Sampling {
    chain: LlamaSampler,
    grammar: Option<LlamaSampler>,
}

impl Sampling {
    fn new(model: &LlamaModel, job: &Job) -> Result<Self, Error> {
        let grammar = match &job.grammar {
            Some(grammar) => Some(
                match &grammar.trigger {
                    Some(word) => LlamaSampler::grammar_lazy(
                        model,
                        &grammar.text,
                        "root",
                        [word.as_bytes()],
                        &[],
                    ),
                    None => LlamaSampler::grammar(model, &grammar.text, "root"),
                }
                .map_err(|e| Error::Local(format!("grammar: {e}")))?,
            ),
            None => None,
        };
        let mut chain = Vec::with_capacity(5);
        match job.temperature {
            None => chain.push(LlamaSampler::greedy()),
            Some(t) => {
                // A mild repeat penalty: small models otherwise fall into
                // loops (`;;;;`) that eat the token budget.
                chain.push(LlamaSampler::penalties(model.n_vocab(), 64, 1.1, 0.0, 0.0));
                chain.push(LlamaSampler::top_k(40));
                chain.push(LlamaSampler::top_p(0.95, 1));
                chain.push(LlamaSampler::temp(t));
                chain.push(LlamaSampler::dist(job.seed));
            }
        }
        Ok(Self {
            chain: LlamaSampler::chain_simple(chain),
            grammar,
        })
    }

    /// The next token from the logits at `index` of the last batch.
    fn next(&mut self, context: &LlamaContext<'_>, index: i32) -> Result<LlamaToken, Error> {
        let none = || Error::Local("the sampler chose no token".into());
        let mut candidates = context.token_data_array_ith(index);
        candidates.apply_sampler(&mut self.chain);
        let mut token = candidates.selected_token().ok_or_else(none)?;
        if let Some(grammar) = &mut self.grammar {
            let mut alone =
                LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 1.0, 0.0)], false);
            alone.apply_sampler(grammar);
            let refused = alone
                .data
                .first()
                .is_none_or(|d| d.logit() == f32::NEG_INFINITY);
            if refused {
                let mut candidates = context.token_data_array_ith(index);
                candidates.apply_sampler(grammar);
                candidates.apply_sampler(&mut self.chain);
                token = candidates.selected_token().ok_or_else(none)?;
            }
            grammar.accept(token);
        }
        self.chain.accept(token);
        Ok(token)
    }
}

/// Runs one call on a slot's context.
/// Decodes `tokens` in one batch at the positions from `position` on
/// (advanced past them), with logits for the last one when `logits`.
fn decode(
    context: &mut LlamaContext<'_>,
    batch: &mut LlamaBatch<'_>,
    tokens: &[LlamaToken],
    position: &mut i32,
    logits: bool,
) -> Result<(), Error> {
    batch.clear();
    for (i, token) in tokens.iter().enumerate() {
        let last = logits && i + 1 == tokens.len();
        batch
            .add(*token, *position, &[0], last)
            .map_err(|e| Error::Local(format!("batch: {e}")))?;
        *position += 1;
    }
    context
        .decode(batch)
        .map_err(|e| Error::Local(format!("decode: {e}")))
}

fn generate(
    model: &LlamaModel,
    context: &mut LlamaContext<'_>,
    cached: &mut Vec<LlamaToken>,
    job: &Job,
    counters: &Counters,
) -> Result<(), Error> {
    let vocab = model.vocab();
    let prompt = vocab.tokenize(job.prompt.as_bytes(), true, true);
    let room = usize::try_from(context.n_ctx()).unwrap_or(usize::MAX);
    if prompt.is_empty() || prompt.len() >= room {
        return Err(Error::Local(format!(
            "the conversation is {} tokens; the model's context holds {room}",
            prompt.len()
        )));
    }
    let max_tokens = usize::try_from(job.max_tokens)
        .unwrap_or(usize::MAX)
        .min(room - prompt.len());
    counters
        .prompt_tokens
        .fetch_add(prompt.len() as u64, Ordering::Relaxed);
    // Keep the shared prefix (at least the last prompt token is computed
    // again: its logits choose the first answer token).
    let shared = cached
        .iter()
        .zip(&prompt)
        .take_while(|(a, b)| a == b)
        .count()
        .min(prompt.len() - 1);
    let kept = u32::try_from(shared).unwrap_or(0);
    if !matches!(
        context.clear_kv_cache_seq(Some(0), Some(kept), None),
        Ok(true)
    ) {
        context.clear_kv_cache();
        cached.clear();
    }
    cached.truncate(shared);
    let reused = cached.len() as u64;
    counters.cached_tokens.fetch_add(reused, Ordering::Relaxed);
    let n_batch = usize::try_from(context.n_batch()).unwrap_or(512).max(1);
    let mut batch = LlamaBatch::new(n_batch, 1);
    let mut position = i32::try_from(cached.len()).unwrap_or(0);
    for chunk in prompt[cached.len()..].chunks(n_batch) {
        // Logits only after the prompt's last token: they choose the first
        // answer token.
        let ends_prompt = cached.len() + chunk.len() == prompt.len();
        decode(context, &mut batch, chunk, &mut position, ends_prompt)?;
        cached.extend_from_slice(chunk);
        if job.events.is_closed() {
            return Ok(());
        }
    }

    let mut sampling = Sampling::new(model, job)?;
    let mut answer = Answer::new(job.calls);
    let mut bytes: Vec<u8> = Vec::new();
    let mut generated = 0usize;
    let mut out_of_tokens = true;
    while generated < max_tokens {
        let token = sampling.next(context, batch.n_tokens() - 1)?;
        if vocab.is_eog(token) {
            out_of_tokens = false;
            break;
        }
        generated += 1;
        counters.completion_tokens.fetch_add(1, Ordering::Relaxed);
        if !vocab.is_control(token) {
            bytes.extend(vocab.token_to_piece(token, true, None));
            // A token may end inside a character: keep its bytes for the
            // next one.
            let valid = match std::str::from_utf8(&bytes) {
                Ok(text) => text.len(),
                Err(e) => e.valid_up_to(),
            };
            if valid > 0 {
                let text = String::from_utf8_lossy(&bytes[..valid]).into_owned();
                bytes.drain(..valid);
                for event in answer.push(&text)? {
                    if !send(job, event) {
                        return Ok(());
                    }
                }
            }
        }
        if job.events.is_closed() {
            return Ok(());
        }
        decode(context, &mut batch, &[token], &mut position, true)?;
        cached.push(token);
    }
    let completion = u64::try_from(generated).unwrap_or(u64::MAX);
    let prompt_tokens = u64::try_from(prompt.len()).unwrap_or(u64::MAX);
    let usage = ChatEvent::Usage(Usage {
        prompt_tokens,
        completion_tokens: completion,
        total_tokens: prompt_tokens + completion,
        reasoning_tokens: None,
        cached_tokens: Some(reused),
    });
    let mut events = Vec::new();
    if !bytes.is_empty() {
        events.extend(answer.push(&String::from_utf8_lossy(&bytes))?);
    }
    events.extend(answer.finish(out_of_tokens)?);
    // Usage just before the finish, which comes last.
    events.insert(events.len() - 1, usage);
    for event in events {
        if !send(job, event) {
            break;
        }
    }
    Ok(())
}
