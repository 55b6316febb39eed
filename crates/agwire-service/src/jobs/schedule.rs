//! When an automation job runs: a crontab expression in the job's time
//! zone, or a fixed interval.
//!
//! Cron expressions are read by the `croner` crate, as users write them in
//! crontabs: five fields (minute, hour, day of month, month, day of week),
//! each `*`, a number or name (`JAN`, `MON`), a range, a step, or a list;
//! `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`. When both day
//! fields are restricted a day matches either (Vixie cron). Daylight saving
//! follows Vixie cron too: a fixed time that a jump skips fires right after
//! the jump (a daily job never silently loses a day); a time that occurs
//! twice fires once, at its first occurrence.

use std::str::FromStr;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

/// A job's schedule, as the API takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(crate) enum Schedule {
    /// A cron expression, in the job's time zone.
    Cron(String),
    /// Every so many seconds (at least 60).
    EverySeconds(u64),
}

/// A schedule that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScheduleError(pub String);

impl std::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Shortest interval.
pub(crate) const MIN_INTERVAL_SECONDS: u64 = 60;
/// Longest interval: a century. (Much longer ones put the next run past
/// the last date there is, which could only be said in jiff's words.)
pub(crate) const MAX_INTERVAL_SECONDS: u64 = 100 * 365 * 24 * 3600;

impl Schedule {
    /// Checks the schedule.
    pub(crate) fn check(&self) -> Result<(), ScheduleError> {
        match self {
            Self::Cron(expr) => Cron::parse(expr)?
                .next_after(Timestamp::now(), &TimeZone::UTC)
                .map(|_| ()),
            Self::EverySeconds(s) if *s < MIN_INTERVAL_SECONDS => Err(ScheduleError(format!(
                "every_seconds must be at least {MIN_INTERVAL_SECONDS}"
            ))),
            Self::EverySeconds(s) if *s > MAX_INTERVAL_SECONDS => Err(ScheduleError(format!(
                "every_seconds must be at most {MAX_INTERVAL_SECONDS} (100 years)"
            ))),
            Self::EverySeconds(_) => Ok(()),
        }
    }

    /// The first firing strictly after `after`, in `zone`.
    pub(crate) fn next_after(
        &self,
        after: Timestamp,
        zone: &TimeZone,
    ) -> Result<Timestamp, ScheduleError> {
        match self {
            Self::Cron(expr) => Cron::parse(expr)?.next_after(after, zone),
            Self::EverySeconds(s) => {
                let seconds =
                    i64::try_from(*s).map_err(|_| ScheduleError("interval too large".into()))?;
                after
                    .checked_add(SignedDuration::from_secs(seconds))
                    .map_err(|e| ScheduleError(e.to_string()))
            }
        }
    }
}

/// A parsed cron expression.
#[derive(Debug, Clone)]
pub(crate) struct Cron(croner::Cron);

impl Cron {
    /// Parses a 5-field crontab expression or an `@` shorthand.
    pub(crate) fn parse(expr: &str) -> Result<Self, ScheduleError> {
        let parser = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Disallowed)
            .year(croner::parser::Year::Disallowed)
            .build();
        parser
            .parse(expr)
            .map(Self)
            .map_err(|e| ScheduleError(format!("cron '{expr}': {e}")))
    }

    /// The first firing strictly after `after`, in `zone`.
    pub(crate) fn next_after(
        &self,
        after: Timestamp,
        zone: &TimeZone,
    ) -> Result<Timestamp, ScheduleError> {
        let name = zone.iana_name().unwrap_or("UTC");
        let tz = chrono_tz::Tz::from_str(name)
            .map_err(|_| ScheduleError(format!("unknown time zone '{name}'")))?;
        let start = chrono::TimeZone::timestamp_millis_opt(&tz, after.as_millisecond())
            .single()
            .ok_or_else(|| ScheduleError("time out of range".into()))?;
        let next = self
            .0
            .find_next_occurrence(&start, false)
            .map_err(|_| ScheduleError("the cron expression never fires".into()))?;
        Timestamp::from_millisecond(next.timestamp_millis())
            .map_err(|e| ScheduleError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(expr: &str, after: &str, zone: &str) -> String {
        Cron::parse(expr)
            .unwrap()
            .next_after(after.parse().unwrap(), &TimeZone::get(zone).unwrap())
            .unwrap()
            .to_string()
    }

    #[test]
    fn weekday_mornings_in_the_jobs_zone() {
        // Monday 2026-03-16 09:12 in Los Angeles: the next weekday 09:00 is
        // Tuesday, 16:00 UTC (PDT).
        assert_eq!(
            next("0 9 * * 1-5", "2026-03-16T16:12:00Z", "America/Los_Angeles"),
            "2026-03-17T16:00:00Z"
        );
        // Friday evening → Monday.
        assert_eq!(
            next("0 9 * * 1-5", "2026-03-20T20:00:00Z", "America/Los_Angeles"),
            "2026-03-23T16:00:00Z"
        );
        // Same expression in Tokyo.
        assert_eq!(
            next("0 9 * * 1-5", "2026-03-16T16:12:00Z", "Asia/Tokyo"),
            "2026-03-17T00:00:00Z"
        );
    }

    #[test]
    fn steps_lists_ranges_and_day_rules() {
        assert_eq!(
            next("*/15 * * * *", "2026-01-01T00:00:00Z", "UTC"),
            "2026-01-01T00:15:00Z"
        );
        assert_eq!(
            next("5/20 * * * *", "2026-01-01T00:06:00Z", "UTC"),
            "2026-01-01T00:25:00Z"
        );
        assert_eq!(
            next("0 0 1,15 * *", "2026-01-02T00:00:00Z", "UTC"),
            "2026-01-15T00:00:00Z"
        );
        // Sunday as 7.
        assert_eq!(
            next("0 12 * * 7", "2026-01-01T00:00:00Z", "UTC"),
            "2026-01-04T12:00:00Z"
        );
        // Names and shorthands, as crontabs have them.
        assert_eq!(
            next("0 9 * JAN MON", "2026-01-01T00:00:00Z", "UTC"),
            "2026-01-05T09:00:00Z"
        );
        assert_eq!(
            next("@daily", "2026-01-01T00:30:00Z", "UTC"),
            "2026-01-02T00:00:00Z"
        );
        assert_eq!(
            next("@hourly", "2026-01-01T00:30:00Z", "UTC"),
            "2026-01-01T01:00:00Z"
        );
        // Both day fields restricted: either matches (the 13th, or a Friday).
        assert_eq!(
            next("0 0 13 * 5", "2026-01-01T00:00:00Z", "UTC"),
            "2026-01-02T00:00:00Z"
        );
        // Leap day on a Monday... or any 29 Feb, either rule.
        assert_eq!(
            next("0 0 29 2 *", "2026-01-01T00:00:00Z", "UTC"),
            "2028-02-29T00:00:00Z"
        );
    }

    #[test]
    fn daylight_saving_gaps_fire_after_the_jump_and_repeats_fire_once() {
        // 02:30 does not exist in Los Angeles on 2026-03-08 (02:00 → 03:00):
        // the job fires right after the jump, at 03:00 PDT, as Vixie cron
        // does, then at 02:30 again the next day.
        let jumped = next("30 2 * * *", "2026-03-07T12:00:00Z", "America/Los_Angeles");
        assert_eq!(jumped, "2026-03-08T10:00:00Z");
        assert_eq!(
            next("30 2 * * *", &jumped, "America/Los_Angeles"),
            "2026-03-09T09:30:00Z"
        );
        // 01:30 happens twice on 2026-11-01: the first (PDT) fires, then the
        // next day.
        let first = next("30 1 * * *", "2026-11-01T07:00:00Z", "America/Los_Angeles");
        assert_eq!(first, "2026-11-01T08:30:00Z");
        assert_eq!(
            next("30 1 * * *", &first, "America/Los_Angeles"),
            "2026-11-02T09:30:00Z"
        );
    }

    #[test]
    fn intervals_past_a_century_are_refused_in_words_whatever_their_size() {
        for seconds in [MAX_INTERVAL_SECONDS + 1, i64::MAX as u64, u64::MAX] {
            assert_eq!(
                Schedule::EverySeconds(seconds).check(),
                Err(ScheduleError(
                    "every_seconds must be at most 3153600000 (100 years)".into()
                )),
                "{seconds}"
            );
        }
        let century = Schedule::EverySeconds(MAX_INTERVAL_SECONDS);
        assert_eq!(century.check(), Ok(()));
        assert_eq!(
            century
                .next_after("2026-01-01T00:00:00Z".parse().unwrap(), &TimeZone::UTC)
                .unwrap()
                .to_string(),
            "2125-12-08T00:00:00Z"
        );
    }

    #[test]
    fn bad_expressions_say_what_is_wrong() {
        for (expr, needle) in [
            ("* * * *", "cron '* * * *': "),
            ("0 0 * * * *", "cron '0 0 * * * *': "),
            ("60 * * * *", "out of bounds"),
            ("* 24 * * *", "out of bounds"),
            ("* * 0 * *", "out of bounds"),
            ("*/0 * * * *", "cron '*/0 * * * *': "),
            ("a * * * *", "cron 'a * * * *': "),
            // Steps that overflow were once read as wrapping around.
            ("0 0 2-3/4294967295 * *", "step"),
            ("1-5/4294967295 * * * *", "step"),
            ("* * 31 2 *", "never fires"),
        ] {
            let error = Schedule::Cron(expr.into()).check().unwrap_err();
            assert!(error.0.contains(needle), "{expr}: {error}");
        }
        assert!(Schedule::EverySeconds(30).check().is_err());
        assert_eq!(
            Schedule::EverySeconds(60)
                .next_after("2026-01-01T00:00:00Z".parse().unwrap(), &TimeZone::UTC)
                .unwrap()
                .to_string(),
            "2026-01-01T00:01:00Z"
        );
    }
}
