--TEST--
pcntl_fork(): children never touch the parent's turn
--EXTENSIONS--
sqlite3
pcntl
posix
writerlock
--FILE--
<?php
require __DIR__ . '/fork_test.php';
?>
--EXPECTF--
ok - children of a worker that holds the turn cannot free it, and see it held (%f s)
ok - a worker serves jobs with one queue; each job's forked children take turns of their own (%f s)
ok - a child killed while holding its own turn leaves the queue free (%f s)
ok - children forked while the worker holds the turn, exiting normally, leave it held (%f s)
