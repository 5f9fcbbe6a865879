--TEST--
writers exclude each other through the queue's lock file, not only through SQLite's lock
--EXTENSIONS--
pdo_sqlite
sqlite3
pcntl
posix
writerlock
--FILE--
<?php
require __DIR__ . '/exclusion_test.php';
?>
--EXPECTF--
ok - begin(): another process cannot flock() the writer lock until commit(), nor until rollback() (%f s)
ok - PDO: another process cannot flock() the writer lock from begin() to commit(), nor to rollback() (%f s)
ok - transaction(): the writer lock is held while the function runs, free after it returns or throws (%f s)
ok - Exponential's queued driver: the writer lock is held from begin() to commit(), and to rollback() (%f s)
ok - begin() waits for a holder outside any SQLite transaction: busy after its wait, exact message, SQLite free all along (%f s)
ok - begin() gets the turn when a holder outside SQLite lets go during its wait, not before (%f s)
ok - Exponential's queued driver waits for a holder outside SQLite and fails the eZ way after SQLiteCLITransactionWait (%f s)
ok - acquire() and release(): another process cannot flock() the writer lock in between, no transaction anywhere; begin(), commit() and a second acquire() refuse meanwhile (%f s)
ok - acquire() waits for a holder outside SQLite: busy after its wait, exact message (%f s)
ok - turns taken with acquire() by 4 processes at once never overlap (%f s)
