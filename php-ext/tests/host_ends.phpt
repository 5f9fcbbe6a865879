--TEST--
a transaction the script ends itself gives the writer turn back at once; the queue's own statements never pass through a subclass's exec()
--EXTENSIONS--
pdo_sqlite
posix
sqlite3
writerlock
--FILE--
<?php
require __DIR__ . '/host_ends_test.php';
?>
--EXPECTF--
ok - after begin(), SQLite3::exec('COMMIT') gives the writer turn back at once to another process; the next begin() works (%f s)
ok - after begin(), SQLite3::exec('ROLLBACK') gives the writer turn back at once to another process; the next begin() works (%f s)
ok - after begin(), SQLite3::exec() of a script that ends with COMMIT gives the writer turn back at once to another process; the next begin() works (%f s)
ok - after begin(), PDO::exec('COMMIT') gives the writer turn back at once to another process; the next begin() works (%f s)
ok - after begin(), PDO::exec('ROLLBACK') gives the writer turn back at once to another process; the next begin() works (%f s)
ok - after begin(), a COMMIT inside transaction()'s function gives the writer turn back at once to another process; the next begin() works (%f s)
ok - a COMMIT of the script's own that SQLite refuses keeps the writer turn while the transaction stays open; the COMMIT that then succeeds gives it back (%f s)
ok - a SQLite3 or PDO subclass overriding exec(), query() and the rest sees none of the queue's own statements, only the one queued through exec() (%f s)
ok - the hooks last only for the queue's own transaction: a later COMMIT of the script ends no turn taken with acquire(), after commit() or after a Queue object freed inside its transaction (%f s)
