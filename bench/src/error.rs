//! What can stop a benchmark run.

/// An error that stops a scenario (a worker that failed to start, a
/// database that could not be set up). Failed transactions are not errors:
/// they are counted and reported.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A SQLite call of the harness itself failed.
    #[error("{context}: {source}")]
    Sqlite {
        /// What the harness was doing.
        context: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// A system call or file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What the harness was doing.
        context: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A worker process broke the ready/go/result protocol or exited badly.
    #[error("worker {id}: {message}")]
    Worker {
        /// The worker's index in its run.
        id: usize,
        /// What went wrong.
        message: String,
    },
    /// A worker's configuration could not be read.
    #[error("bad worker configuration: {0}")]
    Config(String),
    /// A Postgres call of the harness failed.
    #[error("{context}: {source}")]
    Pg {
        /// What the harness was doing.
        context: String,
        /// The driver's error.
        source: writerlock::pg::Error,
    },
}

impl BenchError {
    /// Wraps an I/O error with what the harness was doing.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> BenchError {
        BenchError::Io {
            context: context.into(),
            source,
        }
    }

    /// Wraps a SQLite error with what the harness was doing.
    pub fn sqlite(context: impl Into<String>, source: rusqlite::Error) -> BenchError {
        BenchError::Sqlite {
            context: context.into(),
            source,
        }
    }

    /// Wraps a Postgres error with what the harness was doing.
    pub fn pg(context: impl Into<String>, source: writerlock::pg::Error) -> BenchError {
        BenchError::Pg {
            context: context.into(),
            source,
        }
    }
}

/// The harness's result type.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;
