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
ok - a COMMIT SQLite refuses is logged, rolled back, and frees the turn (%f s)
ok - close() inside a transaction gives the turn back (%f s)
ok - with Transactions=disabled every write is a queued statement (%f s)
ok - without the extension: said once in warning.log, BEGIN IMMEDIATE with the busy timeout (%f s)
