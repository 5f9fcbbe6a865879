//! The slice: how long a writer that got its turn in arrival order keeps
//! it, and how its releases within it leave the lock.
//!
//! With the hand-off page a writer granted its turn in arrival order may
//! take the lock straight back, without queueing again, for [`SLICE`] or
//! [`SLICE_TURNS`] turns, whichever ends first. A release within the slice
//! keeps the free lock for the writer for [`COMEBACK`] instead of waking
//! the next writer; the release that ends the slice wakes it, and a few
//! turns or a few microseconds before the end it is woken ahead so that it
//! is running when the lock passes to it. The queue decides ([`Slice`]),
//! the hand-off page carries the decision to the other writers
//! ([`crate::handoff`]).

use std::time::{Duration, Instant};

/// With the hand-off page, a writer that got its turn in arrival order may
/// take the lock straight back, without queueing again, for this long after
/// that grant (2 ms). Hand-offs to the next writer, which cost a wake-up and
/// a context switch, then happen once a slice instead of once a commit,
/// while the longest wait stays near (writers × slice).
pub const SLICE: Duration = Duration::from_millis(2);
/// A slice also ends after this many turns taken straight back (64), so
/// writers of short transactions get equal shares however the time within a
/// slice goes (a WAL checkpoint, a preemption).
pub const SLICE_TURNS: u32 = 64;

/// How long a release within a slice keeps the lock for its writer's next
/// transaction (100 µs), and how often the head checks while a slice is
/// open. A writer that does not come back within it loses its slice.
pub const COMEBACK: Duration = Duration::from_micros(100);

/// A writer wakes the head ahead of its slice's end when this many turns
/// or less are left in it...
pub(crate) const WAKE_AHEAD_TURNS: u32 = 4;
/// ...or this little time (150 µs).
pub(crate) const WAKE_AHEAD_TIME: Duration = Duration::from_micros(150);

/// How a release leaves the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leaving {
    /// The writer's turns are over: the head is woken.
    Done,
    /// The writer's slice has turns left: it keeps the lock for
    /// [`COMEBACK`] and wakes nobody.
    ComingBack,
    /// The first release of a slice with turns left: keeps the lock and
    /// wakes the head, which from then on watches the come-back windows.
    ComingBackFirst,
    /// Coming back, but the slice ends within a few turns: the head is
    /// woken ahead, so that it is running when the lock passes to it.
    ComingBackLast,
}

/// A queue handle's slice: when its writer last got its turn in arrival
/// order, how many turns it took straight back since, and whether it
/// already woke the head ahead of the slice's end.
#[derive(Debug, Default)]
pub(crate) struct Slice {
    start: Option<Instant>,
    turns: u32,
    woke_ahead: bool,
}

impl Slice {
    /// Whether this handle's next turn may be taken straight back (its
    /// slice, granted in arrival order, has time and turns left).
    pub(crate) fn open(&self) -> bool {
        self.turns < SLICE_TURNS && self.start.is_some_and(|s| s.elapsed() < SLICE)
    }

    /// How a release now leaves the lock (see [`Leaving`]). The first
    /// release of a slice is the one before any turn was taken back.
    pub(crate) fn leaving(&mut self) -> Leaving {
        let elapsed = self.start.map(|s| s.elapsed());
        self.leaving_after(elapsed)
    }

    /// [`Slice::leaving`], `elapsed` since the slice's grant (`None`: no
    /// slice).
    fn leaving_after(&mut self, elapsed: Option<Duration>) -> Leaving {
        let Some(elapsed) = elapsed else {
            return Leaving::Done;
        };
        if self.turns >= SLICE_TURNS || elapsed >= SLICE {
            return Leaving::Done;
        }
        let ending =
            self.turns + WAKE_AHEAD_TURNS >= SLICE_TURNS || elapsed + WAKE_AHEAD_TIME >= SLICE;
        if self.turns == 0 {
            Leaving::ComingBackFirst
        } else if ending && !self.woke_ahead {
            self.woke_ahead = true;
            Leaving::ComingBackLast
        } else {
            Leaving::ComingBack
        }
    }

    /// A turn granted in arrival order: a new slice starts.
    pub(crate) fn granted(&mut self) {
        self.start = Some(Instant::now());
        self.turns = 0;
        self.woke_ahead = false;
    }

    /// A turn taken straight back within the slice.
    pub(crate) fn took_back(&mut self) {
        self.turns = self.turns.saturating_add(1);
    }

    /// The slice ends (the lock files were given up or changed).
    pub(crate) fn end(&mut self) {
        self.start = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decision, turn by turn, with the time since the grant given: the
    /// first release wakes the head, the release a few turns or a few
    /// microseconds before the end wakes it ahead (once), the end wakes it.
    #[test]
    fn releases_within_a_slice_leave_the_lock_by_turns_and_time() {
        let early = Some(Duration::from_micros(10));
        let mut slice = Slice::default();
        assert!(!slice.open());
        assert_eq!(slice.leaving_after(None), Leaving::Done);
        slice.granted();
        assert!(slice.open());
        assert_eq!(slice.leaving_after(early), Leaving::ComingBackFirst);
        for _ in 0..SLICE_TURNS - WAKE_AHEAD_TURNS - 1 {
            slice.took_back();
            assert_eq!(slice.leaving_after(early), Leaving::ComingBack);
        }
        slice.took_back();
        assert_eq!(slice.leaving_after(early), Leaving::ComingBackLast);
        for _ in 0..WAKE_AHEAD_TURNS - 1 {
            slice.took_back();
            assert_eq!(slice.leaving_after(early), Leaving::ComingBack);
        }
        slice.took_back();
        assert!(!slice.open());
        assert_eq!(slice.leaving_after(early), Leaving::Done);

        slice.granted();
        slice.took_back();
        let near_end = Some(SLICE - WAKE_AHEAD_TIME);
        assert_eq!(slice.leaving_after(near_end), Leaving::ComingBackLast);
        assert_eq!(slice.leaving_after(near_end), Leaving::ComingBack);
        assert_eq!(slice.leaving_after(Some(SLICE)), Leaving::Done);

        slice.granted();
        slice.end();
        assert!(!slice.open());
        assert_eq!(slice.leaving(), Leaving::Done);
    }
}
