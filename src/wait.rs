//! The wait policy: how long a writer waits for its turn, how often it
//! tries, and when it stands aside.
//!
//! The defaults are Exponential's `[DatabaseSettings]` values. Limits are
//! wall-clock deadlines measured by the queue itself: PHP's
//! `max_execution_time` does not count time spent in system calls, so a host's
//! own timer cannot be trusted to end a wait.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default wait for a transaction's turn in a web request
/// (`[DatabaseSettings] SQLiteTransactionWait`, 25 s).
pub const TRANSACTION_WAIT: Duration = Duration::from_secs(25);
/// Default wait for a transaction's turn on the command line
/// (`[DatabaseSettings] SQLiteCLITransactionWait`, 300 s).
pub const CLI_TRANSACTION_WAIT: Duration = Duration::from_secs(300);
/// Transaction waits below this are raised to it (1 s).
pub const MIN_TRANSACTION_WAIT: Duration = Duration::from_secs(1);
/// Default wait of a single write statement in a web request
/// (`[DatabaseSettings] SQLiteBusyTimeout`, 5000 ms).
pub const BUSY_TIMEOUT: Duration = Duration::from_millis(5000);
/// Default wait of a single write statement on the command line
/// (`[DatabaseSettings] SQLiteCLIBusyTimeout`, 30000 ms).
pub const CLI_BUSY_TIMEOUT: Duration = Duration::from_millis(30_000);

/// The setting named in a transaction's busy message by default.
pub const TRANSACTION_SETTING: &str = "[DatabaseSettings] SQLiteTransactionWait";
/// The setting named on the command line for a transaction.
pub const CLI_TRANSACTION_SETTING: &str = "[DatabaseSettings] SQLiteCLITransactionWait";
/// The setting named in a statement's busy message by default.
pub const BUSY_SETTING: &str = "[DatabaseSettings] SQLiteBusyTimeout";
/// The setting named on the command line for a statement.
pub const CLI_BUSY_SETTING: &str = "[DatabaseSettings] SQLiteCLIBusyTimeout";

/// Shortest pause between two tries for the lock (1 ms).
pub const POLL_MIN: Duration = Duration::from_millis(1);
/// Longest pause between two tries for the lock (15 ms).
pub const POLL_MAX: Duration = Duration::from_millis(15);
/// After waiting this long (1 s), a writer tries more often.
pub const PATIENT_AFTER: Duration = Duration::from_secs(1);
/// Longest pause between tries for a writer that has waited over
/// [`PATIENT_AFTER`] (5 ms), which serves writers roughly in arrival order.
pub const PATIENT_POLL_MAX: Duration = Duration::from_millis(5);
/// How long a writer that finds the lock free while others wait leaves it
/// to them before its own first try (30 ms, an upper bound with the
/// hand-off page: the yield ends as soon as a waiter takes the lock).
pub const YIELD: Duration = Duration::from_millis(30);
pub use crate::slice::{SLICE, SLICE_TURNS};

/// How often a waiting writer asks its interrupt check (10 ms at most between two checks).
pub const INTERRUPT_CHECK: Duration = Duration::from_millis(10);

/// A check a waiting writer runs at least every [`INTERRUPT_CHECK`]; `true` ends the wait early.
///
/// Hosts build it from what a person can do to a waiting process: Python
/// checks its pending signals (Ctrl-C), PHP its pending async signals and
/// `max_execution_time`, C an atomic flag set from a signal handler or
/// another thread. A wait that ends this way returns
/// [`crate::Error::Interrupted`]: the turn was not taken and nothing was
/// written. The check runs on the waiting thread, with none of the queue's
/// own locks held, so it may take a host's interpreter lock.
#[derive(Clone)]
pub struct Interrupt(Arc<dyn Fn() -> bool + Send + Sync>);

impl Interrupt {
    /// An interrupt that ends a wait when `check` returns `true`.
    pub fn new(check: impl Fn() -> bool + Send + Sync + 'static) -> Interrupt {
        Interrupt(Arc::new(check))
    }

    /// Runs the check: `true` when the wait should end now.
    pub fn requested(&self) -> bool {
        (self.0)()
    }
}

impl fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Interrupt(..)")
    }
}

impl PartialEq for Interrupt {
    /// Two interrupts are equal when they share one check.
    fn eq(&self, other: &Interrupt) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Interrupt {}

/// A wait limit, the name of the setting it came from, and the check that
/// may end the wait early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    limit: Duration,
    setting: String,
    interrupt: Option<Interrupt>,
}

impl Wait {
    /// A transaction's wait; values below [`MIN_TRANSACTION_WAIT`] are raised
    /// to it. The setting defaults to [`TRANSACTION_SETTING`].
    pub fn transaction(limit: Duration) -> Self {
        Wait {
            limit: limit.max(MIN_TRANSACTION_WAIT),
            setting: TRANSACTION_SETTING.to_string(),
            interrupt: None,
        }
    }

    /// A single statement's wait (its busy timeout), taken as given. The
    /// setting defaults to [`BUSY_SETTING`].
    pub fn statement(limit: Duration) -> Self {
        Wait {
            limit,
            setting: BUSY_SETTING.to_string(),
            interrupt: None,
        }
    }

    /// The command line's transaction wait ([`CLI_TRANSACTION_WAIT`]).
    pub fn cli_transaction() -> Self {
        Wait::transaction(CLI_TRANSACTION_WAIT).with_setting(CLI_TRANSACTION_SETTING)
    }

    /// The command line's statement wait ([`CLI_BUSY_TIMEOUT`]).
    pub fn cli_statement() -> Self {
        Wait::statement(CLI_BUSY_TIMEOUT).with_setting(CLI_BUSY_SETTING)
    }

    /// Names the setting quoted in the busy message.
    pub fn with_setting(mut self, setting: impl Into<String>) -> Self {
        self.setting = setting.into();
        self
    }

    /// Adds a check that ends the wait early (see [`Interrupt`]); it runs
    /// at least every [`INTERRUPT_CHECK`] while the writer waits.
    pub fn with_interrupt(mut self, interrupt: Interrupt) -> Wait {
        self.interrupt = Some(interrupt);
        self
    }

    /// The check that may end the wait early, if any.
    pub fn interrupt(&self) -> Option<&Interrupt> {
        self.interrupt.as_ref()
    }

    /// The limit.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// The setting's name.
    pub fn setting(&self) -> &str {
        &self.setting
    }

    /// Converts seconds from a host (PHP, Python, C) into a duration,
    /// refusing negative, infinite and NaN values.
    pub fn seconds(name: &'static str, seconds: f64) -> crate::Result<Duration> {
        if (0.0..1.0e9).contains(&seconds) {
            Ok(Duration::from_secs_f64(seconds))
        } else {
            Err(crate::Error::InvalidArgument {
                name,
                reason: format!("{seconds} is not a number of seconds from 0 up"),
            })
        }
    }
}

impl Default for Wait {
    /// The web request's transaction wait, [`TRANSACTION_WAIT`].
    fn default() -> Self {
        Wait::transaction(TRANSACTION_WAIT)
    }
}

/// How a waiting writer learns that the lock is free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Exponential's driver protocol alone: polls of 1 to 15 ms and a fixed 30 ms yield.
    Poll,
    /// Polling plus the hand-off page in `.writer-queue`: waiters sleep on a
    /// futex, the releaser wakes the oldest one, and a yield ends as soon as
    /// a waiter has taken the lock. Falls back to polling where the page is
    /// unusable (a read-only queue file, a foreign layout version).
    #[default]
    Handoff,
}

/// A deadline measured from the start of a wait, with the wait's interrupt
/// check.
#[derive(Debug, Clone)]
pub(crate) struct Deadline {
    pub(crate) start: Instant,
    pub(crate) end: Instant,
    interrupt: Option<Interrupt>,
    /// When the interrupt check last ran (it runs at most once per
    /// [`CHECK_SPACING`], however fast a loop turns).
    checked: Cell<Option<Instant>>,
}

/// The shortest spacing between two runs of an interrupt check (1 ms): a
/// host's check may take its interpreter lock, which a loop turning every
/// 100 µs should not do each time.
const CHECK_SPACING: Duration = Duration::from_millis(1);

impl Deadline {
    /// A deadline `limit` from now, without an interrupt check.
    pub(crate) fn after(limit: Duration) -> Self {
        let start = Instant::now();
        Deadline {
            start,
            end: start
                .checked_add(limit)
                .unwrap_or(start + Duration::from_secs(1 << 30)),
            interrupt: None,
            checked: Cell::new(None),
        }
    }

    /// The deadline of `wait`: its limit from now, and its interrupt check.
    pub(crate) fn of(wait: &Wait) -> Self {
        Deadline {
            interrupt: wait.interrupt.clone(),
            ..Deadline::after(wait.limit)
        }
    }

    pub(crate) fn left(&self) -> Duration {
        self.end.saturating_duration_since(Instant::now())
    }

    pub(crate) fn passed(&self) -> bool {
        Instant::now() >= self.end
    }

    pub(crate) fn waited(&self) -> Duration {
        self.start.elapsed()
    }

    /// Whether the wait has an interrupt check.
    pub(crate) fn has_interrupt(&self) -> bool {
        self.interrupt.is_some()
    }

    /// Runs the interrupt check, if there is one and it did not run within
    /// the last millisecond: `true` ends the wait.
    pub(crate) fn interrupted(&self) -> bool {
        let Some(interrupt) = self.interrupt.as_ref() else {
            return false;
        };
        let now = Instant::now();
        if self
            .checked
            .get()
            .is_some_and(|at| now.saturating_duration_since(at) < CHECK_SPACING)
        {
            return false;
        }
        self.checked.set(Some(now));
        interrupt.requested()
    }

    /// The longest single sleep of a wait: the time left, and no more than
    /// [`INTERRUPT_CHECK`] when an interrupt check must run between sleeps.
    pub(crate) fn nap(&self, pause: Duration) -> Duration {
        let pause = pause.min(self.left());
        if self.interrupt.is_some() {
            pause.min(INTERRUPT_CHECK)
        } else {
            pause
        }
    }

    /// Sleeps `pause` (at most the time left), running the interrupt check
    /// at least every [`INTERRUPT_CHECK`]. False when the check ended the
    /// sleep.
    pub(crate) fn sleep(&self, pause: Duration) -> bool {
        let until = Instant::now() + pause.min(self.left());
        loop {
            let now = Instant::now();
            if now >= until {
                return true;
            }
            std::thread::sleep(self.nap(until - now));
            if self.interrupted() {
                return false;
            }
        }
    }
}

thread_local! {
    static RNG: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let local = 0u8;
    let addr = &local as *const u8 as u64;
    (nanos ^ (u64::from(std::process::id()) << 32) ^ addr) | 1
}

/// Re-seeds this thread's generator (after `fork()` parent and child would
/// otherwise draw the same pauses).
pub(crate) fn reseed() {
    RNG.with(|r| r.set(seed()));
}

/// A uniformly random duration in `[lo, hi]` (xorshift; no need for quality).
pub(crate) fn random_between(lo: Duration, hi: Duration) -> Duration {
    let span = hi.saturating_sub(lo).as_micros() as u64;
    let x = RNG.with(|r| {
        let mut x = r.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.set(x);
        x
    });
    lo + Duration::from_micros(if span == 0 { 0 } else { x % (span + 1) })
}

/// The pause before the next try, for a writer that has waited `waited`.
pub(crate) fn poll_pause(waited: Duration) -> Duration {
    if waited > PATIENT_AFTER {
        random_between(POLL_MIN, PATIENT_POLL_MAX)
    } else {
        random_between(POLL_MIN, POLL_MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_wait_is_raised_to_one_second() {
        assert_eq!(
            Wait::transaction(Duration::from_millis(200)).limit(),
            Duration::from_secs(1)
        );
        assert_eq!(
            Wait::transaction(Duration::from_secs(25)).limit(),
            TRANSACTION_WAIT
        );
        assert_eq!(
            Wait::statement(Duration::from_millis(200)).limit(),
            Duration::from_millis(200)
        );
    }

    #[test]
    fn pauses_stay_in_range() {
        for _ in 0..1000 {
            let p = poll_pause(Duration::ZERO);
            assert!(p >= POLL_MIN && p <= POLL_MAX, "{p:?}");
            let p = poll_pause(Duration::from_secs(2));
            assert!(p >= POLL_MIN && p <= PATIENT_POLL_MAX, "{p:?}");
        }
    }

    #[test]
    fn pauses_spread_over_their_range() {
        let draws: Vec<Duration> = (0..2000).map(|_| poll_pause(Duration::ZERO)).collect();
        let min = draws.iter().min().copied().unwrap_or_default();
        let max = draws.iter().max().copied().unwrap_or_default();
        let mean = draws.iter().sum::<Duration>() / draws.len() as u32;
        let distinct: std::collections::BTreeSet<_> = draws.iter().collect();
        assert!(min < Duration::from_millis(2), "{min:?}");
        assert!(max > Duration::from_millis(14), "{max:?}");
        assert!(
            mean > Duration::from_micros(6500) && mean < Duration::from_micros(9500),
            "{mean:?}"
        );
        assert!(distinct.len() > 1000, "{} distinct pauses", distinct.len());
    }

    /// Writers that start together must not poll in lockstep: each thread
    /// (and each process, re-seeded after fork) draws its own pauses.
    #[test]
    fn threads_and_reseeds_draw_their_own_pauses() {
        let draw = || -> Vec<Duration> { (0..16).map(|_| poll_pause(Duration::ZERO)).collect() };
        let here = draw();
        let there = std::thread::spawn(draw).join().unwrap_or_default();
        assert_ne!(here, there);
        let before = RNG.with(Cell::get);
        reseed();
        assert_ne!(RNG.with(Cell::get), before);
        assert_ne!(RNG.with(Cell::get), 0);
    }

    #[test]
    fn bad_seconds_are_refused() {
        assert!(Wait::seconds("wait", -1.0).is_err());
        assert!(Wait::seconds("wait", f64::NAN).is_err());
        assert!(Wait::seconds("wait", f64::INFINITY).is_err());
        assert_eq!(
            Wait::seconds("wait", 1.5).ok(),
            Some(Duration::from_millis(1500))
        );
    }
}
