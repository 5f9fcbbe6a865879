<?php
/**
 * IDE stubs for the writerlock PHP extension (module "writerlock",
 * extension=writerlock.so). Never include this file at run time: the classes
 * come from the extension.
 *
 * Generated from the extension by php-ext/stubs/generate.php; do not edit
 * (php-ext/tests/run.sh fails when this file and the extension differ).
 */

namespace WriterLock {

    /** Base class of every exception the extension throws. */
    class Exception extends \RuntimeException
    {
    }

    /**
     * The wait ran out before the writer got its turn; nothing was written.
     *
     * The message is one of the two fixed texts, for example:
     * "database is busy: the transaction could not start within 25 s (waited 25.0 s,
     * the waitSeconds argument of WriterLock\Queue::begin()), another write held the lock
     * all that time; nothing was written". getCode() is 5 (SQLITE_BUSY).
     */
    class BusyException extends Exception
    {
        /** Seconds the writer waited (wall clock). */
        public function waited(): float {}

        /** The limit it was given, in seconds. */
        public function limit(): float {}

        /**
         * The setting named in the message: the $setting argument of the call, by default
         * the call's own argument ("the waitSeconds argument of WriterLock\Queue::begin()"),
         * or "max_execution_time" when that cut the wait short.
         */
        public function setting(): string {}

        /** The process that held the writer lock when the wait gave up, where /proc/locks shows one. */
        public function holderPid(): ?int {}
    }

    /**
     * One SQLite database's write queue: writers from every process take turns
     * (an exclusive flock() on "<database>.writer-lock") before BEGIN IMMEDIATE,
     * instead of failing with "database is locked". It drives a \SQLite3 or a PDO
     * (sqlite driver) connection through the connection's own sqlite3 handle: the
     * queue's statements never pass through exec() or query(), and a transaction
     * the script ends itself (its own COMMIT) gives the turn back at once.
     *
     * The handle behind a Queue is kept per database path for the life of the
     * process: a long-lived worker (PHP-FPM, a CLI job loop) opens the lock
     * files once, and a forked child (pcntl_fork()) never touches its
     * parent's turn.
     */
    final class Queue
    {
        /**
         * Takes the turn within $waitSeconds (below 1 raised to 1), sets the
         * connection's busy timeout to the time left, runs BEGIN IMMEDIATE.
         *
         * @throws BusyException the wait ran out; nothing was written
         * @throws StartException the transaction could not start; nothing was written
         * @throws Exception the connection is already inside a transaction, or this queue holds the turn
         */
        public function begin(\SQLite3|\PDO $db, float $waitSeconds = 25.0, string $setting = 'the waitSeconds argument of WriterLock\\Queue::begin()'): void {}

        /**
         * Begins (as begin()), runs $fn($db), commits, and returns what $fn returned.
         * Any throwable from $fn, or a COMMIT SQLite refuses, rolls the transaction back
         * and gives the turn back; the throwable is rethrown. When $fn ends the transaction
         * itself (commit(), or a COMMIT of its own), nothing more is done.
         *
         * @template T
         * @param callable(\SQLite3|\PDO): T $fn
         * @return T
         * @throws BusyException the wait ran out; nothing was written, $fn did not run
         * @throws StartException the transaction could not start; $fn did not run
         * @throws Exception the COMMIT failed; the transaction was rolled back
         */
        public function transaction(\SQLite3|\PDO $db, callable $fn, float $waitSeconds = 25.0, string $setting = 'the waitSeconds argument of WriterLock\\Queue::transaction()'): mixed {}

        /**
         * The queue of the database file an open \SQLite3 or PDO (sqlite) connection uses
         * (its main database, as PRAGMA database_list names it).
         *
         * @throws Exception for an in-memory or temporary database
         * @throws \ValueError for a PDO of another driver than sqlite
         */
        public static function forConnection(\SQLite3|\PDO $db): \WriterLock\Queue {}

        /**
         * Commits and gives the turn back.
         *
         * @return bool false when SQLite refused the COMMIT: the transaction and the turn stay
         * @throws Exception no queued transaction, or the COMMIT failed and SQLite ended the transaction
         */
        public function commit(\SQLite3|\PDO $db): bool {}

        /**
         * Rolls back and gives the turn back.
         *
         * @return bool false when SQLite refused the ROLLBACK: the transaction and the turn stay
         * @throws Exception no queued transaction
         */
        public function rollback(\SQLite3|\PDO $db): bool {}

        /**
         * Runs one write statement outside a transaction, in turn, within
         * $waitSeconds (default 5). Reads, and statements inside an open transaction, run at once.
         *
         * @throws BusyException the wait ran out; the statement was not run
         * @throws Exception SQLite reported a failure
         */
        public function exec(\SQLite3|\PDO $db, string $sql, float $waitSeconds = 5.0, string $setting = 'the waitSeconds argument of WriterLock\\Queue::exec()'): void {}

        /**
         * Takes the writer turn without starting a transaction, within $waitSeconds
         * (below 1 s raised to 1 s), for code that runs its own BEGIN IMMEDIATE in turn.
         * exec() through this queue runs at once while it holds the turn.
         *
         * @return float the seconds it waited
         * @throws BusyException the wait ran out
         * @throws Exception this queue already holds the turn
         */
        public function acquire(float $waitSeconds = 25.0, string $setting = 'the waitSeconds argument of WriterLock\\Queue::acquire()'): float {}

        /**
         * Gives back the turn acquire() took.
         *
         * @throws Exception this queue holds no turn, or holds it for a transaction (end that with commit() or rollback())
         */
        public function release(): void {}

        /** Whether this queue holds the writer turn in this process. */
        public function holding(): bool {}

        /** Seconds the last begin(), acquire() or queued exec() waited for its turn. */
        public function lastWait(): float {}

        /**
         * @param string $databasePath the path given to new \SQLite3() or in the PDO DSN, resolved
         *        against the current directory now; ":memory:" needs no queue
         * @throws Exception when the database's directory does not exist
         */
        public function __construct(string $databasePath) {}
    }

    /**
     * The transaction could not start: "the transaction could not start: <SQLite's message>;
     * nothing was written". getCode() is SQLite's result code.
     */
    class StartException extends Exception
    {
    }
}
