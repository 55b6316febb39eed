//! What a check found: per scenario and per rule family, with every finding
//! located (scenario, request, event index, the event itself); written as a
//! table for people, JSON for tools and JUnit XML for CI.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use crate::family::Family;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A rule is broken: the check fails.
    Violation,
    /// What the official client would warn about, or a deviation from what
    /// the official SDKs do that clients tolerate.
    Warning,
}

/// One broken rule or warning.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// Violation or warning.
    pub severity: Severity,
    /// The family of the rule.
    pub family: Family,
    /// Where the rule is written ([`Family::spec`]).
    pub rule: &'static str,
    /// The scenario that found it.
    pub scenario: String,
    /// The request whose answer broke it, e.g. `POST (follow-up)`.
    pub exchange: String,
    /// Index of the offending event in that answer, from 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_index: Option<usize>,
    /// The offending event as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<Value>,
    /// What is wrong, in a sentence.
    pub message: String,
}

/// Pass, fail or not exercised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Exercised, and nothing broke a rule.
    Pass,
    /// A rule was broken.
    Fail,
    /// The server gave this nothing to judge (an agent that called no tool
    /// is not failing the tool rules).
    NotExercised,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::NotExercised => "not exercised",
        }
    }
}

/// One request of a scenario and the answer's facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExchangeReport {
    /// What was sent, e.g. `POST (Accept: text/event-stream)`.
    pub request: String,
    /// The status, when an answer came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The answer's content type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// Events decoded from the body.
    pub events: usize,
    /// Milliseconds until the first body bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_event_ms: Option<f64>,
    /// Events per second between the first and the last body bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events_per_second: Option<f64>,
    /// Milliseconds from sending to the end of the body.
    pub elapsed_ms: f64,
}

/// One scenario's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioReport {
    /// Its name (`--scenario`).
    pub name: &'static str,
    /// What it sends.
    pub description: &'static str,
    /// Its verdict.
    pub verdict: Verdict,
    /// Why it was not exercised, or what it observed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Its requests.
    pub exchanges: Vec<ExchangeReport>,
}

/// One rule family's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FamilyReport {
    /// The family.
    pub family: Family,
    /// Where its rules are written.
    pub spec: &'static str,
    /// Its verdict.
    pub verdict: Verdict,
    /// Violations found.
    pub violations: usize,
    /// Warnings found.
    pub warnings: usize,
}

/// Optional features the server showed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// Answers protobuf when Accept admits it (`None`: not asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protobuf: Option<bool>,
    /// SSE frames carry `id:` (resumable).
    pub event_ids: bool,
    /// A `Location` header names where to resume.
    pub location: bool,
    /// `RUN_STARTED.protocolVersion` as declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// Event families seen anywhere (text, tool calls, state, reasoning, …).
    pub seen: Vec<String>,
}

/// Everything a check found.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The endpoint.
    pub url: String,
    /// `sse` or `proto`: what the scenarios asked for.
    pub wire: &'static str,
    /// Per scenario.
    pub scenarios: Vec<ScenarioReport>,
    /// Per rule family.
    pub families: Vec<FamilyReport>,
    /// Every violation and warning.
    pub findings: Vec<Finding>,
    /// What the server showed it can do.
    pub features: Features,
    /// Median milliseconds to the first event over the streamed answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_first_event_ms: Option<f64>,
    /// Milliseconds the whole check took.
    pub elapsed_ms: f64,
}

impl Report {
    /// No violation anywhere.
    pub fn passed(&self) -> bool {
        !self
            .findings
            .iter()
            .any(|f| f.severity == Severity::Violation)
    }

    /// The violations.
    pub fn violations(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Violation)
    }

    /// The family's outcome.
    pub fn family(&self, family: Family) -> Option<&FamilyReport> {
        self.families.iter().find(|f| f.family == family)
    }

    /// One line: the verdict and the counts.
    pub fn summary(&self) -> String {
        let count = |v: Verdict| self.families.iter().filter(|f| f.verdict == v).count();
        let violations = self.violations().count();
        let warnings = self.findings.len() - violations;
        let head = if self.passed() { "PASS" } else { "FAIL" };
        format!(
            "{head}: {} rule families pass, {} fail, {} not exercised; {violations} violation{}, {warnings} warning{} ({} scenarios, {:.2} s)",
            count(Verdict::Pass),
            count(Verdict::Fail),
            count(Verdict::NotExercised),
            plural(violations),
            plural(warnings),
            self.scenarios.len(),
            self.elapsed_ms / 1000.0
        )
    }

    /// The table for people.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "agwire check {} ({})\n", self.url, self.wire);
        let _ = writeln!(
            out,
            "{:<16} {:<14} {:>7} {:>12}  note",
            "scenario", "result", "events", "first event"
        );
        for s in &self.scenarios {
            let events: usize = s.exchanges.iter().map(|e| e.events).sum();
            let first = s
                .exchanges
                .iter()
                .filter(|e| e.events > 0)
                .find_map(|e| e.first_event_ms)
                .map(|ms| format!("{ms:.0} ms"))
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                out,
                "{:<16} {:<14} {:>7} {:>12}  {}",
                s.name,
                s.verdict.label(),
                events,
                first,
                s.note.as_deref().unwrap_or("")
            );
        }
        let _ = writeln!(out, "\n{:<14} {:<14} spec", "rule family", "result");
        for f in &self.families {
            let result = match f.verdict {
                Verdict::Fail => format!("FAIL ({})", f.violations),
                v => v.label().to_owned(),
            };
            let _ = writeln!(out, "{:<14} {:<14} {}", f.family.name(), result, f.spec);
        }
        let mut seen = self.features.seen.join(", ");
        if seen.is_empty() {
            seen = "-".into();
        }
        let _ = writeln!(
            out,
            "\nfeatures: protobuf {}, event ids {}, Location {}, protocolVersion {}; events seen: {seen}",
            match self.features.protobuf {
                Some(true) => "yes",
                Some(false) => "no",
                None => "not asked",
            },
            yes_no(self.features.event_ids),
            yes_no(self.features.location),
            self.features
                .protocol_version
                .as_deref()
                .unwrap_or("not declared"),
        );
        if let Some(ms) = self.median_first_event_ms {
            let rates: Vec<f64> = self
                .scenarios
                .iter()
                .flat_map(|s| &s.exchanges)
                .filter_map(|e| e.events_per_second)
                .collect();
            let fastest = rates.iter().copied().fold(0.0, f64::max);
            let _ = writeln!(
                out,
                "timing: median first event {ms:.0} ms; fastest stream {fastest:.0} events/s"
            );
        }
        let violations: Vec<&Finding> = self.violations().collect();
        if !violations.is_empty() {
            let _ = writeln!(out, "\nviolations:");
            for f in violations {
                write_finding(&mut out, "✘", f);
            }
        }
        // The same warning from every request is one line, with where.
        let mut warnings: Vec<(&Finding, Vec<String>)> = Vec::new();
        for f in self
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
        {
            let place = format!("{} ({})", f.scenario, f.exchange);
            match warnings
                .iter_mut()
                .find(|(w, _)| w.family == f.family && w.message == f.message)
            {
                Some((_, places)) => places.push(place),
                None => warnings.push((f, vec![place])),
            }
        }
        if !warnings.is_empty() {
            let _ = writeln!(out, "\nwarnings:");
            for (f, places) in warnings {
                if places.len() == 1 {
                    write_finding(&mut out, "!", f);
                } else {
                    let _ = writeln!(
                        out,
                        "  ! [{}] {}\n      rule: {}\n      in {} answers: {}",
                        f.family.name(),
                        f.message,
                        f.rule,
                        places.len(),
                        places.join(", ")
                    );
                }
            }
        }
        let _ = writeln!(out, "\n{}", self.summary());
        out
    }

    /// JSON for tools.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// JUnit XML for CI: one test case per rule family (failed, passed or
    /// skipped) and one per scenario.
    pub fn to_junit(&self) -> String {
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let seconds = self.elapsed_ms / 1000.0;
        let _ = writeln!(
            out,
            "<testsuites name=\"agwire check\" time=\"{seconds:.3}\">"
        );
        let family_failures = self
            .families
            .iter()
            .filter(|f| f.verdict == Verdict::Fail)
            .count();
        let family_skipped = self
            .families
            .iter()
            .filter(|f| f.verdict == Verdict::NotExercised)
            .count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"rule families: {}\" tests=\"{}\" failures=\"{family_failures}\" skipped=\"{family_skipped}\" time=\"{seconds:.3}\">",
            xml(&self.url),
            self.families.len()
        );
        for f in &self.families {
            let _ = write!(
                out,
                "    <testcase classname=\"rule-family\" name=\"{}\"",
                f.family.name()
            );
            match f.verdict {
                Verdict::Pass => out.push_str("/>\n"),
                Verdict::NotExercised => {
                    out.push_str(
                        ">\n      <skipped message=\"not exercised\"/>\n    </testcase>\n",
                    );
                }
                Verdict::Fail => {
                    let mut text = String::new();
                    for finding in self.violations().filter(|v| v.family == f.family) {
                        write_finding(&mut text, "✘", finding);
                    }
                    let _ = writeln!(
                        out,
                        ">\n      <failure message=\"{} violation(s) of {}\">{}</failure>\n    </testcase>",
                        f.violations,
                        xml(f.spec),
                        xml(&text)
                    );
                }
            }
        }
        out.push_str("  </testsuite>\n");
        let failures = self
            .scenarios
            .iter()
            .filter(|s| s.verdict == Verdict::Fail)
            .count();
        let skipped = self
            .scenarios
            .iter()
            .filter(|s| s.verdict == Verdict::NotExercised)
            .count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"scenarios: {}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\">",
            xml(&self.url),
            self.scenarios.len()
        );
        for s in &self.scenarios {
            let time: f64 = s.exchanges.iter().map(|e| e.elapsed_ms).sum::<f64>() / 1000.0;
            let _ = write!(
                out,
                "    <testcase classname=\"scenario\" name=\"{}\" time=\"{time:.3}\"",
                s.name
            );
            match s.verdict {
                Verdict::Pass => out.push_str("/>\n"),
                Verdict::NotExercised => {
                    let _ = writeln!(
                        out,
                        ">\n      <skipped message=\"{}\"/>\n    </testcase>",
                        xml(s.note.as_deref().unwrap_or("not exercised"))
                    );
                }
                Verdict::Fail => {
                    let mut text = String::new();
                    for finding in self.violations().filter(|v| v.scenario == s.name) {
                        write_finding(&mut text, "✘", finding);
                    }
                    let _ = writeln!(
                        out,
                        ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>",
                        xml(s.note.as_deref().unwrap_or("violations")),
                        xml(&text)
                    );
                }
            }
        }
        out.push_str("  </testsuite>\n</testsuites>\n");
        out
    }
}

fn write_finding(out: &mut String, mark: &str, f: &Finding) {
    let at = match f.event_index {
        Some(i) => format!(", event #{i}"),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "  {mark} [{}] {} ({}{at}): {}\n      rule: {}",
        f.family.name(),
        f.scenario,
        f.exchange,
        f.message,
        f.rule
    );
    if let Some(event) = &f.event {
        let mut text = event.to_string();
        if let Some((cut, _)) = text.char_indices().nth(300) {
            text.truncate(cut);
            text.push('…');
        }
        let _ = writeln!(out, "      event: {text}");
    }
}

fn yes_no(yes: bool) -> &'static str {
    if yes { "yes" } else { "no" }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Escapes text for an XML attribute or element.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 has no way to write most control characters.
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escapes_markup_and_control_characters() {
        assert_eq!(
            xml("a<b>&\"'\u{1}\n"),
            "a&lt;b&gt;&amp;&quot;&apos;\u{FFFD}\n"
        );
    }
}
