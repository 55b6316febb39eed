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

use std::collections::{BTreeSet, HashMap, HashSet};

use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

// ---------------------------------------------------------------------------
// Public surface
// ---------------------------------------------------------------------------

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

/// One error template of the TypeScript client (verify, chunk expansion,
/// enforcement, apply). An error matches the first entry whose fragments it all
/// contains; more specific entries come first.
#[derive(Debug, Clone, Copy)]
pub struct TsTemplate {
    /// Its name (`stage.what`), as [`GeneratedStream::template`] names it.
    pub key: &'static str,
    /// The literal pieces of the message, all of which a matching error
    /// contains.
    pub fragments: &'static [&'static str],
    /// Why no stream through `runAgent` can reach it, when that is the case.
    pub unreachable: Option<&'static str>,
}

const ZOD_SHADOWS: &str = "shadowed: the generated Zod validator (enforcement) rejects the null \
     or missing value before verification runs";

/// Every error template of `@ag-ui/client` 1.0.0 that a replayed stream could
/// conceivably produce.
pub const TS_TEMPLATES: &[TsTemplate] = &[
    t(
        "verify.run_errored",
        &["The run has already errored with 'RUN_ERROR'"],
    ),
    t(
        "verify.run_finished",
        &["The run has already finished with 'RUN_FINISHED'"],
    ),
    t("verify.first_event", &["First event must be 'RUN_STARTED'"]),
    t("verify.run_active", &["while a run is still active"]),
    u(
        "verify.message_null_tag",
        &["Cannot send a message (id '", "with 'subagentRunId: null'"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.interrupt_null_tag",
        &["with an interrupt (id '", "carrying 'subagentRunId: null'"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.event_null_tag",
        &["with 'subagentRunId: null'"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.interrupt_ids_null",
        &["with 'outcome.interruptIds: null'"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.lifecycle_null_field",
        &[": null'. The field is optional"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.subagent_outcome_type",
        &["The outcome is either"],
        "shadowed: enforcement strips an unknown outcome member (absent = success) and Zod rejects a non-object",
    ),
    u(
        "verify.interrupt_ids_non_string",
        &["non-string entry in 'outcome.interruptIds'"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.subagent_without_id",
        &["without a 'subagentRunId'"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.subagent_without_name",
        &["without a 'name'"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.subagent_error_without_message",
        &["without a 'message'"],
        ZOD_SHADOWS,
    ),
    t(
        "verify.text_duplicate",
        &["A text message with ID '", "is already in progress"],
    ),
    t(
        "verify.text_content_unstarted",
        &["Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found"],
    ),
    t(
        "verify.text_end_unstarted",
        &["Cannot send 'TEXT_MESSAGE_END' event: No active text message found"],
    ),
    t("verify.tool_duplicate", &["A tool call with ID '"]),
    t(
        "verify.tool_args_unstarted",
        &["Cannot send 'TOOL_CALL_ARGS' event: No active tool call found"],
    ),
    t(
        "verify.tool_end_unstarted",
        &["Cannot send 'TOOL_CALL_END' event: No active tool call found"],
    ),
    t(
        "verify.tool_parent_tag",
        &["does not match its parent message"],
    ),
    t(
        "verify.tool_reopen_parent_owner",
        &["but its parent message"],
    ),
    t(
        "verify.tag_message",
        &["does not match the message '", "opener's subagent"],
    ),
    t(
        "verify.tag_tool_call",
        &["does not match the tool call '", "opener's subagent"],
    ),
    t(
        "verify.tag_reasoning",
        &[
            "does not match the reasoning message '",
            "opener's subagent",
        ],
    ),
    t(
        "verify.tag_activity",
        &["does not match the activity '", "opener's subagent"],
    ),
    t(
        "verify.step_duplicate",
        &["is already active for 'STEP_STARTED'"],
    ),
    t(
        "verify.step_other_owner",
        &["A step must be finished by whoever started it."],
    ),
    t("verify.step_unstarted", &["that was not started"]),
    t("verify.span_duplicate", &["A reasoning span with ID '"]),
    t(
        "verify.reasoning_duplicate",
        &["A reasoning message with ID '"],
    ),
    t(
        "verify.span_end_unstarted",
        &["No active reasoning span found"],
    ),
    t(
        "verify.reasoning_content_unstarted",
        &["Cannot send 'REASONING_MESSAGE_CONTENT' event: No active reasoning message found"],
    ),
    t(
        "verify.reasoning_end_unstarted",
        &["Cannot send 'REASONING_MESSAGE_END' event: No active reasoning message found"],
    ),
    t(
        "verify.subagent_duplicate",
        &["is already active. Finish it with 'SUBAGENT_FINISHED' first."],
    ),
    t(
        "verify.subagent_reused",
        &["has already finished in this run"],
    ),
    t(
        "verify.subagent_parent_unknown",
        &["has not been started in this run"],
    ),
    t(
        "verify.subagent_terminal_unknown",
        &["no active subagent found with ID"],
    ),
    t(
        "verify.finish_open_steps",
        &["while steps are still active"],
    ),
    t(
        "verify.finish_open_text",
        &["while text messages are still active"],
    ),
    t(
        "verify.finish_open_reasoning_messages",
        &["while reasoning messages are still active"],
    ),
    t(
        "verify.finish_open_reasoning_spans",
        &["while reasoning spans are still active"],
    ),
    t(
        "verify.finish_open_tool_calls",
        &["while tool calls are still active"],
    ),
    t(
        "verify.finish_open_subagents",
        &["while subagents are still active"],
    ),
    t(
        "chunk.lane_owner",
        &[
            "chunk subagentRunId '",
            "does not match the open stream's subagent",
        ],
    ),
    t("chunk.conflict_role", &["chunk role '"]),
    t("chunk.conflict_name", &["chunk name '"]),
    t("chunk.conflict_tool_name", &["chunk toolCallName '"]),
    t("chunk.conflict_parent", &["chunk parentMessageId '"]),
    t("chunk.ambiguous", &["Ambiguous ", "lanes have an open"]),
    t(
        "chunk.text_without_id",
        &["First TEXT_MESSAGE_CHUNK must have a messageId"],
    ),
    t(
        "chunk.tool_without_id",
        &["First TOOL_CALL_CHUNK must have a toolCallId"],
    ),
    t(
        "chunk.tool_without_name",
        &["First TOOL_CALL_CHUNK must have a toolCallName"],
    ),
    t(
        "chunk.reasoning_without_id",
        &["First REASONING_MESSAGE_CHUNK must have a messageId"],
    ),
    t("enforce.zod", &[ZOD_MARKER]),
    u(
        "enforce.no_validator",
        &["No validator for recognised event type"],
        "internal guard: every known event type has a generated validator",
    ),
    u(
        "enforce.stripper_internal",
        &["the stripper found the whole value unrecognisable"],
        "internal guard: a known event type always selects its own schema",
    ),
    u(
        "apply.chunk_not_expanded",
        &["must be transformed before being applied"],
        "internal guard: chunk expansion always runs before apply",
    ),
];

const fn t(key: &'static str, fragments: &'static [&'static str]) -> TsTemplate {
    TsTemplate {
        key,
        fragments,
        unreachable: None,
    }
}

const fn u(key: &'static str, fragments: &'static [&'static str], why: &'static str) -> TsTemplate {
    TsTemplate {
        key,
        fragments,
        unreachable: Some(why),
    }
}

/// What every Zod (enforcement) rejection of `@ag-ui/client` contains: the issue
/// list serialised as pretty JSON.
pub const ZOD_MARKER: &str = "\"code\": \"";

/// The template an error message matches, if any.
pub fn classify_ts_error(message: &str) -> Option<&'static str> {
    TS_TEMPLATES
        .iter()
        .find(|t| t.fragments.iter().all(|f| message.contains(f)))
        .map(|t| t.key)
}

fn template(key: &str) -> &'static TsTemplate {
    TS_TEMPLATES
        .iter()
        .find(|t| t.key == key)
        .unwrap_or_else(|| panic!("no TS template {key}"))
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

// ---------------------------------------------------------------------------
// The model of the official client: compatibility boundary, enforcement (event
// types only), chunk expansion and verification.
// ---------------------------------------------------------------------------

type Owner = Option<String>;

const KNOWN_TYPES: &[&str] = &[
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TEXT_MESSAGE_CHUNK",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_CHUNK",
    "TOOL_CALL_RESULT",
    "STATE_SNAPSHOT",
    "STATE_DELTA",
    "MESSAGES_SNAPSHOT",
    "ACTIVITY_SNAPSHOT",
    "ACTIVITY_DELTA",
    "RAW",
    "CUSTOM",
    "RUN_STARTED",
    "RUN_FINISHED",
    "RUN_ERROR",
    "STEP_STARTED",
    "STEP_FINISHED",
    "REASONING_START",
    "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT",
    "REASONING_MESSAGE_END",
    "REASONING_MESSAGE_CHUNK",
    "REASONING_END",
    "REASONING_ENCRYPTED_VALUE",
    "SUBAGENT_STARTED",
    "SUBAGENT_FINISHED",
    "SUBAGENT_ERROR",
];

/// The message roles enforcement keeps: the `role` constants of the 1.1
/// schema's message definitions (`DeveloperMessage` … `ReasoningMessage`).
/// The model's own list, not agwire-core's `Role`: an oracle that asked the
/// code it judges which roles exist would agree with it by construction.
const KNOWN_ROLES: &[&str] = &[
    "developer",
    "system",
    "assistant",
    "user",
    "tool",
    "activity",
    "reasoning",
];

fn ty(e: &Value) -> &str {
    e.get("type").and_then(Value::as_str).unwrap_or("")
}

fn sget<'a>(e: &'a Value, key: &str) -> Option<&'a str> {
    e.get(key).and_then(Value::as_str)
}

fn tag_of(e: &Value) -> Owner {
    sget(e, "subagentRunId").map(str::to_owned)
}

fn who(owner: &Owner) -> &str {
    owner.as_deref().unwrap_or("(the parent agent)")
}

/// A JS `Set<string>`: insertion-ordered, re-adding keeps the position.
#[derive(Debug, Clone, Default)]
struct OrdSet(Vec<String>);

impl OrdSet {
    fn has(&self, id: &str) -> bool {
        self.0.iter().any(|x| x == id)
    }
    fn add(&mut self, id: &str) {
        if !self.has(id) {
            self.0.push(id.to_owned());
        }
    }
    fn delete(&mut self, id: &str) {
        self.0.retain(|x| x != id);
    }
    fn joined(&self) -> String {
        self.0.join(", ")
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The three kinds of stream `transformChunks` assembles from chunks
/// (`PendingStream["kind"]`: `"text" | "tool" | "reasoning"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Tool,
    Reasoning,
}

/// What the model knows of one [`Kind`], as data rather than code: the
/// official event type names of its family, and the words the client's
/// messages use for it.
///
/// An oracle must not share the code it judges, nor repeat it: a copy of
/// agwire-core's own chunk helpers (whose `Kind` is private, and rightly so)
/// would agree with them by construction, typo for typo, and the differential
/// test compares agwire's chunk errors with what this model predicts. So the
/// rows below are taken from the references themselves — the event type names
/// from AG-UI's `EventType` (and [`KNOWN_TYPES`], which a test holds them to),
/// the id field and the entity words from `@ag-ui/client` 1.0.0's
/// `src/chunks/transform.ts` (`missingIdFieldName`, and the `entityKind`
/// argument of its error messages) — and the model reads them from one table.
#[derive(Debug)]
struct Family {
    kind: Kind,
    /// The chunk event, and the start/content/end events it abbreviates.
    chunk: &'static str,
    start: &'static str,
    content: &'static str,
    end: &'static str,
    /// The field a chunk names its stream by.
    id_field: &'static str,
    /// How the client's error messages name the stream.
    entity: &'static str,
}

/// One row per [`Kind`].
const FAMILIES: [Family; 3] = [
    Family {
        kind: Kind::Text,
        chunk: "TEXT_MESSAGE_CHUNK",
        start: "TEXT_MESSAGE_START",
        content: "TEXT_MESSAGE_CONTENT",
        end: "TEXT_MESSAGE_END",
        id_field: "messageId",
        entity: "text message",
    },
    Family {
        kind: Kind::Tool,
        chunk: "TOOL_CALL_CHUNK",
        start: "TOOL_CALL_START",
        content: "TOOL_CALL_ARGS",
        end: "TOOL_CALL_END",
        id_field: "toolCallId",
        entity: "tool call",
    },
    Family {
        kind: Kind::Reasoning,
        chunk: "REASONING_MESSAGE_CHUNK",
        start: "REASONING_MESSAGE_START",
        content: "REASONING_MESSAGE_CONTENT",
        end: "REASONING_MESSAGE_END",
        id_field: "messageId",
        entity: "reasoning message",
    },
];

impl Kind {
    /// Its row of [`FAMILIES`].
    fn family(self) -> &'static Family {
        FAMILIES
            .iter()
            .find(|f| f.kind == self)
            .expect("a row per kind")
    }
}

/// The stream one chunk lane is assembling.
#[derive(Debug, Clone)]
struct Pending {
    kind: Kind,
    id: String,
    /// Text: the established role (explicit or the assistant default).
    role: String,
    name: Option<String>,
    tool_name: String,
    parent: Option<String>,
    /// The opening chunk's own `subagentRunId`.
    tag: Owner,
}

/// The client's per-stream state, as `transformChunks` and `verifyEvents` keep it.
#[derive(Debug, Clone, Default)]
struct Mirror {
    first: bool,
    run_started: bool,
    run_finished: bool,
    run_error: bool,
    text: OrdSet,
    tools: OrdSet,
    spans: OrdSet,
    rmsgs: OrdSet,
    own_msg: HashMap<String, Owner>,
    own_tool: HashMap<String, Owner>,
    own_act: HashMap<String, Owner>,
    own_reason: HashMap<String, Owner>,
    /// owner -> step names, both insertion-ordered (JS nested `Map`s).
    steps: Vec<(Owner, Vec<String>)>,
    subs: OrdSet,
    subs_closed: HashSet<String>,
    /// owner -> pending stream, insertion-ordered (JS `Map`).
    lanes: Vec<(Owner, Pending)>,
}

/// A tiny event builder.
struct E(Map<String, Value>);

impl E {
    fn new(event_type: &str) -> Self {
        let mut m = Map::new();
        m.insert("type".into(), Value::String(event_type.to_owned()));
        E(m)
    }
    fn s(mut self, key: &str, value: impl Into<String>) -> Self {
        self.0.insert(key.to_owned(), Value::String(value.into()));
        self
    }
    fn v(mut self, key: &str, value: Value) -> Self {
        self.0.insert(key.to_owned(), value);
        self
    }
    fn os(mut self, key: &str, value: Option<&str>) -> Self {
        if let Some(value) = value {
            self.0
                .insert(key.to_owned(), Value::String(value.to_owned()));
        }
        self
    }
    fn tag(self, tag: &Owner) -> Self {
        self.os("subagentRunId", tag.as_deref())
    }
    fn ov(mut self, key: &str, value: Option<Value>) -> Self {
        if let Some(value) = value {
            self.0.insert(key.to_owned(), value);
        }
        self
    }
    fn done(self) -> Value {
        Value::Object(self.0)
    }
}

/// The compatibility boundary's legacy-null conversions (the ones that matter here).
fn compat(raw: &Value) -> Value {
    let mut e = raw.clone();
    if let Some(o) = e.as_object_mut() {
        let t = o
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if o.get("rawEvent") == Some(&Value::Null) {
            o.remove("rawEvent");
        }
        if (t == "RUN_FINISHED" || t == "SUBAGENT_FINISHED")
            && o.get("result") == Some(&Value::Null)
        {
            o.remove("result");
        }
        if (t == "TOOL_CALL_START" || t == "TOOL_CALL_CHUNK")
            && o.get("parentMessageId") == Some(&Value::Null)
        {
            o.remove("parentMessageId");
        }
        if t == "RUN_FINISHED" && o.get("outcome") == Some(&Value::Null) {
            o.remove("outcome");
        }
    }
    e
}

impl Mirror {
    /// Runs one wire event through the model. `Ok` holds what reaches the
    /// application (after expansion); `Err` the client's error message.
    fn feed(&mut self, raw: &Value) -> Result<Vec<Value>, String> {
        let event = compat(raw);
        if !KNOWN_TYPES.contains(&ty(&event)) {
            return Ok(Vec::new());
        }
        let expanded = self.transform(&event)?;
        for e in &expanded {
            self.verify(e)?;
        }
        Ok(expanded)
    }

    fn lane(&self, owner: &Owner) -> Option<&Pending> {
        self.lanes.iter().find(|(o, _)| o == owner).map(|(_, p)| p)
    }

    fn lane_holding(&self, kind: Kind, id: &str) -> Option<Owner> {
        self.lanes
            .iter()
            .find(|(_, p)| p.kind == kind && p.id == id)
            .map(|(o, _)| o.clone())
    }

    fn lane_held(&self, kind: Kind, id: &str) -> bool {
        self.lane_holding(kind, id).is_some()
    }

    fn close_lane(&mut self, owner: &Owner) -> Vec<Value> {
        let Some(pos) = self.lanes.iter().position(|(o, _)| o == owner) else {
            return Vec::new();
        };
        let (_, p) = self.lanes.remove(pos);
        vec![
            E::new(p.kind.family().end)
                .s(p.kind.family().id_field, p.id)
                .tag(&p.tag)
                .done(),
        ]
    }

    fn close_all_lanes(&mut self) -> Vec<Value> {
        let owners: Vec<Owner> = self.lanes.iter().map(|(o, _)| o.clone()).collect();
        owners.iter().flat_map(|o| self.close_lane(o)).collect()
    }

    fn resolve_lane(&self, kind: Kind, id: Option<&str>, tag: &Owner) -> Result<Owner, String> {
        if let Some(id) = id {
            if let Some(holder) = self.lane_holding(kind, id) {
                if let Some(t) = tag
                    && Some(t) != holder.as_ref()
                {
                    return Err(format!(
                        "Cannot continue {} '{id}': chunk subagentRunId '{t}' does not match the open stream's subagent '{}'.",
                        kind.family().entity,
                        who(&holder)
                    ));
                }
                return Ok(holder);
            }
            return Ok(tag.clone());
        }
        if tag.is_some() {
            return Ok(tag.clone());
        }
        if self.lane(&None).is_some_and(|p| p.kind == kind) {
            return Ok(None);
        }
        let candidates: Vec<&Owner> = self
            .lanes
            .iter()
            .filter(|(_, p)| p.kind == kind)
            .map(|(o, _)| o)
            .collect();
        match candidates.len() {
            0 => Ok(None),
            1 => Ok(candidates[0].clone()),
            n => Err(format!(
                "Ambiguous {}: it carries neither a {} nor a subagentRunId, but {n} lanes have an open {}. Attribute the chunk to the subagent it belongs to.",
                kind.family().chunk,
                kind.family().id_field,
                kind.family().entity
            )),
        }
    }

    fn transform(&mut self, e: &Value) -> Result<Vec<Value>, String> {
        match ty(e) {
            "TEXT_MESSAGE_START"
            | "TEXT_MESSAGE_CONTENT"
            | "TEXT_MESSAGE_END"
            | "TOOL_CALL_START"
            | "TOOL_CALL_ARGS"
            | "TOOL_CALL_END"
            | "TOOL_CALL_RESULT"
            | "STATE_SNAPSHOT"
            | "STATE_DELTA"
            | "CUSTOM"
            | "STEP_STARTED"
            | "STEP_FINISHED"
            | "REASONING_START"
            | "REASONING_MESSAGE_START"
            | "REASONING_MESSAGE_CONTENT"
            | "REASONING_MESSAGE_END"
            | "REASONING_END" => {
                let mut out = self.close_lane(&tag_of(e));
                out.push(e.clone());
                Ok(out)
            }
            "RUN_STARTED" | "RUN_FINISHED" | "RUN_ERROR" | "MESSAGES_SNAPSHOT" => {
                let mut out = self.close_all_lanes();
                out.push(e.clone());
                Ok(out)
            }
            "SUBAGENT_FINISHED" | "SUBAGENT_ERROR" => {
                let mut out = match sget(e, "subagentRunId") {
                    Some(id) => self.close_lane(&Some(id.to_owned())),
                    None => Vec::new(),
                };
                out.push(e.clone());
                Ok(out)
            }
            "TEXT_MESSAGE_CHUNK" => self.chunk(e, Kind::Text),
            "TOOL_CALL_CHUNK" => self.chunk(e, Kind::Tool),
            "REASONING_MESSAGE_CHUNK" => self.chunk(e, Kind::Reasoning),
            _ => Ok(vec![e.clone()]),
        }
    }

    fn chunk(&mut self, e: &Value, kind: Kind) -> Result<Vec<Value>, String> {
        let id = sget(e, kind.family().id_field);
        let tag = tag_of(e);
        let lane = self.resolve_lane(kind, id, &tag)?;
        let mut out = Vec::new();
        let open = self.lane(&lane).cloned();
        let fields = match open {
            Some(p) if p.kind == kind && (id.is_none() || id == Some(p.id.as_str())) => {
                let agree = |field: &str, incoming: Option<&str>, established: Option<&str>| {
                    match incoming {
                        Some(inc) if Some(inc) != established => Err(format!(
                            "Cannot continue {} '{}': chunk {field} '{inc}' does not match the open stream's {field} {}.",
                            kind.family().entity,
                            p.id,
                            established.map_or_else(|| "(absent)".to_owned(), |s| format!("'{s}'"))
                        )),
                        _ => Ok(()),
                    }
                };
                match kind {
                    Kind::Text => {
                        agree("role", sget(e, "role"), Some(&p.role))?;
                        agree("name", sget(e, "name"), p.name.as_deref())?;
                    }
                    Kind::Tool => {
                        agree("toolCallName", sget(e, "toolCallName"), Some(&p.tool_name))?;
                        agree(
                            "parentMessageId",
                            sget(e, "parentMessageId"),
                            p.parent.as_deref(),
                        )?;
                    }
                    Kind::Reasoning => {}
                }
                p
            }
            _ => {
                out.extend(self.close_lane(&lane));
                let Some(id) = id else {
                    return Err(format!(
                        "First {} must have a {}",
                        kind.family().chunk,
                        kind.family().id_field
                    ));
                };
                if kind == Kind::Tool && sget(e, "toolCallName").is_none() {
                    return Err("First TOOL_CALL_CHUNK must have a toolCallName".to_owned());
                }
                let p = Pending {
                    kind,
                    id: id.to_owned(),
                    role: sget(e, "role").unwrap_or("assistant").to_owned(),
                    name: sget(e, "name").map(str::to_owned),
                    tool_name: sget(e, "toolCallName").unwrap_or("").to_owned(),
                    parent: sget(e, "parentMessageId").map(str::to_owned),
                    tag: tag.clone(),
                };
                self.lanes.push((lane, p.clone()));
                let start = E::new(kind.family().start).s(kind.family().id_field, id);
                let start = match kind {
                    Kind::Text => start
                        .s("role", p.role.clone())
                        .os("name", p.name.as_deref()),
                    Kind::Tool => start
                        .s("toolCallName", p.tool_name.clone())
                        .os("parentMessageId", p.parent.as_deref()),
                    Kind::Reasoning => start.s("role", "reasoning"),
                };
                out.push(
                    start
                        .tag(&tag)
                        .ov("metadata", e.get("metadata").cloned())
                        .done(),
                );
                p
            }
        };
        let content_type = kind.family().content;
        let owner = if tag.is_some() {
            tag
        } else {
            fields.tag.clone()
        };
        let delta = e.get("delta");
        let raw = e.get("rawEvent");
        let metadata = e.get("metadata");
        if delta.is_some() || raw.is_some() || (out.is_empty() && metadata.is_some()) {
            out.push(
                E::new(content_type)
                    .s(kind.family().id_field, fields.id)
                    .v(
                        "delta",
                        delta
                            .cloned()
                            .unwrap_or_else(|| Value::String(String::new())),
                    )
                    .tag(&owner)
                    .ov("metadata", metadata.cloned())
                    .ov("rawEvent", raw.cloned())
                    .done(),
            );
        }
        Ok(out)
    }

    fn reset(&mut self) {
        *self = Mirror {
            first: true,
            run_started: true,
            ..Mirror::default()
        };
    }

    fn steps_for(&mut self, owner: &Owner) -> &mut Vec<String> {
        let pos = match self.steps.iter().position(|(o, _)| o == owner) {
            Some(pos) => pos,
            None => {
                self.steps.push((owner.clone(), Vec::new()));
                self.steps.len() - 1
            }
        };
        &mut self.steps[pos].1
    }

    fn step_active(&self, owner: &Owner, name: &str) -> bool {
        self.steps
            .iter()
            .any(|(o, names)| o == owner && names.iter().any(|n| n == name))
    }

    fn active_steps(&self) -> Vec<(Owner, String)> {
        self.steps
            .iter()
            .flat_map(|(o, names)| names.iter().map(move |n| (o.clone(), n.clone())))
            .collect()
    }

    fn seed(&mut self, messages: Option<&Value>, authoritative: bool) {
        let Some(messages) = messages.and_then(Value::as_array) else {
            return;
        };
        for msg in messages {
            let Some(id) = sget(msg, "id") else { continue };
            let role = sget(msg, "role").unwrap_or("");
            if !KNOWN_ROLES.contains(&role) {
                continue; // enforcement drops an unrecognised message
            }
            let owner = tag_of(msg);
            let bucket = match role {
                "reasoning" => &mut self.own_reason,
                "activity" => &mut self.own_act,
                _ => &mut self.own_msg,
            };
            if authoritative || !bucket.contains_key(id) {
                bucket.insert(id.to_owned(), owner.clone());
            }
            if let Some(calls) = msg.get("toolCalls").and_then(Value::as_array) {
                for call in calls {
                    if let Some(cid) = sget(call, "id")
                        && (authoritative || !self.own_tool.contains_key(cid))
                    {
                        self.own_tool.insert(cid.to_owned(), owner.clone());
                    }
                }
            }
        }
    }

    fn tag_error(
        t: &str,
        tag: &Owner,
        owner: Option<&Owner>,
        kind: &str,
        id: &str,
    ) -> Result<(), String> {
        match (tag, owner) {
            (Some(tag), Some(owner)) if owner.as_deref() != Some(tag.as_str()) => Err(format!(
                "Cannot send '{t}': subagentRunId '{tag}' does not match the {kind} '{id}' opener's subagent '{}'.",
                who(owner)
            )),
            _ => Ok(()),
        }
    }

    fn verify(&mut self, e: &Value) -> Result<(), String> {
        let t = ty(e).to_owned();
        let t = t.as_str();
        if self.run_error && t != "RUN_STARTED" {
            return Err(format!(
                "Cannot send event type '{t}': The run has already errored with 'RUN_ERROR'. No further events can be sent."
            ));
        }
        if self.run_finished && t != "RUN_ERROR" && t != "RUN_STARTED" {
            return Err(format!(
                "Cannot send event type '{t}': The run has already finished with 'RUN_FINISHED'. Start a new run with 'RUN_STARTED'."
            ));
        }
        if !self.first {
            self.first = true;
            if t != "RUN_STARTED" && t != "RUN_ERROR" {
                return Err("First event must be 'RUN_STARTED'".to_owned());
            }
        } else if t == "RUN_STARTED" {
            if self.run_started && !self.run_finished && !self.run_error {
                return Err("Cannot send 'RUN_STARTED' while a run is still active. The previous run must be finished with 'RUN_FINISHED' before starting a new run.".to_owned());
            }
            if self.run_finished || self.run_error {
                self.reset();
            }
        }
        let tag = tag_of(e);
        let id = |key: &str| sget(e, key).unwrap_or("").to_owned();
        match t {
            "TEXT_MESSAGE_START" => {
                let id = id("messageId");
                if self.text.has(&id) {
                    return Err(format!(
                        "Cannot send 'TEXT_MESSAGE_START' event: A text message with ID '{id}' is already in progress. Complete it with 'TEXT_MESSAGE_END' first."
                    ));
                }
                let existing = self.own_msg.get(&id).cloned();
                Self::tag_error(t, &tag, existing.as_ref(), "message", &id)?;
                self.text.add(&id);
                self.own_msg.entry(id).or_insert(tag);
            }
            "TEXT_MESSAGE_CONTENT" | "TEXT_MESSAGE_END" => {
                let id = id("messageId");
                if !self.text.has(&id) {
                    return Err(if t == "TEXT_MESSAGE_CONTENT" {
                        format!(
                            "Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID '{id}'. Start a text message with 'TEXT_MESSAGE_START' first."
                        )
                    } else {
                        format!(
                            "Cannot send 'TEXT_MESSAGE_END' event: No active text message found with ID '{id}'. A 'TEXT_MESSAGE_START' event must be sent first."
                        )
                    });
                }
                Self::tag_error(t, &tag, self.own_msg.get(&id), "message", &id)?;
                if t == "TEXT_MESSAGE_END" {
                    self.text.delete(&id);
                }
            }
            "TOOL_CALL_START" => {
                let id = id("toolCallId");
                if self.tools.has(&id) {
                    return Err(format!(
                        "Cannot send 'TOOL_CALL_START' event: A tool call with ID '{id}' is already in progress. Complete it with 'TOOL_CALL_END' first."
                    ));
                }
                let parent = sget(e, "parentMessageId");
                let mut inherited: Option<Owner> = None;
                if let Some(parent) = parent
                    && let Some(parent_owner) = self.own_msg.get(parent)
                {
                    if tag.is_some() && tag != *parent_owner {
                        return Err(format!(
                            "Cannot send 'TOOL_CALL_START': subagentRunId '{}' does not match its parent message '{parent}' owner '{}'. A tool call belongs to the message that carries it.",
                            tag.as_deref().unwrap_or(""),
                            who(parent_owner)
                        ));
                    }
                    inherited = Some(parent_owner.clone());
                }
                let existing = self.own_tool.get(&id).cloned();
                if let Some(existing) = &existing {
                    Self::tag_error(t, &tag, Some(existing), "tool call", &id)?;
                    if let (None, Some(inherited)) = (&tag, &inherited)
                        && inherited != existing
                    {
                        return Err(format!(
                            "Cannot send 'TOOL_CALL_START': tool call '{id}' is owned by '{}' but its parent message '{}' is owned by '{}'. A tool call belongs to the message that carries it.",
                            who(existing),
                            parent.unwrap_or(""),
                            who(inherited)
                        ));
                    }
                }
                self.tools.add(&id);
                if existing.is_none() {
                    let owner = if tag.is_some() {
                        tag
                    } else {
                        inherited.unwrap_or(None)
                    };
                    self.own_tool.insert(id, owner);
                }
            }
            "TOOL_CALL_ARGS" | "TOOL_CALL_END" => {
                let id = id("toolCallId");
                if !self.tools.has(&id) {
                    return Err(if t == "TOOL_CALL_ARGS" {
                        format!(
                            "Cannot send 'TOOL_CALL_ARGS' event: No active tool call found with ID '{id}'. Start a tool call with 'TOOL_CALL_START' first."
                        )
                    } else {
                        format!(
                            "Cannot send 'TOOL_CALL_END' event: No active tool call found with ID '{id}'. A 'TOOL_CALL_START' event must be sent first."
                        )
                    });
                }
                Self::tag_error(t, &tag, self.own_tool.get(&id), "tool call", &id)?;
                if t == "TOOL_CALL_END" {
                    self.tools.delete(&id);
                }
            }
            "STEP_STARTED" => {
                let name = id("stepName");
                if self.steps_for(&tag).contains(&name) {
                    let suffix = tag
                        .as_ref()
                        .map(|o| format!(" in subagent '{o}'"))
                        .unwrap_or_default();
                    return Err(format!(
                        "Step \"{name}\" is already active for 'STEP_STARTED'{suffix}"
                    ));
                }
                self.steps_for(&tag).push(name);
            }
            "STEP_FINISHED" => {
                let name = id("stepName");
                if !self.steps_for(&tag).contains(&name) {
                    let other = self
                        .steps
                        .iter()
                        .find(|(o, names)| *o != tag && names.contains(&name))
                        .map(|(o, _)| o.clone());
                    let label = |o: &Owner| match o {
                        Some(o) => format!("subagent '{o}'"),
                        None => "the parent agent".to_owned(),
                    };
                    return Err(match other {
                        Some(other) => format!(
                            "Cannot send 'STEP_FINISHED' for step \"{name}\" attributed to {}: that step is open under {}. A step must be finished by whoever started it.",
                            label(&tag),
                            label(&other)
                        ),
                        None => format!(
                            "Cannot send 'STEP_FINISHED' for step \"{name}\" that was not started"
                        ),
                    });
                }
                self.steps_for(&tag).retain(|n| *n != name);
            }
            "ACTIVITY_SNAPSHOT" => {
                let id = id("messageId");
                let is_new = !self.own_act.contains_key(&id);
                if is_new || e.get("replace") != Some(&Value::Bool(false)) {
                    self.own_act.insert(id, tag);
                }
            }
            "TOOL_CALL_RESULT" => {
                if let Some(mid) = sget(e, "messageId") {
                    self.own_msg.insert(mid.to_owned(), tag);
                }
            }
            "REASONING_START" | "REASONING_MESSAGE_START" => {
                let id = id("messageId");
                let span = t == "REASONING_START";
                let open = if span { &self.spans } else { &self.rmsgs };
                if open.has(&id) {
                    return Err(if span {
                        format!(
                            "Cannot send 'REASONING_START' event: A reasoning span with ID '{id}' is already in progress. Complete it with 'REASONING_END' first."
                        )
                    } else {
                        format!(
                            "Cannot send 'REASONING_MESSAGE_START' event: A reasoning message with ID '{id}' is already in progress. Complete it with 'REASONING_MESSAGE_END' first."
                        )
                    });
                }
                let existing = self.own_reason.get(&id).cloned();
                Self::tag_error(t, &tag, existing.as_ref(), "reasoning message", &id)?;
                if span {
                    self.spans.add(&id);
                } else {
                    self.rmsgs.add(&id);
                }
                self.own_reason.entry(id).or_insert(tag);
            }
            "REASONING_MESSAGE_CONTENT" | "REASONING_MESSAGE_END" | "REASONING_END" => {
                let id = id("messageId");
                let span = t == "REASONING_END";
                let open = if span { &self.spans } else { &self.rmsgs };
                if !open.has(&id) {
                    return Err(if span {
                        format!(
                            "Cannot send 'REASONING_END' event: No active reasoning span found with ID '{id}'. A 'REASONING_START' event must be sent first."
                        )
                    } else {
                        format!(
                            "Cannot send '{t}' event: No active reasoning message found with ID '{id}'. Start a reasoning message with 'REASONING_MESSAGE_START' first."
                        )
                    });
                }
                Self::tag_error(t, &tag, self.own_reason.get(&id), "reasoning message", &id)?;
                if span {
                    self.spans.delete(&id);
                } else if t == "REASONING_MESSAGE_END" {
                    self.rmsgs.delete(&id);
                }
            }
            "REASONING_ENCRYPTED_VALUE" => {
                let id = id("entityId");
                let (owner, label) = match sget(e, "subtype") {
                    Some("tool-call") => (self.own_tool.get(&id), "tool call"),
                    Some("message") => (
                        self.own_msg.get(&id).or_else(|| self.own_reason.get(&id)),
                        "message",
                    ),
                    _ => (self.own_reason.get(&id), "reasoning message"),
                };
                Self::tag_error(t, &tag, owner, label, &id)?;
            }
            "ACTIVITY_DELTA" => {
                let id = id("messageId");
                Self::tag_error(t, &tag, self.own_act.get(&id), "activity", &id)?;
            }
            "SUBAGENT_STARTED" => {
                let sid = id("subagentRunId");
                if self.subs.has(&sid) {
                    return Err(format!(
                        "Cannot send 'SUBAGENT_STARTED': subagent '{sid}' is already active. Finish it with 'SUBAGENT_FINISHED' first."
                    ));
                }
                if self.subs_closed.contains(&sid) {
                    return Err(format!(
                        "Cannot send 'SUBAGENT_STARTED': subagent '{sid}' has already finished in this run. Subagent IDs are per-invocation and cannot be reused."
                    ));
                }
                if let Some(parent) = sget(e, "parentSubagentRunId")
                    && !self.subs.has(parent)
                    && !self.subs_closed.contains(parent)
                {
                    return Err(format!(
                        "Cannot send 'SUBAGENT_STARTED': parentSubagentRunId '{parent}' has not been started in this run."
                    ));
                }
                self.subs.add(&sid);
            }
            "SUBAGENT_FINISHED" | "SUBAGENT_ERROR" => {
                let sid = id("subagentRunId");
                if !self.subs.has(&sid) {
                    return Err(format!(
                        "Cannot send '{t}': no active subagent found with ID '{sid}'. A 'SUBAGENT_STARTED' event must be sent first."
                    ));
                }
                self.subs.delete(&sid);
                self.subs_closed.insert(sid);
            }
            "MESSAGES_SNAPSHOT" => self.seed(e.get("messages"), true),
            "RUN_STARTED" => {
                self.run_started = true;
                self.seed(e.get("input").and_then(|i| i.get("messages")), false);
            }
            "RUN_FINISHED" => {
                if self.steps.iter().any(|(_, names)| !names.is_empty()) {
                    let parts: Vec<String> = self
                        .active_steps()
                        .into_iter()
                        .map(|(o, n)| match o {
                            Some(o) => format!("{n} (subagent '{o}')"),
                            None => n,
                        })
                        .collect();
                    return Err(format!(
                        "Cannot send 'RUN_FINISHED' while steps are still active: {}",
                        parts.join(", ")
                    ));
                }
                let checks = [
                    (&self.text, "text messages"),
                    (&self.rmsgs, "reasoning messages"),
                    (&self.spans, "reasoning spans"),
                    (&self.tools, "tool calls"),
                    (&self.subs, "subagents"),
                ];
                for (set, what) in checks {
                    if !set.is_empty() {
                        return Err(format!(
                            "Cannot send 'RUN_FINISHED' while {what} are still active: {}",
                            set.joined()
                        ));
                    }
                }
                self.run_finished = true;
            }
            "RUN_ERROR" => self.run_error = true,
            _ => {}
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Vocabulary
// ---------------------------------------------------------------------------

const FRAGMENTS: &[&str] = &[
    "Hello",
    " world",
    "The",
    " quick",
    " brown",
    " fox",
    ",",
    ".",
    " ",
    "",
    "",
    "naïve",
    " café",
    " 日本語",
    " 中文字符",
    " русский",
    " עברית",
    " العربية",
    " 🙂",
    "👩‍👩‍👧",
    " 𝄞",
    " \u{1F600}",
    "line\nbreak",
    "\ttab",
    " \"quoted\"",
    " back\\slash",
    " <b>&amp;</b>",
    "e\u{301}",
    " \u{200B}",
    " 0",
    " {\"not\":\"json\"}",
    " ~/a/b",
    " %s %d",
    "\u{7f}",
    "\u{0}",
    " \u{FEFF}",
    " ∑∫√",
];
const TOOL_NAMES: &[&str] = &[
    "search",
    "get_weather",
    "calculator",
    "lookup_user",
    "send_email",
    "read_file",
    "工具",
    "render_chart",
];
const STEP_NAMES: &[&str] = &[
    "plan",
    "tools",
    "act",
    "reflect",
    "summarize",
    "retrieve",
    "步骤",
];
const SUBAGENT_NAMES: &[&str] = &["researcher", "coder", "critic", "planner", "翻译"];
const ACTIVITY_TYPES: &[&str] = &["PLAN", "SEARCH_PROGRESS", "progress", "a2ui-surface"];
const CUSTOM_NAMES: &[&str] = &["PredictState", "on_interrupt", "acme:ping", "app.telemetry"];
const SPEAKERS: &[&str] = &["alice", "Bob", "assistant-2", "Zoë"];
const TEXT_ROLES: &[&str] = &["assistant", "user", "system", "developer"];

// ---------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------

/// One way to break a stream that the 1.0.0 client rejects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    FirstNotRunStarted,
    NestedRunStarted,
    AfterRunFinished,
    AfterRunError,
    FinishOpenSteps,
    FinishOpenText,
    FinishOpenReasoningMessage,
    FinishOpenReasoningSpan,
    FinishOpenTool,
    FinishOpenSubagent,
    DupTextStart,
    DupToolStart,
    DupReasoningSpan,
    DupReasoningMessage,
    TextContentNoStart,
    TextEndNoStart,
    ToolArgsNoStart,
    ToolEndNoStart,
    ReasoningContentNoStart,
    ReasoningMessageEndNoStart,
    ReasoningEndNoSpan,
    StepNotStarted,
    StepOtherOwner,
    StepDuplicate,
    SubagentTerminalUnknown,
    SubagentDuplicate,
    SubagentReused,
    SubagentParentUnknown,
    TagMismatchMessage,
    TagMismatchToolCall,
    TagMismatchReasoning,
    TagMismatchActivity,
    ToolParentOwnerMismatch,
    ToolReopenParentOwner,
    ChunkTextNoId,
    ChunkToolNoId,
    ChunkToolNoName,
    ChunkReasoningNoId,
    ChunkConflictRole,
    ChunkConflictName,
    ChunkConflictToolName,
    ChunkConflictParent,
    ChunkLaneOwner,
    ChunkAmbiguous,
}

impl Fault {
    const ALL: [Fault; 44] = [
        Fault::FirstNotRunStarted,
        Fault::NestedRunStarted,
        Fault::AfterRunFinished,
        Fault::AfterRunError,
        Fault::FinishOpenSteps,
        Fault::FinishOpenText,
        Fault::FinishOpenReasoningMessage,
        Fault::FinishOpenReasoningSpan,
        Fault::FinishOpenTool,
        Fault::FinishOpenSubagent,
        Fault::DupTextStart,
        Fault::DupToolStart,
        Fault::DupReasoningSpan,
        Fault::DupReasoningMessage,
        Fault::TextContentNoStart,
        Fault::TextEndNoStart,
        Fault::ToolArgsNoStart,
        Fault::ToolEndNoStart,
        Fault::ReasoningContentNoStart,
        Fault::ReasoningMessageEndNoStart,
        Fault::ReasoningEndNoSpan,
        Fault::StepNotStarted,
        Fault::StepOtherOwner,
        Fault::StepDuplicate,
        Fault::SubagentTerminalUnknown,
        Fault::SubagentDuplicate,
        Fault::SubagentReused,
        Fault::SubagentParentUnknown,
        Fault::TagMismatchMessage,
        Fault::TagMismatchToolCall,
        Fault::TagMismatchReasoning,
        Fault::TagMismatchActivity,
        Fault::ToolParentOwnerMismatch,
        Fault::ToolReopenParentOwner,
        Fault::ChunkTextNoId,
        Fault::ChunkToolNoId,
        Fault::ChunkToolNoName,
        Fault::ChunkReasoningNoId,
        Fault::ChunkConflictRole,
        Fault::ChunkConflictName,
        Fault::ChunkConflictToolName,
        Fault::ChunkConflictParent,
        Fault::ChunkLaneOwner,
        Fault::ChunkAmbiguous,
    ];

    /// The [`TS_TEMPLATES`] key the client's error must match.
    fn template(self) -> &'static str {
        match self {
            Fault::FirstNotRunStarted => "verify.first_event",
            Fault::NestedRunStarted => "verify.run_active",
            Fault::AfterRunFinished => "verify.run_finished",
            Fault::AfterRunError => "verify.run_errored",
            Fault::FinishOpenSteps => "verify.finish_open_steps",
            Fault::FinishOpenText => "verify.finish_open_text",
            Fault::FinishOpenReasoningMessage => "verify.finish_open_reasoning_messages",
            Fault::FinishOpenReasoningSpan => "verify.finish_open_reasoning_spans",
            Fault::FinishOpenTool => "verify.finish_open_tool_calls",
            Fault::FinishOpenSubagent => "verify.finish_open_subagents",
            Fault::DupTextStart => "verify.text_duplicate",
            Fault::DupToolStart => "verify.tool_duplicate",
            Fault::DupReasoningSpan => "verify.span_duplicate",
            Fault::DupReasoningMessage => "verify.reasoning_duplicate",
            Fault::TextContentNoStart => "verify.text_content_unstarted",
            Fault::TextEndNoStart => "verify.text_end_unstarted",
            Fault::ToolArgsNoStart => "verify.tool_args_unstarted",
            Fault::ToolEndNoStart => "verify.tool_end_unstarted",
            Fault::ReasoningContentNoStart => "verify.reasoning_content_unstarted",
            Fault::ReasoningMessageEndNoStart => "verify.reasoning_end_unstarted",
            Fault::ReasoningEndNoSpan => "verify.span_end_unstarted",
            Fault::StepNotStarted => "verify.step_unstarted",
            Fault::StepOtherOwner => "verify.step_other_owner",
            Fault::StepDuplicate => "verify.step_duplicate",
            Fault::SubagentTerminalUnknown => "verify.subagent_terminal_unknown",
            Fault::SubagentDuplicate => "verify.subagent_duplicate",
            Fault::SubagentReused => "verify.subagent_reused",
            Fault::SubagentParentUnknown => "verify.subagent_parent_unknown",
            Fault::TagMismatchMessage => "verify.tag_message",
            Fault::TagMismatchToolCall => "verify.tag_tool_call",
            Fault::TagMismatchReasoning => "verify.tag_reasoning",
            Fault::TagMismatchActivity => "verify.tag_activity",
            Fault::ToolParentOwnerMismatch => "verify.tool_parent_tag",
            Fault::ToolReopenParentOwner => "verify.tool_reopen_parent_owner",
            Fault::ChunkTextNoId => "chunk.text_without_id",
            Fault::ChunkToolNoId => "chunk.tool_without_id",
            Fault::ChunkToolNoName => "chunk.tool_without_name",
            Fault::ChunkReasoningNoId => "chunk.reasoning_without_id",
            Fault::ChunkConflictRole => "chunk.conflict_role",
            Fault::ChunkConflictName => "chunk.conflict_name",
            Fault::ChunkConflictToolName => "chunk.conflict_tool_name",
            Fault::ChunkConflictParent => "chunk.conflict_parent",
            Fault::ChunkLaneOwner => "chunk.lane_owner",
            Fault::ChunkAmbiguous => "chunk.ambiguous",
        }
    }
}

/// A 1.1 rule the 1.0.0 client does not enforce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SpecFault {
    RunStartedThread,
    RunFinishedRunId,
    RunFinishedThread,
    DuplicateInterruptIds,
}

impl SpecFault {
    const ALL: [SpecFault; 4] = [
        SpecFault::RunStartedThread,
        SpecFault::RunFinishedRunId,
        SpecFault::RunFinishedThread,
        SpecFault::DuplicateInterruptIds,
    ];

    fn key(self) -> &'static str {
        match self {
            SpecFault::RunStartedThread => "spec.run_started_thread",
            SpecFault::RunFinishedRunId => "spec.run_finished_run_id",
            SpecFault::RunFinishedThread => "spec.run_finished_thread",
            SpecFault::DuplicateInterruptIds => "spec.duplicate_interrupt_ids",
        }
    }

    /// A fragment of the message later clients (and the .NET SDK) fail with.
    fn fragment(self) -> &'static str {
        match self {
            SpecFault::RunStartedThread => "this stream belongs to thread",
            SpecFault::RunFinishedRunId => "must agree on their runId",
            SpecFault::RunFinishedThread => "boundary events carry the input's threadId",
            SpecFault::DuplicateInterruptIds => "An interrupt id is unique within the run",
        }
    }
}

// ---------------------------------------------------------------------------
// The generator
// ---------------------------------------------------------------------------

/// A message as the generator approximately tracks the consumer's list.
#[derive(Debug, Clone)]
struct Msg {
    id: String,
    role: String,
    owner: Owner,
    name: Option<String>,
    content: Value,
    /// (id, name, arguments)
    tool_calls: Vec<(String, String, String)>,
    tool_call_id: String,
    activity_type: String,
}

impl Msg {
    fn new(id: &str, role: &str, owner: Owner) -> Self {
        Msg {
            id: id.to_owned(),
            role: role.to_owned(),
            owner,
            name: None,
            content: Value::String(String::new()),
            tool_calls: Vec::new(),
            tool_call_id: String::new(),
            activity_type: String::new(),
        }
    }

    fn from_json(v: &Value) -> Option<Msg> {
        let id = sget(v, "id")?;
        let role = sget(v, "role")?;
        if !KNOWN_ROLES.contains(&role) {
            return None;
        }
        let mut m = Msg::new(id, role, tag_of(v));
        m.name = sget(v, "name").map(str::to_owned);
        m.content = v
            .get("content")
            .cloned()
            .unwrap_or(Value::String(String::new()));
        m.tool_call_id = sget(v, "toolCallId").unwrap_or("").to_owned();
        m.activity_type = sget(v, "activityType").unwrap_or("").to_owned();
        if let Some(calls) = v.get("toolCalls").and_then(Value::as_array) {
            for c in calls {
                let f = c.get("function");
                m.tool_calls.push((
                    sget(c, "id").unwrap_or("").to_owned(),
                    f.and_then(|f| sget(f, "name")).unwrap_or("").to_owned(),
                    f.and_then(|f| sget(f, "arguments"))
                        .unwrap_or("")
                        .to_owned(),
                ));
            }
        }
        Some(m)
    }

    fn to_json(&self, owner: &Owner) -> Value {
        let text = || match &self.content {
            Value::String(s) => Value::String(s.clone()),
            _ => Value::String(String::new()),
        };
        let e = Map::new();
        let mut e = E(e).s("id", self.id.clone()).s("role", self.role.clone());
        e = match self.role.as_str() {
            "developer" | "system" => e.v("content", text()).os("name", self.name.as_deref()),
            "user" => e
                .v("content", self.content.clone())
                .os("name", self.name.as_deref()),
            "assistant" => {
                let mut e = e.os("name", self.name.as_deref());
                if self.content.as_str().is_some_and(|s| !s.is_empty()) {
                    e = e.v("content", text());
                }
                if !self.tool_calls.is_empty() {
                    let calls: Vec<Value> = self
                        .tool_calls
                        .iter()
                        .map(|(id, name, args)| {
                            json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
                        })
                        .collect();
                    e = e.v("toolCalls", Value::Array(calls));
                }
                e
            }
            "tool" => e
                .v("content", self.content.clone())
                .s("toolCallId", self.tool_call_id.clone()),
            "activity" => {
                let content = if self.content.is_object() {
                    self.content.clone()
                } else {
                    json!({})
                };
                e.s("activityType", self.activity_type.clone())
                    .v("content", content)
            }
            _ => e.v("content", text()),
        };
        e.tag(owner).done()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunEnd {
    Finished,
    FinishedThenError,
    Error,
    Truncated,
}

struct Gen {
    rng: StdRng,
    seed: u64,
    index: usize,
    m: Mirror,
    events: Vec<Value>,
    expanded: Vec<Value>,
    /// Feed events through the model (off once the fault is in).
    checking: bool,
    thread_id: String,
    final_run_id: String,
    run_id: String,
    prev_run_id: Option<String>,
    id_style: u8,
    counter: usize,
    used: HashSet<String>,
    features: BTreeSet<&'static str>,
    msgs: Vec<Msg>,
    initial_messages: Vec<Value>,
    initial_state: Value,
    state: Value,
    /// Text messages opened in this stream (explicitly or by chunks).
    text_ids: Vec<String>,
    /// Tool call id -> (planned arguments, how much was sent).
    tool_plan: HashMap<String, (String, usize)>,
    tool_names: HashMap<String, String>,
    tool_ids: Vec<String>,
    run_tool_ids: Vec<String>,
    answered: HashSet<String>,
    span_ids: Vec<String>,
    reasoning_ids: Vec<String>,
    activities: Vec<String>,
    attr_tags: Vec<String>,
    last_interrupts: Vec<String>,
    expected_error: Option<String>,
    fault_key: Option<&'static str>,
    template_key: Option<&'static str>,
    intended: Option<&'static str>,
    spec: Option<(SpecFault, usize)>,
    run_no: usize,
}

fn esc(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

impl Gen {
    fn new(mut rng: StdRng, seed: u64, index: usize) -> Self {
        let id_style = rng.random_range(0..3u8);
        let mut g = Gen {
            rng,
            seed,
            index,
            m: Mirror::default(),
            events: Vec::new(),
            expanded: Vec::new(),
            checking: true,
            thread_id: String::new(),
            final_run_id: String::new(),
            run_id: String::new(),
            prev_run_id: None,
            id_style,
            counter: 0,
            used: HashSet::new(),
            features: BTreeSet::new(),
            msgs: Vec::new(),
            initial_messages: Vec::new(),
            initial_state: json!({}),
            state: json!({}),
            text_ids: Vec::new(),
            tool_plan: HashMap::new(),
            tool_names: HashMap::new(),
            tool_ids: Vec::new(),
            run_tool_ids: Vec::new(),
            answered: HashSet::new(),
            span_ids: Vec::new(),
            reasoning_ids: Vec::new(),
            activities: Vec::new(),
            attr_tags: Vec::new(),
            last_interrupts: Vec::new(),
            expected_error: None,
            fault_key: None,
            template_key: None,
            intended: None,
            spec: None,
            run_no: 0,
        };
        g.thread_id = if g.p(0.05) {
            format!("thread-ü-{index}")
        } else {
            g.fresh("thread")
        };
        g.final_run_id = g.fresh("run");
        g
    }

    fn finish(self, class: StreamClass) -> GeneratedStream {
        let (template, expected) = match class {
            StreamClass::Broken => (self.template_key, self.expected_error),
            _ => (None, None),
        };
        let intended = match class {
            StreamClass::Valid => None,
            StreamClass::Malformed => Some(ZOD_MARKER),
            _ => self.intended,
        };
        GeneratedStream {
            id: format!("{:016x}-{}", self.seed, self.index),
            thread_id: self.thread_id,
            run_id: self.final_run_id,
            events: self.events,
            initial_messages: self.initial_messages,
            initial_state: self.initial_state,
            class,
            intended_error: intended,
            expected_error: expected,
            template,
            fault: self.fault_key,
            features: self.features,
            expanded: match class {
                StreamClass::Valid | StreamClass::SpecOnly => self.expanded,
                _ => Vec::new(),
            },
        }
    }

    // ----- randomness -----

    fn p(&mut self, probability: f64) -> bool {
        self.rng.random_bool(probability)
    }

    fn range(&mut self, lo: usize, hi: usize) -> usize {
        if hi <= lo {
            lo
        } else {
            self.rng.random_range(lo..hi)
        }
    }

    fn pick<T: Clone>(&mut self, xs: &[T]) -> Option<T> {
        xs.choose(&mut self.rng).cloned()
    }

    fn pick_str(&mut self, xs: &[&'static str]) -> &'static str {
        xs.choose(&mut self.rng).copied().unwrap_or("x")
    }

    fn feature(&mut self, name: &'static str) {
        self.features.insert(name);
    }

    fn fresh(&mut self, prefix: &str) -> String {
        loop {
            self.counter += 1;
            let mut id = match self.id_style {
                0 => format!("{prefix}-{}", self.counter),
                1 => {
                    let a: u32 = self.rng.random();
                    let b: u16 = self.rng.random();
                    let c: u64 = self.rng.random();
                    format!(
                        "{a:08x}-{b:04x}-4{:03x}-a{:03x}-{:012x}",
                        c & 0xfff,
                        (c >> 12) & 0xfff,
                        c >> 16
                    )
                }
                _ => format!("{prefix}_{:x}", self.rng.random::<u32>()),
            };
            if self.rng.random_bool(0.02) {
                id.push_str("-ü✓");
                self.features.insert("unicode_id");
            }
            if self.used.insert(id.clone()) {
                return id;
            }
        }
    }

    /// Like `fresh`, but occasionally the empty string (a legal opaque id).
    fn fresh_or_empty(&mut self, prefix: &str) -> String {
        if !self.used.contains("") && self.p(0.02) {
            self.used.insert(String::new());
            self.feature("empty_id");
            return String::new();
        }
        self.fresh(prefix)
    }

    fn text(&mut self) -> String {
        let n = self.range(0, 5);
        let mut s = String::new();
        for _ in 0..n {
            s.push_str(self.pick_str(FRAGMENTS));
        }
        if s.is_empty() {
            self.feature("empty_delta");
        } else if s.chars().any(|c| c as u32 > 0xFFFF) {
            self.feature("astral_text");
        }
        s
    }

    fn json_value(&mut self, depth: usize) -> Value {
        let r = self.range(0, if depth == 0 { 7 } else { 9 });
        match r {
            0 => Value::Null,
            1 => Value::Bool(self.p(0.5)),
            2 => {
                let n: i64 = *[0i64, 1, -1, 42, 9_007_199_254_740_991, -17, 1_000_000]
                    .choose(&mut self.rng)
                    .unwrap_or(&0);
                json!(n)
            }
            3 => json!(
                *[0.5f64, -2.25, 3.125, 1e-3]
                    .choose(&mut self.rng)
                    .unwrap_or(&0.5)
            ),
            4..=6 => Value::String(self.text()),
            7 => {
                let n = self.range(0, 4);
                Value::Array((0..n).map(|_| self.json_value(depth - 1)).collect())
            }
            _ => {
                let n = self.range(0, 4);
                let mut m = Map::new();
                for _ in 0..n {
                    let k =
                        self.pick_str(&["a", "b", "items", "", "a/b", "ti~lde", "ключ", "count"]);
                    let v = self.json_value(depth - 1);
                    m.insert(k.to_owned(), v);
                }
                Value::Object(m)
            }
        }
    }

    fn object(&mut self) -> Value {
        let mut m = Map::new();
        let n = self.range(1, 4);
        for _ in 0..n {
            let k = self.pick_str(&[
                "status", "progress", "items", "title", "ö", "a/b", "x~y", "nested",
            ]);
            let v = self.json_value(2);
            m.insert(k.to_owned(), v);
        }
        Value::Object(m)
    }

    fn metadata(&mut self) -> Value {
        let mut m = Map::new();
        let n = self.range(1, 3);
        for _ in 0..n {
            let k = self.pick_str(&[
                "finishReason",
                "model",
                "ag-ui",
                "trace",
                "score",
                "nullable",
            ]);
            let v = if k == "nullable" {
                Value::Null
            } else {
                self.json_value(1)
            };
            m.insert(k.to_owned(), v);
        }
        Value::Object(m)
    }

    fn usage(&mut self) -> Value {
        let input = self.range(0, 5000) as u64;
        let output = self.range(0, 2000) as u64;
        let mut u = json!({"provider": self.pick_str(&["openai", "anthropic", "google"]), "model": "m-1",
            "inputTokens": input, "outputTokens": output, "totalTokens": input + output});
        if self.p(0.4) {
            u["reasoningTokens"] = json!(output / 2);
        }
        if self.p(0.3) {
            u["cachedInputTokens"] = json!(input / 3);
            u["cacheWriteInputTokens"] = json!(0);
        }
        self.feature("usage");
        Value::Array(vec![u])
    }

    // ----- tags -----

    /// A tag for something new: mostly the parent, often an active subagent,
    /// sometimes attribution without any subagent lifecycle.
    fn pick_tag(&mut self) -> Owner {
        let r = self.range(0, 100);
        if r < 55 {
            return None;
        }
        let active = self.m.subs.0.clone();
        if r < 88 {
            return self.pick(&active);
        }
        let closed: Vec<String> = self
            .m
            .subs_closed
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if !closed.is_empty() && self.p(0.4) {
            self.feature("tag_of_finished_subagent");
            return self.pick(&closed);
        }
        self.feature("attribution_only_tag");
        Some(self.attr_tag())
    }

    fn attr_tag(&mut self) -> String {
        if self.attr_tags.len() < 2 || self.p(0.2) {
            let t = self.fresh_or_empty("attr");
            self.attr_tags.push(t.clone());
            t
        } else {
            let tags = self.attr_tags.clone();
            self.pick(&tags).unwrap_or_default()
        }
    }

    /// A tag for a continuation of an entity whose recorded owner is `owner`.
    fn cont_tag(&mut self, owner: Option<Owner>) -> Owner {
        match owner {
            Some(Some(o)) => {
                if self.p(0.6) {
                    Some(o)
                } else {
                    None
                }
            }
            Some(None) => None,
            None => self.pick_tag(),
        }
    }

    /// A tag that is present and differs from `owner`.
    fn other_tag(&mut self, owner: &Owner) -> String {
        let mut candidates: Vec<String> = self.m.subs.0.clone();
        candidates.extend(self.attr_tags.iter().cloned());
        candidates.retain(|c| Some(c) != owner.as_ref());
        if !candidates.is_empty() && self.p(0.7) {
            return self.pick(&candidates).unwrap_or_default();
        }
        loop {
            let t = self.attr_tag();
            if Some(&t) != owner.as_ref() {
                return t;
            }
        }
    }

    // ----- emission -----

    fn decorate(&mut self, ev: &mut Value) {
        if self.p(0.05) {
            let md = self.metadata();
            ev["metadata"] = md;
            self.feature("metadata");
        }
        if self.p(0.06) {
            ev["timestamp"] = json!(1_760_000_000_000i64 + self.range(0, 1_000_000) as i64);
        }
        if self.p(0.03) {
            let mut raw = self.json_value(2);
            if raw.is_null() {
                raw = json!({"provider": "x"});
            }
            ev["rawEvent"] = raw;
            self.feature("raw_event");
        } else if self.p(0.01) {
            ev["rawEvent"] = Value::Null;
            self.feature("legacy_null_raw_event");
        }
        if self.p(0.025) {
            let key = self.pick_str(&["futureField", "x_vendor", "trace_id"]);
            ev[key] = self.json_value(1);
            self.feature("unknown_property");
        }
        if self.p(0.3) {
            let t = ty(ev).to_owned();
            if [
                "RUN_STARTED",
                "RUN_FINISHED",
                "RUN_ERROR",
                "MESSAGES_SNAPSHOT",
            ]
            .contains(&t.as_str())
                && self.p(0.1)
            {
                ev["subagentRunId"] = json!("not-attributable");
                self.feature("tag_on_unattributable_event");
            }
        }
    }

    fn emit(&mut self, mut ev: Value) {
        self.decorate(&mut ev);
        self.push(ev);
    }

    fn push(&mut self, ev: Value) {
        if self.checking {
            match self.m.feed(&ev) {
                Ok(out) => {
                    self.note_lane_closes(&ev, &out);
                    for e in &out {
                        self.track(e);
                    }
                    self.expanded.extend(out);
                }
                Err(err) => panic!(
                    "streamgen bug (seed {:#x}, index {}): the generator's own model rejects {ev}: {err}\nevents so far: {}",
                    self.seed,
                    self.index,
                    Value::Array(self.events.clone())
                ),
            }
        }
        self.events.push(ev);
    }

    /// Notes when an event closed a chunk lane (its expansion starts with a
    /// synthesised `*_END` for another entity).
    fn note_lane_closes(&mut self, ev: &Value, out: &[Value]) {
        let t = ty(ev);
        let closes = out.len() > 1 && ty(&out[0]).ends_with("_END") && ty(&out[0]) != t;
        if !closes {
            return;
        }
        self.feature(match t {
            "TEXT_MESSAGE_CHUNK" | "TOOL_CALL_CHUNK" | "REASONING_MESSAGE_CHUNK" => {
                "chunk_closed_by_next_chunk"
            }
            "SUBAGENT_FINISHED" | "SUBAGENT_ERROR" => "chunk_closed_by_subagent_end",
            "RUN_FINISHED" | "RUN_ERROR" | "RUN_STARTED" | "MESSAGES_SNAPSHOT" => {
                "chunk_closed_by_run_level_event"
            }
            _ => "chunk_closed_by_explicit_event",
        });
    }

    /// Injects the faulty event(s): all but the last must pass, the last must
    /// fail with the fault's template.
    fn commit(&mut self, evs: Vec<Value>, key: &'static str, template_key: &'static str) {
        let mut probe = self.m.clone();
        let last = evs.len() - 1;
        for (i, e) in evs.iter().enumerate() {
            match probe.feed(e) {
                Ok(_) if i < last => {}
                Ok(_) => panic!(
                    "streamgen bug (seed {:#x}, index {}): fault {key} not rejected by the model: {e}\nevents: {}",
                    self.seed,
                    self.index,
                    Value::Array(self.events.clone())
                ),
                Err(err) => {
                    let tpl = template(template_key);
                    if i < last || classify_ts_error(&err) != Some(template_key) {
                        panic!(
                            "streamgen bug (seed {:#x}, index {}): fault {key} rejected with the wrong error at {e}: {err} (wanted {:?})\nevents: {}",
                            self.seed,
                            self.index,
                            tpl.fragments,
                            Value::Array(self.events.clone())
                        );
                    }
                    self.expected_error = Some(err);
                    self.intended = Some(tpl.fragments[0]);
                }
            }
        }
        self.checking = false;
        self.events.extend(evs);
        self.fault_key = Some(key);
        self.template_key = Some(template_key);
    }

    // ----- the consumer's view (approximate apply) -----

    fn find_msg(&mut self, id: &str) -> Option<&mut Msg> {
        self.msgs.iter_mut().find(|m| m.id == id)
    }

    fn track(&mut self, e: &Value) {
        let id = sget(e, "messageId").unwrap_or("").to_owned();
        match ty(e) {
            "TEXT_MESSAGE_START" if !self.msgs.iter().any(|m| m.id == id) => {
                let mut m = Msg::new(&id, sget(e, "role").unwrap_or("assistant"), tag_of(e));
                m.name = sget(e, "name").map(str::to_owned);
                self.msgs.push(m);
            }
            "TEXT_MESSAGE_CONTENT" | "REASONING_MESSAGE_CONTENT" => {
                let delta = sget(e, "delta").unwrap_or("").to_owned();
                if let Some(m) = self.find_msg(&id)
                    && let Value::String(s) = &mut m.content
                {
                    s.push_str(&delta);
                }
            }
            "REASONING_MESSAGE_START" if !self.msgs.iter().any(|m| m.id == id) => {
                self.msgs.push(Msg::new(&id, "reasoning", tag_of(e)));
            }
            "TOOL_CALL_START" => {
                let tc = sget(e, "toolCallId").unwrap_or("").to_owned();
                let name = sget(e, "toolCallName").unwrap_or("").to_owned();
                if self
                    .msgs
                    .iter()
                    .any(|m| m.tool_calls.iter().any(|c| c.0 == tc))
                {
                    return;
                }
                let parent = sget(e, "parentMessageId")
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned);
                let pos = parent.as_ref().and_then(|p| {
                    self.msgs
                        .iter()
                        .position(|m| m.id == *p && m.role == "assistant")
                });
                let pos = match pos {
                    Some(pos) => pos,
                    None => {
                        let exists = parent
                            .as_ref()
                            .is_some_and(|p| self.msgs.iter().any(|m| m.id == *p));
                        let mid: &str = match (&parent, exists) {
                            (Some(p), false) => p,
                            _ => &tc,
                        };
                        self.msgs.push(Msg::new(mid, "assistant", tag_of(e)));
                        self.msgs.len() - 1
                    }
                };
                self.msgs[pos].tool_calls.push((tc, name, String::new()));
            }
            "TOOL_CALL_ARGS" => {
                let tc = sget(e, "toolCallId").unwrap_or("");
                let delta = sget(e, "delta").unwrap_or("");
                if let Some(c) = self
                    .msgs
                    .iter_mut()
                    .flat_map(|m| m.tool_calls.iter_mut())
                    .find(|c| c.0 == tc)
                {
                    c.2.push_str(delta);
                }
            }
            "TOOL_CALL_RESULT" => {
                let mut m = Msg::new(&id, "tool", tag_of(e));
                m.content = e.get("content").cloned().unwrap_or(Value::Null);
                m.tool_call_id = sget(e, "toolCallId").unwrap_or("").to_owned();
                self.msgs.push(m);
            }
            "ACTIVITY_SNAPSHOT" => {
                let replace = e.get("replace") != Some(&Value::Bool(false));
                let content = e.get("content").cloned().unwrap_or(json!({}));
                let activity_type = sget(e, "activityType").unwrap_or("").to_owned();
                match self.msgs.iter().position(|m| m.id == id) {
                    None => {
                        let mut m = Msg::new(&id, "activity", tag_of(e));
                        m.content = content;
                        m.activity_type = activity_type;
                        self.msgs.push(m);
                    }
                    Some(pos) if replace => {
                        let m = &mut self.msgs[pos];
                        m.role = "activity".into();
                        m.content = content;
                        m.activity_type = activity_type;
                    }
                    Some(_) => {}
                }
            }
            "ACTIVITY_DELTA" => {
                let patch = e
                    .get("patch")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if let Some(m) = self.find_msg(&id)
                    && m.role == "activity"
                    && let Some(c) = apply_patch(&m.content, &patch)
                {
                    m.content = c;
                }
            }
            "MESSAGES_SNAPSHOT" => {
                let snap: Vec<Msg> = e
                    .get("messages")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Msg::from_json).collect())
                    .unwrap_or_default();
                let has_activity = snap.iter().any(|m| m.role == "activity");
                let has_reasoning = snap.iter().any(|m| m.role == "reasoning");
                let mut next: Vec<Msg> = Vec::new();
                for m in &self.msgs {
                    if let Some(s) = snap.iter().find(|s| s.id == m.id) {
                        next.push(s.clone());
                    } else if (m.role == "activity" && !has_activity)
                        || (m.role == "reasoning" && !has_reasoning)
                    {
                        next.push(m.clone());
                    }
                }
                for s in snap {
                    if !next.iter().any(|m| m.id == s.id) {
                        next.push(s);
                    }
                }
                self.msgs = next;
            }
            "RUN_STARTED" => {
                if let Some(list) = e
                    .get("input")
                    .and_then(|i| i.get("messages"))
                    .and_then(Value::as_array)
                {
                    for v in list {
                        if let Some(m) = Msg::from_json(v)
                            && !self.msgs.iter().any(|x| x.id == m.id)
                        {
                            self.msgs.push(m);
                        }
                    }
                }
            }
            "STATE_SNAPSHOT" => self.state = e.get("snapshot").cloned().unwrap_or(Value::Null),
            "STATE_DELTA" => {
                let ops = e
                    .get("delta")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if let Some(s) = apply_patch(&self.state, &ops) {
                    self.state = s;
                }
            }
            _ => {}
        }
    }

    fn owner_in_bucket(&self, m: &Msg) -> Option<Owner> {
        let bucket = match m.role.as_str() {
            "reasoning" => &self.m.own_reason,
            "activity" => &self.m.own_act,
            _ => &self.m.own_msg,
        };
        bucket.get(&m.id).cloned()
    }

    // ----- the model's open entities -----

    /// Open entities of `kind` opened by explicit events (not held by a chunk lane).
    fn explicit(&self, kind: Kind) -> Vec<String> {
        let set = match kind {
            Kind::Text => &self.m.text,
            Kind::Tool => &self.m.tools,
            Kind::Reasoning => &self.m.rmsgs,
        };
        set.0
            .iter()
            .filter(|id| !self.m.lane_held(kind, id))
            .cloned()
            .collect()
    }

    fn lanes_of(&self, kind: Kind) -> Vec<(Owner, Pending)> {
        self.m
            .lanes
            .iter()
            .filter(|(_, p)| p.kind == kind)
            .cloned()
            .collect()
    }
}

// ---------------------------------------------------------------------------
// A small RFC 6902 applier, for the generator's own idea of state.
// ---------------------------------------------------------------------------

fn tokens(path: &str) -> Option<Vec<String>> {
    if path.is_empty() {
        return Some(Vec::new());
    }
    let rest = path.strip_prefix('/')?;
    Some(
        rest.split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect(),
    )
}

fn get_mut<'a>(doc: &'a mut Value, toks: &[String]) -> Option<&'a mut Value> {
    let mut cur = doc;
    for t in toks {
        cur = match cur {
            Value::Object(o) => o.get_mut(t)?,
            Value::Array(a) => a.get_mut(t.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn add_at(doc: &mut Value, path: &str, value: Value) -> Option<()> {
    let toks = tokens(path)?;
    let Some((last, parent)) = toks.split_last() else {
        *doc = value;
        return Some(());
    };
    match get_mut(doc, parent)? {
        Value::Object(o) => {
            o.insert(last.clone(), value);
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
            } else {
                let i = last.parse::<usize>().ok()?;
                if i > a.len() {
                    return None;
                }
                a.insert(i, value);
            }
        }
        _ => return None,
    }
    Some(())
}

fn remove_at(doc: &mut Value, path: &str) -> Option<Value> {
    let toks = tokens(path)?;
    let (last, parent) = toks.split_last()?;
    match get_mut(doc, parent)? {
        Value::Object(o) => o.remove(last),
        Value::Array(a) => {
            let i = last.parse::<usize>().ok()?;
            (i < a.len()).then(|| a.remove(i))
        }
        _ => None,
    }
}

fn apply_patch(doc: &Value, ops: &[Value]) -> Option<Value> {
    let mut d = doc.clone();
    for op in ops {
        let path = sget(op, "path")?;
        match sget(op, "op")? {
            "add" => add_at(&mut d, path, op.get("value")?.clone())?,
            "remove" => {
                remove_at(&mut d, path)?;
            }
            "replace" => {
                let toks = tokens(path)?;
                *get_mut(&mut d, &toks)? = op.get("value")?.clone();
            }
            "move" => {
                let v = remove_at(&mut d, sget(op, "from")?)?;
                add_at(&mut d, path, v)?;
            }
            "copy" => {
                let toks = tokens(sget(op, "from")?)?;
                let v = get_mut(&mut d, &toks)?.clone();
                add_at(&mut d, path, v)?;
            }
            "test" => {
                let toks = tokens(path)?;
                if *get_mut(&mut d, &toks)? != *op.get("value")? {
                    return None;
                }
            }
            _ => {}
        }
    }
    Some(d)
}

// ---------------------------------------------------------------------------
// Valid material
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    TextOpen,
    TextContent,
    TextEnd,
    TextReopen,
    ToolOpen,
    ToolArgs,
    ToolEnd,
    ToolReopen,
    ToolResult,
    SpanOpen,
    SpanEnd,
    ReasoningOpen,
    ReasoningContent,
    ReasoningEnd,
    Encrypted,
    StepStart,
    StepFinish,
    StateSnapshot,
    StateDelta,
    MessagesSnapshot,
    ActivitySnapshot,
    ActivityDelta,
    Raw,
    Custom,
    TextChunk,
    ToolChunk,
    ReasoningChunk,
    SubagentStart,
    SubagentFinish,
    SubagentError,
    Unknown,
}

const ACTS: &[(u32, Act)] = &[
    (8, Act::TextOpen),
    (14, Act::TextContent),
    (7, Act::TextEnd),
    (1, Act::TextReopen),
    (5, Act::ToolOpen),
    (8, Act::ToolArgs),
    (5, Act::ToolEnd),
    (1, Act::ToolReopen),
    (4, Act::ToolResult),
    (2, Act::SpanOpen),
    (2, Act::SpanEnd),
    (3, Act::ReasoningOpen),
    (5, Act::ReasoningContent),
    (3, Act::ReasoningEnd),
    (2, Act::Encrypted),
    (3, Act::StepStart),
    (3, Act::StepFinish),
    (2, Act::StateSnapshot),
    (4, Act::StateDelta),
    (2, Act::MessagesSnapshot),
    (2, Act::ActivitySnapshot),
    (2, Act::ActivityDelta),
    (2, Act::Raw),
    (2, Act::Custom),
    (8, Act::TextChunk),
    (5, Act::ToolChunk),
    (4, Act::ReasoningChunk),
    (3, Act::SubagentStart),
    (2, Act::SubagentFinish),
    (1, Act::SubagentError),
    (1, Act::Unknown),
];

impl Gen {
    // ----- the consumer's starting point -----

    fn initial_context(&mut self) {
        let n = *[0usize, 0, 1, 2, 3, 4].choose(&mut self.rng).unwrap_or(&0);
        for _ in 0..n {
            let owner = if self.p(0.1) {
                Some(self.attr_tag())
            } else {
                None
            };
            let role = self.pick_str(&[
                "user",
                "user",
                "assistant",
                "system",
                "developer",
                "activity",
                "reasoning",
            ]);
            let id = self.fresh("init");
            let mut m = Msg::new(&id, role, owner);
            match role {
                "assistant" => {
                    m.content = Value::String(self.text());
                    if self.p(0.5) {
                        let tc = self.fresh("init-call");
                        let name = self.pick_str(TOOL_NAMES).to_owned();
                        m.tool_calls.push((tc.clone(), name, "{\"q\":1}".into()));
                        self.tool_ids.push(tc.clone());
                        if self.p(0.6) {
                            let tid = self.fresh("init-tool");
                            let mut t = Msg::new(&tid, "tool", None);
                            t.content = Value::String("42".into());
                            t.tool_call_id = tc.clone();
                            self.answered.insert(tc);
                            self.msgs.push(m.clone());
                            self.initial_messages.push(m.to_json(&m.owner));
                            self.msgs.push(t.clone());
                            self.initial_messages.push(t.to_json(&None));
                            continue;
                        }
                    }
                }
                "activity" => {
                    m.activity_type = self.pick_str(ACTIVITY_TYPES).to_owned();
                    m.content = self.object();
                    self.activities.push(id.clone());
                }
                "user" if self.p(0.3) => {
                    m.content = self.parts();
                    self.feature("user_content_parts");
                }
                _ => m.content = Value::String(self.text()),
            }
            self.initial_messages.push(m.to_json(&m.owner));
            self.msgs.push(m);
        }
        self.initial_state = match self.range(0, 10) {
            0 => json!([1, 2, 3]),
            1 => json!(0),
            2 => json!("plain"),
            3 | 4 => json!({}),
            _ => self.object(),
        };
        self.state = self.initial_state.clone();
    }

    fn parts(&mut self) -> Value {
        let n = self.range(1, 4);
        let mut parts = Vec::new();
        for _ in 0..n {
            let part = match self.range(0, 7) {
                0 | 1 => json!({"type": "text", "text": self.text()}),
                2 => {
                    json!({"type": "image", "source": {"type": "url", "value": "https://example.com/a.png", "mimeType": "image/png"}})
                }
                3 => {
                    json!({"type": "image", "source": {"type": "data", "value": "aGVsbG8=", "mimeType": "image/png"}, "id": "p1"})
                }
                4 => {
                    json!({"type": "document", "source": {"type": "file", "value": "file-abc", "provider": "openai"}, "metadata": {"filename": "a.pdf"}})
                }
                5 => {
                    json!({"type": "audio", "source": {"type": "url", "value": "https://example.com/a.mp3"}})
                }
                _ => {
                    json!({"type": "text", "text": self.text(), "id": "t1", "metadata": {"lang": "en"}})
                }
            };
            parts.push(part);
        }
        Value::Array(parts)
    }

    // ----- whole streams -----

    fn valid_stream(&mut self) {
        self.initial_context();
        if self.p(0.01) {
            // Nothing the client knows: no run at all.
            if self.p(0.5) {
                let ev = self.unknown_event();
                self.push(ev);
            }
            self.feature("stream_without_run");
            return;
        }
        if self.p(0.01) {
            // A stream may open with a failed run.
            self.emit(E::new("RUN_ERROR").s("message", "boot failure").done());
            self.feature("run_error_first");
        }
        if self.p(0.03) {
            let ev = self.unknown_event();
            self.push(ev);
            self.feature("unknown_event_before_run");
        }
        let runs = *[1usize, 1, 1, 1, 2, 2, 3]
            .choose(&mut self.rng)
            .unwrap_or(&1);
        for r in 0..runs {
            let last = r + 1 == runs;
            self.one_run(last);
        }
        if runs > 1 {
            self.feature("several_runs");
        }
    }

    fn one_run(&mut self, last: bool) {
        self.one_run_with(last, None);
    }

    fn one_run_with(&mut self, last: bool, forced: Option<RunEnd>) {
        let end = match self.range(0, 100) {
            0..80 => RunEnd::Finished,
            80..85 => RunEnd::FinishedThenError,
            85..97 => RunEnd::Error,
            _ if last => RunEnd::Truncated,
            _ => RunEnd::Finished,
        };
        let end = forced.unwrap_or(end);
        self.run_start(last);
        let n = self.range(2, 28);
        self.body(n);
        match end {
            RunEnd::Finished | RunEnd::FinishedThenError => {
                self.close_all();
                self.run_finish();
                if end == RunEnd::FinishedThenError {
                    if self.p(0.5) {
                        let ev = self.unknown_event();
                        self.push(ev);
                    }
                    let ev = self.run_error_event();
                    self.emit(ev);
                    self.feature("late_run_error");
                }
            }
            RunEnd::Error => {
                if self.p(0.5) {
                    self.close_all();
                }
                let ev = self.run_error_event();
                self.emit(ev);
                self.feature("run_error");
            }
            RunEnd::Truncated => self.feature("truncated_stream"),
        }
    }

    fn run_started_event(&mut self, run_id: &str) -> Value {
        let mut e = E::new("RUN_STARTED")
            .s("threadId", self.thread_id.clone())
            .s("runId", run_id);
        if let Some(prev) = self.prev_run_id.clone()
            && self.p(0.15)
        {
            e = e.s("parentRunId", prev);
        }
        let version = match self.range(0, 20) {
            0..12 => Some("1.0"),
            12..15 => None,
            15..18 => Some("1.1"),
            18 => Some("2.0"),
            _ => Some("1"),
        };
        e = e.os("protocolVersion", version);
        if self.p(0.25) {
            e = e.v("input", self.input_echo(run_id));
            self.feature("run_started_input_echo");
        }
        e.done()
    }

    fn input_echo(&mut self, run_id: &str) -> Value {
        let mut messages = Vec::new();
        if self.p(0.6) {
            for m in self.msgs.clone() {
                if m.role == "activity" || self.p(0.2) {
                    continue;
                }
                let owner = self.owner_in_bucket(&m).unwrap_or_else(|| m.owner.clone());
                messages.push(m.to_json(&owner));
            }
        }
        let uid = self.fresh("user");
        let mut user = Msg::new(&uid, "user", None);
        user.content = if self.p(0.2) {
            self.parts()
        } else {
            Value::String(self.text())
        };
        messages.push(user.to_json(&None));
        if self.p(0.1) {
            // Echoed history attributed to a subagent seeds that owner.
            let id = self.fresh("echo");
            let owner = Some(self.attr_tag());
            let mut m = Msg::new(&id, "assistant", owner.clone());
            m.content = Value::String(self.text());
            messages.push(m.to_json(&owner));
            self.feature("input_echo_attributed");
        }
        let mut input = json!({"threadId": self.thread_id, "runId": run_id, "messages": messages});
        if self.p(0.5) {
            input["tools"] = json!([{"name": "search", "description": "Search the web", "parameters": {"type": "object"}}]);
            input["context"] = json!([{"description": "locale", "value": "de-AT"}]);
        }
        if self.p(0.3) {
            input["state"] = self.state.clone();
            if input["state"].is_null() {
                input["state"] = json!({});
            }
        }
        if self.p(0.2) {
            input["forwardedProps"] = json!({"mode": "chat"});
        }
        if !self.last_interrupts.is_empty() {
            let resume: Vec<Value> = self
                .last_interrupts
                .clone()
                .into_iter()
                .map(|id| json!({"interruptId": id, "status": if self.p(0.7) {"resolved"} else {"cancelled"}, "payload": {"ok": true}}))
                .collect();
            input["resume"] = Value::Array(resume);
            self.feature("resume_echo");
        }
        input
    }

    fn run_start(&mut self, last: bool) {
        self.run_no += 1;
        if self.m.run_error {
            self.feature("run_after_run_error");
        }
        let run_id = if last {
            self.final_run_id.clone()
        } else {
            self.fresh("run")
        };
        let mut ev = self.run_started_event(&run_id);
        if let Some((SpecFault::RunStartedThread, n)) = self.spec
            && n == self.run_no
        {
            ev["threadId"] = json!(format!("{}-other", self.thread_id));
            self.spec = None;
        }
        self.emit(ev);
        self.run_id = run_id;
        self.run_tool_ids.clear();
        self.last_interrupts.clear();
    }

    fn run_finished_base(&mut self) -> E {
        E::new("RUN_FINISHED")
            .s("threadId", self.thread_id.clone())
            .s("runId", self.run_id.clone())
    }

    fn run_finish(&mut self) {
        let mut e = self.run_finished_base();
        let mut interrupts = Vec::new();
        let mut outcome = match self.range(0, 100) {
            0..40 => None,
            40..55 => Some(json!({"type": "success"})),
            55..65 => {
                let pending: Vec<String> = self
                    .run_tool_ids
                    .iter()
                    .filter(|t| !self.answered.contains(*t))
                    .cloned()
                    .collect();
                self.feature("pending_tool_call_ids");
                Some(json!({"type": "success", "pendingToolCallIds": pending}))
            }
            65..82 => {
                let n = self.range(1, 4);
                let mut list = Vec::new();
                for _ in 0..n {
                    let id = self.fresh("int");
                    let mut i = json!({"id": id, "reason": self.pick_str(&["tool_call", "input_required", "confirmation", "acme:review"])});
                    if self.p(0.5) {
                        i["message"] = json!(self.text());
                    }
                    if self.p(0.3) {
                        let tools = self.run_tool_ids.clone();
                        if let Some(t) = self.pick(&tools) {
                            i["toolCallId"] = json!(t);
                        }
                    }
                    if self.p(0.3) {
                        i["responseSchema"] = json!({"type": "object", "properties": {"approved": {"type": "boolean"}}});
                    }
                    if self.p(0.2) {
                        i["expiresAt"] = json!("2099-01-01T00:00:00Z");
                    }
                    if self.p(0.2) {
                        i["metadata"] = self.metadata();
                    }
                    if self.p(0.2) {
                        i["subagentRunId"] = json!(self.attr_tag());
                    }
                    interrupts.push(id);
                    list.push(i);
                }
                self.feature("interrupt_outcome");
                Some(json!({"type": "interrupt", "interrupts": list}))
            }
            82..90 => {
                self.feature("cancelled_outcome");
                Some(json!({"type": "cancelled"}))
            }
            90..95 => {
                self.feature("legacy_null_outcome");
                Some(Value::Null)
            }
            _ => {
                self.feature("unknown_outcome_stripped");
                Some(json!({"type": "paused_v2", "until": "later"}))
            }
        };
        if let Some((SpecFault::DuplicateInterruptIds, _)) = self.spec {
            let id = self.fresh("int");
            outcome = Some(json!({"type": "interrupt", "interrupts": [
                {"id": id, "reason": "confirmation"}, {"id": id, "reason": "input_required"}]}));
            self.spec = None;
            interrupts = vec![id];
        }
        e = e.ov("outcome", outcome);
        if self.p(0.3) {
            e = e.v("result", self.json_value(2));
            self.feature("run_result");
        } else if self.p(0.03) {
            e = e.v("result", Value::Null);
            self.feature("legacy_null_result");
        }
        if self.p(0.3) {
            e = e.v("usage", self.usage());
        }
        let mut ev = e.done();
        match self.spec {
            Some((SpecFault::RunFinishedRunId, n)) if n == self.run_no => {
                ev["runId"] = json!(format!("{}-other", self.run_id));
                self.spec = None;
            }
            Some((SpecFault::RunFinishedThread, n)) if n == self.run_no => {
                ev["threadId"] = json!(format!("{}-other", self.thread_id));
                self.spec = None;
            }
            _ => {}
        }
        self.emit(ev);
        self.last_interrupts = interrupts;
        self.prev_run_id = Some(self.run_id.clone());
    }

    fn run_error_event(&mut self) -> Value {
        let mut e = E::new("RUN_ERROR").s("message", format!("failed: {}", self.text()));
        if self.p(0.5) {
            e = e.s(
                "code",
                self.pick_str(&["rate_limited", "abort", "internal", "UPSTREAM_5XX"]),
            );
        }
        if self.p(0.2) {
            e = e.v("usage", self.usage());
        }
        self.prev_run_id = Some(self.run_id.clone());
        e.done()
    }

    fn unknown_event(&mut self) -> Value {
        self.feature("unknown_event");
        let t = self.pick_str(&["THINKING_STEP_V2", "META", "FUTURE_EVENT", "x-vendor-event"]);
        json!({"type": t, "payload": self.json_value(1)})
    }

    // ----- the body of a run -----

    fn body(&mut self, n: usize) {
        let total: u32 = ACTS.iter().map(|(w, _)| w).sum();
        for _ in 0..n {
            for _attempt in 0..10 {
                let mut roll = self.rng.random_range(0..total);
                let mut chosen = Act::Custom;
                for (w, a) in ACTS {
                    if roll < *w {
                        chosen = *a;
                        break;
                    }
                    roll -= w;
                }
                if self.act(chosen) {
                    break;
                }
            }
        }
    }

    fn act(&mut self, a: Act) -> bool {
        match a {
            Act::TextOpen => {
                let tag = self.pick_tag();
                self.open_text(&tag);
            }
            Act::TextContent => {
                let ids = self.explicit(Kind::Text);
                let Some(id) = self.pick(&ids) else {
                    return false;
                };
                let tag = self.cont_tag(self.m.own_msg.get(&id).cloned());
                let delta = self.text();
                self.emit(
                    E::new("TEXT_MESSAGE_CONTENT")
                        .s("messageId", id)
                        .s("delta", delta)
                        .tag(&tag)
                        .done(),
                );
            }
            Act::TextEnd => {
                let ids = self.explicit(Kind::Text);
                let Some(id) = self.pick(&ids) else {
                    return false;
                };
                self.close_text(&id);
            }
            Act::TextReopen => {
                let closed: Vec<String> = self
                    .text_ids
                    .iter()
                    .filter(|id| {
                        !self.m.text.has(id)
                            && self
                                .msgs
                                .iter()
                                .any(|m| m.id == **id && m.role != "activity")
                    })
                    .cloned()
                    .collect();
                let Some(id) = self.pick(&closed) else {
                    return false;
                };
                let tag = self.cont_tag(self.m.own_msg.get(&id).cloned());
                self.emit(
                    E::new("TEXT_MESSAGE_START")
                        .s("messageId", id)
                        .tag(&tag)
                        .done(),
                );
                self.feature("text_reopen");
            }
            Act::ToolOpen => self.act_tool_open(),
            Act::ToolArgs => {
                let ids = self.explicit(Kind::Tool);
                let Some(id) = self.pick(&ids) else {
                    return false;
                };
                let delta = self.next_args(&id);
                let tag = self.cont_tag(self.m.own_tool.get(&id).cloned());
                self.emit(
                    E::new("TOOL_CALL_ARGS")
                        .s("toolCallId", id)
                        .s("delta", delta)
                        .tag(&tag)
                        .done(),
                );
            }
            Act::ToolEnd => {
                let ids = self.explicit(Kind::Tool);
                let Some(id) = self.pick(&ids) else {
                    return false;
                };
                self.close_tool(&id);
            }
            Act::ToolReopen => {
                let closed: Vec<String> = self
                    .tool_ids
                    .iter()
                    .filter(|id| !self.m.tools.has(id))
                    .cloned()
                    .collect();
                let Some(id) = self.pick(&closed) else {
                    return false;
                };
                let tag = self.cont_tag(self.m.own_tool.get(&id).cloned());
                let name = if self.p(0.7) {
                    self.tool_names
                        .get(&id)
                        .cloned()
                        .unwrap_or_else(|| "search".into())
                } else {
                    self.pick_str(TOOL_NAMES).to_owned()
                };
                self.plan_args(&id);
                self.emit(
                    E::new("TOOL_CALL_START")
                        .s("toolCallId", id)
                        .s("toolCallName", name)
                        .tag(&tag)
                        .done(),
                );
                self.feature("tool_reopen");
            }
            Act::ToolResult => return self.act_tool_result(),
            Act::SpanOpen => {
                let tag = self.pick_tag();
                self.open_span(&tag);
            }
            Act::SpanEnd => {
                let spans = self.m.spans.0.clone();
                let Some(id) = self.pick(&spans) else {
                    return false;
                };
                self.close_span(&id);
            }
            Act::ReasoningOpen => {
                let spans: Vec<String> = self
                    .m
                    .spans
                    .0
                    .iter()
                    .filter(|s| !self.m.rmsgs.has(s))
                    .cloned()
                    .collect();
                if !spans.is_empty() && self.p(0.5) {
                    let id = self.pick(&spans).unwrap_or_default();
                    let tag = self.cont_tag(self.m.own_reason.get(&id).cloned());
                    self.open_reasoning_with(&id, &tag);
                    self.feature("reasoning_message_shares_span_id");
                } else {
                    let tag = self.pick_tag();
                    self.open_reasoning(&tag);
                }
            }
            Act::ReasoningContent => {
                let ids = self.explicit(Kind::Reasoning);
                let Some(id) = self.pick(&ids) else {
                    return false;
                };
                let tag = self.cont_tag(self.m.own_reason.get(&id).cloned());
                let delta = self.text();
                self.emit(
                    E::new("REASONING_MESSAGE_CONTENT")
                        .s("messageId", id)
                        .s("delta", delta)
                        .tag(&tag)
                        .done(),
                );
            }
            Act::ReasoningEnd => {
                let ids = self.explicit(Kind::Reasoning);
                let Some(id) = self.pick(&ids) else {
                    return false;
                };
                self.close_reasoning(&id);
            }
            Act::Encrypted => return self.act_encrypted(),
            Act::StepStart => {
                let owner = self.pick_tag();
                self.start_step(&owner);
            }
            Act::StepFinish => {
                let steps = self.m.active_steps();
                let Some((owner, name)) = self.pick(&steps) else {
                    return false;
                };
                self.emit(
                    E::new("STEP_FINISHED")
                        .s("stepName", name)
                        .tag(&owner)
                        .done(),
                );
            }
            Act::StateSnapshot => {
                let snapshot = match self.range(0, 8) {
                    0 => Value::Null,
                    1 => json!(0),
                    2 => json!([1, {"a": 2}]),
                    3 => json!("text state"),
                    _ => self.object(),
                };
                if !snapshot.is_object() {
                    self.feature("state_snapshot_non_object");
                }
                let tag = self.pick_tag();
                self.emit(
                    E::new("STATE_SNAPSHOT")
                        .v("snapshot", snapshot)
                        .tag(&tag)
                        .done(),
                );
            }
            Act::StateDelta => {
                let state = self.state.clone();
                let applicable = self.p(0.75);
                let ops = self.patch_for(&state, applicable);
                if !applicable {
                    self.feature("state_delta_unappliable");
                }
                let tag = self.pick_tag();
                self.emit(
                    E::new("STATE_DELTA")
                        .v("delta", Value::Array(ops))
                        .tag(&tag)
                        .done(),
                );
            }
            Act::MessagesSnapshot => self.act_messages_snapshot(),
            Act::ActivitySnapshot => self.act_activity_snapshot(),
            Act::ActivityDelta => self.act_activity_delta(),
            Act::Raw => {
                let event = self.json_value(2);
                let source = if self.p(0.5) {
                    Some(self.pick_str(&["openai", "anthropic", "langgraph"]))
                } else {
                    None
                };
                let tag = self.pick_tag();
                self.emit(
                    E::new("RAW")
                        .v("event", event)
                        .os("source", source)
                        .tag(&tag)
                        .done(),
                );
            }
            Act::Custom => {
                let name = self.pick_str(CUSTOM_NAMES);
                let value = self.json_value(2);
                let tag = self.pick_tag();
                self.emit(
                    E::new("CUSTOM")
                        .s("name", name)
                        .v("value", value)
                        .tag(&tag)
                        .done(),
                );
            }
            Act::TextChunk => self.act_chunk(Kind::Text),
            Act::ToolChunk => self.act_chunk(Kind::Tool),
            Act::ReasoningChunk => self.act_chunk(Kind::Reasoning),
            Act::SubagentStart => {
                self.start_subagent();
            }
            Act::SubagentFinish => {
                let active = self.m.subs.0.clone();
                let Some(id) = self.pick(&active) else {
                    return false;
                };
                self.finish_subagent(&id, false);
            }
            Act::SubagentError => {
                let active = self.m.subs.0.clone();
                let Some(id) = self.pick(&active) else {
                    return false;
                };
                self.finish_subagent(&id, true);
            }
            Act::Unknown => {
                let ev = self.unknown_event();
                self.push(ev);
            }
        }
        true
    }

    // ----- openers and closers -----

    fn open_text(&mut self, tag: &Owner) -> String {
        let id = self.fresh_or_empty("msg");
        let role = if self.p(0.4) {
            None
        } else {
            Some(self.pick_str(TEXT_ROLES))
        };
        let name = if self.p(0.1) {
            Some(self.pick_str(SPEAKERS))
        } else {
            None
        };
        if tag.is_some() {
            self.feature("attributed_text");
        }
        self.emit(
            E::new("TEXT_MESSAGE_START")
                .s("messageId", id.clone())
                .os("role", role)
                .os("name", name)
                .tag(tag)
                .done(),
        );
        self.text_ids.push(id.clone());
        id
    }

    fn close_text(&mut self, id: &str) {
        let tag = self.cont_tag(self.m.own_msg.get(id).cloned());
        self.emit(
            E::new("TEXT_MESSAGE_END")
                .s("messageId", id)
                .tag(&tag)
                .done(),
        );
    }

    fn plan_args(&mut self, id: &str) {
        let plan = match self.range(0, 10) {
            0 => "not json {".to_owned(),
            1 => String::new(),
            _ => json!({"query": self.text(), "limit": self.range(1, 50), "flags": ["a", "ü"]})
                .to_string(),
        };
        self.tool_plan.insert(id.to_owned(), (plan, 0));
    }

    fn next_args(&mut self, id: &str) -> String {
        let take = self.range(1, 14);
        let Some((plan, pos)) = self.tool_plan.get_mut(id) else {
            return String::new();
        };
        let rest: String = plan[*pos..].chars().take(take).collect();
        *pos += rest.len();
        if rest.is_empty() {
            self.features.insert("empty_delta");
        }
        rest
    }

    fn open_tool(&mut self, tag: &Owner, parent: Option<&str>, legacy_null_parent: bool) -> String {
        // Ids are unique per entity kind only: some producers give a tool call the
        // id of the assistant message that carries it.
        let id = match parent {
            Some(p) if !self.tool_ids.iter().any(|t| t == p) && self.p(0.08) => {
                self.feature("tool_call_shares_parent_message_id");
                p.to_owned()
            }
            _ => self.fresh("call"),
        };
        let name = self.pick_str(TOOL_NAMES);
        self.plan_args(&id);
        let mut e = E::new("TOOL_CALL_START")
            .s("toolCallId", id.clone())
            .s("toolCallName", name)
            .os("parentMessageId", parent);
        if legacy_null_parent {
            e = e.v("parentMessageId", Value::Null);
            self.feature("legacy_null_parent_message_id");
        }
        self.emit(e.tag(tag).done());
        self.tool_names.insert(id.clone(), name.to_owned());
        self.tool_ids.push(id.clone());
        self.run_tool_ids.push(id.clone());
        id
    }

    /// Chooses a parent message and a tag consistent with it.
    fn tool_parent(&mut self) -> (Option<String>, Owner, bool) {
        let r = self.range(0, 100);
        let mut null_parent = false;
        let parent = if r < 35 {
            None
        } else if r < 60 {
            let open = self.explicit(Kind::Text);
            let p = self.pick(&open);
            if p.is_some() {
                self.feature("tool_parent_open_text");
            }
            p
        } else if r < 75 {
            let ids: Vec<String> = self.msgs.iter().map(|m| m.id.clone()).collect();
            let p = self.pick(&ids);
            if p.is_some() {
                self.feature("tool_parent_existing_message");
            }
            p
        } else if r < 93 {
            self.feature("tool_parent_unknown");
            Some(self.fresh("parent"))
        } else {
            null_parent = true;
            None
        };
        let tag = match parent.as_ref().and_then(|p| self.m.own_msg.get(p).cloned()) {
            Some(Some(owner)) => {
                if self.p(0.5) {
                    Some(owner)
                } else {
                    self.feature("tool_inherits_parent_owner");
                    None
                }
            }
            Some(None) => None,
            None => self.pick_tag(),
        };
        (parent, tag, null_parent)
    }

    fn act_tool_open(&mut self) {
        let (parent, tag, null_parent) = self.tool_parent();
        self.open_tool(&tag, parent.as_deref(), null_parent);
    }

    fn close_tool(&mut self, id: &str) {
        if self.p(0.5) {
            let delta = self.next_args(id);
            if !delta.is_empty() {
                let tag = self.cont_tag(self.m.own_tool.get(id).cloned());
                self.emit(
                    E::new("TOOL_CALL_ARGS")
                        .s("toolCallId", id)
                        .s("delta", delta)
                        .tag(&tag)
                        .done(),
                );
            }
        }
        let tag = self.cont_tag(self.m.own_tool.get(id).cloned());
        self.emit(E::new("TOOL_CALL_END").s("toolCallId", id).tag(&tag).done());
    }

    fn act_tool_result(&mut self) -> bool {
        let r = self.range(0, 100);
        let closed: Vec<String> = self
            .tool_ids
            .iter()
            .filter(|t| !self.m.tools.has(t) && !self.answered.contains(*t))
            .cloned()
            .collect();
        let call = if r < 70 {
            self.pick(&closed)
        } else if r < 80 {
            let open = self.m.tools.0.clone();
            let c = self.pick(&open);
            if c.is_some() {
                self.feature("tool_result_before_end");
            }
            c
        } else if r < 90 {
            self.feature("tool_result_unknown_call");
            Some(self.fresh("ghost-call"))
        } else {
            let answered: Vec<String> = self
                .answered
                .iter()
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let c = self.pick(&answered);
            if c.is_some() {
                self.feature("tool_result_duplicate");
            }
            c
        };
        let Some(call) = call else { return false };
        let content = if self.p(0.65) {
            Value::String(if self.p(0.5) {
                json!({"ok": true, "value": self.text()}).to_string()
            } else {
                self.text()
            })
        } else {
            self.feature("tool_result_parts");
            self.parts()
        };
        let id = self.fresh("result");
        let role = if self.p(0.3) { Some("tool") } else { None };
        let tag = self.pick_tag();
        self.emit(
            E::new("TOOL_CALL_RESULT")
                .s("messageId", id)
                .s("toolCallId", call.clone())
                .v("content", content)
                .os("role", role)
                .tag(&tag)
                .done(),
        );
        self.answered.insert(call);
        true
    }

    fn open_span(&mut self, tag: &Owner) -> String {
        let id = self.fresh("rs");
        self.emit(
            E::new("REASONING_START")
                .s("messageId", id.clone())
                .tag(tag)
                .done(),
        );
        self.span_ids.push(id.clone());
        id
    }

    fn close_span(&mut self, id: &str) {
        let tag = self.cont_tag(self.m.own_reason.get(id).cloned());
        self.emit(E::new("REASONING_END").s("messageId", id).tag(&tag).done());
    }

    fn open_reasoning(&mut self, tag: &Owner) -> String {
        let id = self.fresh("rm");
        self.open_reasoning_with(&id, tag);
        id
    }

    fn open_reasoning_with(&mut self, id: &str, tag: &Owner) {
        self.emit(
            E::new("REASONING_MESSAGE_START")
                .s("messageId", id)
                .s("role", "reasoning")
                .tag(tag)
                .done(),
        );
        self.reasoning_ids.push(id.to_owned());
    }

    fn close_reasoning(&mut self, id: &str) {
        let tag = self.cont_tag(self.m.own_reason.get(id).cloned());
        self.emit(
            E::new("REASONING_MESSAGE_END")
                .s("messageId", id)
                .tag(&tag)
                .done(),
        );
    }

    fn start_step(&mut self, owner: &Owner) -> String {
        let free: Vec<&'static str> = STEP_NAMES
            .iter()
            .copied()
            .filter(|n| !self.m.step_active(owner, n))
            .collect();
        let name = match self.pick(&free) {
            Some(n) => n.to_owned(),
            None => self.fresh("step"),
        };
        if owner.is_some() {
            self.feature("attributed_step");
        }
        if self.m.active_steps().iter().any(|(_, n)| *n == name) {
            self.feature("same_step_name_under_two_owners");
        }
        self.emit(
            E::new("STEP_STARTED")
                .s("stepName", name.clone())
                .tag(owner)
                .done(),
        );
        name
    }

    fn start_subagent(&mut self) -> String {
        let id = self.fresh_or_empty("sub");
        let mut e = E::new("SUBAGENT_STARTED")
            .s("subagentRunId", id.clone())
            .s("name", self.pick_str(SUBAGENT_NAMES));
        if self.p(0.3) {
            e = e.s("description", "delegated work");
        }
        let mut known: Vec<String> = self.m.subs.0.clone();
        known.extend(self.m.subs_closed.iter().cloned().collect::<BTreeSet<_>>());
        if !known.is_empty() && self.p(0.3) {
            let parent = self.pick(&known).unwrap_or_default();
            e = e.s("parentSubagentRunId", parent);
            self.feature("nested_subagent");
        }
        if !self.tool_ids.is_empty() && self.p(0.3) {
            let tools = self.tool_ids.clone();
            e = e.s("parentToolCallId", self.pick(&tools).unwrap_or_default());
        }
        if !self.msgs.is_empty() && self.p(0.2) {
            let ids: Vec<String> = self.msgs.iter().map(|m| m.id.clone()).collect();
            e = e.s("parentMessageId", self.pick(&ids).unwrap_or_default());
        }
        self.emit(e.done());
        self.feature("subagent");
        id
    }

    fn finish_subagent(&mut self, id: &str, error: bool) {
        let e = if error {
            self.feature("subagent_error");
            let mut e = E::new("SUBAGENT_ERROR")
                .s("subagentRunId", id)
                .s("message", "subagent failed");
            if self.p(0.5) {
                e = e.s("code", "tool_failure");
            }
            e
        } else {
            let mut e = E::new("SUBAGENT_FINISHED").s("subagentRunId", id);
            match self.range(0, 10) {
                0..4 => {}
                4..6 => e = e.v("outcome", json!({"type": "success"})),
                6..8 => {
                    let ids: Vec<String> =
                        (0..self.range(0, 3)).map(|_| self.fresh("int")).collect();
                    e = e.v("outcome", json!({"type": "suspended", "interruptIds": ids}));
                    self.feature("subagent_suspended");
                }
                8 => e = e.v("outcome", json!({"type": "suspended"})),
                _ => {
                    e = e.v("outcome", json!({"type": "handed_off"}));
                    self.feature("unknown_subagent_outcome_stripped");
                }
            }
            if self.p(0.3) {
                e = e.v("result", self.json_value(1));
            } else if self.p(0.05) {
                e = e.v("result", Value::Null);
                self.feature("legacy_null_subagent_result");
            }
            e
        };
        self.emit(e.done());
    }

    /// Closes everything an explicit event opened (chunk lanes are left for
    /// RUN_FINISHED to close), so the run can finish.
    fn close_all(&mut self) {
        let mut jobs: Vec<(u8, String)> = Vec::new();
        jobs.extend(self.explicit(Kind::Text).into_iter().map(|id| (0, id)));
        jobs.extend(self.explicit(Kind::Tool).into_iter().map(|id| (1, id)));
        jobs.extend(self.explicit(Kind::Reasoning).into_iter().map(|id| (2, id)));
        jobs.extend(self.m.spans.0.clone().into_iter().map(|id| (3, id)));
        jobs.shuffle(&mut self.rng);
        for (kind, id) in jobs {
            match kind {
                0 => {
                    if self.p(0.3) {
                        let tag = self.cont_tag(self.m.own_msg.get(&id).cloned());
                        let delta = self.text();
                        self.emit(
                            E::new("TEXT_MESSAGE_CONTENT")
                                .s("messageId", id.clone())
                                .s("delta", delta)
                                .tag(&tag)
                                .done(),
                        );
                    }
                    self.close_text(&id);
                }
                1 => self.close_tool(&id),
                2 => self.close_reasoning(&id),
                _ => self.close_span(&id),
            }
        }
        self.close_steps();
        let mut subs = self.m.subs.0.clone();
        subs.reverse();
        for id in subs {
            let error = self.p(0.15);
            self.finish_subagent(&id, error);
        }
        if !self.m.lanes.is_empty() {
            self.feature("chunk_closed_by_run_end");
        }
    }

    fn close_steps(&mut self) {
        let mut steps = self.m.active_steps();
        steps.reverse();
        for (owner, name) in steps {
            self.emit(
                E::new("STEP_FINISHED")
                    .s("stepName", name)
                    .tag(&owner)
                    .done(),
            );
        }
    }

    // ----- encrypted values, snapshots, activities -----

    fn act_encrypted(&mut self) -> bool {
        let r = self.range(0, 100);
        let (subtype, entity, owner) = if r < 35 {
            let ids: Vec<String> = self
                .m
                .own_msg
                .keys()
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let Some(id) = self.pick(&ids) else {
                return false;
            };
            let owner = self.m.own_msg.get(&id).cloned();
            ("message", id, owner)
        } else if r < 55 {
            let ids: Vec<String> = self
                .m
                .own_reason
                .keys()
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let Some(id) = self.pick(&ids) else {
                return false;
            };
            let owner = self
                .m
                .own_msg
                .get(&id)
                .or_else(|| self.m.own_reason.get(&id))
                .cloned();
            self.feature("encrypted_reasoning_message");
            ("message", id, owner)
        } else if r < 80 {
            let ids: Vec<String> = self
                .m
                .own_tool
                .keys()
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let Some(id) = self.pick(&ids) else {
                return false;
            };
            let owner = self.m.own_tool.get(&id).cloned();
            self.feature("encrypted_tool_call");
            ("tool-call", id, owner)
        } else {
            self.feature("encrypted_unknown_entity");
            let subtype = if self.p(0.5) { "message" } else { "tool-call" };
            (subtype, self.fresh("ghost"), None)
        };
        let tag = self.cont_tag(owner);
        self.emit(
            E::new("REASONING_ENCRYPTED_VALUE")
                .s("subtype", subtype)
                .s("entityId", entity)
                .s("encryptedValue", "gAAAAABl-opaque==")
                .tag(&tag)
                .done(),
        );
        self.feature("encrypted_value");
        true
    }

    fn act_messages_snapshot(&mut self) {
        let mut out = Vec::new();
        for m in self.msgs.clone() {
            if self.p(0.15) {
                self.feature("snapshot_drops_message");
                continue;
            }
            let mut owner = self.owner_in_bucket(&m).unwrap_or_else(|| m.owner.clone());
            if self.p(0.05) {
                owner = self.pick_tag();
                self.feature("snapshot_reattributes");
            }
            let mut m = m;
            if self.p(0.1)
                && let Value::String(s) = &mut m.content
            {
                s.push_str(" (edited)");
            }
            out.push(m.to_json(&owner));
        }
        for _ in 0..self.range(0, 3) {
            let id = self.fresh("snap");
            let role = self.pick_str(&["user", "assistant", "reasoning", "activity", "system"]);
            let mut m = Msg::new(&id, role, None);
            match role {
                "activity" => {
                    m.activity_type = self.pick_str(ACTIVITY_TYPES).to_owned();
                    m.content = self.object();
                    self.activities.push(id.clone());
                }
                "user" if self.p(0.3) => {
                    m.content = self.parts();
                }
                "assistant" if self.p(0.4) => {
                    let tc = self.fresh("snap-call");
                    m.tool_calls
                        .push((tc.clone(), "search".into(), "{}".into()));
                    self.tool_ids.push(tc);
                }
                _ => m.content = Value::String(self.text()),
            }
            let pos = self.range(0, out.len() + 1);
            let owner = if self.p(0.15) {
                Some(self.attr_tag())
            } else {
                None
            };
            out.insert(pos, m.to_json(&owner));
            self.feature("snapshot_adds_message");
        }
        if self.p(0.05) {
            let id = self.fresh("future");
            let pos = self.range(0, out.len() + 1);
            out.insert(
                pos,
                json!({"id": id, "role": "critic", "content": "an unknown role"}),
            );
            self.feature("snapshot_unknown_role_stripped");
        }
        if self.p(0.04) {
            let id = self.fresh("legacy");
            out.push(json!({"id": id, "role": "user", "content": [
                {"type": "text", "text": "see attached"},
                {"type": "binary", "mimeType": "image/png", "data": "aGVsbG8=", "filename": "a.png"}]}));
            self.feature("legacy_binary_part");
        }
        self.emit(
            E::new("MESSAGES_SNAPSHOT")
                .v("messages", Value::Array(out))
                .done(),
        );
        self.feature("messages_snapshot");
    }

    fn act_activity_snapshot(&mut self) {
        let r = self.range(0, 100);
        let existing = self.activities.clone();
        let id = if r < 55 || existing.is_empty() {
            let id = self.fresh("act");
            self.activities.push(id.clone());
            id
        } else if r < 95 {
            self.pick(&existing).unwrap_or_default()
        } else {
            // An activity that replaces a finished text message.
            let closed: Vec<String> = self
                .text_ids
                .iter()
                .filter(|id| !self.m.text.has(id) && !self.m.lane_held(Kind::Text, id))
                .cloned()
                .collect();
            let Some(id) = self.pick(&closed) else { return };
            self.feature("activity_replaces_message");
            self.activities.push(id.clone());
            id
        };
        let replace = match self.range(0, 4) {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        };
        if replace == Some(false) {
            self.feature("activity_replace_false");
        }
        let content = self.object();
        let tag = self.pick_tag();
        let activity_type = self.pick_str(ACTIVITY_TYPES);
        self.emit(
            E::new("ACTIVITY_SNAPSHOT")
                .s("messageId", id)
                .s("activityType", activity_type)
                .v("content", content)
                .ov("replace", replace.map(Value::Bool))
                .tag(&tag)
                .done(),
        );
        self.feature("activity");
    }

    fn act_activity_delta(&mut self) {
        let existing = self.activities.clone();
        let (id, owner) = match self.pick(&existing) {
            Some(id) if self.p(0.85) => {
                let owner = self.m.own_act.get(&id).cloned();
                (id, owner)
            }
            _ => {
                self.feature("activity_delta_unknown_id");
                (self.fresh("act-missing"), None)
            }
        };
        let content = self
            .msgs
            .iter()
            .find(|m| m.id == id)
            .map_or(json!({}), |m| m.content.clone());
        let applicable = self.p(0.8);
        let patch = self.patch_for(&content, applicable);
        let tag = self.cont_tag(owner);
        let activity_type = self.pick_str(ACTIVITY_TYPES);
        self.emit(
            E::new("ACTIVITY_DELTA")
                .s("messageId", id)
                .s("activityType", activity_type)
                .v("patch", Value::Array(patch))
                .tag(&tag)
                .done(),
        );
    }

    /// A JSON Patch for `doc`: one that applies, or one that does not.
    fn patch_for(&mut self, doc: &Value, applicable: bool) -> Vec<Value> {
        if !applicable {
            let key = esc(&self.fresh("missing"));
            return vec![match self.range(0, 5) {
                0 => json!({"op": "remove", "path": format!("/{key}")}),
                1 => json!({"op": "replace", "path": format!("/{key}"), "value": 1}),
                2 => json!({"op": "test", "path": "", "value": {"certainly": "not this"}}),
                3 => json!({"op": "add", "path": format!("/{key}/deeper"), "value": true}),
                _ => json!({"op": "move", "from": format!("/{key}"), "path": "/elsewhere"}),
            }];
        }
        if self.p(0.05) {
            self.feature("empty_patch");
            return Vec::new();
        }
        let mut work = doc.clone();
        let mut ops = Vec::new();
        for _ in 0..self.range(1, 4) {
            let op = self.one_op(&work);
            if let Some(next) = apply_patch(&work, std::slice::from_ref(&op)) {
                work = next;
                ops.push(op);
            }
        }
        if ops.is_empty() {
            ops.push(json!({"op": "replace", "path": "", "value": {"reset": true}}));
            self.feature("patch_replaces_root");
        }
        if self.p(0.05) {
            ops.push(json!({"op": "_future_op", "path": "/x"}));
            self.feature("patch_unknown_op_stripped");
        }
        ops
    }

    fn one_op(&mut self, doc: &Value) -> Value {
        match doc {
            Value::Object(o) => {
                let keys: Vec<String> = o.keys().cloned().collect();
                let existing = self.pick(&keys);
                let r = self.range(0, 7);
                match (r, existing) {
                    (1, Some(k)) => {
                        json!({"op": "replace", "path": format!("/{}", esc(&k)), "value": self.json_value(1)})
                    }
                    (2, Some(k)) => json!({"op": "remove", "path": format!("/{}", esc(&k))}),
                    (3, Some(k)) => {
                        json!({"op": "test", "path": format!("/{}", esc(&k)), "value": o[&k].clone()})
                    }
                    (4, Some(k)) => {
                        let to = self.pick_str(&["copied", "b/c", "t~2"]);
                        json!({"op": "copy", "from": format!("/{}", esc(&k)), "path": format!("/{}", esc(to))})
                    }
                    (5, Some(k)) => {
                        let to = self.pick_str(&["moved", "m~v"]);
                        json!({"op": "move", "from": format!("/{}", esc(&k)), "path": format!("/{}", esc(to))})
                    }
                    _ => {
                        let k = self.pick_str(&["count", "items", "a/b", "ti~lde", "новый", "x"]);
                        if k.contains('/') || k.contains('~') {
                            self.feature("pointer_escapes");
                        }
                        json!({"op": "add", "path": format!("/{}", esc(k)), "value": self.json_value(2)})
                    }
                }
            }
            Value::Array(a) => match self.range(0, 4) {
                0 if !a.is_empty() => json!({"op": "remove", "path": "/0"}),
                1 if !a.is_empty() => {
                    json!({"op": "replace", "path": format!("/{}", a.len() - 1), "value": self.json_value(1)})
                }
                2 => json!({"op": "add", "path": "/0", "value": self.json_value(1)}),
                _ => json!({"op": "add", "path": "/-", "value": self.json_value(1)}),
            },
            _ => json!({"op": "replace", "path": "", "value": self.object()}),
        }
    }

    // ----- chunks -----

    fn act_chunk(&mut self, kind: Kind) {
        let open = self.lanes_of(kind);
        if !open.is_empty() && self.p(0.6) {
            let (owner, pending) = self.pick(&open).expect("non-empty");
            self.continue_chunk(kind, &owner, &pending);
        } else {
            self.open_chunk(kind, None);
        }
        self.feature(match kind {
            Kind::Text => "text_chunk",
            Kind::Tool => "tool_chunk",
            Kind::Reasoning => "reasoning_chunk",
        });
    }

    /// Opens a new chunk stream; returns (lane owner, id).
    fn open_chunk(&mut self, kind: Kind, tag: Option<Owner>) -> (Owner, String) {
        let tag = match tag {
            Some(t) => t,
            None => self.pick_tag(),
        };
        if tag.is_some() {
            self.feature("chunk_lane_subagent");
        }
        if self.m.lane(&tag).is_some() {
            self.feature("chunk_closes_previous_in_lane");
        }
        let mut e = E::new(kind.family().chunk);
        let id;
        match kind {
            Kind::Text => {
                id = self.fresh_or_empty("cmsg");
                self.text_ids.push(id.clone());
                e = e.s("messageId", id.clone());
                if self.p(0.5) {
                    e = e.s("role", self.pick_str(TEXT_ROLES));
                }
                if self.p(0.15) {
                    e = e.s("name", self.pick_str(SPEAKERS));
                }
                if self.p(0.85) {
                    e = e.s("delta", self.text());
                }
            }
            Kind::Tool => {
                id = self.fresh("ccall");
                let name = self.pick_str(TOOL_NAMES);
                self.plan_args(&id);
                self.tool_names.insert(id.clone(), name.to_owned());
                self.tool_ids.push(id.clone());
                self.run_tool_ids.push(id.clone());
                e = e.s("toolCallId", id.clone()).s("toolCallName", name);
                let r = self.range(0, 10);
                if r < 3 {
                    // A parent owned consistently with this lane, or unknown to the verifier.
                    let candidates: Vec<String> = self
                        .m
                        .own_msg
                        .iter()
                        .filter(|(_, o)| **o == tag)
                        .map(|(k, _)| k.clone())
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect();
                    if let Some(p) = self.pick(&candidates) {
                        e = e.s("parentMessageId", p);
                    }
                } else if r < 5 {
                    e = e.s("parentMessageId", self.fresh("cparent"));
                } else if r == 5 {
                    e = e.v("parentMessageId", Value::Null);
                    self.feature("legacy_null_parent_message_id");
                }
                if self.p(0.7) {
                    let d = self.next_args(&id);
                    e = e.s("delta", d);
                }
            }
            Kind::Reasoning => {
                id = self.fresh("crm");
                self.reasoning_ids.push(id.clone());
                e = e.s("messageId", id.clone());
                if self.p(0.8) {
                    e = e.s("delta", self.text());
                }
            }
        }
        self.emit(e.tag(&tag).done());
        (tag, id)
    }

    fn continue_chunk(&mut self, kind: Kind, owner: &Owner, pending: &Pending) {
        let mut e = E::new(kind.family().chunk);
        let with_id = self.p(0.35);
        let with_tag = owner.is_some() && self.p(0.5);
        let resolves_bare = self.m.resolve_lane(kind, None, &None).ok().as_ref() == Some(owner);
        if with_id || (!with_tag && !resolves_bare) {
            e = e.s(kind.family().id_field, pending.id.clone());
            if !with_tag && owner.is_some() {
                self.feature("chunk_untagged_continuation_of_subagent_lane_by_id");
            }
        } else if !with_tag {
            self.feature(if owner.is_some() {
                "chunk_bare_continuation_of_sole_subagent_lane"
            } else {
                "chunk_bare_continuation"
            });
        }
        if with_tag {
            e = e.tag(owner);
        }
        match kind {
            Kind::Text => {
                if self.p(0.1) {
                    e = e.s("role", pending.role.clone());
                    self.feature("chunk_repeats_opener_field");
                }
                if let Some(n) = &pending.name
                    && self.p(0.2)
                {
                    e = e.s("name", n.clone());
                }
                if self.p(0.85) {
                    e = e.s("delta", self.text());
                } else {
                    self.feature("chunk_without_delta");
                }
            }
            Kind::Tool => {
                if self.p(0.1) {
                    e = e.s("toolCallName", pending.tool_name.clone());
                    self.feature("chunk_repeats_opener_field");
                }
                match &pending.parent {
                    Some(p) if self.p(0.2) => e = e.s("parentMessageId", p.clone()),
                    None if self.p(0.05) => {
                        e = e.v("parentMessageId", Value::Null);
                        self.feature("legacy_null_parent_message_id");
                    }
                    _ => {}
                }
                if self.p(0.85) {
                    let d = self.next_args(&pending.id);
                    e = e.s("delta", d);
                } else {
                    self.feature("chunk_without_delta");
                }
            }
            Kind::Reasoning => {
                if self.p(0.85) {
                    e = e.s("delta", self.text());
                } else {
                    self.feature("chunk_without_delta");
                }
            }
        }
        let mut ev = e.done();
        if ev.get("delta").is_none() && self.p(0.5) {
            // A final chunk carrying only metadata (usage, a finish reason).
            ev["metadata"] = json!({"finishReason": "stop"});
            self.feature("chunk_metadata_only_continuation");
        }
        self.emit(ev);
    }
}

// ---------------------------------------------------------------------------
// Broken, malformed and spec-only streams
// ---------------------------------------------------------------------------

impl Gen {
    fn prefix_runs(&mut self) {
        let n = *[0usize, 0, 0, 1, 1, 2].choose(&mut self.rng).unwrap_or(&0);
        for _ in 0..n {
            self.one_run(false);
        }
        if n > 0 {
            self.feature("fault_after_earlier_runs");
        }
    }

    /// What follows the faulty event: irrelevant to the verdict, so arbitrary.
    fn tail(&mut self) {
        self.checking = false;
        if self.p(0.5) {
            return;
        }
        for _ in 0..self.range(0, 4) {
            let ev = match self.range(0, 3) {
                0 => E::new("TEXT_MESSAGE_CONTENT")
                    .s("messageId", self.fresh("tail"))
                    .s("delta", "after")
                    .done(),
                1 => E::new("CUSTOM")
                    .s("name", "tail")
                    .v("value", Value::Null)
                    .done(),
                _ => E::new("STATE_SNAPSHOT")
                    .v("snapshot", json!({"tail": true}))
                    .done(),
            };
            self.events.push(ev);
        }
        let ev = self.run_finished_base().done();
        self.events.push(ev);
    }

    /// Some event, with fresh ids, of a type picked from a broad list.
    fn some_event(&mut self) -> Value {
        match self.range(0, 13) {
            0 => E::new("TEXT_MESSAGE_START")
                .s("messageId", self.fresh("late"))
                .done(),
            1 => E::new("TEXT_MESSAGE_CHUNK")
                .s("messageId", self.fresh("late"))
                .s("delta", "x")
                .done(),
            2 => E::new("TOOL_CALL_START")
                .s("toolCallId", self.fresh("late"))
                .s("toolCallName", "search")
                .done(),
            3 => E::new("STATE_SNAPSHOT")
                .v("snapshot", json!({"late": 1}))
                .done(),
            4 => E::new("CUSTOM")
                .s("name", "acme:late")
                .v("value", json!(1))
                .done(),
            5 => E::new("RAW").v("event", json!({"x": 1})).done(),
            6 => E::new("STEP_STARTED").s("stepName", "late").done(),
            7 => E::new("MESSAGES_SNAPSHOT").v("messages", json!([])).done(),
            8 => self.run_finished_base().done(),
            9 => E::new("SUBAGENT_STARTED")
                .s("subagentRunId", self.fresh("late"))
                .s("name", "x")
                .done(),
            10 => E::new("ACTIVITY_SNAPSHOT")
                .s("messageId", self.fresh("late"))
                .s("activityType", "PLAN")
                .v("content", json!({}))
                .done(),
            11 => E::new("TOOL_CALL_RESULT")
                .s("messageId", self.fresh("late"))
                .s("toolCallId", "c")
                .s("content", "ok")
                .done(),
            _ => E::new("REASONING_ENCRYPTED_VALUE")
                .s("subtype", "message")
                .s("entityId", "m")
                .s("encryptedValue", "x")
                .done(),
        }
    }

    fn broken_stream(&mut self, fault: Fault) {
        self.initial_context();
        if fault == Fault::FirstNotRunStarted {
            if self.p(0.3) {
                let ev = self.unknown_event();
                self.push(ev);
            }
            let ev = self.some_event();
            let label = match ty(&ev) {
                "TEXT_MESSAGE_CHUNK" => "first/chunk",
                "RUN_FINISHED" => "first/run_finished",
                _ => "first/other",
            };
            self.commit(vec![ev], label, fault.template());
            self.tail();
            return;
        }
        self.prefix_runs();
        self.run_start(true);
        let n = self.range(0, 25);
        self.body(n);
        self.inject(fault);
        self.tail();
    }

    fn run_finished_fault(&mut self, label: &'static str, fault: Fault) {
        let ev = self.run_finished_base().done();
        self.commit(vec![ev], label, fault.template());
    }

    // ----- ensure helpers (all emit valid events) -----

    fn ensure_explicit(&mut self, kind: Kind) -> String {
        let ids = self.explicit(kind);
        match self.pick(&ids) {
            Some(id) if self.p(0.7) => id,
            _ => {
                let tag = self.pick_tag();
                match kind {
                    Kind::Text => self.open_text(&tag),
                    Kind::Tool => self.open_tool(&tag, None, false),
                    Kind::Reasoning => self.open_reasoning(&tag),
                }
            }
        }
    }

    fn ensure_span(&mut self) -> String {
        let spans = self.m.spans.0.clone();
        match self.pick(&spans) {
            Some(id) if self.p(0.7) => id,
            _ => {
                let tag = self.pick_tag();
                self.open_span(&tag)
            }
        }
    }

    /// An entity of `kind` that this run opened and closed (its owner is on record).
    fn ensure_closed(&mut self, kind: Kind) -> String {
        let (pool, owners) = match kind {
            Kind::Text => (&self.text_ids, &self.m.own_msg),
            Kind::Tool => (&self.tool_ids, &self.m.own_tool),
            Kind::Reasoning => (&self.reasoning_ids, &self.m.own_reason),
        };
        let open = match kind {
            Kind::Text => &self.m.text,
            Kind::Tool => &self.m.tools,
            Kind::Reasoning => &self.m.rmsgs,
        };
        let closed: Vec<String> = pool
            .iter()
            .filter(|id| owners.contains_key(*id) && !open.has(id))
            .cloned()
            .collect();
        if let Some(id) = self.pick(&closed)
            && self.p(0.7)
        {
            return id;
        }
        let tag = self.pick_tag();
        match kind {
            Kind::Text => {
                let id = self.open_text(&tag);
                self.close_text(&id);
                id
            }
            Kind::Tool => {
                let id = self.open_tool(&tag, None, false);
                self.close_tool(&id);
                id
            }
            Kind::Reasoning => {
                let id = self.open_reasoning(&tag);
                self.close_reasoning(&id);
                id
            }
        }
    }

    fn ensure_closed_span(&mut self) -> String {
        let closed: Vec<String> = self
            .span_ids
            .iter()
            .filter(|id| self.m.own_reason.contains_key(*id) && !self.m.spans.has(id))
            .cloned()
            .collect();
        if let Some(id) = self.pick(&closed) {
            return id;
        }
        let tag = self.pick_tag();
        let id = self.open_span(&tag);
        self.close_span(&id);
        id
    }

    fn ensure_lane(&mut self, kind: Kind) -> (Owner, Pending) {
        let lanes = self.lanes_of(kind);
        if let Some(l) = self.pick(&lanes)
            && self.p(0.6)
        {
            return l;
        }
        let (owner, id) = self.open_chunk(kind, None);
        let p = self.m.lane(&owner).cloned().expect("lane just opened");
        debug_assert_eq!(p.id, id);
        (owner, p)
    }

    fn ensure_step(&mut self) -> (Owner, String) {
        let steps = self.m.active_steps();
        match self.pick(&steps) {
            Some(s) if self.p(0.7) => s,
            _ => {
                let owner = self.pick_tag();
                let name = self.start_step(&owner);
                (owner, name)
            }
        }
    }

    fn ensure_subagent(&mut self) -> String {
        let active = self.m.subs.0.clone();
        match self.pick(&active) {
            Some(s) if self.p(0.7) => s,
            _ => self.start_subagent(),
        }
    }

    fn ensure_activity(&mut self) -> (String, Owner) {
        let known: Vec<String> = self
            .m
            .own_act
            .keys()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if let Some(id) = self.pick(&known)
            && self.p(0.6)
        {
            let owner = self.m.own_act.get(&id).cloned().unwrap_or(None);
            return (id, owner);
        }
        let id = self.fresh("act");
        self.activities.push(id.clone());
        let tag = self.pick_tag();
        self.emit(
            E::new("ACTIVITY_SNAPSHOT")
                .s("messageId", id.clone())
                .s("activityType", "PLAN")
                .v("content", json!({"steps": []}))
                .tag(&tag)
                .done(),
        );
        (id, tag)
    }

    /// A chunk continuing `pending` in lane `owner`, spelled with its id, its
    /// tag, or neither (when that resolves to the same lane).
    fn continuation(&mut self, kind: Kind, owner: &Owner, pending: &Pending) -> E {
        let mut e = E::new(kind.family().chunk);
        let bare_ok = self.m.resolve_lane(kind, None, &None).ok().as_ref() == Some(owner);
        match self.range(0, 3) {
            0 if bare_ok => {}
            1 if owner.is_some() => e = e.tag(owner),
            _ => e = e.s(kind.family().id_field, pending.id.clone()),
        }
        e
    }

    fn snapshot_overriding(&mut self, overrides: &[(String, Owner)], extra: Vec<Value>) -> Value {
        let mut out = Vec::new();
        for m in self.msgs.clone() {
            let owner = match overrides.iter().find(|(id, _)| *id == m.id) {
                Some((_, o)) => o.clone(),
                None => self.owner_in_bucket(&m).unwrap_or_else(|| m.owner.clone()),
            };
            out.push(m.to_json(&owner));
        }
        out.extend(extra);
        E::new("MESSAGES_SNAPSHOT")
            .v("messages", Value::Array(out))
            .done()
    }

    // ----- the faults -----

    fn inject(&mut self, f: Fault) {
        let tpl = f.template();
        match f {
            Fault::FirstNotRunStarted => unreachable!("handled by broken_stream"),
            Fault::NestedRunStarted => {
                let run_id = if self.p(0.3) {
                    self.run_id.clone()
                } else {
                    self.fresh("run")
                };
                let ev = self.run_started_event(&run_id);
                self.commit(vec![ev], "nested_run_started", tpl);
            }
            Fault::AfterRunFinished => {
                self.close_all();
                self.run_finish();
                let mut evs = Vec::new();
                if self.p(0.2) {
                    evs.push(self.unknown_event());
                }
                evs.push(self.some_event());
                if ty(evs.last().expect("event")) == "RUN_FINISHED" {
                    self.commit(evs, "after_finished/run_finished", tpl);
                } else {
                    self.commit(evs, "after_finished/event", tpl);
                }
            }
            Fault::AfterRunError => {
                let label = if self.p(0.3) {
                    self.close_all();
                    self.run_finish();
                    "after_error/late_error"
                } else {
                    "after_error/mid_run"
                };
                let ev = self.run_error_event();
                self.emit(ev);
                let ev = if self.p(0.25) {
                    self.run_error_event()
                } else {
                    self.some_event()
                };
                self.commit(vec![ev], label, tpl);
            }
            Fault::FinishOpenSteps => {
                self.ensure_step();
                self.run_finished_fault("finish_open/steps", f);
            }
            Fault::FinishOpenText => {
                self.close_steps();
                self.ensure_explicit(Kind::Text);
                self.run_finished_fault("finish_open/text", f);
            }
            Fault::FinishOpenReasoningMessage => {
                self.close_steps();
                for id in self.explicit(Kind::Text) {
                    self.close_text(&id);
                }
                self.ensure_explicit(Kind::Reasoning);
                self.run_finished_fault("finish_open/reasoning_message", f);
            }
            Fault::FinishOpenReasoningSpan => {
                self.close_steps();
                for id in self.explicit(Kind::Text) {
                    self.close_text(&id);
                }
                for id in self.explicit(Kind::Reasoning) {
                    self.close_reasoning(&id);
                }
                self.ensure_span();
                self.run_finished_fault("finish_open/reasoning_span", f);
            }
            Fault::FinishOpenTool => {
                self.close_steps();
                for id in self.explicit(Kind::Text) {
                    self.close_text(&id);
                }
                for id in self.explicit(Kind::Reasoning) {
                    self.close_reasoning(&id);
                }
                for id in self.m.spans.0.clone() {
                    self.close_span(&id);
                }
                self.ensure_explicit(Kind::Tool);
                self.run_finished_fault("finish_open/tool", f);
            }
            Fault::FinishOpenSubagent => {
                self.close_steps();
                for id in self.explicit(Kind::Text) {
                    self.close_text(&id);
                }
                for id in self.explicit(Kind::Reasoning) {
                    self.close_reasoning(&id);
                }
                for id in self.m.spans.0.clone() {
                    self.close_span(&id);
                }
                for id in self.explicit(Kind::Tool) {
                    self.close_tool(&id);
                }
                self.ensure_subagent();
                self.run_finished_fault("finish_open/subagent", f);
            }
            Fault::DupTextStart => {
                let id = self.ensure_explicit(Kind::Text);
                let tag = self.pick_tag();
                if self.p(0.5) {
                    let ev = E::new("TEXT_MESSAGE_START")
                        .s("messageId", id)
                        .tag(&tag)
                        .done();
                    self.commit(vec![ev], "duplicate/text_start", tpl);
                } else {
                    let ev = E::new("TEXT_MESSAGE_CHUNK")
                        .s("messageId", id)
                        .s("delta", "again")
                        .tag(&tag)
                        .done();
                    self.commit(vec![ev], "duplicate/text_chunk", tpl);
                }
            }
            Fault::DupToolStart => {
                let id = self.ensure_explicit(Kind::Tool);
                let tag = self.pick_tag();
                let ty = if self.p(0.5) {
                    "TOOL_CALL_START"
                } else {
                    "TOOL_CALL_CHUNK"
                };
                let ev = E::new(ty)
                    .s("toolCallId", id)
                    .s("toolCallName", "search")
                    .tag(&tag)
                    .done();
                self.commit(
                    vec![ev],
                    if ty == "TOOL_CALL_START" {
                        "duplicate/tool_start"
                    } else {
                        "duplicate/tool_chunk"
                    },
                    tpl,
                );
            }
            Fault::DupReasoningSpan => {
                let id = self.ensure_span();
                let tag = self.pick_tag();
                let ev = E::new("REASONING_START")
                    .s("messageId", id)
                    .tag(&tag)
                    .done();
                self.commit(vec![ev], "duplicate/reasoning_span", tpl);
            }
            Fault::DupReasoningMessage => {
                let id = self.ensure_explicit(Kind::Reasoning);
                let tag = self.pick_tag();
                if self.p(0.5) {
                    let ev = E::new("REASONING_MESSAGE_START")
                        .s("messageId", id)
                        .s("role", "reasoning")
                        .tag(&tag)
                        .done();
                    self.commit(vec![ev], "duplicate/reasoning_start", tpl);
                } else {
                    let ev = E::new("REASONING_MESSAGE_CHUNK")
                        .s("messageId", id)
                        .s("delta", "again")
                        .tag(&tag)
                        .done();
                    self.commit(vec![ev], "duplicate/reasoning_chunk", tpl);
                }
            }
            Fault::TextContentNoStart | Fault::TextEndNoStart => {
                let (label, id, tag) = self.unstarted_target(Kind::Text);
                let ev = if f == Fault::TextContentNoStart {
                    E::new("TEXT_MESSAGE_CONTENT")
                        .s("messageId", id)
                        .s("delta", "orphan")
                } else {
                    E::new("TEXT_MESSAGE_END").s("messageId", id)
                };
                self.commit(vec![ev.tag(&tag).done()], label, tpl);
            }
            Fault::ToolArgsNoStart | Fault::ToolEndNoStart => {
                let (label, id, tag) = self.unstarted_target(Kind::Tool);
                let ev = if f == Fault::ToolArgsNoStart {
                    E::new("TOOL_CALL_ARGS").s("toolCallId", id).s("delta", "{")
                } else {
                    E::new("TOOL_CALL_END").s("toolCallId", id)
                };
                self.commit(vec![ev.tag(&tag).done()], label, tpl);
            }
            Fault::ReasoningContentNoStart | Fault::ReasoningMessageEndNoStart => {
                let (label, id, tag) = if self.p(0.2) {
                    let id = self.ensure_span();
                    if self.m.rmsgs.has(&id) {
                        self.unstarted_target(Kind::Reasoning)
                    } else {
                        let tag = self.m.own_reason.get(&id).cloned().unwrap_or(None);
                        ("unstarted/span_id_is_not_a_message", id, tag)
                    }
                } else {
                    self.unstarted_target(Kind::Reasoning)
                };
                let ev = if f == Fault::ReasoningContentNoStart {
                    E::new("REASONING_MESSAGE_CONTENT")
                        .s("messageId", id)
                        .s("delta", "orphan")
                } else {
                    E::new("REASONING_MESSAGE_END").s("messageId", id)
                };
                self.commit(vec![ev.tag(&tag).done()], label, tpl);
            }
            Fault::ReasoningEndNoSpan => {
                let (label, id, tag) = match self.range(0, 3) {
                    0 => ("unstarted/unknown", self.fresh("nospan"), self.pick_tag()),
                    1 => {
                        let id = self.ensure_closed_span();
                        ("unstarted/closed", id, None)
                    }
                    _ => {
                        let id = self.ensure_explicit(Kind::Reasoning);
                        if self.m.spans.has(&id) {
                            ("unstarted/unknown", self.fresh("nospan"), None)
                        } else {
                            ("unstarted/message_id_is_not_a_span", id, None)
                        }
                    }
                };
                let ev = E::new("REASONING_END").s("messageId", id).tag(&tag).done();
                self.commit(vec![ev], label, tpl);
            }
            Fault::StepNotStarted => {
                let free: Vec<&'static str> = STEP_NAMES
                    .iter()
                    .copied()
                    .filter(|n| {
                        !self
                            .m
                            .steps
                            .iter()
                            .any(|(_, names)| names.iter().any(|x| x == n))
                    })
                    .collect();
                let name = match self.pick(&free) {
                    Some(n) if self.p(0.5) => n.to_owned(),
                    _ => self.fresh("never"),
                };
                let tag = self.pick_tag();
                let ev = E::new("STEP_FINISHED").s("stepName", name).tag(&tag).done();
                self.commit(vec![ev], "step/not_started", tpl);
            }
            Fault::StepOtherOwner => {
                let (owner, name) = self.ensure_step();
                let mut other: Owner = match &owner {
                    None => Some(self.other_tag(&None)),
                    Some(_) if self.p(0.5) => None,
                    Some(_) => Some(self.other_tag(&owner)),
                };
                while self.m.step_active(&other, &name) {
                    other = Some(self.fresh("other"));
                }
                let ev = E::new("STEP_FINISHED")
                    .s("stepName", name)
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "step/other_owner", tpl);
            }
            Fault::StepDuplicate => {
                let (owner, name) = self.ensure_step();
                let ev = E::new("STEP_STARTED")
                    .s("stepName", name)
                    .tag(&owner)
                    .done();
                self.commit(vec![ev], "step/duplicate", tpl);
            }
            Fault::SubagentTerminalUnknown => {
                let closed: Vec<String> = self
                    .m
                    .subs_closed
                    .iter()
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let (label, id) = match self.pick(&closed) {
                    Some(id) if self.p(0.5) => ("subagent/terminal_after_terminal", id),
                    _ => ("subagent/terminal_unknown", self.fresh("nosub")),
                };
                let ev = if self.p(0.5) {
                    E::new("SUBAGENT_FINISHED").s("subagentRunId", id).done()
                } else {
                    E::new("SUBAGENT_ERROR")
                        .s("subagentRunId", id)
                        .s("message", "x")
                        .done()
                };
                self.commit(vec![ev], label, tpl);
            }
            Fault::SubagentDuplicate => {
                let id = self.ensure_subagent();
                let ev = E::new("SUBAGENT_STARTED")
                    .s("subagentRunId", id)
                    .s("name", "again")
                    .done();
                self.commit(vec![ev], "subagent/duplicate", tpl);
            }
            Fault::SubagentReused => {
                let closed: Vec<String> = self
                    .m
                    .subs_closed
                    .iter()
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let id = match self.pick(&closed) {
                    Some(id) => id,
                    None => {
                        let id = self.start_subagent();
                        let error = self.p(0.3);
                        self.finish_subagent(&id, error);
                        id
                    }
                };
                let ev = E::new("SUBAGENT_STARTED")
                    .s("subagentRunId", id)
                    .s("name", "again")
                    .done();
                self.commit(vec![ev], "subagent/reused", tpl);
            }
            Fault::SubagentParentUnknown => {
                let ev = E::new("SUBAGENT_STARTED")
                    .s("subagentRunId", self.fresh("sub"))
                    .s("name", "child")
                    .s("parentSubagentRunId", self.fresh("ghost-parent"))
                    .done();
                self.commit(vec![ev], "subagent/parent_unknown", tpl);
            }
            Fault::TagMismatchMessage => self.tag_mismatch_message(tpl),
            Fault::TagMismatchToolCall => self.tag_mismatch_tool(tpl),
            Fault::TagMismatchReasoning => self.tag_mismatch_reasoning(tpl),
            Fault::TagMismatchActivity => self.tag_mismatch_activity(tpl),
            Fault::ToolParentOwnerMismatch => {
                let parents: Vec<String> = self
                    .m
                    .own_msg
                    .keys()
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let parent = match self.pick(&parents) {
                    Some(p) if self.p(0.6) => p,
                    _ => {
                        let tag = self.pick_tag();
                        self.open_text(&tag)
                    }
                };
                let owner = self.m.own_msg.get(&parent).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let chunk = self.p(0.4);
                let ev = E::new(if chunk {
                    "TOOL_CALL_CHUNK"
                } else {
                    "TOOL_CALL_START"
                })
                .s("toolCallId", self.fresh("call"))
                .s("toolCallName", "search")
                .s("parentMessageId", parent)
                .tag(&other)
                .done();
                self.commit(
                    vec![ev],
                    if chunk {
                        "tool_parent/chunk"
                    } else {
                        "tool_parent/start"
                    },
                    tpl,
                );
            }
            Fault::ToolReopenParentOwner => {
                let tool = self.ensure_closed(Kind::Tool);
                let tool_owner = self.m.own_tool.get(&tool).cloned().unwrap_or(None);
                let parents: Vec<String> = self
                    .m
                    .own_msg
                    .iter()
                    .filter(|(_, o)| **o != tool_owner)
                    .map(|(k, _)| k.clone())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let parent = match self.pick(&parents) {
                    Some(p) if self.p(0.5) => p,
                    _ => {
                        let tag = match &tool_owner {
                            None => Some(self.other_tag(&None)),
                            Some(_) => None,
                        };
                        self.open_text(&tag)
                    }
                };
                let chunk = self.p(0.4);
                let ev = E::new(if chunk {
                    "TOOL_CALL_CHUNK"
                } else {
                    "TOOL_CALL_START"
                })
                .s("toolCallId", tool)
                .s("toolCallName", "search")
                .s("parentMessageId", parent)
                .done();
                self.commit(
                    vec![ev],
                    if chunk {
                        "tool_reopen_parent/chunk"
                    } else {
                        "tool_reopen_parent/start"
                    },
                    tpl,
                );
            }
            Fault::ChunkTextNoId | Fault::ChunkToolNoId | Fault::ChunkReasoningNoId => {
                let kind = match f {
                    Fault::ChunkTextNoId => Kind::Text,
                    Fault::ChunkToolNoId => Kind::Tool,
                    _ => Kind::Reasoning,
                };
                let other_kind_lanes: Vec<Owner> = self
                    .m
                    .lanes
                    .iter()
                    .filter(|(o, p)| p.kind != kind && o.is_some())
                    .map(|(o, _)| o.clone())
                    .collect();
                let (label, tag) = match self.range(0, 3) {
                    0 => {
                        for (owner, _) in self.lanes_of(kind) {
                            self.emit(
                                E::new("CUSTOM")
                                    .s("name", "flush")
                                    .v("value", Value::Null)
                                    .tag(&owner)
                                    .done(),
                            );
                        }
                        ("chunk_first/untagged_nothing_open", None)
                    }
                    1 if !other_kind_lanes.is_empty() => (
                        "chunk_first/lane_holds_other_kind",
                        self.pick(&other_kind_lanes).unwrap_or(None),
                    ),
                    _ => {
                        let mut t = self.fresh("lane");
                        while self.m.lane(&Some(t.clone())).is_some() {
                            t = self.fresh("lane");
                        }
                        ("chunk_first/empty_lane", Some(t))
                    }
                };
                let mut e = E::new(kind.family().chunk).s("delta", "x").tag(&tag);
                if kind == Kind::Tool && self.p(0.5) {
                    e = e.s("toolCallName", "search");
                }
                self.commit(vec![e.done()], label, tpl);
            }
            Fault::ChunkToolNoName => {
                let tag = self.pick_tag();
                let ev = E::new("TOOL_CALL_CHUNK")
                    .s("toolCallId", self.fresh("call"))
                    .s("delta", "{")
                    .tag(&tag)
                    .done();
                self.commit(vec![ev], "chunk_first/tool_without_name", tpl);
            }
            Fault::ChunkConflictRole | Fault::ChunkConflictName => {
                let (owner, pending) = self.ensure_lane(Kind::Text);
                let mut e = self.continuation(Kind::Text, &owner, &pending);
                if f == Fault::ChunkConflictRole {
                    let roles: Vec<&'static str> = TEXT_ROLES
                        .iter()
                        .copied()
                        .filter(|r| *r != pending.role)
                        .collect();
                    e = e.s("role", self.pick(&roles).unwrap_or("user"));
                } else {
                    let names: Vec<&'static str> = SPEAKERS
                        .iter()
                        .copied()
                        .filter(|n| Some(*n) != pending.name.as_deref())
                        .collect();
                    e = e.s("name", self.pick(&names).unwrap_or("zed"));
                }
                let ev = e.s("delta", "x").done();
                self.commit(
                    vec![ev],
                    if f == Fault::ChunkConflictRole {
                        "chunk_conflict/role"
                    } else {
                        "chunk_conflict/name"
                    },
                    tpl,
                );
            }
            Fault::ChunkConflictToolName | Fault::ChunkConflictParent => {
                let (owner, pending) = self.ensure_lane(Kind::Tool);
                let mut e = self.continuation(Kind::Tool, &owner, &pending);
                if f == Fault::ChunkConflictToolName {
                    let names: Vec<&'static str> = TOOL_NAMES
                        .iter()
                        .copied()
                        .filter(|n| *n != pending.tool_name)
                        .collect();
                    e = e.s("toolCallName", self.pick(&names).unwrap_or("other"));
                } else {
                    e = e.s("parentMessageId", self.fresh("other-parent"));
                }
                let ev = e.s("delta", "1").done();
                self.commit(
                    vec![ev],
                    if f == Fault::ChunkConflictParent {
                        "chunk_conflict/parent"
                    } else {
                        "chunk_conflict/tool_name"
                    },
                    tpl,
                );
            }
            Fault::ChunkLaneOwner => {
                let kind = *[Kind::Text, Kind::Tool, Kind::Reasoning]
                    .choose(&mut self.rng)
                    .expect("kinds");
                let (owner, pending) = self.ensure_lane(kind);
                let other = Some(self.other_tag(&owner));
                let ev = E::new(kind.family().chunk)
                    .s(kind.family().id_field, pending.id)
                    .s("delta", "x")
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "chunk_lane_owner", tpl);
            }
            Fault::ChunkAmbiguous => {
                let kind = *[Kind::Text, Kind::Tool, Kind::Reasoning]
                    .choose(&mut self.rng)
                    .expect("kinds");
                if self.m.lane(&None).is_some_and(|p| p.kind == kind) {
                    self.emit(
                        E::new("CUSTOM")
                            .s("name", "flush")
                            .v("value", Value::Null)
                            .done(),
                    );
                }
                let want = if self.p(0.3) { 3 } else { 2 };
                while self.lanes_of(kind).len() < want {
                    let holders: Vec<Owner> =
                        self.lanes_of(kind).into_iter().map(|(o, _)| o).collect();
                    let mut candidates: Vec<String> = self.m.subs.0.clone();
                    candidates.extend(self.attr_tags.iter().cloned());
                    candidates.retain(|c| !holders.contains(&Some(c.clone())));
                    let tag = match self.pick(&candidates) {
                        Some(t) if self.p(0.6) => t,
                        _ => self.fresh("lane"),
                    };
                    self.open_chunk(kind, Some(Some(tag)));
                }
                let ev = E::new(kind.family().chunk).s("delta", "who?").done();
                self.commit(vec![ev], "chunk_ambiguous", tpl);
            }
        }
    }

    /// A target for a continuation that names nothing open: an unknown id, a
    /// closed one, or one a chunk lane holds and the event's own tag closes.
    fn unstarted_target(&mut self, kind: Kind) -> (&'static str, String, Owner) {
        match self.range(0, 3) {
            0 => ("unstarted/unknown", self.fresh("nothing"), self.pick_tag()),
            1 => {
                let id = self.ensure_closed(kind);
                let owners = match kind {
                    Kind::Text => &self.m.own_msg,
                    Kind::Tool => &self.m.own_tool,
                    Kind::Reasoning => &self.m.own_reason,
                };
                let tag = owners.get(&id).cloned().unwrap_or(None);
                ("unstarted/closed", id, tag)
            }
            _ => {
                let (owner, pending) = self.ensure_lane(kind);
                ("unstarted/closed_by_own_lane", pending.id, owner)
            }
        }
    }

    fn tag_mismatch_message(&mut self, tpl: &'static str) {
        match self.range(0, 8) {
            0 => {
                let id = self.ensure_explicit(Kind::Text);
                let owner = self.m.own_msg.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = if self.p(0.6) {
                    E::new("TEXT_MESSAGE_CONTENT")
                        .s("messageId", id)
                        .s("delta", "x")
                } else {
                    E::new("TEXT_MESSAGE_END").s("messageId", id)
                };
                self.commit(vec![ev.tag(&other).done()], "tag/text_continuation", tpl);
            }
            1 | 2 => {
                let id = self.ensure_closed(Kind::Text);
                let owner = self.m.own_msg.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                if self.p(0.5) {
                    let ev = E::new("TEXT_MESSAGE_START")
                        .s("messageId", id)
                        .tag(&other)
                        .done();
                    self.commit(vec![ev], "tag/text_reopen", tpl);
                } else {
                    let ev = E::new("TEXT_MESSAGE_CHUNK")
                        .s("messageId", id)
                        .s("delta", "x")
                        .tag(&other)
                        .done();
                    self.commit(vec![ev], "tag/text_reopen_by_chunk", tpl);
                }
            }
            3 => {
                let id = self.ensure_closed(Kind::Text);
                let owner = self.m.own_msg.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = E::new("REASONING_ENCRYPTED_VALUE")
                    .s("subtype", "message")
                    .s("entityId", id)
                    .s("encryptedValue", "enc")
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/encrypted_text_message", tpl);
            }
            4 => {
                let id = self.ensure_closed(Kind::Reasoning);
                let owner = self.m.own_reason.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = E::new("REASONING_ENCRYPTED_VALUE")
                    .s("subtype", "message")
                    .s("entityId", id)
                    .s("encryptedValue", "enc")
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/encrypted_reasoning_message", tpl);
            }
            5 => {
                let id = self.fresh("result");
                let tag = self.pick_tag();
                let calls = self.tool_ids.clone();
                let call = self.pick(&calls).unwrap_or_else(|| "call-x".into());
                self.emit(
                    E::new("TOOL_CALL_RESULT")
                        .s("messageId", id.clone())
                        .s("toolCallId", call)
                        .s("content", "ok")
                        .tag(&tag)
                        .done(),
                );
                let other = Some(self.other_tag(&tag));
                let ev = E::new("TEXT_MESSAGE_START")
                    .s("messageId", id)
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/tool_result_minted_owner", tpl);
            }
            6 => {
                let owner = Some(self.other_tag(&None));
                let id = self.open_text(&owner);
                let new_owner = if self.p(0.5) {
                    None
                } else {
                    Some(self.other_tag(&owner))
                };
                let snap = self.snapshot_overriding(&[(id.clone(), new_owner)], Vec::new());
                self.emit(snap);
                let ev = E::new("TEXT_MESSAGE_CONTENT")
                    .s("messageId", id)
                    .s("delta", "x")
                    .tag(&owner)
                    .done();
                self.commit(vec![ev], "tag/snapshot_reattributed_open_message", tpl);
            }
            _ => {
                self.close_all();
                self.run_finish();
                self.run_no += 1;
                let run_id = self.fresh("run");
                let id = self.fresh("echo");
                let seeded = Some(self.attr_tag());
                let msg = json!({"id": id, "role": "assistant", "content": "earlier", "subagentRunId": seeded});
                let input = json!({"threadId": self.thread_id, "runId": run_id, "messages": [msg]});
                self.emit(
                    E::new("RUN_STARTED")
                        .s("threadId", self.thread_id.clone())
                        .s("runId", run_id.clone())
                        .v("input", input)
                        .done(),
                );
                self.run_id = run_id;
                let other = Some(self.other_tag(&seeded));
                let ev = E::new("TEXT_MESSAGE_START")
                    .s("messageId", id)
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/input_echo_seeded_owner", tpl);
            }
        }
    }

    fn tag_mismatch_tool(&mut self, tpl: &'static str) {
        match self.range(0, 5) {
            0 => {
                let id = self.ensure_explicit(Kind::Tool);
                let owner = self.m.own_tool.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = if self.p(0.6) {
                    E::new("TOOL_CALL_ARGS").s("toolCallId", id).s("delta", "{")
                } else {
                    E::new("TOOL_CALL_END").s("toolCallId", id)
                };
                self.commit(vec![ev.tag(&other).done()], "tag/tool_continuation", tpl);
            }
            1 => {
                let id = self.ensure_closed(Kind::Tool);
                let owner = self.m.own_tool.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ty = if self.p(0.5) {
                    "TOOL_CALL_START"
                } else {
                    "TOOL_CALL_CHUNK"
                };
                let ev = E::new(ty)
                    .s("toolCallId", id)
                    .s("toolCallName", "search")
                    .tag(&other)
                    .done();
                self.commit(
                    vec![ev],
                    if ty == "TOOL_CALL_START" {
                        "tag/tool_reopen"
                    } else {
                        "tag/tool_reopen_by_chunk"
                    },
                    tpl,
                );
            }
            2 => {
                let id = self.ensure_closed(Kind::Tool);
                let owner = self.m.own_tool.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = E::new("REASONING_ENCRYPTED_VALUE")
                    .s("subtype", "tool-call")
                    .s("entityId", id)
                    .s("encryptedValue", "enc")
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/encrypted_tool_call", tpl);
            }
            _ => {
                let owner = Some(self.other_tag(&None));
                let id = self.open_tool(&owner, None, false);
                let new_owner = if self.p(0.5) {
                    None
                } else {
                    Some(self.other_tag(&owner))
                };
                let holder = self.fresh("holder");
                let extra = json!({"id": holder, "role": "assistant",
                    "toolCalls": [{"id": id, "type": "function", "function": {"name": "search", "arguments": ""}}]});
                let mut extra = extra;
                if let Some(o) = &new_owner {
                    extra["subagentRunId"] = json!(o);
                }
                let snap = self.snapshot_overriding(&[], vec![extra]);
                self.emit(snap);
                let ev = E::new("TOOL_CALL_ARGS")
                    .s("toolCallId", id)
                    .s("delta", "{")
                    .tag(&owner)
                    .done();
                self.commit(vec![ev], "tag/snapshot_reattributed_tool_call", tpl);
            }
        }
    }

    fn tag_mismatch_reasoning(&mut self, tpl: &'static str) {
        match self.range(0, 5) {
            0 => {
                let id = self.ensure_explicit(Kind::Reasoning);
                let owner = self.m.own_reason.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = if self.p(0.6) {
                    E::new("REASONING_MESSAGE_CONTENT")
                        .s("messageId", id)
                        .s("delta", "x")
                } else {
                    E::new("REASONING_MESSAGE_END").s("messageId", id)
                };
                self.commit(
                    vec![ev.tag(&other).done()],
                    "tag/reasoning_continuation",
                    tpl,
                );
            }
            1 => {
                let id = self.ensure_span();
                let owner = self.m.own_reason.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = E::new("REASONING_END")
                    .s("messageId", id)
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/span_end", tpl);
            }
            2 => {
                let spans: Vec<String> = self
                    .m
                    .spans
                    .0
                    .iter()
                    .filter(|s| !self.m.rmsgs.has(s))
                    .cloned()
                    .collect();
                let id = match self.pick(&spans) {
                    Some(s) => s,
                    None => {
                        let tag = self.pick_tag();
                        self.open_span(&tag)
                    }
                };
                let owner = self.m.own_reason.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = E::new("REASONING_MESSAGE_START")
                    .s("messageId", id)
                    .s("role", "reasoning")
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/message_inside_foreign_span", tpl);
            }
            3 => {
                let id = self.ensure_closed(Kind::Reasoning);
                let owner = self.m.own_reason.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                if self.p(0.5) {
                    let ev = E::new("REASONING_MESSAGE_START")
                        .s("messageId", id)
                        .s("role", "reasoning")
                        .tag(&other)
                        .done();
                    self.commit(vec![ev], "tag/reasoning_reopen", tpl);
                } else {
                    let ev = E::new("REASONING_MESSAGE_CHUNK")
                        .s("messageId", id)
                        .s("delta", "x")
                        .tag(&other)
                        .done();
                    self.commit(vec![ev], "tag/reasoning_reopen_by_chunk", tpl);
                }
            }
            _ => {
                let id = self.ensure_closed_span();
                let owner = self.m.own_reason.get(&id).cloned().unwrap_or(None);
                let other = Some(self.other_tag(&owner));
                let ev = E::new("REASONING_START")
                    .s("messageId", id)
                    .tag(&other)
                    .done();
                self.commit(vec![ev], "tag/span_reopen", tpl);
            }
        }
    }

    fn tag_mismatch_activity(&mut self, tpl: &'static str) {
        let delta = |id: String, tag: &Owner| {
            E::new("ACTIVITY_DELTA")
                .s("messageId", id)
                .s("activityType", "PLAN")
                .v("patch", json!([{"op": "add", "path": "/x", "value": 1}]))
                .tag(tag)
                .done()
        };
        match self.range(0, 3) {
            0 => {
                let (id, owner) = self.ensure_activity();
                let other = Some(self.other_tag(&owner));
                self.commit(vec![delta(id, &other)], "tag/activity_delta", tpl);
            }
            1 => {
                let (id, owner) = self.ensure_activity();
                let other = Some(self.other_tag(&owner));
                self.emit(
                    E::new("ACTIVITY_SNAPSHOT")
                        .s("messageId", id.clone())
                        .s("activityType", "PLAN")
                        .v("content", json!({"kept": true}))
                        .v("replace", Value::Bool(false))
                        .tag(&other)
                        .done(),
                );
                self.commit(
                    vec![delta(id, &other)],
                    "tag/activity_replace_false_keeps_owner",
                    tpl,
                );
            }
            _ => {
                let id = self.fresh("act");
                self.activities.push(id.clone());
                let seeded = if self.p(0.5) {
                    None
                } else {
                    Some(self.attr_tag())
                };
                let mut extra = json!({"id": id, "role": "activity", "activityType": "PLAN", "content": {"n": 1}});
                if let Some(s) = &seeded {
                    extra["subagentRunId"] = json!(s);
                }
                let snap = self.snapshot_overriding(&[], vec![extra]);
                self.emit(snap);
                let other = Some(self.other_tag(&seeded));
                self.commit(
                    vec![delta(id, &other)],
                    "tag/activity_seeded_by_snapshot",
                    tpl,
                );
            }
        }
    }

    // ----- malformed known values -----

    fn malformed_stream(&mut self) {
        self.initial_context();
        if self.p(0.05) {
            self.feature("malformed_first_event");
        } else {
            self.prefix_runs();
            self.run_start(true);
            let n = self.range(0, 20);
            self.body(n);
        }
        let (label, ev) = self.malformed_event();
        self.checking = false;
        self.events.push(ev);
        self.fault_key = Some(label);
        self.tail();
    }

    fn malformed_event(&mut self) -> (&'static str, Value) {
        let mid = self.fresh("bad");
        let open_text = self.explicit(Kind::Text);
        let target = self.pick(&open_text).unwrap_or_else(|| mid.clone());
        match self.range(0, 36) {
            0 => (
                "malformed/delta_number",
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": target, "delta": 42}),
            ),
            1 => (
                "malformed/message_id_number",
                json!({"type": "TEXT_MESSAGE_START", "messageId": 7}),
            ),
            2 => (
                "malformed/missing_message_id",
                json!({"type": "TEXT_MESSAGE_START", "role": "assistant"}),
            ),
            3 => (
                "malformed/metadata_null",
                json!({"type": "CUSTOM", "name": "x", "value": 1, "metadata": null}),
            ),
            4 => (
                "malformed/metadata_array",
                json!({"type": "STATE_SNAPSHOT", "snapshot": {}, "metadata": ["x"]}),
            ),
            5 => (
                "malformed/timestamp_float",
                json!({"type": "RAW", "event": {}, "timestamp": 1.5}),
            ),
            6 => (
                "malformed/timestamp_string",
                json!({"type": "STEP_STARTED", "stepName": "s", "timestamp": "1700000000"}),
            ),
            7 => (
                "malformed/state_delta_not_array",
                json!({"type": "STATE_DELTA", "delta": {"op": "add", "path": "/a", "value": 1}}),
            ),
            8 => (
                "malformed/patch_path_not_pointer",
                json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "no-slash", "value": 1}]}),
            ),
            9 => (
                "malformed/patch_add_without_value",
                json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/x"}]}),
            ),
            10 => (
                "malformed/activity_content_array",
                json!({"type": "ACTIVITY_SNAPSHOT", "messageId": mid, "activityType": "PLAN", "content": [1, 2]}),
            ),
            11 => (
                "malformed/activity_content_null",
                json!({"type": "ACTIVITY_SNAPSHOT", "messageId": mid, "activityType": "PLAN", "content": null}),
            ),
            12 => (
                "malformed/interrupts_empty",
                json!({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id, "outcome": {"type": "interrupt", "interrupts": []}}),
            ),
            13 => (
                "malformed/tool_result_content_number",
                json!({"type": "TOOL_CALL_RESULT", "messageId": mid, "toolCallId": "c", "content": 12}),
            ),
            14 => (
                "malformed/tool_start_without_name",
                json!({"type": "TOOL_CALL_START", "toolCallId": mid}),
            ),
            15 => (
                "malformed/subagent_without_name",
                json!({"type": "SUBAGENT_STARTED", "subagentRunId": mid}),
            ),
            16 => (
                "malformed/subagent_id_null",
                json!({"type": "SUBAGENT_STARTED", "subagentRunId": null, "name": "x"}),
            ),
            17 => (
                "malformed/tag_null",
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": target, "delta": "x", "subagentRunId": null}),
            ),
            18 => (
                "malformed/run_error_without_message",
                json!({"type": "RUN_ERROR", "code": "x"}),
            ),
            19 => (
                "malformed/parent_run_id_null",
                json!({"type": "RUN_STARTED", "threadId": self.thread_id, "runId": mid, "parentRunId": null}),
            ),
            20 => (
                "malformed/snapshot_message_without_id",
                json!({"type": "MESSAGES_SNAPSHOT", "messages": [{"role": "user", "content": "hi"}]}),
            ),
            21 => (
                "malformed/snapshot_user_content_number",
                json!({"type": "MESSAGES_SNAPSHOT", "messages": [{"id": mid, "role": "user", "content": 5}]}),
            ),
            22 => (
                "malformed/usage_negative",
                json!({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id, "usage": [{"inputTokens": -1}]}),
            ),
            23 => (
                "malformed/step_name_number",
                json!({"type": "STEP_STARTED", "stepName": 3}),
            ),
            24 => (
                "malformed/chunk_delta_null",
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": mid, "delta": null}),
            ),
            25 => (
                "malformed/part_without_mime_type",
                json!({"type": "TOOL_CALL_RESULT", "messageId": mid, "toolCallId": "c",
                "content": [{"type": "image", "source": {"type": "data", "value": "aGVsbG8="}}]}),
            ),
            26 => (
                "malformed/state_snapshot_without_snapshot",
                json!({"type": "STATE_SNAPSHOT"}),
            ),
            27 => (
                "malformed/custom_without_value",
                json!({"type": "CUSTOM", "name": "x"}),
            ),
            28 => (
                "malformed/raw_without_event",
                json!({"type": "RAW", "source": "x"}),
            ),
            29 => (
                "malformed/reasoning_start_without_role",
                json!({"type": "REASONING_MESSAGE_START", "messageId": mid}),
            ),
            30 => (
                "malformed/input_without_messages",
                json!({"type": "RUN_STARTED", "threadId": self.thread_id, "runId": mid, "input": {"threadId": self.thread_id, "runId": mid}}),
            ),
            31 => (
                "malformed/activity_patch_replace_without_value",
                json!({"type": "ACTIVITY_DELTA", "messageId": mid, "activityType": "PLAN", "patch": [{"op": "replace", "path": "/a"}]}),
            ),
            32 => (
                "malformed/encrypted_without_value",
                json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": mid}),
            ),
            33 => (
                "malformed/suspended_interrupt_id_number",
                json!({"type": "SUBAGENT_FINISHED", "subagentRunId": mid, "outcome": {"type": "suspended", "interruptIds": [1]}}),
            ),
            34 => (
                "malformed/subagent_outcome_null",
                json!({"type": "SUBAGENT_FINISHED", "subagentRunId": mid, "outcome": null}),
            ),
            _ => (
                "malformed/snapshot_message_metadata_null",
                json!({"type": "MESSAGES_SNAPSHOT", "messages": [{"id": mid, "role": "user", "content": "x", "metadata": null}]}),
            ),
        }
    }

    // ----- rules only later clients check -----

    fn spec_stream(&mut self, fault: SpecFault) {
        self.initial_context();
        let runs = self.range(1, 4);
        let target = self.range(1, runs + 1);
        self.spec = Some((fault, target));
        for r in 1..=runs {
            let forced = (r == target).then_some(RunEnd::Finished);
            self.one_run_with(r == runs, forced);
        }
        assert!(
            self.spec.is_none(),
            "spec fault {fault:?} was not placed (seed {:#x}, index {})",
            self.seed,
            self.index
        );
        self.intended = Some(fault.fragment());
        self.fault_key = Some(fault.key());
    }
}

#[cfg(test)]
mod tests {
    use super::{FAMILIES, KNOWN_ROLES, KNOWN_TYPES};
    use crate::peers::{read_json, spec_dir};
    use serde_json::Value;

    /// The model's lists of event types and message roles are the official
    /// ones: the 1.1 schema's `EventType` enum, and the `role` constants of
    /// its message definitions.
    #[test]
    fn the_known_types_and_roles_are_the_schemas() {
        let Some(dir) = spec_dir() else { return };
        let schema = read_json(&dir.join("1.1/schema.json"));
        let defs = schema["$defs"].as_object().expect("$defs");
        let types: Vec<&str> = defs["EventType"]["enum"]
            .as_array()
            .expect("EventType enum")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(types, KNOWN_TYPES);
        let mut roles: Vec<&str> = defs
            .iter()
            .filter(|(name, _)| name.ends_with("Message"))
            .filter_map(|(_, def)| def["properties"]["role"]["const"].as_str())
            .collect();
        let mut known = KNOWN_ROLES.to_vec();
        roles.sort_unstable();
        known.sort_unstable();
        assert_eq!(roles, known);
    }

    /// The model's chunk families name only official event types (the table
    /// is data taken from the references, so a typo there is caught here
    /// rather than agreed with).
    #[test]
    fn the_chunk_families_name_official_event_types() {
        for family in &FAMILIES {
            for name in [family.chunk, family.start, family.content, family.end] {
                assert!(KNOWN_TYPES.contains(&name), "{name} ({:?})", family.kind);
            }
        }
    }
}
