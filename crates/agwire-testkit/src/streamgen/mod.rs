//! Seeded generator of AG-UI event streams, for the differential test against the
//! official TypeScript client (`interop/replay.mjs`, `@ag-ui/client` 1.0.0).
//!
//! [`generate`]`(seed, index)` is a pure function: the same pair always yields the
//! same stream, ids included (no `HashMap` order reaches the output). Each stream
//! carries its [`StreamClass`] and, when it is meant to be rejected, the error it
//! is meant to be rejected with.
//!
//! # How streams are built
//!
//! By a random walk over a *model* of the client: `Mirror` re-states what the
//! compatibility boundary (legacy nulls), enforcement (unknown event types),
//! `transformChunks` and `verifyEvents` of `@ag-ui/client` 1.0.0 track — open
//! entities, owners per entity kind, steps per owner, subagents, chunk lanes — with
//! the client's exact error messages. Every valid event is fed through the model as
//! it is generated, so a valid stream is valid by construction (a generator bug
//! panics at once, naming seed and index) and a broken stream breaks exactly where
//! intended: a valid prefix (sometimes several earlier runs), a "prepare" phase of
//! valid events that reaches the state the fault needs, and one faulty event the
//! model rejects. What follows the faulty event is an arbitrary short tail: the
//! client stops at the first error.
//!
//! # What a stream promises (for a comparison against agwire)
//!
//! - `Valid`: accepted. `expanded` is what the model says reaches the application
//!   (after enforcement and chunk expansion; unknown material not stripped).
//!   Compare delivered events, messages, state and warnings.
//! - `Broken`: rejected by expansion or verification with exactly
//!   `expected_error` (matching [`TS_TEMPLATES`] entry `template`). Compare the
//!   verdict and the message only: the 1.0.0 client's apply stage is asynchronous,
//!   so on a rejection it has delivered (and applied) at most the first event.
//! - `Malformed`: one known field carries a wrong JSON type (or a required one is
//!   missing); rejected at decode. The client's message is a Zod issue dump, so
//!   compare "rejected at decode" only.
//! - `SpecOnly`: breaks a 1.1 rule the 1.0.0 client does not check (thread/run
//!   identity of `RUN_STARTED`/`RUN_FINISHED`, duplicate interrupt ids); the 1.0.0
//!   client accepts it, a stricter consumer rejects it with `intended_error`.
//!
//! Deliberately absent: `encryptedValueType` (1.1 only; the 1.0 client strips it),
//! unknown values of closed enums such as `TEXT_MESSAGE_START.role` (a documented
//! divergence), and `THINKING_*` events (the client mints random ids for them).
//!
//! Self-contained (only `rand` and `serde_json`): it depends on no agwire
//! crate, so it cannot agree with the code it judges by sharing it. The
//! differential tests of agwire-core and the codec's sample events use it
//! (feature `streamgen`).
#![allow(clippy::print_stdout, clippy::too_many_lines)]

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

// The model of the official client.
mod mirror;
mod schema;
mod transform;
mod verify;
mod wire;

// The generator, and the valid material it walks over.
mod body;
mod chunks;
mod consumer;
mod entities;
mod generator;
mod message;
mod patch;
mod random;
mod runs;
mod snapshots;
mod vocabulary;

// Broken, malformed and spec-only streams.
mod broken;
mod chunk_faults;
mod entity_faults;
mod faults;
mod inject;
mod malformed;
mod step_faults;
mod tag_faults;

mod templates;

pub use templates::{TS_TEMPLATES, TsTemplate, ZOD_MARKER, classify_ts_error};

use faults::{Fault, SpecFault};
use generator::Gen;

/// What the official client is expected to make of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StreamClass {
    /// Accepted (`ok: true`), possibly with warnings.
    Valid,
    /// Rejected by chunk expansion or verification, with `intended_error`.
    Broken,
    /// A malformed known value: rejected at decode (the generated Zod validator).
    Malformed,
    /// Breaks a 1.1 rule that `@ag-ui/client` 1.0.0 does not check yet (run
    /// identity, duplicate interrupt ids). The 1.0.0 client accepts these; a
    /// later client rejects them with `intended_error`.
    SpecOnly,
}

impl StreamClass {
    /// Every class, in report order.
    pub const ALL: [StreamClass; 4] = [
        StreamClass::Valid,
        StreamClass::Broken,
        StreamClass::Malformed,
        StreamClass::SpecOnly,
    ];

    /// Its name in reports (`valid`, `broken`, `malformed`, `spec-only`).
    pub fn name(self) -> &'static str {
        match self {
            StreamClass::Valid => "valid",
            StreamClass::Broken => "broken",
            StreamClass::Malformed => "malformed",
            StreamClass::SpecOnly => "spec-only",
        }
    }
}

/// One generated stream and the generator's intent for it.
#[derive(Debug, Clone)]
pub struct GeneratedStream {
    /// Unique per (seed, index).
    pub id: String,
    /// The thread the consumer asks about; every `RUN_STARTED` carries it
    /// unless the stream is a thread-mismatch case.
    pub thread_id: String,
    /// The run id the consumer asks for (the last run of the stream uses it).
    pub run_id: String,
    /// The events, as wire JSON.
    pub events: Vec<Value>,
    /// The consumer's messages before the stream.
    pub initial_messages: Vec<Value>,
    /// The consumer's state before the stream.
    pub initial_state: Value,
    /// The verdict the generator intends.
    pub class: StreamClass,
    /// A substring of the error the client must fail with (`Broken`, `SpecOnly`,
    /// and the Zod marker for `Malformed`).
    pub intended_error: Option<&'static str>,
    /// The exact error the model predicts (`Broken` only).
    pub expected_error: Option<String>,
    /// The key of the [`TS_TEMPLATES`] entry the error must match (`Broken`).
    pub template: Option<&'static str>,
    /// The fault or malformation injected, for statistics and triage.
    pub fault: Option<&'static str>,
    /// What the stream exercises, for coverage statistics and triage.
    pub features: BTreeSet<&'static str>,
    /// For `Valid` and `SpecOnly`: the events the client should deliver after
    /// enforcement and chunk expansion, in order (as the model sees them).
    pub expanded: Vec<Value>,
}

impl GeneratedStream {
    /// The job line `interop/replay.mjs` reads.
    pub fn to_job(&self) -> Value {
        json!({
            "id": self.id,
            "threadId": self.thread_id,
            "runId": self.run_id,
            "events": self.events,
            "messages": self.initial_messages,
            "state": self.initial_state,
        })
    }
}

/// The stream for (`seed`, `index`).
pub fn generate(seed: u64, index: usize) -> GeneratedStream {
    let mixed = seed
        ^ (index as u64)
            .wrapping_add(1)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(17);
    let mut rng = StdRng::seed_from_u64(mixed);
    let roll = rng.random_range(0..100);
    let class = match roll {
        0..50 => StreamClass::Valid,
        50..90 => StreamClass::Broken,
        90..97 => StreamClass::Malformed,
        _ => StreamClass::SpecOnly,
    };
    let mut g = Gen::new(rng, seed, index);
    match class {
        StreamClass::Valid => g.valid_stream(),
        StreamClass::Broken => {
            let fault = *Fault::ALL.choose(&mut g.rng).expect("faults");
            g.broken_stream(fault);
        }
        StreamClass::Malformed => g.malformed_stream(),
        StreamClass::SpecOnly => {
            let fault = *SpecFault::ALL.choose(&mut g.rng).expect("spec faults");
            g.spec_stream(fault);
        }
    }
    g.finish(class)
}

#[cfg(test)]
mod tests;
