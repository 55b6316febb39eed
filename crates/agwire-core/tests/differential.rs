//! The differential test: agwire-core's consumer pipeline against the official
//! `@ag-ui/client` 1.0.0 on generated streams.
//!
//! For every stream both must agree on accept vs reject and on the first error
//! message (for decode failures — the client's are Zod dumps — only on the
//! rejection itself), and for accepted streams on every delivered event and on
//! the final messages and state (compared as JSON). The same run also judges the
//! generator's intent against the official client:
//!
//! Generates `AGWIRE_DIFF_CASES` streams (default 2000) from `AGWIRE_DIFF_SEED`
//! (default below, always printed), replays them in one batch through
//! `interop/replay.mjs` (`@ag-ui/client` 1.0.0) and checks that every valid
//! stream is accepted and delivers what the generator's model expands it to,
//! every broken stream is rejected with exactly the error the model predicts,
//! every malformed stream is rejected at decode, and every spec-only stream is
//! accepted (the 1.0.0 client does not check those rules yet).
//!
//! `AGWIRE_DIFF_INDEX=n` replays only stream `n` of the seed, for reproduction;
//! `AGWIRE_DIFF_DUMP=path` writes the replay jobs (JSONL, the input of
//! `node interop/replay.mjs`) to `path`; `AGWIRE_DIFF_JOBS` sets how many node
//! processes share the replay (default: the number of cores, at most 4).
//! Without node or the pinned npm peers (see `common::interop_dir`) the test says
//! so loudly and passes, unless `AGWIRE_REQUIRE_INTEROP=1`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use crate::common;
use agwire_testkit::streamgen;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use agwire_core::decode::{DecodeMode, decode};
use agwire_core::pipeline::Pipeline;
use agwire_core::{Error, Message};
use serde_json::Value;
use streamgen::{GeneratedStream, StreamClass, TS_TEMPLATES, classify_ts_error, generate};

const DEFAULT_SEED: u64 = 0x00A6_D1FF_2026;

fn env_parse<T: std::str::FromStr>(name: &str) -> Option<T> {
    let raw = std::env::var(name).ok()?;
    let raw = raw.trim();
    let parsed = match raw.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16)
            .ok()
            .and_then(|v| v.to_string().parse().ok()),
        None => raw.parse().ok(),
    };
    Some(parsed.unwrap_or_else(|| panic!("{name}={raw} is not a number")))
}

/// Generates the streams for `indices` and replays them through the official
/// client in one node process, writing each job as soon as it is generated so
/// that generation overlaps the replay. Returns the streams and one verdict per
/// stream id.
fn generate_and_replay(
    dir: &std::path::Path,
    seed: u64,
    indices: Vec<usize>,
) -> (Vec<GeneratedStream>, HashMap<String, Value>) {
    let mut child = Command::new("node")
        .arg(dir.join("replay.mjs"))
        .current_dir(dir.join(".."))
        .env("NODE_NO_WARNINGS", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn node interop/replay.mjs");
    let stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        let mut stdin = std::io::BufWriter::new(stdin);
        let mut streams = Vec::with_capacity(indices.len());
        for i in indices {
            let s = generate(seed, i);
            serde_json::to_writer(&mut stdin, &s.to_job()).expect("write job");
            stdin.write_all(b"\n").expect("write job");
            streams.push(s);
        }
        stdin.flush().expect("flush jobs");
        streams
    });
    let mut stderr = child.stderr.take().expect("stderr");
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read replay output");
    let streams = writer
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    let status = child.wait().expect("wait for node");
    let err = err_reader.join().expect("stderr thread");
    assert!(
        status.success(),
        "interop/replay.mjs failed ({status}):\n{err}"
    );
    let mut verdicts = HashMap::new();
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("bad replay line ({e}): {line}"));
        let id = v["id"].as_str().expect("verdict id").to_owned();
        verdicts.insert(id, v);
    }
    (streams, verdicts)
}

/// The part of a delivered event the model predicts: ids, attribution, text
/// deltas and the fields chunk expansion synthesises. (The model does not strip
/// unknown material, so fields enforcement may rewrite are left out.)
fn projection(e: &Value) -> Value {
    let unattributable = matches!(
        e["type"].as_str(),
        Some("RUN_STARTED" | "RUN_FINISHED" | "RUN_ERROR" | "MESSAGES_SNAPSHOT")
    );
    let mut m = serde_json::Map::new();
    for key in [
        "type",
        "messageId",
        "toolCallId",
        "subagentRunId",
        "delta",
        "role",
        "name",
        "parentMessageId",
    ] {
        let Some(v) = e.get(key) else { continue };
        if (key == "subagentRunId" && unattributable) || (key == "delta" && !v.is_string()) {
            continue;
        }
        m.insert(key.to_owned(), v.clone());
    }
    Value::Object(m)
}

/// Why the client's verdict contradicts the generator's intent, if it does.
fn judge(s: &GeneratedStream, verdict: &Value) -> Option<String> {
    let ok = verdict["ok"].as_bool() == Some(true);
    let error = verdict["error"].as_str().unwrap_or("");
    match s.class {
        StreamClass::Valid | StreamClass::SpecOnly => {
            if !ok {
                return Some(format!(
                    "expected acceptance, the client failed with: {error}"
                ));
            }
            let delivered: Vec<Value> = verdict["events"]
                .as_array()
                .map(|a| a.iter().map(projection).collect())
                .unwrap_or_default();
            let expected: Vec<Value> = s.expanded.iter().map(projection).collect();
            if delivered != expected {
                let at = delivered
                    .iter()
                    .zip(&expected)
                    .position(|(a, b)| a != b)
                    .unwrap_or(delivered.len().min(expected.len()));
                return Some(format!(
                    "delivered events differ from the model's expansion at #{at} (client {} events, model {}):\n  client: {}\n  model:  {}",
                    delivered.len(),
                    expected.len(),
                    delivered.get(at).map_or("<end>".into(), Value::to_string),
                    expected.get(at).map_or("<end>".into(), Value::to_string),
                ));
            }
            None
        }
        StreamClass::Broken => {
            if ok {
                return Some(format!(
                    "expected rejection with {:?}, the client accepted",
                    s.expected_error
                ));
            }
            let intended = s.intended_error.unwrap_or("");
            if !error.contains(intended) {
                return Some(format!(
                    "expected an error containing {intended:?}, got: {error}"
                ));
            }
            if let Some(expected) = &s.expected_error
                && error != expected
            {
                return Some(format!("expected exactly\n  {expected}\ngot\n  {error}"));
            }
            if classify_ts_error(error) != s.template {
                return Some(format!(
                    "error matched template {:?}, wanted {:?}",
                    classify_ts_error(error),
                    s.template
                ));
            }
            None
        }
        StreamClass::Malformed => {
            if ok {
                return Some("expected a decode (Zod) rejection, the client accepted".to_owned());
            }
            if !error.contains(s.intended_error.unwrap_or("")) {
                return Some(format!("expected a Zod rejection, got: {error}"));
            }
            None
        }
    }
}

/// What agwire-core's consumer pipeline makes of a job.
struct Ours {
    ok: bool,
    error: Option<String>,
    decode_error: bool,
    events: Vec<Value>,
    messages: Value,
    state: Value,
}

fn run_agwire(job: &Value, schema: Option<&jsonschema::Validator>) -> Ours {
    let messages: Vec<Message> = job["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            decode::<Message>(m.clone(), DecodeMode::Lenient)
                .expect("initial message")
                .value
        })
        .collect();
    let mut pipeline = Pipeline::new(
        job["threadId"].as_str().unwrap_or_default(),
        messages,
        job["state"].clone(),
    );
    let mut events = Vec::new();
    let mut error = None;
    let mut decode_error = false;
    for raw in job["events"].as_array().into_iter().flatten() {
        match pipeline.push_value(raw.clone()) {
            Ok(delivered) => {
                for event in delivered {
                    let json = serde_json::to_value(event).unwrap();
                    if let Some(schema) = schema {
                        // Everything we emit must be valid 1.1 on the wire.
                        if let Err(e) = schema.validate(&json) {
                            panic!("agwire delivered a schema-invalid event ({e}): {json}");
                        }
                    }
                    events.push(json);
                }
            }
            Err(e) => {
                decode_error = matches!(e, Error::Decode(_) | Error::Json(_));
                error = Some(e.to_string());
                break;
            }
        }
    }
    let session = pipeline.session();
    Ours {
        ok: error.is_none(),
        error,
        decode_error,
        events,
        messages: serde_json::to_value(&session.messages).unwrap(),
        state: session.state.clone(),
    }
}

/// Where agwire and the official client disagree on a stream, if they do.
fn disagreement(verdict: &Value, ours: &Ours) -> Option<String> {
    let their_ok = verdict["ok"].as_bool() == Some(true);
    let their_error = verdict["error"].as_str().unwrap_or("");
    match (their_ok, ours.ok) {
        (true, false) => {
            return Some(format!(
                "the client accepted; agwire rejected: {:?}",
                ours.error
            ));
        }
        (false, true) => {
            return Some(format!(
                "agwire accepted; the client rejected: {their_error}"
            ));
        }
        (false, false) => {
            // The client's decode errors are Zod issue dumps; ours name the
            // field. Agreement there is "both rejected at decode".
            let zod = their_error.trim_start().starts_with('[');
            if zod != ours.decode_error {
                return Some(format!(
                    "rejected for different reasons:\n  client: {their_error}\n  agwire: {:?}",
                    ours.error
                ));
            }
            if !zod && ours.error.as_deref() != Some(their_error) {
                return Some(format!(
                    "different first error:\n  client: {their_error}\n  agwire: {:?}",
                    ours.error
                ));
            }
            // The client's apply stage lags its verification, so on a rejected
            // stream its messages and state are not comparable.
            return None;
        }
        (true, true) => {}
    }
    let theirs: &[Value] = verdict["events"].as_array().map_or(&[], Vec::as_slice);
    if theirs != ours.events.as_slice() {
        let at = theirs
            .iter()
            .zip(&ours.events)
            .position(|(a, b)| a != b)
            .unwrap_or(theirs.len().min(ours.events.len()));
        return Some(format!(
            "delivered events differ at #{at} (client {}, agwire {}):\n  client: {}\n  agwire: {}",
            theirs.len(),
            ours.events.len(),
            theirs.get(at).map_or("<end>".into(), Value::to_string),
            ours.events.get(at).map_or("<end>".into(), Value::to_string),
        ));
    }
    if verdict["messages"] != ours.messages {
        return Some(format!(
            "final messages differ:\n  client: {}\n  agwire: {}",
            verdict["messages"], ours.messages
        ));
    }
    if verdict["state"] != ours.state {
        return Some(format!(
            "final state differs:\n  client: {}\n  agwire: {}",
            verdict["state"], ours.state
        ));
    }
    None
}

/// A warning with its ids and values elided, so that warnings group by kind.
fn warning_kind(w: &str) -> String {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let first_line = w.lines().next().unwrap_or("");
    for c in first_line.chars() {
        match quote {
            Some(q) if c == q => {
                quote = None;
                out.push('…');
                out.push(c);
            }
            Some(_) => {}
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                out.push(c);
            }
            None if c.is_ascii_digit() => {
                if !out.ends_with('#') {
                    out.push('#');
                }
            }
            None => out.push(c),
        }
    }
    // Event type names (FOO_BAR) group too.
    let mut grouped = String::new();
    let mut word = String::new();
    for c in out.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_uppercase() || c == '_' {
            word.push(c);
            continue;
        }
        if (word.len() >= 4 && word.contains('_')) || word == "RAW" || word == "CUSTOM" {
            grouped.push_str("<TYPE>");
        } else {
            grouped.push_str(&word);
        }
        word.clear();
        grouped.push(c);
    }
    let grouped = grouped.trim_end();
    match grouped.char_indices().nth(90) {
        Some((cut, _)) => format!("{}…", &grouped[..cut]),
        None => grouped.to_owned(),
    }
}

#[test]
fn agwire_agrees_with_the_official_client() {
    let seed: u64 = env_parse("AGWIRE_DIFF_SEED").unwrap_or(DEFAULT_SEED);
    let cases: usize = env_parse("AGWIRE_DIFF_CASES").unwrap_or(2000);
    let only: Option<usize> = env_parse("AGWIRE_DIFF_INDEX");
    println!("differential: AGWIRE_DIFF_SEED={seed:#x} AGWIRE_DIFF_CASES={cases}");

    let indices: Vec<usize> = match only {
        Some(i) => vec![i],
        None => (0..cases).collect(),
    };

    // Determinism: the same (seed, index) yields the same stream.
    for &i in indices.iter().step_by(97).take(20) {
        assert_eq!(
            generate(seed, i).to_job(),
            generate(seed, i).to_job(),
            "generate({seed:#x}, {i}) is not deterministic"
        );
    }

    let Some(dir) = common::interop_dir() else {
        // Still exercise the generator (its own model panics on a bug).
        for &i in &indices {
            generate(seed, i);
        }
        return;
    };
    let started = Instant::now();
    let shards: usize = env_parse("AGWIRE_DIFF_JOBS")
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get().min(4)))
        .clamp(1, indices.len().max(1));
    let mut streams = Vec::with_capacity(indices.len());
    let mut verdicts = HashMap::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..shards)
            .map(|k| {
                let part: Vec<usize> = indices.iter().copied().skip(k).step_by(shards).collect();
                let dir = &dir;
                scope.spawn(move || generate_and_replay(dir, seed, part))
            })
            .collect();
        for h in handles {
            let (s, v) = h.join().expect("shard");
            streams.extend(s);
            verdicts.extend(v);
        }
    });
    let elapsed = started.elapsed();
    if let Ok(path) = std::env::var("AGWIRE_DIFF_DUMP") {
        let mut jobs = String::new();
        for s in &streams {
            jobs.push_str(&serde_json::to_string(&s.to_job()).unwrap());
            jobs.push('\n');
        }
        std::fs::write(&path, jobs).unwrap_or_else(|e| panic!("AGWIRE_DIFF_DUMP={path}: {e}"));
        println!("differential: jobs written to {path}");
    }

    let mut by_class: BTreeMap<&str, usize> = BTreeMap::new();
    let mut faults: BTreeMap<&str, usize> = BTreeMap::new();
    let mut features: BTreeMap<&str, usize> = BTreeMap::new();
    let mut templates_hit: BTreeMap<&str, usize> = BTreeMap::new();
    let mut distinct_errors: BTreeSet<&str> = BTreeSet::new();
    let mut unclassified: BTreeSet<&str> = BTreeSet::new();
    let mut warnings = 0usize;
    let mut warning_kinds: BTreeMap<String, usize> = BTreeMap::new();
    let mut events = 0usize;
    let mut failures = Vec::new();
    let mut disagreements = Vec::new();
    let schema = common::spec_dir().map(|dir| common::Schema::load(&dir).validator(""));
    let mut agreement: BTreeMap<(bool, bool), usize> = BTreeMap::new();

    for s in &streams {
        *by_class.entry(s.class.name()).or_default() += 1;
        if let Some(f) = s.fault {
            *faults.entry(f).or_default() += 1;
        }
        for f in &s.features {
            *features.entry(f).or_default() += 1;
        }
        events += s.events.len();
        let Some(verdict) = verdicts.get(&s.id) else {
            failures.push((s, "the client returned no verdict".to_owned(), Value::Null));
            continue;
        };
        for w in verdict["warnings"].as_array().into_iter().flatten() {
            warnings += 1;
            *warning_kinds
                .entry(warning_kind(w.as_str().unwrap_or("")))
                .or_default() += 1;
        }
        if let Some(error) = verdict["error"].as_str() {
            distinct_errors.insert(error);
            match classify_ts_error(error) {
                Some(key) => *templates_hit.entry(key).or_default() += 1,
                None => {
                    unclassified.insert(error);
                }
            }
        }
        if let Some(why) = judge(s, verdict) {
            failures.push((s, why, verdict.clone()));
        }
        let ours = run_agwire(&s.to_job(), schema.as_ref());
        *agreement
            .entry((verdict["ok"] == true, ours.ok))
            .or_default() += 1;
        if let Some(why) = disagreement(verdict, &ours) {
            disagreements.push((s, why));
        }
    }

    println!(
        "differential: {} streams, {events} events, generated and replayed in {elapsed:.2?} ({shards} node processes); {warnings} client warnings",
        streams.len()
    );
    for class in StreamClass::ALL {
        println!(
            "  class {:<10} {}",
            class.name(),
            by_class.get(class.name()).copied().unwrap_or(0)
        );
    }
    println!(
        "  distinct client error messages: {}",
        distinct_errors.len()
    );
    let reachable: Vec<_> = TS_TEMPLATES
        .iter()
        .filter(|t| t.unreachable.is_none())
        .collect();
    let hit = reachable
        .iter()
        .filter(|t| templates_hit.contains_key(t.key))
        .count();
    println!(
        "  error templates hit: {hit} of {} reachable ({} known)",
        reachable.len(),
        TS_TEMPLATES.len()
    );
    for t in TS_TEMPLATES {
        let n = templates_hit.get(t.key).copied().unwrap_or(0);
        match (n, t.unreachable) {
            (0, Some(why)) => println!("    {:<42} unreachable: {why}", t.key),
            (0, None) => println!("    {:<42} NOT HIT", t.key),
            (n, _) => println!("    {:<42} {n}", t.key),
        }
    }
    for e in &unclassified {
        println!("  UNCLASSIFIED client error: {e}");
    }
    println!("  client warnings by kind:");
    for (k, n) in &warning_kinds {
        println!("    {n:>6}  {k}");
    }
    println!("  faults injected:");
    for (f, n) in &faults {
        println!("    {f:<48} {n}");
    }
    println!("  features exercised (streams):");
    for (f, n) in &features {
        println!("    {f:<48} {n}");
    }

    println!(
        "differential: {} streams; agwire and @ag-ui/client agree on {} (both accepted: {}, both rejected: {}); {} disagreements",
        streams.len(),
        streams.len() - disagreements.len(),
        agreement.get(&(true, true)).copied().unwrap_or(0),
        agreement.get(&(false, false)).copied().unwrap_or(0),
        disagreements.len()
    );
    if !disagreements.is_empty() {
        for (s, why) in disagreements.iter().take(5) {
            let index = s.id.rsplit('-').next().unwrap_or("?");
            eprintln!(
                "\n=== agwire disagrees with the official client on {} (class {}, fault {:?})\nreproduce: AGWIRE_DIFF_SEED={seed:#x} AGWIRE_DIFF_INDEX={index} cargo test -p agwire-core --test differential -- --nocapture\n{why}\nstream: {}",
                s.id,
                s.class.name(),
                s.fault,
                serde_json::to_string(&s.to_job()).unwrap()
            );
        }
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for (s, _) in &disagreements {
            *kinds
                .entry(format!("{}/{}", s.class.name(), s.fault.unwrap_or("-")))
                .or_default() += 1;
        }
        panic!(
            "agwire disagrees with @ag-ui/client on {} of {} streams (seed {seed:#x}): {kinds:?}",
            disagreements.len(),
            streams.len()
        );
    }

    if !failures.is_empty() {
        for (s, why, verdict) in failures.iter().take(5) {
            let index = s.id.rsplit('-').next().unwrap_or("?");
            eprintln!(
                "\n=== stream {} (class {}, fault {:?}, template {:?})\nreproduce: AGWIRE_DIFF_SEED={seed:#x} AGWIRE_DIFF_INDEX={index} cargo test -p agwire-core --test differential -- --nocapture\n{why}\nclient verdict: ok={} error={:?}\nstream: {}",
                s.id,
                s.class.name(),
                s.fault,
                s.template,
                verdict["ok"],
                verdict["error"],
                serde_json::to_string(&s.to_job()).unwrap()
            );
        }
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for (s, _, _) in &failures {
            *kinds
                .entry(format!("{}/{}", s.class.name(), s.fault.unwrap_or("-")))
                .or_default() += 1;
        }
        panic!(
            "{} of {} streams contradict the generator's intent (seed {seed:#x}): {kinds:?}",
            failures.len(),
            streams.len()
        );
    }
    assert!(
        unclassified.is_empty(),
        "client errors that match no known template: {unclassified:?}"
    );
    // A generator that stops producing a class of stream, or stops reaching
    // a failure of the client, must not leave this test green. (A single
    // stream replayed with AGWIRE_DIFF_INDEX has no mix to speak of.)
    if streams.len() >= 1000 {
        let share = |class: StreamClass| {
            by_class.get(class.name()).copied().unwrap_or(0) as f64 / streams.len() as f64
        };
        for (class, floor) in [
            (StreamClass::Valid, 0.30),
            (StreamClass::Broken, 0.25),
            (StreamClass::Malformed, 0.04),
            (StreamClass::SpecOnly, 0.02),
        ] {
            assert!(
                share(class) >= floor,
                "class {} is {:.1}% of the streams, below its floor of {:.0}%",
                class.name(),
                share(class) * 100.0,
                floor * 100.0
            );
        }
        let missed: Vec<&str> = reachable
            .iter()
            .filter(|t| !templates_hit.contains_key(t.key))
            .map(|t| t.key)
            .collect();
        assert!(
            missed.is_empty(),
            "reachable client error templates no stream hit: {missed:?}"
        );
        assert!(
            agreement.get(&(true, true)).copied().unwrap_or(0) >= streams.len() / 4
                && agreement.get(&(false, false)).copied().unwrap_or(0) >= streams.len() / 4,
            "too few streams accepted or rejected by both: {agreement:?}"
        );
    }
}
