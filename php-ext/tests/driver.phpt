--TEST--
eZSQLite3QueuedDB on stand-ins of Exponential's database classes
--EXTENSIONS--
sqlite3
pcntl
posix
writerlock
--FILE--
<?php
require __DIR__ . '/driver_test.php';
?>
--EXPECTF--
ok - a transaction goes through the queue: held while open, committed, turn given back (%f s)
ok - the waits: settings, defaults, CLI values on the command line, below 1 raised to 1 (%f s)
ok - a transaction that times out: exact text in error.log, eZDBException, nothing written, no turn held (%f s)
ok - with eZ's standard error handling the timed-out start stops the script with the error page (%f s)
ok - a single statement outside a transaction is queued; its timeout is logged and the query fails (%f s)
ok - a failing statement inside a transaction rolls it back and gives the turn back (%f s)
ok - a COMMIT SQLite refuses fails the transaction the eZ way: logged, rolled back, turn freed, eZDBException (%f s)
ok - connecting while another connection writes: PRAGMA journal_mode = wal waits within the busy timeout, nothing logged (%f s)
ok - a forked child that closes the transaction it inherited logs nothing; the parent keeps its turn (%f s)
ok - the lock file is fixed at connect time: a chdir() before the first write changes nothing (%f s)
ok - a failed single write keeps SQLite's own text in errorMessage() (%f s)
ok - a transaction wait not below max_execution_time is logged once per process, naming the setting to lower (%f s)
ok - the extension folder dropped into extension/ and activated: autoload finds the class, its settings set the alias (%f s)
ok - close() inside a transaction gives the turn back (%f s)
ok - with Transactions=disabled every write is a queued statement (%f s)
ok - without the extension: said once in error.log (a default install logs errors only), BEGIN IMMEDIATE with the busy timeout (%f s)
