//! A run's log as it is stored: one row per write, not per event.
//!
//! A `run_events` row holds the events one write appended: `seq` is the
//! number of its first event, `n_events` how many it holds, and `events`
//! their JSON texts joined by newlines (JSON Lines). A compact JSON text
//! never holds a raw newline (one inside a string is written `\n`), and
//! every text stored here is compact (`Event::to_json`, or PostgreSQL's
//! `jsonb` output), so splitting on newlines gives the texts back.
//!
//! Events keep their numbers: a resume after event `k` reads from the row
//! that holds `k + 1` (`sql::EVENTS_AFTER`) and skips within it. Rows
//! written before this shape hold one event each (`n_events` 1, the
//! migration's default), which is the same format.

use agwire_core::Event;

use crate::error::Error;

/// Events (JSON texts, in order) as one row's `events`.
pub(crate) fn join(events: &[String]) -> String {
    debug_assert!(
        events.iter().all(|e| !e.contains('\n')),
        "an event's stored text is compact JSON"
    );
    events.join("\n")
}

/// `after` as `EVENTS_AFTER` binds it (it adds one in SQL).
pub(crate) fn bound(after: u64) -> i64 {
    i64::try_from(after).unwrap_or(i64::MAX).min(i64::MAX - 1)
}

/// A row's events numbered from `seq`, those after `after` pushed onto
/// `into`. A row whose text does not hold `n_events` events is refused:
/// numbers after it would be wrong.
pub(crate) fn unpack(
    task_id: &str,
    seq: i64,
    n_events: i64,
    events: &str,
    after: u64,
    into: &mut Vec<(u64, Event)>,
) -> Result<(), Error> {
    let first = u64::try_from(seq).unwrap_or(0);
    let mut held = 0i64;
    for (i, text) in events.split('\n').enumerate() {
        held += 1;
        let number = first + i as u64;
        if number > after {
            into.push((number, Event::from_json(text)?.value));
        }
    }
    if held != n_events {
        return Err(Error::LogCorrupt {
            task_id: task_id.to_owned(),
            seq,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agwire_core::{TextMessageContentEvent, TextMessageStartEvent};

    fn texts() -> Vec<String> {
        vec![
            Event::TextMessageStart(TextMessageStartEvent::new("m")).to_json(),
            // A newline inside a string stays escaped in the stored text.
            Event::TextMessageContent(TextMessageContentEvent::new("m", "two\nlines\r\n"))
                .to_json(),
            Event::TextMessageContent(TextMessageContentEvent::new("m", "\u{2028}")).to_json(),
        ]
    }

    #[test]
    fn a_row_gives_back_its_events_numbered_and_skips_those_read() {
        let texts = texts();
        let row = join(&texts);
        let mut all = Vec::new();
        unpack("t", 7, 3, &row, 0, &mut all).unwrap();
        let numbers: Vec<u64> = all.iter().map(|(n, _)| *n).collect();
        assert_eq!(numbers, [7, 8, 9]);
        let again: Vec<String> = all.iter().map(|(_, e)| e.to_json()).collect();
        assert_eq!(again, texts);
        match &all[1].1 {
            Event::TextMessageContent(e) => assert_eq!(e.delta, "two\nlines\r\n"),
            other => panic!("{other:?}"),
        }

        let mut rest = Vec::new();
        unpack("t", 7, 3, &row, 8, &mut rest).unwrap();
        assert_eq!(rest.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [9]);
    }

    #[test]
    fn a_row_that_holds_fewer_or_more_events_than_it_says_is_refused() {
        let row = join(&texts());
        for wrong in [2, 4] {
            let error = unpack("t", 1, wrong, &row, 0, &mut Vec::new()).unwrap_err();
            assert!(matches!(error, Error::LogCorrupt { seq: 1, .. }), "{error}");
        }
    }
}
