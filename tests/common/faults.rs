//! Helpers the fault tests share: a writer that holds the turn, the time a
//! new writer takes to be granted a free lock, and a deterministic
//! generator of arbitrary bytes.

use std::path::Path;
use std::time::{Duration, Instant};

use writerlock::{Strategy, WriterQueue};

use super::{fork, open, wait_secs, Pipe};

/// Forks a writer that takes the turn with `strategy` and holds it until
/// killed; returns once it holds the turn.
pub fn holder(db: &Path, strategy: Strategy) -> libc::pid_t {
    let pipe = Pipe::new();
    let pid = fork(|| {
        let queue = WriterQueue::with_strategy(db, strategy);
        let conn = open(db);
        if queue.begin(&conn, &wait_secs(5.0)).is_err() {
            return 1;
        }
        pipe.send(1);
        std::thread::sleep(Duration::from_secs(60));
        2
    });
    assert_eq!(
        pipe.recv(Duration::from_secs(10)),
        Some(1),
        "the holder did not start"
    );
    pid
}

/// How long a new writer takes to be granted the free lock, and begin.
pub fn grant(db: &Path, conn: &rusqlite::Connection) -> Duration {
    let queue = WriterQueue::new(db);
    let started = Instant::now();
    queue
        .begin(conn, &wait_secs(3.0))
        .unwrap_or_else(|e| panic!("a writer failed on a free lock: {e}"));
    let took = started.elapsed();
    queue.rollback(conn).expect("rollback");
    took
}

/// A deterministic generator for the arbitrary pages (xorshift).
pub struct Bytes(pub u64);

impl Bytes {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn fill(&mut self, page: &mut [u8]) {
        for chunk in page.chunks_mut(8) {
            let word = self.next().to_ne_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}
