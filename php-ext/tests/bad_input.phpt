--TEST--
bad input: missing directories, closed connections, wrong arguments, scripts that end mid-transaction
--EXTENSIONS--
sqlite3
pcntl
posix
writerlock
--FILE--
<?php
require __DIR__ . '/bad_input_test.php';
?>
--EXPECTF--
ok - a path in a missing directory: WriterLock\Exception naming the lock file (%f s)
ok - a relative path is taken from the current directory (%f s)
ok - a closed SQLite3 object: begin() throws StartException, exec() and commit() WriterLock\Exception (%f s)
ok - a connection closed inside a queued transaction: commit() throws, the turn is back (%f s)
ok - commit() and rollback() without a transaction: clear exception, no leaked turn (%f s)
ok - a connection already inside its own transaction: refused at once (%f s)
ok - commit() with another connection than begin(): refused, transaction and turn stay (%f s)
ok - arguments of the wrong type or value: TypeError and ValueError (%f s)
ok - a script that ends inside a queued transaction (exit) leaves no turn and no row (%f s)
ok - a script that ends inside a queued transaction (fatal) leaves no turn and no row (%f s)
ok - a script that ends inside a queued transaction (exception) leaves no turn and no row (%f s)
ok - a script that ends inside a queued transaction (kill) leaves no turn and no row (%f s)
