//! Differential test of the verifier against the judge, `verifyEvents` of the official
//! `@ag-ui/client` 1.0.0, on randomly generated streams: both must stop at the same event
//! with the same message, or both accept the whole stream.
//!
//! Needs `node` and the pinned client installed under `interop/node_modules` (or the
//! directory named by `AGWIRE_INTEROP_DIR`); skipped loudly otherwise. The number of
//! streams is `AGWIRE_VERIFY_DIFF_STREAMS` (default 20000), the seed
//! `AGWIRE_VERIFY_DIFF_SEED`.

use crate::common;

use std::io::Write as _;
use std::process::Command;

use agwire_core::Event;
use agwire_core::verify::Verifier;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

const JUDGE: &str = r#"
const interop = process.argv[2];
const req = require("module").createRequire(interop + "/package.json");
const { verifyEvents } = req("@ag-ui/client");
const { from } = req("rxjs");
console.log = console.info = console.debug = console.warn = console.error = () => {};
const lines = require("fs").readFileSync(process.argv[3], "utf8").split("\n");
const out = [];
for (const line of lines) {
  if (!line.trim()) continue;
  let accepted = 0;
  let error = null;
  verifyEvents()(from(JSON.parse(line))).subscribe({
    next: () => void accepted++,
    error: (e) => void (error = String(e && e.message)),
  });
  out.push(JSON.stringify({ accepted, error }));
}
require("fs").writeFileSync(process.argv[4], out.join("\n") + "\n");
"#;

/// Small vocabularies make collisions (reopens, foreign owners, shared ids) frequent.
struct Gen {
    rng: StdRng,
    /// What this stream has opened, to continue it more often than chance would.
    opened: Vec<(&'static str, &'static str, Option<&'static str>)>,
    run: u32,
}

const MESSAGES: &[&str] = &["m1", "m2", "m3"];
const TOOL_CALLS: &[&str] = &["t1", "t2"];
const REASONING: &[&str] = &["r1", "r2", "m1"];
const ACTIVITIES: &[&str] = &["a1", "m2"];
const STEPS: &[&str] = &["plan", "tools"];
const SUBAGENTS: &[&str] = &["A", "B", ""];

impl Gen {
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.rng.random_range(0..items.len())]
    }

    fn tag(&mut self) -> Option<&'static str> {
        if self.rng.random_bool(0.55) {
            None
        } else {
            Some(self.pick(SUBAGENTS))
        }
    }

    fn with_tag(mut event: Value, tag: Option<&str>) -> Value {
        if let Some(tag) = tag {
            event["subagentRunId"] = json!(tag);
        }
        event
    }

    /// A continuation of something opened earlier, usually with the opener's tag.
    fn continuation(&mut self) -> Option<Value> {
        if self.opened.is_empty() {
            return None;
        }
        let (kind, id, opener_tag) = self.pick(&self.opened.clone());
        let tag = if self.rng.random_bool(0.8) {
            opener_tag
        } else {
            self.tag()
        };
        let close = self.rng.random_bool(0.4);
        let event = match (kind, close) {
            ("text", false) => {
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": "x"})
            }
            ("text", true) => json!({"type": "TEXT_MESSAGE_END", "messageId": id}),
            ("tool", false) => json!({"type": "TOOL_CALL_ARGS", "toolCallId": id, "delta": "{"}),
            ("tool", true) => json!({"type": "TOOL_CALL_END", "toolCallId": id}),
            ("span", _) => json!({"type": "REASONING_END", "messageId": id}),
            ("reasoning", false) => {
                json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": id, "delta": "x"})
            }
            ("reasoning", true) => json!({"type": "REASONING_MESSAGE_END", "messageId": id}),
            ("step", _) => json!({"type": "STEP_FINISHED", "stepName": id}),
            ("subagent", _) => {
                return Some(if self.rng.random_bool(0.7) {
                    json!({"type": "SUBAGENT_FINISHED", "subagentRunId": id})
                } else {
                    json!({"type": "SUBAGENT_ERROR", "subagentRunId": id, "message": "boom"})
                });
            }
            _ => return None,
        };
        Some(Self::with_tag(event, tag))
    }

    fn message(&mut self) -> Value {
        let id = self.pick(&["m1", "m2", "m3", "r1", "a1", "t1"]);
        let mut message = match self.rng.random_range(0..5) {
            0 => json!({"id": id, "role": "user", "content": "hi"}),
            1 => {
                let call = self.pick(TOOL_CALLS);
                json!({"id": id, "role": "assistant", "content": "ok", "toolCalls": [
                    {"id": call, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ]})
            }
            2 => json!({"id": id, "role": "reasoning", "content": "hmm"}),
            3 => json!({"id": id, "role": "activity", "activityType": "PLAN", "content": {}}),
            _ => json!({"id": id, "role": "tool", "content": "42", "toolCallId": "t1"}),
        };
        if let Some(tag) = self.tag() {
            message["subagentRunId"] = json!(tag);
        }
        message
    }

    fn messages(&mut self) -> Value {
        let n = self.rng.random_range(0..4);
        Value::Array((0..n).map(|_| self.message()).collect())
    }

    fn run_started(&mut self) -> Value {
        self.run += 1;
        let mut event =
            json!({"type": "RUN_STARTED", "threadId": "th", "runId": format!("run{}", self.run)});
        if self.rng.random_bool(0.3) {
            event["input"] = json!({
                "threadId": "th",
                "runId": format!("run{}", self.run),
                "messages": self.messages(),
            });
        }
        event
    }

    fn run_finished(&mut self) -> Value {
        json!({"type": "RUN_FINISHED", "threadId": "th", "runId": format!("run{}", self.run)})
    }

    fn event(&mut self) -> Value {
        if self.rng.random_bool(0.35)
            && let Some(event) = self.continuation()
        {
            return event;
        }
        let tag = self.tag();
        let event = match self.rng.random_range(0..26) {
            0..=2 => {
                let id = self.pick(MESSAGES);
                self.opened.push(("text", id, tag));
                json!({"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"})
            }
            3 => {
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.pick(MESSAGES), "delta": "x"})
            }
            4 => json!({"type": "TEXT_MESSAGE_END", "messageId": self.pick(MESSAGES)}),
            5..=6 => {
                let id = self.pick(TOOL_CALLS);
                self.opened.push(("tool", id, tag));
                let mut event =
                    json!({"type": "TOOL_CALL_START", "toolCallId": id, "toolCallName": "f"});
                if self.rng.random_bool(0.6) {
                    event["parentMessageId"] = json!(self.pick(MESSAGES));
                }
                event
            }
            7 => {
                json!({"type": "TOOL_CALL_ARGS", "toolCallId": self.pick(TOOL_CALLS), "delta": "{"})
            }
            8 => json!({"type": "TOOL_CALL_END", "toolCallId": self.pick(TOOL_CALLS)}),
            9 => json!({
                "type": "TOOL_CALL_RESULT",
                "messageId": self.pick(MESSAGES),
                "toolCallId": self.pick(TOOL_CALLS),
                "content": "42",
            }),
            10 => {
                let id = self.pick(REASONING);
                self.opened.push(("span", id, tag));
                json!({"type": "REASONING_START", "messageId": id})
            }
            11 => {
                let id = self.pick(REASONING);
                self.opened.push(("reasoning", id, tag));
                json!({"type": "REASONING_MESSAGE_START", "messageId": id, "role": "reasoning"})
            }
            12 => {
                let event = self.pick(&[
                    "REASONING_MESSAGE_CONTENT",
                    "REASONING_MESSAGE_END",
                    "REASONING_END",
                ]);
                let mut event = json!({"type": event, "messageId": self.pick(REASONING)});
                if event["type"] == "REASONING_MESSAGE_CONTENT" {
                    event["delta"] = json!("x");
                }
                event
            }
            13 => {
                let subtype = self.pick(&["tool-call", "message"]);
                let entity = self.pick(&["m1", "m2", "r1", "r2", "t1", "t2"]);
                json!({
                    "type": "REASONING_ENCRYPTED_VALUE",
                    "subtype": subtype,
                    "entityId": entity,
                    "encryptedValue": "opaque",
                })
            }
            14 => {
                let mut event = json!({
                    "type": "ACTIVITY_SNAPSHOT",
                    "messageId": self.pick(ACTIVITIES),
                    "activityType": "PLAN",
                    "content": {},
                });
                if self.rng.random_bool(0.5) {
                    event["replace"] = json!(self.rng.random_bool(0.5));
                }
                event
            }
            15 => json!({
                "type": "ACTIVITY_DELTA",
                "messageId": self.pick(ACTIVITIES),
                "activityType": "PLAN",
                "patch": [],
            }),
            16 => {
                let name = self.pick(STEPS);
                self.opened.push(("step", name, tag));
                json!({"type": "STEP_STARTED", "stepName": name})
            }
            17 => json!({"type": "STEP_FINISHED", "stepName": self.pick(STEPS)}),
            18 => {
                let id = self.pick(SUBAGENTS);
                self.opened.push(("subagent", id, None));
                let mut event =
                    json!({"type": "SUBAGENT_STARTED", "subagentRunId": id, "name": "helper"});
                if self.rng.random_bool(0.3) {
                    event["parentSubagentRunId"] = json!(self.pick(SUBAGENTS));
                }
                return event;
            }
            19 => {
                let event = self.pick(&["SUBAGENT_FINISHED", "SUBAGENT_ERROR"]);
                let mut event = json!({"type": event, "subagentRunId": self.pick(SUBAGENTS)});
                if event["type"] == "SUBAGENT_ERROR" {
                    event["message"] = json!("boom");
                }
                return event;
            }
            20 => return json!({"type": "MESSAGES_SNAPSHOT", "messages": self.messages()}),
            21 => {
                let event = self.pick(&["STATE_SNAPSHOT", "CUSTOM", "RAW", "STATE_DELTA"]);
                match event {
                    "STATE_SNAPSHOT" => json!({"type": event, "snapshot": {}}),
                    "CUSTOM" => json!({"type": event, "name": "n", "value": 1}),
                    "RAW" => json!({"type": event, "event": {}}),
                    _ => json!({"type": event, "delta": []}),
                }
            }
            22 => return self.run_started(),
            23 => return self.run_finished(),
            24 => return json!({"type": "RUN_ERROR", "message": "failed"}),
            _ => {
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": self.pick(MESSAGES), "delta": "x"})
            }
        };
        Self::with_tag(event, tag)
    }

    fn stream(&mut self) -> Vec<Value> {
        self.opened.clear();
        self.run = 0;
        let len = self.rng.random_range(1..28);
        let mut events = Vec::with_capacity(len);
        if self.rng.random_bool(0.9) {
            events.push(self.run_started());
        }
        while events.len() < len {
            // Closing everything before a RUN_FINISHED is the only way to get past it.
            if self.rng.random_bool(0.06) {
                let opened = std::mem::take(&mut self.opened);
                for (kind, id, tag) in opened.iter().rev() {
                    let event = match *kind {
                        "text" => json!({"type": "TEXT_MESSAGE_END", "messageId": id}),
                        "tool" => json!({"type": "TOOL_CALL_END", "toolCallId": id}),
                        "span" => json!({"type": "REASONING_END", "messageId": id}),
                        "reasoning" => json!({"type": "REASONING_MESSAGE_END", "messageId": id}),
                        "step" => json!({"type": "STEP_FINISHED", "stepName": id}),
                        _ => json!({"type": "SUBAGENT_FINISHED", "subagentRunId": id}),
                    };
                    events.push(if *kind == "subagent" {
                        event
                    } else {
                        Self::with_tag(event, *tag)
                    });
                }
                events.push(self.run_finished());
                if self.rng.random_bool(0.2) {
                    events.push(json!({"type": "RUN_ERROR", "message": "late"}));
                }
                events.push(self.run_started());
                continue;
            }
            let event = self.event();
            events.push(event);
        }
        events
    }
}

/// Where the Rust verifier stops: (events accepted, first error).
fn ours(events: &[Value], mut verifier: Verifier) -> (usize, Option<String>) {
    for (i, value) in events.iter().enumerate() {
        let event = Event::from_value(value.clone())
            .unwrap_or_else(|e| panic!("generated event does not decode: {e}: {value}"))
            .value;
        if let Err(error) = verifier.verify(&event) {
            return (i, Some(error.message));
        }
    }
    (events.len(), None)
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn first_error_matches_the_official_client_on_random_streams() {
    let Some(interop) = common::interop_dir() else {
        return;
    };
    let count = env_number("AGWIRE_VERIFY_DIFF_STREAMS", 20_000);
    let seed = env_number("AGWIRE_VERIFY_DIFF_SEED", 0x5eed);
    let mut generator = Gen {
        rng: StdRng::seed_from_u64(seed),
        opened: Vec::new(),
        run: 0,
    };
    let streams: Vec<Vec<Value>> = (0..count).map(|_| generator.stream()).collect();

    let dir = std::env::temp_dir().join(format!("agwire-verify-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (script, input, output) = (
        dir.join("judge.cjs"),
        dir.join("streams.jsonl"),
        dir.join("verdicts.jsonl"),
    );
    std::fs::write(&script, JUDGE).unwrap();
    let mut file = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    for stream in &streams {
        serde_json::to_writer(&mut file, stream).unwrap();
        file.write_all(b"\n").unwrap();
    }
    file.flush().unwrap();
    drop(file);
    let status = Command::new("node")
        .arg(&script)
        .arg(&interop)
        .arg(&input)
        .arg(&output)
        .status()
        .unwrap();
    assert!(status.success(), "the judge script failed");
    let verdicts = std::fs::read_to_string(&output).unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    let mut mismatches = Vec::new();
    let (mut rejected, mut total_accepted) = (0usize, 0usize);
    for (stream, line) in streams.iter().zip(verdicts.lines()) {
        let verdict: Map<String, Value> = serde_json::from_str(line).unwrap();
        let theirs = (
            verdict["accepted"].as_u64().unwrap() as usize,
            verdict["error"].as_str().map(str::to_owned),
        );
        let mine = ours(stream, Verifier::new());
        total_accepted += mine.0;
        rejected += usize::from(mine.1.is_some());
        // The generator keeps every run on one thread, so seeding must change nothing.
        assert_eq!(
            ours(stream, Verifier::for_thread("th")),
            mine,
            "seeded verifier differs on {}",
            Value::Array(stream.clone())
        );
        if mine != theirs {
            mismatches.push(format!(
                "stream: {}\n  ours:   {mine:?}\n  theirs: {theirs:?}",
                Value::Array(stream.clone())
            ));
        }
    }
    assert_eq!(verdicts.lines().count(), streams.len());
    if std::env::var_os("AGWIRE_VERIFY_DIFF_STATS").is_some() {
        let mut kinds = std::collections::BTreeMap::<String, usize>::new();
        for stream in &streams {
            if let (_, Some(message)) = ours(stream, Verifier::new()) {
                // Ids are quoted; the shape of the message is what counts.
                let shape: String = message
                    .split('\'')
                    .step_by(2)
                    .collect::<Vec<_>>()
                    .join("'_'");
                *kinds.entry(shape).or_default() += 1;
            }
        }
        for (kind, n) in &kinds {
            eprintln!("{n:6}  {kind}");
        }
    }
    eprintln!(
        "verifier differential: {} streams, {rejected} rejected, {total_accepted} events accepted, {} mismatches",
        streams.len(),
        mismatches.len()
    );
    // The random streams must keep exercising both verdicts.
    assert!(
        rejected >= streams.len() / 20 && rejected <= streams.len() * 19 / 20,
        "{rejected} of {} streams rejected: the generator lost its mix",
        streams.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} of {} streams differ from @ag-ui/client; first ones:\n{}",
        mismatches.len(),
        streams.len(),
        mismatches
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
