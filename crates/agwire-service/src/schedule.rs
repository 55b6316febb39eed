//! When an automation job runs: a 5-field cron expression in the job's time
//! zone, or a fixed interval.
//!
//! Cron fields: minute (0–59), hour (0–23), day of month (1–31), month
//! (1–12), day of week (0–7, Sunday is 0 or 7); each `*`, a number, a range
//! `a-b`, a step `*/n` or `a-b/n`, or a comma list of those. When both day
//! fields are restricted a day matches either (as in Vixie cron). Times that
//! a daylight-saving jump skips do not fire that day; a repeated hour fires
//! once.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ToSpan};
use serde::{Deserialize, Serialize};

/// A job's schedule, as the API takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum Schedule {
    /// A cron expression, in the job's time zone.
    Cron(String),
    /// Every so many seconds (at least 60).
    EverySeconds(u64),
}

/// A schedule that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleError(pub String);

impl std::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Shortest interval.
pub const MIN_INTERVAL_SECONDS: u64 = 60;

impl Schedule {
    /// Checks the schedule.
    pub fn check(&self) -> Result<(), ScheduleError> {
        match self {
            Self::Cron(expr) => Cron::parse(expr).map(|_| ()),
            Self::EverySeconds(s) if *s < MIN_INTERVAL_SECONDS => Err(ScheduleError(format!(
                "every_seconds must be at least {MIN_INTERVAL_SECONDS}"
            ))),
            Self::EverySeconds(_) => Ok(()),
        }
    }

    /// The first firing strictly after `after`, in `zone`.
    pub fn next_after(
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

/// A parsed cron expression: which values each field allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    days_restricted: bool,
    weekdays_restricted: bool,
}

fn field(text: &str, min: u32, max: u32, what: &str) -> Result<(u64, bool), ScheduleError> {
    let bad = |why: &str| ScheduleError(format!("cron {what} '{text}': {why}"));
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step.parse().map_err(|_| bad("the step is not a number"))?;
                if step == 0 {
                    return Err(bad("the step is 0"));
                }
                (range, step)
            }
            None => (part, 1),
        };
        let (lo, hi) = if range == "*" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            let a: u32 = a.parse().map_err(|_| bad("not a number"))?;
            let b: u32 = b.parse().map_err(|_| bad("not a number"))?;
            (a, b)
        } else {
            let v: u32 = range.parse().map_err(|_| bad("not a number"))?;
            // `5/15` means 5, 20, 35, 50.
            (v, if step > 1 { max } else { v })
        };
        if lo < min || hi > max || lo > hi {
            return Err(bad(&format!("values must be within {min}-{max}")));
        }
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, text != "*"))
}

impl Cron {
    /// Parses `minute hour day-of-month month day-of-week`.
    pub fn parse(expr: &str) -> Result<Self, ScheduleError> {
        let fields: Vec<&str> = expr.split_whitespace().collect();
        let [minute, hour, day, month, weekday] = fields.as_slice() else {
            return Err(ScheduleError(format!(
                "cron '{expr}' must have 5 fields: minute hour day-of-month month day-of-week"
            )));
        };
        let (minutes, _) = field(minute, 0, 59, "minute")?;
        let (hours, _) = field(hour, 0, 23, "hour")?;
        let (days, days_restricted) = field(day, 1, 31, "day of month")?;
        let (months, _) = field(month, 1, 12, "month")?;
        let (mut weekdays, weekdays_restricted) = field(weekday, 0, 7, "day of week")?;
        if weekdays & (1 << 7) != 0 {
            weekdays |= 1;
        }
        Ok(Self {
            minutes,
            hours,
            days,
            months,
            weekdays,
            days_restricted,
            weekdays_restricted,
        })
    }

    fn day_matches(&self, date: Date) -> bool {
        let dom = self.days & (1 << date.day()) != 0;
        let dow = self.weekdays & (1 << date.weekday().to_sunday_zero_offset()) != 0;
        match (self.days_restricted, self.weekdays_restricted) {
            (true, true) => dom || dow,
            (true, false) => dom,
            (false, true) => dow,
            (false, false) => true,
        }
    }

    /// The first firing strictly after `after`, in `zone` (searched up to
    /// eight years ahead: `0 0 29 2 1` needs that).
    pub fn next_after(
        &self,
        after: Timestamp,
        zone: &TimeZone,
    ) -> Result<Timestamp, ScheduleError> {
        let start = after.to_zoned(zone.clone()).datetime();
        let mut date = start.date();
        let limit = date.saturating_add(8.years());
        while date <= limit {
            if self.months & (1 << date.month()) != 0 && self.day_matches(date) {
                for hour in 0..24i8 {
                    if self.hours & (1 << hour) == 0 {
                        continue;
                    }
                    for minute in 0..60i8 {
                        if self.minutes & (1 << minute) == 0 {
                            continue;
                        }
                        let civil = DateTime::from_parts(
                            date,
                            Time::new(hour, minute, 0, 0)
                                .map_err(|e| ScheduleError(e.to_string()))?,
                        );
                        if civil <= start {
                            continue;
                        }
                        let ambiguous = zone.to_ambiguous_timestamp(civil);
                        // A skipped local time does not fire; a repeated
                        // one fires at its first occurrence.
                        if matches!(ambiguous.offset(), jiff::tz::AmbiguousOffset::Gap { .. }) {
                            continue;
                        }
                        let instant = ambiguous
                            .earlier()
                            .map_err(|e| ScheduleError(e.to_string()))?;
                        if instant > after {
                            return Ok(instant);
                        }
                    }
                }
            }
            date = date.tomorrow().map_err(|e| ScheduleError(e.to_string()))?;
        }
        Err(ScheduleError("the cron expression never fires".into()))
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
    fn daylight_saving_gaps_skip_and_repeats_fire_once() {
        // 02:30 does not exist in Los Angeles on 2026-03-08: the next firing
        // is the day after.
        assert_eq!(
            next("30 2 * * *", "2026-03-07T12:00:00Z", "America/Los_Angeles"),
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
    fn bad_expressions_say_what_is_wrong() {
        for (expr, needle) in [
            ("* * * *", "5 fields"),
            ("60 * * * *", "minute"),
            ("* 24 * * *", "hour"),
            ("* * 0 * *", "day of month"),
            ("*/0 * * * *", "step is 0"),
            ("a * * * *", "not a number"),
            ("* * 31 2 *", "never fires"),
        ] {
            let error = Cron::parse(expr)
                .and_then(|c| c.next_after(Timestamp::UNIX_EPOCH, &TimeZone::UTC))
                .unwrap_err();
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
