//! Per-user quotas (`[quotas]`): how many runs a user may start a minute and
//! how many tokens their runs may use a day. The store holds the counts — a
//! row for each run accepted in the last minute, and a counter per UTC day
//! that a run's end adds its tokens to — and checks the limits inside the
//! accept's own write, so every replica on one database sees one count and
//! a refused run writes nothing. The counts are kept only while their quota
//! is on: a service without quotas writes nothing for them.

/// The window `runs_per_minute` counts over: a sliding minute, exact (the
/// runs accepted in the last 60 s, by their acceptance time).
pub const RUN_WINDOW_MS: i64 = 60_000;

/// A UTC day in ms: `tokens_per_day` counts a run's tokens on the UTC day it
/// ended, and the count starts again at 00:00 UTC.
pub const DAY_MS: i64 = 86_400_000;

/// The limits an accept checks (`None`: no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quotas {
    /// Runs a user may have accepted in any 60 s (with it, each accepted
    /// run is recorded for a minute).
    pub runs_per_minute: Option<u32>,
    /// Tokens a user's runs may use in a UTC day; once reached, no new run
    /// is accepted until the day ends (a run in progress finishes).
    pub tokens_per_day: Option<u64>,
}

/// The quota a run was refused by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quota {
    /// `runs_per_minute`, with its limit.
    RunsPerMinute(u32),
    /// `tokens_per_day`, with its limit.
    TokensPerDay(u64),
}

impl std::fmt::Display for Quota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::RunsPerMinute(limit) => write!(f, "{limit} runs per minute"),
            Self::TokensPerDay(limit) => write!(f, "{limit} tokens per day"),
        }
    }
}

/// A user's counts, as the quotas see them at one moment (each kept only
/// while its quota is on).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Runs accepted in the last 60 s.
    pub runs_last_minute: u64,
    /// Tokens used by runs that ended this UTC day.
    pub tokens_today: u64,
}

/// The UTC day `at_ms` falls on (days since the epoch).
pub fn utc_day(at_ms: i64) -> i64 {
    at_ms.div_euclid(DAY_MS)
}

/// The wait before a run refused by `runs_per_minute` may be accepted:
/// until the run `accepted_at` leaves the window, never more than the
/// window itself. An accept reads its clock before it waits for the
/// user's lock, so the run it must wait for — recorded by an accept that
/// read its clock later — can look newer than "now" by the time waited;
/// from the real present that run leaves within the window.
pub(crate) fn runs_retry_after(accepted_at: i64, now_ms: i64) -> i64 {
    (accepted_at + RUN_WINDOW_MS - now_ms).clamp(1, RUN_WINDOW_MS)
}

/// When the UTC day of `at_ms` ends (ms since the epoch).
pub fn day_ends(at_ms: i64) -> i64 {
    (utc_day(at_ms) + 1).saturating_mul(DAY_MS)
}

/// The tokens a run's usage entries (AG-UI `TokenUsage`, one per model
/// call) add up to: each entry's `totalTokens`, or its input and output
/// tokens where it gives no total.
pub fn run_tokens(usage: &[agwire_core::TokenUsage]) -> u64 {
    usage
        .iter()
        .map(|entry| {
            entry.total_tokens.unwrap_or_else(|| {
                entry
                    .input_tokens
                    .unwrap_or(0)
                    .saturating_add(entry.output_tokens.unwrap_or(0))
            })
        })
        .fold(0, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_ends_at_the_next_utc_midnight() {
        // 2026-11-28T13:56:00Z
        let at = 1_795_874_160_000;
        assert_eq!(day_ends(at) % DAY_MS, 0);
        assert!(day_ends(at) > at && day_ends(at) - at <= DAY_MS);
        assert_eq!(day_ends(utc_day(at) * DAY_MS), (utc_day(at) + 1) * DAY_MS);
        assert_eq!(utc_day(-1), -1);
    }

    #[test]
    fn tokens_are_totals_or_input_plus_output() {
        let entry = |input, output, total| agwire_core::TokenUsage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: total,
            ..Default::default()
        };
        assert_eq!(
            run_tokens(&[
                entry(Some(3), Some(4), None),
                entry(Some(1), Some(1), Some(10))
            ]),
            17
        );
        assert_eq!(run_tokens(&[entry(None, Some(5), None)]), 5);
        assert_eq!(run_tokens(&[]), 0);
    }
}
