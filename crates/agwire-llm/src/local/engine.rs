//! Continuous batching: one thread, one llama.cpp context, every running
//! call a sequence of it, all of them advanced by one `llama_decode` per
//! step — what llama.cpp's own server does with `-np N -cb`.
//!
//! On a memory-bound CPU (and on every GPU) a forward pass over several
//! sequences costs little more than over one: the weights are read once per
//! step, whoever the tokens belong to. A step holds the next token of every
//! generating call and, in the room left, chunks of the prompts of calls
//! that joined (a long prompt never takes a whole step while others
//! generate, so their tokens keep coming). A call joins between steps in
//! arrival order; it leaves at once when it ends or its reader goes, and a
//! cancelled call's cells are freed at once.
//!
//! Each call keeps its own sampler chain and grammar, and its own outbox: a
//! reader that falls behind pauses only its own sequence (backpressure),
//! never the batch.
//!
//! Each sequence has its own `context` cells of the KV cache (llama.cpp's
//! per-sequence streams, as `llama-server -np N` runs): attention reads only
//! a sequence's own cells, where one pool shared by all would make every
//! token attend over everyone's (measured with `llama-batched-bench`, 300
//! prompt + 128 generated tokens, 8 sequences on 2 cores: 174 tokens/s
//! with streams, 127 with one pool). A finished call's cells stay as a
//! prefix cache; a new call starts from the longest prefix any sequence
//! holds, copied from another sequence when that saves enough tokens.

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::mpsc::error::TrySendError;

use crate::chat::{ChatEvent, Usage};
use crate::error::Error;
use crate::local::answer::Answer;
use crate::local::sampling::Sampling;
use crate::local::{Job, LocalConfig, SequenceState, Shared, backend};

/// A call whose answer may be at most this long counts as short (the
/// router's: a few tokens under a grammar). Short calls may use one
/// sequence beyond `parallel`, so a route is never stuck behind long
/// answers.
pub(crate) const SHORT_CALL: u32 = 64;

/// Prompt tokens a step takes while other calls generate: their next token
/// waits for the step, so a 2,000-token prompt is fed in pieces instead of
/// stalling them for seconds. Alone, a prompt takes the whole batch.
/// Measured (bench/local_batch.sh, 4 chats at once, 2 cores): 128 gave
/// 77 tokens/s and a 1.9 s median first token, 256 gave 70 and 2.4 s, 512
/// gave 68 and 3.1 s, 64 gave 66 and 1.8 s.
const PROMPT_SHARE: usize = 128;

/// A prefix held by another sequence is copied only when it saves at least
/// this many tokens over the sequence's own cache: the copy moves a whole
/// stream (a few milliseconds on a small model), computing 64 tokens takes
/// about 150 ms on 2 cores.
const MIN_SHARED: usize = 64;

/// The step's logical batch (and llama.cpp's physical one).
const N_BATCH: u32 = 512;

/// A call running on a sequence.
struct Call {
    job: Job,
    reused: usize,
    max_tokens: usize,
    sampling: Sampling,
    answer: Answer,
    /// Bytes of a character a token ended inside of.
    bytes: Vec<u8>,
    generated: usize,
    /// Sampled, not yet decoded.
    next: Option<LlamaToken>,
    /// Events the reader has not taken yet.
    outbox: VecDeque<Result<ChatEvent, Error>>,
    /// Generation is over; the outbox drains.
    done: bool,
    /// The step it joined: prompts are fed in this order.
    joined: u64,
}

/// One sequence of the context.
struct Sequence {
    id: i32,
    /// The tokens whose keys and values this sequence holds, from position 0.
    cached: Vec<LlamaToken>,
    call: Option<Call>,
    /// The step it was last used (the least recently used cache goes first).
    used: u64,
}

/// What a step does with a sequence.
#[derive(Clone, Copy)]
struct Planned {
    sequence: usize,
    /// Tokens of its prompt fed in this step (0: its next token).
    prompt: usize,
    /// The batch index of its logits, if the step samples it.
    logits: Option<i32>,
}

pub(crate) struct Engine<'m> {
    model: &'m LlamaModel,
    context: LlamaContext<'m>,
    batch: LlamaBatch<'static>,
    sequences: Vec<Sequence>,
    waiting: VecDeque<Job>,
    config: LocalConfig,
    shared: Arc<Shared>,
    step: u64,
    /// The queue closed (the model was dropped).
    closing: bool,
}

impl<'m> Engine<'m> {
    pub(crate) fn new(
        model: &'m LlamaModel,
        config: &LocalConfig,
        shared: Arc<Shared>,
    ) -> Result<Self, Error> {
        let threads = i32::try_from(config.threads).unwrap_or(1);
        let parallel = config.parallel;
        // `context` cells for each sequence: `parallel`, and the short
        // calls' one.
        let n_seq = u32::try_from(parallel + 1).unwrap_or(u32::MAX);
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(config.context.saturating_mul(n_seq)))
            .with_n_batch(N_BATCH)
            .with_n_ubatch(N_BATCH)
            .with_n_seq_max(n_seq)
            .with_kv_unified(false)
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let context = model
            .new_context(backend()?, params)
            .map_err(|e| Error::Local(format!("context: {e}")))?;
        let sequences = (0..=parallel)
            .map(|id| Sequence {
                id: i32::try_from(id).unwrap_or(i32::MAX),
                cached: Vec::new(),
                call: None,
                used: 0,
            })
            .collect();
        Ok(Self {
            model,
            context,
            batch: LlamaBatch::new(N_BATCH as usize, 1),
            sequences,
            waiting: VecDeque::new(),
            config: config.clone(),
            shared,
            step: 0,
            closing: false,
        })
    }

    /// Runs until the queue closes and every call has ended.
    pub(crate) fn run(mut self, jobs: &mpsc::Receiver<Job>) {
        loop {
            if self.shared.unloading.load(Ordering::Acquire) {
                self.unload();
                return;
            }
            self.intake(jobs);
            self.reap();
            self.admit();
            let worked = self.advance();
            self.publish();
            if worked {
                continue;
            }
            if self.closing && self.waiting.is_empty() && self.active() == 0 {
                return;
            }
            // Woken by a new call, a reader taking an event, or a reader
            // leaving (`LocalModel::stream`).
            std::thread::park();
        }
    }

    /// Every call, running or waiting, ends with an error its reader sees.
    fn unload(&mut self) {
        let unloaded = || Err(Error::Local("the model was unloaded".into()));
        for sequence in &mut self.sequences {
            if let Some(call) = sequence.call.take()
                && !call.done
            {
                let _ = call.job.events.try_send(unloaded());
            }
        }
        for job in self.waiting.drain(..) {
            let _ = job.events.try_send(unloaded());
        }
    }

    fn active(&self) -> usize {
        self.sequences.iter().filter(|s| s.call.is_some()).count()
    }

    /// New calls, in arrival order.
    fn intake(&mut self, jobs: &mpsc::Receiver<Job>) {
        loop {
            match jobs.try_recv() {
                Ok(job) => self.waiting.push_back(job),
                Err(mpsc::TryRecvError::Empty) => return,
                Err(mpsc::TryRecvError::Disconnected) => {
                    self.closing = true;
                    return;
                }
            }
        }
    }

    /// Hands events to readers; ends the calls that are over or abandoned.
    fn reap(&mut self) {
        let counters = &self.shared.counters;
        for sequence in &mut self.sequences {
            let Some(call) = &mut sequence.call else {
                continue;
            };
            let mut gone = call.job.events.is_closed();
            while let Some(event) = call.outbox.pop_front() {
                match call.job.events.try_send(event) {
                    Ok(()) => {}
                    Err(TrySendError::Full(event)) => {
                        call.outbox.push_front(event);
                        break;
                    }
                    Err(TrySendError::Closed(_)) => {
                        gone = true;
                        break;
                    }
                }
            }
            if gone && !call.done {
                // Cancelled: its cells are freed now, not when reused.
                counters.cancelled.fetch_add(1, Ordering::Relaxed);
                let _ = self.context.clear_kv_cache_seq(
                    Some(u32::try_from(sequence.id).unwrap_or(0)),
                    None,
                    None,
                );
                sequence.cached.clear();
                sequence.call = None;
            } else if call.done && (gone || call.outbox.is_empty()) {
                // Over: its cells stay as a prefix cache.
                sequence.call = None;
            }
        }
    }

    /// Calls join in arrival order while there is a sequence for them; a
    /// short call may take the sequence kept beyond `parallel`.
    fn admit(&mut self) {
        while let Some(index) = self.next_admissible() {
            let Some(job) = self.waiting.remove(index) else {
                return;
            };
            self.shared.queued.fetch_sub(1, Ordering::Relaxed);
            if job.events.is_closed() {
                // Cancelled while it waited.
                continue;
            }
            self.start(job);
        }
    }

    /// The waiting call to start now, if any: the oldest, or else the
    /// oldest short one when only the spare sequence is left.
    fn next_admissible(&mut self) -> Option<usize> {
        // Abandoned calls leave the queue first.
        while let Some(i) = self.waiting.iter().position(|j| j.events.is_closed()) {
            self.waiting.remove(i);
            self.shared.queued.fetch_sub(1, Ordering::Relaxed);
        }
        self.waiting.front()?;
        let active = self.active();
        if active < self.config.parallel {
            return Some(0);
        }
        if active == self.config.parallel {
            return self.waiting.iter().position(|j| j.max_tokens <= SHORT_CALL);
        }
        None
    }

    /// Puts `job` on the idle sequence that best serves it.
    fn start(&mut self, job: Job) {
        self.step += 1;
        let prompt = &job.prompt;
        let common = |cached: &[LlamaToken]| {
            cached
                .iter()
                .zip(prompt)
                .take_while(|(a, b)| a == b)
                .count()
                // The prompt's last token is computed again: its logits
                // choose the first answer token.
                .min(prompt.len() - 1)
        };
        // The idle sequence holding the longest prefix of it, else the least
        // recently used.
        let Some(chosen) = self
            .sequences
            .iter()
            .enumerate()
            .filter(|(_, s)| s.call.is_none())
            .max_by_key(|(_, s)| (common(&s.cached), std::cmp::Reverse(s.used)))
            .map(|(i, _)| i)
        else {
            return;
        };
        let own = common(&self.sequences[chosen].cached);
        // A longer prefix held by another sequence (the same system prompt
        // and tools in another thread, say): copy its stream, then keep
        // only the prefix.
        let donor = self
            .sequences
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != chosen)
            .map(|(i, s)| (common(&s.cached), i))
            .max();
        let id = self.sequences[chosen].id;
        let seq = u32::try_from(id).unwrap_or(0);
        let kept = match donor {
            Some((shared, from)) if shared >= own + MIN_SHARED => {
                let source = self.sequences[from].id;
                // Across streams llama.cpp copies whole streams only.
                let copied = self
                    .context
                    .copy_kv_cache_seq(source, id, None, None)
                    .is_ok()
                    && matches!(
                        self.context.clear_kv_cache_seq(
                            Some(seq),
                            Some(u32::try_from(shared).unwrap_or(0)),
                            None
                        ),
                        Ok(true)
                    );
                if copied {
                    self.sequences[chosen].cached = prompt[..shared].to_vec();
                    shared
                } else {
                    let _ = self.context.clear_kv_cache_seq(Some(seq), None, None);
                    self.sequences[chosen].cached.clear();
                    0
                }
            }
            _ => {
                let kept = u32::try_from(own).unwrap_or(0);
                if matches!(
                    self.context.clear_kv_cache_seq(Some(seq), Some(kept), None),
                    Ok(true)
                ) {
                    self.sequences[chosen].cached.truncate(own);
                    own
                } else {
                    let _ = self.context.clear_kv_cache_seq(Some(seq), None, None);
                    self.sequences[chosen].cached.clear();
                    0
                }
            }
        };
        let counters = &self.shared.counters;
        counters.calls.fetch_add(1, Ordering::Relaxed);
        counters
            .prompt_tokens
            .fetch_add(prompt.len() as u64, Ordering::Relaxed);
        counters
            .cached_tokens
            .fetch_add(kept as u64, Ordering::Relaxed);
        let room = self.config.context as usize - prompt.len();
        let max_tokens = (job.max_tokens as usize).min(room);
        let sampling =
            match Sampling::new(self.model, job.grammar.as_ref(), job.temperature, job.seed) {
                Ok(sampling) => sampling,
                Err(e) => {
                    let _ = job.events.try_send(Err(e));
                    return;
                }
            };
        let sequence = &mut self.sequences[chosen];
        sequence.used = self.step;
        sequence.call = Some(Call {
            answer: Answer::new(job.calls),
            job,
            reused: kept,
            max_tokens,
            sampling,
            bytes: Vec::new(),
            generated: 0,
            next: None,
            outbox: VecDeque::new(),
            done: false,
            joined: self.step,
        });
    }

    /// One step: builds the batch, decodes it, samples. False when there
    /// was nothing to do.
    fn advance(&mut self) -> bool {
        let plan = self.plan();
        if plan.is_empty() {
            return false;
        }
        let most = plan.len() as u64;
        self.shared
            .counters
            .most_at_once
            .fetch_max(most, Ordering::Relaxed);
        // A sequence's call never outgrows its cells (its answer is held to
        // what its prompt leaves of `context`), so a failure here is not
        // for want of room.
        if let Err(e) = self.context.decode(&mut self.batch) {
            // What these sequences hold is no longer known: they end.
            for planned in &plan {
                self.fail(planned.sequence, Error::Local(format!("decode: {e}")));
            }
            return true;
        }
        for planned in plan {
            self.after_decode(planned);
        }
        true
    }

    /// Fills the batch: the next token of each generating call, then prompt
    /// chunks in the order calls joined.
    fn plan(&mut self) -> Vec<Planned> {
        self.batch.clear();
        let mut plan = Vec::new();
        let mut failed = Vec::new();
        for (i, sequence) in self.sequences.iter().enumerate() {
            let Some(call) = &sequence.call else { continue };
            // A reader that has not taken its events yet pauses its own
            // sequence only.
            let (Some(token), true) = (call.next, call.outbox.is_empty()) else {
                continue;
            };
            let position = i32::try_from(sequence.cached.len()).unwrap_or(i32::MAX);
            let index = self.batch.n_tokens();
            match self.batch.add(token, position, &[sequence.id], true) {
                Ok(()) => plan.push(Planned {
                    sequence: i,
                    prompt: 0,
                    logits: Some(index),
                }),
                Err(e) => failed.push((i, e.to_string())),
            }
        }
        let generating = !plan.is_empty();
        let room = N_BATCH as usize - plan.len();
        let mut budget = if generating {
            PROMPT_SHARE.min(room)
        } else {
            room
        };
        let mut prompting: Vec<(u64, usize)> = self
            .sequences
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let call = s.call.as_ref()?;
                (!call.done && s.cached.len() < call.job.prompt.len()).then_some((call.joined, i))
            })
            .collect();
        prompting.sort_unstable();
        for (_, i) in prompting {
            if budget == 0 {
                break;
            }
            let sequence = &self.sequences[i];
            let Some(call) = &sequence.call else { continue };
            let fed = sequence.cached.len();
            let rest = &call.job.prompt[fed..];
            let n = rest.len().min(budget);
            let ends = n == rest.len();
            let mut index = None;
            for (k, token) in rest[..n].iter().enumerate() {
                let last = ends && k + 1 == n;
                let position = i32::try_from(fed + k).unwrap_or(i32::MAX);
                if last {
                    index = Some(self.batch.n_tokens());
                }
                if let Err(e) = self.batch.add(*token, position, &[sequence.id], last) {
                    failed.push((i, e.to_string()));
                    break;
                }
            }
            budget -= n;
            plan.push(Planned {
                sequence: i,
                prompt: n,
                logits: index,
            });
        }
        for (i, e) in failed {
            // Cannot happen with the batch sized as it is; if it did, the
            // call ends rather than the engine.
            self.fail(i, Error::Local(format!("batch: {e}")));
            plan.retain(|p| p.sequence != i);
        }
        plan
    }

    /// After a decode: what the sequence now holds, and its next token.
    fn after_decode(&mut self, planned: Planned) {
        let sequence = &mut self.sequences[planned.sequence];
        let Some(call) = &mut sequence.call else {
            return;
        };
        if planned.prompt == 0 {
            if let Some(token) = call.next.take() {
                sequence.cached.push(token);
            }
        } else {
            let fed = sequence.cached.len();
            sequence
                .cached
                .extend_from_slice(&call.job.prompt[fed..fed + planned.prompt]);
        }
        let Some(index) = planned.logits else {
            return;
        };
        if let Err(e) = self.sample(planned.sequence, index) {
            self.fail(planned.sequence, e);
        }
    }

    /// Samples a sequence's next token and turns it into events.
    fn sample(&mut self, i: usize, index: i32) -> Result<(), Error> {
        let vocab = self.model.vocab();
        let context = &self.context;
        let counters = &self.shared.counters;
        let Some(call) = &mut self.sequences[i].call else {
            return Ok(());
        };
        let token = call.sampling.next(context, index)?;
        if vocab.is_eog(token) {
            return finish(call, false);
        }
        call.generated += 1;
        counters.completion_tokens.fetch_add(1, Ordering::Relaxed);
        if !vocab.is_control(token) {
            call.bytes.extend(vocab.token_to_piece(token, true, None));
            // A token may end inside a character: keep its bytes for the
            // next one.
            let valid = match std::str::from_utf8(&call.bytes) {
                Ok(text) => text.len(),
                Err(e) => e.valid_up_to(),
            };
            if valid > 0 {
                let text = String::from_utf8_lossy(&call.bytes[..valid]).into_owned();
                call.bytes.drain(..valid);
                let events = call.answer.push(&text)?;
                call.outbox.extend(events.into_iter().map(Ok));
            }
        }
        if call.generated >= call.max_tokens {
            return finish(call, true);
        }
        call.next = Some(token);
        Ok(())
    }

    /// Ends a sequence's call with `error`; its cells are freed.
    fn fail(&mut self, i: usize, error: Error) {
        let sequence = &mut self.sequences[i];
        let Some(call) = &mut sequence.call else {
            return;
        };
        call.outbox.push_back(Err(error));
        call.next = None;
        call.done = true;
        let id = u32::try_from(sequence.id).unwrap_or(0);
        let _ = self.context.clear_kv_cache_seq(Some(id), None, None);
        sequence.cached.clear();
    }

    /// What each sequence holds, by llama.cpp's own count.
    fn publish(&self) {
        let states = self
            .sequences
            .iter()
            .map(|s| SequenceState {
                busy: s.call.is_some(),
                cells: u32::try_from(self.context.kv_cache_seq_pos_max(s.id) + 1).unwrap_or(0),
            })
            .collect();
        self.shared.sequences.send_if_modified(|sequences| {
            let changed = *sequences != states;
            if changed {
                *sequences = states;
            }
            changed
        });
    }
}

/// The end of generation: what is left of the text, the usage, the finish.
fn finish(call: &mut Call, out_of_tokens: bool) -> Result<(), Error> {
    call.next = None;
    call.done = true;
    let mut events = Vec::new();
    if !call.bytes.is_empty() {
        events.extend(call.answer.push(&String::from_utf8_lossy(&call.bytes))?);
        call.bytes.clear();
    }
    let answer = std::mem::replace(&mut call.answer, Answer::new(call.job.calls));
    events.extend(answer.finish(out_of_tokens)?);
    let completion = call.generated as u64;
    let prompt_tokens = call.job.prompt.len() as u64;
    // Usage just before the finish, which comes last.
    events.insert(
        events.len() - 1,
        ChatEvent::Usage(Usage {
            prompt_tokens,
            completion_tokens: completion,
            total_tokens: prompt_tokens + completion,
            reasoning_tokens: None,
            cached_tokens: Some(call.reused as u64),
        }),
    );
    call.outbox.extend(events.into_iter().map(Ok));
    Ok(())
}
