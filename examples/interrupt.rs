//! Ending a wait for the writer turn early: another thread (or a signal
//! handler) sets a flag, and the waiting writer gives up within 10 ms with
//! `Error::Interrupted`, the turn not taken and nothing written.
//!
//! Run it with `cargo run --example interrupt [DATABASE]` (default `site.db`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use writerlock::{Error, Interrupt, Wait, WriterQueue};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "site.db".into());
    let conn = rusqlite::Connection::open(&path)?;
    let queue = WriterQueue::new(&path);

    // Another writer holds the turn: a second handle, in another thread, excludes this
    // one like another process would.
    let (held, until_done) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
    let holder_path = path.clone();
    let holder = std::thread::spawn(
        move || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
            let conn = rusqlite::Connection::open(&holder_path)?;
            let holder = WriterQueue::new(&holder_path);
            holder.begin(&conn, &Wait::transaction(Duration::from_secs(25)))?;
            let _ = held.0.send(());
            let _ = until_done.1.recv();
            holder.rollback(&conn)?;
            Ok(())
        },
    );
    held.1.recv()?;

    let stop = Arc::new(AtomicBool::new(false)); // set from a signal handler or another thread
    let flag = stop.clone();
    let wait = Wait::transaction(Duration::from_secs(25))
        .with_interrupt(Interrupt::new(move || flag.load(Ordering::Relaxed)));
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed); // a person pressed Ctrl-C
    });
    match queue.begin(&conn, &wait) {
        Err(err @ Error::Interrupted { .. }) => println!("{err}"), // the turn was not taken
        Ok(()) => return Err("the turn was granted while another writer held it".into()),
        Err(err) => return Err(err.into()),
    }
    drop(until_done.0);
    let ended = holder.join().map_err(|_| "the holder thread panicked")?;
    ended.map_err(|err| err as Box<dyn std::error::Error>)?;
    Ok(())
}
