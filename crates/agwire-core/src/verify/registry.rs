//! The ids of one entity kind and who owns them, with the lanes each can be open on.

use std::collections::HashMap;

use super::Owner;

/// The single open-lane of text messages and tool calls.
pub(super) const ONLY: usize = 0;
/// Reasoning spans (`REASONING_START`/`REASONING_END`).
pub(super) const SPAN: usize = 0;
/// Reasoning messages (`REASONING_MESSAGE_START`/`REASONING_MESSAGE_END`).
pub(super) const MESSAGE: usize = 1;

/// One id of one entity kind: its owner, on record for the rest of the run once known,
/// and, per lane, the sequence number of the opener that made it open.
#[derive(Debug, Clone)]
struct Tracked<const LANES: usize> {
    owner: Owner,
    opened_at: [Option<u64>; LANES],
}

/// The ids of one entity kind seen in the current run.
///
/// Ownership and openness live in one map because they are keyed alike, which halves the
/// lookups and key allocations of an opener. Openness is a per-lane sequence number rather
/// than a flag so that the `RUN_FINISHED` report can list open ids in the order they were
/// (last) opened, as the reference client's insertion-ordered sets do, while the hot path
/// stays a single hash lookup.
#[derive(Debug, Clone)]
pub(super) struct Registry<const LANES: usize> {
    ids: HashMap<String, Tracked<LANES>>,
    open_count: [usize; LANES],
}

impl<const LANES: usize> Default for Registry<LANES> {
    fn default() -> Self {
        Self {
            ids: HashMap::new(),
            open_count: [0; LANES],
        }
    }
}

impl<const LANES: usize> Registry<LANES> {
    pub(super) fn is_open(&self, id: &str, lane: usize) -> bool {
        self.ids
            .get(id)
            .is_some_and(|t| t.opened_at[lane].is_some())
    }

    /// The owner of `id` if it is open on `lane`: a continuation's one lookup.
    pub(super) fn open_owner(&self, id: &str, lane: usize) -> Option<Option<&str>> {
        self.ids
            .get(id)
            .filter(|t| t.opened_at[lane].is_some())
            .map(|t| t.owner.as_deref())
    }

    /// `None` when nothing is on record; `Some(None)` when the parent agent owns it.
    pub(super) fn owner(&self, id: &str) -> Option<Option<&str>> {
        self.ids.get(id).map(|t| t.owner.as_deref())
    }

    /// Opens `id` on `lane`. The owner is recorded only for an id with none on record:
    /// the first writer keeps it, even across a close and an untagged reopen.
    pub(super) fn open(&mut self, id: &str, lane: usize, seq: u64, owner: Option<&str>) {
        let tracked = match self.ids.get_mut(id) {
            Some(tracked) => tracked,
            None => self.ids.entry(id.to_owned()).or_insert(Tracked {
                owner: owner.map(str::to_owned),
                opened_at: [None; LANES],
            }),
        };
        if tracked.opened_at[lane].replace(seq).is_none() {
            self.open_count[lane] += 1;
        }
    }

    pub(super) fn close(&mut self, id: &str, lane: usize) {
        if let Some(tracked) = self.ids.get_mut(id)
            && tracked.opened_at[lane].take().is_some()
        {
            self.open_count[lane] -= 1;
        }
    }

    /// Puts an owner on record without opening anything; `replace` overwrites one
    /// already there.
    pub(super) fn record_owner(&mut self, id: &str, owner: Option<&str>, replace: bool) {
        match self.ids.get_mut(id) {
            Some(tracked) => {
                if replace {
                    tracked.owner = owner.map(str::to_owned);
                }
            }
            None => {
                self.ids.insert(
                    id.to_owned(),
                    Tracked {
                        owner: owner.map(str::to_owned),
                        opened_at: [None; LANES],
                    },
                );
            }
        }
    }

    pub(super) fn any_open(&self, lane: usize) -> bool {
        self.open_count[lane] > 0
    }

    /// The open ids of `lane`, oldest opener first, joined as the reference client joins
    /// them. Only built for an error, so the sort is off the hot path.
    pub(super) fn open_ids(&self, lane: usize) -> String {
        let mut open: Vec<(u64, &str)> = self
            .ids
            .iter()
            .filter_map(|(id, t)| t.opened_at[lane].map(|seq| (seq, id.as_str())))
            .collect();
        open.sort_unstable();
        let ids: Vec<&str> = open.into_iter().map(|(_, id)| id).collect();
        ids.join(", ")
    }

    pub(super) fn clear(&mut self) {
        self.ids.clear();
        self.open_count = [0; LANES];
    }
}
