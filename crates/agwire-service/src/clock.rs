//! Whose time a run means: the event time zone and "now" as the agent-run API
//! orders them, never the server's own zone.
//!
//! Zone priority (fixed by the agent-run API): a tool call's `event_timezone` →
//! `forwardedProps.client_time.device_timezone` → the profile's
//! `settings.timezone` → UTC. "Now" is the device's `client_now_iso` when the
//! request carried one (the user's wall clock, with its offset), else the
//! server's instant shown in the resolved zone.

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};

use crate::run::ClientTime;

/// Where the run's time zone came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneSource {
    /// `forwardedProps.client_time.device_timezone`.
    Device,
    /// The profile's `settings.timezone`.
    Profile,
    /// Nothing said: UTC.
    Utc,
}

/// The run's time context, given to the model and to time-aware tools.
#[derive(Debug, Clone, PartialEq)]
pub struct RunClock {
    /// The zone events default to in conversation (a calendar write still
    /// names its zone explicitly).
    pub zone: TimeZone,
    /// Its IANA name.
    pub zone_name: String,
    /// Where it came from.
    pub source: ZoneSource,
    /// "Now" in that zone.
    pub now: Zoned,
}

impl RunClock {
    /// Resolves the clock from the request's `client_time` and the profile's
    /// zone name (ignored when not a valid IANA name), at server time
    /// `server_now`.
    pub fn resolve(
        client_time: Option<&ClientTime>,
        profile_zone: Option<&str>,
        server_now: Timestamp,
    ) -> Self {
        let profile = profile_zone.and_then(|name| TimeZone::get(name).ok().map(|z| (name, z)));
        let (zone_name, zone, source) = match (client_time, profile) {
            (Some(ct), _) => (
                ct.device_timezone_name.clone(),
                ct.device_timezone.clone(),
                ZoneSource::Device,
            ),
            (None, Some((name, zone))) => (name.to_owned(), zone, ZoneSource::Profile),
            (None, None) => ("UTC".to_owned(), TimeZone::UTC, ZoneSource::Utc),
        };
        let instant = client_time.map_or(server_now, |ct| ct.now);
        Self {
            now: instant.to_zoned(zone.clone()),
            zone,
            zone_name,
            source,
        }
    }

    /// A line for the model's context.
    pub fn describe(&self) -> String {
        format!(
            "Current date and time for the user: {} ({}, {}). Resolve relative dates (today, tomorrow, next Monday) from this, in this time zone.",
            self.now.strftime("%Y-%m-%dT%H:%M:%S%:z"),
            self.now.strftime("%A"),
            self.zone_name,
        )
    }
}

/// Why a time argument was refused (said back to the model, which may retry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TimeError(pub String);

/// Reads a tool's time argument in `zone`: a local date-time
/// (`2026-03-17T09:00`, seconds optional) is that wall-clock time in `zone`;
/// one with an offset or `Z` is that instant. A local time that does not
/// exist (spring-forward gap) or is ambiguous (fall-back) is refused, not
/// guessed.
pub(crate) fn parse_in_zone(text: &str, zone: &TimeZone) -> Result<Timestamp, TimeError> {
    if let Ok(instant) = text.parse::<Timestamp>() {
        return Ok(instant);
    }
    let civil: DateTime = text.parse().map_err(|_| {
        TimeError(format!(
            "'{text}' is not a date-time; use YYYY-MM-DDTHH:MM (local to event_timezone)"
        ))
    })?;
    let ambiguous = zone.to_ambiguous_zoned(civil);
    if ambiguous.is_ambiguous() {
        return Err(TimeError(format!(
            "'{text}' does not exist or happens twice in {} (a daylight-saving change); pick another time",
            zone.iana_name().unwrap_or("this zone")
        )));
    }
    ambiguous
        .compatible()
        .map(|z| z.timestamp())
        .map_err(|e| TimeError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(zone: &str, now: &str) -> ClientTime {
        ClientTime {
            device_timezone: TimeZone::get(zone).unwrap(),
            device_timezone_name: zone.into(),
            now: now.parse().unwrap(),
            epoch_ms: 0,
        }
    }

    #[test]
    fn the_zone_comes_from_the_device_then_the_profile_then_utc() {
        let server: Timestamp = "2026-03-16T16:12:33Z".parse().unwrap();
        let device = client("America/Los_Angeles", "2026-03-16T09:12:33-07:00");
        let clock = RunClock::resolve(Some(&device), Some("Asia/Tokyo"), server);
        assert_eq!(
            (clock.zone_name.as_str(), clock.source),
            ("America/Los_Angeles", ZoneSource::Device)
        );
        assert_eq!(
            clock.now.to_string(),
            "2026-03-16T09:12:33-07:00[America/Los_Angeles]"
        );
        let clock = RunClock::resolve(None, Some("Asia/Tokyo"), server);
        assert_eq!(
            (clock.zone_name.as_str(), clock.source),
            ("Asia/Tokyo", ZoneSource::Profile)
        );
        assert_eq!(
            clock.now.to_string(),
            "2026-03-17T01:12:33+09:00[Asia/Tokyo]"
        );
        let clock = RunClock::resolve(None, Some("Not/AZone"), server);
        assert_eq!(
            (clock.zone_name.as_str(), clock.source),
            ("UTC", ZoneSource::Utc)
        );
        assert!(
            clock
                .describe()
                .contains("2026-03-16T16:12:33+00:00 (Monday, UTC)")
        );
    }

    #[test]
    fn tomorrow_at_nine_in_los_angeles_is_16_utc() {
        let la = TimeZone::get("America/Los_Angeles").unwrap();
        assert_eq!(
            parse_in_zone("2026-03-17T09:00", &la).unwrap().to_string(),
            "2026-03-17T16:00:00Z"
        );
        // An explicit offset is an instant, whatever the zone.
        assert_eq!(
            parse_in_zone("2026-03-17T09:00:00+09:00", &la)
                .unwrap()
                .to_string(),
            "2026-03-17T00:00:00Z"
        );
        // 02:30 on 2026-03-08 does not exist in Los Angeles.
        let gap = parse_in_zone("2026-03-08T02:30", &la).unwrap_err();
        assert!(gap.0.contains("daylight-saving"), "{gap:?}");
        let nonsense = parse_in_zone("tomorrow 9am", &la).unwrap_err();
        assert!(nonsense.0.contains("YYYY-MM-DDTHH:MM"), "{nonsense:?}");
    }
}
