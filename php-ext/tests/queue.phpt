--TEST--
WriterLock\Queue on one database: begin, commit, rollback, exec, no PHP warning
--EXTENSIONS--
sqlite3
pcntl
posix
writerlock
--FILE--
<?php
require __DIR__ . '/queue_test.php';
?>
--EXPECTF--
ok - begin, write, commit: committed, turn given back (%f s)
ok - begin sets the busy timeout to the time left (%f s)
ok - rollback discards the transaction and gives the turn back (%f s)
ok - commit() returns false when SQLite refuses: transaction and turn stay (%f s)
ok - after a COMMIT SQLite refuses, the writer lock stays held until rollback() (%f s)
ok - exec: a write outside a transaction is queued and committed (%f s)
ok - exec: reads run at once while another process holds the turn (%f s)
ok - exec inside the queue's own transaction runs at once (%f s)
ok - failing statements raise WriterLock\Exception with SQLite's message, no PHP warning (%f s)
ok - warnings stay silent with error_reporting(E_ALL) and no handler too (%f s)
ok - a connection with SQLite3 exceptions enabled works the same and keeps its mode (%f s)
ok - a subclass of SQLite3 overriding exec() does not see the queue's own statements (%f s)
ok - one process: a second begin fails at once instead of waiting for itself (%f s)
ok - a transaction the script ended itself: the next begin() works and ends that turn (%f s)
ok - a queue object freed while holding gives the turn back (%f s)
ok - lastWait() reports the wait for a turn another process held (%f s)
