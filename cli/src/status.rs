//! `writerlock status DB`: who holds a database's writer lock and who waits, and whether
//! the file system lets `flock()` exclude at all. The facts come from the core
//! ([`writerlock::status::inspect`], which `python -m writerlock status` reads too, and
//! which says how the hold time is known), after the core's check of the path
//! ([`writerlock::status::check_database`], the same for both); this module words them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;
use writerlock::filesystem::FileSystem;
pub use writerlock::filesystem::FsKind;

use crate::duration::human;
use crate::error::CliError;
use crate::output::secs;

/// The long help of the subcommand.
pub const STATUS_HELP: &str = "\
Shows who holds the writer lock of a SQLite database right now, and how many writers wait \
for it, read from /proc/locks: the holder is the exclusive flock() on <db>.writer-lock, and \
each waiting writer holds a shared flock() on <db>.writer-queue.

For the holder it shows the pid and command line, and how long it has held the lock when \
that is known: the kernel keeps no time for a flock(), so the time comes from the hand-off \
page in <db>.writer-queue, where writers using this crate stamp each acquisition. For a \
holder that does not use the page (another program holding the flock) it says unknown and \
gives the holder process's age as an upper bound.

It also names processes holding SQLite's own write lock outside the queue, says plainly \
when nobody holds the lock or the lock files do not exist yet, and warns when the database \
is on a file system where flock() does not exclude writers on other machines (NFS, SMB/CIFS, \
FUSE, Ceph and other network file systems): the queue is only correct on a local disk.

Locks are per machine: run it on the machine where the writers run. It reads only; it \
never creates the lock files.";

/// Arguments of `writerlock status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The SQLite database file.
    pub db: PathBuf,
    /// Whether to print JSON: the command line's global `--json`.
    #[arg(skip)]
    pub json: bool,
}

/// A lock file and whether it exists.
#[derive(Debug, Clone, Serialize)]
pub struct LockFileStatus {
    /// Its path.
    pub path: String,
    /// Whether it exists.
    pub exists: bool,
}

/// The process holding the writer lock.
#[derive(Debug, Clone, Serialize)]
pub struct HolderStatus {
    /// The pid `/proc/locks` lists (the process that took the lock).
    pub pid: u32,
    /// Whether that process still exists.
    pub alive: bool,
    /// Its command line, from `/proc/PID/cmdline`.
    pub command: Option<String>,
    /// How long it has held the lock, in seconds, when known.
    pub held_for_s: Option<f64>,
    /// Where `held_for_s` comes from (`handoff-page`), or why it is unknown.
    pub held_for_source: String,
    /// How long ago the process started, in seconds: an upper bound on the hold.
    pub process_age_s: Option<f64>,
    /// Processes with the lock file open, when the listed pid no longer exists (the lock
    /// passed to a child over a fork).
    pub descriptor_open_in: Vec<u32>,
}

/// A writer waiting for the turn.
#[derive(Debug, Clone, Serialize)]
pub struct WaiterStatus {
    /// Its pid.
    pub pid: u32,
    /// Its command line, from `/proc/PID/cmdline`.
    pub command: Option<String>,
    /// How long it has waited, in seconds, when the hand-off page has its arrival.
    pub waited_s: Option<f64>,
    /// Its ticket on the hand-off page (arrival order), when it has one.
    pub ticket: Option<u64>,
    /// How long ago the process started, in seconds: an upper bound on its wait when the
    /// page does not have it.
    pub process_age_s: Option<f64>,
}

/// A process, with its command line.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessStatus {
    /// Its pid.
    pub pid: u32,
    /// Its command line, from `/proc/PID/cmdline`.
    pub command: Option<String>,
}

/// The file system the database is on.
#[derive(Debug, Clone, Serialize)]
pub struct FileSystemStatus {
    /// Its name, such as `ext4` or `nfs`.
    pub name: String,
    /// Its `statfs` magic number, in hex.
    pub magic: String,
    /// `local`, `network`, `fuse` or `unknown`.
    #[serde(serialize_with = "kind_name")]
    pub kind: FsKind,
    /// The warning, when flock() may not exclude writers on other machines.
    pub warning: Option<String>,
}

/// Serializes a file system's kind as `local`, `network`, `fuse` or `unknown`.
fn kind_name<S: serde::Serializer>(kind: &FsKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(kind.as_str())
}

/// The status of one database's writer lock.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The database path as given.
    pub database: String,
    /// `<db>.writer-lock`.
    pub lock_file: LockFileStatus,
    /// `<db>.writer-queue`.
    pub queue_file: LockFileStatus,
    /// The holder, if any.
    pub holder: Option<HolderStatus>,
    /// How many writers wait (shared flocks on the queue file).
    pub waiting: usize,
    /// The waiters oldest first, each with its pid, with command and time waited: in arrival order from the
    /// hand-off page where they have a slot there, then those without one (a writer using
    /// Exponential's driver protocol alone), oldest process first.
    pub queue: Vec<WaiterStatus>,
    /// Processes blocked in a blocking `flock()` on the lock file (outside the queue's
    /// protocol, which never blocks).
    pub blocked: Vec<u32>,
    /// Processes holding SQLite's own write lock on the database, its `-wal` or `-shm`,
    /// other than the queue's holder (writers outside the queue), with their command lines.
    pub outside: Vec<ProcessStatus>,
    /// The file system.
    pub filesystem: FileSystemStatus,
}

/// Runs `writerlock status`.
pub fn run(args: &StatusArgs) -> Result<ExitCode, CliError> {
    let status = inspect(&args.db)?;
    if args.json {
        crate::output::print_json(&status)?;
    } else {
        print_status(&status)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn inspect(db: &Path) -> Result<Status, CliError> {
    use writerlock::status::NotADatabase;
    writerlock::status::check_database(db).map_err(|e| match e {
        NotADatabase::InMemory => CliError::InvalidArgument {
            name: "DB",
            reason: e.to_string(),
        },
        NotADatabase::Missing { path } => CliError::NoDatabase { path },
        NotADatabase::NotSqlite { path, reason } => CliError::NotSqlite { path, reason },
        NotADatabase::Unreadable { path, source } => CliError::Io {
            what: "could not read",
            path,
            source,
        },
    })?;
    let found = writerlock::status::inspect(db).map_err(|e| CliError::Io {
        what: "could not read the locks of",
        path: e.path,
        source: e.source,
    })?;
    let holder = found.holder.map(|h| HolderStatus {
        pid: h.pid,
        alive: h.alive,
        command: h.command,
        held_for_s: h.held_for.map(secs),
        held_for_source: h.held_for_source,
        process_age_s: h.process_age.map(secs),
        descriptor_open_in: h.descriptor_open_in,
    });
    let queue: Vec<WaiterStatus> = found
        .queue
        .into_iter()
        .map(|w| WaiterStatus {
            pid: w.pid,
            command: w.command,
            waited_s: w.waited.map(secs),
            ticket: w.ticket,
            process_age_s: w.process_age.map(secs),
        })
        .collect();
    Ok(Status {
        database: db.display().to_string(),
        lock_file: LockFileStatus {
            path: found.lock_file.display().to_string(),
            exists: found.lock_exists,
        },
        queue_file: LockFileStatus {
            path: found.queue_file.display().to_string(),
            exists: found.queue_exists,
        },
        holder,
        waiting: found.waiting,
        queue,
        blocked: found.blocked,
        outside: found
            .outside
            .into_iter()
            .map(|p| ProcessStatus {
                pid: p.pid,
                command: p.command,
            })
            .collect(),
        filesystem: filesystem_status(&found.filesystem),
    })
}

/// Classifies the file system the database (or its directory) is on.
pub fn filesystem(db: &Path) -> FileSystemStatus {
    filesystem_status(&FileSystem::of_database(db))
}

fn filesystem_status(fs: &FileSystem) -> FileSystemStatus {
    FileSystemStatus {
        name: fs.name.to_string(),
        magic: fs.magic_hex(),
        kind: fs.kind,
        warning: fs.warning(),
    }
}

fn print_status(s: &Status) -> Result<(), CliError> {
    let mut out = String::new();
    let line = |out: &mut String, label: &str, text: &str| {
        out.push_str(&format!("{label:<12} {text}\n"));
    };
    line(&mut out, "database", &s.database);
    line(
        &mut out,
        "file system",
        &format!(
            "{}{}",
            s.filesystem.name,
            if s.filesystem.magic.is_empty() {
                String::new()
            } else {
                format!(" ({})", s.filesystem.magic)
            }
        ),
    );
    if !s.lock_file.exists {
        line(
            &mut out,
            "writer lock",
            &format!(
                "no writer has used the queue on this database yet: {} does not exist",
                s.lock_file.path
            ),
        );
    } else {
        match &s.holder {
            None => line(&mut out, "writer lock", "free: nobody holds it"),
            Some(h) => {
                let held = match h.held_for_s {
                    Some(t) => format!(
                        "held for {} (since its acquisition stamped on the hand-off page)",
                        human(Duration::from_secs_f64(t))
                    ),
                    None => "held for an unknown time".to_string(),
                };
                line(
                    &mut out,
                    "writer lock",
                    &format!("held by pid {}, {held}", h.pid),
                );
                match &h.command {
                    Some(cmd) => line(&mut out, "  command", cmd),
                    None if !h.alive => line(
                        &mut out,
                        "  command",
                        &format!(
                            "the process that took the lock has exited; the lock file is open \
                             in {}",
                            if h.descriptor_open_in.is_empty() {
                                "no process this user can see".to_string()
                            } else {
                                pid_list(&h.descriptor_open_in)
                            }
                        ),
                    ),
                    None => {}
                }
                if h.held_for_s.is_none() {
                    let bound = h
                        .process_age_s
                        .map(|a| {
                            format!(
                                "; the process started {} ago, so at most that",
                                human(Duration::from_secs_f64(a))
                            )
                        })
                        .unwrap_or_default();
                    line(
                        &mut out,
                        "  held for",
                        &format!("{}{bound}", h.held_for_source),
                    );
                }
            }
        }
    }
    let waiting = match s.waiting {
        0 if !s.queue_file.exists => format!("nobody ({} does not exist)", s.queue_file.path),
        0 => "nobody".to_string(),
        1 => "1 writer, oldest first:".to_string(),
        n => format!("{n} writers, oldest first:"),
    };
    line(&mut out, "waiting", &waiting);
    for w in &s.queue {
        let waited = match (w.waited_s, w.process_age_s) {
            (Some(t), _) => format!("waiting {}", human(Duration::from_secs_f64(t))),
            (None, Some(age)) => format!(
                "waiting at most {} (its age; not on the hand-off page)",
                human(Duration::from_secs_f64(age))
            ),
            (None, None) => "waiting for an unknown time".to_string(),
        };
        line(
            &mut out,
            &format!("  pid {}", w.pid),
            &format!(
                "{waited}  {}",
                w.command.as_deref().unwrap_or("(command not visible)")
            ),
        );
    }
    if !s.blocked.is_empty() {
        line(
            &mut out,
            "blocked",
            &format!(
                "{} in a blocking flock() on the lock file, outside the queue ({})",
                s.blocked.len(),
                pid_list(&s.blocked)
            ),
        );
    }
    if !s.outside.is_empty() {
        line(
            &mut out,
            "outside",
            &format!(
                "SQLite's write lock is held outside the queue by {}",
                pid_list(&s.outside.iter().map(|p| p.pid).collect::<Vec<_>>())
            ),
        );
        for p in &s.outside {
            line(
                &mut out,
                &format!("  pid {}", p.pid),
                p.command.as_deref().unwrap_or("(command not visible)"),
            );
        }
    }
    if let Some(w) = &s.filesystem.warning {
        line(&mut out, "WARNING", w);
    }
    crate::output::print_line(out.trim_end())
}

fn pid_list(pids: &[u32]) -> String {
    let list: Vec<String> = pids.iter().map(|p| p.to_string()).collect();
    format!("pid {}", list.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use writerlock::filesystem::classify;

    #[test]
    fn network_file_systems_warn() {
        for magic in [0x6969, 0x517B, 0xFF53_4D42, 0xFE53_4D42, 0x00C3_6400] {
            assert_eq!(classify(magic).1, FsKind::Network, "{magic:x}");
        }
        assert_eq!(classify(0x6573_5546).1, FsKind::Fuse);
        assert_eq!(classify(0xEF53).1, FsKind::Local);
        assert_eq!(classify(0x1234_5678).1, FsKind::Unknown);
    }

    #[test]
    fn warnings_follow_the_kind() {
        let fs = filesystem(Path::new("/proc/self/status"));
        assert_eq!(fs.name, "unknown");
        assert!(fs.warning.is_some());
    }
}
